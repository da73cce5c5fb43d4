"""What each kind of replay job computes, given a SparkSession and the job's parameters.

Every function returns a JSON-ready summary (the job's `result`). Common parameters:
`source` (full topic name) or `stream` with `topic_pattern`; `from_offset` / `to_offset`
(applied to every partition; `to_offset` exclusive); `from_time` / `to_time` (ms, inclusive);
`principal`; `isolation_level` (read_committed, the default, or read_uncommitted: the
messages of aborted transactions too).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import logging
import runpy
from collections.abc import Callable
from typing import Any

from engine import times
from engine.cluster import Cluster
from engine.errors import UnknownTopic
from spark_tasks import history, jobs, sink

RESULT_ROWS = 1000  # rows of a result table kept in the job's summary
# The job's own notes; the runner (spark_tasks.run) writes them to the job's log as its lines.
LOG = logging.getLogger("spark_tasks.replays")


# The steps of each kind, in order: each an equal part of a job's progress bar
# (spark_tasks.progress), begun with `_step`.
STEPS: dict[str, tuple[str, ...]] = {
    "copy": ("reading the range", "writing to the target"),
    "materialize": ("reading the range", "writing the latest values"),
    "window-counts": ("counting", "writing the counts"),
    "custom": ("running the function",),
}
# Told the index of each step a kind begins: the runner's monitor (spark_tasks.run); None
# when the kinds run without one (in a notebook, in the tests).
on_step: Callable[[int], None] | None = None


def _step(kind: str, index: int) -> None:
    steps = STEPS[kind]
    LOG.info("step %d of %d: %s", index + 1, len(steps), steps[index])
    if on_step is not None:
        on_step(index)


def source_options(cluster: str, params: dict[str, Any]) -> dict[str, str]:
    """The `partitionlet` data source's options of a job's range parameters."""
    options = {"cluster": cluster}
    if params.get("source"):
        options["topic"] = params["source"]
    else:
        options["stream"] = params["stream"]
        if params.get("topic_pattern"):
            options["topicPattern"] = params["topic_pattern"]
    if params.get("principal"):
        options["principal"] = params["principal"]
    if params.get("isolation_level"):
        options["isolationLevel"] = params["isolation_level"]
    if "from_time" in params:
        options["startingTimestamp"] = str(params["from_time"])
    if "to_time" in params:
        # to_time is inclusive; the source's endingTimestamp, as Kafka's, is not
        options["endingTimestamp"] = str(params["to_time"] + 1)
    if "from_offset" in params or "to_offset" in params:
        parts = _partitions(cluster, params)
        if "from_offset" in params:
            options["startingOffsets"] = _per_partition(parts, params["from_offset"])
        if "to_offset" in params:
            options["endingOffsets"] = _per_partition(parts, params["to_offset"])
    return options


def source_frame(spark: Any, cluster: str, params: dict[str, Any]) -> Any:
    """The messages a job replays: archived partitionlets read by Spark's Parquet reader,
    live ones by the data source, as one DataFrame (spark_tasks.history.load)."""
    LOG.info("reading %s", params.get("source") or f"stream {params.get('stream')}")
    return history.load(spark, source_options(cluster, params))


def _partitions(cluster: str, params: dict[str, Any]) -> dict[str, int]:
    with Cluster.open(cluster) as c:
        if params.get("source"):
            names = [params["source"]]
        else:
            import re

            regex = re.compile(params.get("topic_pattern") or ".*")
            names = [
                n for n in c.topic_names(params["stream"]) if regex.fullmatch(n.rpartition(":")[2])
            ]
        return {n: c.topic(n).partition_count for n in names}


def _per_partition(parts: dict[str, int], offset: int) -> str:
    return json.dumps({t: {str(p): offset for p in range(n)} for t, n in parts.items()})


def _ensure_target(cluster: str, target: str, partitions: int | None) -> int:
    """The target topic's partition count, creating it like the source if missing."""
    with Cluster.open(cluster) as c:
        try:
            return c.topic(target).partition_count
        except UnknownTopic:
            return c.create_topic(target, partitions=partitions).partition_count


def _write_topic(df: Any, cluster: str, target: str, params: dict[str, Any]) -> None:
    writer = df.write.format("partitionlet").option("cluster", cluster).option("topic", target)
    if params.get("principal"):
        writer = writer.option("principal", params["principal"])
    writer.mode("append").save()


def _rows(df: Any) -> list[dict[str, Any]]:
    return [json_ready(r.asDict(recursive=True)) for r in df.limit(RESULT_ROWS).collect()]


def json_ready(value: Any) -> Any:
    """`value` (a job's summary, rows Spark collected) with JSON's types only: a time as
    ISO 8601 UTC text with `Z` (`2026-11-26T10:00:00.000Z`), a date as ISO text, bytes as
    text when UTF-8 else base64, a decimal as a number; so that neither the record nor
    the log shows a Python repr (`datetime.datetime(...)`)."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, dt.datetime):
        # PySpark hands a timestamp over as a naive datetime in this machine's local time:
        # astimezone reads a naive one as such
        return times.iso_ms(times.datetime_ms(value.astimezone(dt.UTC)))
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def copy(spark: Any, cluster: str, params: dict[str, Any]) -> dict[str, Any]:
    """Re-publish a topic's range into another topic: same keys, values, headers and
    timestamps; the same partition when both topics have as many partitions, else the
    partition the producer picks for the key (unkeyed messages: one per source partition).

    Each target partition gets one writer, which writes in the source's offset order:
    a source partition is read by several Spark tasks (one per partitionlet) that would
    otherwise write one target partition at once, out of order."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's usual name)

    _step("copy", 0)
    df = source_frame(spark, cluster, params)
    source_parts = _partitions(cluster, params) if params.get("source") else {}
    count = source_parts.get(params.get("source", ""), None)
    target_parts = _ensure_target(cluster, params["target"], count)
    if count is not None and count == target_parts and params.get("keep_partitions", True):
        into = F.col("partition")
    else:
        into = _key_partition(df, target_parts)
    df = df.select(
        "key", "value", "headers", "timestamp", "topic", "partition", "offset",
        into.alias("into"),
    ).cache()  # fmt: skip
    messages = df.count()
    _step("copy", 1)
    ordered = (
        df.repartition(target_parts, "into")
        .sortWithinPartitions("into", "topic", "partition", "offset")
        .select("key", "value", "headers", "timestamp", F.col("into").alias("partition"))
    )
    _write_topic(ordered, cluster, params["target"], params)
    LOG.info("wrote %d messages to %s", messages, params["target"])
    df.unpersist()
    return {"messages": messages, "target": params["target"]}


