"""`Consumer.poll_arrow` (issue 15, item 6): the records `poll` reads, as one
`pyarrow.RecordBatch` per partition with the Kafka source's columns, reading the same way
(positions, pause, ttl, permissions) across batches, partitions, compressed batches and
compacted ones (offset deltas)."""

from __future__ import annotations

import sys
import time

import pyarrow as pa
import pytest

from engine import Consumer, Principal, Producer, TopicPartition, errors
from engine.client.arrow import schema

T0 = 1_700_000_000_000
SPARK_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                 "headers"]  # fmt: skip


def produce(cluster, topic: str, count: int, partitions: int, first: int = 0) -> None:
    # a linger far longer than the run: only the flush every 40 sends cuts a batch, however
    # late the sender thread gets to run on a busy machine
    with Producer(cluster, acks=1, linger_ms=600_000) as producer:
        for i in range(first, first + count):
            producer.send(
                topic,
                key=None if i % 11 == 0 else b"k%d" % (i % 13),
                value=None if i % 17 == 16 else b"value-%d" % i,
                partition=i % partitions,
                headers=[("seq", b"%d" % i), ("empty", None)] if i % 5 == 0 else None,
                timestamp_ms=T0 + i,
            )
            if i % 40 == 39:
                producer.flush()


def rows_of_poll(consumer: Consumer, limit: int) -> dict[int, list[tuple]]:
    got: dict[int, list[tuple]] = {}
    while polled := consumer.poll(max_records=limit):
        for tp, records in polled.items():
            got.setdefault(tp.partition, []).extend(
                (
                    r.topic,
                    r.partition,
                    r.offset,
                    r.timestamp,
                    r.timestamp_type,
                    r.key,
                    r.value,
                    list(r.headers),
                )  # fmt: skip
                for r in records
            )
    return got


def rows_of_arrow(consumer: Consumer, limit: int) -> dict[int, list[tuple]]:
    got: dict[int, list[tuple]] = {}
    while polled := consumer.poll_arrow(max_records=limit):
        assert sum(rb.num_rows for rb in polled.values()) <= limit
        for tp, rb in polled.items():
            assert isinstance(rb, pa.RecordBatch) and rb.schema == schema()
            assert rb.schema.names == SPARK_COLUMNS
            for r in rb.to_pylist():
                assert r["partition"] == tp.partition and r["topic"] == tp.topic
                got.setdefault(tp.partition, []).append(
                    (r["topic"], r["partition"], r["offset"],
                     round(r["timestamp"].timestamp() * 1000), r["timestampType"], r["key"],
                     r["value"], [(h["key"], h["value"]) for h in r["headers"] or []])
                )  # fmt: skip
    return got


def both(cluster, topic: str, partitions: int, limit: int):
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    a = Consumer(cluster, auto_offset_reset="earliest")
    a.assign(tps)
    b = Consumer(cluster, auto_offset_reset="earliest")
    b.assign(tps)
    polled, arrowed = rows_of_poll(a, limit), rows_of_arrow(b, limit)
    for tp in tps:
        assert a.position(tp) == b.position(tp)
    return polled, arrowed


@pytest.mark.parametrize("codec", ["none", "zstd", "lz4"])
@pytest.mark.parametrize("limit", [7, 500, 100_000])
def test_poll_arrow_returns_what_poll_returns(cluster, codec, limit):
    cluster.create_stream("/a", compression=codec, ttl=0)
    cluster.create_topic("/a:t", partitions=3)
    produce(cluster, "/a:t", 600, 3)
    polled, arrowed = both(cluster, "/a:t", 3, limit)
    assert sum(map(len, polled.values())) == 600
    assert arrowed == polled


def test_poll_arrow_reads_compacted_batches_with_offset_gaps(cluster):
    cluster.create_stream("/c", compact=True, ttl=0, delete_retention_ms=0, compression="zstd")
    cluster.create_topic("/c:t", partitions=2)
    produce(cluster, "/c:t", 500, 2)
    assert cluster.compact().messages_removed > 300
    polled, arrowed = both(cluster, "/c:t", 2, 9)
    offsets = [row[2] for row in polled[0]]
    assert offsets != list(range(len(offsets)))  # gaps: batches with offset deltas
    assert arrowed == polled


