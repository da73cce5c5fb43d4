"""Archived and live partitionlets read by Spark: the `partitionlet` data source alone, and
`spark_tasks.history.load` (Spark's own Parquet reader over the archive, the data source
over the rest), give exactly the rows a Consumer reads, every offset once."""

from __future__ import annotations

import json
import time

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition
from engine.client.partitioner import partition_for_key
from spark_tasks import history, jobs, replays
from spark_tasks.run import Monitor
from spark_tasks.scan import OptionError
from tests.local_s3 import local_s3
from tests.timing import scaled

pytestmark = pytest.mark.timeout(scaled(600))

T = "/h:t"
E = "/e:t"  # a stream with a ttl: part of its archive has expired
OLD_MS = 1_600_000_000_000
PER_PARTITION = 600
FIELDS = ("topic", "partition", "offset", "key", "value", "timestamp", "headers")


def _produce(cluster: Cluster, topic: str, n: int, ts, start: int = 0) -> None:
    producer = Producer(cluster, acks=1)
    for i in range(start, start + n):
        producer.send(
            topic,
            key=b"k%d" % (i % 7),
            value=b"v%06d" % i,
            partition=i % 2,
            headers=[("i", b"%d" % i)] if i % 3 == 0 else None,
            timestamp_ms=ts(i),
        )
    producer.close()


def consumed(cluster: Cluster, topic: str) -> list[tuple]:
    """Every message a Consumer reads from offset 0, as comparable tuples."""
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    partitions = cluster.topic(topic).partition_count
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    out = []
    while got := [r for rs in consumer.poll(timeout_ms=200).values() for r in rs]:
        out += [
            (
                r.topic, r.partition, r.offset, r.key, r.value, r.timestamp,
                tuple(r.headers) if r.headers else None,
            )
            for r in got
        ]  # fmt: skip
    consumer.close()
    return sorted(out)


def rows(df) -> list[tuple]:
    out = []
    for r in df.collect():
        head = tuple((h.key, bytes(h.value)) for h in r.headers) if r.headers else None
        stamp = int(round(r.timestamp.timestamp() * 1000))
        key = bytes(r.key) if r.key is not None else None
        out.append((r.topic, r.partition, r.offset, key, bytes(r.value), stamp, head))
    return sorted(out)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """/h:t: 2 partitions of old, archived partitionlets and then live ones; /e:t: a ttl
    stream whose archive is partly expired."""
    path = tmp_path_factory.mktemp("history") / "cluster"
    now = time.time_ns() // 1_000_000
    with Cluster.open(path, name="history", partitionlet_bytes=4000) as c:
        c.create_stream("/h", ttl=0, archive_after=3600)
        c.create_topic(T, partitions=2)
        _produce(c, T, 2 * PER_PARTITION, lambda i: OLD_MS + i * 10)
        c.create_stream("/e", ttl=3600, archive_after=60)
        c.create_topic(E, partitions=2)
        # half 3 h ago (expired), half 30 to 10 min ago: far from the cutoff, so that the
        # Consumer now and Spark a minute later agree; all older than archive_after
        _produce(
            c,
            E,
            400,
            lambda i: now - (10_800_000 - i * 10_000 if i < 200 else 1_800_000 - (i - 200) * 5_000),
        )
        report = c.archive()
        assert report.archived
        # new messages stay live
        _produce(c, T, 400, lambda i: now - 60_000 + i, start=2 * PER_PARTITION)
        infos = c.partitionlets(T)
        expired = c.partitionlets(E)
        expected = {T: consumed(c, T), E: consumed(c, E)}
    tiers = {p.tier for p in infos}
    assert tiers == {"live", "archive"}
    assert any(p.tier == "archive" for p in expired)
    return str(path), expected, infos


def source(spark, path, topic, **options):
    reader = spark.read.format("partitionlet").option("cluster", path).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_the_scan_plan_includes_archived_partitionlets(data):
    path, expected, infos = data
    with Cluster.open(path) as c:
        tasks = c.scan_plan(c.scan_ranges([T]))
    archived = [t for t in tasks if t.tier == "archive"]
    assert sorted(t.file for t in archived) == sorted(p.file for p in infos if p.tier == "archive")
    assert sum(t.end - t.start for t in tasks) == len(expected[T])
    from engine.storage import scan

    read = sum(b.last_offset - b.base_offset + 1 for t in archived for b in scan.read(t))
    assert read == sum(t.end - t.start for t in archived)


def test_the_data_source_alone_reads_archived_partitionlets(spark, data):
    path, expected, _ = data
    got = rows(source(spark, path, T))
    assert got == expected[T]
    assert rows(source(spark, path, E)) == expected[E]


