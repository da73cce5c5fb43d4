"""kafka-python's value types (`kafka.structs`), with its field names.

`TopicPartition` is the engine's own, so that the facade and the engine exchange partitions
without conversion. The group descriptions (`GroupInformation` and its parts) are what
`KafkaAdminClient.describe_consumer_groups` returns.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from engine.records import TopicPartition

__all__ = [
    "GroupInformation",
    "MemberAssignment",
    "MemberInformation",
    "MemberMetadata",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "TopicPartition",
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
