"""kafka-python 3.0 against the listener: produce (idempotence on, its default) read back by
engine.Consumer; an engine producer read over the wire; offsets by time; long polls;
commits that are the engine's."""

from __future__ import annotations

import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka.admin import OffsetSpec
from kafka.structs import OffsetAndMetadata as KOffsetAndMetadata

from engine import Consumer, Producer, TopicPartition
from engine.records import CREATE_TIME
from engine.wire import KafkaServer
from tests.timing import scaled

# recent times: the default stream's ttl (7 days) hides older messages at once
BASE_MS = (int(time.time()) - 3600) * 1000


def _engine_records(cluster, full, count, partitions=(0,)):
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(full, p) for p in partitions])
    got = []
    deadline = time.monotonic() + scaled(20)
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.close()
    return sorted(got, key=lambda r: (r.partition, r.offset))


def test_kafka_python_producer_is_read_back_identically_by_the_engine(wire):
    producer = KafkaProducer(bootstrap_servers=wire.bootstrap)
    assert producer.config["enable_idempotence"] is True
    sent = []
    for i in range(20):
        future = producer.send(
            "kp-roundtrip",
            key=f"k{i}".encode(),
            value=f"value {i}".encode() if i != 7 else None,
            headers=[("n", str(i).encode()), ("empty", b"")],
            timestamp_ms=BASE_MS + i,
            partition=0,
        )
        sent.append(future)
    metas = [f.get(timeout=scaled(30)) for f in sent]
    producer.close()
    assert [m.offset for m in metas] == list(range(20))

    records = _engine_records(wire.cluster, "/kafka:kp-roundtrip", 20)
    assert [r.offset for r in records] == list(range(20))
    for i, r in enumerate(records):
        assert r.topic == "/kafka:kp-roundtrip"
        assert r.key == f"k{i}".encode()
        assert r.value == (None if i == 7 else f"value {i}".encode())
        assert r.headers == [("n", str(i).encode()), ("empty", b"")]
        assert r.timestamp == BASE_MS + i
        assert r.timestamp_type == CREATE_TIME


def test_engine_producer_is_read_over_the_wire(wire):
    wire.cluster.create_topic("/kafka:from-engine", partitions=2)
    with Producer(wire.cluster, default_stream="/kafka") as producer:
        for i in range(30):
            producer.send(
                "from-engine",
                key=b"k%d" % i,
                value=b"v%d" % i,
                headers=[("h", b"%d" % i)],
                partition=i % 2,
                timestamp_ms=BASE_MS + i,
            )
        producer.flush()
    consumer = KafkaConsumer(
        bootstrap_servers=wire.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(scaled(5000)),
    )
    consumer.assign([KTP("from-engine", 0), KTP("from-engine", 1)])
    got = sorted(consumer, key=lambda m: (m.partition, m.offset))
    consumer.close()
    engine = _engine_records(wire.cluster, "/kafka:from-engine", 30, partitions=(0, 1))
    assert len(got) == 30
    for m, r in zip(got, engine, strict=True):
        assert m.topic == "from-engine"
        assert (m.partition, m.offset, m.key, m.value) == (r.partition, r.offset, r.key, r.value)
        assert (m.timestamp, m.timestamp_type) == (r.timestamp, r.timestamp_type)
        assert list(m.headers) == r.headers


def test_another_default_stream_and_log_append_time(wire):
    # kafka-python checks topic names itself ([A-Za-z0-9._-]): it reaches another stream
    # through a listener whose default stream that is
    wire.cluster.create_stream("/apps/logs", timestamp_type="log_append")
    wire.cluster.create_topic("/apps/logs:events")
    with KafkaServer(wire.cluster, listen=("127.0.0.1", 0), default_stream="/apps/logs") as other:
        bootstrap = "{}:{}".format(*other.address)
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("events", value=b"x", timestamp_ms=BASE_MS).get(timeout=scaled(30))
        producer.close()
        [record] = _engine_records(wire.cluster, "/apps/logs:events", 1)
        assert record.timestamp_type == 1 and record.timestamp > BASE_MS
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            consumer_timeout_ms=int(scaled(5000)),
        )
        consumer.assign([KTP("events", 0)])
        [message] = list(consumer)
        consumer.close()
    assert (message.topic, message.value) == ("events", b"x")
    assert (message.timestamp, message.timestamp_type) == (record.timestamp, 1)


