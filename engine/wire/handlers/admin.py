"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs and DeleteRecords.

Topics are the engine's (`Cluster.create_topic`, `delete_topic`, `add_partitions`), named as
everywhere on the listener (`/s:t`, or a plain name in the default stream), with the ACEs of
their stream (topic_perm). A topic's configs are its stream's policies under Kafka's names
(engine.kafka.configs): a create may name them only with the values the stream has.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)

from engine import errors
from engine.kafka.configs import BY_NAME, topic_configs
from engine.policies import MAX_PARTITIONS
from engine.records import PartitionInfo, StreamInfo
from engine.wire import codes
from engine.wire.broker import NODE_ID, Broker
from engine.wire.connection import Session
from engine.wire.registry import api

log = logging.getLogger(__name__)

# Kafka's codes met only here
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_ID = 100

# DescribeConfigs' resource types, config sources and config types (Kafka's numbers)
_TOPIC, _BROKER = 2, 4
_DYNAMIC_TOPIC_CONFIG, _STATIC_BROKER_CONFIG, _DEFAULT_CONFIG = 1, 4, 5
_CONFIG_TYPES = {"STRING": 2, "INT": 3, "LONG": 5, "LIST": 7}


class _Refused(Exception):
    """A per-topic answer other than success: a Kafka error code and its message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _code(exc: errors.PartitionletError) -> int:
    if isinstance(exc, errors.TopicExists):
        return TOPIC_ALREADY_EXISTS
    if isinstance(exc, errors.InvalidPartition):
        return INVALID_PARTITIONS  # a count out of range, or fewer than now
    return codes.of(exc)


def _duplicates(names: list[str]) -> set[str]:
    return {n for n, c in Counter(names).items() if c > 1}


def _stream_of(full: str) -> str:
    return full.rpartition(":")[0]


# --- CreateTopics ---------------------------------------------------------------------------


# v2 to v7 (flexible from v5, the answer carrying the topic's partitions and configs);
# librdkafka asks for up to v4, kafka-python 3 for the newest
@api(CreateTopicsRequest, CreateTopicsResponse, (2, 7))
def create_topics(
    session: Session, request: CreateTopicsRequest, version: int
) -> CreateTopicsResponse:
    broker = session.broker
    R = CreateTopicsResponse.CreatableTopicResult
    twice = _duplicates([t.name for t in request.topics])
    results = []
    for topic in request.topics:
        result = R(name=topic.name, error_code=codes.NONE, error_message=None)
        try:
            if topic.name in twice:
                raise _Refused(codes.INVALID_REQUEST, f"topic {topic.name} is named twice")
            full, count = _create(broker, topic, bool(request.validate_only))
        except _Refused as exc:
            result.error_code, result.error_message = exc.code, str(exc)
        except errors.PartitionletError as exc:
            result.error_code, result.error_message = _code(exc), str(exc)
        else:
            if version >= 5:
                result.num_partitions = count
                result.replication_factor = 1
                result.configs = [
                    R.CreatableTopicConfigs(
                        name=c.name,
                        value=c.value,
                        read_only=True,
                        config_source=_DEFAULT_CONFIG if c.is_default else _DYNAMIC_TOPIC_CONFIG,
                        is_sensitive=False,
                    )
                    for c in topic_configs(broker.cluster.stream(_stream_of(full)).policies)
                ]
        results.append(result)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _create(
    broker: Broker, topic: CreateTopicsRequest.CreatableTopic, validate_only: bool
) -> tuple[str, int]:
    """Create (or with `validate_only`, check) one topic; (full name, partition count)."""
    cluster = broker.cluster
    count = topic.num_partitions
    assignments = topic.assignments or []
    if assignments:
        # Kafka: an explicit assignment comes without a count and a replication factor
        if count != -1 or topic.replication_factor != -1:
            raise _Refused(
                codes.INVALID_REQUEST,
                "give either assignments or num_partitions and replication_factor",
            )
        for a in assignments:
            if list(a.broker_ids) != [NODE_ID]:
                raise _Refused(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"partition {a.partition_index} assigned to brokers {list(a.broker_ids)}: "
                    f"this cluster has one node, {NODE_ID}, holding the one copy",
                )
        if sorted(a.partition_index for a in assignments) != list(range(len(assignments))):
            raise _Refused(
                INVALID_REPLICA_ASSIGNMENT, "assigned partitions must be 0 to N-1, each once"
            )
        count = len(assignments)
    elif topic.replication_factor not in (1, -1):
        raise _Refused(
            INVALID_REPLICATION_FACTOR,
            f"replication factor {topic.replication_factor}: this cluster keeps one copy of "
            "each partition (use 1, or -1 for the default)",
        )
    if count != -1 and not 1 <= count <= MAX_PARTITIONS:
        raise _Refused(
            INVALID_PARTITIONS,
            f"num_partitions must be from 1 to {MAX_PARTITIONS} (or -1 for the stream's "
            f"default_partitions), got {count}",
        )
    full = broker.full_name(topic.name)
    stream = cluster.stream(_stream_of(full))
    _check_configs(topic.configs or [], stream)
    partitions = stream.policies["default_partitions"] if count == -1 else count
    if validate_only:
        cluster.authorize(stream, "topic_perm")
        try:
            cluster.topic(full)
        except errors.UnknownTopic:
            return full, partitions
        raise errors.TopicExists(f"topic {full} already exists")
    return full, len(cluster.create_topic(full, partitions).partitions)


def _check_configs(
    configs: list[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig], stream: StreamInfo
) -> None:
    """A topic config may be given with its stream's value only: configs are the stream's
    policies, so another value could not be honoured for one topic. Configs that have no
    policy (segment.bytes, ...) mean nothing to the engine and are ignored."""
    current = {c.name: c.value for c in topic_configs(stream.policies)}
    ignored = []
    for config in configs:
        if config.name not in BY_NAME:
            ignored.append(config.name)
            continue
        if config.value is not None and config.value != current[config.name]:
            policy = BY_NAME[config.name].policy
            raise _Refused(
                INVALID_CONFIG,
                f"{config.name}={config.value}: topic configs are the stream's policies, and "
                f"stream {stream.path} has {config.name}={current[config.name]} (its {policy} "
                f"policy); change it with plet stream edit, or create the topic in a stream "
                "with that policy",
            )
    if ignored:
        log.info("topic configs ignored (they have no stream policy): %s", ", ".join(ignored))


# --- DeleteTopics ---------------------------------------------------------------------------


# v1 to v6 (flexible from v4; v6 names topics by name or id, and the engine has no ids)
@api(DeleteTopicsRequest, DeleteTopicsResponse, (1, 6))
def delete_topics(
    session: Session, request: DeleteTopicsRequest, version: int
) -> DeleteTopicsResponse:
    cluster = session.broker.cluster
    R = DeleteTopicsResponse.DeletableTopicResult
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        result = R(name=name, error_code=codes.NONE, error_message=None)
        if version >= 6:
            result.topic_id = topic_id  # type: ignore[assignment]  # None: the zero UUID
        try:
            if name is None:
                raise _Refused(UNKNOWN_TOPIC_ID, "topics have no ids here: name the topic")
            cluster.delete_topic(session.broker.full_name(name))
        except _Refused as exc:
            result.error_code, result.error_message = exc.code, str(exc)
        except errors.PartitionletError as exc:
            result.error_code, result.error_message = _code(exc), str(exc)
        if version < 5:
            result.error_message = None  # no such field before v5
        results.append(result)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


# --- CreatePartitions -----------------------------------------------------------------------


# v0 to v3 (flexible from v2)
@api(CreatePartitionsRequest, CreatePartitionsResponse, (0, 3))
def create_partitions(
    session: Session, request: CreatePartitionsRequest, version: int
) -> CreatePartitionsResponse:
    broker = session.broker
    R = CreatePartitionsResponse.CreatePartitionsTopicResult
    twice = _duplicates([t.name for t in request.topics])
    results = []
    for topic in request.topics:
        result = R(name=topic.name, error_code=codes.NONE, error_message=None)
        try:
            if topic.name in twice:
                raise _Refused(codes.INVALID_REQUEST, f"topic {topic.name} is named twice")
            _grow(broker, topic, bool(request.validate_only))
        except _Refused as exc:
            result.error_code, result.error_message = exc.code, str(exc)
        except errors.PartitionletError as exc:
            result.error_code, result.error_message = _code(exc), str(exc)
        results.append(result)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def _grow(
    broker: Broker, topic: CreatePartitionsRequest.CreatePartitionsTopic, validate_only: bool
) -> None:
    cluster = broker.cluster
    full = broker.full_name(topic.name)
    current = len(cluster.topic(full).partitions)
    if topic.count <= current:
        # Kafka refuses an equal count too: the request must add partitions
        raise _Refused(
            INVALID_PARTITIONS,
            f"topic {topic.name} has {current} partitions; the new count must be larger, "
            f"got {topic.count}",
        )
    if topic.count > MAX_PARTITIONS:
        raise _Refused(
            INVALID_PARTITIONS, f"at most {MAX_PARTITIONS} partitions, got {topic.count}"
        )
    for brokers in topic.assignments or []:
        if list(brokers.broker_ids) != [NODE_ID]:
            raise _Refused(
                INVALID_REPLICA_ASSIGNMENT,
                f"new partitions assigned to brokers {list(brokers.broker_ids)}: this cluster "
                f"has one node, {NODE_ID}, holding the one copy",
            )
    if topic.assignments is not None and len(topic.assignments) != topic.count - current:
        raise _Refused(
            INVALID_REPLICA_ASSIGNMENT,
            f"{len(topic.assignments)} assignments for {topic.count - current} new partitions",
        )
    if validate_only:
        cluster.authorize(_stream_of(full), "topic_perm", what="add partitions to topics of")
        return
    cluster.add_partitions(full, topic.count)


# --- DescribeConfigs ------------------------------------------------------------------------


# v1 to v4 (flexible from v4; v3 adds types and documentation)
@api(DescribeConfigsRequest, DescribeConfigsResponse, (1, 4))
def describe_configs(
    session: Session, request: DescribeConfigsRequest, version: int
) -> DescribeConfigsResponse:
    R = DescribeConfigsResponse.DescribeConfigsResult
    results = []
    for resource in request.resources:
        result = R(
            error_code=codes.NONE,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=[],
        )
        try:
            entries = _configs_of(session.broker, resource)
        except _Refused as exc:
            result.error_code, result.error_message = exc.code, str(exc)
        except errors.PartitionletError as exc:
            result.error_code, result.error_message = _code(exc), str(exc)
        else:
            result.configs = [_config_entry(request, version, *entry) for entry in entries]
        results.append(result)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _configs_of(
    broker: Broker, resource: DescribeConfigsRequest.DescribeConfigsResource
) -> list[tuple[str, str, int, str, str]]:
    """(name, value, source, Kafka type, documentation) of each config of a resource."""
    keys = resource.configuration_keys
    if resource.resource_type == _TOPIC:
        full = broker.full_name(resource.resource_name)
        broker.cluster.topic(full)  # UnknownTopic
        stream = broker.cluster.stream(_stream_of(full))
        return [
            (
                c.name,
                c.value,
                _DEFAULT_CONFIG if c.is_default else _DYNAMIC_TOPIC_CONFIG,
                c.kafka_type,
                c.documentation,
            )
            for c in topic_configs(stream.policies, keys)
        ]
    if resource.resource_type == _BROKER:
        if resource.resource_name not in ("", str(NODE_ID)):
            raise _Refused(
                codes.INVALID_REQUEST,
                f"no broker {resource.resource_name}: this cluster has one node, {NODE_ID}",
            )
        # What a broker can say of itself; the configs that matter are per stream (topic).
        static = [
            ("broker.id", str(NODE_ID), "INT", "The id of this node, the only one."),
            (
                "default.stream",
                broker.default_stream,
                "STRING",
                "The stream of topic names without a leading '/' (not a Kafka config).",
            ),
        ]
        return [
            (name, value, _STATIC_BROKER_CONFIG, kind, doc)
            for name, value, kind, doc in static
            if keys is None or name in keys
        ]
    raise _Refused(
        codes.INVALID_REQUEST,
        f"configs of resource type {resource.resource_type} are not served: topics (2) and "
        "brokers (4) are",
    )


def _config_entry(
    request: DescribeConfigsRequest,
    version: int,
    name: str,
    value: str,
    source: int,
    kind: str,
    doc: str,
) -> DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult:
    E = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    entry = E(
        name=name,
        value=value,
        # not alterable over the wire: they are the stream's policies (plet stream edit)
        read_only=True,
        config_source=source,
        is_sensitive=False,
        synonyms=[],
    )
    if request.include_synonyms:
        entry.synonyms = [E.DescribeConfigsSynonym(name=name, value=value, source=source)]
    if version >= 3:
        entry.config_type = _CONFIG_TYPES[kind]
        entry.documentation = doc if request.include_documentation else None
    return entry


# --- DeleteRecords --------------------------------------------------------------------------


# v0 to v2 (flexible from v2)
@api(DeleteRecordsRequest, DeleteRecordsResponse, (0, 2))
def delete_records(
    session: Session, request: DeleteRecordsRequest, version: int
) -> DeleteRecordsResponse:
    """The partition's log start moves to the offset given, as Kafka's
    (`Cluster.delete_records`: every reader starts there; storage goes a partitionlet at a
    time); the low watermark answered is that offset (-1: the high watermark)."""
    broker = session.broker
    R = DeleteRecordsResponse.DeleteRecordsTopicResult
    P = R.DeleteRecordsPartitionResult
    topics = []
    for topic in request.topics:
        parts = []
        try:
            full = broker.full_name(topic.name)
            info = broker.cluster.topic(full)
            broker.cluster.authorize(_stream_of(full), "topic_perm", what="delete records of")
            error = codes.NONE
        except errors.PartitionletError as exc:
            info, error = None, _code(exc)
        for p in topic.partitions:
            low, code = -1, error
            if info is not None:
                if not 0 <= p.partition_index < len(info.partitions):
                    code = codes.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    low, code = _delete_below(
                        broker, full, info.partitions[p.partition_index], p.offset
                    )
            parts.append(P(partition_index=p.partition_index, low_watermark=low, error_code=code))
        topics.append(R(name=topic.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _delete_below(
    broker: Broker, full: str, partition: PartitionInfo, offset: int
) -> tuple[int, int]:
    start, end = partition.log_start_offset, partition.high_watermark
    target = end if offset == -1 else offset  # -1: everything up to the high watermark
    if not 0 <= target <= end:
        return start, codes.OFFSET_OUT_OF_RANGE
    if target <= start:
        return start, codes.NONE
    try:
        return broker.cluster.delete_records(full, partition.partition, target), codes.NONE
    except errors.PartitionletError as exc:
        return start, codes.of(exc)
