"""ACEs on streams: every permission, checked for the principal of the cluster, producer or
consumer; a denied operation raises AccessDenied and changes nothing."""

from __future__ import annotations

import pytest

from engine import Cluster, Consumer, Principal, Producer, TopicPartition, errors

ALICE = Principal("alice", ("dev",))
BOB = Principal("bob", ("ops",))
MALLORY = Principal("mallory", ())


@pytest.fixture
def as_alice(cluster_path):
    with Cluster.open(cluster_path, principal=ALICE) as c:
        c.create_stream(
            "/s",
            ttl=0,
            produce_perm="u:<creator> | g:ops",
            consume_perm="g:dev | g:ops",
            topic_perm="u:<creator>",
            admin_perm="u:<creator>",
        )
        c.create_topic("/s:t", partitions=2)
        yield c


def other(cluster, principal):
    return Cluster.open(cluster.path, principal=principal)


def test_creator_is_whoever_created_the_stream(as_alice):
    info = as_alice.stream("/s")
    assert info.creator == "alice"
    assert info.policies["topic_perm"] == "u:<creator>"


def test_default_principal_is_the_operating_system_user(cluster):
    cluster.create_stream("/d")
    assert cluster.stream("/d").creator == Principal.current().user


def test_produce_perm(as_alice):
    with other(as_alice, MALLORY) as c:
        with pytest.raises(errors.AccessDenied) as info:
            Producer(c, acks=1).send("/s:t", value=b"no")
        assert "produce_perm" in str(info.value) and "mallory" in str(info.value)
    with other(as_alice, BOB) as c:  # g:ops may produce
        p = Producer(c, acks=1)
        assert p.send("/s:t", value=b"ops", partition=0).get(timeout=10).offset == 0
        p.close()
    # a producer's own principal wins over its cluster's
    p = Producer(as_alice, acks=1, principal=MALLORY)
    with pytest.raises(errors.AccessDenied):
        p.send("/s:t", value=b"no")
    p.close()
    assert as_alice.topic("/s:t").messages == 1


def test_consume_perm_checked_at_assign_and_subscribe(as_alice):
    with other(as_alice, MALLORY) as c:
        consumer = Consumer(c, enable_auto_commit=False)
        with pytest.raises(errors.AccessDenied):
            consumer.assign([TopicPartition("/s:t", 0)])
        with pytest.raises(errors.AccessDenied):
            consumer.subscribe(["/s:t"])
        with pytest.raises(errors.AccessDenied):
            Consumer(c, "/s:t", group_id="g")
        # a pattern only matches what the principal may read
        consumer.subscribe(pattern="/s:.*")
        assert consumer.poll(timeout_ms=10) == {}
        assert consumer.assignment() == set()
        consumer.close()
    with other(as_alice, BOB) as c:
        consumer = Consumer(c, enable_auto_commit=False)
        consumer.assign([TopicPartition("/s:t", 0)])
        assert consumer.assignment() == {TopicPartition("/s:t", 0)}
        consumer.close()


def test_topic_perm_for_create_delete_add_partitions_and_auto_create(as_alice):
    with other(as_alice, BOB) as c:
        with pytest.raises(errors.AccessDenied):
            c.create_topic("/s:new")
        with pytest.raises(errors.AccessDenied):
            c.delete_topic("/s:t")
        with pytest.raises(errors.AccessDenied):
            c.add_partitions("/s:t", 3)
        # bob may produce (g:ops) but not create topics by producing
        with pytest.raises(errors.AccessDenied) as info:
            Producer(c, acks=1).send("/s:auto", value=b"x")
        assert "topic_perm" in str(info.value)
    assert as_alice.topic_count("/s") == 1
    assert as_alice.topic("/s:t").partition_count == 2
    as_alice.create_topic("/s:new")
    as_alice.delete_topic("/s:new")


def test_admin_perm_for_policies_and_deletion_and_group_perms_for_resets(as_alice):
    as_alice.reset_offsets("g", "/s:t", "earliest")  # alice creates the group, so owns it
    with other(as_alice, BOB) as c:
        with pytest.raises(errors.AccessDenied):
            c.edit_stream("/s", ttl=5)
        with pytest.raises(errors.AccessDenied):
            c.delete_stream("/s")
        # resetting a group is its own reset_perm (docs/WIRE.md, Group permissions), not the
        # stream's admin_perm: bob may consume /s but the group is alice's
        with pytest.raises(errors.GroupAccessDenied):
            c.reset_offsets("g", "/s:t", "earliest")
    assert as_alice.stream("/s").policies["ttl"] == 0
    as_alice.edit_stream("/s", admin_perm="u:<creator> | u:bob")
    with other(as_alice, BOB) as c:
        c.edit_stream("/s", ttl=5)
    assert as_alice.stream("/s").policies["ttl"] == 5


def test_every_operator_in_a_policy(as_alice):
    as_alice.edit_stream("/s", consume_perm="(g:dev & !u:alice) | p & !g:ops")
    # p & !g:ops: everyone outside ops; g:dev & !u:alice: dev members but alice
    cases = {Principal("carol", ("dev",)): True, ALICE: True, BOB: False, MALLORY: True}
    for who, allowed in cases.items():
        consumer = Consumer(as_alice, enable_auto_commit=False, principal=who)
        if allowed:
            consumer.assign([TopicPartition("/s:t", 0)])
        else:
            with pytest.raises(errors.AccessDenied):
                consumer.assign([TopicPartition("/s:t", 0)])
        consumer.close()


def test_invalid_ace_is_refused_with_its_column(as_alice):
    with pytest.raises(errors.InvalidPolicy) as info:
        as_alice.edit_stream("/s", produce_perm="u:alice |")
    assert "column" in str(info.value)
    assert as_alice.stream("/s").policies["produce_perm"] == "u:<creator> | g:ops"
