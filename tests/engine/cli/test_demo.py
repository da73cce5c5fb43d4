"""`engine.demo.seed`: the data set of `plet demo`, seeded once, through the public API."""

from __future__ import annotations

import dataclasses
import json

import pytest

from engine import Consumer, TopicPartition
from engine.demo import DemoSummary, seed
from tests.timing import scaled


def _records(cluster, name: str) -> list:
    """Every message of `name`, partition by partition, in offset order."""
    consumer = Consumer(cluster, enable_auto_commit=False)
    try:
        info = cluster.topic(name)
        tps = [TopicPartition(name, p.partition) for p in info.partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        wanted = info.messages
        got: list = []
        for _ in range(200):
            batch = consumer.poll(timeout_ms=100, max_records=1000)
            got.extend(r for part in batch.values() for r in part)
            if len(got) >= wanted:
                break
        return sorted(got, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def test_seed_creates_everything_once(cluster):
    summary = seed(cluster)
    assert isinstance(summary, DemoSummary)
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.messages_produced = 0  # type: ignore[misc]  # the assignment a frozen dataclass refuses

    assert set(summary.streams_created) == set(summary.streams)
    assert set(summary.topics_created) == set(summary.topics)
    assert set(summary.streams) == {"/apps/sensors", "/apps/clicks", "/apps/profiles", "/ops/logs"}
    assert "/apps/clicks:web" in summary.topics
    total = sum(cluster.topic(name).messages for name in summary.topics)
    assert summary.messages_produced == total > 0
    for name, count in summary.samples:
        assert name in summary.topics and count > 0
    assert summary.samples[0][0].startswith("/apps/sensors:")

    again = seed(cluster)
    assert again.streams_created == ()
    assert again.topics_created == ()
    assert again.messages_produced == 0
    assert again.groups_committed == ()
    assert sum(cluster.topic(name).messages for name in summary.topics) == total
    assert again.streams == summary.streams and again.topics == summary.topics


def test_seed_policies(cluster):
    seed(cluster)
    sensors = cluster.stream("/apps/sensors").policies
    assert sensors["ttl"] == 86400 and sensors["default_partitions"] == 3
    assert cluster.stream("/apps/profiles").policies["compact"] is True
    assert cluster.stream("/ops/logs").policies["timestamp_type"] == "log_append"
    assert cluster.topic("/apps/sensors:car-17").partition_count == 3


def test_seed_sensor_readings_are_keyed_with_units(cluster):
    seed(cluster)
    records = _records(cluster, "/apps/sensors:car-17")
    assert {r.partition for r in records} == {0, 1, 2}  # the sample shows partition 0
    partition_of: dict = {}
    for record in records:
        assert record.key
        assert partition_of.setdefault(record.key, record.partition) == record.partition
        assert [name for name, _ in record.headers] == ["unit"]
        float(record.value)
    for number in (0, 1, 2):
        stamps = [r.timestamp for r in records if r.partition == number]
        assert stamps == sorted(stamps)


def test_seed_profiles_have_overwrites_and_a_tombstone(cluster):
    seed(cluster)
    records = _records(cluster, "/apps/profiles:users")
    keys = [r.key for r in records]
    assert len(keys) > len(set(keys))  # some keys are overwritten
    tombstones = [r for r in records if r.value is None]
    assert len(tombstones) == 1
    assert all(json.loads(r.value)["email"] for r in records if r.value is not None)


def test_seed_logs_use_log_append_time(cluster):
    seed(cluster)
    records = _records(cluster, "/ops/logs:api")
    assert records
    assert {r.timestamp_type for r in records} == {1}
    assert all(json.loads(r.value)["level"] for r in records)
    assert all(dict(r.headers)["host"].startswith(b"api-") for r in records)


def test_seed_leaves_a_group_with_lag(cluster):
    seed(cluster)
    info = cluster.topic("/apps/clicks:web")
    consumer = Consumer(cluster, group_id="analytics", enable_auto_commit=False)
    try:
        for part in info.partitions:
            committed = consumer.committed(TopicPartition(info.name, part.partition))
            assert committed == part.log_end_offset // 2
    finally:
        consumer.close()


def test_seed_keeps_existing_streams_and_messages(cluster):
    cluster.create_stream("/apps/sensors", ttl=60)
    cluster.create_topic("/apps/sensors:car-17", partitions=1)
    from engine import Producer

    producer = Producer(cluster, acks=1)
    producer.send("/apps/sensors:car-17", value=b"mine").get(timeout=scaled(10))
    producer.close()

    summary = seed(cluster)
    assert "/apps/sensors" not in summary.streams_created
    assert "/apps/sensors:car-17" not in summary.topics_created
    assert cluster.stream("/apps/sensors").policies["ttl"] == 60  # left alone
    assert [r.value for r in _records(cluster, "/apps/sensors:car-17")] == [b"mine"]
    assert cluster.topic("/apps/sensors:car-42").messages > 0  # the rest is seeded
