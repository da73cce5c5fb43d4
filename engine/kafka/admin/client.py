"""`KafkaAdminClient`: kafka-python's topic and group administration
(`kafka.admin.client`) on the engine's `Cluster`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Any, NamedTuple

from engine import errors as engine_errors
from engine.client.consumer import Consumer
from engine.kafka import bootstrap
from engine.kafka.admin.new_partitions import NewPartitions
from engine.kafka.admin.new_topic import NewTopic
from engine.kafka.config import configure
from engine.kafka.errors import (
    GroupIdNotFoundError,
    IllegalStateError,
    InvalidPartitionsError,
    KafkaError,
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
)
from engine.policies import MAX_PARTITIONS
from engine.records import TopicPartition

log = logging.getLogger(__name__)

__all__ = [
    "CreatePartitionsResponse",
    "CreateTopicsResponse",
    "DeleteTopicsResponse",
    "KafkaAdminClient",
]


# What the calls that change several topics return: per topic (name, error code, message),
# as a broker's answer carries them.
class CreateTopicsResponse(NamedTuple):
    topic_errors: list[tuple[str, int, str | None]]
    throttle_time_ms: int = 0


class DeleteTopicsResponse(NamedTuple):
    topic_error_codes: list[tuple[str, int]]
    throttle_time_ms: int = 0


class CreatePartitionsResponse(NamedTuple):
    topic_errors: list[tuple[str, int, str | None]]
    throttle_time_ms: int = 0


def _raise_first(errors_seen: list[KafkaError], response: Any) -> None:
    if errors_seen:
        first = errors_seen[0]
        first.response = response  # type: ignore[attr-defined]
        raise first


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
        new_topics: Iterable[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> CreateTopicsResponse:
        """Create the topics (with `validate_only`, only check that they could be)."""
        self._check_open()
        results: list[tuple[str, int, str | None]] = []
        failed: list[KafkaError] = []
        for new in new_topics:
            try:
                self._create_topic(new, validate_only)
            except KafkaError as exc:
                failed.append(exc)
                results.append((new.name, *_error_entry(exc)))
            else:
                results.append((new.name, 0, None))
        response = CreateTopicsResponse(results)
        _raise_first(failed, response)
        return response

    def _create_topic(self, new: NewTopic, validate_only: bool) -> None:
        count = new.num_partitions
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
        if new.topic_configs:
            log.info(
                "topic configs of %s ignored (policies are set per stream): %s",
                new.name,
                new.topic_configs,
            )
        with translated(InvalidPartition=InvalidPartitionsError):
            full = self._names.full(new.name)
            if not validate_only:
                self._cluster.create_topic(full, count)
                return
            stream = self._cluster.stream(full.rpartition(":")[0])  # UnknownStream
            try:
                self._cluster.topic(full)
            except engine_errors.UnknownTopic:
                return
            raise TopicAlreadyExistsError(f"topic {full} exists already ({stream.path})")

    def delete_topics(
        self, topics: Iterable[str], timeout_ms: int | None = None
    ) -> DeleteTopicsResponse:
        self._check_open()
        results: list[tuple[str, int]] = []
        failed: list[KafkaError] = []
        for name in topics:
            try:
                with translated():
                    self._cluster.delete_topic(self._names.full(name))
            except KafkaError as exc:
                failed.append(exc)
                results.append((name, _error_entry(exc)[0]))
            else:
                results.append((name, 0))
        response = DeleteTopicsResponse(results)
        _raise_first(failed, response)
        return response

    def list_topics(self) -> list[str]:
        """The topics of the default stream, by name."""
        self._check_open()
        with translated():
            return [self._names.show(full) for full in self._names.full_names_of_stream()]

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Metadata of the topics (all of the default stream when None), as kafka-python's
        dicts; a topic that does not exist has `error_code` 3 and no partitions. The
        replica fields describe the one local copy (node 0)."""
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
                        "is_internal": False,
                        "partitions": [],
                    }
                )
                continue
            out.append(
                {
                    "error_code": 0,
                    "topic": name,
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition": p.partition,
                            "leader": 0,
                            "replicas": [0],
                            "isr": [0],
                            "offline_replicas": [],
                        }
                        for p in info.partitions
                    ],
                }
            )
        return out

    def create_partitions(
        self,
        topic_partitions: dict[str, NewPartitions],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> CreatePartitionsResponse:
        """Grow topics to `NewPartitions.total_count` partitions; as in Kafka, a count that
        is not larger than the current one raises `InvalidPartitionsError`."""
        self._check_open()
        results: list[tuple[str, int, str | None]] = []
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
                results.append((name, *_error_entry(exc)))
            else:
                results.append((name, 0, None))
        response = CreatePartitionsResponse(results)
        _raise_first(failed, response)
        return response

    def describe_cluster(self) -> dict[str, Any]:
        self._check_open()
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "cluster_id": self._cluster.id,
            "controller_id": 0,
            "brokers": [{"node_id": 0, "host": str(self._cluster.path), "port": 0, "rack": None}],
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

    def _unsupported(self, what: str, instead: str) -> UnsupportedVersionError:
        return UnsupportedVersionError(f"{what} is not supported by Partitionlet: {instead}")

    def describe_configs(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported(
            "describe_configs", "settings are stream policies (Cluster.stream(path).policies)"
        )

    def alter_configs(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported(
            "alter_configs", "change stream policies with Cluster.edit_stream or plet"
        )

    def delete_consumer_groups(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported(
            "delete_consumer_groups", "the engine has no way to delete a group yet"
        )
