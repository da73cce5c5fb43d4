"""ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments and
ListConfigResources over the listener, from kafka-python's KafkaAdminClient: a one-node
cluster, as Kafka answers for one (no election needed, no reassignment in progress, the
one placement [0] kept), checked against the cluster itself."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP
from kafka import errors as kerrors
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)

from engine import Cluster
from engine.wire import KafkaServer
from tests.engine.wire.group_client import GroupClient

ELECTION_NOT_NEEDED = 84
UNKNOWN_TOPIC_OR_PARTITION = 3
CLUSTER_AUTHORIZATION_FAILED = 31
PREFERRED, UNCLEAN = 0, 1


@pytest.fixture(scope="module")
def kp(wire):
    wire.cluster.create_topic("/kafka:replicas", 3)
    admin = KafkaAdminClient(bootstrap_servers=wire.bootstrap)
    yield admin
    admin.close()


def _results(response) -> dict[str, list[tuple[int, int]]]:
    return {
        r.topic: [(p.partition_id, p.error_code) for p in r.partition_result]
        for r in response.replica_election_results
    }


def test_no_election_is_ever_needed(wire, kp):
    for kind in (PREFERRED, UNCLEAN):
        response = kp.elect_leaders(kind, {"replicas": [0, 1, 2]})
        assert response.error_code == 0
        assert _results(response) == {"replicas": [(p, ELECTION_NOT_NEEDED) for p in range(3)]}
    # every partition of every topic (kafka-python names them all): none needs one
    everything = kp.elect_leaders(PREFERRED)
    assert ("replicas", [(p, ELECTION_NOT_NEEDED) for p in range(3)]) in _results(
        everything
    ).items()
    assert {e for parts in _results(everything).values() for _, e in parts} == {ELECTION_NOT_NEEDED}
    # what is not there is UNKNOWN_TOPIC_OR_PARTITION, with its reason
    missing = kp.elect_leaders(PREFERRED, {"replicas": [3], "nope": [0]}, raise_errors=False)
    assert _results(missing) == {
        "replicas": [(3, UNKNOWN_TOPIC_OR_PARTITION)],
        "nope": [(0, UNKNOWN_TOPIC_OR_PARTITION)],
    }
    messages = [
        p.error_message for r in missing.replica_election_results for p in r.partition_result
    ]
    assert messages == ["topic replicas has no partition 3 (3 partitions)", "no topic nope"]
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        kp.elect_leaders(PREFERRED, {"nope": [0]})


def test_an_election_of_all_partitions_answers_each_topic_with_none(wire, kp):
    """Kafka's controller leaves out the partitions that need no election: every one."""
    client = GroupClient(wire.server.address)
    try:
        response = client.call(
            ElectLeadersRequest(election_type=PREFERRED, topic_partitions=None, timeout_ms=1000),
            ElectLeadersResponse,
            2,
        )
    finally:
        client.close()
    assert response.error_code == 0
    assert [r.topic for r in response.replica_election_results] == kp.list_topics()
    assert all(r.partition_result == [] for r in response.replica_election_results)


def test_no_reassignment_is_ever_in_progress(wire, kp):
    assert kp.list_partition_reassignments() == {}
    assert kp.list_partition_reassignments([KTP("replicas", 0)]) == {}
    assert kp.list_partition_reassignments({"replicas": [0, 1], "nope": [0]}) == {}


def test_a_move_to_node_0_is_kept_and_any_other_refused(wire, kp):
    tp0, tp1, tp2 = (KTP("replicas", p) for p in range(3))
    assert kp.alter_partition_reassignments({tp0: [0], tp1: [0]}) == {tp0: None, tp1: None}
    assert kp.alter_partition_reassignments({tp0: [1], tp1: [0, 0], tp2: [0, 1]}) == {
        tp: kerrors.InvalidReplicationAssignmentError for tp in (tp0, tp1, tp2)
    }
    assert kp.alter_partition_reassignments({tp0: None}) == {
        tp0: kerrors.NoReassignmentInProgressError
    }
    unknown = {KTP("replicas", 3): [0], KTP("nope", 0): [0], KTP("nope", 1): None}
    assert kp.alter_partition_reassignments(unknown) == {
        tp: kerrors.UnknownTopicOrPartitionError for tp in unknown
    }
    assert len(wire.cluster.topic("/kafka:replicas").partitions) == 3  # nothing moved
    assert kp.list_partition_reassignments() == {}


