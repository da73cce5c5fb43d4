"""Kafka topic configs over the listener (issue 24, build 2): CreateTopics with configs,
AlterConfigs, IncrementalAlterConfigs and DescribeConfigs from kafka-python's
KafkaAdminClient and confluent-kafka's AdminClient, checked against the cluster's topic
overrides and what retention and compaction then do. kafkajs's admin is in
test_kafkajs.py."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.admin import AlterConfigOp, ConfigResourceType, KafkaAdminClient
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import NewTopic as KNewTopic
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from engine import Cluster, kafka_configs
from engine.wire import KafkaServer
from tests.engine.test_kafka_configs import KAFKA_TOPIC_CONFIGS
from tests.engine.test_topic_policies import read_all
from tests.engine.wire.conftest import ALICE, Wire
from tests.engine.wire.group_client import GroupClient
from tests.timing import scaled

# the keys tools read of a broker (kafka-python's suite, kafka-ui, AKHQ)
BROKER_KEYS = {
    "advertised.listeners",
    "listeners",
    "log.retention.ms",
    "log.retention.bytes",
    "log.cleanup.policy",
    "num.partitions",
    "default.replication.factor",
    "min.insync.replicas",
    "auto.create.topics.enable",
    "message.max.bytes",
    "log.segment.bytes",
}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A listener on a cluster whose partitionlets roll at 300 bytes, so retention and
    compaction have sealed ones to work on; /kafka keeps messages a week, not compacted."""
    path = tmp_path_factory.mktemp("configs") / "cluster"
    with Cluster.open(path, name="configs", partitionlet_bytes=300) as cluster:
        cluster.create_stream("/kafka")
        server = KafkaServer(cluster, listen=("127.0.0.1", 0)).start()
        try:
            yield Wire(cluster, server)
        finally:
            server.close()


@pytest.fixture(scope="module")
def ck(small):
    return AdminClient({"bootstrap.servers": small.bootstrap})


@pytest.fixture(scope="module")
def kp(small):
    admin = KafkaAdminClient(bootstrap_servers=small.bootstrap)
    yield admin
    admin.close()


def _produce(wire: Wire, topic: str, values: list[tuple[bytes | None, bytes]]) -> None:
    """One batch per message, so partitionlets roll between them."""
    producer = KafkaProducer(bootstrap_servers=wire.bootstrap, linger_ms=0)
    for key, value in values:
        producer.send(topic, key=key, value=value, partition=0).get(timeout=scaled(30))
    producer.close()


def _ck_result(futures: dict):
    (future,) = futures.values()
    return future.result(timeout=scaled(30))


def _ck_error(futures: dict) -> KafkaError:
    (future,) = futures.values()
    exc = future.exception(timeout=scaled(30))
    assert isinstance(exc, KafkaException), exc
    return exc.args[0]


def _ck_describe(ck, name: str, kind=ResourceType.TOPIC) -> dict:
    return _ck_result(ck.describe_configs([ConfigResource(kind, name)]))


def _incremental(ck, name: str, *entries: tuple[str, AlterConfigOpType, str | None], **kw):
    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[ConfigEntry(n, v, incremental_operation=op) for n, op, v in entries],
    )
    return ck.incremental_alter_configs([resource], **kw)


# --- kafka-python ------------------------------------------------------------------------------


