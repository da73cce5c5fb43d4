"""Effective permissions (engine/auth/effective.py, `Cluster.effective_permissions`): what
each stream's ACEs let one console user do, with the groups of the user store, `<creator>`,
negation and administrators; who may ask; paging and bad input."""

from __future__ import annotations

import json
import sqlite3

import pytest

from engine import Principal, errors
from engine.auth import acl, effective

PASSWORD = "a-long-password-1"
P = effective.PERMISSION_POLICIES


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """One cluster for the module (a user costs a scrypt hash): tests that change it put
    it back."""
    from engine import Cluster

    with Cluster.open(tmp_path_factory.mktemp("effective") / "cluster", name="test") as c:
        yield _fill(c)


def _fill(cluster):
    cluster.add_user("alice", PASSWORD, groups=("dev",))
    cluster.add_user("bob", PASSWORD, groups=("ops",))
    cluster.add_user("carol", PASSWORD)
    cluster.add_user("root", PASSWORD, admin=True)
    cluster.as_principal(Principal("alice", ("dev",))).create_stream(
        "/a/one",
        produce_perm="u:<creator> | g:ops",
        consume_perm="g:dev & !u:alice",
        topic_perm="p",
        copy_perm="!p",
    )
    cluster.as_principal(Principal("bob", ("ops",))).create_stream("/a/two")
    cluster.create_stream("/b/three", consume_perm="!g:ops", produce_perm="u:carol")
    return cluster


def _table(page) -> dict[str, tuple[bool, ...]]:
    return {s.stream: tuple(s.allowed[name] for name in P) for s in page.streams}


def test_groups_creator_and_negation_decide_per_stream(setup):
    assert P == (
        "produce_perm",
        "consume_perm",
        "unmask_perm",
        "topic_perm",
        "copy_perm",
        "admin_perm",
    )
    alice = setup.effective_permissions("alice")
    assert (alice.user, alice.groups, alice.admin, alice.total) == ("alice", ("dev",), False, 3)
    assert _table(alice) == {
        # creator: produce, unmask and admin; g:dev & !u:alice refuses her; p; !p
        "/a/one": (True, False, True, True, False, True),
        "/a/two": (False, False, False, False, False, False),  # bob's, default u:<creator>
        "/b/three": (False, True, False, False, False, False),  # !g:ops lets her consume
    }
    assert _table(setup.effective_permissions("bob")) == {
        "/a/one": (True, False, False, True, False, False),  # g:ops produces
        "/a/two": (True, True, True, True, True, True),  # his own stream
        "/b/three": (False, False, False, False, False, False),
    }
    one = setup.effective_permissions("carol", prefix="/a/one").streams[0]
    assert one.creator == "alice"
    assert one.aces["consume_perm"] == "g:dev & !u:alice"
    assert one.aces["admin_perm"] == "u:<creator>"
    assert set(one.reasons.values()) == {effective.ACE}
    assert list(one.allowed) == list(P)  # the policies' order


def test_groups_come_from_the_user_store_not_the_asker(setup):
    # bob asks as a principal claiming group dev: the store says ops, and ops decides
    view = setup.as_principal(Principal("bob", ("dev",)))
    page = view.effective_permissions("bob", prefix="/b")
    assert page.groups == ("ops",)
    assert _table(page)["/b/three"][1] is False
    setup.edit_user("bob", groups=("dev",))
    try:
        assert _table(view.effective_permissions("bob", prefix="/b"))["/b/three"][1] is True
    finally:
        setup.edit_user("bob", groups=("ops",))


def test_an_administrator_is_allowed_everything_with_the_reason(setup):
    page = setup.effective_permissions("root")
    assert page.admin is True
    for item in page.streams:
        assert item.everything
        assert set(item.reasons.values()) == {effective.ADMINISTRATOR}
    assert page.streams[0].aces["copy_perm"] == "!p"  # the text is still shown


def test_who_may_ask(setup):
    carol = setup.as_principal(Principal("carol"))
    assert carol.effective_permissions("carol").user == "carol"  # herself
    with pytest.raises(errors.AccessDenied, match="only a cluster administrator"):
        carol.effective_permissions("alice")
    # refused before the lookup: a missing name is not told apart from an existing one
    with pytest.raises(errors.AccessDenied):
        carol.effective_permissions("nobody")
    root = setup.as_principal(setup.user("root").principal)
    assert root.effective_permissions("alice").user == "alice"
    assert setup.effective_permissions("bob").user == "bob"  # the library's own principal
    with pytest.raises(errors.UnknownUser, match="nobody"):
        root.effective_permissions("nobody")


def test_paging_prefix_and_bad_input(setup):
    page = setup.effective_permissions("alice", prefix="/a", limit=1, offset=1)
    assert [s.stream for s in page.streams] == ["/a/two"]
    assert (page.total, page.limit, page.offset, page.prefix) == (2, 1, 1, "/a")
    assert setup.effective_permissions("alice", prefix="/zzz").streams == ()
    # a prefix as typed in a console: its leading "/" may be left out
    bare = setup.effective_permissions("alice", prefix=" a ")
    assert (bare.prefix, [s.stream for s in bare.streams]) == ("/a", ["/a/one", "/a/two"])
    assert setup.effective_permissions("alice", prefix="  ").prefix is None
    for bad in ({"limit": 0}, {"limit": effective.MAX_LIMIT + 1}, {"offset": -1}, {"limit": "5"}):
        with pytest.raises(errors.InvalidArgument):
            setup.effective_permissions("alice", **bad)
    with pytest.raises(errors.InvalidArgument):
        setup.effective_permissions("alice", prefix=5)
    with pytest.raises(errors.InvalidName):
        setup.effective_permissions("no such/name")
    with pytest.raises(errors.InvalidName):
        setup.effective_permissions(None)


def test_a_stored_invalid_ace_lets_only_an_administrator_through(setup):
    setup.as_principal(Principal("bob")).create_stream("/z/bad")
    try:
        stored = setup.stream("/z/bad").policies
        stored["produce_perm"] = "u:bob &"  # an old catalog's value, written past the checks
        conn = sqlite3.connect(setup.path / "catalog.db")
        with conn:
            conn.execute(
                "UPDATE streams SET policies = ? WHERE path = '/z/bad'", (json.dumps(stored),)
            )
        conn.close()
        bob = setup.effective_permissions("bob", prefix="/z/bad").streams[0]
        assert (bob.allowed["produce_perm"], bob.reasons["produce_perm"]) == (
            False,
            effective.INVALID,
        )
        assert bob.allowed["consume_perm"] is True
        root = setup.effective_permissions("root", prefix="/z/bad").streams[0]
        assert root.allowed["produce_perm"] is True
    finally:
        setup.as_principal(setup.user("root").principal).delete_stream("/z/bad")


def test_each_distinct_ace_is_parsed_once_per_page(cluster, monkeypatch):
    cluster.add_user("dana", PASSWORD, groups=("dev",))
    for i in range(40):
        cluster.create_stream(f"/many/{i:03}", consume_perm="g:dev" if i % 2 else "g:ops")
    parsed: list[str] = []
    real = acl.cached_parse

    def counting(text, policy=None):
        parsed.append(text)
        return real(text, policy)

    monkeypatch.setattr(acl, "cached_parse", counting)
    page = cluster.effective_permissions("dana", limit=40)
    # u:<creator> (the four other policies), g:dev and g:ops: three texts, once each
    assert sorted(parsed) == ["g:dev", "g:ops", "u:<creator>"]
    assert [s.allowed["consume_perm"] for s in page.streams] == [i % 2 == 1 for i in range(40)]
