"""FindCoordinator, OffsetCommit, OffsetFetch and OffsetDelete: a group's committed offsets
are the engine's (what `cluster.group()`, `plet group describe` and the consoles show). Members
of a wire group (handlers/groups.py) commit with their generation and member id, checked
by the group coordinator."""

from __future__ import annotations

from kafka.protocol.consumer import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from engine import Consumer, OffsetAndMetadata, TopicPartition, errors
from engine.wire import codes
from engine.wire.broker import NODE_ID
from engine.wire.connection import Session
from engine.wire.handlers.groups import member_allowed
from engine.wire.registry import api


# up to v3 (flexible); v4 batches several keys in one request
@api(FindCoordinatorRequest, FindCoordinatorResponse, (0, 3))
def find_coordinator(
    session: Session, request: FindCoordinatorRequest, version: int
) -> FindCoordinatorResponse:
    broker = session.broker
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        error_message=None,
        node_id=NODE_ID,
        host=broker.host,
        port=broker.port,
    )


def _group_consumer(session: Session, group_id: str) -> Consumer:
    return Consumer(session.broker.cluster, group_id=group_id, enable_auto_commit=False)


def _check_commit(session: Session, request: OffsetCommitRequest, simple: bool) -> int:
    """A member's join_perm (handlers.groups.member_allowed), commit_perm (a new group
    becomes the caller's if it may consume a topic it commits); a simple commit (no
    member) into a group with live members anywhere, engine consumers or another
    listener's clients, is refused as Kafka refuses it."""
    cluster = session.broker.cluster
    topics = []
    for topic in request.topics:
        try:
            topics.append(session.broker.full_name(topic.name))
        except errors.PartitionletError:
            continue
    if not simple:  # a member's: its user must still hold join_perm
        denied = member_allowed(session, request.group_id, request.member_id or "")
        if denied != codes.NONE:
            return denied
    try:
        cluster.authorize_group(request.group_id, "commit_perm", topics=topics)
        if simple and cluster.group_kinds(request.group_id):
            return codes.UNKNOWN_MEMBER_ID
    except errors.AccessDenied:
        return codes.GROUP_AUTHORIZATION_FAILED
    except errors.PartitionletError as exc:
        return codes.of(exc)
    return codes.NONE


# from v2 to v8 (flexible from v8); v9 and later are for the new consumer protocol
@api(OffsetCommitRequest, OffsetCommitResponse, (2, 8))
def offset_commit(
    session: Session, request: OffsetCommitRequest, version: int
) -> OffsetCommitResponse:
    R = OffsetCommitResponse.OffsetCommitResponseTopic
    P = R.OffsetCommitResponsePartition
    topics = []
    consumer = None
    # a member of a wire group commits with its generation and member id: a stale one is
    # refused (it has lost its partitions); a simple commit (generation -1) is not checked
    cluster = session.broker.cluster
    generation, member_id = request.generation_id_or_member_epoch, request.member_id or ""
    # the group's permission first, as Kafka's authorizer, then the member
    group_error = codes.NONE
    if request.group_id:
        group_error = _check_commit(session, request, generation < 0 and not member_id)
    if group_error == codes.NONE:
        group_error = session.broker.groups.check_commit(
            request.group_id, generation, member_id, str(cluster.principal.user)
        )
    try:
        if request.group_id and group_error == codes.NONE:
            consumer = _group_consumer(session, request.group_id)
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                error, tp = session.broker.resolve(topic.name, p.partition_index)
                if group_error != codes.NONE:
                    error = group_error
                elif consumer is None:
                    error = codes.INVALID_REQUEST
                elif tp is not None:
                    meta = OffsetAndMetadata(p.committed_offset, p.committed_metadata or "")
                    try:
                        consumer.commit({tp: meta}, member_id=member_id or None)
                    except errors.PartitionletError as exc:
                        error = codes.of(exc)
                parts.append(P(partition_index=p.partition_index, error_code=error))
            topics.append(R(name=topic.name, partitions=parts))
    finally:
        if consumer is not None:
            consumer.close(autocommit=False)
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)