def test_positions_pause_and_seek_as_poll(cluster):
    cluster.create_stream("/p", ttl=0)
    cluster.create_topic("/p:t", partitions=2)
    produce(cluster, "/p:t", 100, 2)
    tp0, tp1 = TopicPartition("/p:t", 0), TopicPartition("/p:t", 1)
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([tp0, tp1])
    consumer.pause(tp1)
    got = consumer.poll_arrow(max_records=30)
    assert list(got) == [tp0] and got[tp0]["offset"].to_pylist() == list(range(30))
    assert consumer.position(tp0) == 30
    consumer.resume(tp1)
    consumer.seek(tp0, 45)
    got = consumer.poll_arrow(max_records=1000)
    assert got[tp0]["offset"].to_pylist() == list(range(45, 50))
    assert got[tp1]["offset"].to_pylist() == list(range(50))
    assert consumer.poll_arrow() == {}
    produce(cluster, "/p:t", 2, 2, first=100)  # new messages are found, as by poll
    got = consumer.poll_arrow(timeout_ms=2000)
    assert {tp: rb["offset"].to_pylist() for tp, rb in got.items()} == {tp0: [50], tp1: [50]}


def test_expired_messages_stay_hidden(cluster):
    cluster.create_stream("/e", ttl=3600)
    now = time.time_ns() // 1_000_000
    with Producer(cluster, acks=1) as producer:
        for i in range(20):  # 12 two hours old, then 8 fresh, in one batch
            producer.send("/e:t", value=b"%d" % i, timestamp_ms=now - 7_200_000 if i < 12 else now)
        producer.flush()
        for i in range(20, 25):  # a whole batch expired after them
            producer.send("/e:t", value=b"%d" % i, timestamp_ms=now - 7_200_000)
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("/e:t", 0)])
    got = consumer.poll_arrow(max_records=1000)
    rb = got[TopicPartition("/e:t", 0)]
    assert rb["value"].to_pylist() == [b"%d" % i for i in range(12, 20)]
    assert consumer.position(TopicPartition("/e:t", 0)) == 25


def test_permissions_are_checked_as_for_poll(cluster):
    cluster.create_stream("/private", consume_perm="u:alice", ttl=0)
    produce(cluster, "/private:t", 3, 1)
    bob = Consumer(cluster, principal=Principal("bob"))
    with pytest.raises(errors.AccessDenied):
        bob.assign([TopicPartition("/private:t", 0)])
    with pytest.raises(errors.IllegalState, match="poll_arrow"):
        bob.poll_arrow()
    alice = Consumer(cluster, principal=Principal("alice"), auto_offset_reset="earliest")
    alice.assign([TopicPartition("/private:t", 0)])
    assert alice.poll_arrow()[TopicPartition("/private:t", 0)].num_rows == 3
    with pytest.raises(errors.InvalidArgument, match="max_records"):
        alice.poll_arrow(max_records=0)


def test_without_pyarrow_the_error_says_how_to_install_it(cluster, monkeypatch):
    cluster.create_stream("/n", ttl=0)
    produce(cluster, "/n:t", 3, 1)
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("/n:t", 0)])
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"pip install 'partitionlet\[spark\]'"):
        consumer.poll_arrow()
    assert consumer.position(TopicPartition("/n:t", 0)) == 0  # nothing was read


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_poll_arrow_batches_is_poll_arrow_cut_at_the_stored_batches(cluster, codec):
    # a list per partition, one RecordBatch per stored batch read (their keys and values
    # not copied into one), in offset order: joined, exactly what poll_arrow gives
    cluster.create_stream("/b", compression=codec, ttl=0)
    cluster.create_topic("/b:t", partitions=2)
    produce(cluster, "/b:t", 400, 2)  # flushed every 40 sends: 10 stored batches a partition
    tps = [TopicPartition("/b:t", p) for p in range(2)]
    joined, cut = (Consumer(cluster, auto_offset_reset="earliest") for _ in range(2))
    joined.assign(tps)
    cut.assign(tps)
    for limit in (7, 90, 100_000):
        whole, parts = (
            joined.poll_arrow(max_records=limit),
            cut.poll_arrow_batches(max_records=limit),
        )
        assert set(parts) == set(whole)
        for tp, batches in parts.items():
            assert all(isinstance(b, pa.RecordBatch) and b.num_rows for b in batches)
            assert pa.Table.from_batches(batches).to_pylist() == whole[tp].to_pylist()
            assert cut.position(tp) == joined.position(tp)
    last = cut.poll_arrow_batches(max_records=100_000)
    assert last == {} and not joined.poll_arrow(max_records=100_000)
    cut.seek(tps[0], 0)
    first = cut.poll_arrow_batches(max_records=1_000)[tps[0]]
    assert len(first) == 10 and sum(b.num_rows for b in first) == 200
