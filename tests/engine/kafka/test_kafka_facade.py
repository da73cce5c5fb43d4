"""The kafka-python facade (engine.kafka): programs written the way kafka-python's
documentation shows, with only their imports changed, on a real cluster directory."""

from __future__ import annotations

import ast
import importlib
import json
import time
from pathlib import Path

import pytest

import engine.kafka as kafka_module
from engine import Consumer, Producer, errors
from engine.kafka import (
    ConsumerRebalanceListener,
    ConsumerRecord,
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    RangePartitionAssignor,
    RecordMetadata,
    RoundRobinPartitionAssignor,
    TopicPartition,
    bootstrap,
)
from engine.kafka import errors as kafka_errors
from tests.engine.kafka.conftest import drain
from tests.timing import scaled

FAST = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 200}


# --- producer ----------------------------------------------------------------------------


def test_producer_with_json_serializer_and_callbacks(cluster, servers):
    producer = KafkaProducer(
        bootstrap_servers=servers,
        value_serializer=lambda v: json.dumps(v).encode("utf-8"),
        key_serializer=str.encode,
        acks="all",
        linger_ms=5,
    )
    delivered, failed = [], []
    futures = []
    for i in range(10):
        future = producer.send("orders", {"id": i, "total": i * 1.5}, key=f"customer-{i % 3}")
        future.add_callback(lambda md, n=i: delivered.append((n, md)))
        future.add_errback(failed.append)
        futures.append(future)
    producer.flush()
    assert failed == []
    assert sorted(n for n, _ in delivered) == list(range(10))

    meta = futures[0].get(timeout=scaled(10))
    assert isinstance(meta, RecordMetadata)
    assert meta.topic == "orders"  # as written, not /kafka:orders
    assert meta.topic_partition == TopicPartition("orders", meta.partition)
    assert meta.offset >= 0 and meta.timestamp > 0
    assert meta.serialized_value_size == len(json.dumps({"id": 0, "total": 0.0}))
    assert meta.serialized_key_size == len("customer-0")
    assert meta.serialized_header_size == -1
    assert futures[0].is_done and futures[0].succeeded() and futures[0].exception is None
    # callbacks added after resolution run at once, with the same metadata
    late = []
    futures[0].add_callback(late.append)
    assert late == [meta]
    # the same key lands in the same partition
    parts = {}
    for n, md in delivered:
        parts.setdefault(n % 3, set()).add(md.partition)
    assert all(len(p) == 1 for p in parts.values())
    # the engine stored full names and the serialized bytes
    engine_consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    engine_consumer.assign(
        [
            TopicPartition("/kafka:orders", p)
            for p in range(cluster.topic("/kafka:orders").partition_count)
        ]
    )
    stored = [r for rs in engine_consumer.poll(timeout_ms=500).values() for r in rs]
    assert {r.topic for r in stored} == {"/kafka:orders"}
    assert sorted(json.loads(r.value)["id"] for r in stored) == list(range(10))
    assert producer.partitions_for("orders") == set(
        range(cluster.topic("/kafka:orders").partition_count)
    )
    assert producer.metrics()["producer-metrics"]["record-send-total"] == 10
    producer.close()
    with pytest.raises(kafka_errors.IllegalStateError):
        producer.send("orders", {"late": True})


def test_acks_zero_headers_and_explicit_partition(cluster, servers):
    cluster.create_stream("/s", ttl=0)
    cluster.create_topic("/s:t", partitions=3)
    producer = KafkaProducer(bootstrap_servers=servers, acks=0)
    meta = producer.send("/s:t", b"v", headers=[("trace", b"abc")], partition=2).get(
        timeout=scaled(5)
    )
    assert meta.topic == "/s:t" and meta.partition == 2 and meta.offset == -1
    assert meta.serialized_header_size == len("trace") + 3
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("/s:t", 2)])
    (record,) = drain(consumer, 1)
    assert record.headers == [("trace", b"abc")]
    assert record.topic == "/s:t"  # another stream's topic keeps its full name
    consumer.close()


# --- consumer ----------------------------------------------------------------------------


