"""Rows per second that Spark reads through the `partitionlet` source, against the same rows
read with the engine's Consumer: `python -m spark_tasks.bench [--messages N] [--master M]`.

It writes N messages (100-byte values, keys) to a 4-partition topic of a new cluster in a
temporary directory, reads them all once with a Consumer, then with Spark
(`count`, `sum(length(value))`, `max(offset)`, so every column is produced), twice after a
warm-up, and prints the rates.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from engine import Cluster, Consumer, Producer, TopicPartition


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    n = args.messages
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cluster")
        with Cluster.open(path, name="bench") as c:
            c.create_stream("/b", ttl=0)
            c.create_topic("/b:t", partitions=args.partitions)
            producer = Producer(c, acks=1, linger_ms=5)
            value = b"x" * 100
            for i in range(n):
                producer.send("/b:t", value=value, key=b"k%d" % (i % 1000))
            producer.flush()
            producer.close()
            start = time.perf_counter()
            consumer = Consumer(c, auto_offset_reset="earliest", enable_auto_commit=False)
            consumer.assign([TopicPartition("/b:t", p) for p in range(args.partitions)])
            got = 0
            while got < n:
                for records in consumer.poll(timeout_ms=1000, max_records=10000).values():
                    got += len(records)
            consumer.close()
            took = time.perf_counter() - start
            print(f"Consumer: {got:,} rows in {took:.2f} s = {got / took:,.0f} rows/s", flush=True)
            partitionlets = len([p for p in c.partitionlets("/b:t") if p.messages])

        from pyspark.sql import SparkSession

        import spark_tasks

        spark = (
            SparkSession.builder.master(args.master)
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        spark_tasks.register(spark)

        def query():
            # A new DataFrame every time: Spark may reuse the results of one it ran before.
            reader = spark.read.format("partitionlet").option("cluster", path)
            df = reader.option("topic", "/b:t").load()
            return df.selectExpr("count(*)", "sum(length(value))", "max(offset)").collect()

        query()  # warm-up: JVM, Python workers
        for _ in range(2):
            start = time.perf_counter()
            rows = query()[0][0]
            took = time.perf_counter() - start
            print(
                f"Spark {args.master} ({partitionlets} partitionlets): {rows:,} rows in "
                f"{took:.2f} s = {rows / took:,.0f} rows/s",
                flush=True,
            )
        spark.stop()


if __name__ == "__main__":
    main()
