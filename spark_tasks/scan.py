"""Planning and reading a scan of partitionlets, for the Spark data source.

Nothing here imports pyspark: the planner runs where Spark plans (the driver's Python
worker), the reader runs in the tasks, and both only need the engine and pyarrow.

The engine's scan plan (engine.storage.scan, docs/SPARK.md) does the work: a scan is a
list of `ScanTask`s, one per partitionlet that meets the requested offset range of its
partition, which `Cluster.scan_plan` makes; a task reads its volume file with
`engine.storage.scan.read`, without the catalog. This module turns the data source's
options into the plan's arguments and the stored batches into Arrow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import names
from engine.auth.principal import Principal
from engine.cluster import CATALOG_FILE, Cluster
from engine.errors import InvalidPolicy, NotFound, PartitionletError
from engine.records import TopicPartition
from engine.storage import scan as engine_scan
from engine.storage.scan import ScanTask

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

# One Spark task's share of a scan (picklable): the engine's scan task.
Slice = ScanTask


class OptionError(ValueError):
    """A data source option is missing, malformed or contradicts another."""


@dataclass(frozen=True)
class TopicPlan:
    stream: str
    topic: str  # full name
    partitions: int


# --- options ----------------------------------------------------------------------------


def int_option(options: dict[str, str], name: str) -> int | None:
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
    wanted: list[str] = []
    try:
        if topic_opt:
            for full in (t.strip() for t in topic_opt.split(",")):
                names.split_full_name(full)
                wanted.append(full)
        else:
            names.validate_stream_path(stream_opt)
            regex = None
            if pattern:
                try:
                    regex = re.compile(pattern)
                except re.error as exc:
                    raise OptionError(f"option topicPattern {pattern!r}: {exc}") from None
            for full in cluster.topic_names(stream_opt):
                if regex is None or regex.fullmatch(full.partition(":")[2]):
                    wanted.append(full)
        plans = []
        for full in wanted:
            stream, _ = names.split_full_name(full)
            cluster.authorize(stream, "consume_perm", principal)
            info = cluster.topic(full)
            plans.append(TopicPlan(stream, info.name, len(info.partitions)))
    except (NotFound, InvalidPolicy) as exc:
        raise OptionError(str(exc)) from None
    return plans


# --- offsets ----------------------------------------------------------------------------


def _spec(spec: str | dict) -> engine_scan.OffsetSpec:
    """The engine's form of a JSON offsets option: -2 and -1 become earliest and latest."""
    if isinstance(spec, str):
        return spec
    marks = {EARLIEST: engine_scan.EARLIEST, LATEST: engine_scan.LATEST}
    return {
        TopicPartition(topic, p): marks.get(o, o)
        for topic, parts in spec.items()
        for p, o in parts.items()
    }


def _scan_ranges(cluster: Cluster, plans: list[TopicPlan], options: dict[str, str], **kw: Any):
    try:
        return cluster.scan_ranges([p.topic for p in plans], principal=principal_of(options), **kw)
    except (NotFound, InvalidPolicy) as exc:
        raise OptionError(str(exc)) from None


def ranges(cluster: Cluster, plans: list[TopicPlan], options: dict[str, str]) -> dict:
    """{TopicPartition: (start, end)} of a batch read, after the range options."""
    starting = parse_offsets(options, "startingOffsets", "earliest")
    ending = parse_offsets(options, "endingOffsets", "latest")
    if ending == "earliest":
        raise OptionError("endingOffsets cannot be 'earliest'")
    if isinstance(ending, dict) and any(o == EARLIEST for p in ending.values() for o in p.values()):
        raise OptionError("endingOffsets cannot use -2 (earliest)")
    start_ts = int_option(options, "startingTimestamp")
    end_ts = int_option(options, "endingTimestamp")
    if start_ts is not None and end_ts is not None and end_ts < start_ts:
        raise OptionError("endingTimestamp is before startingTimestamp")
    known = {p.topic for p in plans}
    for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if isinstance(spec, dict):
            for topic in spec:
                if topic not in known:
                    raise OptionError(f"option {name} names {topic!r}, which this read does not")
    return _scan_ranges(
        cluster,
        plans,
        options,
        starting=_spec(starting),
        ending=_spec(ending),
        starting_timestamp=start_ts,
        ending_timestamp=end_ts,
    )


def starts(cluster: Cluster, plans: list[TopicPlan], options: dict[str, str]) -> dict:
    """Where a streaming read starts: {full topic: {partition (str): offset}}, from
    startingOffsets (default latest) or, when given, startingTimestamp."""
    starting = parse_offsets(options, "startingOffsets", "latest")
    start_ts = int_option(options, "startingTimestamp")
    found = _scan_ranges(
        cluster,
        plans,
        options,
        # a timestamp decides alone: from the first message at or after it
        starting="earliest" if start_ts is not None else _spec(starting),
        starting_timestamp=start_ts,
    )
    out: dict[str, dict[str, int]] = {p.topic: {} for p in plans}
    for tp, (start, _end) in sorted(found.items()):
        out[tp.topic][str(tp.partition)] = start
    return out


def ends(cluster: Cluster, plans: list[TopicPlan], options: dict[str, str]) -> dict:
    """The log end offsets: {full topic: {partition (str): offset}}."""
    found = _scan_ranges(cluster, plans, options)
    out: dict[str, dict[str, int]] = {p.topic: {} for p in plans}
    for tp, (_start, end) in sorted(found.items()):
        out[tp.topic][str(tp.partition)] = end
    return out


def slices(cluster: Cluster, options: dict[str, str], wanted: dict) -> list[ScanTask]:
    """One scan task per partitionlet that meets a wanted range ({TopicPartition or
    (topic, partition): (start, end)}), in topic/partition/offset order."""
    try:
        return cluster.scan_plan(
            {TopicPartition(*tp): r for tp, r in wanted.items()},
            principal=principal_of(options),
        )
    except (NotFound, InvalidPolicy) as exc:
        raise OptionError(str(exc)) from None


# --- reading ----------------------------------------------------------------------------


def read_arrow(s: ScanTask) -> Iterator[Any]:
    """pyarrow RecordBatches of the messages of a scan task, in offset order.

    The stored batch format is columnar, so keys and values become Arrow binary arrays
    straight from the payload (lengths -> offsets with numpy, the bytes sliced once), with no
    Python object per message; only headers are decoded message by message.
    """
    import pyarrow as pa

    schema = arrow_schema()
    pending: list = []
    rows = 0
    for batch in engine_scan.read(s):
        rb = _arrow_batch(batch, s, schema)
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


def _arrow_batch(batch: engine_scan.ScanBatch, s: ScanTask, schema: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    payload, base, ts_type = batch.payload, batch.base_offset, batch.timestamp_type
    cols = engine_scan.layout(payload, base)
    count = cols.count
    if cols.timestamps_at is not None:
        stamps = np.frombuffer(payload, "<i8", count, cols.timestamps_at)
    else:
        stamps = np.full(count, cols.base_timestamp, dtype=np.int64)
    if cols.deltas_at is not None:
        offsets = np.frombuffer(payload, "<u4", count, cols.deltas_at).astype(np.int64) + base
    else:
        offsets = np.arange(base, base + count, dtype=np.int64)
    value_lengths = np.frombuffer(payload, "<i4", count, cols.value_lengths_at)
    key_lengths = None
    if cols.key_lengths_at is not None:
        key_lengths = np.frombuffer(payload, "<i4", count, cols.key_lengths_at)
    headers = cols.headers
    pos = cols.values_at
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
    if s.cutoff_ms is not None and batch.first_timestamp < s.cutoff_ms:
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
