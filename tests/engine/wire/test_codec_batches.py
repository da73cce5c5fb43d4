"""The fetch path's encoder (`codec.encode_arrow`): records laid out by column operations
are the very bytes aiokafka's builder makes, and read back as they were stored."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatch

from engine import Consumer, Producer, TopicPartition
from engine.records import LOG_APPEND_TIME
from engine.wire import codec


def _arrow(cluster, topic: str) -> pa.RecordBatch:
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    parts = []
    while got := consumer.poll_arrow(timeout_ms=0, max_records=100_000):
        parts += list(got.values())
    consumer.close()
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


def _read(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
    """(offset, timestamp, key, value, timestamp type) of every record of the v2 batches."""
    out = []
    view = memoryview(data)
    while view:
        length = int.from_bytes(view[8:12], "big") + 12
        batch = DefaultRecordBatch(bytes(view[:length]))
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, batch.timestamp_type))
        view = view[length:]
    return out


def _messages(rng: random.Random, n: int):
    for i in range(n):
        key = rng.choice([None, b"", b"k%d" % i, bytes(rng.randrange(256) for _ in range(200))])
        value = rng.choice([None, b"", b"v" * rng.choice([1, 127, 128, 16_383, 16_384, 70_000])])
        yield key, value, 1_700_000_000_000 + rng.randrange(-5_000_000, 5_000_000)


def test_records_without_headers_are_the_builders_bytes(cluster, monkeypatch):
    monkeypatch.setattr(codec, "_BY_COLUMNS_FROM", 0)  # laid out by columns, whatever size
    cluster.create_stream("/s", ttl=0)
    cluster.create_topic("/s:t", partitions=1)
    rng = random.Random(7)
    sent = list(_messages(rng, 500))
    producer = Producer(cluster, acks=1, linger_ms=0)
    for key, value, ts in sent:
        producer.send("/s:t", value, key=key, partition=0, timestamp_ms=ts)
    producer.flush()
    producer.close()
    cluster.delete_records("/s:t", 0, 3)  # a batch that starts mid-way
    batch = _arrow(cluster, "/s:t")
    for part in (batch, batch.slice(10, 200), batch.slice(497, 0), batch.slice(496, 1)):
        stamps = pa.array(
            [ts // 1000 for ts in part.column("timestamp").cast(pa.int64()).to_pylist()]
        )
        encoded = codec.encode_arrow(part)
        if part.num_rows:
            assert encoded == codec._encode_run_with_builder(part, stamps, False)
        offsets = part.column("offset").to_pylist()
        assert _read(encoded) == [
            (o, ts, key, value, 0)
            for o, (key, value, ts) in zip(offsets, (sent[o] for o in offsets), strict=True)
        ]


@pytest.mark.parametrize("by_columns_from", [0, 1 << 40])
def test_log_append_time_runs_carry_their_time(cluster, monkeypatch, by_columns_from):
    monkeypatch.setattr(codec, "_BY_COLUMNS_FROM", by_columns_from)
    cluster.create_stream("/s", ttl=0, timestamp_type="log_append")
    cluster.create_topic("/s:la", partitions=1)
    producer = Producer(cluster, acks=1, linger_ms=0)
    for _ in range(3):  # three flushes: three log-append times
        for i in range(20):
            producer.send("/s:la", b"v%d" % i, key=None if i % 2 else b"k", partition=0)
        producer.flush()
    producer.close()
    batch = _arrow(cluster, "/s:la")
    assert set(batch.column("timestampType").to_pylist()) == {LOG_APPEND_TIME}
    encoded = codec.encode_arrow(batch)
    read = _read(encoded)
    assert [r[0] for r in read] == list(range(60))
    assert {r[4] for r in read} == {LOG_APPEND_TIME}
    stamps = [ts // 1000 for ts in batch.column("timestamp").cast(pa.int64()).to_pylist()]
    assert [r[1] for r in read] == stamps
    assert [r[2] for r in read] == [None if i % 2 else b"k" for _ in range(3) for i in range(20)]
