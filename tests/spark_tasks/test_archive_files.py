"""Archived partitionlets (docs/ARCHIVE.md) are Parquet files that Spark's own Parquet
reader reads with the columns and types of the `partitionlet` data source."""

from __future__ import annotations

from engine import Cluster, Consumer, Producer, TopicPartition
from spark_tasks.scan import SCHEMA_DDL

OLD_MS = 1_600_000_000_000


def test_spark_reads_archive_files_with_the_data_sources_schema(spark, tmp_path):
    from pyspark.sql.types import StructType

    with Cluster.open(tmp_path / "c", partitionlet_bytes=1500) as cluster:
        cluster.create_stream("/a", archive_after=60, ttl=0)
        cluster.create_topic("/a:t", partitions=1)
        producer = Producer(cluster, acks=1)
        for i in range(300):
            producer.send(
                "/a:t",
                key=f"k{i}".encode(),
                value=f"v{i}".encode(),
                headers=[("n", str(i).encode())] if i % 2 else None,
                timestamp_ms=OLD_MS + i,
            )
        producer.close()
        cluster.archive()
        files = [p.file for p in cluster.partitionlets("/a:t") if p.tier == "archive"]
        consumer = Consumer(cluster, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("/a:t", 0)])
        records = []
        while got := [r for rs in consumer.poll(timeout_ms=100).values() for r in rs]:
            records += got
        consumer.close()
    assert files
    df = spark.read.parquet(*files)
    source = StructType.fromDDL(SCHEMA_DDL)
    expected = [(f.name, f.dataType) for f in source.fields if f.name != "stream"]
    assert [(f.name, f.dataType) for f in df.schema.fields] == expected
    rows = df.orderBy("offset").collect()
    archived = records[: len(rows)]
    assert [(r.offset, r.key, r.value, r.topic, r.partition) for r in rows] == [
        (r.offset, r.key, r.value, r.topic, r.partition) for r in archived
    ]
    assert [int(r.timestamp.timestamp() * 1000) for r in rows[:3]] == [
        r.timestamp for r in archived[:3]
    ]
    assert rows[1].headers[0].key == "n" and bytes(rows[1].headers[0].value) == b"1"
    assert rows[0].headers is None
