"""ApiVersions and Metadata: what the node serves and which topics and partitions it leads."""

from __future__ import annotations

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
        wanted: list[tuple[str, str | None]] = [
            (broker.shown(full), full) for full in broker.default_topics()
        ]
        auto_create = False
    else:
        wanted = [(t.name or "", None) for t in request.topics]  # a name up to v9
        auto_create = version < 4 or bool(request.allow_auto_topic_creation)
    topics = []
    for name, full in wanted:
        error, partitions = _describe(broker, name, full, auto_create)
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


def _describe(broker: Broker, name: str, full: str | None, auto_create: bool) -> tuple[int, int]:
    """(error code, partition count) of a topic, created first where the client asks for
    it and its stream's `auto_create` allows it."""
    cluster = broker.cluster
    try:
        full = full or broker.full_name(name)
        try:
            return codes.NONE, len(cluster.topic(full).partitions)
        except errors.UnknownTopic:
            if not auto_create:
                raise
            stream = full.rpartition(":")[0]
            if not cluster.stream(stream).policies.get("auto_create"):
                raise
            try:
                return codes.NONE, len(cluster.create_topic(full).partitions)
            except errors.TopicExists:
                return codes.NONE, len(cluster.topic(full).partitions)
    except errors.PartitionletError as exc:
        return codes.of(exc), 0
