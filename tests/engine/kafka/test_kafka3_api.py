"""kafka-python 3.0 programs on the facade: written the way kafka-python 3.0 is used, with
only the import lines changed (`engine.kafka` for `kafka`), on a real cluster directory."""

from __future__ import annotations

import pytest

from engine.kafka import (
    DefaultSerializer,
    Deserializer,
    IsolationLevel,
    JsonSerializer,
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    OffsetAndMetadata,
    OffsetSpec,
    Serializer,
    TopicPartition,
)
from engine.kafka.admin import ConfigResource, ConfigResourceType, NewTopic, OffsetTimestamp
from engine.kafka.errors import (
    InvalidConfigurationError,
    KafkaConfigurationError,
    NoError,
    TopicAlreadyExistsError,
)
from tests.engine.kafka.conftest import drain

# Settings a kafka-python 3.0 program may pass that only a networked client uses.
KAFKA3_NETWORK = {
    "bootstrap_timeout_ms": 5000,
    "client_dns_lookup": "use_all_dns_ips",
    "proxy_url": None,
    "receive_message_max_bytes": 100_000_000,
    "security_protocol": "PLAINTEXT",
}


class Tagged(Serializer):
    """A 3.0 serializer: it sees the record's headers."""

    def serialize(self, topic, headers, data):
        tag = dict(headers or []).get("unit", b"").decode()
        return f"{data}{tag}".encode()


class OldStyle(Deserializer):
    """A 2.0 deserializer: (topic, data), no headers."""

    def deserialize(self, topic, data):
        return f"{topic}/{data.decode()}"


def test_serializers_settings_and_close_of_kafka_python_3(servers):
    producer = KafkaProducer(
        bootstrap_servers=servers,
        key_serializer=DefaultSerializer(),
        value_serializer=JsonSerializer(),
        enable_idempotence=True,
        acks="all",
        **KAFKA3_NETWORK,
    )
    for i in range(3):
        producer.send("events", {"n": i, "tags": ["a", "b"]}, key=f"k{i}")
    producer.send("events", None, key="gone")  # a tombstone stays None
    producer.flush()
    producer.close(timeout_ms=5000)

    consumer = KafkaConsumer(
        "events",
        bootstrap_servers=servers,
        group_id="g3",
        auto_offset_reset="earliest",
        key_deserializer=DefaultSerializer(),
        value_deserializer=JsonSerializer(),
        isolation_level=IsolationLevel.READ_COMMITTED,
        client_rack="rack-1",
        **KAFKA3_NETWORK,
    )
    consumer.bootstrap(timeout_ms=1000)
    assert consumer.bootstrap_connected()
    records = drain(consumer, 4)
    assert [(r.key, r.value) for r in records] == [
        ("k0", {"n": 0, "tags": ["a", "b"]}),
        ("k1", {"n": 1, "tags": ["a", "b"]}),
        ("k2", {"n": 2, "tags": ["a", "b"]}),
        ("gone", None),
    ]
    assert consumer.group_metadata().group_id == "g3"
    consumer.close(timeout_ms=2000)
    assert not consumer.bootstrap_connected()


def test_header_aware_and_2_0_style_serializers_side_by_side(servers):
    producer = KafkaProducer(bootstrap_servers=servers, value_serializer=Tagged())
    producer.send("temps", 21, headers=[("unit", b"C")])
    producer.send("temps", 70, headers=[("unit", b"F")])
    producer.close(timeout=5)
    consumer = KafkaConsumer(
        "temps",
        bootstrap_servers=servers,
        auto_offset_reset="earliest",
        value_deserializer=OldStyle(),
    )
    assert [r.value for r in drain(consumer, 2)] == ["temps/21C", "temps/70F"]
    consumer.close()


def test_unknown_setting_is_refused_as_both_versions_refuse_it(servers):
    # kafka-python 3.0's producer raises ValueError, 2.0 and 3.0's consumer
    # KafkaConfigurationError: the facade's error is both.
    with pytest.raises(ValueError, match="lingr_ms"):
        KafkaProducer(bootstrap_servers=servers, lingr_ms=5)
    with pytest.raises(KafkaConfigurationError, match="lingr_ms"):
        KafkaConsumer(bootstrap_servers=servers, lingr_ms=5)
    with pytest.raises(ValueError, match="lingr_ms"):
        KafkaAdminClient(bootstrap_servers=servers, lingr_ms=5)


