"""A topic's whole history as one DataFrame, archived partitionlets at Parquet speed.

    from spark_tasks import history
    df = history.load(spark, {"cluster": "data/dc1", "topic": "/apps/sensors:car-17",
                              "startingOffsets": "earliest"})

`load` takes the options of the `partitionlet` data source (docs/SPARK.md) and gives the
same rows and columns as `spark.read.format("partitionlet")...load()`, read faster: it
plans the read on the driver (`Cluster.scan_plan`, which checks the consume permission and
every option), then

- reads the archived partitionlets' Parquet files with Spark's own Parquet reader
  (`spark.read.parquet(*files)`, the source's column names and types, `stream` added as a
  column; files the range cuts, or under a ttl, filtered by the requested offsets of each
  (topic, partition) and the ttl's cutoff, which Spark pushes down to the files' row-group
  statistics; files read whole need no filter, so Spark reads only the columns a query
  uses);
- reads the rest through the data source, asking it for exactly the offset ranges of the
  other planned tasks (option `offsetRanges`), so that a partitionlet archived between the
  two plans is still read once (the data source reads archived files too);
- and unions the two by column name.

A file Spark cannot open itself (an `s3://` archive when Spark has no S3A file system, i.e.
no hadoop-aws jar) goes through the data source, which reads it with pyarrow.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from functools import reduce
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from engine.storage import scan as engine_scan
from engine.storage.scan import ScanTask
from spark_tasks import scan
from spark_tasks.scan import OptionError
from spark_tasks.source import NAME, canonical_options

AUTO, SPARK, SOURCE = "auto", "spark", "source"  # who reads archived files (`archive`)
# The Hadoop file system scheme Spark reads an archive URI's scheme with.
HADOOP_SCHEMES = {"file": "file", "hdfs": "hdfs", "viewfs": "viewfs", "s3": "s3a", "gs": "gs"}
HADOOP_SCHEMES["gcs"] = "gs"


def load(spark: Any, options: Mapping[str, Any], *, archive: str = AUTO) -> Any:
    """The DataFrame of a read with the data source's `options` (see the module doc).
    `archive`: "auto" reads archived files with Spark's Parquet reader where Spark has a
    file system for their URI and through the data source otherwise; "spark" insists (an
    error names a file Spark cannot read); "source" reads everything through the data
    source (as `spark.read.format("partitionlet")`)."""
    if archive not in (AUTO, SPARK, SOURCE):
        raise OptionError(f"archive must be {AUTO!r}, {SPARK!r} or {SOURCE!r}, got {archive!r}")
    opts = canonical_options({k: str(v) for k, v in options.items() if v is not None})
    if opts.get("maxOffsetsPerTrigger"):
        raise OptionError("maxOffsetsPerTrigger applies to readStream only")
    with scan.open_cluster(opts) as cluster:
        plans = scan.resolve_topics(cluster, opts)
        wanted = scan.ranges(cluster, plans, opts)
        tasks = scan.slices(cluster, opts, wanted)
    native: dict[str, list[ScanTask]] = defaultdict(list)  # Spark's path -> tasks
    rest: list[ScanTask] = []
    for task in tasks:
        path = None
        # a file with aborted transactions goes through the data source, which leaves
        # their batches out (Spark's Parquet reader knows no batches)
        if archive != SOURCE and task.tier == engine_scan.ARCHIVE and task.file and not task.skip:
            path = spark_path(task.file)
        if path is None:
            rest.append(task)
        else:
            native[path].append(task)
    frames = []
    # Local files always; a file system Spark may lack (S3A without hadoop-aws) is tried
    # once per scheme, when Spark lists the files, and falls back to the data source.
    by_scheme: dict[str, dict[str, list[ScanTask]]] = defaultdict(dict)
    for path, ts in native.items():
        by_scheme[urlsplit(path).scheme][path] = ts
    for scheme, group in sorted(by_scheme.items()):
        if scheme != "file":
            for path in group:
                _s3a_bucket_settings(spark, group[path][0].file or "")
        try:
            frames.append(_parquet(spark, group, wanted))
        except Exception as exc:
            if scheme == "file":
                raise
            first = next(iter(group.values()))[0].file
            if archive == SPARK:
                raise OptionError(
                    f"Spark cannot read {first} (archive='spark'): {str(exc)[:300]}; add its "
                    "Hadoop connector (docs/SPARK.md) or use archive='auto'"
                ) from None
            rest.extend(t for ts in group.values() for t in ts)
    if rest:
        frames.append(_source(spark, opts, rest))
    if not frames:
        return spark.createDataFrame([], scan.SCHEMA_DDL)
    return reduce(lambda a, b: a.unionByName(b), frames)


def _parquet(spark: Any, native: dict[str, list[ScanTask]], wanted: Mapping) -> Any:
    """The archived files read by Spark: those read whole as they are, the others
    filtered to the planned offsets."""
    whole = {p: ts for p, ts in native.items() if all(t.whole and t.cutoff_ms is None for t in ts)}
    cut = {p: ts for p, ts in native.items() if p not in whole}
    frames = []
    if whole:  # no filter: Spark reads only the columns the query needs
        frames.append(_files(spark, whole, None))
    if cut:
        frames.append(_files(spark, cut, wanted))
    return reduce(lambda a, b: a.unionByName(b), frames)


def _files(spark: Any, native: dict[str, list[ScanTask]], wanted: Mapping | None) -> Any:
    from pyspark.sql import functions as F  # noqa: N812 (Spark's usual name)

    tasks = [t for ts in native.values() for t in ts]
    # every page checked against the CRC the archiver wrote with it (docs/ARCHIVE.md): a
    # damaged file fails the job rather than giving altered rows (a Hadoop setting, which
    # Spark passes on from the read's options)
    df = (
        spark.read.schema(scan.FILE_SCHEMA_DDL)
        .option("parquet.page.verify-checksum.enabled", "true")
        .parquet(*sorted(native))
    )
    if wanted is not None:
        df = df.where(_offsets_filter(tasks, wanted))
    streams = sorted({(t.topic, t.stream) for t in tasks})
    if len({s for _, s in streams}) == 1:
        stream = F.lit(streams[0][1])
    else:
        pairs = [F.lit(x) for pair in streams for x in pair]
        stream = F.element_at(F.create_map(*pairs), F.col("topic"))
    return df.withColumn("stream", stream.cast("string")).select(*scan.COLUMNS)


def _offsets_filter(tasks: list[ScanTask], wanted: Mapping) -> Any:
    from pyspark.sql import functions as F  # noqa: N812 (Spark's usual name)

    # One clause per (topic, partition): a file holds one partitionlet's offsets, so the
    # partition's requested range cuts each file to its task's range. Plain comparisons
    # on columns, which Spark pushes down to Parquet (row groups skipped by statistics).
    clauses = []
    for topic, partition, cutoff in sorted({(t.topic, t.partition, t.cutoff_ms) for t in tasks}):
        start, end = wanted[(topic, partition)]
        clause = (
            (F.col("topic") == F.lit(topic))
            & (F.col("partition") == F.lit(partition))
            & (F.col("offset") >= F.lit(start))
            & (F.col("offset") < F.lit(end))
        )
        if cutoff is not None:  # the stream's ttl, as of planning
            clause &= F.col("timestamp") >= F.timestamp_millis(F.lit(cutoff))
        clauses.append(clause)
    return reduce(lambda a, b: a | b, clauses)


def _source(spark: Any, opts: dict[str, str], tasks: list[ScanTask]) -> Any:
    """The data source over exactly the offset ranges of `tasks`."""
    ranges: dict[str, dict[str, list[list[int]]]] = defaultdict(lambda: defaultdict(list))
    for t in sorted(tasks, key=lambda t: (t.topic, t.partition, t.start)):
        got = ranges[t.topic][str(t.partition)]
        if got and got[-1][1] == t.start:
            got[-1][1] = t.end  # adjacent partitionlets: one range
        else:
            got.append([t.start, t.end])
    reader = spark.read.format(NAME)
    keep = {"cluster", "principal", "principalGroups", "isolationLevel"}
    for key, value in opts.items():
        if key in keep:
            reader = reader.option(key, value)
    reader = reader.option("topic", ",".join(sorted(ranges)))
    return reader.option("offsetRanges", json.dumps(ranges)).load()


# --- archive URIs as Spark paths ----------------------------------------------------------


def spark_path(uri: str) -> str | None:
    """The path Spark reads an archive file's URI with (None: a scheme Spark has no file
    system for): `s3://bucket/key?endpoint_override=...` becomes `s3a://bucket/key`,
    `gcs://` becomes `gs://`, `file://`, `hdfs://` and `viewfs://` stay."""
    parts = urlsplit(uri)
    scheme = HADOOP_SCHEMES.get(parts.scheme)
    if scheme is None:
        return None
    return urlunsplit(parts._replace(scheme=scheme, query=""))


def _s3a_bucket_settings(spark: Any, uri: str) -> None:
    """An `s3://` archive URI's pyarrow options (endpoint_override, scheme, region) as the
    S3A settings of its bucket, unless the configuration already has them. Session
    settings: Spark copies them into the Hadoop configuration of its file reads."""
    parts = urlsplit(uri)
    if parts.scheme != "s3" or not parts.query:
        return
    query = dict(parse_qsl(parts.query))
    wanted = {}
    if "endpoint_override" in query:
        wanted["endpoint"] = f"{query.get('scheme', 'https')}://{query['endpoint_override']}"
        wanted["path.style.access"] = "true"
    if "region" in query:
        wanted["endpoint.region"] = query["region"]
    prefix = f"fs.s3a.bucket.{parts.netloc}."
    for key, value in wanted.items():
        known = [prefix + key, "fs.s3a." + key, "spark.hadoop." + prefix + key]
        known.append("spark.hadoop.fs.s3a." + key)
        if all(spark.conf.get(k, None) is None for k in known):
            spark.conf.set(prefix + key, value)
