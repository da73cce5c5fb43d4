"""The `partitionlet` data source reads a compressed stream (issue 15, item 3): batches
stored with zstd or lz4, and a stream whose policy changed midway, come out as the same
rows as a plain one."""

from __future__ import annotations

import pytest

from engine import Cluster, Producer

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """/z:zstd and /l:lz4 compressed, /m:t with plain, zstd then lz4 batches; 300 each."""
    path = tmp_path_factory.mktemp("compressed") / "cluster"
    with Cluster.open(path, name="spark-compressed") as cluster:
        cluster.create_stream("/z", compression="zstd", ttl=0)
        cluster.create_stream("/l", compression="lz4", ttl=0)
        cluster.create_stream("/m", ttl=0)
        with Producer(cluster, acks=1) as producer:
            for topic in ("/z:zstd", "/l:lz4", "/m:t"):
                for i in range(300):
                    if topic == "/m:t" and i in (100, 200):
                        producer.flush()
                        cluster.edit_stream("/m", compression="zstd" if i == 100 else "lz4")
                    producer.send(
                        topic,
                        key=b"k%d" % (i % 7),
                        value=b'{"device":"car-%d","temp":21.5}' % i,
                        headers=[("seq", b"%d" % i)] if i % 3 == 0 else None,
                        timestamp_ms=T0 + i,
                    )
                    if i % 50 == 49:
                        producer.flush()
    return str(path)


@pytest.mark.parametrize("topic", ["/z:zstd", "/l:lz4", "/m:t"])
def test_the_data_source_reads_compressed_batches(spark, mixed, topic):
    rows = (
        spark.read.format("partitionlet")
        .option("cluster", mixed)
        .option("topic", topic)
        .load()
        .orderBy("offset")
        .collect()
    )
    assert [r.offset for r in rows] == list(range(300))
    assert [bytes(r.value) for r in rows] == [
        b'{"device":"car-%d","temp":21.5}' % i for i in range(300)
    ]
    assert [bytes(r.key) for r in rows] == [b"k%d" % (i % 7) for i in range(300)]
    assert [[(h.key, bytes(h.value)) for h in r.headers] if r.headers else [] for r in rows] == [
        [("seq", b"%d" % i)] if i % 3 == 0 else [] for i in range(300)
    ]
    assert int(rows[-1].timestamp.timestamp() * 1000) == T0 + 299
