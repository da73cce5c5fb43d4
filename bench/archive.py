"""The archive tier benchmark (issue 15): a replay-style Spark scan over archived history
against the live data source and one `Consumer` over the same messages, the archived bytes
per message, and `poll_arrow`.

    python -m bench.archive [--messages 10M] [--json-messages 1M] [--partitions 4]
                            [--master local[2]] [--partitionlet-mb 64] [--dir DIR]
    python -m bench.archive --dir DIR --rescan     # the archived scans again

In a fresh cluster in a temporary directory:

1. N messages of 100 random bytes (no key) are produced to a topic of P partitions (one
   `Producer`, acks=1, linger_ms=5), partitionlets rolling at `--partitionlet-mb`, so each
   partition has several; then one message per partition rolls the last big partitionlet
   (so all N can be archived; those P messages stay live).
2. Live: the N + P messages read once by one `Consumer` (`poll(max_records=10_000)`) and
   once by `poll_arrow`, then by Spark through the `partitionlet` data source.
3. `cluster.archive()` (archive_after = 1 s) moves the sealed partitionlets to Parquet.
4. Archived: Spark with `spark_tasks.history.load` (Spark's Parquet reader over the files,
   the data source over the live tail), the data source alone (pyarrow inside its tasks),
   and one `Consumer` again.

Every Spark read is the replay-style scan `count(*), sum(length(value)), max(offset)` over a
freshly loaded DataFrame (planning included): a warm-up, then the best of two timed runs.
Then M typical JSON events (bench.compression's) go to a second topic, are archived, and
their bytes per message live and archived are compared.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.command import parse_count
from bench.compression import values as workload_values
from engine import Cluster, Consumer, Producer, TopicPartition

TOPIC = "/b:t"
JSON_TOPIC = "/b:events"
CHUNK = 100_000  # messages whose random values are made at once


def _produce_random(cluster: Cluster, n: int, partitions: int) -> float:
    producer = Producer(cluster, acks=1, linger_ms=5)
    send = producer.send
    start = time.perf_counter()
    for at in range(0, n, CHUNK):
        count = min(CHUNK, n - at)
        blob = os.urandom(100 * count)
        for i in range(count):
            send(TOPIC, value=blob[100 * i : 100 * i + 100])
    producer.flush()
    took = time.perf_counter() - start
    producer.close()
    return took


def _roll_last(cluster: Cluster, topic: str, partitions: int) -> None:
    """Seal every partition's active partitionlet (it rolls at its next append once it is
    partitionlet_ms old): one small message each, which stays live."""
    cluster.partitionlet_ms = 1
    time.sleep(0.05)
    with Producer(cluster, acks=1) as producer:
        for p in range(partitions):
            producer.send(topic, value=b"tail", partition=p)


def _consume(cluster: Cluster, topic: str, partitions: int, n: int, arrow: bool) -> float:
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    while got < n:
        if arrow:
            batches = consumer.poll_arrow(timeout_ms=1000, max_records=1_000_000)
            if not batches:
                break
            got += sum(rb.num_rows for rb in batches.values())
        else:
            polled = consumer.poll(timeout_ms=1000, max_records=10_000)
            if not polled:
                break
            got += sum(len(rs) for rs in polled.values())
    took = time.perf_counter() - start
    consumer.close()
    if got != n:
        raise RuntimeError(f"{topic}: read {got:,} of {n:,}")
    return took


def _spark(master: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_tasks

    spark = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark_tasks.register(spark)
    return spark


def _scan(load, n: int, label: str, results: dict) -> None:
    """The replay-style scan of `load()` (a new DataFrame each time): warm-up, best of 2."""

    def query():
        return load().selectExpr("count(*)", "sum(length(value))", "max(offset)").collect()[0]

    query()
    took: list[float] = []
    for _ in range(2):
        start = time.perf_counter()
        row = query()
        took.append(time.perf_counter() - start)
        if row[0] != n:
            raise RuntimeError(f"{label}: {row[0]:,} rows, not {n:,}")
    best = min(took)
    results[label] = n / best
    print(f"  {label}: {n:,} rows in {best:.2f} s = {n / best:,.0f} rows/s", flush=True)


def _stored(cluster: Cluster, topic: str) -> tuple[int, int, int, int]:
    """(live messages, live bytes, archived messages, archived bytes) of a topic."""
    lm = lb = am = ab = 0
    for p in cluster.partitionlets(topic):
        if p.tier == "archive":
            am, ab = am + p.messages, ab + p.bytes
        else:
            lm, lb = lm + p.messages, lb + p.bytes
    return lm, lb, am, ab


def run(args: argparse.Namespace, workdir: Path) -> dict:
    n, parts = args.messages, args.partitions
    path = workdir / "cluster"
    out: dict = {}
    rates: dict[str, float] = {}
    with Cluster.open(path, name="bench", partitionlet_bytes=args.partitionlet_mb << 20) as c:
        c.create_stream("/b", ttl=0)
        c.create_topic(TOPIC, partitions=parts)
        took = _produce_random(c, n, parts)
        print(f"produced {n:,} x 100 B in {took:.1f} s = {n / took:,.0f} msg/s", flush=True)
        _roll_last(c, TOPIC, parts)
        total = n + parts
        lm, lb, _, _ = _stored(c, TOPIC)
        out["live_bytes_per_message"] = lb / lm
        out["partitionlets"] = len(c.partitionlets(TOPIC))
        print(f"live: {out['partitionlets']} partitionlets, {lb / lm:.1f} B/msg", flush=True)
        for arrow, label in ((False, "Consumer.poll"), (True, "Consumer.poll_arrow")):
            took = _consume(c, TOPIC, parts, total, arrow)
            rates[f"live {label}"] = total / took
            print(f"  live {label}: {total / took:,.0f} rows/s", flush=True)

    spark = _spark(args.master)
    from spark_tasks import history

    opts = {"cluster": str(path), "topic": TOPIC}

    def source():
        return spark.read.format("partitionlet").options(**opts).load()

    _scan(source, total, "Spark, live data source", rates)

    with Cluster.open(path) as c:
        c.edit_stream("/b", archive_after=1)
        time.sleep(1.5)
        start = time.perf_counter()
        report = c.archive()
        took = time.perf_counter() - start
        lm, lb, am, ab = _stored(c, TOPIC)
        out["archived_messages"] = am
        out["archive_bytes_per_message"] = ab / am
        out["archive_s"] = took
        print(
            f"archived {report.messages:,} messages in {took:.1f} s "
            f"({report.messages / took:,.0f} msg/s): {ab / am:.1f} B/msg archived, "
            f"{lm} live",
            flush=True,
        )
    _scan(lambda: history.load(spark, opts), total, "Spark, history.load (Parquet)", rates)
    _scan(source, total, "Spark, data source alone (pyarrow)", rates)
    with Cluster.open(path) as c:
        for arrow, label in ((False, "Consumer.poll"), (True, "Consumer.poll_arrow")):
            took = _consume(c, TOPIC, parts, total, arrow)
            rates[f"archived {label}"] = total / took
            print(f"  archived {label}: {total / took:,.0f} rows/s", flush=True)
    spark.stop()

    # typical JSON events: bytes per message live and archived
    m = args.json_messages
    with Cluster.open(path) as c:
        c.create_stream("/b2", ttl=0)
        c.create_topic("/b2:events", partitions=1)
        with Producer(c, acks=1, linger_ms=5) as producer:
            for value in workload_values("JSON events", m):
                producer.send("/b2:events", value=value)
        _roll_last(c, "/b2:events", 1)
        lm, lb, _, _ = _stored(c, "/b2:events")
        c.edit_stream("/b2", archive_after=1)
        time.sleep(1.5)
        c.archive()
        _, _, am, ab = _stored(c, "/b2:events")
    out["json_live_bytes_per_message"] = lb / lm
    out["json_archive_bytes_per_message"] = ab / am
    out["json_archived_messages"] = am
    print(
        f"JSON events: {lb / lm:.1f} B/msg live, {ab / am:.1f} B/msg archived "
        f"({ab / am / (lb / lm):.2f}x), {am:,} archived",
        flush=True,
    )
    out["rates"] = rates
    return out


def rescan(args: argparse.Namespace, workdir: Path) -> dict:
    """The archived scans again, over the cluster a run left in `--dir` (to measure again
    at a quieter moment without producing and archiving again)."""
    path = workdir / "cluster"
    with Cluster.open(path) as c:
        total = sum(p.messages for p in c.partitionlets(TOPIC))
    spark = _spark(args.master)
    from spark_tasks import history

    opts = {"cluster": str(path), "topic": TOPIC}
    rates: dict[str, float] = {}
    _scan(lambda: history.load(spark, opts), total, "Spark, history.load (Parquet)", rates)
    _scan(
        lambda: spark.read.format("partitionlet").options(**opts).load(),
        total,
        "Spark, data source alone (pyarrow)",
        rates,
    )
    spark.stop()
    return {"rates": rates}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=parse_count, default=10_000_000)
    parser.add_argument("--json-messages", type=parse_count, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--partitionlet-mb", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", help="work in this directory (default: a temporary one)")
    parser.add_argument(
        "--rescan", action="store_true", help="only the archived scans, over a --dir run's cluster"
    )
    args = parser.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    if args.rescan:
        if not args.dir:
            parser.error("--rescan needs --dir (a directory a run left)")
        result = rescan(args, Path(args.dir))
    elif args.dir:
        result = run(args, Path(args.dir))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = run(args, Path(tmp))
    print(f"load average at end: {os.getloadavg()}", flush=True)
    print(result)


if __name__ == "__main__":
    main()
