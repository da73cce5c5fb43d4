"""`KafkaAdminClient`: kafka-python's topic and group administration
(`kafka.admin.client`) on the engine's `Cluster`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from engine import errors as engine_errors
from engine import kafka_configs
from engine.client.consumer import Consumer
from engine.kafka import bootstrap
from engine.kafka.admin.config_resource import ConfigResource
from engine.kafka.admin.new_partitions import NewPartitions
from engine.kafka.admin.new_topic import NewTopic
from engine.kafka.config import configure
from engine.kafka.errors import (
    BrokerResponseError,
    GroupIdNotFoundError,
    IllegalStateError,
    InvalidPartitionsError,
    KafkaError,
    NoError,
    NonEmptyGroupError,
    TopicAlreadyExistsError,
    UnsupportedVersionError,
    translated,
)
from engine.kafka.names import TopicNames
from engine.kafka.structs import (
    GroupInformation,
    MemberAssignment,
    MemberInformation,
    MemberMetadata,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    OffsetSpec,
)
from engine.policies import MAX_PARTITIONS
from engine.records import TopicPartition

log = logging.getLogger(__name__)

# kafka-python's names of where a config's value comes from
_CONFIG_SOURCES = {
    kafka_configs.TOPIC: "DYNAMIC_TOPIC_CONFIG",
    kafka_configs.STREAM: "DYNAMIC_DEFAULT_BROKER_CONFIG",  # the stream's policy
    kafka_configs.DEFAULT: "DEFAULT_CONFIG",
}

__all__ = [
    "CreatePartitionsResponse",
    "CreateTopicsResponse",
    "DeleteTopicsResponse",
    "KafkaAdminClient",
]


# What the calls that change several topics return. kafka-python 3.0 returns a dict of the
# broker's answer ({'topics': [{'name', 'error_code', 'error_message', ...}]}), 2.0 the
# answer itself, read by attribute (`.topic_errors`, `.topic_error_codes`): these are the
# 3.0 dict with the 2.0 attributes, so that programs of either version read them.
class CreateTopicsResponse(dict[str, Any]):
    @property
    def topic_errors(self) -> list[tuple[str, int, str | None]]:
        return [(t["name"], t["error_code"], t["error_message"]) for t in self["topics"]]

    throttle_time_ms = 0


class DeleteTopicsResponse(dict[str, Any]):
    @property
    def topic_error_codes(self) -> list[tuple[str, int]]:
        return [(t["name"], t["error_code"]) for t in self["topics"]]

    throttle_time_ms = 0


class CreatePartitionsResponse(dict[str, Any]):
    @property
    def topic_errors(self) -> list[tuple[str, int, str | None]]:
        return [(t["name"], t["error_code"], t["error_message"]) for t in self["results"]]

    throttle_time_ms = 0


def _raise_first(errors_seen: list[KafkaError], response: Any, raise_errors: bool = True) -> None:
    if errors_seen and raise_errors:
        first = errors_seen[0]
        first.response = response
        raise first


def _key(name: Any) -> str:
    """A state or type as given ('Stable', 'PREPARING_REBALANCE', an enum) -> 'stable',
    'preparingrebalance'."""
    return str(getattr(name, "name", name)).replace("_", "").replace("-", "").lower()


def _new_topics(new_topics: Any) -> list[NewTopic]:
    """`create_topics`' argument in any of its forms, as `NewTopic`s."""
    if isinstance(new_topics, dict):
        return [
            NewTopic(
                name,
                spec.get("num_partitions", -1),
                spec.get("replication_factor", -1),
                spec.get("assignments"),
                spec.get("configs"),
            )
            for name, spec in new_topics.items()
        ]
    topics = [NewTopic(t) if isinstance(t, str) else t for t in new_topics]
    if not topics:
        raise ValueError("no topics given")
    return topics


def _error_entry(error: KafkaError) -> tuple[int, str]:
    return getattr(error, "errno", None) or -1, str(error.args[0]) if error.args else ""


