"""A running cluster keeps its -wal files small: a checkpoint every WAL_CHECKPOINT_BYTES of
log, whatever the page size, and the file cut back to JOURNAL_SIZE_LIMIT when the log
starts over (docs/BENCHMARKS.md, "WAL size")."""

from __future__ import annotations

from pathlib import Path

from engine import Producer
from engine.storage import connection


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
    bound = connection.WAL_CHECKPOINT_BYTES + connection.JOURNAL_SIZE_LIMIT
    assert largest <= bound, f"a -wal file reached {largest:,} bytes (bound {bound:,})"


def test_checkpoint_budget_is_in_bytes_for_every_page_size(tmp_path):
    for page in (4096, 16384):
        conn = connection.connect(tmp_path / f"p{page}.db", what="test", page_size=page)
        pages = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        limit = conn.execute("PRAGMA journal_size_limit").fetchone()[0]
        conn.close()
        assert pages * page == connection.WAL_CHECKPOINT_BYTES
        assert limit == connection.JOURNAL_SIZE_LIMIT