def test_consumer_iterates_until_consumer_timeout(cluster, servers):
    producer = KafkaProducer(
        bootstrap_servers=servers, value_serializer=lambda v: json.dumps(v).encode()
    )
    for i in range(25):
        producer.send("events", {"n": i}, key=b"k%d" % (i % 4))
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(
        "events",
        bootstrap_servers=[servers],
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(scaled(1000)),
        value_deserializer=lambda m: json.loads(m.decode("utf-8")),
        key_deserializer=bytes.decode,
    )
    assert consumer.subscription() == {"events"}
    started = time.monotonic()
    seen = [message for message in consumer]  # stops after 1 s without a message
    assert time.monotonic() - started < scaled(30)
    assert sorted(m.value["n"] for m in seen) == list(range(25))
    first = seen[0]
    assert isinstance(first, ConsumerRecord)
    assert first.topic == "events"
    assert first.key.startswith("k") and first.headers == [] and first.checksum is None
    assert first.serialized_key_size == 2
    assert first.serialized_value_size == len(json.dumps(first.value))
    assert first.serialized_header_size == -1
    assert first.timestamp_type == 0
    assert consumer.assignment() == {TopicPartition("events", 0)}
    assert consumer.topics() == {"events"}
    assert consumer.partitions_for_topic("events") == {0}
    assert consumer.partitions_for_topic("nothing-here") is None
    consumer.close()