def test_an_invalid_assignment_says_why(wire, kp):
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    client = GroupClient(wire.server.address)
    try:
        response = client.call(
            AlterPartitionReassignmentsRequest(
                timeout_ms=1000,
                allow_replication_factor_change=False,
                topics=[
                    Topic(
                        name="replicas",
                        partitions=[Topic.ReassignablePartition(partition_index=0, replicas=[2])],
                    )
                ],
            ),
            AlterPartitionReassignmentsResponse,
            1,
        )
    finally:
        client.close()
    assert (response.error_code, response.allow_replication_factor_change) == (0, False)
    [answer] = response.responses[0].partitions
    assert answer.error_code == kerrors.InvalidReplicationAssignmentError.errno
    assert answer.error_message == (
        "replicas [2]: this cluster has one node, 0, holding the one copy of each partition "
        "(the only placement is [0])"
    )


def test_config_resources_are_the_broker_and_the_listed_topics(wire, kp):
    everything = kp.list_config_resources()
    assert set(everything) == {"broker", "topic"}
    assert everything["broker"] == ["0"]
    assert "replicas" in everything["topic"]
    assert set(everything["topic"]) == set(kp.list_topics())  # Metadata's listing
    assert kp.list_config_resources(["BROKER"]) == {"broker": ["0"]}
    assert kp.list_config_resources(["TOPIC"]) == {"topic": everything["topic"]}
    # types Kafka knows whose resources have no configs here
    assert kp.list_config_resources(["GROUP", "CLIENT_METRICS", "BROKER_LOGGER"]) == {}
    client = GroupClient(wire.server.address)
    try:  # v0: client metrics subscriptions only (none); a type Kafka does not know
        v0 = client.call(ListConfigResourcesRequest(), ListConfigResourcesResponse, 0)
        unknown = client.call(
            ListConfigResourcesRequest(resource_types=[2, 3]), ListConfigResourcesResponse, 1
        )
    finally:
        client.close()
    assert (v0.error_code, v0.config_resources) == (0, [])
    assert (unknown.error_code, unknown.config_resources) == (35, [])  # UNSUPPORTED_VERSION


def test_with_sasl_elections_and_reassignments_are_an_administrators(tmp_path):
    users = {"bob": "a long secret of bob", "root": "a long secret of root"}
    with Cluster.open(tmp_path / "c") as cluster:
        cluster.add_user("bob", users["bob"])
        cluster.add_user("root", users["root"], admin=True)
        cluster.create_stream("/kafka", consume_perm="p")
        cluster.create_topic("/kafka:t", 2)
        with KafkaServer(cluster, listen=("127.0.0.1", 0), sasl=True) as server:
            admins = {
                name: KafkaAdminClient(
                    bootstrap_servers="{}:{}".format(*server.address),
                    security_protocol="SASL_PLAINTEXT",
                    sasl_mechanism="PLAIN",
                    sasl_plain_username=name,
                    sasl_plain_password=password,
                )
                for name, password in users.items()
            }
            bob, root = admins["bob"], admins["root"]
            tp = KTP("t", 0)
            try:
                refused = bob.elect_leaders(PREFERRED, {"t": [0, 1]}, raise_errors=False)
                with pytest.raises(kerrors.ClusterAuthorizationFailedError):
                    bob.alter_partition_reassignments({tp: [0]})
                with pytest.raises(kerrors.ClusterAuthorizationFailedError):
                    bob.list_partition_reassignments()
                resources = bob.list_config_resources()  # open to all, as DescribeConfigs
                elected = root.elect_leaders(PREFERRED, {"t": [0, 1]})
                moved = root.alter_partition_reassignments({tp: [0]})
                listed = root.list_partition_reassignments()
            finally:
                for admin in admins.values():
                    admin.close()
    assert refused.error_code == CLUSTER_AUTHORIZATION_FAILED
    assert _results(refused) == {
        "t": [(0, CLUSTER_AUTHORIZATION_FAILED), (1, CLUSTER_AUTHORIZATION_FAILED)]
    }
    assert resources == {"broker": ["0"], "topic": ["t"]}
    assert _results(elected) == {"t": [(0, ELECTION_NOT_NEEDED), (1, ELECTION_NOT_NEEDED)]}
    assert (moved, listed) == ({tp: None}, {})
