"""DescribeCluster, DescribeLogDirs, OffsetDelete and DescribeTopicPartitions over the
listener, from confluent-kafka's AdminClient and kafka-python's KafkaAdminClient, checked
against the cluster itself."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KTP
from kafka import errors as kerrors
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse
from kafka.structs import OffsetAndMetadata as KOffsetAndMetadata

from engine import Cluster, Consumer, Producer, TopicPartition
from engine.wire import KafkaServer
from tests.engine.wire.group_client import GroupClient
from tests.timing import scaled, wait_until

OLD_MS = 1_600_000_000_000  # older than the archive_after below


@pytest.fixture(scope="module")
def kp(wire):
    admin = KafkaAdminClient(bootstrap_servers=wire.bootstrap)
    yield admin
    admin.close()


def test_describe_cluster_is_the_one_node(wire):
    ck = AdminClient({"bootstrap.servers": wire.bootstrap})
    described = ck.describe_cluster().result(timeout=scaled(30))
    host, port = wire.server.address
    assert described.cluster_id == wire.cluster.id
    assert described.controller.id == 0
    assert [(n.id, n.host, n.port) for n in described.nodes] == [(0, host, port)]


def test_describe_log_dirs_shows_volumes_and_the_archive_with_sizes(tmp_path):
    with Cluster.open(tmp_path / "c", partitionlet_bytes=1500) as cluster:
        cluster.create_stream("/kafka", archive_after=60, ttl=0)
        cluster.create_topic("/kafka:dirs", partitions=2)
        with Producer(cluster, acks=1) as producer:
            for i in range(200):
                producer.send("/kafka:dirs", value=b"v%d" % i, partition=i % 2,
                              timestamp_ms=OLD_MS + i)  # fmt: skip
        assert cluster.archive().archived  # the sealed partitionlets go to the archive
        volumes = {v.id: v.path for v in cluster.volumes()}
        expected: dict[str, dict[int, int]] = {}
        for p in cluster.topic("/kafka:dirs").partitions:
            for pl in p.partitionlets:
                where = (
                    str(cluster.path / "archive") if pl.tier == "archive" else volumes[pl.volume]
                )
                by_partition = expected.setdefault(where, {})
                by_partition[p.partition] = by_partition.get(p.partition, 0) + pl.bytes
        with KafkaServer(cluster, listen=("127.0.0.1", 0)) as server:
            host, port = server.address
            admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}")
            try:
                [answer] = admin.describe_log_dirs()
                named = admin.describe_log_dirs({"dirs": [1]})
            finally:
                admin.close()
    assert answer["broker"] == 0
    dirs = {d["log_dir"]: d for d in answer["log_dirs"]}
    # every volume is a log dir, and the archive one more
    assert set(dirs) == set(volumes.values()) | {str(cluster.path / "archive")}
    got = {
        path: {
            p["partition_index"]: p["partition_size"] for t in d["topics"] for p in t["partitions"]
        }
        for path, d in dirs.items()
        if d["topics"]
    }
    assert got == expected
    assert all(d["error_code"] == 0 for d in dirs.values())
    assert all(d["total_bytes"] > 0 and d["usable_bytes"] > 0 for d in dirs.values())
    only_one = {
        p["partition_index"]
        for d in named[0]["log_dirs"]
        for t in d["topics"]
        for p in t["partitions"]
    }
    assert only_one == {1}


def test_offset_delete_refuses_a_topic_the_group_reads(wire, kp):
    wire.cluster.create_topic("/kafka:od-read", partitions=1)
    wire.cluster.create_topic("/kafka:od-other", partitions=2)
    with Producer(wire.cluster) as producer:
        producer.send("/kafka:od-read", value=b"x", partition=0)
    # a live member reads od-read; the group also has offsets in od-other
    member = KafkaConsumer(
        bootstrap_servers=wire.bootstrap,
        group_id="od-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    member.subscribe(["od-read"])
    # long polls: kafka-python 3.0.12 can lose a SyncGroup answer after a short poll ends
    wait_until(lambda: member.poll(timeout_ms=2000), timeout=30)
    member.commit({KTP("od-read", 0): KOffsetAndMetadata(1, "", -1)})
    try:
        done = kp.delete_group_offsets("od-group", [KTP("od-read", 0)])
        assert done == {KTP("od-read", 0): kerrors.GroupSubscribedToTopicError}
    finally:
        member.close()
    committed = {
        (p.topic, p.partition): p.committed for p in wire.cluster.group("od-group").partitions
    }
    assert committed == {("/kafka:od-read", 0): 1}
    # once nobody reads it, its offsets go
    done = kp.delete_group_offsets("od-group", [KTP("od-read", 0)])
    assert done == {KTP("od-read", 0): kerrors.NoError}
    assert [p for p in wire.cluster.group("od-group").partitions if p.committed is not None] == []
    with pytest.raises(kerrors.GroupIdNotFoundError):
        kp.delete_group_offsets("od-nobody", [KTP("od-read", 0)])


def test_engine_delete_group_offsets(wire):
    wire.cluster.create_topic("/kafka:od-engine", partitions=2)
    tps = [TopicPartition("/kafka:od-engine", p) for p in range(2)]
    setter = Consumer(wire.cluster, group_id="od-engine", enable_auto_commit=False)
    setter.commit({tps[0]: 0, tps[1]: 0})
    setter.close()
    assert wire.cluster.delete_group_offsets("od-engine", [tps[1]]) == {tps[1]: True}
    left = [(p.partition, p.committed) for p in wire.cluster.group("od-engine").partitions]
    assert left == [(0, 0)]


def test_describe_topic_partitions_pages_with_a_cursor(wire, kp):
    wire.cluster.create_topic("/kafka:dtp-a", partitions=3)
    wire.cluster.create_topic("/kafka:dtp-b", partitions=2)
    first = kp.describe_topic_partitions(["dtp-b", "dtp-a", "dtp-none"], response_partition_limit=2)
    assert [
        (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in first["topics"]
    ] == [("dtp-a", [0, 1])]
    assert first["next_cursor"] == {"topic_name": "dtp-a", "partition_index": 2}
    rest = kp.describe_topic_partitions(
        ["dtp-b", "dtp-a", "dtp-none"], response_partition_limit=2, cursor=first["next_cursor"]
    )
    assert [
        (t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
        for t in rest["topics"]
    ] == [("dtp-a", 0, [2]), ("dtp-b", 0, [0])]
    assert rest["next_cursor"] == {"topic_name": "dtp-b", "partition_index": 1}
    last = kp.describe_topic_partitions(
        ["dtp-b", "dtp-a", "dtp-none"], response_partition_limit=2, cursor=rest["next_cursor"]
    )
    assert [
        (t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
        for t in last["topics"]
    ] == [("dtp-b", 0, [1]), ("dtp-none", 3, [])]  # unknown: UNKNOWN_TOPIC_OR_PARTITION
    assert last["next_cursor"] is None
    p = rest["topics"][0]["partitions"][0]
    assert (p["leader_id"], p["replica_nodes"], p["isr_nodes"]) == (0, [0], [0])
    # no names: what Metadata for all topics lists (every stream's), paged the same way
    wire.cluster.create_stream("/dtp/other")
    wire.cluster.create_topic("/dtp/other:x", partitions=2)
    seen, cursor = [], None
    while True:
        page = kp.describe_topic_partitions([], response_partition_limit=3, cursor=cursor)
        seen += [(t["name"], p["partition_index"]) for t in page["topics"] for p in t["partitions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    every = [(name, p) for name, _, count in wire.server.broker.listing() for p in range(count)]
    assert seen == every
    assert {("dtp-a", 2), ("dtp.other..x", 1)} <= set(seen)


def test_with_sasl_log_dirs_are_an_administrators_and_offset_delete_needs_delete_perm(
    tmp_path,
):
    bob = ("bob", "a long secret of bob")
    with Cluster.open(tmp_path / "c") as cluster:
        cluster.add_user(*bob)
        cluster.create_stream("/kafka", consume_perm="p")
        cluster.create_topic("/kafka:t", 1)
        owner = Consumer(cluster, group_id="theirs", enable_auto_commit=False)
        owner.commit({TopicPartition("/kafka:t", 0): 0})
        owner.close()
        with KafkaServer(cluster, listen=("127.0.0.1", 0), sasl=True) as server:
            client = GroupClient(server.address, *bob)
            try:
                dirs = client.call(DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, 4)
                Topic = OffsetDeleteRequest.OffsetDeleteRequestTopic
                deleted = client.call(
                    OffsetDeleteRequest(
                        group_id="theirs",
                        topics=[
                            Topic(name="t", partitions=[Topic.OffsetDeleteRequestPartition(0)])
                        ],
                    ),
                    OffsetDeleteResponse,
                    0,
                )
            finally:
                client.close()
        assert (dirs.error_code, dirs.results) == (31, [])  # CLUSTER_AUTHORIZATION_FAILED
        assert deleted.error_code == 30  # GROUP_AUTHORIZATION_FAILED
        assert [p.committed for p in cluster.group("theirs").partitions] == [0]
