"""Planning and reading a scan of partitionlets, for the Spark data source.

Nothing here imports pyspark: the planner runs where Spark plans (the driver's Python
worker), the reader runs in the tasks, and both only need the engine and pyarrow.

A scan is a list of `Slice`s: one per partitionlet that meets the requested offset range of
its partition. A slice names the volume file and the partitionlet id, so a task opens that
one SQLite file read-only and reads its batches by the index `(partitionlet, last_offset)`,
without the catalog. If the partitionlet moved to another volume between planning and
reading (`rebalance`), the task finds its new home in the catalog, read-only too.
"""

from __future__ import annotations

import json
import re
import sqlite3
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import names
from engine.auth.principal import Principal
from engine.cluster import CATALOG_FILE, Cluster
from engine.errors import InvalidPolicy, NotFound, PartitionletError
from engine.policies import check_stored
from engine.storage import batch as batch_codec
from engine.storage.log import PartitionLog

# Column names and Spark SQL types: those of Spark's Kafka source (with includeHeaders),
# plus `stream`.
SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, "
    "headers array<struct<key:string,value:binary>>, stream string"
)
COLUMNS = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
    "stream",
)
EARLIEST, LATEST = -2, -1  # the Kafka source's codes in JSON offsets
ROWS_PER_ARROW_BATCH = 8192
BUSY_TIMEOUT_S = 30.0


class OptionError(ValueError):
    """A data source option is missing, malformed or contradicts another."""


@dataclass(frozen=True)
class Slice:
    """The offsets [start, end) of one partitionlet to read (picklable, sent to a task)."""

    cluster: str
    volume_path: str
    pl_id: int
    stream: str
    topic: str
    partition: int
    start: int
    end: int
    cutoff_ms: int | None  # messages older than this have expired (stream ttl)


@dataclass(frozen=True)
class TopicPlan:
    topic_id: int
    stream: str
    topic: str  # full name
    partitions: int
    ttl_s: int


# --- options ----------------------------------------------------------------------------


def _int_option(options: dict[str, str], name: str) -> int | None:
    raw = options.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise OptionError(
            f"option {name} must be an integer (ms or offsets), got {raw!r}"
        ) from None


def cluster_path(options: dict[str, str]) -> Path:
    raw = options.get("cluster")
    if not raw:
        raise OptionError("option 'cluster' is required: the path of a Partitionlet cluster")
    path = Path(raw)
    if not (path / CATALOG_FILE).is_file():
        raise OptionError(f"option cluster={raw!r}: no Partitionlet cluster there (no catalog.db)")
    return path


def principal_of(options: dict[str, str]) -> Principal | None:
    user = options.get("principal")
    if not user:
        return None
    groups = [g for g in options.get("principalGroups", "").split(",") if g]
    return Principal(user, tuple(groups))


def parse_offsets(options: dict[str, str], name: str, default: str) -> str | dict:
    """'earliest', 'latest', or {full topic: {partition: offset}} from a JSON option."""
    raw = options.get(name, default).strip()
    if raw in ("earliest", "latest"):
        return raw
    try:
        spec = json.loads(raw)
    except ValueError:
        raise OptionError(
            f"option {name} must be 'earliest', 'latest' or JSON such as "
            f'{{"/s:t": {{"0": 12}}}}, got {raw!r}'
        ) from None
    if not isinstance(spec, dict):
        raise OptionError(f"option {name}: JSON must be an object of topics, got {raw!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in spec.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name}: {topic!r} must map partitions to offsets")
        try:
            names.split_full_name(topic)
            out[topic] = {int(p): int(o) for p, o in parts.items()}
        except (ValueError, TypeError, PartitionletError) as exc:
            raise OptionError(f"option {name}: bad entry for {topic!r}: {exc}") from None
        for p, o in out[topic].items():
            if p < 0 or o < EARLIEST:
                raise OptionError(
                    f"option {name}: {topic!r} partition {p} offset {o}: partitions are >= 0, "
                    "offsets >= 0, or -2 (earliest) / -1 (latest)"
                )
    return out