def _key_partition(df: Any, partitions: int) -> Any:
    """The target partition of each row when partitions are not kept: the producer's
    choice for a key (engine.client.partitioner), and for an unkeyed message one fixed
    partition per source partition (so that they keep their order too)."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's usual name)

    def of_key(key):  # no annotations: Spark would read them as a pandas UDF's
        from engine.client.partitioner import partition_for_key

        return None if key is None else partition_for_key(bytes(key), partitions)

    by_key = F.udf(of_key, "int")(F.col("key"))
    return F.coalesce(by_key, F.pmod(F.hash("topic", "partition"), F.lit(partitions)))


def materialize(spark: Any, cluster: str, params: dict[str, Any]) -> dict[str, Any]:
    """The latest value of every key (by timestamp, then offset); keys whose latest
    message is a tombstone (null value) are left out, and with an `output` of `sqlite:PATH`
    (and `table`) lose their row in that table (spark_tasks.sink.write_sqlite_state)."""
    from pyspark.sql import functions as F

    sqlite_path = jobs.sqlite_output(params)
    if sqlite_path is not None:  # refused before Spark reads anything
        jobs.check_sqlite_output(cluster, params)
    _step("materialize", 0)
    df = source_frame(spark, cluster, params).where(F.col("key").isNotNull())
    latest_all = (
        df.groupBy("key")
        .agg(
            F.max_by(
                F.struct("value", "headers", "timestamp", "topic", "partition", "offset"),
                F.struct("timestamp", "offset"),
            ).alias("m")
        )
        .select("key", "m.*")
        .cache()
    )
    latest = latest_all.where(F.col("value").isNotNull())
    keys = latest.count()
    LOG.info("%d keys have a latest value", keys)
    _step("materialize", 1)
    result: dict[str, Any] = {"keys": keys}
    if sqlite_path is not None:
        # the driver writes: one SQLite file takes one writer; a partition at a time
        pairs = (
            (r["key"], r["value"]) for r in latest_all.select("key", "value").toLocalIterator()
        )
        counts = sink.write_sqlite_state(sqlite_path, params["table"], pairs)
        result.update(output=params["output"], table=params["table"], **counts)
    elif params.get("output"):
        latest.write.mode("overwrite").parquet(params["output"])
        result["output"] = params["output"]
    if params.get("target"):
        _ensure_target(cluster, params["target"], None)
        _write_topic(latest.select("key", "value", "headers"), cluster, params["target"], params)
        result["target"] = params["target"]
    latest_all.unpersist()
    return result


def window_counts(spark: Any, cluster: str, params: dict[str, Any]) -> dict[str, Any]:
    """Messages and bytes (key + value) per time window and topic."""
    from pyspark.sql import functions as F

    _step("window-counts", 0)
    df = source_frame(spark, cluster, params)
    counts = (
        df.groupBy(F.window("timestamp", params["window"]), "topic")
        .agg(
            F.count("*").alias("messages"),
            F.sum(
                F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
            ).alias("bytes"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "topic",
            "messages",
            "bytes",
        )
        .orderBy("window_start", "topic")
        .cache()
    )
    result: dict[str, Any] = {"windows": counts.count(), "window": params["window"]}
    LOG.info("counted %d windows of %s", result["windows"], params["window"])
    _step("window-counts", 1)
    if params.get("output"):
        counts.write.mode("overwrite").parquet(params["output"])
        result["output"] = params["output"]
    result["rows"] = _rows(counts)
    counts.unpersist()
    return result


def custom(spark: Any, cluster: str, params: dict[str, Any]) -> dict[str, Any]:
    """A user's Python file with a function DataFrame -> DataFrame (`function`, default
    `transform`); the result goes to `output` (Parquet), to `target` (a topic: it needs a
    `value` column) or, at most RESULT_ROWS rows of it, into the summary."""
    _step("custom", 0)
    namespace = runpy.run_path(params["file"], run_name="plet_custom_job")
    func = namespace.get(params["function"])
    if not callable(func):
        raise ValueError(f"{params['file']} defines no function {params['function']!r}")
    out = func(source_frame(spark, cluster, params))
    if not hasattr(out, "schema") or not hasattr(out, "write"):
        raise TypeError(f"{params['function']} returned {type(out).__name__}, not a DataFrame")
    result: dict[str, Any] = {"columns": out.columns}
    if params.get("output"):
        out.write.mode("overwrite").parquet(params["output"])
        result["output"] = params["output"]
    elif params.get("target"):
        _ensure_target(cluster, params["target"], None)
        _write_topic(out, cluster, params["target"], params)
        result["target"] = params["target"]
    else:
        result["rows"] = _rows(out)
    return result


KINDS = {
    "copy": copy,
    "materialize": materialize,
    "window-counts": window_counts,
    "custom": custom,
}
