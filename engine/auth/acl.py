"""Access control expressions (ACEs), as in MapR: parse, print and evaluate them.

An ACE says who may perform an operation on a stream (DESIGN, "Stream policies"):
`u:alice | g:ops & !u:mallory`. Grammar, lowest precedence first::

    expression  := conjunction ( "|" conjunction )*     # or
    conjunction := negation ( "&" negation )*           # and
    negation    := "!" negation | primary               # not, binds tightest
    primary     := "(" expression ")" | term
    term        := "u:" user | "g:" group | "p"         # "p" is public: everyone
    user        := name | "<creator>"
    group       := name

- A term is one token: no whitespace inside `u:alice`. Whitespace (space, tab, CR, LF, form
  feed, vertical tab) may appear anywhere between tokens and around the expression.
- A name is one or more ASCII letters, digits, `.`, `_`, `-`, `@` or `$`: the POSIX
  portable filename characters, plus `@` for realm-qualified names (`alice@EXAMPLE.COM`) and
  `$` for machine accounts (`host$`). Names compare exactly (case-sensitive, no
  normalisation) with the principal's user and groups.
- `<creator>` stands for the user who created the stream; it is only allowed after `u:`
  (it is the default of every ACE policy: `u:<creator>`).
- Prefixes and `p` are lower case. There is no `&&`, `||`, `and`, `or` or `not`.
- The empty expression is refused (MapR sometimes reads it as "nobody"); write `!p`.
- Nesting of `(` and `!` is limited to `MAX_DEPTH` levels, so that untrusted input (the web
  console) cannot exhaust the stack, and an expression to `MAX_LENGTH` (4,096) characters,
  so that one stream's policies cannot make every listing that shows them huge.

`parse(text, policy=None)` returns an `Ace`: an immutable tree of frozen dataclasses
(`User`, `Creator`, `Group`, `Public`, `Not`, `And`, `Or`). `&` and `|` are associative, so
the tree keeps them n-ary and flat: `(u:a | u:b) | u:c` is one `Or` of three operands, and
parentheses are not kept. `str(ace)` is the normal form (single spaces around `&` and `|`,
parentheses only where precedence needs them), and `parse(str(ace)) == ace`.

Errors raise `engine.errors.InvalidPolicy` whose message names the policy (when given),
quotes the expression and gives the 1-based column (a character index: a tab or newline
counts as one column) of the first bad character, followed by the quoted expression again
with a caret under that character. The exception also carries `policy`, `expression` and
`column` attributes (`column` is None when there is none, as for a non-string).

`Ace.allows(principal, creator)` (or `allows(ace, principal, creator)`) evaluates an ACE for
an `engine.auth.principal.Principal`; `check(text, principal, creator)` does the same from the
text through an LRU cache of parsed expressions (`cached_parse`), for the hot paths
(subscribe, produce-open). Everything here is pure and thread-safe.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import NoReturn, Protocol

from engine.errors import InvalidArgument, InvalidPolicy

__all__ = [
    "CREATOR",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "Ace",
    "And",
    "Creator",
    "Group",
    "Not",
    "Or",
    "Public",
    "User",
    "allows",
    "cached_parse",
    "check",
    "parse",
]

CREATOR = "<creator>"
"""The placeholder for the user who created the stream, as written after `u:`."""

MAX_DEPTH = 64
"""Most levels of `(` and `!` an expression may nest."""

MAX_LENGTH = 4096
"""Most characters an expression may have (whitespace included)."""

NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@$")
WHITESPACE = frozenset(" \t\r\n\f\v")
_PUNCTUATION = frozenset("&|!()")
_DELIMITERS = WHITESPACE | _PUNCTUATION  # what may follow a term
_NAME_RE = re.compile(r"[A-Za-z0-9._@$-]+\Z")
_ALLOWED = "a name may hold ASCII letters, digits, '.', '_', '-', '@' and '$'"
_OPERAND = "expected u:<user>, g:<group>, p, '!' or '('"


class _Identity(Protocol):
    """What an ACE is evaluated against: `engine.auth.principal.Principal` or alike."""

    @property
    def user(self) -> str: ...

    @property
    def groups(self) -> tuple[str, ...]: ...


# --- the parsed form ---------------------------------------------------------------------


class Ace:
    """A parsed access control expression (the base class of every node of the tree).

    Immutable and hashable; `str()` gives the normal form, which `parse` reads back to an
    equal `Ace`.
    """

    __slots__ = ()

    def allows(self, principal: _Identity, creator: str | None) -> bool:
        """Whether `principal` satisfies this expression; `creator` is the user who created
        the stream, matched by `u:<creator>` (None: nobody matches it)."""
        raise NotImplementedError

    # binding strength when printed: | 1, & 2, ! 3, terms 4
    _precedence = 4


def _check_name(kind: str, name: object) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidArgument(f"invalid {kind} name {name!r}: {_ALLOWED}")


def _check_operand(node: object) -> None:
    if not isinstance(node, Ace):
        raise InvalidArgument(f"an ACE operand must be an Ace, not {type(node).__name__}")


@dataclass(frozen=True, slots=True)
class User(Ace):
    """`u:<name>`: the principal is this user."""

    name: str

    def __post_init__(self) -> None:
        _check_name("user", self.name)

    def allows(self, principal: _Identity, creator: str | None) -> bool:
        return principal.user == self.name

    def __str__(self) -> str:
        return f"u:{self.name}"


@dataclass(frozen=True, slots=True)
class Creator(Ace):
    """`u:<creator>`: the principal is the user who created the stream."""

    def allows(self, principal: _Identity, creator: str | None) -> bool:
        return creator is not None and principal.user == creator

    def __str__(self) -> str:
        return f"u:{CREATOR}"


@dataclass(frozen=True, slots=True)
class Group(Ace):
    """`g:<name>`: the principal belongs to this group."""

    name: str

    def __post_init__(self) -> None:
        _check_name("group", self.name)

    def allows(self, principal: _Identity, creator: str | None) -> bool:
        return self.name in principal.groups

    def __str__(self) -> str:
        return f"g:{self.name}"


@dataclass(frozen=True, slots=True)
class Public(Ace):
    """`p`: everyone."""

    def allows(self, principal: _Identity, creator: str | None) -> bool:
        return True

    def __str__(self) -> str:
        return "p"


@dataclass(frozen=True, slots=True)
class Not(Ace):
    """`!x`: the principal does not satisfy `x`."""

    operand: Ace
    _precedence = 3

    def __post_init__(self) -> None:
        _check_operand(self.operand)

    def allows(self, principal: _Identity, creator: str | None) -> bool:
        return not self.operand.allows(principal, creator)

    def __str__(self) -> str:
        return "!" + _wrap(self.operand, self._precedence)


def _check_operands(node: And | Or) -> None:
    operands = node.operands
    if not isinstance(operands, tuple | list):
        raise InvalidArgument("ACE operands must be a tuple of Ace")
    if len(operands) < 2:
        raise InvalidArgument(f"{type(node).__name__} needs at least two operands")
    for operand in operands:
        _check_operand(operand)
    object.__setattr__(node, "operands", tuple(operands))


@dataclass(frozen=True, slots=True)
class And(Ace):
    """`a & b & ...`: the principal satisfies every operand."""

    operands: tuple[Ace, ...]
    _precedence = 2

    def __post_init__(self) -> None:
        _check_operands(self)

    def allows(self, principal: _Identity, creator: str | None) -> bool:
        return all(operand.allows(principal, creator) for operand in self.operands)

    def __str__(self) -> str:
        return " & ".join(_wrap(operand, self._precedence) for operand in self.operands)


@dataclass(frozen=True, slots=True)
class Or(Ace):
    """`a | b | ...`: the principal satisfies at least one operand."""

    operands: tuple[Ace, ...]
    _precedence = 1

    def __post_init__(self) -> None:
        _check_operands(self)

    def allows(self, principal: _Identity, creator: str | None) -> bool:
        return any(operand.allows(principal, creator) for operand in self.operands)

    def __str__(self) -> str:
        return " | ".join(_wrap(operand, self._precedence) for operand in self.operands)


def _wrap(node: Ace, precedence: int) -> str:
    """`node` printed as an operand of an operator of `precedence`."""
    text = str(node)
    return f"({text})" if node._precedence < precedence else text


def allows(ace: Ace, principal: _Identity, creator: str | None) -> bool:
    """Whether `principal` satisfies `ace`; same as `ace.allows(principal, creator)`."""
    return ace.allows(principal, creator)


# --- parsing -----------------------------------------------------------------------------


def parse(text: str, policy: str | None = None) -> Ace:
    """Parse an ACE; raise `InvalidPolicy` naming `policy` and the column of the error."""
    return _Parser(text, policy).parse()


@functools.lru_cache(maxsize=4096)
def cached_parse(text: str, policy: str | None = None) -> Ace:
    """`parse` through an LRU cache (errors are not cached, they are raised every time)."""
    return parse(text, policy)


def check(
    text: str | Ace | None, principal: _Identity, creator: str | None, *, policy: str | None = None
) -> bool:
    """Whether `principal` satisfies the ACE `text` (parsed once, then cached).

    Raises `InvalidPolicy` when `text` is not a valid ACE, for a super user too (who
    passes every valid ACE, as Kafka's `super.users` do).
    """
    if isinstance(text, Ace):
        ace = text
    elif isinstance(text, str):
        ace = cached_parse(text, policy)
    else:
        ace = parse(text, policy)  # type: ignore[arg-type]  # not a str: parse raises the error
    return getattr(principal, "superuser", False) or ace.allows(principal, creator)


def _escape(char: str) -> str:
    """One character as it appears between single quotes in a message."""
    if char in "'\\":
        return "\\" + char
    return repr(char)[1:-1]


class _Parser:
    """Recursive descent over the characters: no separate tokenizer, so the first error
    from the left is the one reported."""

    def __init__(self, text: str, policy: str | None) -> None:
        self.text = text
        self.policy = policy
        self.i = 0
        self.depth = 0

    # -- errors

    def fail(self, problem: str, index: int | None, detail: str = "") -> NoReturn:
        prefix = self.policy if self.policy else "invalid ACE"
        if index is None:
            exc = InvalidPolicy(f"{prefix}: {problem}")
        else:
            pieces = [_escape(char) for char in self.text]
            quoted = "'" + "".join(pieces) + "'"
            message = f"{prefix}: {problem} at column {index + 1} in {quoted}"
            if detail:
                message += f"; {detail}"
            caret = 1 + sum(len(piece) for piece in pieces[:index])
            message += f"\n    {quoted}\n    {' ' * caret}^"
            exc = InvalidPolicy(message)
        exc.policy = self.policy
        exc.expression = self.text
        exc.column = None if index is None else index + 1
        raise exc

    # -- characters

    def peek(self) -> str | None:
        return self.text[self.i] if self.i < len(self.text) else None

    def skip_whitespace(self) -> None:
        text, i = self.text, self.i
        while i < len(text) and text[i] in WHITESPACE:
            i += 1
        self.i = i

    def scan_name(self, start: int) -> int:
        """The index after the run of name characters from `start`."""
        text, j = self.text, start
        while j < len(text) and text[j] in NAME_CHARS:
            j += 1
        return j

    def token_at(self, index: int) -> str:
        """The token at `index`, for messages: one punctuation mark or a run up to the next
        delimiter (shortened when long)."""
        if self.text[index] in _PUNCTUATION:
            return self.text[index]
        j = index
        while j < len(self.text) and self.text[j] not in _DELIMITERS:
            j += 1
        token = self.text[index:j]
        return token if len(token) <= 24 else token[:24] + "..."

    def enter(self, index: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(
                "expression nested too deeply",
                index,
                f"at most {MAX_DEPTH} levels of '(' and '!' are allowed",
            )

    # -- grammar

    def parse(self) -> Ace:
        if not isinstance(self.text, str):
            self.fail(f"an ACE must be a string, not {type(self.text).__name__}", None)
        if len(self.text) > MAX_LENGTH:
            # No column and no quote: the message must stay short whatever was sent.
            self.fail(
                f"expression of {len(self.text):,} characters; at most {MAX_LENGTH:,} are allowed",
                None,
            )
        self.skip_whitespace()
        if self.peek() is None:
            self.fail(
                "empty expression",
                0,
                "an empty ACE is refused: write '!p' for nobody, 'p' for everyone",
            )
        node = self.disjunction(None)
        self.skip_whitespace()
        if self.peek() is not None:
            self.operator_expected(None)
        return node

    def disjunction(self, after: str | None) -> Ace:
        operands = [self.conjunction(after)]
        while True:
            self.skip_whitespace()
            if self.peek() != "|":
                break
            self.i += 1
            operands.append(self.conjunction("|"))
        return _flatten(Or, operands)

    def conjunction(self, after: str | None) -> Ace:
        operands = [self.negation(after)]
        while True:
            self.skip_whitespace()
            if self.peek() != "&":
                break
            self.i += 1
            operands.append(self.negation("&"))
        return _flatten(And, operands)

    def negation(self, after: str | None) -> Ace:
        """An operand: `after` is the token before it (None at the start), for messages."""
        self.skip_whitespace()
        start = self.i
        char = self.peek()
        if char == "!":
            self.i += 1
            self.enter(start)
            node: Ace = Not(self.negation("!"))
            self.depth -= 1
            return node
        if char == "(":
            self.i += 1
            self.enter(start)
            node = self.disjunction("(")
            self.skip_whitespace()
            if self.peek() != ")":
                self.operator_expected(start)
            self.i += 1
            self.depth -= 1
            return node
        if char is not None and char in NAME_CHARS:
            return self.term()
        self.operand_missing(after)

    def term(self) -> Ace:
        text, start = self.text, self.i
        end = self.scan_name(start)
        word = text[start:end]
        if end < len(text) and text[end] == ":":
            if word in ("u", "g"):
                self.i = end + 1
                return self.name(word)
            if word.lower() in ("u", "g"):
                detail = f"prefixes are lower case: write '{word.lower()}:'"
            elif word == "p":
                detail = "'p' (public, everyone) takes no name"
            else:
                detail = "a term is u:<user>, g:<group> or p"
            self.fail(f"unknown term prefix {word + ':'!r}", start, detail)
        if word == "p":
            self.i = end
            return Public()
        if word == "P":
            detail = "write 'p' (lower case) for public"
        else:
            detail = f"a term is u:<user>, g:<group> or p (did you mean 'u:{word}'?)"
        self.fail(f"unknown term {word!r}", start, detail)

    def name(self, kind: str) -> Ace:
        """The name after `u:` or `g:`; `self.i` is just after the colon."""
        text, start = self.text, self.i
        label = "user" if kind == "u" else "group"
        char = self.peek()
        if char == "<":
            return self.placeholder(kind)
        end = self.scan_name(start)
        if end == start:
            if char is None or char in _DELIMITERS:
                detail = f"write a name after '{kind}:', such as '{kind}:alice'"
                if char is not None and char in WHITESPACE:
                    detail += " (no space after ':')"
                self.fail(f"empty {label} name", start, detail)
            self.fail(f"bad character {char!r} in {label} name", start, _ALLOWED)
        if end < len(text) and text[end] not in _DELIMITERS:
            self.fail(f"bad character {text[end]!r} in {label} name", end, _ALLOWED)
        self.i = end
        name = text[start:end]
        return User(name) if kind == "u" else Group(name)

    def placeholder(self, kind: str) -> Ace:
        """`<creator>` after `u:`; `self.i` is at the `<`."""
        text, start = self.text, self.i
        close = self.scan_name(start + 1)
        if close >= len(text) or text[close] in _DELIMITERS:
            self.fail(
                f"unterminated placeholder {text[start:close]!r}",
                start,
                f"expected '>' (write '{kind}:{CREATOR}')",
            )
        if text[close] != ">":
            self.fail(
                f"bad character {text[close]!r} in placeholder",
                close,
                f"the only placeholder is '{CREATOR}'",
            )
        token = text[start : close + 1]
        if token != CREATOR:
            self.fail(
                f"unknown placeholder {token!r}",
                start,
                f"the only placeholder is '{CREATOR}' (the user who created the stream)",
            )
        if kind != "u":
            self.fail(
                f"placeholder '{CREATOR}' in a group",
                start,
                f"'{CREATOR}' stands for a user: write 'u:{CREATOR}'",
            )
        after = close + 1
        if after < len(text) and text[after] not in _DELIMITERS:
            self.fail(
                f"bad character {text[after]!r} after '{CREATOR}'",
                after,
                "expected '&', '|', ')' or the end after a term",
            )
        self.i = after
        return Creator()

    def operand_missing(self, after: str | None) -> NoReturn:
        """An operand was expected at `self.i` and is not there."""
        char = self.peek()
        where = "at the start" if after is None else f"after {after!r}"
        if char is None:
            problem = "unexpected end of expression"
        elif char in "&|)":
            problem = f"unexpected {char!r}"
        else:
            problem = f"unexpected character {char!r}"
        detail = f"missing operand {where} ({_OPERAND})"
        if char is not None and char == after and char in "&|":
            detail += f"; write a single {char!r}, there is no {char * 2!r}"
        elif self.text.startswith(CREATOR, self.i):
            detail += f"; write 'u:{CREATOR}'"
        self.fail(problem, self.i, detail)

    def operator_expected(self, open_at: int | None) -> NoReturn:
        """After an operand, `self.i` holds neither an operator nor what may end it.
        `open_at` is the index of the innermost open `(`, None at the top level."""
        char = self.peek()
        if char is None:
            assert open_at is not None
            self.fail(
                "unexpected end of expression",
                self.i,
                f"missing ')' to close the '(' at column {open_at + 1}",
            )
        if char == ")" and open_at is None:
            self.fail("unexpected ')'", self.i, "no '(' is open here: unbalanced parentheses")
        expected = "'&', '|' or ')'" if open_at is not None else "'&', '|' or the end"
        if char in NAME_CHARS or char in "(!":
            problem = f"unexpected {self.token_at(self.i)!r}"
            detail = f"expected {expected}; is an operator missing before it?"
        else:
            problem = f"unexpected character {char!r}"
            detail = f"expected {expected}"
        self.fail(problem, self.i, detail)


def _flatten(kind: type[And] | type[Or], operands: list[Ace]) -> Ace:
    """One operand as itself; several as one flat `kind` node (absorbing parenthesised
    nodes of the same kind, which associativity makes equivalent)."""
    if len(operands) == 1:
        return operands[0]
    flat: list[Ace] = []
    for operand in operands:
        if isinstance(operand, kind):
            flat.extend(operand.operands)
        else:
            flat.append(operand)
    return kind(tuple(flat))