def open_cluster(options: dict[str, str]) -> Cluster:
    return Cluster.open(cluster_path(options))


def resolve_topics(cluster: Cluster, options: dict[str, str]) -> list[TopicPlan]:
    """The topics an option set names, after the consume permission is checked."""
    topic_opt = options.get("topic") or options.get("subscribe")
    stream_opt = options.get("stream")
    pattern = options.get("topicPattern")
    if bool(topic_opt) == bool(stream_opt):
        raise OptionError("give exactly one of the options 'topic' (full name) and 'stream'")
    if pattern and not stream_opt:
        raise OptionError("option 'topicPattern' needs the option 'stream'")
    principal = principal_of(options)
    catalog = cluster._catalog
    wanted: list[tuple[str, str]] = []
    try:
        if topic_opt:
            for full in (t.strip() for t in topic_opt.split(",")):
                wanted.append(names.split_full_name(full))
        else:
            names.validate_stream_path(stream_opt)
            regex = None
            if pattern:
                try:
                    regex = re.compile(pattern)
                except re.error as exc:
                    raise OptionError(f"option topicPattern {pattern!r}: {exc}") from None
            srow = catalog.stream(stream_opt)
            for t in catalog.topics(srow.id, None, None, 0):
                if regex is None or regex.fullmatch(t.name):
                    wanted.append((stream_opt, t.name))
        plans = []
        streams: dict[str, Any] = {}
        for stream, topic in wanted:
            if stream not in streams:
                streams[stream] = catalog.stream(stream)
                cluster._authorize(streams[stream], "consume_perm", principal)
            row = catalog.topic(stream, topic)
            plans.append(
                TopicPlan(
                    row.id,
                    stream,
                    row.full_name,
                    row.partitions,
                    check_stored(stream, streams[stream].policies)["ttl"],
                )
            )
    except (NotFound, InvalidPolicy) as exc:
        raise OptionError(str(exc)) from None
    return plans


# --- offsets ----------------------------------------------------------------------------


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def cutoff_of(plan: TopicPlan, now: int) -> int | None:
    return now - plan.ttl_s * 1000 if plan.ttl_s else None


def bounds(cluster: Cluster, plan: TopicPlan, partition: int) -> tuple[int, int, PartitionLog]:
    """(log start offset, log end offset) of a partition, and its log."""
    log = PartitionLog(cluster, plan.topic_id, partition, plan.topic)
    return log.start_offset(), log.end_offset(), log


def offset_at(
    spec: str | dict, plan: TopicPlan, partition: int, start: int, end: int, default: int
) -> int:
    if spec == "earliest":
        return start
    if spec == "latest":
        return end
    value = spec.get(plan.topic, {}).get(partition, default)  # type: ignore[union-attr]
    if value == EARLIEST:
        return start
    if value == LATEST:
        return end
    return value


def ranges(cluster: Cluster, plans: list[TopicPlan], options: dict[str, str]) -> dict:
    """{(topic, partition): (start, end)} of a batch read, after the range options."""
    starting = parse_offsets(options, "startingOffsets", "earliest")
    ending = parse_offsets(options, "endingOffsets", "latest")
    if ending == "earliest":
        raise OptionError("endingOffsets cannot be 'earliest'")
    if isinstance(ending, dict) and any(o == EARLIEST for p in ending.values() for o in p.values()):
        raise OptionError("endingOffsets cannot use -2 (earliest)")
    start_ts = _int_option(options, "startingTimestamp")
    end_ts = _int_option(options, "endingTimestamp")
    if start_ts is not None and end_ts is not None and end_ts < start_ts:
        raise OptionError("endingTimestamp is before startingTimestamp")
    known = {p.topic for p in plans}
    for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if isinstance(spec, dict):
            for topic in spec:
                if topic not in known:
                    raise OptionError(f"option {name} names {topic!r}, which this read does not")
    now = now_ms()
    out = {}
    for plan in plans:
        cutoff = cutoff_of(plan, now)
        for partition in range(plan.partitions):
            lo, hi, log = bounds(cluster, plan, partition)
            start = offset_at(starting, plan, partition, lo, hi, EARLIEST)
            end = offset_at(ending, plan, partition, lo, hi, LATEST)
            if start_ts is not None:
                found = log.offset_for_time(start_ts, cutoff)
                start = max(start, found.offset if found else hi)
            if end_ts is not None:
                # As Kafka's source: the end is the first offset at or after the time.
                found = log.offset_for_time(end_ts, cutoff)
                end = min(end, found.offset if found else hi)
            out[(plan.topic, partition)] = (max(start, lo), min(end, hi))
    return out


