"""Scan plans: reading a topic's volume files in bulk, without the catalog on the hot path.

This is how Spark reads a cluster (docs/SPARK.md, "Scan plan"); any bulk reader may do
the same. Three steps, each public:

1. `Cluster.scan_ranges(topics, starting=, ending=, starting_timestamp=,
   ending_timestamp=, principal=)` -> {TopicPartition: (start, end)}: the offsets to read
   of every partition of `topics`, after the consume permission is checked.
2. `Cluster.scan_plan(ranges, principal=)` -> [`ScanTask`]: one task per partitionlet that
   meets a range, in topic, partition and offset order. A task is a small frozen,
   picklable value: the volume file, the partitionlet id, the topic, the partition, the
   offsets [start, end) and the expiry cutoff of the stream's ttl. Planning reads the
   catalog; a task does not need it.
3. `read(task)` -> [`ScanBatch`]: the stored batches of the task's range, read from its
   volume file (opened read-only, one snapshot). If the partitionlet moved to another
   volume after planning (a rebalance), `read` finds its new home in the catalog. A batch
   may start before `start` or end after `end`; its payload is in the plain layout (a
   compressed batch is inflated by `read`); `layout(payload, base_offset)` says where
   each column of a batch's payload lies, so a columnar reader (Arrow) cuts the keys and
   values out of the payload without a Python object per message, then keeps the offsets
   in [start, end) and the timestamps at or after `cutoff_ms`.

An archived partitionlet (docs/ARCHIVE.md) is planned too, never skipped: its task has
`tier == "archive"` and `file`, the full URI of its Parquet file. `read_archive(task)`
reads that file's rows of the task's range as Arrow record batches (the columnar way, and
what Spark's own Parquet reader does natively with `file`); `read(task)` gives them as
stored batches like any other task, so a reader that only knows `read` misses nothing.
A live task whose partitionlet was archived after planning is read from its file.

Transactions: with `isolation_level="read_committed"` (Kafka's), `scan_ranges` ends each
partition at its last stable offset (LSO) rather than its log end offset, `scan_plan`
never plans past it and gives each task the aborted transactions that meet its range
(`ScanTask.skip`), and every read of the task (`read`, `read_archive`) leaves their
batches out, live or archived. Transaction markers hold no message, so no reader sees them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from engine import names
from engine.errors import CorruptBatch, DamagedPartition, InvalidArgument, StorageError
from engine.policies import check_stored
from engine.records import TopicPartition
from engine.storage import batch as batch_codec
from engine.storage.catalog import Catalog, PartitionletRow, StreamRow
from engine.storage.connection import BUSY_TIMEOUT_MS, translate
from engine.storage.log import Columns, PartitionLog
from engine.storage.volume import DELETED, Volume

if TYPE_CHECKING:
    from engine.storage.log import PartitionletReader

# Raises unless the caller may consume from the stream (Cluster.scan_* pass their ACE check).
ConsumeCheck = Callable[[StreamRow], object]

EARLIEST, LATEST = "earliest", "latest"
LIVE, ARCHIVE = "live", "archive"  # a task's tier, as PartitionletInfo.tier
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"  # as the Consumer's
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)
ARCHIVE_ROWS_PER_BATCH = 64 * 1024  # rows per Arrow batch `read_archive` yields
Position = int | str  # an offset, or EARLIEST / LATEST
OffsetSpec = str | Mapping[TopicPartition, Position]


@dataclass(frozen=True)
class ScanTask:
    """The offsets [start, end) of one partitionlet to read: one Spark task. Frozen and
    picklable, it names files, not open objects, so any process may `read` it, in any
    thread, with no cluster open."""

    cluster: str  # the cluster's directory, absolute
    catalog_path: str  # its catalog file, absolute (to follow a partitionlet that moved)
    volume_path: str  # the volume file that held the partitionlet when planned, absolute
    partitionlet: int
    stream: str
    topic: str  # full name
    partition: int
    start: int
    end: int
    cutoff_ms: int | None  # messages older than this have expired (the stream's ttl)
    tier: str = LIVE  # ARCHIVE: the partitionlet is the Parquet file `file`, not in a volume
    file: str | None = None  # archived: the full URI of its file (file://, s3://, ...)
    # [start, end) is the whole partitionlet (so all of an archived file's rows, which
    # need no offset filter)
    whole: bool = False
    # read_committed: the aborted transactions that meet [start, end), (producer id, first
    # offset, marker offset), whose batches a read leaves out
    skip: tuple[tuple[int, int, int], ...] = ()


class ScanBatch(NamedTuple):
    """One stored batch: its offsets, timestamp type (0 create, 1 log append), first and
    largest timestamp (ms), and its payload (engine.storage.batch's layout, always plain:
    `read` inflates a compressed one). An immutable value, safe in any thread."""

    base_offset: int
    last_offset: int
    timestamp_type: int
    first_timestamp: int
    max_timestamp: int
    payload: bytes


class BatchLayout(NamedTuple):
    """Where the columns of a batch payload lie (byte positions in it; integers are
    little-endian). Timestamps: `count` int64 at `timestamps_at`, or all `base_timestamp`
    when it is None. Offsets: base_offset + `count` uint32 deltas at `deltas_at`, or
    base_offset, base_offset + 1, ... when it is None. Value lengths: `count` int32 at
    `value_lengths_at` (-1: null); the values follow each other from `values_at`, then the
    keys, whose lengths (`count` int32, -1: null) are at `key_lengths_at` (None: no keys).
    `headers` are decoded, one list per message, or None when no message has any."""

    count: int  # type: ignore[assignment]  # a field that shadows tuple.count, as it has always been named
    base_timestamp: int
    timestamps_at: int | None
    deltas_at: int | None
    value_lengths_at: int
    key_lengths_at: int | None
    headers: list[list[tuple[str, bytes | None]]] | None
    values_at: int


def layout(payload: bytes, base_offset: int) -> BatchLayout:
    """The `BatchLayout` of a batch payload in the plain layout, as `read` returns them
    (a compressed payload, straight from a volume, raises ValueError: pass it through
    `engine.storage.batch.plain` first)."""
    at = batch_codec.positions(payload)
    headers = None
    if at.headers_at is not None:
        headers = batch_codec.decode_headers(payload, at)
    return BatchLayout(
        at.count,
        at.base_timestamp,
        at.timestamps_at,
        at.deltas_at,
        at.value_lengths_at,
        at.key_lengths_at,
        headers,
        at.values_at,
    )


# --- planning (Cluster.scan_ranges, Cluster.scan_plan) ---------------------------------------


@dataclass(frozen=True)
class _Topic:
    topic_id: int
    stream: str
    name: str  # full
    partitions: int
    cutoff_ms: int | None


def _topics(
    catalog: Catalog, topics: Iterable[str], check: ConsumeCheck, now_ms: int
) -> dict[str, _Topic]:
    """The named topics, after `check` passed on their streams; ttl cutoffs from `now_ms`."""
    streams: dict[str, dict[str, Any]] = {}
    out = {}
    for full in topics:
        stream, name = names.split_full_name(full)
        if stream not in streams:
            row = catalog.stream(stream)
            check(row)
            streams[stream] = check_stored(stream, row.policies)
        topic = catalog.topic(stream, name)
        # the topic's own ttl, else its stream's
        own = topic.overrides
        ttl = (
            check_stored(stream, streams[stream], own, name)["ttl"]
            if own
            else streams[stream]["ttl"]
        )
        out[topic.full_name] = _Topic(
            topic.id,
            stream,
            topic.full_name,
            topic.partitions,
            now_ms - ttl * 1000 if ttl else None,
        )
    return out


def committed(isolation_level: str) -> bool:
    """Whether `isolation_level` is read_committed; `InvalidArgument` unless it is one of
    ISOLATION_LEVELS."""
    if isolation_level not in ISOLATION_LEVELS:
        raise InvalidArgument(
            f"isolation_level must be 'read_uncommitted' or 'read_committed', got "
            f"{isolation_level!r}"
        )
    return isolation_level == READ_COMMITTED


def _position(spec: OffsetSpec, tp: TopicPartition, default: str, what: str) -> Position:
    value = spec if isinstance(spec, str) else spec.get(tp, default)
    if value in (EARLIEST, LATEST):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{what} of {tp.topic} partition {tp.partition}: {value!r}")
    return value


def ranges(
    catalog: Catalog,
    reader: PartitionletReader,
    topics: Iterable[str],
    *,
    check: ConsumeCheck,
    now_ms: int,
    starting: OffsetSpec = EARLIEST,
    ending: OffsetSpec = LATEST,
    starting_timestamp: int | None = None,
    ending_timestamp: int | None = None,
    isolation_level: str = READ_UNCOMMITTED,
) -> dict[TopicPartition, tuple[int, int]]:
    """See `Cluster.scan_ranges` (which passes its catalog, its partitionlet reader, its
    consume check and its clock's time)."""
    stable_only = committed(isolation_level)
    found = _topics(catalog, topics, check, now_ms)
    for spec, what in ((starting, "starting"), (ending, "ending")):
        if isinstance(spec, str) and spec not in (EARLIEST, LATEST):
            raise InvalidArgument(f"{what} must be 'earliest', 'latest' or a mapping, not {spec!r}")
        if not isinstance(spec, str):
            unknown = sorted({tp.topic for tp in spec} - set(found))
            if unknown:
                raise InvalidArgument(f"{what} names {unknown[0]}, which is not scanned")
    out = {}
    for topic in found.values():
        for partition in range(topic.partitions):
            tp = TopicPartition(topic.name, partition)
            log = PartitionLog(catalog, reader, topic.topic_id, partition, topic.name)
            lo = log.start_offset()
            hi = log.stable_offset() if stable_only else log.end_offset()
            marks = {EARLIEST: lo, LATEST: hi}
            first = _position(starting, tp, EARLIEST, "starting")
            last = _position(ending, tp, LATEST, "ending")
            start = marks.get(first, first) if isinstance(first, str) else first
            end = marks.get(last, last) if isinstance(last, str) else last
            if starting_timestamp is not None:
                at = log.offset_for_time(starting_timestamp, topic.cutoff_ms)
                start = max(start, at.offset if at else hi)
            if ending_timestamp is not None:
                # As Kafka's source: the end is the first offset at or after the time.
                at = log.offset_for_time(ending_timestamp, topic.cutoff_ms)
                end = min(end, at.offset if at else hi)
            start = max(int(start), lo)
            out[tp] = (start, max(start, min(int(end), hi)))  # empty, never backwards
    return out


def plan(
    catalog: Catalog,
    directory: Path,
    volumes: Mapping[int, Volume],
    wanted: Mapping[TopicPartition, tuple[int, int]],
    *,
    check: ConsumeCheck,
    now_ms: int,
    isolation_level: str = READ_UNCOMMITTED,
) -> list[ScanTask]:
    """See `Cluster.scan_plan` (which passes its catalog, directory and volumes, its
    consume check and its clock's time)."""
    stable_only = committed(isolation_level)
    found = _topics(catalog, sorted({tp.topic for tp in wanted}), check, now_ms)
    root = str(Path(directory).absolute())
    catalog_path = str(Path(catalog.path).absolute())
    tables = catalog.transactions
    stable = {}
    if stable_only:
        keys = sorted({(found[tp.topic].topic_id, tp.partition) for tp in wanted})
        stable = tables.first_open_offsets(keys)
    out = []
    for tp, (start, end) in sorted(wanted.items()):
        topic = found[tp.topic]
        aborted: list[tuple[int, int, int]] = []
        if stable_only:
            # never past the last stable offset; the aborted ranges of what is left
            end = min(end, stable.get((topic.topic_id, tp.partition), end))
            if start < end:
                aborted = tables.aborted(topic.topic_id, tp.partition, start, end - 1)
        if start >= end:
            continue
        cutoff = topic.cutoff_ms
        for pl in catalog.chain(topic.topic_id, tp.partition):
            pl_end = pl.end_offset if pl.end_offset is not None else end
            lo, hi = max(start, pl.base_offset), min(end, pl_end)
            if lo >= hi:
                continue
            if cutoff is not None and pl.end_offset is not None and pl.max_ts is not None:
                if pl.max_ts < cutoff:
                    continue  # sealed and expired as a whole
            if pl.archive_file is not None:
                from engine.storage import archive  # pyarrow: loaded when an archive is met

                where = {"tier": ARCHIVE, "file": archive.file_uri(directory, pl.archive_file)}
                path = ""  # in no volume
            else:
                where = {}
                path = str(volumes[pl.volume_id].path.absolute())
            out.append(
                ScanTask(
                    root,
                    catalog_path,
                    path,
                    pl.id,
                    topic.stream,
                    topic.name,
                    tp.partition,
                    lo,
                    hi,
                    cutoff,
                    **where,
                    whole=lo == pl.base_offset and hi == pl.end_offset,
                    skip=tuple(a for a in aborted if a[1] < hi and a[2] >= lo),
                )
            )
    return out


# --- reading (in a task, with no cluster open) ------------------------------------------------


def _connect_ro(path: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)


def _relocate(task: ScanTask) -> tuple[str | None, str | None]:
    """(the volume file that holds the partitionlet now, the full URI of its archived file
    if it was archived), per the catalog; (None, None) when it is gone (retention)."""
    catalog = task.catalog_path
    conn = _connect_ro(catalog)
    try:
        row = conn.execute(
            "SELECT v.path, p.archive_file FROM partitionlets p "
            "JOIN volumes v ON v.id = p.volume_id WHERE p.id = ?",
            (task.partitionlet,),
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise translate(exc, catalog, "catalog") from exc
    finally:
        conn.close()
    if row is None:
        return None, None
    if row[1] is not None:
        from engine.storage import archive

        return None, archive.file_uri(Path(task.cluster), row[1])
    path = Path(row[0])
    return str(path if path.is_absolute() else Path(task.cluster) / path), None


def _batches(path: str, task: ScanTask) -> tuple[list[ScanBatch], bool]:
    """(batches of the task's range, whether the volume holds the partitionlet live)."""
    conn = _connect_ro(path)
    try:
        conn.execute("BEGIN")  # one snapshot for the state and the batches
        state = conn.execute(
            "SELECT state, base_offset, next_offset, messages FROM partitionlets WHERE id = ?",
            (task.partitionlet,),
        ).fetchone()
        sql = (
            "SELECT base_offset, last_offset, ts_type, first_ts, max_ts, payload, crc "
            "FROM batches WHERE partitionlet = ? AND last_offset >= ? AND base_offset < ?"
        )
        args: list[Any] = [task.partitionlet, task.start, task.end]
        for producer_id, first, marker in task.skip:  # as Volume.read leaves them out
            sql += " AND NOT (producer_id IS ? AND base_offset BETWEEN ? AND ?)"
            args += [producer_id, first, marker]
        rows = conn.execute(sql + " ORDER BY last_offset", args).fetchall()
        if state is not None and state[0] != DELETED:
            _check_gaps(conn, path, task, rows, state)
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise translate(exc, path, "volume") from exc
    finally:
        conn.close()
    for r in rows:  # each against its checksum, as Volume.read checks
        if not batch_codec.intact(*r):
            raise CorruptBatch(
                "its bytes do not match the CRC32C stored with them",
                cluster=task.cluster,
                volume=path,
                topic=task.topic,
                partition=task.partition,
                base_offset=r[0],
                last_offset=r[1],
                partitionlet=task.partitionlet,
            )
    return [ScanBatch(*r[:6]) for r in rows], state is not None and state[0] != DELETED


def _check_gaps(
    conn: sqlite3.Connection,
    path: str,
    task: ScanTask,
    rows: list[tuple[Any, ...]],
    state: tuple[int, int, int, int],
) -> None:
    """Raise `DamagedPartition` when offsets of the task's range hold no batch and nothing
    explains it, as the engine's readers do (engine.storage.log): transaction markers
    there, an aborted transaction left out (read_committed), or a partitionlet whose
    messages and markers no longer fill its range (compaction, the ttl). A damaged index
    or row must not make a job skip messages. Costs nothing when the batches follow each
    other."""
    _, base, next_offset, messages = state
    stop = min(task.end, next_offset)
    gaps = []
    position = max(task.start, base)
    for r in rows:
        if r[0] > position:
            gaps.append((position, min(r[0], stop)))
        position = max(position, r[1] + 1)
    if position < stop:
        gaps.append((position, stop))
    markers = "SELECT count(*) FROM markers WHERE partitionlet = ? AND offset >= ? AND offset < ?"
    for first, end in gaps:
        if first >= end or any(f < end and m >= first for _, f, m in task.skip):
            continue
        (found,) = conn.execute(markers, (task.partitionlet, first, end)).fetchone()
        if found == end - first:
            continue  # transaction markers
        (in_all,) = conn.execute(markers, (task.partitionlet, base, next_offset)).fetchone()
        if (messages or 0) + in_all < next_offset - base:
            return  # compaction or the ttl removed messages here: gaps are expected
        raise DamagedPartition(
            f"partition {task.partition} of topic {task.topic}: offsets {first}..{end - 1} of "
            f"partitionlet {task.partitionlet} (volume {path}) cannot be read though it holds "
            f"{messages} messages for its {next_offset - base} offsets (a damaged index or "
            "file); the scan stops here instead of skipping messages (run `plet check`)"
        )


def read(task: ScanTask) -> list[ScanBatch]:
    """The stored batches that hold the offsets [task.start, task.end), in offset order,
    following the partitionlet if it moved; batches wholly older than `task.cutoff_ms`
    are left out. Payloads are in the plain layout: a compressed batch (the stream's
    `compression` policy) is inflated here, so `layout` reads every batch alike."""
    if task.tier == ARCHIVE:
        return _archived_batches(task)
    batches, live = _batches(task.volume_path, task)
    if not live:
        moved, archived = _relocate(task)
        if archived is not None:  # archived since planning: its file holds it now
            return _archived_batches(replace(task, tier=ARCHIVE, file=archived))
        if moved is not None and moved != task.volume_path:
            batches, live = _batches(moved, task)
    if task.cutoff_ms is not None:
        batches = [b for b in batches if b.max_timestamp >= task.cutoff_ms]
    # compressed or Kafka batches in the plain layout; plain() gives the others back as is
    return [
        b if (p := batch_codec.plain(b.payload)) is b.payload else b._replace(payload=p)
        for b in batches
    ]


# --- archived partitionlets ---------------------------------------------------------------


def _archive_row(task: ScanTask) -> PartitionletRow:
    """Enough of the catalog's row of an archived task's partitionlet for its reader."""
    assert task.file is not None
    return PartitionletRow(
        task.partitionlet, 0, task.partition, 0, task.start, task.end, 0, None, 0, None, None,
        task.file,
    )  # fmt: skip


def _gone(task: ScanTask) -> bool:
    """Whether the partitionlet left the catalog (retention dropped it after planning)."""
    conn = _connect_ro(task.catalog_path)
    try:
        row = conn.execute(
            "SELECT 1 FROM partitionlets WHERE id = ?", (task.partitionlet,)
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise translate(exc, task.catalog_path, "catalog") from exc
    finally:
        conn.close()
    return row is None


def _archived_batches(task: ScanTask) -> list[ScanBatch]:
    """An archived task's range as stored batches (re-encoded from the file's rows by the
    engine's archive reader, as every other reader of archived partitionlets reads them)."""
    from engine.storage import archive

    reader = archive.ArchiveReader(Path(task.cluster), _archive_row(task))
    out: list[ScanBatch] = []
    position = task.start
    try:
        while position < task.end:
            got = reader.read(task.partitionlet, position, 64, task.skip)
            if not got:
                break
            out.extend(ScanBatch(*b) for b in got if b[0] < task.end)
            position = got[-1][1] + 1
    except StorageError:
        if _gone(task):
            return []  # dropped by retention since planning, as a live one would be
        raise
    if task.cutoff_ms is not None:
        out = [b for b in out if b.max_timestamp >= task.cutoff_ms]
    return out


def read_archive(task: ScanTask, batch_rows: int = ARCHIVE_ROWS_PER_BATCH) -> Iterable[Any]:
    """The rows of an archived task (`tier == ARCHIVE`) as pyarrow RecordBatches of the
    file's columns (key, value, topic, partition, offset, timestamp, timestampType,
    headers), in offset order: only the offsets in [start, end) and, with a `cutoff_ms`,
    the timestamps at or after it, and none of the batches of the aborted transactions in
    `skip`. Row groups outside the range (by their offset statistics) are not read."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from engine.storage import archive

    if task.tier != ARCHIVE or task.file is None:
        raise InvalidArgument(f"scan task of partitionlet {task.partitionlet} is not archived")
    fs, path = archive.filesystem(Path(task.cluster), task.file)
    try:
        handle = fs.open_input_file(path)
    except FileNotFoundError as exc:
        if _gone(task):
            return
        raise StorageError(
            f"archive file {task.file} of partitionlet {task.partitionlet} is missing"
        ) from exc
    aborted = None
    if task.skip:
        # the offsets of the aborted batches, from the file's batch table
        reader = archive.ArchiveReader(Path(task.cluster), _archive_row(task))
        found = reader.aborted_offsets(task.partitionlet, task.skip)
        if found:
            aborted = np.array(found, dtype=np.int64).reshape(-1, 2)
    with handle, pq.ParquetFile(handle, page_checksum_verification=True) as f:
        md = f.metadata
        col = md.schema.to_arrow_schema().get_field_index("offset")
        groups = []
        for i in range(md.num_row_groups):
            stats = md.row_group(i).column(col).statistics
            if stats is not None and stats.has_min_max:
                if stats.max < task.start or stats.min >= task.end:
                    continue
            groups.append(i)
        if not groups:
            return
        for rb in _checked_batches(f, batch_rows, groups, task):
            offsets = rb.column("offset")
            keep = pc.and_(pc.greater_equal(offsets, task.start), pc.less(offsets, task.end))
            if task.cutoff_ms is not None:
                stamps = rb.column("timestamp").cast("int64")
                keep = pc.and_(keep, pc.greater_equal(stamps, task.cutoff_ms * 1000))
            if aborted is not None:
                at = offsets.to_numpy()
                i = np.searchsorted(aborted[:, 0], at, side="right") - 1
                inside = (i >= 0) & (at <= aborted[np.maximum(i, 0), 1])
                keep = pc.and_(keep, pa.array(~inside))
            if not pc.all(keep).as_py():
                rb = rb.filter(keep)
            if rb.num_rows:
                yield rb


def _checked_batches(f: Any, batch_rows: int, groups: list[int], task: ScanTask) -> Iterable[Any]:
    """`f.iter_batches`, a page that fails its CRC (or does not decode) raising
    `CorruptBatch` naming the task's file."""
    import pyarrow as pa

    batches = f.iter_batches(batch_size=batch_rows, row_groups=groups)
    while True:
        try:
            rb = next(batches)
        except StopIteration:
            return
        except (OSError, pa.ArrowException) as exc:
            raise CorruptBatch(
                f"archive file {task.file} is damaged ({exc})",
                cluster=task.cluster,
                topic=task.topic,
                partition=task.partition,
                base_offset=task.start,
                last_offset=task.end - 1,
                partitionlet=task.partitionlet,
            ) from None
        yield rb


def columns(batch: ScanBatch, task: ScanTask) -> Columns | None:
    """The records of a stored batch (as `read(task)` gives them) that lie in the task's
    offsets [start, end), as the `Columns` a columnar reader takes
    (`engine.client.arrow.record_batch`); None when none do. Records older than the
    task's `cutoff_ms` are still among them (`record_batch` leaves them out)."""
    import numpy as np

    at = batch_codec.positions(batch.payload)
    base, count = batch.base_offset, at.count
    if at.deltas_at is None:  # offsets base, base + 1, ...
        i0 = min(max(task.start - base, 0), count)
        i1 = min(max(task.end - base, 0), count)
    else:
        deltas = np.frombuffer(batch.payload, "<u4", count, at.deltas_at).astype(np.int64)
        i0 = int(np.searchsorted(deltas, task.start - base, "left"))
        i1 = int(np.searchsorted(deltas, task.end - base, "left"))
    if i0 >= i1:
        return None
    return Columns(batch.payload, at, base, batch.timestamp_type, batch.first_timestamp, i0, i1)
