"""Group permissions (engine.groups.perms): a group's creator and its join, commit,
describe, reset and delete ACEs, rules by group id or prefix, group creation and its
limit, groups from before creators, and what describe shows; on a real cluster."""

from __future__ import annotations

import sqlite3

import pytest

from engine import Cluster, Consumer, TopicPartition, errors
from engine.auth.principal import Principal
from tests.group_streams import commit, two_streams

ALICE = Principal("alice", ("etl",))
BOB = Principal("bob", ("etl",))
MALLORY = Principal("mallory")
ADMIN = Principal("root", superuser=True)


@pytest.fixture
def setup(cluster):
    """/a (alice's, bob may consume too) and /m (mallory's), one partition of 10 each."""
    return two_streams(cluster, consumers_of_a="u:alice | u:bob")


def test_the_first_committer_creates_the_group_and_holds_every_permission(setup):
    commit(setup, ALICE, "dash", 4)
    alice, bob = setup.as_principal(ALICE), setup.as_principal(BOB)
    perms = alice.group_permissions("dash")
    assert perms.creator == "alice"
    assert dict(perms.aces) == dict.fromkeys(perms.aces, "u:<creator>")
    assert perms.allowed == {
        "join_perm",
        "commit_perm",
        "describe_perm",
        "reset_perm",
        "delete_perm",
    }
    assert bob.group_permissions("dash").allowed == frozenset()
    # bob may consume /a, but the group is alice's
    with pytest.raises(errors.AccessDenied, match="commit offsets into consumer group 'dash'"):
        commit(setup, BOB, "dash", 9)
    with pytest.raises(errors.AccessDenied):
        bob.group("dash")
    assert [g.group_id for g in bob.groups()] == []
    with pytest.raises(errors.AccessDenied):
        bob.reset_offsets("dash", "/a:t", "earliest")
    with pytest.raises(errors.AccessDenied):
        bob.delete_group("dash")
    with pytest.raises(errors.AccessDenied):
        Consumer(bob, "/a:t", group_id="dash").poll(timeout_ms=10)
    # nor read its offsets: neither asked for, nor to start from
    reader = Consumer(bob, group_id="dash", enable_auto_commit=False)
    reader.assign([TopicPartition("/a:t", 0)])
    with pytest.raises(errors.GroupAccessDenied):
        reader.committed(TopicPartition("/a:t", 0))
    with pytest.raises(errors.GroupAccessDenied):
        reader.poll(timeout_ms=10)
    reader.close()
    # administrators always
    root = setup.as_principal(ADMIN)
    assert root.group("dash").partitions[0].committed == 4
    assert alice.group("dash").partitions[0].committed == 4
    alice.delete_group("dash")
    assert [g.group_id for g in setup.groups()] == []


def test_rules_by_group_and_by_prefix_replace_the_default(setup):
    commit(setup, ALICE, "etl-orders", 1)
    commit(setup, ALICE, "etl-special", 1)
    with pytest.raises(errors.AccessDenied, match="administrator"):
        setup.as_principal(ALICE).set_group_permissions("etl-", prefix=True, join_perm="p")
    setup.set_group_permissions(
        "etl-", prefix=True, commit_perm="g:etl", describe_perm="u:<creator> | g:etl"
    )
    bob = setup.as_principal(BOB)
    commit(setup, BOB, "etl-orders", 5)  # g:etl may commit into every etl- group
    assert bob.group("etl-orders").partitions[0].committed == 5
    perms = bob.group_permissions("etl-orders")
    assert perms.sources["commit_perm"] == "prefix etl-"
    assert perms.aces["describe_perm"] == "u:<creator> | g:etl"
    assert perms.sources["delete_perm"] == "default"
    # a longer prefix wins over a shorter one; the group's own rule over both
    setup.set_group_permissions("etl-spec", prefix=True, commit_perm="u:alice")
    with pytest.raises(errors.AccessDenied):
        commit(setup, BOB, "etl-special", 6)
    setup.as_principal(ALICE).set_group_permissions("etl-special", commit_perm="u:bob")
    commit(setup, BOB, "etl-special", 6)
    with pytest.raises(errors.AccessDenied):
        commit(setup, ALICE, "etl-special", 7)
    assert bob.group_permissions("etl-special").sources["commit_perm"] == "group"
    # "" is the default again
    setup.as_principal(ALICE).set_group_permissions("etl-special", commit_perm="")
    assert bob.group_permissions("etl-special").sources["commit_perm"] == "prefix etl-spec"
    rules = setup.group_permission_rules()
    assert [(r.pattern, r.prefix) for r in rules] == [("etl-", True), ("etl-spec", True)]
    # only the creator (or an administrator) sets a group's rules; ACEs are parsed
    with pytest.raises(errors.AccessDenied, match="creator"):
        bob.set_group_permissions("etl-orders", delete_perm="p")
    with pytest.raises(errors.InvalidPolicy):
        setup.set_group_permissions("etl-orders", delete_perm="u:")
    with pytest.raises(errors.InvalidArgument):
        setup.set_group_permissions("etl-orders", drink_perm="p")
    with pytest.raises(errors.UnknownGroup):
        bob.set_group_permissions("nobody-has-this", join_perm="p")