def test_history_load_unions_native_parquet_and_the_source(spark, data):
    path, expected, infos = data
    df = history.load(spark, {"cluster": path, "topic": T})
    files = df.inputFiles()
    assert sorted(f for f in files if f.endswith(".parquet")) == sorted(
        p.file for p in infos if p.tier == "archive"
    )
    got = rows(df)
    assert got == expected[T]
    assert len({(r[1], r[2]) for r in got}) == len(got)  # every offset once
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType", "headers", "stream"]  # fmt: skip
    assert {r.stream for r in df.select("stream").distinct().collect()} == {"/h"}
    # the ttl applies to the Parquet files too
    assert rows(history.load(spark, {"cluster": path, "topic": E})) == expected[E]
    with pytest.raises(OptionError, match="archive must be"):
        history.load(spark, {"cluster": path, "topic": T}, archive="disk")


@pytest.mark.parametrize("reader", ["source", "history"])
def test_offsets_and_timestamps_apply_to_archived_and_live(spark, data, reader):
    path, expected, _ = data
    read = (
        (lambda **o: source(spark, path, T, **o))
        if reader == "source"
        else (lambda **o: history.load(spark, {"cluster": path, "topic": T, **o}))
    )
    # from inside the archive to inside the live partitionlets
    starting = json.dumps({T: {"0": 123, "1": 7}})
    ending = json.dumps({T: {"0": PER_PARTITION + 150, "1": PER_PARTITION + 3}})
    got = rows(read(startingOffsets=starting, endingOffsets=ending))
    want = [
        r for r in expected[T]
        if (123, 7)[r[1]] <= r[2] < (PER_PARTITION + 150, PER_PARTITION + 3)[r[1]]
    ]  # fmt: skip
    assert got == want and want
    archived_part = [r for r in want if r[5] < OLD_MS + 100_000]
    assert archived_part and len(archived_part) < len(want)
    # timestamps: from inside the archive, to inside the live part
    live = sorted(r[5] for r in expected[T] if r[5] > OLD_MS + 100_000)
    start_ts, end_ts = OLD_MS + 3_000, live[len(live) // 2]
    got = rows(read(startingTimestamp=str(start_ts), endingTimestamp=str(end_ts)))
    want = [r for r in expected[T] if start_ts <= r[5] < end_ts]
    assert got == want and want


def test_the_data_source_reads_exact_offset_ranges(spark, data):
    path, expected, _ = data
    ranges = json.dumps({T: {"0": [[0, 10], [500, 520]], "1": [[3, 4]]}})
    got = rows(source(spark, path, T, offsetRanges=ranges))
    want = [
        r for r in expected[T]
        if (r[1] == 0 and (r[2] < 10 or 500 <= r[2] < 520)) or (r[1] == 1 and r[2] == 3)
    ]  # fmt: skip
    assert got == want
    with pytest.raises(Exception, match="offsetRanges replaces startingOffsets"):
        source(spark, path, T, offsetRanges=ranges, startingOffsets="latest").collect()


def test_a_replay_over_archived_data_reports_rows_read(spark, data, tmp_path):
    path, expected, _ = data
    with Cluster.open(path) as c:
        job_id = c.jobs.add("copy", "{}", "running", 0)
    group = "history-test-copy"
    spark.sparkContext.setJobGroup(group, "copy over archived data", True)
    try:
        result = replays.copy(spark, path, {"source": T, "target": "/h:copy"})
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert result["messages"] == len(expected[T])
    with Cluster.open(path) as c:
        copied = consumed(c, "/h:copy")
    # the same partition, key, value, timestamp and headers (offsets are the target's own),
    # in the source's order: each partition has one writer, which writes in offset order
    assert [r[1:2] + r[3:] for r in copied] == [r[1:2] + r[3:] for r in expected[T]]
    monitor = Monitor(spark, path, job_id, group)
    monitor.tick()
    job = jobs.status(job_id, cluster=path)
    assert job.rows_read == len(expected[T])
    assert job.rows_per_s > 0
    assert job.reading.startswith(f"{len(expected[T]):,} rows read at ")


def test_a_copy_keeps_the_order_of_a_partition_read_by_many_tasks(spark, tmp_path):
    # one partition in many partitionlets: one Spark task each, two at a time (local[2])
    path = tmp_path / "c"
    with Cluster.open(path, partitionlet_bytes=2000) as c:
        c.create_stream("/o", ttl=0)
        c.create_topic("/o:t", partitions=1)
        producer = Producer(c, acks=1, batch_size=1000)
        for i in range(1500):
            producer.send("/o:t", key=b"k%d" % (i % 7), value=b"v%06d" % i, timestamp_ms=OLD_MS + i)
        producer.close()
        assert len(c.partitionlets("/o:t")) > 10
    result = replays.copy(spark, str(path), {"source": "/o:t", "target": "/o:copy"})
    assert result["messages"] == 1500
    with Cluster.open(path) as c:
        copied = [r[4] for r in consumed(c, "/o:copy")]
    assert copied == [b"v%06d" % i for i in range(1500)]


def test_a_copy_into_more_partitions_keeps_each_source_partitions_order_and_counts_its_range(
    spark, data
):
    path, expected, _ = data
    with Cluster.open(path) as c:
        c.create_topic("/h:wider", partitions=3)
        job_id = c.jobs.add("copy", "{}", "running", 0)
    group = "history-test-wider"
    spark.sparkContext.setJobGroup(group, "copy from offset 100", True)
    try:
        params = {"source": T, "target": "/h:wider", "from_offset": 100}
        result = replays.copy(spark, path, params)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    want = [r for r in expected[T] if r[2] >= 100]
    assert result["messages"] == len(want)
    # rows read: those in the range, not those of the archived files' row groups scanned
    Monitor(spark, path, job_id, group).tick()
    assert jobs.status(job_id, cluster=path).rows_read == len(want)
    with Cluster.open(path) as c:
        copied = consumed(c, "/h:wider")
    # each key where the producer puts it; each target partition holds each source
    # partition's messages in their order (value v000123 is the 123rd message sent)
    by_key = {r[3]: partition_for_key(r[3], 3) for r in want}
    assert sorted(r[3:] for r in copied) == sorted(r[3:] for r in want)
    assert all(r[1] == by_key[r[3]] for r in copied)
    for target in range(3):
        for source_partition in range(2):
            sent = [int(r[4][1:]) for r in copied if r[1] == target and int(r[4][1:]) % 2 == source_partition]  # fmt: skip
            assert sent == sorted(sent)


# --- an s3:// archive (moto on loopback) ---------------------------------------------------


@pytest.fixture
def s3_server():
    with local_s3() as (port, _):
        yield port


def test_an_s3_archive_read_by_spark(spark, s3_server, tmp_path):
    # The AWS_* credentials come from tests/spark_tasks/conftest.py, set before Spark starts
    # so that its Python workers have them too.
    uri = f"s3://archive/plet?endpoint_override=127.0.0.1:{s3_server}&scheme=http&region=us-east-1"
    path = tmp_path / "c"
    with Cluster.open(path, partitionlet_bytes=4000) as c:
        c.create_stream("/h", ttl=0, archive_after=3600, archive_uri=uri)
        c.create_topic(T, partitions=2)
        _produce(c, T, 500, lambda i: OLD_MS + i * 10)
        assert c.archive().archived
        _produce(c, T, 50, lambda i: time.time_ns() // 1_000_000, start=500)  # stays live
        expected = consumed(c, T)
        files = [p.file for p in c.partitionlets(T) if p.tier == "archive"]
    assert files and all(f.startswith("s3://archive/plet/h/t/") for f in files)
    assert rows(source(spark, str(path), T)) == expected
    # pyspark ships no hadoop-aws (no S3A file system): history.load reads these files
    # through the data source's pyarrow path, and says so when told to use Spark's reader
    df = history.load(spark, {"cluster": str(path), "topic": T})
    assert rows(df) == expected
    with pytest.raises(OptionError, match="Spark cannot read s3://archive/plet/"):
        history.load(spark, {"cluster": str(path), "topic": T}, archive="spark")


def test_a_task_planned_live_and_archived_before_it_runs_still_reads_everything(tmp_path):
    from engine.storage import scan as engine_scan
    from spark_tasks import scan

    with Cluster.open(tmp_path / "c", partitionlet_bytes=4000) as c:
        c.create_stream("/h", ttl=0)
        c.create_topic(T, partitions=2)
        _produce(c, T, 600, lambda i: OLD_MS + i * 10)
        expected = consumed(c, T)
        tasks = c.scan_plan(c.scan_ranges([T]))
        assert {t.tier for t in tasks} == {"live"}
        c.edit_stream("/h", archive_after=60)
        assert c.archive().archived  # after planning, before the tasks run
        archived = {p.id for p in c.partitionlets(T) if p.tier == "archive"}
    assert archived & {t.partitionlet for t in tasks}
    read = sum(b.last_offset - b.base_offset + 1 for t in tasks for b in engine_scan.read(t))
    assert read == len(expected)
    got = sorted(
        (rb.column("partition")[i].as_py(), rb.column("offset")[i].as_py())
        for t in tasks
        for rb in scan.read_arrow(t)
        for i in range(rb.num_rows)
    )
    assert got == [(r[1], r[2]) for r in expected]


def test_the_monitor_sees_the_first_task_while_it_runs(spark, tmp_path):
    # Spark's status store counted tasks that started together only once one ended (its
    # liveUpdate period): the job's "first task" came a whole task late
    with Cluster.open(tmp_path / "c") as c:
        job_id = c.jobs.add("copy", "{}", "running", 0)
    group = "monitor-first-task"
    monitor = Monitor(spark, str(tmp_path / "c"), job_id, group)
    monitor.start()
    spark.sparkContext.setJobGroup(group, "two tasks of 3 s", True)
    try:
        spark.sparkContext.parallelize([1, 2], 2).map(lambda x: time.sleep(3) or x).collect()
        ended_ms = int(time.time() * 1000)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        monitor.stop()
    assert monitor.first_task_ms is not None
    assert ended_ms - monitor.first_task_ms >= 2000  # seen while the tasks slept
    assert jobs.status(job_id, cluster=str(tmp_path / "c")).first_task_ms == monitor.first_task_ms
