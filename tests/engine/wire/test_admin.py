"""Admin APIs over the listener (CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, DeleteRecords) from confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient, checked against the cluster itself."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as CKTP
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka import errors as kerrors
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KNewPartitions
from kafka.admin import NewTopic as KNewTopic
from kafka.protocol.consumer import FetchRequest, FetchResponse

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from engine.wire import KafkaServer
from tests.engine.wire.group_client import GroupClient
from tests.timing import scaled

# The policies under test and the Kafka configs they must show as
EDITED = {
    "ttl": 3600,
    "compact": True,
    "max_message_bytes": 2048,
    "timestamp_type": "log_append",
    "min_compaction_lag_ms": 5000,
    "delete_retention_ms": 7000,
}
EDITED_CONFIGS = {
    "retention.ms": "3600000",
    "cleanup.policy": "compact",
    "max.message.bytes": "2048",
    "message.timestamp.type": "LogAppendTime",
    "min.compaction.lag.ms": "5000",
    "delete.retention.ms": "7000",
}
DEFAULT_CONFIGS = {
    "retention.ms": "604800000",
    "cleanup.policy": "delete",
    "max.message.bytes": "1048576",
    "message.timestamp.type": "CreateTime",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "86400000",
}


@pytest.fixture(scope="module")
def ck(wire):
    return AdminClient({"bootstrap.servers": wire.bootstrap})


@pytest.fixture(scope="module")
def kp(wire):
    admin = KafkaAdminClient(bootstrap_servers=wire.bootstrap)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def locked(wire):
    """A stream whose topic_perm denies the listener's principal."""
    wire.cluster.create_stream("/locked", topic_perm="u:nobody")
    wire.cluster.create_stream("/locked-open")  # a topic to delete in a stream we then lock
    wire.cluster.create_topic("/locked-open:t", 1)
    wire.cluster.edit_stream("/locked-open", topic_perm="u:nobody")
    return "/locked"


def _default_stream(cluster) -> None:
    if not any(s.path == "/kafka" for s in cluster.streams()):
        cluster.create_stream("/kafka")


def _code(future) -> int:
    exc = future.exception(timeout=scaled(30))
    assert isinstance(exc, KafkaException), exc
    return exc.args[0].code()


def _ck_configs(ck, name):
    (future,) = ck.describe_configs([ConfigResource(ResourceType.TOPIC, name)]).values()
    return future.result(timeout=scaled(30))


# --- confluent-kafka -----------------------------------------------------------------------


