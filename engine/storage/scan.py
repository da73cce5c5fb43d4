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
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from engine import names
from engine.errors import InvalidArgument
from engine.policies import check_stored
from engine.records import TopicPartition
from engine.storage import batch as batch_codec
from engine.storage.connection import BUSY_TIMEOUT_MS, translate
from engine.storage.log import PartitionLog
from engine.storage.volume import DELETED

if TYPE_CHECKING:
    from engine.auth.principal import Principal
    from engine.cluster import Cluster

EARLIEST, LATEST = "earliest", "latest"
Position = int | str  # an offset, or EARLIEST / LATEST
OffsetSpec = str | Mapping[TopicPartition, Position]


@dataclass(frozen=True)
class ScanTask:
    """The offsets [start, end) of one partitionlet to read: one Spark task."""

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


class ScanBatch(NamedTuple):
    """One stored batch: its offsets, timestamp type (0 create, 1 log append), first and
    largest timestamp (ms), and its payload (engine.storage.batch's layout)."""

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

    count: int
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


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _topics(
    cluster: Cluster, topics: Iterable[str], principal: Principal | None
) -> dict[str, _Topic]:
    """The named topics, after the consume permission on their streams is checked."""
    catalog = cluster.catalog
    now = _now_ms()
    streams: dict[str, int] = {}
    out = {}
    for full in topics:
        stream, name = names.split_full_name(full)
        if stream not in streams:
            row = catalog.stream(stream)
            cluster.authorize(row, "consume_perm", principal)
            streams[stream] = check_stored(stream, row.policies)["ttl"]
        topic = catalog.topic(stream, name)
        ttl = streams[stream]
        out[topic.full_name] = _Topic(
            topic.id, stream, topic.full_name, topic.partitions, now - ttl * 1000 if ttl else None
        )
    return out


def _position(spec: OffsetSpec, tp: TopicPartition, default: str, what: str) -> Position:
    value = spec if isinstance(spec, str) else spec.get(tp, default)
    if value in (EARLIEST, LATEST):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{what} of {tp.topic} partition {tp.partition}: {value!r}")
    return value


def ranges(
    cluster: Cluster,
    topics: Iterable[str],
    *,
    starting: OffsetSpec = EARLIEST,
    ending: OffsetSpec = LATEST,
    starting_timestamp: int | None = None,
    ending_timestamp: int | None = None,
    principal: Principal | None = None,
) -> dict[TopicPartition, tuple[int, int]]:
    """See `Cluster.scan_ranges`."""
    found = _topics(cluster, topics, principal)
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
            log = PartitionLog(cluster, topic.topic_id, partition, topic.name)
            lo, hi = log.start_offset(), log.end_offset()
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
    cluster: Cluster,
    wanted: Mapping[TopicPartition, tuple[int, int]],
    principal: Principal | None = None,
) -> list[ScanTask]:
    """See `Cluster.scan_plan`."""
    found = _topics(cluster, sorted({tp.topic for tp in wanted}), principal)
    root = str(Path(cluster.path).absolute())
    catalog_path = str(Path(cluster.catalog.path).absolute())
    out = []
    for tp, (start, end) in sorted(wanted.items()):
        if start >= end:
            continue
        topic = found[tp.topic]
        cutoff = topic.cutoff_ms
        for pl in cluster.catalog.chain(topic.topic_id, tp.partition):
            pl_end = pl.end_offset if pl.end_offset is not None else end
            lo, hi = max(start, pl.base_offset), min(end, pl_end)
            if lo >= hi:
                continue
            if cutoff is not None and pl.end_offset is not None and pl.max_ts is not None:
                if pl.max_ts < cutoff:
                    continue  # sealed and expired as a whole
            path = str(cluster.volume(pl.volume_id).path.absolute())
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
                )
            )
    return out


# --- reading (in a task, with no cluster open) ------------------------------------------------


def _connect_ro(path: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)


def _relocate(task: ScanTask) -> str | None:
    """The volume file that holds the partitionlet now, per the catalog (after a move)."""
    catalog = task.catalog_path
    conn = _connect_ro(catalog)
    try:
        row = conn.execute(
            "SELECT v.path FROM partitionlets p JOIN volumes v ON v.id = p.volume_id "
            "WHERE p.id = ?",
            (task.partitionlet,),
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise translate(exc, catalog, "catalog") from exc
    finally:
        conn.close()
    if row is None:
        return None
    path = Path(row[0])
    return str(path if path.is_absolute() else Path(task.cluster) / path)


def _batches(path: str, task: ScanTask) -> tuple[list[ScanBatch], bool]:
    """(batches of the task's range, whether the volume holds the partitionlet live)."""
    conn = _connect_ro(path)
    try:
        conn.execute("BEGIN")  # one snapshot for the state and the batches
        state = conn.execute(
            "SELECT state FROM partitionlets WHERE id = ?", (task.partitionlet,)
        ).fetchone()
        rows = conn.execute(
            "SELECT base_offset, last_offset, ts_type, first_ts, max_ts, payload FROM batches "
            "WHERE partitionlet = ? AND last_offset >= ? AND base_offset < ? "
            "ORDER BY last_offset",
            (task.partitionlet, task.start, task.end),
        ).fetchall()
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise translate(exc, path, "volume") from exc
    finally:
        conn.close()
    return [ScanBatch(*r) for r in rows], state is not None and state[0] != DELETED


def read(task: ScanTask) -> list[ScanBatch]:
    """The stored batches that hold the offsets [task.start, task.end), in offset order,
    following the partitionlet if it moved; batches wholly older than `task.cutoff_ms`
    are left out. Payloads are in the plain layout: a compressed batch (the stream's
    `compression` policy) is inflated here, so `layout` reads every batch alike."""
    batches, live = _batches(task.volume_path, task)
    if not live:
        moved = _relocate(task)
        if moved is not None and moved != task.volume_path:
            batches, live = _batches(moved, task)
    if task.cutoff_ms is not None:
        batches = [b for b in batches if b.max_timestamp >= task.cutoff_ms]
    return [
        b._replace(payload=batch_codec.plain(b.payload))
        if b.payload[1] & batch_codec.F_CODEC
        else b
        for b in batches
    ]
