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
from engine.client import arrow
from engine.cluster import CATALOG_FILE, Cluster
from engine.errors import InvalidPolicy, NotFound, PartitionletError
from engine.records import TopicPartition
from engine.storage import scan as engine_scan
from engine.storage.scan import ScanTask

# Column names and Spark SQL types: those of Spark's Kafka source (with includeHeaders),
# plus `stream`.
# An archived partitionlet's Parquet file has these, all but `stream` (docs/ARCHIVE.md).
FILE_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, "
    "headers array<struct<key:string,value:binary>>"
)
SCHEMA_DDL = FILE_SCHEMA_DDL + ", stream string"
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


def isolation_of(options: dict[str, str]) -> str:
    """The option `isolationLevel`: `read_committed` (the default: committed transactions
    only, never past a partition's last stable offset) or `read_uncommitted`."""
    raw = options.get("isolationLevel") or engine_scan.READ_COMMITTED
    if raw not in engine_scan.ISOLATION_LEVELS:
        raise OptionError(
            f"option isolationLevel must be 'read_committed' or 'read_uncommitted', got {raw!r}"
        )
    return raw


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
            stream = names.validate_stream_path(stream_opt)
            regex = None
            if pattern:
                try:
                    regex = re.compile(pattern)
                except re.error as exc:
                    raise OptionError(f"option topicPattern {pattern!r}: {exc}") from None
                except RecursionError:  # re's parser recurses once per nested group
                    raise OptionError("option topicPattern nests its groups too deeply") from None
            for full in cluster.topic_names(stream):
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
        return cluster.scan_ranges(
            [p.topic for p in plans],
            principal=principal_of(options),
            isolation_level=isolation_of(options),
            **kw,
        )
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


RANGE_OPTIONS = ("startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp")


def parse_ranges(options: dict[str, str]) -> list[dict[TopicPartition, tuple[int, int]]] | None:
    """The option `offsetRanges`, JSON `{"/s:t": {"0": [[start, end], ...]}}` (exact
    offsets, ends exclusive), as layers for `slices` (the k-th range of every partition in
    layer k); None without it. It replaces the other range options: it is how a caller
    that planned a read itself (spark_tasks.history) asks for exactly those offsets."""
    raw = options.get("offsetRanges")
    if raw is None or raw == "":
        return None
    clash = [name for name in RANGE_OPTIONS if options.get(name)]
    if clash:
        raise OptionError(f"option offsetRanges replaces {', '.join(clash)}: give one or the other")
    try:
        spec = json.loads(raw)
    except ValueError:
        spec = None
    if not isinstance(spec, dict):
        raise OptionError(
            f'option offsetRanges must be JSON such as {{"/s:t": {{"0": [[0, 10]]}}}}, got {raw!r}'
        )
    layers: list[dict[TopicPartition, tuple[int, int]]] = []
    for topic, parts in spec.items():
        try:
            names.split_full_name(topic)
            items = [(int(p), [(int(a), int(b)) for a, b in rs]) for p, rs in parts.items()]
        except (ValueError, TypeError, AttributeError, PartitionletError) as exc:
            raise OptionError(f"option offsetRanges: bad entry for {topic!r}: {exc}") from None
        for p, rs in items:
            for k, (a, b) in enumerate(rs):
                if p < 0 or a < 0 or b < a:
                    raise OptionError(
                        f"option offsetRanges: {topic!r} partition {p}: [{a}, {b}) is not a range"
                    )
                while len(layers) <= k:
                    layers.append({})
                layers[k][TopicPartition(topic, p)] = (a, b)
    return layers


def slices(cluster: Cluster, options: dict[str, str], wanted: dict) -> list[ScanTask]:
    """One scan task per partitionlet that meets a wanted range ({TopicPartition or
    (topic, partition): (start, end)}), in topic/partition/offset order."""
    try:
        return cluster.scan_plan(
            {TopicPartition(*tp): r for tp, r in wanted.items()},
            principal=principal_of(options),
            isolation_level=isolation_of(options),
        )
    except (NotFound, InvalidPolicy) as exc:
        raise OptionError(str(exc)) from None


# --- reading ----------------------------------------------------------------------------


def read_arrow(s: ScanTask) -> Iterator[Any]:
    """pyarrow RecordBatches of the messages of a scan task, in offset order.

    A live partitionlet's stored batches become Arrow with the engine's columnar builder
    (engine.client.arrow, as `Consumer.poll_arrow`): keys and values are cut out of the
    payload with numpy, no Python object per message. An archived one (`s.tier ==
    "archive"`) is its Parquet file, read with pyarrow.parquet (offsets and ttl filtered).
    """
    if s.tier == engine_scan.ARCHIVE:
        for rb in engine_scan.read_archive(s, ROWS_PER_ARROW_BATCH):
            yield _with_stream(rb, s.stream)
        return
    pending: list = []
    rows = 0
    for batch in engine_scan.read(s):
        cols = engine_scan.columns(batch, s)
        if cols is None:
            continue
        pending.append(cols)
        rows += cols.end - cols.start
        if rows >= ROWS_PER_ARROW_BATCH:
            yield from _built(s, pending)
            pending, rows = [], 0
    if pending:
        yield from _built(s, pending)


def _built(s: ScanTask, chunks: list) -> Iterator[Any]:
    rb = arrow.record_batch(s.topic, s.partition, chunks, s.cutoff_ms)
    if rb.num_rows:
        yield _with_stream(rb, s.stream)


def _with_stream(rb: Any, stream: str) -> Any:
    """`rb` (the Kafka source's columns) with the `stream` column, in the source's schema
    (a Parquet file read back may name its list items differently: cast)."""
    import pyarrow as pa

    schema = arrow_schema()
    base = arrow.schema()
    if rb.schema != base:
        rb = rb.cast(base)
    return pa.RecordBatch.from_arrays(
        [*rb.columns, pa.repeat(pa.scalar(stream, pa.string()), rb.num_rows)], schema=schema
    )


def arrow_schema() -> Any:
    """The Arrow schema of the data source: `Consumer.poll_arrow`'s (engine.client.arrow)
    and `stream`."""
    import pyarrow as pa

    return arrow.schema().append(pa.field("stream", pa.string()))