def test_confluent_creates_describes_grows_and_deletes_topics(wire, ck):
    wire.cluster.create_stream("/ck-adm", default_partitions=2)
    futures = ck.create_topics(
        [NewTopic("ck-plain", 3, 1), NewTopic("/ck-adm:full", -1, -1)], operation_timeout=30
    )
    for future in futures.values():
        assert future.result(timeout=scaled(30)) is None
    assert len(wire.cluster.topic("/kafka:ck-plain").partitions) == 3
    assert len(wire.cluster.topic("/ck-adm:full").partitions) == 2  # the stream's default

    (grow,) = ck.create_partitions([NewPartitions("ck-plain", 5)]).values()
    assert grow.result(timeout=scaled(30)) is None
    assert len(wire.cluster.topic("/kafka:ck-plain").partitions) == 5

    configs = _ck_configs(ck, "/ck-adm:full")
    assert {k: v.value for k, v in configs.items()} == DEFAULT_CONFIGS
    assert {v.source for v in configs.values()} == {ConfigSource.DEFAULT_CONFIG.value}

    wire.cluster.edit_stream("/ck-adm", **EDITED)
    configs = _ck_configs(ck, "/ck-adm:full")
    assert {k: v.value for k, v in configs.items()} == EDITED_CONFIGS
    assert {v.source for v in configs.values()} == {ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    wire.cluster.edit_stream("/ck-adm", ttl=0)  # kept forever: Kafka's -1
    assert _ck_configs(ck, "/ck-adm:full")["retention.ms"].value == "-1"

    (broker,) = ck.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    assert broker.result(timeout=scaled(30))["broker.id"].value == "0"

    for future in ck.delete_topics(["ck-plain", "/ck-adm:full"]).values():
        assert future.result(timeout=scaled(30)) is None
    for full in ("/kafka:ck-plain", "/ck-adm:full"):
        with pytest.raises(errors.UnknownTopic):
            wire.cluster.topic(full)


def test_confluent_validate_only_creates_nothing(wire, ck):
    (future,) = ck.create_topics([NewTopic("ck-dry", 2, 1)], validate_only=True).values()
    assert future.result(timeout=scaled(30)) is None
    with pytest.raises(errors.UnknownTopic):
        wire.cluster.topic("/kafka:ck-dry")


def test_confluent_errors(wire, ck, locked):
    wire.cluster.create_topic("/kafka:ck-exists", 2)
    futures = ck.create_topics(
        [
            NewTopic("ck-exists", 1, 1),
            NewTopic("bad!name", 1, 1),
            NewTopic("ck-three-copies", 1, 3),
            NewTopic(f"{locked}:t", 1, 1),
            NewTopic("ck-compacted", 1, 1, config={"cleanup.policy": "compact"}),
        ]
    )
    assert _code(futures["ck-exists"]) == KafkaError.TOPIC_ALREADY_EXISTS
    assert _code(futures["bad!name"]) == KafkaError.TOPIC_EXCEPTION  # 17
    assert _code(futures["ck-three-copies"]) == KafkaError.INVALID_REPLICATION_FACTOR
    assert _code(futures[f"{locked}:t"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # /kafka is not compacted: the config cannot be honoured for one topic
    assert _code(futures["ck-compacted"]) == KafkaError.INVALID_CONFIG
    for full in ("/kafka:ck-three-copies", f"{locked}:t", "/kafka:ck-compacted"):
        with pytest.raises(errors.UnknownTopic):
            wire.cluster.topic(full)

    (fewer,) = ck.create_partitions([NewPartitions("ck-exists", 1)]).values()
    assert _code(fewer) == KafkaError.INVALID_PARTITIONS
    (same,) = ck.create_partitions([NewPartitions("ck-exists", 2)]).values()
    assert _code(same) == KafkaError.INVALID_PARTITIONS
    assert len(wire.cluster.topic("/kafka:ck-exists").partitions) == 2

    futures = ck.delete_topics(["ck-missing", "/locked-open:t"])
    assert _code(futures["ck-missing"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert _code(futures["/locked-open:t"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert wire.cluster.topic("/locked-open:t").name == "/locked-open:t"

    (missing,) = ck.describe_configs([ConfigResource(ResourceType.TOPIC, "ck-none")]).values()
    assert _code(missing) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_delete_records_moves_the_log_start_to_the_offset(tmp_path):
    """DeleteRecords moves the log start to exactly the offset asked, inside a partitionlet
    too (the low watermark answered is that offset); every reader starts there: an engine
    consumer, a kafka-python consumer over the wire, ListOffsets earliest, and a fetch
    below it is OFFSET_OUT_OF_RANGE, as Kafka answers."""
    with Cluster.open(tmp_path / "c", partitionlet_bytes=250) as cluster:
        cluster.create_stream("/kafka")
        cluster.create_topic("/kafka:records")
        with Producer(cluster, acks=1) as producer:
            for _ in range(4):  # four partitionlets of two 150-byte messages each
                producer.send("/kafka:records", value=bytes(150), partition=0)
                producer.send("/kafka:records", value=bytes(150), partition=0)
                producer.flush()
        lets = cluster.topic("/kafka:records").partitions[0].partitionlets
        assert [(p.base_offset, p.last_offset) for p in lets[:4]] == [
            (0, 1),
            (2, 3),
            (4, 5),
            (6, 7),
        ]
        with KafkaServer(cluster, listen=("127.0.0.1", 0)) as server:
            host, port = server.address
            bootstrap = f"{host}:{port}"
            ck = AdminClient({"bootstrap.servers": bootstrap})
            (done,) = ck.delete_records([CKTP("records", 0, 0)]).values()
            assert done.result(timeout=scaled(30)).low_watermark == 0  # nothing below offset 0
            (done,) = ck.delete_records([CKTP("records", 0, 4)]).values()
            assert done.result(timeout=scaled(30)).low_watermark == 4  # a partitionlet ends there
            (done,) = ck.delete_records([CKTP("records", 0, 7)]).values()
            assert done.result(timeout=scaled(30)).low_watermark == 7  # inside [6, 7]
            (past,) = ck.delete_records([CKTP("records", 0, 9)]).values()
            assert _code(past) == KafkaError.OFFSET_OUT_OF_RANGE

            ktp = KTP("records", 0)
            reader = KafkaConsumer(
                bootstrap_servers=bootstrap,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                consumer_timeout_ms=int(scaled(3000)),
            )
            reader.assign([ktp])
            assert reader.beginning_offsets([ktp]) == {ktp: 7}  # ListOffsets earliest
            assert [r.offset for r in reader] == [7]
            reader.close()
            # a fetch below the log start: OFFSET_OUT_OF_RANGE, and the client resets
            assert _raw_fetch_error(host, port, "records", 0, 6) == 1  # OFFSET_OUT_OF_RANGE
            assert _raw_fetch_error(host, port, "records", 0, 7) == 0
        part = cluster.topic("/kafka:records").partitions[0]
        assert (part.log_start_offset, part.log_end_offset) == (7, 8)
        assert part.partitionlets[0].base_offset == 6  # [6, 7] straddles: its bytes stay
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("/kafka:records", 0)])
        assert [r.offset for rs in consumer.poll(timeout_ms=2000).values() for r in rs] == [7]
        consumer.close()


def _raw_fetch_error(host: str, port: int, topic: str, partition: int, offset: int) -> int:
    """The error code of one partition of a Fetch v12 sent as raw frames."""
    Topic, Part = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            Topic(
                topic=topic,
                partitions=[
                    Part(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    client = GroupClient((host, port))  # its `call` sends any request as raw frames
    try:
        response = client.call(request, FetchResponse, 12)
    finally:
        client.close()
    return response.responses[0].partitions[0].error_code


def test_delete_records_is_refused_without_topic_perm(wire, ck, locked):
    (refused,) = ck.delete_records([CKTP("/locked-open:t", 0, 0)]).values()
    assert _code(refused) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_delete_groups_from_both_admin_clients(wire, ck, kp):
    """DeleteGroups: offsets and state go; a group with live members is not empty."""
    _default_stream(wire.cluster)
    wire.cluster.create_topic("/kafka:dg")
    for group in ("dg-ck", "dg-kp", "dg-live"):
        wire.cluster.reset_offsets(group, "/kafka:dg", 0)
    live = Consumer(wire.cluster, "/kafka:dg", group_id="dg-live")
    live.poll(timeout_ms=500)
    futures = ck.delete_consumer_groups(["dg-ck", "dg-live", "dg-none"])
    futures["dg-ck"].result(timeout=scaled(30))
    assert _code(futures["dg-live"]) == KafkaError.NON_EMPTY_GROUP
    assert _code(futures["dg-none"]) == KafkaError.GROUP_ID_NOT_FOUND
    assert kp.delete_groups(["dg-kp"]) == {"dg-kp": "OK"}
    live.close()
    known = {g.group_id for g in wire.cluster.groups()}
    assert {"dg-ck", "dg-kp"}.isdisjoint(known) and "dg-live" in known
    assert wire.cluster.group("dg-live").partitions[0].committed == 0


# --- kafka-python --------------------------------------------------------------------------


def test_kafka_python_creates_describes_grows_and_deletes_topics(wire, kp):
    wire.cluster.create_stream("/kp-adm", default_partitions=3)
    kp.create_topics([KNewTopic("kp-plain", 2, 1), KNewTopic("/kp-adm:full", -1, -1)])
    assert len(wire.cluster.topic("/kafka:kp-plain").partitions) == 2
    assert len(wire.cluster.topic("/kp-adm:full").partitions) == 3

    kp.create_partitions({"kp-plain": KNewPartitions(4)})
    assert len(wire.cluster.topic("/kafka:kp-plain").partitions) == 4

    wire.cluster.edit_stream("/kp-adm", **EDITED)
    found = kp.describe_configs(
        [KConfigResource(ConfigResourceType.TOPIC, "/kp-adm:full")], config_filter="all"
    )
    configs = found["topic"]["/kp-adm:full"]
    assert {k: v["value"] for k, v in configs.items()} == EDITED_CONFIGS
    # the default filter keeps what differs from Kafka's defaults: here, all of them
    modified = kp.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "/kp-adm:full")])
    assert set(modified["topic"]["/kp-adm:full"]) == set(EDITED_CONFIGS)
    broker = kp.describe_configs(
        [KConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
    )
    assert broker["broker"]["0"]["broker.id"]["value"] == "0"

    kp.delete_topics(["kp-plain", "/kp-adm:full"])
    for full in ("/kafka:kp-plain", "/kp-adm:full"):
        with pytest.raises(errors.UnknownTopic):
            wire.cluster.topic(full)


def test_kafka_python_errors(wire, kp, locked):
    wire.cluster.create_topic("/kafka:kp-exists", 2)
    cases = [
        (KNewTopic("kp-exists", 1, 1), kerrors.TopicAlreadyExistsError),
        (KNewTopic("bad!name", 1, 1), kerrors.InvalidTopicError),
        (KNewTopic("kp-three-copies", 1, 3), kerrors.InvalidReplicationFactorError),
        (KNewTopic(f"{locked}:kp", 1, 1), kerrors.TopicAuthorizationFailedError),
    ]
    for new, error in cases:
        with pytest.raises(error):
            kp.create_topics([new])
    with pytest.raises(kerrors.InvalidPartitionsError):
        kp.create_partitions({"kp-exists": KNewPartitions(1)})
    assert len(wire.cluster.topic("/kafka:kp-exists").partitions) == 2
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        kp.delete_topics(["kp-missing"])

    kp.create_topics([KNewTopic("kp-dry", 1, 1)], validate_only=True)
    with pytest.raises(errors.UnknownTopic):
        wire.cluster.topic("/kafka:kp-dry")

    producer = Producer(wire.cluster)
    producer.send("/kafka:kp-exists", value=b"x", partition=0)
    producer.flush()
    producer.close()
    # offset 1 is the end of the active partitionlet, which stays: the log starts at 1
    kp.delete_records({KTP("kp-exists", 0): 1})
    assert wire.cluster.topic("/kafka:kp-exists").partitions[0].log_start_offset == 1