# from v1 to v7 (flexible from v6); v8 and later batch several groups in one request
@api(OffsetFetchRequest, OffsetFetchResponse, (1, 7))
def offset_fetch(
    session: Session, request: OffsetFetchRequest, version: int
) -> OffsetFetchResponse:
    R = OffsetFetchResponse.OffsetFetchResponseTopic
    P = R.OffsetFetchResponsePartition
    group_error = codes.NONE
    if request.group_id:
        try:  # fetching a group's offsets is a member's: join_perm
            session.broker.cluster.authorize_group(request.group_id, "join_perm")
        except errors.AccessDenied:
            group_error = codes.GROUP_AUTHORIZATION_FAILED
        except errors.PartitionletError as exc:
            group_error = codes.of(exc)
    if group_error != codes.NONE and version >= 2:
        return OffsetFetchResponse(throttle_time_ms=0, topics=[], error_code=group_error)
    consumer = (
        _group_consumer(session, request.group_id)
        if request.group_id and group_error == codes.NONE
        else None
    )
    try:
        wanted = request.topics
        if wanted is None and consumer is not None:
            # every committed partition of the group (v2+ "all topics")
            try:
                info = session.broker.cluster.group(request.group_id)
            except (errors.UnknownGroup, errors.AccessDenied):  # describe_perm shows them
                info = None
            committed: dict[str, list[int]] = {}
            for gp in info.partitions if info is not None else ():
                if gp.committed is not None:
                    name = session.broker.shown(gp.topic)
                    committed.setdefault(name, []).append(gp.partition)
            wanted = [
                OffsetFetchRequest.OffsetFetchRequestTopic(name=n, partition_indexes=ps)
                for n, ps in committed.items()
            ]
        topics = []
        for topic in wanted or ():
            parts = []
            for index in topic.partition_indexes:
                error, tp = session.broker.resolve(topic.name, index)
                error = group_error or error  # v1 has no error of the whole group
                offset, metadata = -1, ""
                if consumer is not None and tp is not None:
                    try:
                        found = consumer.committed(tp, metadata=True)
                    except errors.PartitionletError as exc:
                        error = codes.of(exc)
                    else:
                        if found is not None:
                            offset, metadata = found.offset, found.metadata or ""
                parts.append(
                    P(
                        partition_index=index,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        metadata=metadata,
                        error_code=error,
                    )
                )
            topics.append(R(name=topic.name, partitions=parts))
    finally:
        if consumer is not None:
            consumer.close(autocommit=False)
    return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=codes.NONE)


GROUP_SUBSCRIBED_TO_TOPIC = 86


# v0 (the only one)
@api(OffsetDeleteRequest, OffsetDeleteResponse, (0, 0))
def offset_delete(
    session: Session, request: OffsetDeleteRequest, version: int
) -> OffsetDeleteResponse:
    """The engine's `delete_group_offsets`, with the group's delete_perm and each topic's
    consume permission (Kafka's DELETE on the group, READ on the topic): a partition of a
    topic the group's live members read keeps its offset and gets GROUP_SUBSCRIBED_TO_TOPIC,
    as Kafka answers; an unknown group is GROUP_ID_NOT_FOUND."""
    broker = session.broker
    R = OffsetDeleteResponse.OffsetDeleteResponseTopic
    P = R.OffsetDeleteResponsePartition
    errors_of: dict[tuple[str, int], int] = {}
    wanted: dict[TopicPartition, tuple[str, int]] = {}
    for topic in request.topics:
        for p in topic.partitions:
            error, tp = broker.resolve(topic.name, p.partition_index)
            errors_of[(topic.name, p.partition_index)] = error
            if tp is not None:
                wanted[tp] = (topic.name, p.partition_index)
    group_error = codes.NONE
    if not request.group_id:
        group_error = codes.INVALID_GROUP_ID
    else:
        try:
            deleted = broker.cluster.delete_group_offsets(request.group_id, list(wanted))
        except errors.UnknownGroup:
            group_error = codes.GROUP_ID_NOT_FOUND
        except errors.PartitionletError as exc:
            group_error = codes.of(exc)
        else:
            for tp, done in deleted.items():
                if not done:
                    errors_of[wanted[tp]] = GROUP_SUBSCRIBED_TO_TOPIC
    if group_error != codes.NONE:
        return OffsetDeleteResponse(error_code=group_error, throttle_time_ms=0, topics=[])
    return OffsetDeleteResponse(
        error_code=codes.NONE,
        throttle_time_ms=0,
        topics=[
            R(
                name=topic.name,
                partitions=[
                    P(
                        partition_index=p.partition_index,
                        error_code=errors_of[(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )
