"""`Producer.send_batch`: a run of messages for one partition, checked as a whole, written
in one stored batch at consecutive offsets (how the wire listener appends a client's
record batch)."""

from __future__ import annotations

import pytest

from engine import Consumer, Producer, TopicPartition, errors
from tests.timing import scaled

T = "/s:t"


@pytest.fixture
def stream(cluster):
    cluster.create_stream("/s", ttl=0, max_message_bytes=1000)
    cluster.create_topic(T, partitions=2)
    return cluster


def read(cluster, partition=1):
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(T, partition)])
    out = []
    while got := consumer.poll(timeout_ms=200):
        out.extend(r for records in got.values() for r in records)
    consumer.close()
    return out


def test_a_run_lands_in_order_at_consecutive_offsets_with_its_columns(stream):
    with Producer(stream, acks="all") as producer:
        single = producer.send(T, value=b"before", partition=1)
        future = producer.send_batch(
            T,
            1,
            [b"a", None, b"c"],
            keys=[b"k1", b"k2", None],
            headers=[[("h", b"1")], None, [("x", None)]],
            timestamps_ms=[1_000, 3_000, 2_000],
        )
        after = producer.send(T, value=b"after", partition=1)
        producer.flush()
        first = future.get(timeout=scaled(10))
    assert (single.get().offset, first.offset, after.get().offset) == (0, 1, 4)
    assert (first.topic, first.partition, first.timestamp) == (T, 1, 1_000)
    records = read(stream)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records[1:4]] == [
        (1, b"k1", b"a", 1_000),
        (2, b"k2", None, 3_000),
        (3, None, b"c", 2_000),
    ]
    assert [r.headers for r in records[1:4]] == [[("h", b"1")], [], [("x", None)]]
    assert [r.value for r in records] == [b"before", b"a", None, b"c", b"after"]


def test_one_bad_message_refuses_the_whole_run(stream):
    with Producer(stream, acks=1) as producer:
        with pytest.raises(errors.MessageTooLarge, match="message 2 of the batch"):
            producer.send_batch(T, 1, [b"ok", b"ok", b"x" * 1001])
        with pytest.raises(errors.InvalidArgument, match="timestamps_ms"):
            producer.send_batch(T, 1, [b"a", b"b"], timestamps_ms=[5, -1])
        with pytest.raises(errors.InvalidArgument, match="keys has 1 entries for 2 values"):
            producer.send_batch(T, 1, [b"a", b"b"], keys=[b"k"])
        with pytest.raises(errors.InvalidArgument, match="header name must be a str"):
            producer.send_batch(T, 1, [b"a"], headers=[[(b"bytes-name", b"v")]])
        with pytest.raises(errors.InvalidPartition):
            producer.send_batch(T, 2, [b"a"])
        with pytest.raises(errors.InvalidArgument, match="at least one"):
            producer.send_batch(T, 1, [])
        producer.flush()
    assert read(stream) == []


def test_acks_zero_and_serializers(stream):
    with Producer(
        stream, acks=0, value_serializer=str.encode, key_serializer=str.encode
    ) as producer:
        future = producer.send_batch(T, 0, ["x", "y"], keys=["a", None])
        assert future.get().offset == -1
    records = read(stream, partition=0)
    assert [(r.key, r.value) for r in records] == [(b"a", b"x"), (None, b"y")]