def test_metrics_have_the_standard_names(servers):
    producer = KafkaProducer(bootstrap_servers=servers)
    for _ in range(20):
        producer.send("m", b"x" * 100, key=b"kk")
    producer.flush()
    sent = producer.metrics()["producer-metrics"]
    assert sent["record-send-total"] == 20
    assert sent["record-send-rate"] > 0
    assert sent["byte-total"] == 20 * 102
    assert sent["byte-rate"] > 0
    assert sent["record-size-max"] == 102
    assert sent["record-error-total"] == 0
    producer.close()
    quiet = KafkaProducer(bootstrap_servers=servers, metrics_enabled=False)
    assert quiet.metrics() is None
    quiet.close()

    consumer = KafkaConsumer("m", bootstrap_servers=servers, auto_offset_reset="earliest")
    assert len(drain(consumer, 20)) == 20
    read = consumer.metrics()["consumer-fetch-manager-metrics"]
    assert read["records-consumed-total"] == 20
    assert read["records-consumed-rate"] > 0
    assert read["bytes-consumed-total"] == 20 * 102
    assert read["bytes-consumed-rate"] > 0
    assert read["fetch-total"] >= 1
    consumer.close()
    # iterating fetches too: its polls count as poll()'s do
    iterated = KafkaConsumer(
        "m", bootstrap_servers=servers, auto_offset_reset="earliest", consumer_timeout_ms=500
    )
    assert len(list(iterated)) == 20
    read = iterated.metrics()["consumer-fetch-manager-metrics"]
    assert read["records-consumed-total"] == 20 and read["fetch-total"] >= 1
    assert 0 < read["records-per-request-avg"] <= 20
    assert read["fetch-size-avg"] == 20 * 102 / read["fetch-total"]
    iterated.close()


def test_admin_topics_with_3_0_shapes(cluster, servers):
    admin = KafkaAdminClient(bootstrap_servers=servers, **KAFKA3_NETWORK)
    created = admin.create_topics({"orders": {"num_partitions": 3}, "audit": {}})
    assert [(t["name"], t["error_code"], t["num_partitions"]) for t in created["topics"]] == [
        ("orders", 0, 3),
        ("audit", 0, 1),
    ]
    # a list of names, as 3.0 takes it; raise_errors=False answers instead of raising
    again = admin.create_topics(["orders", "refunds"], raise_errors=False)
    assert [(t["name"], t["error_code"]) for t in again["topics"]] == [
        ("orders", TopicAlreadyExistsError.errno),
        ("refunds", 0),
    ]
    assert again.topic_errors[1] == ("refunds", 0, None)  # 2.0's attribute still there
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics(["orders"])

    (orders,) = admin.describe_topics(["orders"])
    assert orders["name"] == "orders" and orders["error_code"] == 0
    assert [
        (p["partition_index"], p["leader_id"], p["replica_nodes"]) for p in orders["partitions"]
    ] == [
        (0, 0, [0]),
        (1, 0, [0]),
        (2, 0, [0]),
    ]
    described = admin.describe_cluster()
    assert described["cluster_id"] == cluster.id
    assert [b["broker_id"] for b in described["brokers"]] == [0]

    deleted = admin.delete_topics(["audit", "refunds"])
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [
        ("audit", 0),
        ("refunds", 0),
    ]
    assert sorted(admin.list_topics()) == ["orders"]
    admin.close()


def test_admin_describe_configs_shows_the_stream_policies(cluster, servers):
    cluster.create_stream("/apps", ttl=3600, compact=True, timestamp_type="log_append")
    cluster.create_topic("/apps:t")
    cluster.create_stream("/kafka")  # the default stream, with default policies
    cluster.create_topic("/kafka:plain")
    admin = KafkaAdminClient(bootstrap_servers=servers)
    configs = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "/apps:t"), ConfigResource("topic", "plain")]
    )["topic"]
    shown = {name: c["value"] for name, c in configs["/apps:t"].items()}
    assert shown == {
        "retention.ms": "3600000",
        "cleanup.policy": "compact,delete",  # compacted, and deleted by age (its ttl)
        "message.timestamp.type": "LogAppendTime",
    }
    source = configs["/apps:t"]["retention.ms"]["config_source"]
    assert source == "DYNAMIC_DEFAULT_BROKER_CONFIG"  # the stream's policy
    assert configs["plain"] == {}  # nothing differs from the defaults
    everything = admin.describe_configs(
        [ConfigResource("topic", "plain", {"max.message.bytes": None})], config_filter="all"
    )["topic"]["plain"]
    assert everything["max.message.bytes"]["value"] == "1048576"
    assert everything["max.message.bytes"]["config_source"] == "DEFAULT_CONFIG"
    admin.close()