def test_manual_assignment_seek_and_offsets(cluster, servers):
    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics([NewTopic("clicks", num_partitions=2, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=servers)
    before = int(time.time() * 1000)
    for i in range(10):
        producer.send("clicks", b"%d" % i, partition=i % 2, timestamp_ms=before + i)
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    p0, p1 = TopicPartition("clicks", 0), TopicPartition("clicks", 1)
    consumer.assign([p0, p1])
    assert consumer.assignment() == {p0, p1}
    assert consumer.beginning_offsets([p0, p1]) == {p0: 0, p1: 0}
    assert consumer.end_offsets([p0, p1]) == {p0: 5, p1: 5}
    assert consumer.highwater(p0) == 5
    assert consumer.position(p0) == 5  # auto_offset_reset='latest'

    consumer.seek(p0, 2)
    consumer.seek_to_end(p1)
    records = drain(consumer, 3)
    assert [(r.topic, r.partition, r.offset, r.value) for r in records] == [
        ("clicks", 0, 2, b"4"),
        ("clicks", 0, 3, b"6"),
        ("clicks", 0, 4, b"8"),
    ]
    consumer.seek_to_beginning(p1)
    peek = consumer.poll(timeout_ms=1000, update_offsets=False)
    assert [r.offset for r in peek[p1]] == [0, 1, 2, 3, 4]
    assert consumer.position(p1) == 0  # not moved by the peek
    consumer.pause(p1)
    assert consumer.paused() == {p1}
    assert consumer.poll(timeout_ms=100) == {}
    consumer.resume(p1)
    assert [r.offset for r in drain(consumer, 5)] == [0, 1, 2, 3, 4]
    found = consumer.offsets_for_times({p0: before + 4, p1: before + 10_000})
    assert found[p0].offset == 2 and found[p0].timestamp == before + 4
    assert found[p1] is None
    with pytest.raises(kafka_errors.IllegalStateError):
        consumer.position(TopicPartition("clicks", 7))
    consumer.close()


def test_commit_and_committed(cluster, servers):
    producer = KafkaProducer(bootstrap_servers=servers)
    for i in range(6):
        producer.send("payments", b"%d" % i)
    producer.close()
    tp = TopicPartition("payments", 0)

    consumer = KafkaConsumer(
        bootstrap_servers=servers,
        group_id="billing",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **FAST,
    )
    consumer.assign([tp])
    assert consumer.committed(tp) is None
    assert len(drain(consumer, 4, timeout=5)) >= 4
    consumer.seek(tp, 4)
    consumer.commit()
    assert consumer.committed(tp) == 4
    consumer.commit({tp: OffsetAndMetadata(3, "checkpoint-3")})
    assert consumer.committed(tp) == 3
    assert consumer.committed(tp, metadata=True) == OffsetAndMetadata(3, "checkpoint-3")
    answers = []
    future = consumer.commit_async(
        {tp: OffsetAndMetadata(5, None)},
        callback=lambda offsets, response: answers.append((offsets, response)),
    )
    assert future.is_done and future.succeeded()
    assert answers == [({tp: OffsetAndMetadata(5, None)}, None)]
    assert consumer.committed(tp) == 5
    consumer.close()

    # a new member of the group starts where the group committed
    again = KafkaConsumer(
        bootstrap_servers=servers, group_id="billing", enable_auto_commit=False, **FAST
    )
    again.assign([tp])
    assert again.position(tp) == 5
    assert [r.value for r in drain(again, 1)] == [b"5"]
    again.close()

    none = KafkaConsumer(bootstrap_servers=servers, group_id="fresh", auto_offset_reset="none")
    none.assign([tp])
    with pytest.raises(kafka_errors.NoOffsetForPartitionError):
        none.poll(timeout_ms=100)
    none.close()
    loner = KafkaConsumer(bootstrap_servers=servers)
    loner.assign([tp])
    with pytest.raises(kafka_errors.IllegalStateError):
        loner.commit()
    loner.close()


class Recorder(ConsumerRebalanceListener):
    def __init__(self):
        self.assigned = []
        self.revoked = []

    def on_partitions_assigned(self, assigned):
        self.assigned.append(list(assigned))

    def on_partitions_revoked(self, revoked):
        self.revoked.append(list(revoked))


def test_two_consumers_in_one_group_share_all_partitions(cluster, servers):
    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics([NewTopic("jobs", num_partitions=4, replication_factor=1)])
    producer = KafkaProducer(bootstrap_servers=servers)
    for i in range(40):
        producer.send("jobs", b"job-%d" % i, partition=i % 4)
    producer.close()

    listener = Recorder()
    a = KafkaConsumer(
        bootstrap_servers=servers,
        group_id="workers",
        client_id="worker-a",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        partition_assignment_strategy=[RoundRobinPartitionAssignor, RangePartitionAssignor],
        **FAST,
    )
    a.subscribe(["jobs"], listener=listener)
    b = KafkaConsumer(
        "jobs",
        bootstrap_servers=servers,
        group_id="workers",
        client_id="worker-b",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        partition_assignment_strategy=[RoundRobinPartitionAssignor],
        **FAST,
    )
    seen = {"a": [], "b": []}
    deadline = time.monotonic() + scaled(30)
    while time.monotonic() < deadline:
        for name, consumer in (("a", a), ("b", b)):
            for records in consumer.poll(timeout_ms=20).values():
                seen[name].extend(records)
        settled = len(a.assignment()) == 2 and len(b.assignment()) == 2
        if settled and len(seen["a"]) + len(seen["b"]) >= 40:
            break
    assert len(a.assignment()) == 2 and len(b.assignment()) == 2
    assert a.assignment() | b.assignment() == {TopicPartition("jobs", p) for p in range(4)}
    assert not a.assignment() & b.assignment()
    everything = [(r.partition, r.offset) for r in seen["a"] + seen["b"]]
    assert len(everything) == len(set(everything)) == 40  # each record once, none twice
    assert {r.topic for r in seen["a"] + seen["b"]} == {"jobs"}
    # the listener heard about plain names, lists of TopicPartition
    heard = [tp for tps in listener.assigned for tp in tps]
    assert heard and {tp.topic for tp in heard} == {"jobs"}

    a.commit()
    b.commit()
    groups = admin.list_consumer_groups()
    assert ("workers", "consumer") in groups
    (info,) = admin.describe_consumer_groups(["workers"])
    assert info.group == "workers" and info.state in ("Stable", "PreparingRebalance")
    assert info.protocol_type == "consumer" and info.protocol == "roundrobin"
    assert sorted(m.client_id for m in info.members) == ["worker-a", "worker-b"]
    owned = sorted(tp for m in info.members for tp in m.member_assignment.partitions())
    assert owned == [TopicPartition("jobs", p) for p in range(4)]
    offsets = admin.list_consumer_group_offsets("workers")
    assert offsets == {TopicPartition("jobs", p): OffsetAndMetadata(10, "") for p in range(4)}
    with pytest.raises(kafka_errors.NonEmptyGroupError):
        admin.alter_consumer_group_offsets("workers", {TopicPartition("jobs", 0): 0})
    a.close()
    b.close()
    assert admin.describe_consumer_groups(["workers"])[0].state == "Empty"
    assert admin.describe_consumer_groups(["nobody"])[0].state == "Dead"
    done = admin.alter_consumer_group_offsets(
        "workers", {TopicPartition("jobs", 0): OffsetAndMetadata(1, "replay")}
    )
    assert done == {TopicPartition("jobs", 0): OffsetAndMetadata(1, "replay")}
    offsets = admin.list_consumer_group_offsets(
        "workers", partitions=[TopicPartition("jobs", 0), TopicPartition("jobs", 1)]
    )
    assert offsets[TopicPartition("jobs", 0)] == OffsetAndMetadata(1, "replay")
    assert offsets[TopicPartition("jobs", 1)].offset == 10
    assert admin.list_consumer_group_offsets("nobody") == {}
    admin.close()


def test_pattern_subscription_matches_plain_names(cluster, servers):
    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics(
        [NewTopic("orders-eu", 1, 1), NewTopic("orders-us", 1, 1), NewTopic("audit", 1, 1)]
    )
    admin.close()
    consumer = KafkaConsumer(
        bootstrap_servers=servers, group_id="pat", auto_offset_reset="earliest", **FAST
    )
    consumer.subscribe(pattern="orders")  # matched from the start of the name
    deadline = time.monotonic() + scaled(15)
    while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
        consumer.poll(timeout_ms=50)
    assert consumer.assignment() == {TopicPartition("orders-eu", 0), TopicPartition("orders-us", 0)}
    assert consumer.subscription() == {"orders-eu", "orders-us"}
    consumer.close()


# --- admin -------------------------------------------------------------------------------


def test_admin_topics_lifecycle(cluster, servers):
    admin = KafkaAdminClient(bootstrap_servers=servers, client_id="ops")
    response = admin.create_topics(
        [
            NewTopic(name="alpha", num_partitions=3, replication_factor=1),
            NewTopic(name="beta", num_partitions=-1, replication_factor=-1),
        ]
    )
    assert response.topic_errors == [("alpha", 0, None), ("beta", 0, None)]
    assert cluster.topic("/kafka:alpha").partition_count == 3
    assert cluster.topic("/kafka:beta").partition_count == 1  # the stream's default
    assert admin.list_topics() == ["alpha", "beta"]

    with pytest.raises(kafka_errors.TopicAlreadyExistsError) as info:
        admin.create_topics([NewTopic("gamma", 1, 1), NewTopic("alpha", 1, 1)])
    assert isinstance(info.value.__cause__, errors.TopicExists)
    assert info.value.response.topic_errors[0] == ("gamma", 0, None)  # the others went on
    assert info.value.response.topic_errors[1][:2] == ("alpha", 36)
    admin.create_topics([NewTopic("delta", 2, 1)], validate_only=True)
    assert "delta" not in admin.list_topics()
    with pytest.raises(kafka_errors.TopicAlreadyExistsError):
        admin.create_topics([NewTopic("alpha", 2, 1)], validate_only=True)
    with pytest.raises(kafka_errors.InvalidPartitionsError):
        admin.create_topics([NewTopic("zero", 0, 1)])

    described = admin.describe_topics(["alpha", "missing"])
    assert described[0]["topic"] == "alpha" and described[0]["error_code"] == 0
    assert [p["partition"] for p in described[0]["partitions"]] == [0, 1, 2]
    assert described[1]["error_code"] == kafka_errors.UnknownTopicOrPartitionError.errno == 3
    assert [d["topic"] for d in admin.describe_topics()] == ["alpha", "beta", "gamma"]

    response = admin.create_partitions({"alpha": NewPartitions(total_count=5)})
    assert response.topic_errors == [("alpha", 0, None)]
    assert cluster.topic("/kafka:alpha").partition_count == 5
    with pytest.raises(kafka_errors.InvalidPartitionsError):
        admin.create_partitions({"alpha": NewPartitions(total_count=4)})
    with pytest.raises(kafka_errors.InvalidPartitionsError):
        admin.create_partitions({"alpha": NewPartitions(total_count=5)})
    admin.create_partitions({"beta": NewPartitions(4)}, validate_only=True)
    assert cluster.topic("/kafka:beta").partition_count == 1

    response = admin.delete_topics(["beta", "gamma"])
    assert response.topic_error_codes == [("beta", 0), ("gamma", 0)]
    assert admin.list_topics() == ["alpha"]
    with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
        admin.delete_topics(["beta"])
    assert admin.describe_cluster()["cluster_id"] == cluster.id
    assert admin.describe_configs([]) == {}  # issue 14: stream policies as topic configs
    admin.close()
    with pytest.raises(kafka_errors.IllegalStateError):
        admin.list_topics()


# --- finding the cluster -----------------------------------------------------------------


def test_bootstrap_servers_forms_and_shared_cluster(cluster, servers):
    path = str(cluster.path.resolve())
    one = KafkaProducer(bootstrap_servers=servers)
    two = KafkaConsumer(bootstrap_servers=[servers])
    three = KafkaAdminClient(bootstrap_servers=f"broker-1:9092,{servers}")
    assert one._cluster is two._cluster is three._cluster  # one Cluster per directory
    shared = one._cluster
    one.close()
    two.close()
    assert not shared.closed
    three.close()
    assert shared.closed  # closed with its last client
    relative = KafkaAdminClient(bootstrap_servers=f"file:{path}")
    assert relative.describe_cluster()["cluster_id"] == cluster.id
    relative.close()


def test_plet_cluster_environment(cluster, monkeypatch):
    monkeypatch.setenv("PLET_CLUSTER", str(cluster.path))
    producer = KafkaProducer()  # kafka-python's default bootstrap_servers
    producer.send("from-env", b"x").get(timeout=scaled(10))
    producer.close()
    consumer = KafkaConsumer(
        "from-env",
        bootstrap_servers="localhost:9092",
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(scaled(500)),
    )
    assert [m.value for m in consumer] == [b"x"]
    consumer.close()
    monkeypatch.setenv("PLET_CLUSTER", f"file://{cluster.path.resolve()}")
    KafkaAdminClient(bootstrap_servers=["kafka-1:9092", "kafka-2:9092"]).close()


def test_no_cluster_is_a_clear_error(tmp_path):
    with pytest.raises(kafka_errors.NoBrokersAvailable, match="PLET_CLUSTER"):
        KafkaProducer(bootstrap_servers="localhost:9092")
    with pytest.raises(kafka_errors.NoBrokersAvailable, match="does not exist"):
        KafkaConsumer(bootstrap_servers=f"file://{tmp_path / 'nowhere'}")
    assert not (tmp_path / "nowhere").exists()  # a typo never creates a cluster
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("not a cluster")
    with pytest.raises(kafka_errors.NoBrokersAvailable) as info:
        KafkaAdminClient(bootstrap_servers=f"file://{tmp_path / 'foreign'}")
    assert isinstance(info.value.__cause__, errors.NotACluster)
    with pytest.raises(kafka_errors.KafkaConfigurationError):
        KafkaAdminClient(bootstrap_servers="file://relative/path")


# --- topic names -------------------------------------------------------------------------


def test_plain_names_land_in_kafka_stream_created_on_first_use(cluster, servers):
    assert [s.path for s in cluster.streams()] == []
    producer = KafkaProducer(bootstrap_servers=servers)
    meta = producer.send("greetings", b"hello").get(timeout=scaled(10))
    assert meta.topic == "greetings"
    stream = cluster.stream("/kafka")
    assert stream.policies["auto_create"] is True
    assert [t.name for t in cluster.topics("/kafka")] == ["/kafka:greetings"]
    # the full name reaches the same topic and comes back the way it was written
    meta = producer.send("/kafka:greetings", b"again").get(timeout=scaled(10))
    assert meta.topic == "/kafka:greetings" and meta.offset == 1
    producer.close()


def test_default_stream_from_environment_and_keyword(cluster, servers, monkeypatch):
    cluster.create_stream("/apps/sensors", ttl=0)
    cluster.create_stream("/apps/other", ttl=0)
    monkeypatch.setenv("PLET_DEFAULT_STREAM", "/apps/sensors")
    producer = KafkaProducer(bootstrap_servers=servers)
    assert producer.send("car-17", b"42.1").get(timeout=scaled(10)).topic == "car-17"
    producer.close()
    assert cluster.topic("/apps/sensors:car-17").messages == 1
    with pytest.raises(errors.UnknownStream):
        cluster.stream("/kafka")  # not created: it is not the default stream here

    keyword = KafkaProducer(bootstrap_servers=servers, default_stream="/apps/other")
    keyword.send("car-17", b"1").get(timeout=scaled(10))
    keyword.close()
    assert cluster.topic("/apps/other:car-17").messages == 1

    consumer = KafkaConsumer(
        "car-17",
        bootstrap_servers=servers,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(scaled(500)),
    )
    assert [(m.topic, m.value) for m in consumer] == [("car-17", b"42.1")]
    consumer.close()

    monkeypatch.setenv("PLET_DEFAULT_STREAM", "/apps/missing")
    producer = KafkaProducer(bootstrap_servers=servers)
    with pytest.raises(kafka_errors.UnknownTopicOrPartitionError, match="/apps/missing"):
        producer.send("x", b"1").get(timeout=scaled(10))
    producer.close()
    with pytest.raises(kafka_errors.KafkaConfigurationError):
        KafkaProducer(bootstrap_servers=servers, default_stream="no-slash")


# --- errors ------------------------------------------------------------------------------


def test_unknown_topic_with_auto_create_off(cluster, servers):
    cluster.create_stream("/strict", auto_create=False)
    producer = KafkaProducer(bootstrap_servers=servers, default_stream="/strict")
    seen = []
    future = producer.send("nope", b"x").add_errback(seen.append)
    with pytest.raises(kafka_errors.UnknownTopicOrPartitionError) as info:
        future.get(timeout=scaled(10))
    assert isinstance(info.value, kafka_errors.KafkaError)
    assert isinstance(info.value.__cause__, errors.UnknownTopic)
    assert seen == [info.value] and future.failed() and not future.succeeded()
    with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
        producer.partitions_for("nope")
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=servers, default_stream="/strict")
    with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
        consumer.assign([TopicPartition("nope", 0)])
    consumer.close()


def test_oversized_message(cluster, servers):
    cluster.create_stream("/small", max_message_bytes=1000)
    producer = KafkaProducer(bootstrap_servers=servers, default_stream="/small")
    future = producer.send("t", b"x" * 2000)
    with pytest.raises(kafka_errors.MessageSizeTooLargeError) as info:
        future.get(timeout=scaled(10))
    assert isinstance(info.value.__cause__, errors.MessageTooLarge)
    assert info.value.errno == 10
    # the client's own limit, before the stream's
    limited = KafkaProducer(bootstrap_servers=servers, max_request_size=100)
    with pytest.raises(kafka_errors.MessageSizeTooLargeError):
        limited.send("t", b"y" * 101).get(timeout=scaled(10))
    limited.close()
    assert producer.send("t", b"fits").get(timeout=scaled(10)).offset == 0
    producer.close()


def test_invalid_topic_names(cluster, servers):
    producer = KafkaProducer(bootstrap_servers=servers)
    for bad in ("has space", "x" * 250, "..", "/no-topic-part", "t\n"):
        with pytest.raises(kafka_errors.InvalidTopicError) as info:
            producer.send(bad, b"x").get(timeout=scaled(10))
        assert isinstance(info.value.__cause__, errors.InvalidName)
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=servers)
    with pytest.raises(kafka_errors.InvalidTopicError):
        admin.create_topics([NewTopic("bad/name", 1, 1)])
    admin.close()
    consumer = KafkaConsumer(bootstrap_servers=servers)
    with pytest.raises(kafka_errors.InvalidTopicError):
        consumer.subscribe(["no good"])
    consumer.close()


