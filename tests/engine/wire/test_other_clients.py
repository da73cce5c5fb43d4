"""confluent-kafka (librdkafka), aiokafka and Debian's kcat against the listener."""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTP

from engine import Consumer, Producer, TopicPartition
from tests.engine.wire.conftest import run_async
from tests.timing import scaled

BASE_MS = (int(time.time()) - 3600) * 1000


def _engine_records(cluster, full, count):
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(full, 0)])
    got = []
    deadline = time.monotonic() + scaled(20)
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.close()
    return got


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_confluent_producer_compressed_is_read_back_by_the_engine(wire, compression):
    topic = f"ck-{compression}"
    producer = CKProducer(
        {
            "bootstrap.servers": wire.bootstrap,
            "compression.type": compression,
            "enable.idempotence": True,
            "linger.ms": 20,
        }
    )
    failures = []
    for i in range(50):
        producer.produce(
            topic,
            key=b"k%d" % i,
            value=b"compressible payload " * 10 + b"%d" % i,
            headers=[("i", b"%d" % i)],
            timestamp=BASE_MS + i,
            partition=0,
            on_delivery=lambda err, msg: failures.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert failures == []
    records = _engine_records(wire.cluster, f"/kafka:{topic}", 50)
    assert [r.offset for r in records] == list(range(50))
    for i, r in enumerate(records):
        assert r.key == b"k%d" % i
        assert r.value == b"compressible payload " * 10 + b"%d" % i
        assert r.headers == [("i", b"%d" % i)]
        assert r.timestamp == BASE_MS + i


def test_confluent_consumer_reads_an_engine_producer(wire):
    wire.cluster.create_topic("/kafka:ck-read")
    with Producer(wire.cluster) as producer:
        for i in range(25):
            producer.send("/kafka:ck-read", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
    consumer = CKConsumer(
        {"bootstrap.servers": wire.bootstrap, "group.id": "ck", "enable.auto.commit": False}
    )
    consumer.assign([CKTP("ck-read", 0, 0)])
    got = []
    deadline = time.monotonic() + scaled(20)
    while len(got) < 25 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append(msg)
    consumer.close()
    engine = _engine_records(wire.cluster, "/kafka:ck-read", 25)
    assert [(m.offset(), m.key(), m.value()) for m in got] == [
        (r.offset, r.key, r.value) for r in engine
    ]
    assert [m.timestamp() for m in got] == [(1, r.timestamp) for r in engine]  # 1: create time
    assert all(m.headers() == [("h", b"x")] for m in got)


def test_aiokafka_round_trip(wire):
    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=wire.bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(
                    "aio", value=b"a%d" % i, key=b"k", headers=[("h", b"%d" % i)], partition=0
                )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=wire.bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            from aiokafka import TopicPartition as ATP

            consumer.assign([ATP("aio", 0)])
            got = []
            while len(got) < 10:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                for messages in batch.values():
                    got.extend(messages)
            return got
        finally:
            await consumer.stop()

    got = run_async(run())
    assert [(m.offset, m.value, list(m.headers)) for m in got] == [
        (i, b"a%d" % i, [("h", b"%d" % i)]) for i in range(10)
    ]
    records = _engine_records(wire.cluster, "/kafka:aio", 10)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (i, b"k", b"a%d" % i) for i in range(10)
    ]


def test_kcat_produce_and_consume(wire):
    lines = "".join(f"key{i}:line {i}\n" for i in range(5))
    subprocess.run(
        ["kcat", "-b", wire.bootstrap, "-P", "-t", "kcat-topic", "-K", ":", "-p", "0"],
        input=lines.encode(),
        check=True,
        timeout=scaled(60),
    )
    records = _engine_records(wire.cluster, "/kafka:kcat-topic", 5)
    assert [(r.key, r.value) for r in records] == [(b"key%d" % i, b"line %d" % i) for i in range(5)]
    out = subprocess.run(
        [
            "kcat",
            "-b",
            wire.bootstrap,
            "-C",
            "-t",
            "kcat-topic",
            "-e",
            "-o",
            "beginning",
            "-f",
            "%o %k %s\\n",
        ],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.decode().splitlines() == [f"{i} key{i} line {i}" for i in range(5)]


def test_a_producer_without_idempotence_has_every_batch_written(wire):
    # Regression: batches without a producer id were once taken for resends of the first
    # one and acknowledged without being written.
    topic = "ck-plain"
    count = 2000
    producer = CKProducer(
        {
            "bootstrap.servers": wire.bootstrap,
            "enable.idempotence": False,
            "acks": 1,
            "linger.ms": 0,
            "batch.num.messages": 10,  # some 200 requests, not one
        }
    )
    failures = []
    for i in range(count):
        producer.produce(
            topic,
            value=b"v%d" % i,
            partition=0,
            on_delivery=lambda err, msg: failures.append(err) if err else None,
        )
    assert producer.flush(60) == 0
    assert failures == []
    records = _engine_records(wire.cluster, f"/kafka:{topic}", count)
    assert [r.value for r in records] == [b"v%d" % i for i in range(count)]
    assert wire.cluster.topic(f"/kafka:{topic}").partitions[0].log_end_offset == count