def test_kafka_python_creates_a_compacted_topic_in_a_stream_that_is_not(small, kp):
    kp.create_topics(
        [
            KNewTopic(
                "kp-changelog",
                1,
                1,
                topic_configs={"cleanup.policy": "compact", "segment.index.bytes": "4096"},
            )
        ]
    )
    full = "/kafka:kp-changelog"
    info = small.cluster.topic(full)
    assert info.overrides == {"compact": True, "ttl": 0, "retention_bytes": 0}
    assert small.cluster.stream("/kafka").policies["compact"] is False

    _produce(small, "kp-changelog", [(b"k%d" % (i % 3), b"%d" % i) for i in range(30)])
    report = small.cluster.compact()
    assert report.by_topic[full].messages_removed > 0
    kept = [(r.key, r.value) for r in read_all(small.cluster, full)]
    # the sealed partitionlets keep each key's latest; the active one is left as written
    assert len(kept) < 30
    assert dict(kept) == {b"k0": b"27", b"k1": b"28", b"k2": b"29"}

    found = kp.describe_configs(
        [KConfigResource(ConfigResourceType.TOPIC, "kp-changelog")],
        include_synonyms=True,
        config_filter="all",
    )
    configs = found["topic"]["kp-changelog"]
    assert set(configs) == KAFKA_TOPIC_CONFIGS  # every config Kafka's broker lists
    policy = configs["cleanup.policy"]
    assert (policy["value"], policy["config_source"], policy["read_only"]) == (
        "compact",
        "DYNAMIC_TOPIC_CONFIG",
        False,
    )
    assert [(s["name"], s["value"], s["source"]) for s in policy["synonyms"]] == [
        ("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"),
        ("log.cleanup.policy", "delete", "DEFAULT_CONFIG"),
    ]
    assert configs["retention.ms"]["value"] == "-1"  # compact alone keeps every key
    assert configs["segment.bytes"]["value"] == "300"  # the cluster's partitionlet size
    assert configs["retention.ms"]["config_type"] == "LONG"
    # accepted with no meaning here (not kept), shown as Kafka's default
    index = configs["segment.index.bytes"]
    assert (index["value"], index["config_source"]) == ("10485760", "DEFAULT_CONFIG")
    # the default filter keeps the topic's own configs
    modified = kp.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp-changelog")])
    assert set(modified["topic"]["kp-changelog"]) == {
        "cleanup.policy",
        "retention.ms",
        "retention.bytes",
    }


