"""ApiVersions, Metadata, DescribeCluster and DescribeTopicPartitions: what the node serves,
the one-node cluster, and which topics and partitions it leads."""

from __future__ import annotations

import uuid

from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)

from engine import errors
from engine.wire import codes
from engine.wire.broker import NODE_ID, Broker
from engine.wire.connection import Session
from engine.wire.registry import APIS, api


def api_versions_list(version: int) -> list[ApiVersionsResponse.ApiVersion]:
    return [
        ApiVersionsResponse.ApiVersion(
            api_key=a.key, min_version=a.min_version, max_version=a.max_version, version=version
        )
        for a in sorted(APIS.values(), key=lambda a: a.key)
    ]


@api(ApiVersionsRequest, ApiVersionsResponse, (0, 4))
def api_versions(
    session: Session, request: ApiVersionsRequest, version: int
) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=codes.NONE, api_keys=api_versions_list(version), throttle_time_ms=0
    )


# up to v9 (flexible, Kafka 2.4's): v10 and later add topic ids, which the engine has not
@api(MetadataRequest, MetadataResponse, (0, 9))
def metadata(session: Session, request: MetadataRequest, version: int) -> MetadataResponse:
    broker = session.broker
    R = MetadataResponse
    if request.topics is None or (version == 0 and not request.topics):
        # every stream's topics that have a Kafka-legal name, at most max_listed_topics
        answers = [(name, codes.NONE, count) for name, _, count in broker.listing()]
    else:
        auto_create = version < 4 or bool(request.allow_auto_topic_creation)
        if auto_create:
            _create_together(broker, [t.name or "" for t in request.topics])
        answers = [  # as the client named them (a name up to v9)
            (t.name or "", *_describe(broker, t.name or "", None, auto_create))
            for t in request.topics
        ]
    topics = []
    for name, error, partitions in answers:
        topics.append(
            R.MetadataResponseTopic(
                error_code=error,
                name=name,
                is_internal=False,
                partitions=[
                    R.MetadataResponseTopic.MetadataResponsePartition(
                        error_code=codes.NONE,
                        partition_index=p,
                        leader_id=NODE_ID,
                        leader_epoch=0,
                        replica_nodes=[NODE_ID],
                        isr_nodes=[NODE_ID],
                        offline_replicas=[],
                    )
                    for p in range(partitions)
                ],
                # "not asked for" (bit 31, INT32_MIN), as Kafka says it
                authorized_operations=None,  # type: ignore[arg-type]  # the stub wants set[int], the codec takes None too
            )
        )
    return R(
        throttle_time_ms=0,
        brokers=[
            R.MetadataResponseBroker(node_id=NODE_ID, host=broker.host, port=broker.port, rack=None)
        ],
        cluster_id=broker.cluster.id,
        controller_id=NODE_ID,
        topics=topics,
        authorized_operations=None,  # type: ignore[arg-type]  # None too, as above
    )


def _create_together(broker: Broker, wire_names: list[str]) -> None:
    """Create the topics a Metadata request names that do not exist, where their streams
    auto-create them, in one catalog transaction per stream; `_describe` then finds them
    (and answers, one by one, for the names this could not create)."""
    fulls = []
    for name in wire_names:
        try:
            fulls.append(broker.full_name(name))
        except errors.PartitionletError:
            continue  # a bad name: `_describe` answers it
    if len(fulls) > 1:  # one name: `_describe` creates it as well
        try:
            broker.cluster.auto_create_topics(fulls)
        except errors.PartitionletError:
            pass  # `_describe` meets the same problem per topic and answers it


def _describe(broker: Broker, name: str, full: str | None, auto_create: bool) -> tuple[int, int]:
    """(error code, partition count) of a topic, created first where the client asks for
    it and its stream's `auto_create` allows it."""
    cluster = broker.cluster
    try:
        full = full or broker.full_name(name)
        try:
            return codes.NONE, cluster.partition_count(full)
        except errors.UnknownTopic:
            if not auto_create:
                raise
            stream = full.rpartition(":")[0]
            if not cluster.stream(stream).policies.get("auto_create"):
                raise
            try:
                return codes.NONE, len(cluster.create_topic(full).partitions)
            except errors.TopicExists:
                return codes.NONE, cluster.partition_count(full)
    except errors.PartitionletError as exc:
        return codes.of(exc), 0


