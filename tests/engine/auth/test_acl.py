"""Access control expressions (DESIGN, "Vocabulary: ACE" and "Stream policies"): the grammar
of engine.auth.acl, its precedence (! over & over |), evaluation for a Principal and the stream's
creator, the normal form printed by str(), and errors that name the policy and the column."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import errors, policies
from engine.auth import acl
from engine.auth.acl import And, Creator, Group, Not, Or, Public, User
from engine.auth.principal import Principal

ALICE = Principal("alice", ("ops", "dev"))
BOB = Principal("bob", ("dev",))
CAROL = Principal("carol")
MALLORY = Principal("mallory", ("ops",))


# --- the parsed tree ---------------------------------------------------------------------

TREES = [
    ("p", Public()),
    ("!p", Not(Public())),
    ("u:alice", User("alice")),
    ("g:ops", Group("ops")),
    ("u:<creator>", Creator()),
    ("u:a | u:b", Or((User("a"), User("b")))),
    ("u:a & u:b", And((User("a"), User("b")))),
    # & binds tighter than |, on either side
    ("u:a | u:b & g:c", Or((User("a"), And((User("b"), Group("c")))))),
    ("u:a & u:b | g:c", Or((And((User("a"), User("b"))), Group("c")))),
    ("u:a & u:b | g:c & g:d", Or((And((User("a"), User("b"))), And((Group("c"), Group("d")))))),
    # ! binds tighter than &
    ("!u:a & u:b", And((Not(User("a")), User("b")))),
    ("!u:a | u:b", Or((Not(User("a")), User("b")))),
    ("u:a & !u:b", And((User("a"), Not(User("b"))))),
    ("!(u:a & u:b)", Not(And((User("a"), User("b"))))),
    ("!!p", Not(Not(Public()))),
    ("! ! ! p", Not(Not(Not(Public())))),
    # parentheses override precedence and are not kept
    ("(u:a | u:b) & g:c", And((Or((User("a"), User("b"))), Group("c")))),
    ("g:c & (u:a | u:b)", And((Group("c"), Or((User("a"), User("b")))))),
    ("((u:a))", User("a")),
    ("(((p)))", Public()),
    (
        "((u:a | (g:b & (u:c | !g:d))))",
        Or((User("a"), And((Group("b"), Or((User("c"), Not(Group("d")))))))),
    ),
    # & and | are n-ary and flat, whatever the grouping
    ("u:a | u:b | u:c", Or((User("a"), User("b"), User("c")))),
    ("(u:a | u:b) | u:c", Or((User("a"), User("b"), User("c")))),
    ("u:a | (u:b | u:c)", Or((User("a"), User("b"), User("c")))),
    ("u:a & (u:b & (u:c & u:d))", And((User("a"), User("b"), User("c"), User("d")))),
    # whitespace anywhere between tokens, none needed
    ("u:a|u:b&g:c", Or((User("a"), And((User("b"), Group("c")))))),
    ("  \t u:a \n|\r\n(\fg:b\v)  ", Or((User("a"), Group("b")))),
    ("!(p)", Not(Public())),
    ("!(u:<creator>)|g:admins", Or((Not(Creator()), Group("admins")))),
    # the characters of a name
    ("u:alice@EXAMPLE.COM", User("alice@EXAMPLE.COM")),
    ("u:host$", User("host$")),
    ("g:data-eng_2.x", Group("data-eng_2.x")),
    ("u:1000", User("1000")),
    ("u:p", User("p")),
    ("g:u", Group("u")),
    ("u:Alice", User("Alice")),
]


@pytest.mark.parametrize(("text", "tree"), TREES)
def test_parse_builds_the_tree(text, tree):
    assert acl.parse(text) == tree


NORMAL_FORMS = [
    ("p", "p"),
    ("  p  ", "p"),
    ("!  p", "!p"),
    ("u:a|u:b&g:c", "u:a | u:b & g:c"),
    ("(u:a|u:b)&g:c", "(u:a | u:b) & g:c"),
    ("(u:a & u:b) | g:c", "u:a & u:b | g:c"),
    ("((u:a))", "u:a"),
    ("!(u:a)", "!u:a"),
    ("!(!u:a)", "!!u:a"),
    ("!(u:a & g:b)", "!(u:a & g:b)"),
    ("!(u:a | g:b) & p", "!(u:a | g:b) & p"),
    ("(u:a | u:b) | (u:c | u:d)", "u:a | u:b | u:c | u:d"),
    ("u:a & (u:b | (u:c & u:d))", "u:a & (u:b | u:c & u:d)"),
    ("u:<creator>|g:ops", "u:<creator> | g:ops"),
]


@pytest.mark.parametrize(("text", "normal"), NORMAL_FORMS)
def test_str_is_the_normal_form_and_round_trips(text, normal):
    ace = acl.parse(text)
    assert str(ace) == normal
    assert acl.parse(str(ace)) == ace
    assert str(acl.parse(normal)) == normal


@pytest.mark.parametrize(("text", "tree"), TREES)
def test_every_tree_round_trips_through_str(text, tree):
    assert acl.parse(str(tree)) == tree


def test_aces_are_immutable_and_hashable():
    ace = acl.parse("u:a | g:b & !p")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ace.operands = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        ace.operands[0].name = "mallory"
    assert isinstance(ace.operands, tuple)
    assert len({ace, acl.parse("u:a|(g:b&!p)"), acl.parse("u:a")}) == 2
    assert all(isinstance(node, acl.Ace) for node in (ace, *ace.operands))


def test_nodes_refuse_what_would_not_print_back():
    with pytest.raises(errors.InvalidArgument):
        User("a b")
    with pytest.raises(errors.InvalidArgument):
        User("")
    with pytest.raises(errors.InvalidArgument):
        User("<creator>")  # the placeholder is Creator()
    with pytest.raises(errors.InvalidArgument):
        Group("ops|dev")
    with pytest.raises(errors.InvalidArgument):
        And((User("a"),))
    with pytest.raises(errors.InvalidArgument):
        Or((User("a"), "u:b"))
    with pytest.raises(errors.InvalidArgument):
        Not("p")
    assert Or([User("a"), User("b")]).operands == (User("a"), User("b"))


# --- evaluation --------------------------------------------------------------------------

EVALUATIONS = [
    # (expression, principal, creator, allowed)
    ("p", CAROL, None, True),
    ("!p", ALICE, "alice", False),
    ("u:alice", ALICE, None, True),
    ("u:alice", BOB, None, False),
    ("u:Alice", ALICE, None, False),  # names are case-sensitive
    ("g:ops", ALICE, None, True),
    ("g:ops", BOB, None, False),
    ("g:ops", CAROL, None, False),
    ("g:alice", ALICE, None, False),  # a user name is not a group
    ("u:ops", MALLORY, None, False),  # nor a group name a user
    ("u:<creator>", ALICE, "alice", True),
    ("u:<creator>", BOB, "alice", False),
    ("u:<creator>", ALICE, None, False),  # unknown creator: nobody
    ("!u:<creator>", ALICE, None, True),
    ("u:alice | u:bob", BOB, None, True),
    ("u:alice | u:bob", CAROL, None, False),
    ("u:alice & g:ops", ALICE, None, True),
    ("u:alice & g:ops", MALLORY, None, False),
    ("g:ops & !u:mallory", ALICE, None, True),
    ("g:ops & !u:mallory", MALLORY, None, False),
    # precedence: u:carol | (u:bob & g:ops), so carol is in without ops
    ("u:carol | u:bob & g:ops", CAROL, None, True),
    ("(u:carol | u:bob) & g:ops", CAROL, None, False),
    ("u:carol | u:bob & g:ops", BOB, None, False),
    # ! applies to the next operand only
    ("!u:bob & g:dev", ALICE, None, True),
    ("!u:bob & g:dev", BOB, None, False),
    ("!(u:bob & g:dev)", CAROL, None, True),
    ("!(u:bob | g:ops)", ALICE, None, False),
    ("!!g:ops", ALICE, None, True),
    ("p & !g:ops", BOB, None, True),
    ("p & !g:ops", MALLORY, None, False),
    ("u:<creator> | g:admins", BOB, "alice", False),
    ("u:<creator> | g:dev", BOB, "alice", True),
    ("((u:x | (g:dev & !(u:bob))))", ALICE, None, True),
    ("((u:x | (g:dev & !(u:bob))))", BOB, None, False),
]


@pytest.mark.parametrize(("text", "principal", "creator", "allowed"), EVALUATIONS)
def test_allows(text, principal, creator, allowed):
    ace = acl.parse(text)
    assert ace.allows(principal, creator) is allowed
    assert acl.allows(ace, principal, creator) is allowed
    assert acl.check(text, principal, creator) is allowed
    assert acl.check(ace, principal, creator) is allowed


def test_check_parses_once_through_the_cache():
    acl.cached_parse.cache_clear()
    text = "u:<creator> | g:cache-test"
    assert acl.check(text, ALICE, "alice")
    assert not acl.check(text, BOB, "alice")
    assert acl.check(text, Principal("zed", ("cache-test",)), "alice")
    info = acl.cached_parse.cache_info()
    assert (info.misses, info.hits) == (1, 2)
    assert acl.cached_parse(text) is acl.cached_parse(text)


def test_check_refuses_a_bad_expression_every_time():
    for _ in range(2):
        with pytest.raises(errors.InvalidPolicy, match=r"^consume_perm: .* column 4 "):
            acl.check("u:a)", ALICE, "alice", policy="consume_perm")
    with pytest.raises(errors.InvalidPolicy, match="must be a string"):
        acl.check(["u:a"], ALICE, "alice")


def test_every_ace_policy_default_is_the_creator():
    for name in policies.ACE_POLICIES:
        ace = acl.parse(policies.DEFAULTS[name], policy=name)
        assert ace == Creator()
        assert ace.allows(ALICE, "alice") and not ace.allows(BOB, "alice")


def test_policy_validation_uses_the_grammar():
    checked = policies.validate({"consume_perm": "g:ops|u:<creator>"})
    assert checked["consume_perm"] == "g:ops|u:<creator>"
    with pytest.raises(errors.InvalidPolicy, match=r"^produce_perm: unexpected '\)' at column 10"):
        policies.validate({"produce_perm": "u:alice |)"})


# --- errors ------------------------------------------------------------------------------

ERRORS = [
    # (expression, column, words the message must hold)
    # empty
    ("", 1, "empty expression"),
    ("   ", 1, "empty expression"),
    ("\n", 1, "empty expression"),
    # unknown term prefix or term
    ("x:alice", 1, "unknown term prefix 'x:'"),
    ("user:alice", 1, "unknown term prefix 'user:'"),
    ("u:a | group:ops", 7, "unknown term prefix 'group:'"),
    ("p:alice", 1, "'p' (public, everyone) takes no name"),
    ("U:alice", 1, "prefixes are lower case"),
    ("G:ops", 1, "prefixes are lower case"),
    ("alice", 1, "did you mean 'u:alice'?"),
    ("u:a | pub", 7, "unknown term 'pub'"),
    ("P", 1, "write 'p' (lower case)"),
    ("u:a & public", 7, "unknown term 'public'"),
    # missing operand
    ("u:a |", 6, "unexpected end of expression"),
    ("u:a | ", 7, "missing operand after '|'"),
    ("u:a &", 6, "missing operand after '&'"),
    ("| u:a", 1, "missing operand at the start"),
    ("& u:a", 1, "unexpected '&'"),
    ("u:a & & u:b", 7, "missing operand after '&'"),
    ("u:a & | u:b", 7, "unexpected '|'"),
    ("u:a && u:b", 6, "write a single '&', there is no '&&'"),
    ("u:a || u:b", 6, "write a single '|', there is no '||'"),
    ("!", 2, "missing operand after '!'"),
    ("u:a & !", 8, "missing operand after '!'"),
    ("!&p", 2, "unexpected '&'"),
    ("()", 2, "missing operand after '('"),
    ("u:alice |)", 10, "unexpected ')'"),
    ("(u:a |)", 7, "missing operand after '|'"),
    # unbalanced parentheses
    ("(u:a", 5, "missing ')' to close the '(' at column 1"),
    ("((u:a)", 7, "missing ')' to close the '(' at column 1"),
    ("(u:a | (g:b & p)", 17, "missing ')' to close the '(' at column 1"),
    ("u:a | (g:b", 11, "missing ')' to close the '(' at column 7"),
    ("(", 2, "missing operand after '('"),
    ("u:a)", 4, "no '(' is open here"),
    ("(u:a))", 6, "unbalanced parentheses"),
    (")", 1, "unexpected ')'"),
    # trailing garbage, missing operator
    ("u:a u:b", 5, "unexpected 'u:b'"),
    ("u:a u:b", 5, "is an operator missing"),
    ("p p", 3, "unexpected 'p'"),
    ("u:a (g:b)", 5, "unexpected '('"),
    ("u:a !g:b", 5, "unexpected '!'"),
    ("u:a!", 4, "unexpected '!'"),
    ("(u:a g:b)", 6, "expected '&', '|' or ')'"),
    ("p;", 2, "unexpected character ';'"),
    ("p # comment", 3, "unexpected character '#'"),
    ("(p)x", 4, "expected '&', '|' or the end"),
    # empty name
    ("u:", 3, "empty user name"),
    ("g:", 3, "empty group name"),
    ("u: alice", 3, "no space after ':'"),
    ("u:&g:b", 3, "empty user name"),
    ("(g:)", 4, "empty group name"),
    ("u:a | g:", 9, "empty group name"),
    # bad characters
    ("u:al*ice", 5, "bad character '*' in user name"),
    ("g:ops#1", 6, "bad character '#' in group name"),
    ("u:é", 3, "bad character 'é' in user name"),
    ("u:josé", 6, "bad character 'é'"),
    ("u:a:b", 4, "bad character ':' in user name"),
    ("u:a,u:b", 4, "bad character ','"),
    ("u:a\xa0| u:b", 4, "bad character '\\xa0'"),
    ("u:a\x00", 4, "bad character '\\x00'"),
    ("g:*", 3, "bad character '*' in group name"),
    ("*", 1, "unexpected character '*'"),
    ("u:a | ~u:b", 7, "unexpected character '~'"),
    ("u:a & -", 7, "unknown term '-'"),
    # placeholders
    ("u:<owner>", 3, "unknown placeholder '<owner>'"),
    ("u:<Creator>", 3, "unknown placeholder '<Creator>'"),
    ("u:<creator", 3, "unterminated placeholder '<creator'"),
    ("u:<", 3, "unterminated placeholder '<'"),
    ("u:<cre*tor>", 7, "bad character '*' in placeholder"),
    ("g:<creator>", 3, "placeholder '<creator>' in a group"),
    ("<creator>", 1, "write 'u:<creator>'"),
    ("u:<creator>x", 12, "bad character 'x' after '<creator>'"),
    ("u:a<creator>", 4, "bad character '<' in user name"),
    # nesting limit
    ("(" * 65 + "p" + ")" * 65, 65, "nested too deeply"),
    ("!" * 1000 + "p", 65, "at most 64 levels"),
    ("(" * 64 + "p" + ")" * 64 + " & " + "!" * 64 + "p", None, None),  # the limit itself is fine
]


@pytest.mark.parametrize(("text", "column", "words"), ERRORS)
def test_errors_name_the_policy_the_expression_and_the_column(text, column, words):
    if column is None:
        acl.parse(text)
        return
    with pytest.raises(errors.InvalidPolicy) as caught:
        acl.parse(text, policy="consume_perm")
    exc = caught.value
    first_line = str(exc).splitlines()[0]
    assert first_line.startswith("consume_perm: ")
    assert f" at column {column} in " in first_line
    assert words in first_line
    assert (exc.policy, exc.expression, exc.column) == ("consume_perm", text, column)
    # the caret line points at the same character in the quoted expression
    quoted, caret = str(exc).splitlines()[-2:]
    assert caret.strip() == "^"
    escaped = "".join(acl._escape(char) for char in text)
    assert quoted.strip() == f"'{escaped}'"
    assert caret.index("^") - quoted.index("'") - 1 == len(
        "".join(acl._escape(char) for char in text[: column - 1])
    )


def test_the_message_of_the_issue():
    with pytest.raises(errors.InvalidPolicy) as caught:
        acl.parse("u:alice |)", policy="produce_perm")
    assert str(caught.value).splitlines() == [
        "produce_perm: unexpected ')' at column 10 in 'u:alice |)'; "
        "missing operand after '|' (expected u:<user>, g:<group>, p, '!' or '(')",
        "    'u:alice |)'",
        "              ^",
    ]


def test_an_empty_expression_suggests_nobody():
    with pytest.raises(errors.InvalidPolicy, match=r"write '!p' for nobody"):
        acl.parse("", policy="admin_perm")
    assert not acl.parse("!p").allows(ALICE, "alice")


def test_without_a_policy_the_message_says_invalid_ace():
    with pytest.raises(errors.InvalidPolicy, match=r"^invalid ACE: unexpected end") as caught:
        acl.parse("u:a &")
    assert caught.value.policy is None


@pytest.mark.parametrize("value", [None, 3, b"u:alice", ["p"]])
def test_a_non_string_is_refused(value):
    with pytest.raises(errors.InvalidPolicy, match="must be a string") as caught:
        acl.parse(value, policy="topic_perm")
    assert caught.value.column is None
    assert str(caught.value).startswith("topic_perm: ")


def test_invalid_policy_is_a_value_error():
    with pytest.raises(ValueError):
        acl.parse("u:")


# --- properties --------------------------------------------------------------------------
# A tree is generated as plain tuples, printed by the test's own printer (random whitespace,
# parentheses where precedence needs them and sometimes where it does not) and evaluated by
# the test's own evaluator; engine.auth.acl must parse the text and agree.

USERS = ["alice", "bob", "carol", "a.b-c_d@E.F", "host$"]
GROUPS = ["ops", "dev", "x", "data-eng.2"]
NAME = st.text(alphabet=sorted(acl.NAME_CHARS), min_size=1, max_size=6)

LEAVES = st.one_of(
    st.tuples(st.just("u"), st.one_of(st.sampled_from(USERS), NAME)),
    st.tuples(st.just("g"), st.one_of(st.sampled_from(GROUPS), NAME)),
    st.just(("p",)),
    st.just(("c",)),
)
TREE = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.tuples(st.just("!"), inner),
        st.tuples(st.sampled_from(["&", "|"]), inner, inner),
    ),
    max_leaves=16,
)
PRINCIPALS = st.builds(
    Principal,
    st.sampled_from(USERS),
    st.lists(st.sampled_from(GROUPS), max_size=3).map(tuple),
)
CREATORS = st.one_of(st.none(), st.sampled_from(USERS))
SPACE = st.sampled_from(["", "", " ", "  ", "\t", "\n", " \r\n "])
PRECEDENCE = {"|": 1, "&": 2, "!": 3}


def expected(tree, principal, creator) -> bool:
    kind = tree[0]
    if kind == "u":
        return principal.user == tree[1]
    if kind == "g":
        return tree[1] in principal.groups
    if kind == "p":
        return True
    if kind == "c":
        return creator is not None and principal.user == creator
    if kind == "!":
        return not expected(tree[1], principal, creator)
    left, right = expected(tree[1], principal, creator), expected(tree[2], principal, creator)
    return (left and right) if kind == "&" else (left or right)


def render(tree, draw) -> str:
    kind = tree[0]
    if kind in ("u", "g"):
        text = f"{kind}:{tree[1]}"
    elif kind == "p":
        text = "p"
    elif kind == "c":
        text = "u:<creator>"
    elif kind == "!":
        text = "!" + draw(SPACE) + render_operand(tree[1], 3, draw)
    else:
        level = PRECEDENCE[kind]
        left = render_operand(tree[1], level, draw)
        right = render_operand(tree[2], level, draw)
        text = left + draw(SPACE) + kind + draw(SPACE) + right
    return text


def render_operand(tree, level: int, draw) -> str:
    own = PRECEDENCE.get(tree[0], 4)
    text = render(tree, draw)
    if own < level or draw(st.integers(0, 4)) == 0:
        text = "(" + draw(SPACE) + text + draw(SPACE) + ")"
    return text


@settings(max_examples=400, deadline=None)
@given(
    tree=TREE,
    principals=st.lists(PRINCIPALS, min_size=1, max_size=4),
    creator=CREATORS,
    data=st.data(),
)
def test_random_expressions_parse_and_evaluate_like_their_tree(tree, principals, creator, data):
    text = data.draw(SPACE) + render(tree, data.draw) + data.draw(SPACE)
    ace = acl.parse(text)
    for principal in principals:
        want = expected(tree, principal, creator)
        assert ace.allows(principal, creator) is want, (text, str(ace), principal)
        assert acl.check(text, principal, creator) is want
    # the normal form reads back to the same tree and prints the same
    assert acl.parse(str(ace)) == ace
    assert str(acl.parse(str(ace))) == str(ace)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ugpc:!&|() <>creator*é\t\nab", max_size=30))
def test_any_text_parses_or_fails_with_a_column(text):
    try:
        ace = acl.parse(text, policy="copy_perm")
    except errors.InvalidPolicy as exc:
        assert 1 <= exc.column <= len(text) + 1
        assert str(exc).startswith("copy_perm: ")
    else:
        assert acl.parse(str(ace)) == ace
