"""Per-partition offset resets with a preview (`plan_offset_reset`, `apply_offset_reset`,
`reset_offsets(..., partitions=)`), shift-by, and `delete_group`, on a real cluster."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from engine import Consumer, OffsetAndMetadata, Producer, TopicPartition, errors
from engine.auth.principal import Principal
from engine.records import MemberInfo, OffsetResetPlan

TOPIC = "/s:t"
T0 = 1_767_225_600_000  # message i of a partition is at T0 + i s


@pytest.fixture
def seeded(cluster):
    """/s:t with 3 partitions of 10 messages; group g committed 4 in partition 0 and 7 in 1
    (nothing in 2), then left."""
    cluster.create_stream("/s", default_partitions=3, ttl=0)
    cluster.create_topic(TOPIC)
    producer = Producer(cluster)
    for partition in range(3):
        for i in range(10):
            producer.send(TOPIC, value=b"x", partition=partition, timestamp_ms=T0 + i * 1000)
    producer.flush()
    producer.close()
    commit(cluster, {0: 4, 1: 7})
    return cluster


def commit(cluster, offsets: dict[int, int], group: str = "g") -> None:
    consumer = Consumer(cluster, group_id=group, enable_auto_commit=False)
    consumer.assign([TopicPartition(TOPIC, p) for p in offsets])
    consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o) for p, o in offsets.items()})
    consumer.close()


def committed(cluster, group: str = "g") -> dict[int, int | None]:
    return {p.partition: p.committed for p in cluster.group(group).partitions}


def test_plan_per_partition_and_apply_does_exactly_it(seeded):
    plan = seeded.plan_offset_reset("g", TOPIC, "shift:+3", partitions=[1, 0])
    assert plan == [
        OffsetResetPlan(TOPIC, 0, 4, 7, 0, 10),
        OffsetResetPlan(TOPIC, 1, 7, 10, 0, 10),  # 7 + 3 = 10, the log end
    ]
    assert [(p.lag_before, p.lag_after) for p in plan] == [(6, 3), (3, 0)]
    assert committed(seeded) == {0: 4, 1: 7}  # planning changes nothing
    result = seeded.apply_offset_reset("g", plan)
    assert result == {TopicPartition(TOPIC, p.partition): p.new for p in plan}
    assert committed(seeded) == {0: 7, 1: 10}


def test_reset_offsets_applies_what_the_plan_says(seeded):
    moment = datetime.fromtimestamp((T0 + 6000) / 1000, UTC)
    for to in ("earliest", "latest", 5, 99, moment, "shift:-2"):
        plan = seeded.plan_offset_reset("g", TOPIC, to, partitions=[0, 1])
        result = seeded.reset_offsets("g", TOPIC, to, partitions=[0, 1])
        assert result == {TopicPartition(TOPIC, p.partition): p.new for p in plan}
        assert committed(seeded) == {p.partition: p.new for p in plan}


def test_shift_is_clamped_to_the_log_as_kafka_does(seeded):
    seeded.reset_offsets("g", TOPIC, "shift:-100", partitions=[0])
    seeded.reset_offsets("g", TOPIC, "shift:+100", partitions=[1])
    assert committed(seeded) == {0: 0, 1: 10}
    seeded.reset_offsets("g", TOPIC, "shift:+4", partitions=[0])
    assert committed(seeded) == {0: 4, 1: 10}


def test_a_partition_subset_leaves_the_others(seeded):
    assert seeded.reset_offsets("g", TOPIC, "earliest", partitions=[2]) == {
        TopicPartition(TOPIC, 2): 0
    }
    assert committed(seeded) == {0: 4, 1: 7, 2: 0}
    # without partitions: every partition, as before
    seeded.reset_offsets("g", TOPIC, "latest")
    assert committed(seeded) == {0: 10, 1: 10, 2: 10}


@pytest.mark.parametrize(
    ("to", "partitions", "error", "message"),
    [
        ("shift:x", None, errors.InvalidOffset, "shift:-N"),
        ("shift:", None, errors.InvalidOffset, "shift:-N"),
        ("shift:-1", [2], errors.InvalidOffset, "no committed offset"),
        ("shift:-1", None, errors.InvalidOffset, "no committed offset"),  # partition 2
        (-1, None, errors.InvalidOffset, "offset >= 0"),
        ("earliest", [3], errors.InvalidPartition, "partitions 0 to 2, not 3"),
        ("earliest", [-1], errors.InvalidPartition, "not -1"),
        ("earliest", ["0"], errors.InvalidPartition, "whole number"),
        ("earliest", [], errors.InvalidArgument, "at least one"),
        ("earliest", "0", errors.InvalidArgument, "list of partition numbers"),
    ],
)
def test_bad_targets_and_partitions_are_refused(seeded, to, partitions, error, message):
    with pytest.raises(error, match=message):
        seeded.plan_offset_reset("g", TOPIC, to, partitions=partitions)
    with pytest.raises(error, match=message):
        seeded.reset_offsets("g", TOPIC, to, partitions=partitions)
    assert committed(seeded) == {0: 4, 1: 7}


def test_apply_refuses_a_plan_overtaken_by_a_commit(seeded):
    plan = seeded.plan_offset_reset("g", TOPIC, "earliest")
    commit(seeded, {1: 8})
    with pytest.raises(errors.IllegalState, match="changed since the plan"):
        seeded.apply_offset_reset("g", plan)
    assert committed(seeded) == {0: 4, 1: 8}  # nothing of the plan was applied
    with pytest.raises(errors.InvalidArgument):
        seeded.apply_offset_reset("g", [])


def test_live_engine_members_refuse_plan_reset_and_delete(seeded):
    consumer = Consumer(seeded, TOPIC, group_id="g", enable_auto_commit=False)
    try:
        consumer.poll(timeout_ms=500)  # joins
        plan = [OffsetResetPlan(TOPIC, 0, 4, 0, 0, 10)]
        for call in (
            lambda: seeded.plan_offset_reset("g", TOPIC, "earliest"),
            lambda: seeded.reset_offsets("g", TOPIC, "earliest", partitions=[0]),
            lambda: seeded.apply_offset_reset("g", plan),
            lambda: seeded.delete_group("g"),
        ):
            with pytest.raises(errors.IllegalState, match="live member"):
                call()
    finally:
        consumer.close()
    assert committed(seeded) == {0: 4, 1: 7}


def test_live_wire_members_refuse_delete(seeded):
    now = time.time_ns() // 1_000_000
    member = MemberInfo("wire-1", "kafka-python", "/127.0.0.1", (TopicPartition(TOPIC, 0),), now)
    seeded.publish_group("g", [member], protocol="range", generation=1, session_ms=60_000)
    with pytest.raises(errors.IllegalState, match="live member"):
        seeded.delete_group("g")
    with pytest.raises(errors.IllegalState, match="live member"):
        seeded.plan_offset_reset("g", TOPIC, "earliest")
    seeded.publish_group("g", [], protocol="range", generation=2, session_ms=60_000)
    seeded.delete_group("g")
    assert [g.group_id for g in seeded.groups()] == []


def test_delete_group_removes_offsets_and_state(seeded):
    commit(seeded, {0: 1}, group="other")
    consumer = Consumer(seeded, TOPIC, group_id="g", enable_auto_commit=False)
    consumer.poll(timeout_ms=500)  # leaves an assignment behind
    consumer.close()
    seeded.delete_group("g")
    assert [g.group_id for g in seeded.groups()] == ["other"]
    with pytest.raises(errors.UnknownGroup):
        seeded.group("g")
    with pytest.raises(errors.UnknownGroup):
        seeded.delete_group("g")
    with pytest.raises(errors.InvalidArgument):
        seeded.delete_group("")
    # a group of the same name starts afresh
    fresh = Consumer(seeded, group_id="g", enable_auto_commit=False)
    assert fresh.committed(TopicPartition(TOPIC, 0)) is None
    fresh.close()


def test_delete_and_plan_need_the_groups_delete_and_reset_perm(seeded):
    """g is the cluster owner's (its creator): bob, who may consume /s, may neither reset
    nor delete it (engine.groups.perms; stream admin_perm no longer decides)."""
    seeded.edit_stream("/s", consume_perm="p")
    bob = seeded.as_principal(Principal("bob"))
    with pytest.raises(errors.AccessDenied):
        bob.delete_group("g")
    with pytest.raises(errors.AccessDenied):
        bob.plan_offset_reset("g", TOPIC, "earliest")
    with pytest.raises(errors.AccessDenied):
        bob.apply_offset_reset("g", [OffsetResetPlan(TOPIC, 0, 4, 0, 0, 10)])
    assert committed(seeded) == {0: 4, 1: 7}


def test_unknown_topic_and_group(seeded):
    with pytest.raises(errors.UnknownTopic):
        seeded.plan_offset_reset("g", "/s:nope", "earliest")
    with pytest.raises(errors.UnknownGroup):
        seeded.delete_group("nobody")
