"""Columnar reads of archived history (issue 28, item 6): `poll_arrow` and
`poll_arrow_batches` (the wire listener's fetch) hand on the Arrow columns of the Parquet
files' row groups as they are, and read exactly what they read before the partitionlets
were archived: every column of every record, poll by poll, wherever the read starts and
whatever `max_records` cuts, expired records hidden, aborted transactions left out under
read_committed, and on into the live tail without a gap or a duplicate."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Cluster, Consumer, Producer, TopicPartition
from engine.client import arrow
from engine.clock import FakeClock
from engine.storage import archive as store
from tests.timing import scaled

T = "/a:t"
TP = TopicPartition(T, 0)
NOW = 1_700_000_000_000
DAY = 86_400_000


def produce(cluster: Cluster, n: int, *, timestamp=lambda i: NOW - DAY + i, start=0) -> None:
    """`n` messages in stored batches of 10: keys (some None), values (a tombstone every
    17th), headers on two in three (one with a None value), given timestamps."""
    with Producer(cluster, acks=1) as producer:
        for i in range(start, start + n):
            producer.send(
                T,
                key=None if i % 4 == 0 else f"k{i % 13}".encode(),
                value=None if i % 17 == 5 else f"value-{i}".encode() * (1 + i % 3),
                headers=[("n", str(i).encode()), ("empty", None)] if i % 3 else None,
                timestamp_ms=timestamp(i),
            )
            if i % 10 == 9:
                producer.flush()


def read(
    cluster: Cluster,
    *,
    start: int = 0,
    max_records: int = 1000,
    batches: bool = False,
    isolation: str = "read_uncommitted",
) -> tuple[list[int], pa.Table]:
    """Every record from `start` on by `poll_arrow` (or `poll_arrow_batches`): the rows of
    each poll, and all of them as one table."""
    consumer = Consumer(cluster, enable_auto_commit=False, isolation_level=isolation)
    consumer.assign([TP])
    consumer.seek(TP, start)
    sizes: list[int] = []
    parts: list[pa.RecordBatch] = []
    poll = consumer.poll_arrow_batches if batches else consumer.poll_arrow
    while got := poll(timeout_ms=scaled(100), max_records=max_records):
        polled = got[TP] if batches else [got[TP]]
        for rb in polled:
            assert str(rb.schema) == str(arrow.schema())  # names, types, no file metadata
        sizes.append(sum(rb.num_rows for rb in polled))
        parts += polled
    consumer.close()
    return sizes, pa.Table.from_batches(parts, schema=arrow.schema())


def archived(cluster: Cluster) -> list:
    """Archive the sealed partitionlets; the catalog's rows of the archived ones."""
    report = cluster.archive()
    assert report.archived
    topic_id = cluster.catalog.topic("/a", "t").id
    return [p for p in cluster.catalog.chain(topic_id, 0) if p.archive_file is not None]


@pytest.fixture
def small_row_groups(monkeypatch):
    """Row groups of 25 rows, so stored batches (of 10) straddle their boundaries."""
    monkeypatch.setattr(store, "ROW_GROUP_ROWS", 25)


@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compacted"])
def test_archived_reads_equal_live_ones_column_by_column(cluster_path, monkeypatch, compact):
    # row groups that cut stored batches: of 10 records, fewer where compaction removed some
    monkeypatch.setattr(store, "ROW_GROUP_ROWS", 4 if compact else 25)
    with Cluster.open(cluster_path, partitionlet_bytes=3000) as cluster:
        cluster.create_stream("/a", archive_after=60, ttl=0, compact=compact)
        cluster.create_topic(T, partitions=1)
        produce(cluster, 300)
        if compact:
            cluster.compact()  # archiving compacts first: the live reads see the same
        ends = [p.base_offset for p in cluster.partitionlets(T)]
        cases = [
            (start, max_records, batches)
            for start in sorted({0, 1, 37, ends[1] - 1, ends[1], ends[2] + 3, ends[-1] + 2})
            for max_records in (1, 7, 25, 1000)
            for batches in (False, True)
        ]
        live = {case: read(cluster, start=case[0], max_records=case[1], batches=case[2])
                for case in cases}  # fmt: skip
        files = archived(cluster)
        assert len(files) == len(ends) - 1  # all but the active partitionlet
        groups = [pq.read_metadata(cluster.path / p.archive_file).num_row_groups for p in files]
        assert min(groups) > 1

        for case in cases:
            assert (
                read(cluster, start=case[0], max_records=case[1], batches=case[2]) == live[case]
            ), case
    whole = live[(0, 1000, False)][1]
    offsets = whole.column("offset").to_pylist()
    assert offsets == sorted(set(offsets)) and offsets[-1] == 299
    assert (len(offsets) < 300) == compact
    assert whole.column("key").null_count and whole.column("value").null_count
    assert whole.column("headers").null_count and whole.column("headers").null_count < len(whole)
    assert {"key": "empty", "value": None} in whole.column("headers").to_pylist()[1]


