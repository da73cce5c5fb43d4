"""kafka-python's value types (`kafka.structs`), with its field names.

`TopicPartition` is the engine's own, so that the facade and the engine exchange partitions
without conversion. The group descriptions (`GroupInformation` and its parts) are what
`KafkaAdminClient.describe_consumer_groups` returns.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from engine.records import TopicPartition

__all__ = [
    "ConsumerGroupMetadata",
    "GroupInformation",
    "IsolationLevel",
    "MemberAssignment",
    "MemberInformation",
    "MemberMetadata",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetSpec",
    "OffsetTimestamp",
    "TopicPartition",
    "TopicPartitionReplica",
]


class OffsetAndMetadata(NamedTuple):
    """A committed offset. `leader_epoch` (newer kafka-python) is always -1 here."""

    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


class MemberMetadata(NamedTuple):
    version: int
    subscription: list[str]
    user_data: bytes


class MemberAssignment(NamedTuple):
    version: int
    assignment: list[tuple[str, list[int]]]
    user_data: bytes

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for topic, parts in self.assignment for p in parts]


class MemberInformation(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    member_metadata: MemberMetadata
    member_assignment: MemberAssignment


class GroupInformation(NamedTuple):
    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberInformation]
    authorized_operations: Any


class TopicPartitionReplica(NamedTuple):
    """A partition's copy on a broker (kafka-python 3.0); here always broker 0."""

    topic: str
    partition: int
    broker_id: int


class ConsumerGroupMetadata(NamedTuple):
    """What `KafkaConsumer.group_metadata()` returns (kafka-python 3.0)."""

    group_id: str | None = None
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    state: Any = None


class IsolationLevel(enum.IntEnum):
    """A consumer's `isolation_level` (kafka-python 3.0, Kafka's protocol codes). Both
    read the same here: every committed append is visible at once, and there are no
    transactions to hide."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class OffsetSpec(enum.IntEnum):
    """Which offset an offset lookup asks for (kafka-python 3.0; Kafka's ListOffsets
    codes). A plain int >= 0, or an `OffsetTimestamp`, asks by time."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3
    EARLIEST_LOCAL = -4
    LATEST_TIERED = -5


class OffsetTimestamp(int):
    """A time in ms since the epoch where an offset or a spec is expected: "the first
    offset at or after this time"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"OffsetTimestamp({int(self)})"