def _default_stream(cluster):
    """The listener's default stream, made here when this test runs first (a client's first
    auto-created topic makes it otherwise)."""
    if not any(s.path == "/kafka" for s in cluster.streams()):
        cluster.create_stream("/kafka")


def test_list_offsets_earliest_latest_and_by_time(wire):
    _default_stream(wire.cluster)
    wire.cluster.create_topic("/kafka:by-time")
    with Producer(wire.cluster) as producer:
        for i in range(10):
            producer.send("/kafka:by-time", value=b"%d" % i, timestamp_ms=BASE_MS + 1_000 * i)
    consumer = KafkaConsumer(bootstrap_servers=wire.bootstrap)
    tp = KTP("by-time", 0)
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 10}
    found = consumer.offsets_for_times({tp: BASE_MS + 2_500})
    assert (found[tp].offset, found[tp].timestamp) == (3, BASE_MS + 3_000)
    assert consumer.offsets_for_times({tp: BASE_MS + 99_000}) == {tp: None}
    consumer.close()


def test_list_offsets_max_timestamp(wire):
    """KIP-734 (ListOffsets v7, timestamp -3): the first message with the largest timestamp,
    which need not be the newest."""
    _default_stream(wire.cluster)
    wire.cluster.create_topic("/kafka:max-time")
    stamps = [BASE_MS + 5_000, BASE_MS + 9_000, BASE_MS + 1_000, BASE_MS + 9_000, BASE_MS]
    with Producer(wire.cluster) as producer:
        for i, stamp in enumerate(stamps):
            producer.send("/kafka:max-time", value=b"%d" % i, timestamp_ms=stamp)
    wire.cluster.create_topic("/kafka:max-time-empty")
    admin = KafkaAdminClient(bootstrap_servers=wire.bootstrap)
    tp, empty = KTP("max-time", 0), KTP("max-time-empty", 0)
    found = admin.list_partition_offsets(
        {tp: OffsetSpec.MAX_TIMESTAMP, empty: OffsetSpec.MAX_TIMESTAMP}
    )
    admin.close()
    assert (found[tp].offset, found[tp].timestamp) == (1, BASE_MS + 9_000)
    assert (found[empty].offset, found[empty].timestamp) == (-1, -1)


