"""`Cluster.delete_records`: the log start moves to exactly the offset asked (Kafka's
DeleteRecords), every reader starts there, whole partitionlets below it are dropped (now,
or by retention once a straddling one lies wholly below), with the stream's topic_perm;
bad arguments refused before anything moves."""

from __future__ import annotations

import sqlite3
import time

import pytest

from engine import Cluster, Consumer, Principal, Producer, TopicPartition, errors
from engine.clock import FakeClock

TP = TopicPartition("/s:t", 0)


@pytest.fixture
def rolled(tmp_path):
    with Cluster.open(tmp_path / "c", partitionlet_bytes=250) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic("/s:t")
        with Producer(cluster, acks=1) as producer:
            for _ in range(3):  # three partitionlets of two 150-byte messages
                producer.send("/s:t", value=bytes(150), partition=0)
                producer.send("/s:t", value=bytes(150), partition=0)
                producer.flush()
        yield cluster


def _offsets(cluster, start=None, **kwargs):
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest", **kwargs)
    consumer.assign([TP])
    if start is not None:
        consumer.seek(TP, start)
    got = [r.offset for rs in consumer.poll(timeout_ms=2000).values() for r in rs]
    consumer.close()
    return got


def test_the_log_start_moves_to_the_offset_inside_a_partitionlet(rolled):
    lets = rolled.topic("/s:t").partitions[0].partitionlets
    assert [(p.base_offset, p.last_offset) for p in lets[:3]] == [(0, 1), (2, 3), (4, 5)]
    assert rolled.delete_records("/s:t", 0, 3) == 3  # 3 shares a partitionlet with 2
    part = rolled.topic("/s:t").partitions[0]
    assert (part.log_start_offset, part.log_end_offset) == (3, 6)
    assert [p.base_offset for p in part.partitionlets][:2] == [2, 4]  # [0, 1] went
    # every reader starts there: earliest, a seek below it, beginning_offsets, by time
    assert _offsets(rolled) == [3, 4, 5]
    assert _offsets(rolled, start=0) == [3, 4, 5]
    consumer = Consumer(rolled, enable_auto_commit=False)
    assert consumer.beginning_offsets([TP]) == {TP: 3}
    assert consumer.offsets_for_times({TP: 0})[TP].offset == 3
    consumer.close()
    # a scan (Spark's source) plans from there too
    assert rolled.scan_ranges(["/s:t"], starting="earliest")[TP] == (3, 6)
    assert rolled.delete_records("/s:t", 0, 0) == 3  # below the start: nothing to do


def test_an_assigned_reader_follows_a_delete_at_once(rolled):
    consumer = Consumer(rolled, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TP])
    assert consumer.beginning_offsets([TP]) == {TP: 0}
    rolled.delete_records("/s:t", 0, 5)
    assert consumer.beginning_offsets([TP]) == {TP: 5}
    assert [r.offset for rs in consumer.poll(timeout_ms=2000).values() for r in rs] == [5]
    consumer.close()


def test_a_straddling_partitionlet_stays_until_it_lies_wholly_below(rolled):
    assert rolled.delete_records("/s:t", 0, 5) == 5  # [4, 5] straddles: it stays
    assert rolled.topic("/s:t").partitions[0].partitionlets[0].base_offset == 4
    assert _offsets(rolled) == [5]
    assert rolled.delete_records("/s:t", 0, 6) == 6  # now it lies wholly below: it goes
    part = rolled.topic("/s:t").partitions[0]
    assert [p.base_offset for p in part.partitionlets] == [6]
    assert (part.log_start_offset, part.log_end_offset) == (6, 6)


def test_retention_frees_the_active_partitionlet_once_sealed_below(tmp_path):
    clock = FakeClock(now_ms=int(time.time() * 1000))
    with Cluster.open(tmp_path / "c", partitionlet_ms=60_000, clock=clock) as cluster:
        cluster.create_stream("/s")  # its ttl (7 days) expires nothing here
        cluster.create_topic("/s:t")
        with Producer(cluster, acks=1) as producer:
            producer.send("/s:t", value=b"a" * 100, partition=0).get(timeout=10)
            assert cluster.delete_records("/s:t", 0, 1) == 1  # the active one holds 0
            assert cluster.enforce_retention().partitionlets_dropped == 0  # still active
            clock.advance(61)  # it rolls at the next append
            producer.send("/s:t", value=b"b", partition=0).get(timeout=10)
        report = cluster.enforce_retention()
        assert (report.partitionlets_dropped, report.messages_freed) == (1, 1)
        part = cluster.topic("/s:t").partitions[0]
        assert [p.base_offset for p in part.partitionlets] == [1]
        assert (part.log_start_offset, part.log_end_offset) == (1, 2)
        assert _offsets(cluster) == [1]


def test_past_the_end_is_refused(rolled):
    assert rolled.delete_records("/s:t", 0, 6) == 6  # the log end: all of it
    with pytest.raises(errors.InvalidOffset, match="ends at offset 6"):
        rolled.delete_records("/s:t", 0, 7)


def test_a_catalog_from_before_gets_the_table(tmp_path):
    path = tmp_path / "old"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic("/s:t")
    conn = sqlite3.connect(path / "catalog.db")
    conn.execute("DROP TABLE log_starts")
    conn.commit()
    conn.close()
    with Cluster.open(path) as cluster:
        with Producer(cluster) as producer:
            for i in range(3):
                producer.send("/s:t", value=b"%d" % i, partition=0)
        assert cluster.delete_records("/s:t", 0, 2) == 2
        assert _offsets(cluster) == [2]


def test_deleting_the_topic_forgets_its_start(rolled):
    rolled.delete_records("/s:t", 0, 3)
    rolled.delete_topic("/s:t")
    rolled.create_topic("/s:t")
    assert rolled.topic("/s:t").partitions[0].log_start_offset == 0


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("/s:t", 1, 2), errors.InvalidPartition),
        (("/s:t", True, 2), errors.InvalidPartition),
        (("/s:t", 0, -1), errors.InvalidOffset),
        (("/s:nope", 0, 2), errors.UnknownTopic),
    ],
)
def test_bad_arguments_drop_nothing(rolled, args, error):
    with pytest.raises(error):
        rolled.delete_records(*args)
    assert rolled.topic("/s:t").partitions[0].log_start_offset == 0


def test_topic_perm_is_needed(rolled):
    rolled.edit_stream("/s", topic_perm="u:alice")
    with Cluster.open(rolled.path, principal=Principal("mallory")) as as_mallory:
        with pytest.raises(errors.AccessDenied, match="delete records of"):
            as_mallory.delete_records("/s:t", 0, 4)
    assert rolled.topic("/s:t").partitions[0].log_start_offset == 0
