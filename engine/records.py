"""Immutable value types of the public API, named as in Kafka and kafka-python.

Records, metadata and `TopicPartition`s carry full topic names (`/stream:topic`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 = create time, 1 = log-append time, as in Kafka
    key: Any
    value: Any
    headers: list[tuple[str, bytes]]


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int


class KafkaBatch(NamedTuple):
    """A stored batch that is a Kafka record batch v2 as a client produced it
    (`Producer.send_record_batch`), as `Consumer.poll_arrow_batches(verbatim=True)` hands
    it out: whole, its records at offsets `base_offset` to `last_offset`, one each. `data`
    is its bytes as stored, so its base offset and partition leader epoch are what the
    client sent, not the log's: a reader that serves it sets them (they lie before its
    CRC)."""

    base_offset: int
    last_offset: int
    data: memoryview


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


CREATE_TIME = 0
LOG_APPEND_TIME = 1


@dataclass(frozen=True)
class PartitionletInfo:
    """A contiguous slice of a partition stored in one volume.

    `last_offset` is `log_end_offset - 1` of the slice; it is `base_offset - 1` while empty.
    """

    id: int
    topic: str
    partition: int
    volume: int
    base_offset: int
    last_offset: int
    active: bool
    bytes: int
    messages: int
    first_timestamp: int | None
    last_timestamp: int | None
    created_ms: int
    # "live" (in its volume) or "archive" (one Parquet file, `file`: its URI; docs/ARCHIVE.md)
    tier: str = "live"
    file: str | None = None
    # what is wrong with its volume, which could not be opened (Cluster.damaged_volumes):
    # its range and size are then the catalog's (`messages` counts its offsets), and its
    # messages cannot be read
    damage: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    first_timestamp: int | None
    last_timestamp: int | None
    bytes: int
    partitionlets: list[PartitionletInfo] = field(default_factory=list)

    @property
    def high_watermark(self) -> int:
        # Every committed append is visible to all readers at once: no replication lag here.
        return self.log_end_offset

    @property
    def messages(self) -> int:
        """Messages stored: fewer than the offset range after compaction."""
        if self.partitionlets:
            return sum(p.messages for p in self.partitionlets)
        return self.log_end_offset - self.log_start_offset


@dataclass(frozen=True)
class TopicInfo:
    name: str  # the full name
    stream: str
    topic: str  # the name within the stream
    partitions: list[PartitionInfo]
    created_ms: int
    # its effective policies (its stream's, with its own on top) and its own overrides
    policies: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    @property
    def messages(self) -> int:
        return sum(p.messages for p in self.partitions)


@dataclass(frozen=True)
class StreamInfo:
    path: str
    policies: dict[str, Any]
    creator: str
    created_ms: int
    topic_count: int
    bytes: int
    messages: int


@dataclass(frozen=True)
class ClusterTotals:
    """What a whole cluster holds: counted from per-stream figures, never by a scan of
    topics or messages."""

    streams: int
    topics: int
    messages: int
    bytes: int  # of stored record batches and archived files


@dataclass(frozen=True)
class VolumeInfo:
    id: int
    path: str
    bytes: int  # size of the file and its WAL on disk
    data_bytes: int  # bytes of stored record batches
    partitionlets: int
    active_partitionlets: int
    recent_write_bytes: int  # written in the last placement window
    # what is wrong with it, when it could not be opened (Cluster.damaged_volumes): its
    # counts are then the catalog's, and `data_bytes` and the write load are unknown (0)
    damage: str | None = None


@dataclass(frozen=True)
class MemberInfo:
    """A live member of a consumer group."""

    member_id: str
    client_id: str
    host: str  # hostname and process id of the member
    assignment: tuple[TopicPartition, ...]
    last_heartbeat_ms: int


@dataclass(frozen=True)
class GroupPartitionInfo:
    """A group's committed offset in one partition, and how far behind the log end it is."""

    topic: str
    partition: int
    committed: int | None
    log_end_offset: int
    metadata: str = ""

    @property
    def lag(self) -> int:
        # a negative committed offset (Kafka's earliest/latest markers) counts from 0
        return self.log_end_offset - max(self.committed or 0, 0)


@dataclass(frozen=True)
class GroupInfo:
    """A consumer group: members, generation and committed offsets with lag.

    `state` is Kafka's: "Empty" (no member), "PreparingRebalance" (members are joining or
    leaving), "Stable".
    """

    group_id: str
    state: str
    generation: int
    protocol: str  # the partition assignment strategy: "range" or "roundrobin"
    members: list[MemberInfo]
    partitions: list[GroupPartitionInfo]

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)


@dataclass(frozen=True)
class OffsetResetPlan:
    """What resetting a group's offset in one partition would do (`Cluster.plan_offset_reset`):
    the committed offset now (None: none yet), the new one, and the partition's log bounds
    when planned. Lags count from offset 0 when nothing is committed, as `GroupPartitionInfo`."""

    topic: str
    partition: int
    current: int | None
    new: int
    log_start_offset: int
    log_end_offset: int

    @property
    def lag_before(self) -> int:
        return self.log_end_offset - max(self.current or 0, 0)

    @property
    def lag_after(self) -> int:
        return self.log_end_offset - self.new
