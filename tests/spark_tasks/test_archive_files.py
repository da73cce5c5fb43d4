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


def test_spark_refuses_a_damaged_archive_page(spark, tmp_path):
    """A flipped byte in a page of an archived file fails the read (the page's CRC, written
    by the archiver, which `spark_tasks.history` has Spark's Parquet reader verify; the
    data source's own read raises `errors.CorruptBatch`), never gives altered rows."""
    import pyarrow.parquet as pq
    import pytest

    from engine.storage import archive
    from spark_tasks import history

    path = tmp_path / "c"
    with Cluster.open(path, partitionlet_bytes=1500) as cluster:
        cluster.create_stream("/a", archive_after=60, ttl=0)
        cluster.create_topic("/a:t", partitions=1)
        producer = Producer(cluster, acks=1)
        for i in range(300):
            producer.send("/a:t", value=b"value-%06d" % i, timestamp_ms=OLD_MS + i)
        producer.close()
        assert cluster.archive().archived
    files = sorted((path / "archive").rglob("*.parquet"))
    meta = pq.ParquetFile(files[0]).metadata
    chunk = meta.row_group(0).column(meta.schema.to_arrow_schema().get_field_index("value"))
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    data = bytearray(files[0].read_bytes())
    data[start + chunk.total_compressed_size // 2] ^= 0x01
    files[0].write_bytes(bytes(data))
    archive.forget(str(files[0].relative_to(path)))
    # (without the check, Spark's reader read this file's 300 rows as if sound)
    for way, error in (("spark", "CRC checksum verification failed"), ("source", "damaged")):
        df = history.load(spark, {"cluster": str(path), "topic": "/a:t"}, archive=way)
        with pytest.raises(Exception, match=error):
            df.collect()