def test_admin_group_calls_of_3_0(servers):
    producer = KafkaProducer(bootstrap_servers=servers)
    for i in range(5):
        producer.send("jobs", str(i).encode(), partition=0)
    producer.close()
    consumer = KafkaConsumer(
        "jobs", bootstrap_servers=servers, group_id="workers", auto_offset_reset="earliest"
    )
    assert len(drain(consumer, 5)) == 5
    consumer.commit()

    admin = KafkaAdminClient(bootstrap_servers=servers)
    groups = admin.list_groups()
    assert [(g["group_id"], g["protocol_type"]) for g in groups] == [("workers", "consumer")]
    assert groups[0]["group_state"] == "Stable"
    assert admin.list_groups(states_filter=["Empty"]) == []
    described = admin.describe_groups(["workers", "nobody"])
    assert described["workers"]["group_state"] == "Stable"
    (member,) = described["workers"]["members"]
    assert member["member_assignment"]["assigned_partitions"] == [
        {"topic": "jobs", "partitions": [0]}
    ]
    assert described["nobody"]["group_state"] == "Dead"
    tp = TopicPartition("jobs", 0)
    assert admin.list_group_offsets("workers") == {"workers": {tp: OffsetAndMetadata(5, "")}}
    consumer.close()

    assert admin.list_groups(states_filter=["EMPTY"])[0]["group_id"] == "workers"
    assert admin.alter_group_offsets("workers", {tp: OffsetAndMetadata(2, "")}) == {tp: NoError}
    assert admin.list_group_offsets(["workers"])["workers"][tp].offset == 2
    found = (
        admin.list_partition_offsets({tp: OffsetSpec.EARLIEST}),
        admin.list_partition_offsets({tp: OffsetSpec.LATEST}),
        admin.list_partition_offsets({tp: OffsetTimestamp(0)}),
    )
    assert [f[tp].offset for f in found] == [0, 5, 0]
    # 2.0's names still answer in 2.0's shapes
    assert admin.list_consumer_groups() == [("workers", "consumer")]
    assert admin.list_consumer_group_offsets("workers") == {tp: OffsetAndMetadata(2, "")}
    # delete_groups, 3.0's dict of "OK" or the error's name; a live group is not empty
    live = KafkaConsumer("jobs", bootstrap_servers=servers, group_id="busy")
    live.poll(timeout_ms=500)
    assert admin.delete_groups(["workers", "busy", "nobody"]) == {
        "workers": "OK",
        "busy": "NonEmptyGroupError",
        "nobody": "GroupIdNotFoundError",
    }
    live.close()
    assert [g["group_id"] for g in admin.list_groups()] == ["busy"]
    admin.close()


def test_admin_create_topics_with_configs_sets_the_topics_own_policies(cluster, servers):
    cluster.create_stream("/kafka")  # not compacted
    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics(
        [
            NewTopic(
                "changelog",
                1,
                1,
                topic_configs={"cleanup.policy": "compact", "preallocate": "true"},
            )
        ]
    )
    assert cluster.topic("/kafka:changelog").overrides == {
        "compact": True,
        "ttl": 0,
        "retention_bytes": 0,
    }
    configs = admin.describe_configs([ConfigResource("topic", "changelog")])["topic"]
    assert configs["changelog"]["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    with pytest.raises(InvalidConfigurationError, match="retention.ms"):
        admin.create_topics([NewTopic("bad", 1, 1, topic_configs={"retention.ms": "soon"})])
    assert [t.topic for t in cluster.topics("/kafka")] == ["changelog"]
    admin.close()
