"""The facade's transactional producer and isolation level (issue 25): a kafka-python program
with `KafkaProducer(transactional_id=...)` and `KafkaConsumer(isolation_level=...)` runs
unchanged on the engine's transactions."""

from __future__ import annotations

import pytest

from engine import Cluster
from engine.kafka import KafkaConsumer, KafkaProducer, TopicPartition
from engine.kafka.errors import KafkaConfigurationError, ProducerFencedError
from tests.timing import scaled


@pytest.fixture
def servers(tmp_path):
    path = tmp_path / "c"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/kafka")
        cluster.create_topic("/kafka:t", partitions=1)
    return f"file://{path}"


def _values(servers, isolation: str) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=servers,
        default_stream="/kafka",
        isolation_level=isolation,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(scaled(1000)),
    )
    consumer.assign([TopicPartition("t", 0)])
    try:
        return [m.value for m in consumer]
    finally:
        consumer.close()


def test_commit_abort_and_offsets_through_the_facade(servers):
    producer = KafkaProducer(
        bootstrap_servers=servers, default_stream="/kafka", transactional_id="app"
    )
    assert producer.config["acks"] == "all"  # as kafka-python 3 for a transactional id
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", b"kept", partition=0)
    producer.send_offsets_to_transaction({TopicPartition("t", 0): 5}, "readers")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("t", b"dropped", partition=0)
    producer.abort_transaction()
    producer.close()
    assert _values(servers, "read_committed") == [b"kept"]
    assert _values(servers, "read_uncommitted") == [b"kept", b"dropped"]
    group = KafkaConsumer(bootstrap_servers=servers, default_stream="/kafka", group_id="readers")
    try:
        assert group.committed(TopicPartition("t", 0)) == 5
    finally:
        group.close()


def test_a_fenced_producer_gets_kafka_pythons_error(servers):
    old = KafkaProducer(bootstrap_servers=servers, default_stream="/kafka", transactional_id="x")
    old.init_transactions()
    new = KafkaProducer(bootstrap_servers=servers, default_stream="/kafka", transactional_id="x")
    new.init_transactions()
    old.begin_transaction()
    with pytest.raises(ProducerFencedError):
        old.send_offsets_to_transaction({TopicPartition("t", 0): 1}, "g")
    old.close()
    new.close()
    with pytest.raises(KafkaConfigurationError, match="enable_idempotence"):
        KafkaProducer(bootstrap_servers=servers, transactional_id="y", enable_idempotence=False)