def test_broker_settings_are_accepted_and_typos_are_not(cluster, servers):
    broker_only = {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "ssl_cafile": "/ca.pem",
        "ssl_check_hostname": False,
        "api_version": (2, 5, 0),
        "request_timeout_ms": 30000,
        "retry_backoff_ms": 100,
        "metadata_max_age_ms": 1000,
        "client_id": "app",
    }
    producer = KafkaProducer(
        bootstrap_servers=servers,
        compression_type="gzip",
        retries=5,
        enable_idempotence=True,
        **broker_only,
    )
    producer.send("ok", b"1").get(timeout=scaled(10))
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=servers,
        fetch_max_wait_ms=100,
        max_partition_fetch_bytes=1 << 20,
        check_crcs=True,
        isolation_level="read_committed",
        **broker_only,
    )
    consumer.close()
    KafkaAdminClient(bootstrap_servers=servers, **broker_only).close()
    with pytest.raises(kafka_errors.KafkaConfigurationError, match="linger"):
        KafkaProducer(bootstrap_servers=servers, lingerms=5)
    with pytest.raises(kafka_errors.KafkaConfigurationError):
        KafkaProducer(bootstrap_servers=servers, acks=2)
    with pytest.raises(kafka_errors.KafkaConfigurationError):
        KafkaConsumer(bootstrap_servers=servers, auto_offset_reset="sometimes")


