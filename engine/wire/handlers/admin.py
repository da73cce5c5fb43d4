"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, ListConfigResources and DeleteRecords.

Topics are the engine's (`Cluster.create_topic`, `delete_topic`, `add_partitions`), named as
everywhere on the listener (`/s:t`, or a plain name in the default stream), with the ACEs of
their stream (topic_perm). A topic's Kafka configs are its policies under Kafka's names
(engine.kafka_configs, the one table): CreateTopics and the alters set the topic's own
overrides of its stream's policies; configs with no meaning here are accepted.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
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
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)

from engine import errors, kafka_configs, policies
from engine.policies import MAX_PARTITIONS
from engine.records import PartitionInfo
from engine.wire import codes
from engine.wire.broker import NODE_ID, Broker
from engine.wire.connection import Session
from engine.wire.registry import api

log = logging.getLogger(__name__)

# Kafka's codes met only here
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_ID = 100

# Config resource types, config sources and config types (Kafka's numbers)
_TOPIC, _BROKER, _BROKER_LOGGER, _CLIENT_METRICS, _GROUP = 2, 4, 8, 16, 32
_SOURCES = {
    kafka_configs.TOPIC: 1,  # DYNAMIC_TOPIC_CONFIG
    kafka_configs.STREAM: 3,  # DYNAMIC_DEFAULT_BROKER_CONFIG: the stream's policy, edited live
    kafka_configs.STATIC: 4,  # STATIC_BROKER_CONFIG: the listener's own settings
    kafka_configs.DEFAULT: 5,  # DEFAULT_CONFIG
}
_CONFIG_TYPES = {
    "BOOLEAN": 1,
    "STRING": 2,
    "INT": 3,
    "SHORT": 4,
    "LONG": 5,
    "DOUBLE": 6,
    "LIST": 7,
}


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
    if isinstance(exc, errors.InvalidPolicy):
        return INVALID_CONFIG  # a topic config's bad value, with the reason
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
                        read_only=False,
                        config_source=_SOURCES[c.source],
                        is_sensitive=False,
                    )
                    for c in _created_configs(broker, full, topic)
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
                    codes.INVALID_REPLICA_ASSIGNMENT,
                    f"partition {a.partition_index} assigned to brokers {list(a.broker_ids)}: "
                    f"this cluster has one node, {NODE_ID}, holding the one copy",
                )
        if sorted(a.partition_index for a in assignments) != list(range(len(assignments))):
            raise _Refused(
                codes.INVALID_REPLICA_ASSIGNMENT, "assigned partitions must be 0 to N-1, each once"
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
    overrides = _create_overrides(topic)
    partitions = stream.policies["default_partitions"] if count == -1 else count
    if validate_only:
        cluster.authorize(stream, "topic_perm")
        policies.validate_overrides(overrides)
        try:
            cluster.topic(full)
        except errors.UnknownTopic:
            return full, partitions
        raise errors.TopicExists(f"topic {full} already exists")
    return full, len(cluster.create_topic(full, partitions, overrides).partitions)


def _create_overrides(topic: CreateTopicsRequest.CreatableTopic) -> dict[str, Any]:
    """The topic's policy overrides of its CreateTopics configs (engine.kafka_configs);
    `INVALID_CONFIG` with the reason for a bad one. Configs with no meaning here are
    accepted (and shown with Kafka's default)."""
    given = {c.name: c.value for c in topic.configs or [] if c.value is not None}
    overrides, ignored = kafka_configs.to_policies(given)  # InvalidPolicy: INVALID_CONFIG
    if ignored:
        log.info("topic %s: configs with no meaning here: %s", topic.name, ", ".join(ignored))
    return overrides


def _created_configs(
    broker: Broker, full: str, topic: CreateTopicsRequest.CreatableTopic
) -> list[kafka_configs.ConfigEntry]:
    """The configs CreateTopics v5+ answers: the topic's (for validate_only, its stream's
    with the request's overrides on top)."""
    try:
        return kafka_configs.topic_configs(broker.cluster, full).entries
    except errors.UnknownTopic:
        stream = broker.cluster.stream(_stream_of(full))
        overrides = _create_overrides(topic)
        return kafka_configs.describe(
            {**stream.policies, **overrides},
            overrides,
            stream.policies,
            context=kafka_configs.cluster_context(broker.cluster),
        )


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
                codes.INVALID_REPLICA_ASSIGNMENT,
                f"new partitions assigned to brokers {list(brokers.broker_ids)}: this cluster "
                f"has one node, {NODE_ID}, holding the one copy",
            )
    if topic.assignments is not None and len(topic.assignments) != topic.count - current:
        raise _Refused(
            codes.INVALID_REPLICA_ASSIGNMENT,
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
            result.configs = _configs_of(session.broker, request, version, resource)
        except _Refused as exc:
            result.error_code, result.error_message = exc.code, str(exc)
        except errors.PartitionletError as exc:
            result.error_code, result.error_message = _code(exc), str(exc)
        results.append(result)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


_Entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult


def _configs_of(
    broker: Broker,
    request: DescribeConfigsRequest,
    version: int,
    resource: DescribeConfigsRequest.DescribeConfigsResource,
) -> list[_Entry]:
    """The answer's entries of one resource: a topic's configs (engine.kafka_configs, the
    facade's too) or the broker's."""
    keys = resource.configuration_keys
    if resource.resource_type == _TOPIC:
        found = kafka_configs.topic_configs(
            broker.cluster, broker.full_name(resource.resource_name), keys
        )
        return [
            _entry(
                request,
                version,
                c.name,
                c.value,
                c.source,
                c.kafka_type,
                c.documentation,
                read_only=False,
                synonyms=[(s.name, s.value, s.source) for s in found.synonyms(c)],
            )
            for c in found.entries
        ]
    if resource.resource_type == _BROKER:
        _check_broker(resource.resource_name)
        broker.ensure_default_stream()
        configs = kafka_configs.broker_configs(
            broker.cluster,
            broker.cluster.stream(broker.default_stream).policies,
            node_id=NODE_ID,
            listeners=broker.listeners,
            advertised_listeners=broker.advertised_listeners,
            default_stream=broker.default_stream,
            names=keys,
        )
        return [
            _entry(
                request,
                version,
                c.name,
                c.value,
                c.source,
                c.kafka_type,
                c.documentation,
                read_only=True,
                synonyms=[(c.name, c.value, c.source)],
            )
            for c in configs
        ]
    raise _Refused(
        codes.INVALID_REQUEST,
        f"configs of resource type {resource.resource_type} are not served: topics (2) and "
        "brokers (4) are",
    )


def _check_broker(name: str) -> None:
    # "" is the cluster-wide default resource, which is this node's here
    if name not in ("", str(NODE_ID)):
        raise _Refused(
            codes.INVALID_REQUEST, f"no broker {name}: this cluster has one node, {NODE_ID}"
        )


def _entry(
    request: DescribeConfigsRequest,
    version: int,
    name: str,
    value: str | None,
    source: str,
    kind: str,
    doc: str,
    *,
    read_only: bool,
    synonyms: list[tuple[str, str | None, str]],
) -> _Entry:
    entry = _Entry(
        name=name,
        value=value,
        read_only=read_only,
        config_source=_SOURCES[source],
        is_sensitive=False,
        synonyms=[],
    )
    if request.include_synonyms:
        entry.synonyms = [
            _Entry.DescribeConfigsSynonym(name=n, value=v, source=_SOURCES[s])
            for n, v, s in synonyms
        ]
    if version >= 3:
        entry.config_type = _CONFIG_TYPES[kind]
        entry.documentation = doc if request.include_documentation else None
    return entry


# --- AlterConfigs and IncrementalAlterConfigs ----------------------------------------------


# v0 to v2 (flexible from v2)
@api(AlterConfigsRequest, AlterConfigsResponse, (0, 2))
def alter_configs(
    session: Session, request: AlterConfigsRequest, version: int
) -> AlterConfigsResponse:
    """A topic's configs replaced by those given, as Kafka does: overrides not given go."""

    def changes(resource: Any) -> list[tuple[str, int, str | None]]:
        # a null value sets nothing: the config goes, as every one not given
        return [
            (c.name, kafka_configs.SET, c.value) for c in resource.configs if c.value is not None
        ]

    results = _alter_resources(
        session, request, AlterConfigsResponse.AlterConfigsResourceResponse, changes, True
    )
    return AlterConfigsResponse(throttle_time_ms=0, responses=results)


# v0 to v1 (flexible from v1)
@api(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, (0, 1))
def incremental_alter_configs(
    session: Session, request: IncrementalAlterConfigsRequest, version: int
) -> IncrementalAlterConfigsResponse:
    """SET, DELETE, APPEND and SUBTRACT on a topic's configs, the others kept."""

    def changes(resource: Any) -> list[tuple[str, int, str | None]]:
        return [(c.name, c.config_operation, c.value) for c in resource.configs]

    R = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    results = _alter_resources(session, request, R, changes, False)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=results)