def test_kafka_python_describes_the_broker_with_the_keys_tools_read(small, kp):
    small.cluster.edit_stream("/kafka", ttl=3600, retention_bytes=10_000)
    try:
        found = kp.describe_configs(
            [KConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
        )
    finally:
        small.cluster.edit_stream("/kafka", ttl=604800, retention_bytes=0)
    broker = found["broker"]["0"]
    assert BROKER_KEYS <= set(broker)
    host, port = small.server.address
    assert broker["advertised.listeners"]["value"] == f"PLAINTEXT://{host}:{port}"
    assert broker["listeners"]["value"] == f"PLAINTEXT://{host}:{port}"
    # the default stream's policies are the broker's topic defaults
    assert broker["log.retention.ms"]["value"] == "3600000"
    assert broker["log.retention.ms"]["config_source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert broker["log.retention.bytes"]["value"] == "10000"
    assert broker["log.cleanup.policy"]["value"] == "delete"
    assert broker["num.partitions"]["value"] == "1"
    assert broker["default.replication.factor"]["value"] == "1"
    assert all(c["read_only"] for c in broker.values())


def test_kafka_python_alters_configs_and_retention_bytes_trims_the_topic(small, kp):
    kp.create_topics([KNewTopic("kp-sized", 1, 1)])
    full = "/kafka:kp-sized"
    resource = KConfigResource(ConfigResourceType.TOPIC, "kp-sized", {"retention.bytes": "1000"})
    assert kp.alter_configs([resource]) == {"topic": {"kp-sized": "OK"}}  # incremental SET
    assert small.cluster.topic(full).overrides == {"retention_bytes": 1000}

    _produce(small, "kp-sized", [(None, b"%03d" % i * 20) for i in range(40)])
    before = small.cluster.topic(full).partitions[0]
    report = small.cluster.enforce_retention()
    after = small.cluster.topic(full).partitions[0]
    assert full in report.by_topic
    assert after.log_start_offset > 0 and after.bytes >= 1000 and after.bytes < before.bytes

    # AlterConfigs (not incremental) replaces the topic's configs, as Kafka does
    replace = KConfigResource(ConfigResourceType.TOPIC, "kp-sized", {"max.message.bytes": "2048"})
    kp.alter_configs([replace], incremental=False)
    # kafka-python adds the topic's other configs itself (retention.bytes), as against Kafka
    assert small.cluster.topic(full).overrides == {
        "retention_bytes": 1000,
        "max_message_bytes": 2048,
    }
    reset = KConfigResource(
        ConfigResourceType.TOPIC, "kp-sized", {"retention.bytes": (AlterConfigOp.DELETE, None)}
    )
    kp.alter_configs([reset])
    assert small.cluster.topic(full).overrides == {"max_message_bytes": 2048}


# --- confluent-kafka ---------------------------------------------------------------------------


def test_confluent_creates_with_configs_and_alters_them_incrementally(small, ck):
    name = "ck-conf"
    full = f"/kafka:{name}"
    created = ck.create_topics(
        [NewTopic(name, 1, 1, config={"retention.bytes": "5000", "preallocate": "true"})]
    )
    assert _ck_result(created) is None
    assert small.cluster.topic(full).overrides == {"retention_bytes": 5000}
    configs = _ck_describe(ck, name)
    assert set(configs) == KAFKA_TOPIC_CONFIGS
    assert configs["retention.bytes"].value == "5000"
    assert configs["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not configs["retention.bytes"].is_read_only
    assert configs["preallocate"].value == "false"  # accepted, no meaning here

    S, D, A, U = (
        AlterConfigOpType.SET,
        AlterConfigOpType.DELETE,
        AlterConfigOpType.APPEND,
        AlterConfigOpType.SUBTRACT,
    )
    assert _ck_result(_incremental(ck, name, ("retention.ms", S, "60000"))) is None
    assert small.cluster.topic(full).overrides == {"retention_bytes": 5000, "ttl": 60}
    assert _ck_result(_incremental(ck, name, ("cleanup.policy", A, "compact"))) is None
    assert _ck_describe(ck, name)["cleanup.policy"].value == "compact,delete"
    assert small.cluster.topic(full).policies["compact"] is True
    assert _ck_result(_incremental(ck, name, ("cleanup.policy", U, "delete"))) is None
    # compact alone: Kafka keeps every key's latest value, deleting nothing by age or size
    assert small.cluster.topic(full).overrides == {
        "compact": True,
        "ttl": 0,
        "retention_bytes": 0,
    }
    assert _ck_result(_incremental(ck, name, ("cleanup.policy", D, None))) is None
    assert small.cluster.topic(full).overrides == {}
    assert _ck_describe(ck, name)["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value

    # validate_only changes nothing
    dry = _incremental(ck, name, ("retention.ms", S, "1000"), validate_only=True)
    assert _ck_result(dry) is None
    assert small.cluster.topic(full).overrides == {}

    # AlterConfigs replaces all of the topic's overrides
    assert _ck_result(_incremental(ck, name, ("retention.ms", S, "60000"))) is None
    replaced = ck.alter_configs(
        [ConfigResource(ResourceType.TOPIC, name, set_config={"max.message.bytes": "4096"})]
    )
    assert _ck_result(replaced) is None
    assert small.cluster.topic(full).overrides == {"max_message_bytes": 4096}


def test_confluent_bad_configs_are_invalid_config_with_the_reason(small, ck):
    bad = ck.create_topics([NewTopic("ck-bad", 1, 1, config={"retention.ms": "soon"})])
    error = _ck_error(bad)
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in error.str() and "soon" in error.str()
    dry = ck.create_topics(
        [NewTopic("ck-bad", 1, 1, config={"cleanup.policy": "shred"})], validate_only=True
    )
    assert _ck_error(dry).code() == KafkaError.INVALID_CONFIG
    assert "ck-bad" not in {t.topic for t in small.cluster.topics("/kafka")}

    small.cluster.create_topic("/kafka:ck-kept", 1)
    S, A = AlterConfigOpType.SET, AlterConfigOpType.APPEND
    for change in (
        ("max.message.bytes", S, "lots"),
        ("retention.ms", A, "1000"),  # not a list config
        ("no.such.config", S, "1"),
    ):
        error = _ck_error(_incremental(ck, "ck-kept", change))
        assert error.code() == KafkaError.INVALID_CONFIG, change
        assert change[0] in error.str()
    assert small.cluster.topic("/kafka:ck-kept").overrides == {}

    # a broker's configs are read-only here: Kafka's answer for a non-dynamic config
    broker = ck.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.BROKER,
                "0",
                incremental_configs=[
                    ConfigEntry("log.retention.ms", "1000", incremental_operation=S)
                ],
            )
        ]
    )
    error = _ck_error(broker)
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "log.retention.ms" in error.str()
    described = _ck_describe(ck, "0", ResourceType.BROKER)
    assert described["log.retention.ms"].is_read_only


def test_a_user_without_topic_perm_may_not_alter_configs(make_server):
    server = make_server(sasl=True)
    host, port = server.address
    alice = AdminClient(
        {
            "bootstrap.servers": f"{host}:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": ALICE[0],
            "sasl.password": ALICE[1],
        }
    )
    set_ttl = ("retention.ms", AlterConfigOpType.SET, "60000")
    error = _ck_error(_incremental(alice, "t", set_ttl))
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    replaced = alice.alter_configs(
        [ConfigResource(ResourceType.TOPIC, "t", set_config={"retention.ms": "60000"})]
    )
    assert _ck_error(replaced).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    created = alice.create_topics([NewTopic("t2", 1, 1, config={"cleanup.policy": "compact"})])
    assert _ck_error(created).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert server.cluster.topic("/kafka:t").overrides == {}
    # names and configs are not secret
    assert _ck_describe(alice, "t")["retention.ms"].value == "604800000"

    server.cluster.edit_stream("/kafka", topic_perm="u:alice")
    assert _ck_result(_incremental(alice, "t", set_ttl)) is None
    assert server.cluster.topic("/kafka:t").overrides == {"ttl": 60}


def test_the_table_is_the_one_both_frontends_answer_from(small):
    """The listener and the facade describe a topic from one engine function."""
    small.cluster.create_topic("/kafka:shared", 1, {"retention_bytes": 700})
    found = kafka_configs.topic_configs(small.cluster, "/kafka:shared")
    by_name = {e.name: e for e in found.entries}
    assert set(by_name) == KAFKA_TOPIC_CONFIGS
    assert (by_name["retention.bytes"].value, by_name["retention.bytes"].source) == (
        "700",
        kafka_configs.TOPIC,
    )
    # DescribeConfigs v3+'s documentation says which configs mean nothing here
    assert "no meaning here" in by_name["segment.index.bytes"].documentation


def test_describe_configs_v4_gives_types_documentation_and_every_level(small):
    """The raw answer: a config the topic overrides over its stream's policy has three
    synonyms, most specific first; types and documentation (v3+) when asked."""
    small.cluster.create_stream("/levels", ttl=3600)
    small.cluster.create_topic("/levels:t", 1, {"ttl": 60})
    R = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[
            R(resource_type=2, resource_name="levels..t", configuration_keys=None),
            R(resource_type=4, resource_name="0", configuration_keys=["log.retention.ms"]),
        ],
        include_synonyms=True,
        include_documentation=True,
    )
    client = GroupClient(small.server.address)
    try:
        answer = client.call(request, DescribeConfigsResponse, 4)
    finally:
        client.close()
    topic, broker = answer.results
    assert (topic.error_code, topic.resource_name) == (0, "levels..t")  # the client's name
    configs = {c.name: c for c in topic.configs}
    ttl = configs["retention.ms"]
    assert (ttl.value, ttl.config_source, ttl.read_only, ttl.config_type) == (
        "60000",
        1,  # DYNAMIC_TOPIC_CONFIG
        False,
        5,  # LONG
    )
    assert [(s.name, s.value, s.source) for s in ttl.synonyms] == [
        ("retention.ms", "60000", 1),
        ("log.retention.ms", "3600000", 3),  # the stream's: DYNAMIC_DEFAULT_BROKER_CONFIG
        ("log.retention.ms", "604800000", 5),
    ]
    assert "ttl" in ttl.documentation
    # nobody set it: its value is the engine's default, and so is its default synonym
    size = configs["max.message.bytes"]
    assert [(s.name, s.value, s.source) for s in size.synonyms] == [
        ("message.max.bytes", size.value, 5)
    ]
    assert configs["cleanup.policy"].config_type == 7  # LIST
    assert "no meaning here" in configs["preallocate"].documentation
    assert configs["preallocate"].config_type == 1  # BOOLEAN
    ((name, value, source, read_only),) = [
        (c.name, c.value, c.config_source, c.read_only) for c in broker.configs
    ]
    assert (name, value, source, read_only) == ("log.retention.ms", "604800000", 5, True)