def test_error_classes_and_import_paths():
    from engine.kafka.admin import KafkaAdminClient as Admin
    from engine.kafka.admin import NewTopic as Topic
    from engine.kafka.errors import KafkaError, KafkaTimeoutError, TopicAlreadyExistsError
    from engine.kafka.structs import TopicPartition as TP

    assert Admin is KafkaAdminClient and Topic is NewTopic and TP is TopicPartition
    assert issubclass(TopicAlreadyExistsError, KafkaError)
    assert issubclass(KafkaTimeoutError, KafkaError)
    assert kafka_errors.for_code(3) is kafka_errors.UnknownTopicOrPartitionError
    assert kafka_errors.for_code(36) is TopicAlreadyExistsError
    assert kafka_module.KafkaError is KafkaError  # also importable from engine.kafka
    assert kafka_errors.UnknownTopicOrPartitionError.retriable
    assert not kafka_errors.InvalidTopicError.retriable
    error = kafka_errors.translate(errors.Timeout("slow"))
    assert isinstance(error, KafkaTimeoutError) and isinstance(error.__cause__, errors.Timeout)
    # the engine's producer is untouched by the facade: still full names, engine errors
    assert Producer.__module__ == "engine.client.producer"


# --- the package: kafka-python's module paths, public engine objects only ----------------