# v0 to v2 (flexible): the one node; v1 may ask for controllers, which a one-node cluster
# answers with the same node (Kafka's combined mode)
@api(DescribeClusterRequest, DescribeClusterResponse, (0, 2))
def describe_cluster(
    session: Session, request: DescribeClusterRequest, version: int
) -> DescribeClusterResponse:
    broker = session.broker
    R = DescribeClusterResponse
    return R(
        throttle_time_ms=0,
        error_code=codes.NONE,
        error_message=None,
        endpoint_type=request.endpoint_type if version >= 1 else 1,
        cluster_id=broker.cluster.id,
        controller_id=NODE_ID,
        brokers=[
            R.DescribeClusterBroker(
                broker_id=NODE_ID, host=broker.host, port=broker.port, rack=None, is_fenced=False
            )
        ],
        authorized_operations=None,  # type: ignore[arg-type]  # INT32_MIN, "not asked for", as in Metadata
    )


# Kafka's default and largest ResponsePartitionLimit
_PARTITION_LIMIT = 2000
_NO_TOPIC_ID = uuid.UUID(int=0)  # the engine's topics have no ids: Kafka's ZERO_UUID
_NOT_ASKED = -(2**31)  # topic_authorized_operations when not asked for


# v0 (flexible), KIP-966: Metadata's topic answer, paged by a cursor
@api(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, (0, 0))
def describe_topic_partitions(
    session: Session, request: DescribeTopicPartitionsRequest, version: int
) -> DescribeTopicPartitionsResponse:
    """The topics asked for (those Metadata for all topics lists when none is named), from
    the cursor on, with at most ResponsePartitionLimit partitions in all; NextCursor names
    the first partition left out, as Kafka pages them."""
    broker = session.broker
    R = DescribeTopicPartitionsResponse
    T = R.DescribeTopicPartitionsResponseTopic
    limit = request.response_partition_limit
    limit = limit if 0 < limit <= _PARTITION_LIMIT else _PARTITION_LIMIT
    cursor = request.cursor
    first, first_partition = (cursor.topic_name, cursor.partition_index) if cursor else ("", 0)
    listing = not request.topics
    if listing:  # what Metadata for all topics lists, from the cursor's on, a page at most
        after = None
        if first:
            try:
                after = broker.full_name(first)
            except errors.PartitionletError:
                first = ""  # no topic: from the start
        names = [first] if first else []  # `after` leaves the cursor's topic out
        names += [name for name, _, _ in broker.listing(after=after, limit=limit + 1)]
    else:
        names = sorted({t.name for t in request.topics if t.name >= first})
    topics = []
    next_cursor = None
    left = limit
    for name in names:
        error, count = _describe(broker, name, None, False)
        if error != codes.NONE:
            if not listing:  # a topic asked for by name is answered, with its error
                topics.append(
                    T(error_code=error, name=name, topic_id=_NO_TOPIC_ID, is_internal=False,
                      partitions=[], topic_authorized_operations=_NOT_ASKED)
                )  # fmt: skip
            continue
        start = first_partition if name == first else 0
        if start >= count:
            continue
        if left == 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=start)
            break
        end = min(count, start + left)
        left -= end - start
        topics.append(
            T(
                error_code=codes.NONE,
                name=name,
                topic_id=_NO_TOPIC_ID,
                is_internal=False,
                partitions=[
                    T.DescribeTopicPartitionsResponsePartition(
                        error_code=codes.NONE,
                        partition_index=p,
                        leader_id=NODE_ID,
                        leader_epoch=0,
                        replica_nodes=[NODE_ID],
                        isr_nodes=[NODE_ID],
                        eligible_leader_replicas=[],
                        last_known_elr=[],
                        offline_replicas=[],
                    )
                    for p in range(start, end)
                ],
                topic_authorized_operations=_NOT_ASKED,
            )
        )
        if end < count:
            next_cursor = R.Cursor(topic_name=name, partition_index=end)
            break
    return R(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
