"""One `Clock` for the whole engine (engine/clock.py): `Cluster.open(clock=...)` passes it to
the catalog, the volumes and every engine object made on the cluster, so moving a
`FakeClock` moves what is about time (stamps, TTL, rolling by age, sessions, metrics, the
chain lock's wait) without the test waiting for it."""

from __future__ import annotations

import threading
import time

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from engine.clock import SYSTEM_CLOCK, FakeClock, SystemClock, now_ms
from engine.storage.chain_lock import chain_lock

T = "/c:t"
START_MS = 1_800_000_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(now_ms=START_MS)


def drain(consumer: Consumer) -> list:
    return [r for records in consumer.poll(timeout_ms=50).values() for r in records]


def reader(cluster: Cluster) -> Consumer:
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(T, 0)])
    return consumer


def test_a_fake_clock_moves_only_when_told_and_never_back():
    clock = FakeClock(now_ms=1_000, monotonic=5.0)
    assert (clock.now_ms(), clock.monotonic()) == (1_000, 5.0)
    clock.advance(2, ms=500)
    assert (clock.now_ms(), clock.monotonic()) == (3_500, 7.5)
    clock.sleep(1)  # returns at once, the time slept gone by
    assert clock.now_ms() == 4_500
    clock.set(1_000)  # the wall clock set back: intervals still only grow
    assert (clock.now_ms(), clock.monotonic()) == (1_000, 8.5)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_the_system_clock_is_the_default_and_reads_real_time(cluster):
    assert cluster.clock is SYSTEM_CLOCK and isinstance(SYSTEM_CLOCK, SystemClock)
    before = time.time_ns() // 1_000_000
    assert before <= now_ms() <= time.time_ns() // 1_000_000


def test_what_the_catalog_and_the_producer_stamp_comes_from_the_clock(cluster_path, clock):
    with Cluster.open(cluster_path, clock=clock) as cluster:
        assert cluster.clock is clock
        cluster.create_stream("/c")
        clock.advance(5)
        cluster.create_topic(T, partitions=1)
        assert cluster.stream("/c").created_ms == START_MS
        assert cluster.topic(T).created_ms == START_MS + 5_000
        with Producer(cluster, acks=1) as producer:
            assert producer.send(T, b"v").get(timeout=10).timestamp == START_MS + 5_000
        (pl,) = cluster.partitionlets(T)
        assert pl.created_ms == START_MS + 5_000
        # a view acts for someone else on the same clock
        assert cluster.as_principal(cluster.principal).clock is clock


def test_a_ttl_expires_a_message_when_the_clock_passes_it(cluster_path, clock):
    with Cluster.open(cluster_path, clock=clock) as cluster:
        cluster.create_stream("/c", ttl=60)
        cluster.create_topic(T, partitions=1)
        with Producer(cluster, acks=1) as producer:
            producer.send(T, b"v").get(timeout=10)
        consumer = reader(cluster)
        try:
            clock.advance(59.999)
            assert [r.value for r in drain(consumer)] == [b"v"]  # not yet
            clock.advance(0.002)
            consumer.seek(TopicPartition(T, 0), 0)
            assert drain(consumer) == []  # hidden at once
            assert cluster.enforce_retention().messages_freed == 1  # and then dropped
        finally:
            consumer.close()


def test_a_partitionlet_rolls_by_age_on_the_clock(cluster_path, clock):
    with Cluster.open(cluster_path, partitionlet_ms=1_000, clock=clock) as cluster:
        cluster.create_stream("/c", ttl=0)
        cluster.create_topic(T, partitions=1)
        with Producer(cluster, acks=1) as producer:
            producer.send(T, b"a").get(timeout=10)
            clock.advance(0.999)
            producer.send(T, b"b").get(timeout=10)
            assert len(cluster.partitionlets(T)) == 1  # younger than partitionlet_ms
            clock.advance(0.001)
            assert producer.send(T, b"c").get(timeout=10).offset == 2
        first, second = cluster.partitionlets(T)
        assert (first.active, first.base_offset, first.last_offset) == (False, 0, 1)
        assert (second.active, second.base_offset, second.last_offset) == (True, 2, 2)


def test_a_session_ends_when_the_clock_passes_its_idle_time(cluster_path, clock):
    with Cluster.open(cluster_path, clock=clock) as cluster:
        cluster.add_user("alice", "correct-horse-1")
        sid = cluster.create_session("alice")
        clock.advance(10)
        assert cluster.session_user(sid, idle_s=10) is not None  # seen: idle from here
        clock.advance(10.001)
        assert cluster.session_user(sid, idle_s=10) is None


def test_a_login_throttle_lifts_when_the_clock_has_waited_for_it(cluster_path, clock):
    with Cluster.open(cluster_path, clock=clock) as cluster:
        cluster.add_user("alice", "correct-horse-1")
        for _ in range(5):
            assert cluster.authenticate("alice", "wrong-password") is None
        with pytest.raises(errors.LoginThrottled) as caught:
            cluster.authenticate("alice", "correct-horse-1")
        clock.advance(caught.value.retry_after)
        assert cluster.authenticate("alice", "correct-horse-1").name == "alice"


def test_the_metrics_history_records_the_minutes_the_clock_completed(cluster_path, clock):
    with Cluster.open(cluster_path, clock=clock) as cluster:
        cluster.create_stream("/c")
        cluster.create_topic(T, partitions=1)
        with Producer(cluster, acks=1) as producer:
            for _ in range(30):
                producer.send(T, b"x")
        cluster.record_metrics()  # catches up on the day before: this minute is not in it
        before = cluster.metrics("topic", T, metric="write_messages").recorded
        assert before and sum(v for _, v in before) == 0
        clock.advance(3 * 60)
        assert cluster.record_metrics().minutes == 3  # the minutes completed since
        series = cluster.metrics("topic", T, metric="write_messages")
        assert round(sum(v * 60 for _, v in series.recorded)) == 30


def test_the_chain_lock_gives_up_on_the_clock_without_waiting(cluster_path, clock):
    with Cluster.open(cluster_path, clock=clock) as cluster:
        held = threading.Event()
        release = threading.Event()

        def holder() -> None:
            with chain_lock(cluster.path):
                held.set()
                release.wait(30)

        thread = threading.Thread(target=holder)
        thread.start()
        try:
            assert held.wait(30)
            started = time.monotonic()
            with pytest.raises(errors.FileLocked), chain_lock(cluster.path, 600, clock=clock):
                pass
            assert clock.monotonic() >= 1_000.0 + 600  # ten fake minutes went by
            assert time.monotonic() - started < 60  # not ten real ones
        finally:
            release.set()
            thread.join(30)
