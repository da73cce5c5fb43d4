"""Kafka's murmur2 and default key partitioning (DESIGN: "murmur2 like Kafka").

The expected values come from Kafka itself: `UtilsTest.testMurmur2` of the Java client and
kafka-python's `test_murmur2_java_compatibility` (partition of a key among 1000 partitions,
as computed by Kafka's Java partitioner). A direct transcription of Java's `Utils.murmur2`,
with Java's signed 32-bit arithmetic and `>>>`, checks every other input.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.client import partitioner
from tests.timing import scaled

# org.apache.kafka.common.utils.UtilsTest.testMurmur2
KAFKA_UTILS_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

# kafka-python test_partitioner.py: Kafka's Java DefaultPartitioner among 1000 partitions
KAFKA_PARTITIONS_OF_1000 = {
    b"": 681,
    b"a": 524,
    b"ab": 434,
    b"abc": 107,
    b"123456789": 566,
    b"\x00 ": 742,
}


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _ushr(x: int, n: int) -> int:
    """Java's `x >>> n` on an int."""
    return (x & 0xFFFFFFFF) >> n


def java_murmur2(data: bytes) -> int:
    """Line-by-line transcription of org.apache.kafka.common.utils.Utils.murmur2."""
    length = len(data)
    seed = _int32(0x9747B28C)
    m = 0x5BD1E995
    r = 24
    h = _int32(seed ^ length)
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = _int32(
            (data[i4 + 0] & 0xFF)
            + ((data[i4 + 1] & 0xFF) << 8)
            + ((data[i4 + 2] & 0xFF) << 16)
            + ((data[i4 + 3] & 0xFF) << 24)
        )
        k = _int32(k * m)
        k = _int32(k ^ _ushr(k, r))
        k = _int32(k * m)
        h = _int32(h * m)
        h = _int32(h ^ k)
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h = _int32(h ^ ((data[tail + 2] & 0xFF) << 16))
    if rest >= 2:
        h = _int32(h ^ ((data[tail + 1] & 0xFF) << 8))
    if rest >= 1:
        h = _int32(h ^ (data[tail] & 0xFF))
        h = _int32(h * m)
    h = _int32(h ^ _ushr(h, 13))
    h = _int32(h * m)
    h = _int32(h ^ _ushr(h, 15))
    return h


def kafka_partition(hash_value: int, partitions: int) -> int:
    """Utils.toPositive(murmur2(key)) % numPartitions."""
    return (hash_value & 0x7FFFFFFF) % partitions


@pytest.mark.parametrize(("data", "expected"), sorted(KAFKA_UTILS_VECTORS.items()))
def test_murmur2_matches_kafka_utils_test(data, expected):
    assert partitioner.murmur2(data) == expected
    assert java_murmur2(data) == expected  # the transcription is right too


@pytest.mark.parametrize(("data", "expected"), sorted(KAFKA_PARTITIONS_OF_1000.items()))
def test_partition_matches_kafka_java_partitioner(data, expected):
    assert partitioner.partition_for_key(data, 1000) == expected
    assert kafka_partition(java_murmur2(data), 1000) == expected


def test_murmur2_hand_checked_empty_input():
    # h = seed ^ 0 = 0x9747b28c; h ^= h >>> 13; h *= m; h ^= h >>> 15 (no body, no tail)
    h = 0x9747B28C
    h ^= h >> 13
    h = (h * 0x5BD1E995) & 0xFFFFFFFF
    h ^= h >> 15
    assert h == 275646681
    assert partitioner.murmur2(b"") == 275646681


@pytest.mark.parametrize("length", range(0, 13))
def test_murmur2_every_tail_length(length):
    data = bytes(range(200, 200 + length))  # high bytes: Java's signed bytes must be masked
    assert partitioner.murmur2(data) == java_murmur2(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_equals_java_transcription(data):
    value = partitioner.murmur2(data)
    assert -(2**31) <= value < 2**31
    assert value == java_murmur2(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=32), st.integers(min_value=1, max_value=10_000))