def test_creating_a_group_needs_a_consumable_topic_and_is_limited(setup):
    with pytest.raises(errors.AccessDenied, match="consume"):
        commit(setup, MALLORY, "g-1", 1)  # /a is not mallory's
    with pytest.raises(errors.AccessDenied, match="create consumer group 'g-1'"):
        setup.as_principal(MALLORY).authorize_group("g-1", "join_perm", topics=["/a:t"])
    assert setup.groups() == []
    with pytest.raises(errors.AccessDenied, match="administrator"):
        setup.as_principal(MALLORY).set_group_limit(1)
    setup.set_group_limit(3)
    for n in range(3):
        commit(setup, MALLORY, f"m-{n}", 1, topic="/m:x")
    with pytest.raises(errors.AccessDenied, match="limit"):
        commit(setup, MALLORY, "m-3", 1, topic="/m:x")
    # committing into one's own groups goes on; a deleted group frees its place
    commit(setup, MALLORY, "m-0", 2, topic="/m:x")
    setup.as_principal(MALLORY).delete_group("m-0")
    commit(setup, MALLORY, "m-3", 1, topic="/m:x")
    assert setup.group_permissions("m-3").creator == "mallory"
    # administrators are not limited
    for n in range(5):
        commit(setup, ADMIN, f"root-{n}", 1)


def test_describe_shows_only_the_topics_the_caller_may_consume(setup):
    commit(setup, ADMIN, "mixed", 3)
    commit(setup, ADMIN, "mixed", 4, topic="/m:x")
    setup.set_group_permissions("mixed", describe_perm="p")
    seen = setup.as_principal(MALLORY).group("mixed")
    assert [(p.topic, p.committed) for p in seen.partitions] == [("/m:x", 4)]
    seen = setup.as_principal(BOB).group("mixed")
    assert [(p.topic, p.committed) for p in seen.partitions] == [("/a:t", 3)]
    assert len(setup.group("mixed").partitions) == 2


def test_a_reset_touches_only_topics_the_group_has_and_the_caller_may_consume(setup):
    commit(setup, ALICE, "dash", 4)
    alice, mallory = setup.as_principal(ALICE), setup.as_principal(MALLORY)
    alice.set_group_permissions("dash", reset_perm="u:<creator> | u:mallory")
    # mallory may reset, but not add her own topic to alice's group
    with pytest.raises(errors.InvalidArgument, match="no offsets in /m:x"):
        mallory.reset_offsets("dash", "/m:x", "earliest")
    with pytest.raises(errors.AccessDenied, match="consume"):
        mallory.reset_offsets("dash", "/a:t", "earliest")
    assert alice.reset_offsets("dash", "/a:t", "latest") == {TopicPartition("/a:t", 0): 10}
    alice.delete_group("dash")
    # a new group's reset creates it, for the caller
    mallory.reset_offsets("hers", "/m:x", "earliest")
    assert setup.group_permissions("hers").creator == "mallory"


def test_a_commit_from_outside_a_live_group_is_refused(setup):
    alice = setup.as_principal(ALICE)
    member = Consumer(alice, "/a:t", group_id="live", enable_auto_commit=False)
    try:
        member.poll(timeout_ms=100)
        assert setup.group_kinds("live") == {"engine"}
        outsider = Consumer(alice, group_id="live", enable_auto_commit=False)
        outsider.assign([TopicPartition("/a:t", 0)])
        with pytest.raises(errors.CommitFailed, match="live members"):
            outsider.commit({TopicPartition("/a:t", 0): 0})
        outsider.close()
    finally:
        member.close()


def test_a_group_from_before_creators_is_claimed_by_one_who_may_consume_its_topics(setup):
    commit(setup, ALICE, "old", 4)
    # as a catalog written before group_creators: the group has offsets and no creator
    conn = sqlite3.connect(setup.path / "catalog.db")
    conn.execute("DELETE FROM group_creators")
    conn.commit()
    conn.close()
    assert setup.group_permissions("old").creator is None
    with pytest.raises(errors.AccessDenied):
        commit(setup, MALLORY, "old", 1, topic="/m:x")
    assert setup.as_principal(MALLORY).groups() == []
    assert [g.group_id for g in setup.as_principal(BOB).groups()] == ["old"]
    commit(setup, ADMIN, "old", 5)  # an administrator does not take it from its consumers
    assert setup.group_permissions("old").creator is None
    commit(setup, BOB, "old", 6)  # bob may consume /a: he claims it
    assert setup.group_permissions("old").creator == "bob"
    with pytest.raises(errors.AccessDenied):
        commit(setup, ALICE, "old", 7)


def test_an_older_catalog_gets_the_tables_when_opened(tmp_path):
    path = tmp_path / "c"
    Cluster.open(path).close()
    conn = sqlite3.connect(path / "catalog.db")
    conn.executescript("DROP TABLE group_creators; DROP TABLE group_perms;")
    conn.close()
    with Cluster.open(path) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic("/s:t", 1)
        consumer = Consumer(cluster, group_id="g", enable_auto_commit=False)
        consumer.assign([TopicPartition("/s:t", 0)])
        consumer.commit({TopicPartition("/s:t", 0): 0})
        consumer.close()
        assert cluster.group_permissions("g").creator == cluster.principal.user


def test_the_facade_and_the_wire_codes_name_a_group_refusal(setup):
    from engine.kafka.errors import GroupAuthorizationFailedError, translate
    from engine.wire import codes

    commit(setup, ALICE, "dash", 4)
    with pytest.raises(errors.GroupAccessDenied) as refused:
        commit(setup, BOB, "dash", 0)
    assert isinstance(translate(refused.value), GroupAuthorizationFailedError)
    assert codes.of(refused.value) == codes.GROUP_AUTHORIZATION_FAILED