class KafkaAdminClient:
    """Topic and group administration (kafka-python's `KafkaAdminClient`).

    Topic calls work on full names or, for plain names, on the default stream. The calls
    that change several topics try all of them and then raise the error of the first that
    failed (the error's `response` attribute holds the per-topic results), as a broker's
    answer would be turned into an exception by kafka-python.
    """

    def __init__(self, **configs: Any) -> None:
        config = configure("KafkaAdminClient", configs)
        self.config = config
        self._closed = True
        self._key, cluster = bootstrap.acquire(config["bootstrap_servers"])
        try:
            self._names = TopicNames(cluster, config.get("default_stream"))
        except BaseException:
            bootstrap.release(self._key, cluster)
            raise
        self._cluster = cluster
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            bootstrap.release(self._key, self._cluster)

    def __enter__(self) -> KafkaAdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("KafkaAdminClient is closed")

    # --- topics ---------------------------------------------------------------------------

    def create_topics(
        self,
        new_topics: Iterable[NewTopic | str] | dict[str, dict[str, Any]],
        timeout_ms: int | None = None,
        validate_only: bool = False,
        raise_errors: bool = True,
        wait_for_metadata: bool = False,
    ) -> CreateTopicsResponse:
        """Create the topics (with `validate_only`, only check that they could be).
        `new_topics` is a list of `NewTopic`s (2.0), of names, or a dict
        {name: {'num_partitions': n, ...}} (3.0). A created topic is usable at once, so
        `wait_for_metadata` has nothing to wait for."""
        self._check_open()
        if validate_only and wait_for_metadata:
            raise ValueError("validate_only and wait_for_metadata are mutually exclusive")
        topics = _new_topics(new_topics)
        entries: list[dict[str, Any]] = []
        failed: list[KafkaError] = []
        for new in topics:
            entry = {
                "name": new.name,
                "topic_id": None,
                "error_code": 0,
                "error_message": None,
                "num_partitions": -1,
                "replication_factor": -1,
            }
            try:
                self._create_topic(new, validate_only)
                with contextlib.suppress(engine_errors.PartitionletError):
                    if not validate_only:
                        info = self._cluster.topic(self._names.full(new.name))
                        entry["num_partitions"] = info.partition_count
                        entry["replication_factor"] = 1
            except KafkaError as exc:
                failed.append(exc)
                entry["error_code"], entry["error_message"] = _error_entry(exc)
            entries.append(entry)
        response = CreateTopicsResponse(topics=entries)
        _raise_first(failed, response, raise_errors)
        return response

    def _create_topic(self, new: NewTopic, validate_only: bool) -> None:
        count: int | None = new.num_partitions
        if (count is None or count == -1) and new.replica_assignments:
            count = len(new.replica_assignments)
        if count is None or count == -1:
            count = None  # the stream's default_partitions
        elif (
            isinstance(count, bool)
            or not isinstance(count, int)
            or not (1 <= count <= MAX_PARTITIONS)
        ):
            raise InvalidPartitionsError(
                f"num_partitions of {new.name!r} must be from 1 to {MAX_PARTITIONS} "
                f"(or -1 for the stream's default), got {count!r}"
            )
        with translated(InvalidPartition=InvalidPartitionsError):
            full = self._names.full(new.name)
            # the topic's own policies (InvalidPolicy: InvalidConfigurationError)
            overrides, ignored = kafka_configs.to_policies(new.topic_configs)
            if ignored:
                log.info("topic %s: configs with no meaning here: %s", new.name, ignored)
            if not validate_only:
                self._cluster.create_topic(full, count, overrides)
                return
            stream = self._cluster.stream(full.rpartition(":")[0])  # UnknownStream
            try:
                self._cluster.topic(full)
            except engine_errors.UnknownTopic:
                return
            raise TopicAlreadyExistsError(f"topic {full} exists already ({stream.path})")

    def delete_topics(
        self, topics: Iterable[str], timeout_ms: int | None = None, raise_errors: bool = True
    ) -> DeleteTopicsResponse:
        self._check_open()
        entries: list[dict[str, Any]] = []
        failed: list[KafkaError] = []
        for name in topics:
            entry = {"name": name, "topic_id": None, "error_code": 0, "error_message": None}
            try:
                with translated():
                    self._cluster.delete_topic(self._names.full(name))
            except KafkaError as exc:
                failed.append(exc)
                entry["error_code"], entry["error_message"] = _error_entry(exc)
            entries.append(entry)
        response = DeleteTopicsResponse(topics=entries)
        _raise_first(failed, response, raise_errors)
        return response

    def list_topics(self) -> list[str]:
        """The topics of the default stream, by name."""
        self._check_open()
        with translated():
            return [self._names.show(full) for full in self._names.full_names_of_stream()]

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Metadata of the topics (all of the default stream when None), as kafka-python's
        dicts, with the keys of both 2.0 (`topic`, `partition`, `leader`, `replicas`,
        `isr`) and 3.0 (`name`, `partition_index`, `leader_id`, `replica_nodes`,
        `isr_nodes`); a topic that does not exist has `error_code` 3 and no partitions.
        The replica fields describe the one local copy (node 0)."""
        self._check_open()
        wanted = self.list_topics() if topics is None else list(topics)
        out = []
        for name in wanted:
            try:
                with translated():
                    info = self._cluster.topic(self._names.full(name))
            except KafkaError as exc:
                out.append(
                    {
                        "error_code": _error_entry(exc)[0],
                        "topic": name,
                        "name": name,
                        "topic_id": None,
                        "is_internal": False,
                        "partitions": [],
                        "topic_authorized_operations": None,
                    }
                )
                continue
            out.append(
                {
                    "error_code": 0,
                    "topic": name,
                    "name": name,
                    "topic_id": None,
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition": p.partition,
                            "partition_index": p.partition,
                            "leader": 0,
                            "leader_id": 0,
                            "leader_epoch": -1,
                            "replicas": [0],
                            "replica_nodes": [0],
                            "isr": [0],
                            "isr_nodes": [0],
                            "offline_replicas": [],
                        }
                        for p in info.partitions
                    ],
                    "topic_authorized_operations": None,
                }
            )
        return out

    def create_partitions(
        self,
        topic_partitions: dict[str, NewPartitions],
        timeout_ms: int | None = None,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> CreatePartitionsResponse:
        """Grow topics to `NewPartitions.total_count` partitions; as in Kafka, a count that
        is not larger than the current one raises `InvalidPartitionsError`."""
        self._check_open()
        results: list[dict[str, Any]] = []
        failed: list[KafkaError] = []
        for name, new in topic_partitions.items():
            total = getattr(new, "total_count", new)
            try:
                with translated(InvalidPartition=InvalidPartitionsError):
                    full = self._names.full(name)
                    current = self._cluster.topic(full).partition_count
                    if isinstance(total, bool) or not isinstance(total, int) or total <= current:
                        raise InvalidPartitionsError(
                            f"topic {name} has {current} partitions; the new total must be "
                            f"larger, got {total!r}"
                        )
                    if not validate_only:
                        self._cluster.add_partitions(full, total)
            except KafkaError as exc:
                failed.append(exc)
                code, message = _error_entry(exc)
                results.append({"name": name, "error_code": code, "error_message": message})
            else:
                results.append({"name": name, "error_code": 0, "error_message": None})
        response = CreatePartitionsResponse(results=results)
        _raise_first(failed, response, raise_errors)
        return response

    def describe_cluster(self) -> dict[str, Any]:
        self._check_open()
        # The keys of 2.0 (`node_id`, `error_code`, ...) and of 3.0 (`broker_id`,
        # `is_fenced`, `cluster_authorized_operations`) together.
        broker = {
            "node_id": 0,
            "broker_id": 0,
            "host": str(self._cluster.path),
            "port": 0,
            "rack": None,
            "is_fenced": False,
        }
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "cluster_id": self._cluster.id,
            "controller_id": 0,
            "brokers": [broker],
            "cluster_authorized_operations": None,
        }

    # --- consumer groups ------------------------------------------------------------------

    def list_consumer_groups(self, broker_ids: Any = None) -> list[tuple[str, str]]:
        """(group id, protocol type) of every group with members or committed offsets."""
        self._check_open()
        with translated():
            return [(g.group_id, "consumer") for g in self._cluster.groups()]

    def describe_consumer_groups(
        self,
        group_ids: Iterable[str],
        group_coordinator_id: Any = None,
        include_authorized_operations: bool = False,
    ) -> list[GroupInformation]:
        """A `GroupInformation` per group; a group that does not exist is "Dead", as Kafka
        describes it."""
        self._check_open()
        out = []
        for group_id in group_ids:
            try:
                with translated():
                    info = self._cluster.group(group_id)
            except GroupIdNotFoundError:
                out.append(GroupInformation(0, group_id, "Dead", "", "", [], None))
                continue
            members = []
            for m in info.members:
                by_topic: dict[str, list[int]] = {}
                for tp in m.assignment:
                    by_topic.setdefault(self._names.show(tp.topic), []).append(tp.partition)
                assignment = [(t, sorted(ps)) for t, ps in sorted(by_topic.items())]
                members.append(
                    MemberInformation(
                        m.member_id,
                        m.client_id,
                        m.host,
                        MemberMetadata(0, sorted(by_topic), b""),
                        MemberAssignment(0, assignment, b""),
                    )
                )
            out.append(
                GroupInformation(
                    0, info.group_id, info.state, "consumer", info.protocol, members, None
                )
            )
        return out

    def list_consumer_group_offsets(
        self,
        group_id: str,
        group_coordinator_id: Any = None,
        partitions: Iterable[TopicPartition] | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets; with `partitions`, those partitions only (offset
        -1 where nothing is committed)."""
        self._check_open()
        try:
            with translated():
                info = self._cluster.group(group_id)
            committed = {
                (p.topic, p.partition): OffsetAndMetadata(p.committed, p.metadata or "")
                for p in info.partitions
                if p.committed is not None
            }
        except GroupIdNotFoundError:
            committed = {}
        if partitions is None:
            return {TopicPartition(self._names.show(t), p): o for (t, p), o in committed.items()}
        out = {}
        for tp in partitions:
            full = self._names.tp(tp)
            out[tp] = committed.get((full.topic, full.partition), OffsetAndMetadata(-1, ""))
        return out

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: dict[TopicPartition, Any], group_coordinator_id: Any = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Set the group's committed offsets; as in Kafka, only while the group has no
        live member (`NonEmptyGroupError` otherwise). Returns the offsets now committed."""
        self._check_open()
        with contextlib.suppress(GroupIdNotFoundError), translated():
            live = self._cluster.group(group_id).members
            if live:
                raise NonEmptyGroupError(
                    f"group {group_id!r} has {len(live)} live member(s); stop its consumers "
                    "before changing its offsets"
                )
        rows = self._names.engine_offsets(offsets)
        with translated():
            # An engine consumer of the group that commits and leaves: the engine's one
            # way to write a group's offsets, with its checks and permissions.
            consumer = Consumer(self._cluster, group_id=group_id, enable_auto_commit=False)
            try:
                consumer.commit(dict(rows))
            finally:
                consumer.close(autocommit=False)
        return {
            tp: OffsetAndMetadata(row.offset, row.metadata)
            for tp, (_, row) in zip(offsets, rows, strict=True)
        }

    def _unsupported(self, what: str, instead: str) -> BrokerResponseError:
        return UnsupportedVersionError(f"{what} is not supported by Partitionlet: {instead}")

    def describe_configs(
        self,
        config_resources: Iterable[ConfigResource],
        include_synonyms: bool = False,
        config_filter: Any = "modified",
    ) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
        """kafka-python 3.0's {'topic': {name: {config: {'value', 'read_only',
        'config_source', ...}}}}: a topic's configs are its policies (its own overrides over
        its stream's) under Kafka's names, every config Kafka lists, as the listener's
        DescribeConfigs answers them (`engine.kafka_configs.topic_configs`). `config_filter`
        'modified' (the default) keeps the configs that differ from the defaults, 'all'
        every one, 'default' the others. A `ConfigResource` with `configs` names the
        configs wanted. Brokers have none."""
        self._check_open()
        wanted_filter = str(getattr(config_filter, "name", config_filter)).lower()
        if wanted_filter not in ("all", "modified", "default", "dynamic", "static"):
            raise ValueError(f"unknown config_filter {config_filter!r}")
        out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        for resource in config_resources:
            kind = resource.resource_type.name.lower()
            found = out.setdefault(kind, {})
            if kind != "topic":
                found[resource.name] = {}
                continue
            with translated():
                full = self._names.full(resource.name)
                # UnknownTopic; the listener's DescribeConfigs answers from the same function
                found_configs = kafka_configs.topic_configs(self._cluster, full, resource.configs)
            configs = {}
            for config in found_configs.entries:
                is_default = config.is_default
                if wanted_filter == "modified" and is_default:
                    continue
                if wanted_filter == "default" and not is_default:
                    continue
                if wanted_filter == "static":
                    continue
                configs[config.name] = {
                    "value": config.value,
                    "read_only": True,  # alter them with Cluster.edit_topic or over plet serve
                    "config_source": _CONFIG_SOURCES[config.source],
                    "is_sensitive": False,
                    "synonyms": [],
                    "config_type": config.kafka_type,
                    "documentation": config.documentation,
                }
            found[resource.name] = configs
        return out

    def alter_configs(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported(
            "alter_configs",
            "change a topic's policies with Cluster.edit_topic (plet topic edit), or its "
            "configs over plet serve's Kafka listener",
        )

    def delete_consumer_groups(
        self, group_ids: Iterable[str], group_coordinator_id: Any = None
    ) -> dict[str, str]:
        """Delete each group's committed offsets and state (`Cluster.delete_group`), as
        kafka-python 3.0 answers: {group_id: "OK" or the error's class name}; a group with
        live members is `NonEmptyGroupError`, an unknown one `GroupIdNotFoundError`."""
        self._check_open()
        if isinstance(group_ids, str):
            group_ids = [group_ids]
        results: dict[str, str] = {}
        for group_id in group_ids:
            try:
                with translated(IllegalState=NonEmptyGroupError, UnknownGroup=GroupIdNotFoundError):
                    self._cluster.delete_group(group_id)
                results[group_id] = "OK"
            except KafkaError as exc:
                results[group_id] = type(exc).__name__
        return results

    delete_groups = delete_consumer_groups  # kafka-python 3.0's name

    # --- kafka-python 3.0's group calls (dict results) ----------------------------------

    def list_groups(
        self, broker_ids: Any = None, states_filter: Any = None, types_filter: Any = None
    ) -> list[dict[str, str]]:
        """Every group with members or committed offsets, as 3.0's dicts (`group_id`,
        `protocol_type`, `group_state`, `group_type`); `states_filter` keeps the groups in
        those states ('Stable', 'Empty', ..., any case), `types_filter` those of those
        types (every group here is a 'classic' one)."""
        self._check_open()
        states = None if states_filter is None else {_key(s) for s in states_filter}
        types = None if types_filter is None else {_key(t) for t in types_filter}
        if types is not None and not types & {"classic", "consumer"}:
            return []
        with translated():
            groups = self._cluster.groups()
        return [
            {
                "group_id": g.group_id,
                "protocol_type": "consumer",
                "group_state": g.state,
                "group_type": "classic",
            }
            for g in groups
            if states is None or _key(g.state) in states
        ]

    def describe_groups(
        self,
        group_ids: Iterable[str],
        group_coordinator_id: Any = None,
        include_authorized_operations: bool = False,
    ) -> dict[str, dict[str, Any]]:
        """{group_id: description} as 3.0 gives it: `error` (None), `group_id`,
        `group_state` ('Dead' for a group that does not exist), `protocol_type`,
        `protocol_data` (the assignor), `members` (with `member_metadata` and
        `member_assignment` decoded), `authorized_operations`."""
        out = {}
        for info in self.describe_consumer_groups(group_ids):
            members = [
                {
                    "member_id": m.member_id,
                    "group_instance_id": None,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": {
                        "version": 0,
                        "topics": list(m.member_metadata.subscription),
                        "user_data": None,
                        "owned_partitions": [],
                    },
                    "member_assignment": {
                        "version": 0,
                        "assigned_partitions": [
                            {"topic": t, "partitions": list(ps)}
                            for t, ps in m.member_assignment.assignment
                        ],
                        "user_data": None,
                    },
                }
                for m in info.members
            ]
            out[info.group] = {
                "error": None,
                "group_id": info.group,
                "group_state": info.state,
                "protocol_type": info.protocol_type,
                "protocol_data": info.protocol,
                "members": members,
                "authorized_operations": None,
            }
        return out

    def list_group_offsets(
        self, group_specs: str | list[str] | dict[str, Any]
    ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """{group_id: {TopicPartition: OffsetAndMetadata}} for a group id, a list of them,
        or a dict {group_id: partitions or None}."""
        if isinstance(group_specs, str):
            group_specs = {group_specs: None}
        elif not isinstance(group_specs, dict):
            group_specs = {group_id: None for group_id in group_specs}
        if not group_specs:
            raise ValueError("no group given")
        return {
            group_id: self.list_consumer_group_offsets(group_id, partitions=partitions)
            for group_id, partitions in group_specs.items()
        }

    def alter_group_offsets(
        self, group_id: str, offsets: dict[TopicPartition, Any], group_coordinator_id: Any = None
    ) -> dict[TopicPartition, type[KafkaError]]:
        """Set committed offsets while the group has no live member; 3.0's answer: the
        error class per partition (`NoError`)."""
        if not offsets:
            return {}
        self.alter_consumer_group_offsets(group_id, offsets)
        return {tp: NoError for tp in offsets}

    def list_partition_offsets(
        self,
        topic_partition_specs: dict[TopicPartition, Any],
        isolation_level: Any = None,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Per partition, the offset an `OffsetSpec` (EARLIEST, LATEST) or a time in ms
        (an int >= 0 or `OffsetTimestamp`) names, as `OffsetAndTimestamp` (timestamp -1
        for the specs; offset -1 when no message is that recent)."""
        self._check_open()
        given = dict(topic_partition_specs)
        fulls = {tp: self._names.tp(tp) for tp in given}
        by_time = {tp: int(v) for tp, v in given.items() if int(v) >= 0}
        for v in given.values():
            if int(v) < 0 and int(v) not in (OffsetSpec.EARLIEST, OffsetSpec.LATEST):
                raise UnsupportedVersionError(f"{OffsetSpec(int(v)).name} is not supported here")
        with translated():
            consumer = Consumer(self._cluster, enable_auto_commit=False)
            try:
                starts = consumer.beginning_offsets(list(fulls.values()))
                ends = consumer.end_offsets(list(fulls.values()))
                found = consumer.offsets_for_times({fulls[tp]: ms for tp, ms in by_time.items()})
            finally:
                consumer.close(autocommit=False)
        out = {}
        for tp, v in given.items():
            full = fulls[tp]
            if tp in by_time:
                hit = found.get(full)
                out[tp] = (
                    OffsetAndTimestamp(-1, -1)
                    if hit is None
                    else OffsetAndTimestamp(hit.offset, hit.timestamp)
                )
            elif int(v) == OffsetSpec.EARLIEST:
                out[tp] = OffsetAndTimestamp(starts[full], -1)
            else:
                out[tp] = OffsetAndTimestamp(ends[full], -1)
        return out