def test_poll_arrow_hands_on_the_files_row_group_columns(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=3000) as cluster:
        cluster.create_stream("/a", archive_after=60, ttl=0)
        cluster.create_topic(T, partitions=1)
        produce(cluster, 100)
        first = archived(cluster)[0]
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TP])
        rb = consumer.poll_arrow(max_records=5)[TP]
        consumer.close()
        rows = store.reader(cluster.path, first).read_rows(first.id, 0, 1)[0].rows
    # the value column's data is the decoded row group's buffer, not a copy of it
    assert rb.column("value").buffers()[2].address == (
        rows.column("value").chunk(0).buffers()[2].address
    )
    assert rb.column("offset").to_pylist() == [0, 1, 2, 3, 4]


def test_expired_archived_records_are_hidden_as_live_ones(cluster_path):
    clock = FakeClock(NOW)
    with Cluster.open(cluster_path, partitionlet_bytes=3000, clock=clock) as cluster:
        cluster.create_stream("/a", archive_after=60, ttl=3600)
        cluster.create_topic(T, partitions=1)

        def stamp(i: int) -> int:
            # in every batch of 10, some expired (2 h old) and some not (10 min old);
            # then whole batches of each
            if i < 200:
                return NOW - (7_200_000 if i % 3 == 0 else 600_000) + i
            return NOW - (7_200_000 if (i // 10) % 2 else 600_000) + i

        produce(cluster, 300, timestamp=stamp)
        cases = [(start, n, b) for start in (0, 95) for n in (3, 1000) for b in (False, True)]
        live = {case: read(cluster, start=case[0], max_records=case[1], batches=case[2])
                for case in cases}  # fmt: skip
        archived(cluster)
        for case in cases:
            sizes, table = read(cluster, start=case[0], max_records=case[1], batches=case[2])
            assert table == live[case][1], case
            # a live read counts a stored batch's expired records against max_records,
            # an archived one the records it returns only (its runs join many batches)
            assert max(sizes) == min(case[1], len(table)), case
    stamps = live[(0, 1000, False)][1].column("timestamp").cast(pa.int64()).to_pylist()
    assert stamps and all(s >= (NOW - 3_600_000) * 1000 for s in stamps)
    assert len(stamps) == sum(1 for i in range(300) if stamp(i) >= NOW - 3_600_000)


def test_read_committed_leaves_archived_aborted_batches_out(cluster_path, small_row_groups):
    with Cluster.open(cluster_path, partitionlet_bytes=600) as cluster:
        cluster.create_stream("/a", archive_after=60, ttl=0)
        cluster.create_topic(T, partitions=1)
        plain = Producer(cluster, acks="all")
        txn = Producer(cluster, transactional_id="t1")
        txn.init_transactions()
        i = 0
        for end in ("commit", "abort", "commit", "abort"):
            txn.begin_transaction()
            for _ in range(4):
                txn.send(T, f"txn-{i}".encode(), partition=0, timestamp_ms=NOW - DAY + i)
                plain.send(T, f"plain-{i}".encode(), partition=0, timestamp_ms=NOW - DAY + i)
                plain.flush()
                txn.flush()
                i += 1
            getattr(txn, f"{end}_transaction")()
        for k in range(30):  # plain messages after, so the partitionlets above roll
            plain.send(T, f"after-{k}".encode(), partition=0, timestamp_ms=NOW - DAY + i + k)
        plain.close()
        txn.close()
        cases = [
            (start, n, b, iso)
            for start in (0, 5)
            for n in (2, 1000)
            for b in (False, True)
            for iso in ("read_committed", "read_uncommitted")
        ]
        live = {
            case: read(cluster, start=case[0], max_records=case[1], batches=case[2],
                       isolation=case[3])
            for case in cases
        }  # fmt: skip
        files = archived(cluster)
        assert len(files) >= 2
        for case in cases:
            got = read(
                cluster, start=case[0], max_records=case[1], batches=case[2], isolation=case[3]
            )
            assert got == live[case], case
    committed = live[(0, 1000, False, "read_committed")][1].column("value").to_pylist()
    uncommitted = live[(0, 1000, False, "read_uncommitted")][1].column("value").to_pylist()
    aborted = {f"txn-{i}".encode() for i in (*range(4, 8), *range(12, 16))}
    assert aborted <= set(uncommitted) and not aborted & set(committed)
    everything = live[(0, 1000, False, "read_uncommitted")][1]
    at = [o for o, v in zip(everything["offset"].to_pylist(), uncommitted, strict=True)
          if v in aborted]  # fmt: skip
    assert max(at) < files[-1].end_offset  # the aborted batches are all archived
    assert [v for v in committed if v.startswith(b"txn-")] == [
        f"txn-{i}".encode() for i in (*range(0, 4), *range(8, 12))
    ]
