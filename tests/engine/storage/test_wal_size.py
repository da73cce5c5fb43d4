"""A running cluster keeps its -wal files small (docs/BENCHMARKS.md, "WAL size"): commits
that fsync (acks=all) checkpoint every WAL_CHECKPOINT_BYTES of log, whatever the page size;
the others (acks=1) leave it to the writeback thread and checkpoint themselves only past
WAL_AHEAD_BYTES (issue 28, item 4); the file is cut back to JOURNAL_SIZE_LIMIT when the log
starts over, and a log left large by a burst is cut once checkpointed."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from engine import Cluster, Producer
from engine.storage import connection, wal_writeback
from tests.timing import wait_until

KIB = bytes(range(256)) * 4


def _wal_sizes(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in root.rglob("*-wal")}


def _write(cluster, acks, total: int, per_flush: int, value: bytes) -> int:
    """`total` bytes of `value`s to partition 0, flushed every `per_flush` messages; the
    largest -wal file seen after each flush."""
    producer = Producer(cluster, acks=acks)
    largest = 0
    sent = 0
    while sent * len(value) < total:
        for _ in range(per_flush):
            producer.send("/s:t", value=value, partition=0)
        sent += per_flush
        producer.flush()
        largest = max(largest, *_wal_sizes(cluster.path).values())
    producer.close()
    assert cluster.topic("/s:t").partitions[0].log_end_offset == sent
    return largest


@pytest.fixture
def one_topic(cluster_path):
    with Cluster.open(cluster_path, name="test", volumes=1) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic("/s:t", partitions=1)
        yield cluster


def test_fsynced_writes_checkpoint_every_budget(one_topic):
    # ~40 MB of log in one volume: ten times the checkpoint budget
    largest = _write(one_topic, "all", 40 << 20, 4_000, KIB)
    bound = connection.WAL_CHECKPOINT_BYTES + connection.JOURNAL_SIZE_LIMIT
    assert largest <= bound, f"a -wal file reached {largest:,} bytes (bound {bound:,})"


def test_acks_1_writes_stay_under_the_writers_own_bound(one_topic):
    # four times the writer's bound: without a checkpoint the log would pass it
    largest = _write(one_topic, 1, 4 * connection.WAL_AHEAD_BYTES, 2_000, KIB)
    # past it by the commit that crosses it, and those made while the thread's checkpoint
    # held SQLite's checkpoint lock (the writer's is then put off to its next commit)
    bound = 2 * connection.WAL_AHEAD_BYTES
    assert largest <= bound, f"a -wal file reached {largest:,} bytes (bound {bound:,})"


def test_a_log_left_large_is_cut_once_writes_stop(monkeypatch, one_topic):
    # monkeypatch first: the cluster is closed (its writebacks settled) while patched
    gate = threading.Event()
    real = wal_writeback.write_back
    monkeypatch.setattr(wal_writeback, "WRITEBACK", wal_writeback.Writeback())
    monkeypatch.setattr(wal_writeback, "IDLE_S", 0.2)
    monkeypatch.setattr(wal_writeback, "write_back", lambda path: (gate.wait(30), real(path)))
    (volume,) = one_topic.volumes()
    wal = Path(volume.path + "-wal")
    try:
        # held back, the thread checkpoints nothing, and the writer only past its bound
        _write(one_topic, 1, 2 * connection.JOURNAL_SIZE_LIMIT, 2_000, KIB)
        assert wal.stat().st_size > connection.JOURNAL_SIZE_LIMIT
    finally:
        gate.set()
    # no write comes after: the thread checkpoints, then cuts the log once it is quiet
    wait_until(
        lambda: wal.stat().st_size <= connection.JOURNAL_SIZE_LIMIT,
        timeout=10,
        message=lambda: f"the -wal file cut (it stays at {wal.stat().st_size:,} bytes)",
    )


def test_acks_1_writes_are_checkpointed_by_the_writeback_thread(one_topic):
    (volume,) = one_topic.volumes()
    with Producer(one_topic, acks=1) as producer:
        producer.send("/s:t", b"in the database file", partition=0).get(timeout=10)

    def in_file() -> bool:
        # the database file alone, without its log: what a checkpoint copied there
        db = sqlite3.connect(f"file:{volume.path}?immutable=1", uri=True)
        try:
            return db.execute("SELECT count(*) FROM batches").fetchone()[0] == 1
        except sqlite3.OperationalError:  # not even the schema copied there yet
            return False
        finally:
            db.close()

    # far below any checkpoint budget: the thread's doing
    wait_until(in_file, timeout=10, message="the batch in the database file")


def test_a_writer_checkpoints_itself_when_the_thread_falls_behind(monkeypatch, one_topic):
    gate = threading.Event()
    monkeypatch.setattr(wal_writeback, "WRITEBACK", wal_writeback.Writeback())
    monkeypatch.setattr(wal_writeback, "write_back", lambda path: gate.wait(30))
    try:
        largest = _write(one_topic, 1, 2 * connection.WAL_AHEAD_BYTES, 2_000, KIB)
    finally:
        gate.set()
    bound = connection.WAL_AHEAD_BYTES + (2_000 * len(KIB) * 2)
    assert largest <= bound, f"a -wal file reached {largest:,} bytes (bound {bound:,})"


def test_checkpoint_budget_is_in_bytes_for_every_page_size(tmp_path):
    for page in (4096, 16384):
        conn = connection.connect(tmp_path / f"p{page}.db", what="test", page_size=page)
        pages = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        limit = conn.execute("PRAGMA journal_size_limit").fetchone()[0]
        conn.close()
        assert pages * page == connection.WAL_CHECKPOINT_BYTES
        assert limit == connection.JOURNAL_SIZE_LIMIT
