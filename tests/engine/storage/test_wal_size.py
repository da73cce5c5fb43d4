"""A running cluster keeps its -wal files small: a checkpoint every WAL_CHECKPOINT_BYTES of
log, whatever the page size, run by a thread of its own rather than the commit
(engine.storage.checkpoints), and the file cut back to what the log holds when it starts
over (docs/BENCHMARKS.md, "WAL size")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine import Producer
from engine.storage import checkpoints, connection
from tests.timing import wait_until


def _wal_sizes(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in root.rglob("*-wal")}


def test_wal_files_stay_small_under_a_long_write(cluster, cluster_path):
    cluster.create_stream("/s", ttl=0)
    cluster.create_topic("/s:t", partitions=1)
    producer = Producer(cluster, acks=1)
    largest = 0
    value = bytes(range(100))
    # ~40 MB of log in one volume: ten times the checkpoint budget
    for _ in range(20):
        for _ in range(15_000):
            producer.send("/s:t", value=value, partition=0)
        producer.flush()
        largest = max(largest, *_wal_sizes(cluster_path).values())
    producer.close()
    assert cluster.topic("/s:t").partitions[0].log_end_offset == 300_000
    # the writer checkpoints at SAFETY_FACTOR budgets; one flush's batch may pass it
    bound = connection.WAL_CHECKPOINT_BYTES * checkpoints.SAFETY_FACTOR + 4 * 1024 * 1024
    assert largest <= bound, f"a -wal file reached {largest:,} bytes (bound {bound:,})"


def test_checkpoint_budget_is_in_bytes_for_every_page_size(tmp_path):
    """SQLite's own checkpoint, the safety net, is a multiple of the budget in bytes."""
    for page in (4096, 16384):
        conn = connection.connect(tmp_path / f"p{page}.db", what="test", page_size=page)
        pages = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        limit = conn.execute("PRAGMA journal_size_limit").fetchone()[0]
        conn.close()
        assert pages * page == connection.WAL_CHECKPOINT_BYTES * checkpoints.SAFETY_FACTOR
        assert limit == connection.JOURNAL_SIZE_LIMIT


def _commit_pages(conn: sqlite3.Connection, path: Path, n: int) -> None:
    for _ in range(n):
        with connection.write_transaction(conn, path, "test"):
            conn.execute("INSERT INTO t VALUES (randomblob(4000))")


def test_the_checkpoint_runs_off_the_commit_and_the_log_starts_over(tmp_path):
    path = tmp_path / "f.db"
    conn = connection.connect(path, what="test", page_size=4096)
    conn.execute("CREATE TABLE t (b BLOB)")
    budget = connection.WAL_CHECKPOINT_BYTES
    ran = []
    real = checkpoints.checkpoint

    def seen(p):
        copied = real(p)
        ran.append((p, copied))
        return copied

    try:
        checkpoints.checkpoint = seen
        # commits until the one whose log reaches the budget: it asks the thread for a
        # checkpoint and returns without one
        while checkpoints.wal_size(path) < budget:
            assert ran == []  # no checkpoint below the budget
            _commit_pages(conn, path, 1)
        held = checkpoints.wal_size(path)
        wait_until(lambda: ran, message="the checkpoint")
        assert ran == [(str(path), held)]  # it copied the whole log
        _commit_pages(conn, path, 1)  # the next write starts the log over
        assert checkpoints.wal_size(path) < 64 * 1024
    finally:
        checkpoints.checkpoint = real
        conn.close()


def test_writes_back_to_back_keep_the_log_within_the_safety_bound(tmp_path):
    """No pause lets the log start over after the thread's checkpoints: the writer
    checkpoints it itself at SAFETY_FACTOR budgets."""
    path = tmp_path / "f.db"
    conn = connection.connect(path, what="test", page_size=4096)
    conn.execute("CREATE TABLE t (b BLOB)")
    bound = connection.WAL_CHECKPOINT_BYTES * checkpoints.SAFETY_FACTOR
    largest = 0
    for _ in range(4 * bound // 4096 // 50):
        _commit_pages(conn, path, 50)
        largest = max(largest, checkpoints.wal_size(path))
    conn.close()
    assert largest <= bound + 64 * 1024