def slices(
    cluster: Cluster, plans: list[TopicPlan], wanted: dict[tuple[str, int], tuple[int, int]]
) -> list[Slice]:
    """One slice per partitionlet that meets a wanted range, in topic/partition/offset order."""
    now = now_ms()
    out = []
    by_topic = {p.topic: p for p in plans}
    for (topic, partition), (start, end) in sorted(wanted.items()):
        if start >= end:
            continue
        plan = by_topic[topic]
        cutoff = cutoff_of(plan, now)
        for pl in cluster._catalog.chain(plan.topic_id, partition):
            pl_end = pl.end_offset if pl.end_offset is not None else end
            lo, hi = max(start, pl.base_offset), min(end, pl_end)
            if lo >= hi:
                continue
            if cutoff is not None and pl.end_offset is not None and pl.max_ts is not None:
                if pl.max_ts < cutoff:
                    continue  # sealed and expired as a whole
            path = str(cluster._volume(pl.volume_id).path.absolute())
            out.append(
                Slice(
                    str(cluster.path.absolute()),
                    path,
                    pl.id,
                    plan.stream,
                    topic,
                    partition,
                    lo,
                    hi,
                    cutoff,
                )
            )
    return out


# --- reading ----------------------------------------------------------------------------


def _connect_ro(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    return conn


def _relocate(s: Slice) -> str | None:
    """The volume that holds the partitionlet now, per the catalog (after a move)."""
    conn = _connect_ro(str(Path(s.cluster) / CATALOG_FILE))
    try:
        row = conn.execute(
            "SELECT v.path FROM partitionlets p JOIN volumes v ON v.id = p.volume_id "
            "WHERE p.id = ?",
            (s.pl_id,),
        ).fetchone()
    finally:
        conn.close()
    if row is None:
        return None
    path = Path(row[0])
    return str(path if path.is_absolute() else Path(s.cluster) / path)


def _batches(path: str, s: Slice) -> tuple[list[tuple], bool]:
    """(batch rows of the slice, whether the volume holds the partitionlet live)."""
    conn = _connect_ro(path)
    try:
        conn.execute("BEGIN")  # one snapshot for the state and the batches
        state = conn.execute("SELECT state FROM partitionlets WHERE id = ?", (s.pl_id,)).fetchone()
        rows = conn.execute(
            "SELECT base_offset, last_offset, ts_type, first_ts, max_ts, payload FROM batches "
            "WHERE partitionlet = ? AND last_offset >= ? AND base_offset < ? "
            "ORDER BY last_offset",
            (s.pl_id, s.start, s.end),
        ).fetchall()
        conn.execute("COMMIT")
    finally:
        conn.close()
    return rows, state is not None and state[0] != 2


def read_rows(s: Slice) -> Iterator[tuple]:
    """Batch rows of a slice, following the partitionlet if it moved."""
    rows, live = _batches(s.volume_path, s)
    if not live:
        moved = _relocate(s)
        if moved is not None and moved != s.volume_path:
            rows, live = _batches(moved, s)
    return iter(rows)


def read_arrow(s: Slice) -> Iterator[Any]:
    """pyarrow RecordBatches of the messages of a slice, in offset order.

    The stored batch format is columnar, so keys and values become Arrow binary arrays
    straight from the payload (lengths -> offsets with numpy, the bytes sliced once), with no
    Python object per message; only headers are decoded message by message.
    """
    import pyarrow as pa

    schema = arrow_schema()
    pending: list = []
    rows = 0
    for row in read_rows(s):
        if s.cutoff_ms is not None and row[4] < s.cutoff_ms:
            continue  # the whole batch has expired
        rb = _arrow_batch(row, s, schema)
        if rb is None or not rb.num_rows:
            continue
        pending.append(rb)
        rows += rb.num_rows
        if rows >= ROWS_PER_ARROW_BATCH:
            yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
            pending, rows = [], 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def _binary(pa, np, payload: bytes, lengths, pos: int):
    """An Arrow binary array of `lengths` (-1 for null) cut from `payload` at `pos`, and
    the position after it."""
    sizes = np.maximum(lengths, 0).astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    valid = lengths >= 0
    nulls = int(len(lengths) - valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes()) if nulls else None
    data = pa.py_buffer(payload)[pos : pos + total]
    arr = pa.Array.from_buffers(
        pa.large_binary(), len(lengths), [bitmap, pa.py_buffer(offsets.tobytes()), data], nulls
    )
    return arr.cast(pa.binary()), pos + total


def _arrow_batch(row: tuple, s: Slice, schema: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    base, _last, ts_type, first_ts, _max_ts, payload = row
    version, flags, count, base_ts = batch_codec._HEADER.unpack_from(payload, 0)
    if version != batch_codec.VERSION:
        raise ValueError(f"unsupported record batch version {version}")
    pos = batch_codec._HEADER.size
    if flags & batch_codec.F_TS64:
        stamps = np.frombuffer(payload, "<i8", count, pos)
        pos += 8 * count
    else:
        stamps = np.full(count, base_ts, dtype=np.int64)
    if flags & batch_codec.F_DELTAS:
        offsets = np.frombuffer(payload, "<u4", count, pos).astype(np.int64) + base
        pos += 4 * count
    else:
        offsets = np.arange(base, base + count, dtype=np.int64)
    value_lengths = np.frombuffer(payload, "<i4", count, pos)
    pos += 4 * count
    key_lengths = None
    if flags & batch_codec.F_KEYS:
        key_lengths = np.frombuffer(payload, "<i4", count, pos)
        pos += 4 * count
    headers = None
    if flags & batch_codec.F_HEADERS:
        (hlen,) = struct.unpack_from("<I", payload, pos)
        pos += 4 + hlen
        headers = batch_codec.decode(payload, base).headers
    values, pos = _binary(pa, np, payload, value_lengths, pos)
    if key_lengths is not None:
        keys, pos = _binary(pa, np, payload, key_lengths, pos)
    else:
        keys = pa.nulls(count, pa.binary())
    if headers is not None:
        head = pa.array(
            [[{"key": k, "value": v} for k, v in h] if h else None for h in headers],
            schema.field("headers").type,
        )
    else:
        head = pa.nulls(count, schema.field("headers").type)
    rb = pa.RecordBatch.from_arrays(
        [
            keys,
            values,
            pa.array(np.full(count, s.topic, dtype=object), pa.string()),
            pa.array(np.full(count, s.partition, dtype=np.int32)),
            pa.array(offsets),
            pa.array(stamps * 1000).cast(pa.timestamp("us", tz="UTC")),
            pa.array(np.full(count, ts_type, dtype=np.int32)),
            head,
            pa.array(np.full(count, s.stream, dtype=object), pa.string()),
        ],
        schema=schema,
    )
    i0 = int(np.searchsorted(offsets, s.start, "left"))
    i1 = int(np.searchsorted(offsets, s.end, "left"))
    if i0 >= i1:
        return None
    if i0 or i1 < count:
        rb = rb.slice(i0, i1 - i0)
        stamps = stamps[i0:i1]
    if s.cutoff_ms is not None and first_ts < s.cutoff_ms:
        rb = rb.filter(pa.array(stamps >= s.cutoff_ms))
    return rb


def arrow_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("timestampType", pa.int32()),
            (
                "headers",
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
            ("stream", pa.string()),
        ]
    )
