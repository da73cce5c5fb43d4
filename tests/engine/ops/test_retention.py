"""Retention: the `ttl` policy, enforced by `Cluster.enforce_retention()` (engine.ops.retention),
and the background `Maintenance` thread (engine.ops.maintenance), on real files."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition
from engine.clock import FakeClock, now_ms
from engine.ops.maintenance import Maintenance
from engine.ops.retention import RetentionReport, TopicRetention
from tests.timing import scaled

T = "/r:t"
HOUR_MS = 3_600_000


def drain(consumer, timeout_ms: int = 50) -> list:
    out = []
    for _ in range(10_000):
        got = [r for records in consumer.poll(timeout_ms=timeout_ms).values() for r in records]
        if not got:
            return out
        out.extend(got)
    raise AssertionError("the consumer never caught up")


def reader(cluster, topic=T):
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    return consumer


def send_each(producer, topic, values, **kwargs):
    """One send and one batch per value: its future resolves before the next send."""
    return [producer.send(topic, value=v, **kwargs).get(timeout=10) for v in values]


def partition(cluster, topic=T):
    return cluster.topic(topic).partitions[0]


# --- ttl -----------------------------------------------------------------------------------


def test_ttl_log_append_time_hides_at_once_then_drops_and_offsets_go_on(cluster_path):
    clock = FakeClock(now_ms=now_ms())
    with Cluster.open(cluster_path, partitionlet_bytes=300, clock=clock) as cluster:
        cluster.create_stream("/r", ttl=1, timestamp_type="log_append")
        cluster.create_topic(T, partitions=1)
        producer = Producer(cluster, acks=1)
        # Log-append time: the producer's (far future) timestamps are replaced.
        metas = send_each(
            producer,
            T,
            [b"%03d" % i + b"x" * 60 for i in range(22)],
            timestamp_ms=clock.now_ms() + 24 * HOUR_MS,
        )
        assert [m.offset for m in metas] == list(range(22))
        consumer = reader(cluster)
        assert [r.offset for r in drain(consumer)] == list(range(22))
        before = cluster.partitionlets(T)
        assert len(before) >= 4 and before[-1].active and before[-1].messages > 0

        assert {m.timestamp for m in metas} == {clock.now_ms()}  # the clock stood still
        clock.advance(1.001)  # the ttl of 1 s, and a millisecond
        late = reader(cluster)
        assert drain(late) == []  # expired: hidden at once, before any retention pass
        consumer.seek(TopicPartition(T, 0), 0)
        assert drain(consumer) == []
        assert partition(cluster).log_start_offset == 0  # not dropped yet

        report = cluster.enforce_retention()
        assert isinstance(report, RetentionReport)
        assert report.partitionlets_dropped == len(before)
        assert report.partitionlets_sealed == 1  # the active one, sealed to be dropped
        assert report.messages_freed == 22
        assert report.bytes_freed == sum(p.bytes for p in before)
        assert report.by_topic == {T: TopicRetention(len(before), 22, report.bytes_freed)}

        info = partition(cluster)
        assert (info.log_start_offset, info.log_end_offset) == (22, 22)
        (successor,) = cluster.partitionlets(T)
        assert successor.active and successor.base_offset == 22 and successor.messages == 0
        usage = cluster.stream("/r")
        assert (usage.messages, usage.bytes) == (0, 0)
        assert cluster.enforce_retention() == RetentionReport()  # nothing left to do

        # Offsets go on where they stopped, from the producer that had the old partitionlet
        # cached and from a new one; readers with cached chains follow.
        assert producer.send(T, value=b"after").get(timeout=10).offset == 22
        producer.close()
        with Producer(cluster, acks=1) as other:
            assert other.send(T, value=b"again").get(timeout=10).offset == 23
        assert [(r.offset, r.value) for r in drain(consumer)] == [(22, b"after"), (23, b"again")]
        fresh = reader(cluster)
        assert fresh.beginning_offsets([TopicPartition(T, 0)]) == {TopicPartition(T, 0): 22}
        assert [r.offset for r in drain(fresh)] == [22, 23]
        for c in (consumer, late, fresh):
            c.close()


def test_ttl_create_time_old_timestamp_expires_at_once(cluster):
    cluster.create_stream("/r", ttl=3600)
    cluster.create_topic(T, partitions=1)
    old = now_ms() - 2 * HOUR_MS
    with Producer(cluster, acks=1) as producer:
        metas = send_each(producer, T, [b"a", b"b", b"c"], timestamp_ms=old)
        assert [(m.offset, m.timestamp) for m in metas] == [(0, old), (1, old), (2, old)]
        consumer = reader(cluster)
        assert drain(consumer) == []

        report = cluster.enforce_retention()
        # All three sat in the active partitionlet: sealed, given a successor, dropped.
        assert (
            report.partitionlets_dropped,
            report.partitionlets_sealed,
            report.messages_freed,
        ) == (1, 1, 3)
        info = partition(cluster)
        assert (info.log_start_offset, info.log_end_offset) == (3, 3)

        fresh = producer.send(T, value=b"fresh").get(timeout=10)
        stale = producer.send(T, value=b"stale", timestamp_ms=old).get(timeout=10)
        assert (fresh.offset, stale.offset) == (3, 4)
        assert [r.value for r in drain(consumer)] == [b"fresh"]
        # The active partitionlet still holds a live message: kept, stale one and all.
        assert cluster.enforce_retention().partitionlets_dropped == 0
        assert partition(cluster).log_end_offset == 5
        consumer.close()


def test_only_expired_partitionlets_go_even_in_the_middle(cluster_path):
    # partitionlet_bytes=1: every batch fills its partitionlet, one message each.
    with Cluster.open(cluster_path, partitionlet_bytes=1) as cluster:
        cluster.create_stream("/r", ttl=3600)
        cluster.create_topic(T, partitions=1)
        old, new = now_ms() - 2 * HOUR_MS, now_ms()
        stamps = [old, old, new, old, new, new, old]
        with Producer(cluster, acks=1) as producer:
            for i, ts in enumerate(stamps):
                producer.send(T, value=b"%d" % i, timestamp_ms=ts).get(timeout=10)
        assert len(cluster.partitionlets(T)) == len(stamps) + 1  # and an empty active one
        consumer = reader(cluster)
        expected = [i for i, ts in enumerate(stamps) if ts == new]
        assert [r.offset for r in drain(consumer)] == expected
        consumer.seek(TopicPartition(T, 0), 0)

        report = cluster.enforce_retention()
        assert report.partitionlets_dropped == 4 and report.messages_freed == 4
        assert report.partitionlets_sealed == 0
        info = partition(cluster)
        assert (info.log_start_offset, info.log_end_offset) == (2, 7)
        assert [p.base_offset for p in cluster.partitionlets(T)] == [2, 4, 5, 7]
        # The reader had the whole chain cached: it skips the gaps, offsets unchanged.
        assert [(r.offset, r.value) for r in drain(consumer)] == [(i, b"%d" % i) for i in expected]
        assert [r.offset for r in drain(reader(cluster))] == expected
        assert cluster.stream("/r").messages == len(expected)
        consumer.close()


def test_ttl_zero_keeps_forever_and_other_streams_are_untouched(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1) as cluster:
        cluster.create_stream("/keep", ttl=0)
        cluster.create_stream("/r", ttl=3600)
        with Producer(cluster, acks=1) as producer:
            send_each(producer, "/keep:t", [b"1", b"2", b"3"], timestamp_ms=1)
            send_each(producer, "/r:fresh", [b"1", b"2"])
        report = cluster.enforce_retention()
        assert report == RetentionReport()
        assert [r.value for r in drain(reader(cluster, "/keep:t"))] == [b"1", b"2", b"3"]
        assert partition(cluster, "/keep:t").log_start_offset == 0
        assert len(cluster.partitionlets("/keep:t")) == 4


def test_empty_partitions_and_clusters_are_left_alone(cluster):
    assert cluster.enforce_retention() == RetentionReport()
    cluster.create_stream("/r", ttl=1)
    cluster.create_topic(T, partitions=3)
    assert cluster.enforce_retention() == RetentionReport()
    with Producer(cluster, acks=1) as producer:
        producer.send(T, value=b"x", partition=1).get(timeout=10)
    assert cluster.enforce_retention() == RetentionReport()
    assert [p.log_end_offset for p in cluster.topic(T).partitions] == [0, 1, 0]


def test_a_drop_interrupted_after_the_purge_is_finished_next_time(cluster_path):
    """Volume first, catalog second: a crash between leaves a catalog row whose volume row
    is a tombstone; readers skip it and the next pass removes it."""
    with Cluster.open(cluster_path, partitionlet_bytes=1) as cluster:
        cluster.create_stream("/r", ttl=3600)
        cluster.create_topic(T, partitions=1)
        with Producer(cluster, acks=1) as producer:
            producer.send(T, value=b"old", timestamp_ms=now_ms() - 2 * HOUR_MS).get(timeout=10)
            producer.send(T, value=b"new").get(timeout=10)
        first = cluster.partitionlets(T)[0]
        cluster.volume(first.volume).drop([first.id])  # the "crash": catalog untouched
        assert [r.value for r in drain(reader(cluster))] == [b"new"]
        report = cluster.enforce_retention()
        assert (report.partitionlets_dropped, report.messages_freed) == (1, 0)
        assert partition(cluster).log_start_offset == 1
        assert [r.value for r in drain(reader(cluster))] == [b"new"]


def test_dropping_bumps_the_topology_version(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1) as cluster:
        cluster.create_stream("/r", ttl=3600)
        with Producer(cluster, acks=1) as producer:
            producer.send(T, value=b"old", timestamp_ms=1).get(timeout=10)
        version = cluster.catalog.topology_version()
        assert cluster.enforce_retention().partitionlets_dropped == 1
        assert cluster.catalog.topology_version() > version


def test_two_clusters_objects_on_one_directory_agree(cluster_path):
    """Retention run from one process's view is seen by another's readers and writers."""
    with Cluster.open(cluster_path) as a, Cluster.open(cluster_path) as b:
        a.create_stream("/r", ttl=3600)
        a.create_topic(T, partitions=1)
        with Producer(a, acks=1) as producer:
            send_each(producer, T, [b"1", b"2"], timestamp_ms=1)
        consumer = reader(b)
        assert drain(consumer) == []
        assert b.enforce_retention().partitionlets_dropped == 1
        with Producer(a, acks=1) as producer:
            assert producer.send(T, value=b"3").get(timeout=10).offset == 2
        assert [r.offset for r in drain(consumer)] == [2]
        consumer.close()


def test_retention_while_a_producer_appends_loses_nothing_live(cluster_path):
    """Expired partitionlets go while a producer appends (the active one sealed under it);
    offsets stay dense and unique, and every message that has not expired stays."""
    with Cluster.open(cluster_path, partitionlet_bytes=300) as cluster:
        cluster.create_stream("/r", ttl=3600)
        cluster.create_topic(T, partitions=1)
        stop = threading.Event()
        reports: list[RetentionReport] = []
        errors = []

        def retaining():
            try:
                with Cluster.open(cluster_path) as other:  # its own connections
                    while not stop.is_set():
                        reports.append(other.enforce_retention())
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        thread = threading.Thread(target=retaining)
        thread.start()
        futures = []
        try:
            with Producer(cluster, acks=1) as producer:
                for n in range(600):
                    fresh = n % 40 == 39
                    futures.append(
                        (
                            n,
                            fresh,
                            producer.send(
                                T, value=b"%d" % n, timestamp_ms=now_ms() if fresh else 1
                            ),
                        )
                    )
                    if n % 5 == 4:
                        producer.flush()
                        time.sleep(0.001)
        finally:
            stop.set()
            thread.join()
        assert not errors
        offsets = {n: f.get(timeout=10).offset for n, _, f in futures}
        assert sorted(offsets.values()) == list(range(600))
        assert sum(r.partitionlets_dropped for r in reports) > 0
        cluster.enforce_retention()
        live = sorted((offsets[n], b"%d" % n) for n, fresh, _ in futures if fresh)
        assert [(r.offset, r.value) for r in drain(reader(cluster))] == live
        info = partition(cluster)
        assert info.log_end_offset == 600
        assert info.log_start_offset <= live[0][0]


# --- maintenance thread ------------------------------------------------------------------


def test_maintenance_run_once_returns_both_reports(cluster):
    cluster.create_stream("/r", ttl=3600)
    cluster.create_stream("/k", ttl=0, compact=True)
    with Producer(cluster, acks=1) as producer:
        producer.send(T, value=b"old", timestamp_ms=1).get(timeout=10)
        for v in (b"1", b"2"):
            producer.send("/k:t", key=b"k", value=v).get(timeout=10)
    kept, compacted = Maintenance(cluster).run_once()
    assert kept.partitionlets_dropped == 1
    assert compacted.messages_removed == 1


def test_maintenance_thread_runs_on_a_timer_and_stops(cluster):
    cluster.create_stream("/r", ttl=3600)
    with Producer(cluster, acks=1) as producer:
        producer.send(T, value=b"old", timestamp_ms=1).get(timeout=10)
    maintenance = Maintenance(cluster, interval_s=0.05).start()
    try:
        deadline = time.monotonic() + scaled(10)
        # a pass counts once it has finished (retention, compaction, orphan clean-up)
        while (partition(cluster).log_start_offset != 1 or maintenance.runs < 1) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.02)
        assert partition(cluster).log_start_offset == 1
        assert maintenance.running and maintenance.runs >= 1
        assert maintenance.last_retention is not None
    finally:
        maintenance.stop()
    assert not maintenance.running


def test_maintenance_logs_errors_and_keeps_going(cluster, monkeypatch, caplog):
    from engine.ops import retention

    calls = []

    def broken(c):
        calls.append(c)
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(retention, "enforce_retention", broken)
    maintenance = Maintenance(cluster, interval_s=0.02)
    with caplog.at_level(logging.ERROR, logger="engine.ops.maintenance"):
        kept, compacted = maintenance.run_once()
        assert kept is None and compacted is not None  # compaction still ran
        assert isinstance(maintenance.last_error, RuntimeError)
        with maintenance:
            deadline = time.monotonic() + scaled(10)
            while len(calls) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
        assert len(calls) >= 3  # the thread survived its failures
    assert "disk on fire" in caplog.text


def test_maintenance_ends_quietly_when_the_cluster_closes(cluster_path, caplog):
    cluster = Cluster.open(cluster_path)
    maintenance = Maintenance(cluster, interval_s=0.01).start()
    time.sleep(0.05)
    with caplog.at_level(logging.ERROR, logger="engine.ops.maintenance"):
        cluster.close()
        time.sleep(0.05)
        maintenance.stop()
    assert not maintenance.running
    assert maintenance.run_once() == (None, None)
    assert "Traceback" not in caplog.text


def test_maintenance_checks_its_interval(cluster):
    from engine.errors import InvalidArgument

    for bad in (0, -1, True, "60"):
        with pytest.raises(InvalidArgument):
            Maintenance(cluster, interval_s=bad)


def test_closing_the_cluster_waits_for_a_maintenance_pass(tmp_path):
    # Closing an SQLite connection while another thread is inside a statement on it
    # crashes the interpreter: close() stops the maintenance (its pass ends) first. In a
    # child process, so that a crash fails this test rather than ending the run.
    script = f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
from engine import Cluster, Producer
from engine.ops.maintenance import Maintenance
from tests.timing import scaled
for i in range(40):
    cluster = Cluster.open({str(tmp_path)!r} + f"/c{{i % 4}}")
    if i < 4:
        cluster.create_stream("/s", ttl=1, compact=True)
        producer = Producer(cluster)
        for n in range(500):
            producer.send("/s:t", b"v", key=str(n % 7).encode())
        producer.close()
    maintenance = Maintenance(cluster, interval_s=0.001).start()
    time.sleep(0.02 * (i % 5))
    cluster.close()
    assert not maintenance.running
print("closed 40 times")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-3000:]}"
    assert "closed 40 times" in done.stdout