def _alter_resources(
    session: Session,
    request: Any,
    result: Any,
    changes: Callable[[Any], list[tuple[str, int, str | None]]],
    replace: bool,
) -> list[Any]:
    """One `result` (the response's resource class) per resource of either AlterConfigs."""
    results = []
    for resource in request.resources:
        code, message = _alter(
            session.broker,
            resource,
            changes(resource),
            replace=replace,
            validate_only=request.validate_only,
        )
        results.append(
            result(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return results


def _alter(
    broker: Broker,
    resource: Any,
    changes: list[tuple[str, int, str | None]],
    *,
    replace: bool,
    validate_only: bool,
) -> tuple[int, str | None]:
    """(error code, message) of altering one resource's configs."""
    try:
        if resource.resource_type == _BROKER:
            _check_broker(resource.resource_name)
            # Kafka's answer for configs it cannot update while running
            raise _Refused(
                codes.INVALID_REQUEST,
                "Cannot update these configs dynamically: "
                f"{', '.join(sorted({n for n, _, _ in changes})) or '(none)'}; the broker's "
                "configs are read-only here: topic-level defaults are the stream's policies "
                "(plet stream edit), a topic's own configs are altered on the topic",
            )
        if resource.resource_type != _TOPIC:
            raise _Refused(
                codes.INVALID_REQUEST,
                f"configs of resource type {resource.resource_type} cannot be altered: "
                "topics (2) can",
            )
        cluster = broker.cluster
        full = broker.full_name(resource.resource_name)
        current = kafka_configs.topic_configs(cluster, full)
        cluster.authorize(_stream_of(full), "topic_perm", what="alter the configs of topics of")
        edits, ignored = kafka_configs.alter(current, changes, replace=replace)
        if ignored:
            log.info("topic %s: configs with no meaning here: %s", full, ", ".join(ignored))
        if validate_only:
            policies.validate_overrides(edits, base=current.overrides)
        else:
            cluster.edit_topic(full, **edits)
    except _Refused as exc:
        return exc.code, str(exc)
    except errors.PartitionletError as exc:
        return _code(exc), str(exc)
    return codes.NONE, None


# --- ListConfigResources --------------------------------------------------------------------

# the resource types ListConfigResources v1 takes (Kafka's supportedResourceTypes)
_LISTABLE = {_TOPIC, _BROKER, _BROKER_LOGGER, _CLIENT_METRICS, _GROUP}


# v0 (KIP-714: client metrics subscriptions only) and v1 (KIP-1142: every resource type)
@api(ListConfigResourcesRequest, ListConfigResourcesResponse, (0, 1))
def list_config_resources(
    session: Session, request: ListConfigResourcesRequest, version: int
) -> ListConfigResourcesResponse:
    """The resources DescribeConfigs answers for: the broker (this node) and the topics
    Metadata for all topics lists (every stream's, bounded), in Kafka's order; broker
    loggers, client metrics subscriptions and group configs have none here. No types asked:
    all; a type Kafka does not know: UNSUPPORTED_VERSION, as Kafka answers. As DescribeConfigs
    and Metadata here, open to every user (names are not secret)."""
    R = ListConfigResourcesResponse.ConfigResource
    wanted = set(request.resource_types or _LISTABLE) if version >= 1 else {_CLIENT_METRICS}
    if not wanted <= _LISTABLE:
        return ListConfigResourcesResponse(
            throttle_time_ms=0, error_code=codes.UNSUPPORTED_VERSION, config_resources=[]
        )
    found: list[ListConfigResourcesResponse.ConfigResource] = []
    if _BROKER in wanted:
        found.append(R(resource_name=str(NODE_ID), resource_type=_BROKER))
    if _TOPIC in wanted:
        found += [
            R(resource_name=name, resource_type=_TOPIC) for name, _, _ in session.broker.listing()
        ]
    return ListConfigResourcesResponse(
        throttle_time_ms=0, error_code=codes.NONE, config_resources=found
    )


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