PACKAGE = Path(kafka_module.__file__).parent

# Import lines of kafka-python programs, with `kafka` turned into `engine.kafka`.
KAFKA_PYTHON_PATHS = {
    "engine.kafka.errors": ["KafkaError", "TopicAlreadyExistsError", "NoBrokersAvailable"],
    "engine.kafka.structs": ["TopicPartition", "OffsetAndMetadata", "OffsetAndTimestamp"],
    "engine.kafka.serializer": ["Serializer", "Deserializer"],
    "engine.kafka.admin": [
        "KafkaAdminClient",
        "NewTopic",
        "NewPartitions",
        "ConfigResource",
        "ConfigResourceType",
    ],
    "engine.kafka.admin.client": ["KafkaAdminClient"],
    "engine.kafka.admin.new_topic": ["NewTopic"],
    "engine.kafka.admin.new_partitions": ["NewPartitions"],
    "engine.kafka.admin.config_resource": ["ConfigResource", "ConfigResourceType"],
    "engine.kafka.consumer": ["KafkaConsumer"],
    "engine.kafka.consumer.group": ["KafkaConsumer"],
    "engine.kafka.consumer.fetcher": ["ConsumerRecord"],
    "engine.kafka.consumer.subscription_state": ["ConsumerRebalanceListener"],
    "engine.kafka.producer": ["KafkaProducer"],
    "engine.kafka.producer.kafka": ["KafkaProducer"],
    "engine.kafka.producer.future": ["FutureRecordMetadata", "RecordMetadata"],
    "engine.kafka.coordinator.assignors.range": ["RangePartitionAssignor"],
    "engine.kafka.coordinator.assignors.roundrobin": ["RoundRobinPartitionAssignor"],
    "engine.kafka.coordinator.assignors.sticky.sticky_assignor": ["StickyPartitionAssignor"],
}