def test_a_long_poll_returns_when_a_message_arrives(wire):
    wire.cluster.create_topic("/kafka:long-poll")
    consumer = KafkaConsumer(
        bootstrap_servers=wire.bootstrap, fetch_max_wait_ms=30_000, request_timeout_ms=60_000
    )
    tp = KTP("long-poll", 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    assert consumer.poll(timeout_ms=200) == {}  # a fetch is now waiting on the server

    def produce_later():
        time.sleep(0.5)  # on purpose: the message comes while the fetch waits on the server
        with Producer(wire.cluster) as producer:
            producer.send("/kafka:long-poll", value=b"wake up")

    threading.Thread(target=produce_later).start()
    started = time.monotonic()
    got = []
    while not got and time.monotonic() - started < 25:
        got = [m.value for ms in consumer.poll(timeout_ms=1000).values() for m in ms]
    consumer.close()
    assert got == [b"wake up"]
    assert time.monotonic() - started < 25  # far from the fetch's 30 s max wait


def test_commit_and_fetch_offsets_are_the_engines(wire):
    wire.cluster.create_topic("/kafka:committed", partitions=2)
    with Producer(wire.cluster) as producer:
        for i in range(6):
            producer.send("/kafka:committed", value=b"%d" % i, partition=i % 2)
    consumer = KafkaConsumer(
        bootstrap_servers=wire.bootstrap,
        group_id="wire-readers",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(scaled(3000)),
    )
    tps = [KTP("committed", 0), KTP("committed", 1)]
    consumer.assign(tps)
    assert len(list(consumer)) == 6
    consumer.commit(
        {tps[0]: KOffsetAndMetadata(2, "half", -1), tps[1]: KOffsetAndMetadata(3, "", -1)}
    )
    assert consumer.committed(tps[0]) == 2
    consumer.close()

    group = wire.cluster.group("wire-readers")
    committed = {(p.topic, p.partition): (p.committed, p.metadata) for p in group.partitions}
    assert committed == {("/kafka:committed", 0): (2, "half"), ("/kafka:committed", 1): (3, "")}
    assert group.lag == 1

    # and an engine commit is what the next wire consumer of the group resumes from
    engine_consumer = Consumer(wire.cluster, group_id="wire-readers", enable_auto_commit=False)
    engine_consumer.commit({TopicPartition("/kafka:committed", 0): 1})
    engine_consumer.close()
    again = KafkaConsumer(
        bootstrap_servers=wire.bootstrap, group_id="wire-readers", enable_auto_commit=False
    )
    again.assign(tps)
    assert again.committed(tps[0]) == 1
    assert again.position(tps[0]) == 1
    again.close()


def test_a_negative_commit_is_stored_as_kafka_stores_it(wire):
    wire.cluster.create_topic("/kafka:negative", partitions=1)
    with Producer(wire.cluster) as producer:
        for i in range(3):
            producer.send("/kafka:negative", value=b"%d" % i, partition=0)
    tp = KTP("negative", 0)
    setter = KafkaConsumer(
        bootstrap_servers=wire.bootstrap, group_id="negative", enable_auto_commit=False
    )
    setter.assign([tp])
    setter.commit({tp: KOffsetAndMetadata(-1, "latest", -1)})
    assert setter.committed(tp) is None  # OffsetFetch's -1 is "none" to every client
    setter.close()
    assert [p.committed for p in wire.cluster.group("negative").partitions] == [-1]
    # an engine member of the group applies its reset policy
    engine_consumer = Consumer(
        wire.cluster, group_id="negative", enable_auto_commit=False, auto_offset_reset="earliest"
    )
    engine_consumer.assign([TopicPartition("/kafka:negative", 0)])
    assert engine_consumer.position(TopicPartition("/kafka:negative", 0)) == 0
    engine_consumer.close()


def test_wire_traffic_counts_as_heat(wire):
    producer = KafkaProducer(bootstrap_servers=wire.bootstrap)
    for _ in range(7):
        producer.send("heated", value=b"x" * 100, partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=wire.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(scaled(3000)),
    )
    consumer.assign([KTP("heated", 0)])
    assert len(list(consumer)) == 7
    consumer.close()  # the listener's engine consumer flushes its reads when the link drops
    tp = TopicPartition("/kafka:heated", 0)
    deadline = time.monotonic() + scaled(20)
    load = wire.cluster.heat().partitions.get(tp)
    while (load is None or load.read_messages < 7) and time.monotonic() < deadline:
        time.sleep(0.2)
        load = wire.cluster.heat().partitions.get(tp)
    assert (load.write_messages, load.read_messages) == (7, 7)


def test_acks_zero_and_one_write_too(wire):
    for acks in (0, 1):
        producer = KafkaProducer(
            bootstrap_servers=wire.bootstrap, acks=acks, enable_idempotence=False
        )
        producer.send(f"acks-{acks}", value=b"a%d" % acks, partition=0)
        producer.flush()
        producer.close()
    assert [r.value for r in _engine_records(wire.cluster, "/kafka:acks-0", 1)] == [b"a0"]
    assert [r.value for r in _engine_records(wire.cluster, "/kafka:acks-1", 1)] == [b"a1"]
