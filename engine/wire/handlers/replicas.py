"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments: where a
partition's replicas are, on a cluster whose one node (NODE_ID) holds the one copy of every
partition. Each partition's leader is that node, also its preferred replica, so no election
is ever needed; the one placement is [NODE_ID], which a reassignment to it keeps; no
reassignment is ever in progress. Kafka's answers for a cluster in that state, so admin
tools (kafka-reassign-partitions, kafka-leader-election, kafka-python's admin) work.

These are cluster operations in Kafka (ALTER on the cluster, DESCRIBE for the list): an
administrator's here, as DescribeLogDirs; anyone else gets CLUSTER_AUTHORIZATION_FAILED
in the shape of Kafka's error response for the request."""

from __future__ import annotations

from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

from engine import errors
from engine.wire import codes
from engine.wire.broker import NODE_ID, Broker
from engine.wire.connection import Session
from engine.wire.registry import api

_PREFERRED, _UNCLEAN = 0, 1  # ElectLeaders' election types
_NOT_NEEDED = "Leader election not needed for topic partition."  # Kafka's message


def _refused(broker: Broker, what: str) -> tuple[int, str] | None:
    """(CLUSTER_AUTHORIZATION_FAILED, message) for a caller who is not an administrator."""
    if broker.cluster.is_administrator:
        return None
    return codes.CLUSTER_AUTHORIZATION_FAILED, f"{what} is a cluster administrator's"


def _missing(broker: Broker, name: str, partition: int, counts: dict[str, int | None]) -> str:
    """Why `name`'s `partition` is not there (UNKNOWN_TOPIC_OR_PARTITION), or "" when it is;
    `counts` keeps each topic's partition count for the request."""
    if name not in counts:
        try:
            counts[name] = len(broker.topic(name).partitions)
        except (errors.UnknownTopic, errors.UnknownStream, errors.InvalidName):
            counts[name] = None  # Kafka's controller: any name it does not hold
    count = counts[name]
    if count is None:
        return f"no topic {name}"
    if not 0 <= partition < count:
        return f"topic {name} has no partition {partition} ({count} partitions)"
    return ""


# --- ElectLeaders ---------------------------------------------------------------------------


# v0 to v2 (flexible from v2; v1 adds the election type and a top-level error)
@api(ElectLeadersRequest, ElectLeadersResponse, (0, 2))
def elect_leaders(
    session: Session, request: ElectLeadersRequest, version: int
) -> ElectLeadersResponse:
    """ELECTION_NOT_NEEDED for each partition named (preferred or unclean: it has its
    leader, the preferred one), UNKNOWN_TOPIC_OR_PARTITION for one that is not there; all
    partitions (null) answers each topic Metadata lists with no partition results, as
    Kafka's controller leaves out those that need no election."""
    broker = session.broker
    R = ElectLeadersResponse.ReplicaElectionResult
    P = R.PartitionResult
    refused = _refused(broker, "electing leaders")
    if refused is None and version >= 1 and request.election_type not in (_PREFERRED, _UNCLEAN):
        refused = codes.INVALID_REQUEST, f"Unknown election type {request.election_type}"
    if refused is not None:  # every partition named gets the error (getErrorResponse)
        code, message = refused
        return ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=code,
            replica_election_results=[
                R(
                    topic=t.topic,
                    partition_result=[
                        P(partition_id=p, error_code=code, error_message=message)
                        for p in t.partitions
                    ],
                )
                for t in request.topic_partitions or ()
            ],
        )
    if request.topic_partitions is None:
        results = [R(topic=name, partition_result=[]) for name, _, _ in broker.listing()]
    else:
        counts: dict[str, int | None] = {}
        results = []
        for t in request.topic_partitions:
            partitions = []
            for p in t.partitions:
                missing = _missing(broker, t.topic, p, counts)
                partitions.append(
                    P(
                        partition_id=p,
                        error_code=(
                            codes.UNKNOWN_TOPIC_OR_PARTITION
                            if missing
                            else codes.ELECTION_NOT_NEEDED
                        ),
                        error_message=missing or _NOT_NEEDED,
                    )
                )
            results.append(R(topic=t.topic, partition_result=partitions))
    return ElectLeadersResponse(
        throttle_time_ms=0, error_code=codes.NONE, replica_election_results=results
    )


# --- AlterPartitionReassignments ------------------------------------------------------------


# v0 to v1 (flexible; v1 adds allow_replication_factor_change, moot with one node)
@api(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, (0, 1))
def alter_partition_reassignments(
    session: Session, request: AlterPartitionReassignmentsRequest, version: int
) -> AlterPartitionReassignmentsResponse:
    """A move to [NODE_ID] succeeds and changes nothing (the partition is there already);
    any other replica list is INVALID_REPLICA_ASSIGNMENT, as Kafka answers a list naming a
    broker it does not have (or one twice); a cancel (null replicas)
    NO_REASSIGNMENT_IN_PROGRESS. An unknown topic or partition comes first, as in Kafka."""
    broker = session.broker
    R = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    P = R.ReassignablePartitionResponse
    refused = _refused(broker, "reassigning partitions")
    counts: dict[str, int | None] = {}
    code: int
    message: str | None
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if refused is not None:
                code, message = refused
            elif missing := _missing(broker, topic.name, p.partition_index, counts):
                code, message = codes.UNKNOWN_TOPIC_OR_PARTITION, missing
            elif p.replicas is None:
                code, message = (
                    codes.NO_REASSIGNMENT_IN_PROGRESS,
                    "no reassignment is in progress: partitions never move between nodes here",
                )
            elif list(p.replicas) != [NODE_ID]:
                code, message = (
                    codes.INVALID_REPLICA_ASSIGNMENT,
                    f"replicas {list(p.replicas)}: this cluster has one node, {NODE_ID}, "
                    f"holding the one copy of each partition (the only placement is "
                    f"[{NODE_ID}])",
                )
            else:
                code, message = codes.NONE, None  # where it is already
            partitions.append(
                P(partition_index=p.partition_index, error_code=code, error_message=message)
            )
        topics.append(R(name=topic.name, partitions=partitions))
    code, message = refused if refused is not None else (codes.NONE, None)
    response = AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=message, responses=topics
    )
    if version >= 1:
        response.allow_replication_factor_change = request.allow_replication_factor_change
    return response


# --- ListPartitionReassignments -------------------------------------------------------------


# v0 (flexible, the only one)
@api(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, (0, 0))
def list_partition_reassignments(
    session: Session, request: ListPartitionReassignmentsRequest, version: int
) -> ListPartitionReassignmentsResponse:
    """None in progress, ever: no topics, whichever were named (Kafka lists only the
    partitions being reassigned)."""
    refused = _refused(session.broker, "listing partition reassignments")
    if refused is None:
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=codes.NONE, error_message=None, topics=[]
        )
    code, message = refused  # the partitions named, without replicas (getErrorResponse)
    R = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    P = R.OngoingPartitionReassignment
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        topics=[
            R(
                name=t.name,
                partitions=[
                    P(partition_index=p, replicas=[], adding_replicas=[], removing_replicas=[])
                    for p in t.partition_indexes
                ],
            )
            for t in request.topics or ()
        ],
    )