@pytest.mark.parametrize("module_name", sorted(KAFKA_PYTHON_PATHS))
def test_kafka_python_module_paths_are_real_modules(module_name):
    """Each path is a file of the package, found by the import system like any module
    (not an object planted in sys.modules), and holds kafka-python's names; every name is
    the one class the package root exports."""
    module = importlib.import_module(module_name)
    relative = module_name.removeprefix("engine.kafka.").split(".")
    expected = {PACKAGE.joinpath(*relative).with_suffix(".py"),
                PACKAGE.joinpath(*relative, "__init__.py")}  # fmt: skip
    assert Path(module.__file__) in expected
    assert module.__spec__ is not None and module.__spec__.origin == module.__file__
    for name in KAFKA_PYTHON_PATHS[module_name]:
        value = getattr(module, name)
        if hasattr(kafka_module, name):
            assert getattr(kafka_module, name) is value


def test_package_root_exports_kafka_python_names():
    """kafka-python's `kafka/__init__.py` exports these; DESIGN names the first seven."""
    for name in (
        "KafkaProducer",
        "KafkaConsumer",
        "KafkaAdminClient",
        "NewTopic",
        "TopicPartition",
        "OffsetAndMetadata",
        "ConsumerRebalanceListener",
        "Serializer",
        "Deserializer",
    ):
        assert name in kafka_module.__all__
        assert getattr(kafka_module, name).__module__.startswith("engine.")
    assert set(kafka_errors.__all__) <= set(kafka_module.__all__)
    assert "translate" not in kafka_module.__all__  # a helper, not a kafka-python name


def _private_uses(tree: ast.AST) -> list[str]:
    """Uses of a `_private` attribute on anything but the facade's own `self`/`cls`, by
    attribute or by getattr/setattr/hasattr with a literal name."""
    found = []
    namedtuple_api = {"_replace", "_asdict", "_fields", "_make"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            attr = node.attr
            owner = node.value
            if (
                attr.startswith("_")
                and not attr.startswith("__")
                and attr not in namedtuple_api
                and not (isinstance(owner, ast.Name) and owner.id in ("self", "cls"))
            ):
                found.append(f"line {node.lineno}: .{attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and str(node.args[1].value).startswith("_")
            and not str(node.args[1].value).startswith("__")
        ):
            found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return found


def test_facade_uses_public_engine_objects_only():
    """A frontend of the engine (DESIGN, "Layout"): no private attribute of an engine
    object, no sqlite3, no module planted in sys.modules."""
    problems = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        found = _private_uses(tree)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n.split(".")[0] == "sqlite3" for n in names):
                found.append(f"line {node.lineno}: imports sqlite3")
        if "sys.modules" in source:
            found.append("writes sys.modules")
        if found:
            problems[str(path.relative_to(PACKAGE))] = found
    assert problems == {}