def test_partition_for_key_is_kafkas_and_stable(key, partitions):
    p = partitioner.partition_for_key(key, partitions)
    assert 0 <= p < partitions
    assert p == kafka_partition(java_murmur2(key), partitions)
    assert partitioner.partition_for_key(key, partitions) == p
    assert partitioner.partition_for_key(bytearray(key), partitions) == p


def test_murmur2_not_ascii():
    assert partitioner.murmur2(b"\xa4") == java_murmur2(b"\xa4")
    assert partitioner.murmur2(b"\x81" * 1000) == java_murmur2(b"\x81" * 1000)


# --- through the Producer ----------------------------------------------------------------


def test_producer_puts_a_key_where_kafka_would(cluster):
    from engine import Producer

    cluster.create_stream("/s")
    cluster.create_topic("/s:t", partitions=12)
    producer = Producer(cluster, acks=1)
    try:
        futures = {}
        for key in list(KAFKA_UTILS_VECTORS) + [b"user-%d" % i for i in range(40)]:
            futures[key] = [producer.send("/s:t", value=b"v%d" % n, key=key) for n in range(3)]
        producer.flush()
        for key, fs in futures.items():
            metas = [f.get(timeout=scaled(10)) for f in fs]
            expected = kafka_partition(java_murmur2(key), 12)
            if key in KAFKA_UTILS_VECTORS:
                expected = kafka_partition(KAFKA_UTILS_VECTORS[key], 12)
            assert {m.partition for m in metas} == {expected}, key
            offsets = [m.offset for m in metas]
            assert offsets == sorted(offsets) and len(set(offsets)) == 3
    finally:
        producer.close()


def test_same_key_same_partition_across_producers_and_reopen(cluster_path):
    from engine import Cluster, Producer

    keys = [b"k%d" % i for i in range(30)]
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic("/s:t", partitions=7)
        producer = Producer(cluster, acks=1, linger_ms=20)
        first = {k: producer.send("/s:t", value=b"1", key=k) for k in keys}
        producer.flush()
        first = {k: f.get(timeout=scaled(10)).partition for k, f in first.items()}
        producer.close()
    with Cluster.open(cluster_path) as cluster:
        producer = Producer(cluster, acks="all")
        second = {k: producer.send("/s:t", value=b"2", key=k) for k in keys}
        producer.flush()
        second = {k: f.get(timeout=scaled(10)).partition for k, f in second.items()}
        producer.close()
    assert first == second
    assert first == {k: kafka_partition(java_murmur2(k), 7) for k in keys}
    assert len(set(first.values())) > 1  # the keys do spread


def test_explicit_partition_beats_the_key(cluster):
    from engine import Producer

    cluster.create_stream("/s")
    cluster.create_topic("/s:t", partitions=5)
    key = b"foobar"
    natural = kafka_partition(KAFKA_UTILS_VECTORS[key], 5)
    other = (natural + 1) % 5
    producer = Producer(cluster, acks=1)
    try:
        meta = producer.send("/s:t", value=b"v", key=key, partition=other).get(timeout=scaled(10))
    finally:
        producer.close()
    assert meta.partition == other


def test_unkeyed_messages_use_existing_partitions(cluster):
    from engine import Producer

    cluster.create_stream("/s")
    cluster.create_topic("/s:t", partitions=4)
    producer = Producer(cluster, acks=1)
    try:
        futures = [producer.send("/s:t", value=b"%d" % i) for i in range(200)]
        producer.flush()
        parts = [f.get(timeout=scaled(10)).partition for f in futures]
    finally:
        producer.close()
    assert set(parts) <= {0, 1, 2, 3}
    info = cluster.topic("/s:t")
    assert sum(p.log_end_offset for p in info.partitions) == 200
