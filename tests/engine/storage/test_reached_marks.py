"""The offsets reached, saved in the catalog about once a second by each writer
(engine.storage.appender, `MARK_INTERVAL_S`), so that a volume that loses its last commits
hands out none of their offsets again (tests/engine/test_integrity.py cuts a WAL for real)."""

from __future__ import annotations

import pytest

from engine import Cluster, Producer, errors
from engine.clock import FakeClock, now_ms
from engine.storage import appender
from tests.timing import wait_until

T = "/s:t"


def reached(cluster: Cluster, partition: int = 0) -> int | None:
    topic_id = cluster.catalog.topic("/s", "t").id
    (pl,) = cluster.catalog.active_partitionlets([(topic_id, partition)]).values()
    return pl.reached_offset


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(now_ms=now_ms())


@pytest.fixture
def cluster(cluster_path, clock):
    with Cluster.open(cluster_path, clock=clock) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T, partitions=2)
        yield cluster


def send(producer: Producer, partition: int, n: int) -> None:
    producer.send_batch(T, partition, [b"m%d" % i for i in range(n)])
    producer.flush()


def test_a_writer_saves_what_it_reached_once_an_interval(cluster, clock):
    producer = Producer(cluster, acks=1)
    send(producer, 0, 10)
    send(producer, 1, 5)
    assert reached(cluster, 0) is None  # not due yet: the catalog is not written per append

    clock.advance(appender.MARK_INTERVAL_S)  # the idle sender wakes for it
    wait_until(lambda: reached(cluster, 0) == 10, timeout=10)
    assert reached(cluster, 1) == 5

    send(producer, 0, 7)
    assert reached(cluster, 0) == 10  # saved a moment ago: the next save waits its turn
    clock.advance(appender.MARK_INTERVAL_S)
    wait_until(lambda: reached(cluster, 0) == 17, timeout=10)
    producer.close()


def test_close_saves_what_is_left(cluster):
    producer = Producer(cluster, acks=1)
    send(producer, 0, 3)
    producer.close()
    assert reached(cluster, 0) == 3


def test_a_mark_never_moves_back(cluster):
    producer = Producer(cluster, acks=1)
    send(producer, 0, 4)
    producer.close()
    topic_id = cluster.catalog.topic("/s", "t").id
    (pl,) = cluster.catalog.active_partitionlets([(topic_id, 0)]).values()
    cluster.catalog.mark_reached({pl.id: 2})  # a slower writer's older mark
    assert reached(cluster, 0) == 4


def test_a_mark_that_cannot_be_saved_is_kept_for_the_next_try(cluster, clock, monkeypatch):
    real = cluster.catalog.mark_reached
    failed: list[dict[int, int]] = []

    def full_disk(marks: dict[int, int]) -> None:
        failed.append(dict(marks))
        raise errors.DiskFull("catalog: database or disk is full")

    producer = Producer(cluster, acks=1)
    send(producer, 0, 6)
    monkeypatch.setattr(cluster.catalog, "mark_reached", full_disk)
    clock.advance(appender.MARK_INTERVAL_S)
    wait_until(lambda: failed, timeout=10)  # the save failed: the append itself stands
    assert reached(cluster, 0) is None
    monkeypatch.setattr(cluster.catalog, "mark_reached", real)
    clock.advance(appender.MARK_INTERVAL_S)
    wait_until(lambda: reached(cluster, 0) == 6, timeout=10)
    producer.close()


def test_a_writer_whose_volume_holds_less_than_the_mark_is_refused(cluster):
    """The mark is checked in the append's own transaction: here the catalog is told a
    partition reached further than its volume holds (what a cut WAL leaves)."""
    producer = Producer(cluster, acks=1)
    send(producer, 0, 5)
    producer.close()
    topic_id = cluster.catalog.topic("/s", "t").id
    (pl,) = cluster.catalog.active_partitionlets([(topic_id, 0)]).values()
    cluster.catalog.mark_reached({pl.id: 8})

    producer = Producer(cluster, acks=1)
    future = producer.send(T, b"again", partition=0)
    producer.flush()
    with pytest.raises(errors.DamagedPartition) as info:
        future.get(timeout=10)
    assert "it holds offsets 0..4, where the catalog's mark says it reached offset 7" in str(
        info.value
    )
    assert producer.send(T, b"other", partition=1).get(timeout=10).offset == 0
    producer.close()


def test_a_partitionlet_whose_row_and_batches_are_gone_below_the_mark_is_refused(cluster):
    """The volume lost even the first commit of the partitionlet (its row and batches),
    while the catalog saw its writer reach offset 7: no append may start at 0 again."""
    producer = Producer(cluster, acks=1)
    send(producer, 1, 8)
    producer.close()
    topic_id = cluster.catalog.topic("/s", "t").id
    (pl,) = cluster.catalog.active_partitionlets([(topic_id, 1)]).values()
    assert pl.reached_offset == 8  # saved on close
    volume = cluster.volume(pl.volume_id)
    with volume.conn:  # what a WAL cut before the partitionlet's first commit leaves
        volume.conn.execute("DELETE FROM batches WHERE partitionlet = ?", (pl.id,))
        volume.conn.execute("DELETE FROM partitionlets WHERE id = ?", (pl.id,))

    producer = Producer(cluster, acks=1)
    future = producer.send(T, b"again", partition=1)
    producer.flush()
    with pytest.raises(errors.DamagedPartition) as info:
        future.get(timeout=10)
    message = str(info.value)
    assert f"partition 1 of topic {T} (partitionlet {pl.id}" in message
    assert "its row and batches are missing, where the catalog's mark says it reached offset 7" in (
        message
    )
    assert producer.send(T, b"other", partition=0).get(timeout=10).offset == 0
    producer.close()


def test_a_save_does_not_wait_behind_a_long_catalog_transaction(cluster, cluster_path):
    """Another process holding the catalog's write lock costs a save MARK_LOCK_WAIT_MS,
    not the busy timeout: the saving thread is a producer's sender."""
    import sqlite3
    import time

    from engine.storage import catalog as catalog_module
    from engine.storage.connection import BUSY_TIMEOUT_MS

    producer = Producer(cluster, acks=1)
    send(producer, 0, 3)
    producer.close()
    topic_id = cluster.catalog.topic("/s", "t").id
    (pl,) = cluster.catalog.active_partitionlets([(topic_id, 0)]).values()
    other = sqlite3.connect(cluster_path / "catalog.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        start = time.monotonic()
        with pytest.raises(errors.FileLocked):
            cluster.catalog.mark_reached({pl.id: 5})
        assert time.monotonic() - start < BUSY_TIMEOUT_MS / 2000  # not the usual wait
        other.execute("ROLLBACK")
    finally:
        other.close()
    cluster.catalog.mark_reached({pl.id: 5})  # the connection's usual wait is back
    assert reached(cluster, 0) == 5
    (wait,) = cluster.catalog.conn.execute("PRAGMA busy_timeout").fetchone()
    assert wait > catalog_module.MARK_LOCK_WAIT_MS