def test_private_use_checker_flags_what_it_must():
    tree = ast.parse(
        "self._own\nself._producer._sender\ngetattr(p, '_sender', None)\n"
        "exc._kafka_error = e\nr._replace(key=1)\ncluster._catalog.x()\nself.__class__\n"
        "getattr(item, '__name__', None)\n"
    )
    assert sorted(_private_uses(tree)) == [
        "line 2: ._sender",
        "line 3: getattr(..., '_sender')",
        "line 4: ._kafka_error",
        "line 6: ._catalog",
    ]


def test_serializer_classes_and_assignors_by_kafka_python_paths(cluster, servers):
    from engine.kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as RR
    from engine.kafka.coordinator.assignors.sticky.sticky_assignor import (
        StickyPartitionAssignor,
    )
    from engine.kafka.serializer import Deserializer, Serializer

    class Tagged(Serializer):
        def serialize(self, topic, value):
            return json.dumps({"topic": topic, "value": value}).encode()

    class Untagged(Deserializer):
        def deserialize(self, topic, data):
            return json.loads(data)["value"]

    KafkaAdminClient(bootstrap_servers=servers).create_topics([NewTopic("events", 2)])
    producer = KafkaProducer(bootstrap_servers=servers, value_serializer=Tagged())
    meta = producer.send("events", [1, 2], partition=1).get(timeout=scaled(10))
    producer.close()
    raw = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    raw.assign([TopicPartition("/kafka:events", 1)])
    (stored,) = raw.poll(timeout_ms=1000)[TopicPartition("/kafka:events", 1)]
    raw.close()
    assert json.loads(stored.value) == {"topic": "events", "value": [1, 2]}
    assert meta.serialized_value_size == len(stored.value)

    consumer = KafkaConsumer(
        "events",
        bootstrap_servers=servers,
        group_id="tagged",
        auto_offset_reset="earliest",
        value_deserializer=Untagged(),
        partition_assignment_strategy=[StickyPartitionAssignor, RR],  # sticky: next one
        **FAST,
    )
    (record,) = drain(consumer, 1)
    assert (record.topic, record.partition, record.value) == ("events", 1, [1, 2])
    consumer.close()
    with pytest.raises(kafka_errors.KafkaConfigurationError, match="no strategy"):
        KafkaConsumer(
            bootstrap_servers=servers, partition_assignment_strategy=[StickyPartitionAssignor]
        )


def test_close_with_a_short_timeout_keeps_the_cluster_open_until_written(cluster, servers):
    """`close(timeout=0)` returns at once; the shared cluster stays open until the
    engine's producer has written what it held, then closes, and nothing is lost."""
    count, value = 4000, b"v" * 4096
    producer = KafkaProducer(
        bootstrap_servers=servers,
        acks="all",
        linger_ms=600_000,  # nothing is written before close
        batch_size=64 << 20,
        buffer_memory=128 << 20,
    )
    for _ in range(count):
        producer.send("bulk", value, partition=0)
    shared = producer._cluster
    producer.close(timeout=0)
    assert not shared.closed  # still writing: 16 MB, fsynced
    deadline = time.monotonic() + scaled(60)
    while not shared.closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert shared.closed and bootstrap._clusters == {}
    raw = Consumer(cluster, enable_auto_commit=False)
    assert raw.end_offsets([TopicPartition("/kafka:bulk", 0)]) == {
        TopicPartition("/kafka:bulk", 0): count
    }
    raw.close()


def test_a_full_disk_is_kafka_storage_error_in_the_facade():
    from engine import errors as engine_errors
    from engine.kafka import errors as kafka_errors

    got = kafka_errors.translate(engine_errors.DiskFull("volume v.db: the disk is full"))
    assert isinstance(got, kafka_errors.KafkaStorageError)
    assert (got.errno, got.retriable) == (56, True)
    assert kafka_errors.for_code(56) is kafka_errors.KafkaStorageError
