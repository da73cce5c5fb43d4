"""The `partitionlet` PySpark data source: batch and streaming reads, and a sink.

    spark_tasks.register(spark)
    df = (spark.read.format("partitionlet").option("cluster", "/data/dc1")
          .option("topic", "/apps/sensors:car-17").load())

Options of a read: `cluster`; `topic` (a full name, or several separated by commas) or
`stream` with an optional `topicPattern` (a regex that must match whole topic names);
`startingOffsets` / `endingOffsets` (`earliest`, `latest`, or JSON
`{"/s:t": {"0": 12, "1": -2}}` with -2 for earliest and -1 for latest, as Spark's Kafka
source); `startingTimestamp` / `endingTimestamp` (ms since the epoch: from the first
message at or after the start, up to the first at or after the end, excluded, as Kafka's);
`principal` (a user name, `principalGroups` a comma-separated list of its groups);
`isolationLevel` (`read_committed`, the default: no message of an aborted or open
transaction, never past a partition's last stable offset; or `read_uncommitted`);
for streams `maxOffsetsPerTrigger`. See docs/SPARK.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from spark_tasks import scan, sink
from spark_tasks.scan import OptionError

NAME = "partitionlet"


class SliceInput(InputPartition):
    """One partitionlet's offset range: one Spark task."""

    def __init__(self, value: scan.Slice) -> None:
        super().__init__(value)


# Spark hands options over case-insensitively (often lower-cased): give them back their names.
KNOWN_OPTIONS = (
    "cluster",
    "topic",
    "subscribe",
    "stream",
    "topicPattern",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "principal",
    "principalGroups",
    "maxOffsetsPerTrigger",
    "acks",
    "offsetRanges",
    "isolationLevel",
)
_CANONICAL = {name.lower(): name for name in KNOWN_OPTIONS}


def canonical_options(options: Any) -> dict[str, str]:
    """Options as text under their documented names (Spark may hand them lower-cased)."""
    return {_CANONICAL.get(str(k).lower(), str(k)): str(v) for k, v in dict(options).items()}


_options = canonical_options


class PartitionletDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return scan.SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return Writer(_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter(_options(self.options), schema)


WARM_UP = "partitionlet-warmup"


class WarmUpDataSource(DataSource):
    """Reads nothing, in as many tasks as its option `tasks` says: what a standby runner
    (spark_tasks.run) reads before its job comes, so that Spark's Python daemon, its
    planning process and one Python worker per task slot are up, with this module
    imported, when the job's read starts (Spark keeps idle workers for reuse)."""

    @classmethod
    def name(cls) -> str:
        return WARM_UP

    def schema(self) -> str:
        return scan.SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return _WarmUpReader(int(self.options.get("tasks", "1")))


class _WarmUpReader(DataSourceReader):
    def __init__(self, tasks: int) -> None:
        self.tasks = max(1, tasks)

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(None)


class BatchReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        # Everything is checked and planned here, on the driver, before any task starts.
        if options.get("maxOffsetsPerTrigger"):
            raise OptionError("maxOffsetsPerTrigger applies to readStream only")
        with scan.open_cluster(options) as cluster:
            plans = scan.resolve_topics(cluster, options)
            layers = scan.parse_ranges(options)
            if layers is None:
                self._slices = scan.slices(cluster, options, scan.ranges(cluster, plans, options))
            else:  # exact ranges, planned by the caller (spark_tasks.history)
                known = {p.topic for p in plans}
                unknown = sorted({tp.topic for layer in layers for tp in layer} - known)
                if unknown:
                    raise OptionError(f"option offsetRanges names {unknown[0]!r}, not read here")
                self._slices = [s for layer in layers for s in scan.slices(cluster, options, layer)]

    def partitions(self) -> list[InputPartition]:
        return [SliceInput(s) for s in self._slices]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {full topic: {partition (str): next offset}}, as JSON in the checkpoint."""

    def __init__(self, options: dict[str, str]) -> None:
        self._options = options
        for name in ("endingOffsets", "endingTimestamp", "offsetRanges"):
            if options.get(name):
                raise OptionError(f"{name} applies to batch reads only")
        raw = options.get("maxOffsetsPerTrigger")
        self._max = None
        if raw:
            try:
                self._max = int(raw)
            except ValueError:
                raise OptionError(f"maxOffsetsPerTrigger must be an integer, got {raw!r}") from None
            if self._max < 1:
                raise OptionError("maxOffsetsPerTrigger must be positive")
        self._target: dict | None = None
        with scan.open_cluster(options) as cluster:  # fail early on bad options
            plans = scan.resolve_topics(cluster, options)
            scan.parse_offsets(options, "startingOffsets", "latest")
            self._initial = scan.starts(cluster, plans, options)

    # --- offsets --------------------------------------------------------------------------

    def _ends(self) -> dict:
        with scan.open_cluster(self._options) as cluster:
            plans = scan.resolve_topics(cluster, self._options)
            return scan.ends(cluster, plans, self._options)

    def initialOffset(self) -> dict:
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self._max) if self._max else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._ends()

    def reportLatestOffset(self) -> dict | None:
        return self._ends()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        ends = self._target if self._target is not None else self._ends()
        # Partitions the start does not know yet (new topics or partitions) start at 0:
        # a new partition's messages are all new.
        wanted = {}
        for topic, parts in ends.items():
            for p, end in parts.items():
                begin = start.get(topic, {}).get(p, 0)
                wanted[(topic, p)] = (begin, max(begin, end))
        if isinstance(limit, ReadMaxRows):
            wanted = _limit(wanted, limit.max_rows)
        out: dict[str, dict[str, int]] = {}
        for topic, parts in start.items():  # never go back nor forget a partition
            out[topic] = dict(parts)
        for (topic, p), (_begin, end) in wanted.items():
            out.setdefault(topic, {})[p] = end
        return out

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        wanted = {}
        for topic, parts in end.items():
            for p, stop in parts.items():
                begin = start.get(topic, {}).get(p, 0)
                if stop > begin:
                    wanted[(topic, int(p))] = (begin, stop)
        if not wanted:
            return []
        with scan.open_cluster(self._options) as cluster:
            return [SliceInput(s) for s in scan.slices(cluster, self._options, wanted)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition)

    def commit(self, end: dict) -> None:
        pass


def _read(partition: InputPartition | None) -> Iterator[Any]:
    # With no slices at all, Spark still runs one task, with an empty partition.
    value = getattr(partition, "value", None)
    if not isinstance(value, scan.Slice):
        return iter(())
    return scan.read_arrow(value)


def _limit(wanted: dict, max_rows: int) -> dict:
    """Cut the ranges to at most `max_rows` offsets in all, shared in proportion to each
    partition's backlog (as Spark's Kafka source does), every backlog getting at least one."""
    total = sum(end - begin for begin, end in wanted.values())
    if total <= max_rows:
        return wanted
    out = {}
    left = max_rows
    for tp, (begin, end) in sorted(wanted.items()):
        backlog = end - begin
        share = min(backlog, max(1 if backlog else 0, backlog * max_rows // total), left)
        out[tp] = (begin, begin + share)
        left -= share
    return out


class _Committed(WriterCommitMessage):
    def __init__(self, count: int) -> None:
        self.count = count


def _check_sink(options: dict[str, str], schema: StructType) -> None:
    fields = {f.name: f.dataType.simpleString() for f in schema.fields}
    sink.check_schema(fields, options)


class Writer(DataSourceWriter):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        _check_sink(options, schema)
        self._options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _Committed(sink.write_rows(self._options, iterator))


class StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        _check_sink(options, schema)
        self._options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _Committed(sink.write_rows(self._options, iterator))

    def commit(self, messages: list, batchId: int) -> None:
        pass

    def abort(self, messages: list, batchId: int) -> None:
        pass
