"""engine.storage.volume: what a reader holds ahead of its position is bounded in bytes as
well as in batches (`READ_AHEAD_BYTES`), and a volume's connections keep a small page cache
(`CACHE_KIB`): a listener serving large fetches held 16 batches of a megabyte per partition,
and 16 MB of cache per thread and volume (issue 28, item 4)."""

from __future__ import annotations

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition
from engine.storage import batch as codec
from engine.storage.volume import CACHE_KIB, READ_AHEAD_BYTES, BatchWrite, Volume

BIG = 1 << 40


@pytest.fixture
def volume(tmp_path):
    v = Volume(1, tmp_path / "v.db")
    v.initialize("cluster")
    yield v
    v.close()


def _append(v: Volume, values: list[bytes]) -> None:
    payload = codec.encode(values, [5] * len(values))
    w = BatchWrite(7, 3, 0, payload, len(values), 5, 5, 0, "origin")
    w.pl_id, w.pl_base_offset = 40, 0
    v.append([w], sync=False, roll_bytes=BIG, roll_ms=BIG)


def test_a_read_stops_at_the_batch_that_reaches_the_byte_bound(volume):
    big = b"x" * (READ_AHEAD_BYTES * 6 // 10)
    for _ in range(4):
        _append(volume, [big])
    got = volume.read(40, 0, 16)
    assert [b[0] for b in got] == [0, 1]  # 0.6 + 0.6 of the bound: the second reaches it
    assert [b[0] for b in volume.read(40, 2, 16)] == [2, 3]
    huge = b"y" * (READ_AHEAD_BYTES * 2)
    _append(volume, [huge])
    assert [b[0] for b in volume.read(40, 4, 16)] == [4]  # one batch always, whatever its size


def test_small_batches_are_still_read_sixteen_at_a_time(volume):
    for i in range(20):
        _append(volume, [b"m%d" % i])
    assert [b[0] for b in volume.read(40, 0, 16)] == list(range(16))


def test_a_volume_connection_keeps_a_small_page_cache(volume):
    assert volume.conn.execute("PRAGMA cache_size").fetchone()[0] == -CACHE_KIB


def test_a_consumer_reads_big_batches_whole_and_in_order(tmp_path):
    # batches of 0.4 of the bound: each read of the log stops after three, and the next
    # goes on from there
    value = b"v" * (READ_AHEAD_BYTES // 40)
    with Cluster.open(tmp_path / "c", name="c") as cluster:
        cluster.create_stream("/s", default_partitions=1)
        cluster.create_topic("/s:t", partitions=1)
        producer = Producer(cluster, linger_ms=0, batch_size=READ_AHEAD_BYTES // 2)
        for i in range(400):
            producer.send("/s:t", value, key=b"%d" % i)
        producer.flush()
        producer.close()
        consumer = Consumer(cluster)
        consumer.assign([TopicPartition("/s:t", 0)])
        consumer.seek_to_beginning()
        keys: list[bytes] = []
        while len(keys) < 400:
            got = consumer.poll(timeout_ms=1000)
            assert got, f"nothing more after {len(keys)}"
            keys += [r.key for records in got.values() for r in records]
        consumer.close()
    assert keys == [b"%d" % i for i in range(400)]
