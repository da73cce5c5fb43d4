"""What a replicator needs of a target cluster (`Target`), what an apply returns, and what
a batch from another cluster must be before a target writes it.

Every argument of `Target` is a name or plain data, so that the HTTP transport
(engine.replication.http) can carry it as JSON; `DirectoryTarget`
(engine.replication.directory) is the in-process implementation.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from engine.errors import CorruptBatch, InvalidArgument
from engine.policies import shown
from engine.records import CREATE_TIME, LOG_APPEND_TIME
from engine.storage import batch as batch_codec
from engine.storage.volume import ReplicaBatch

# A topic as the replicator sends it to a target: (name, partitions, its own policies).
TopicSpec = tuple[str, int, dict[str, Any]]


@dataclass
class ApplyResult:
    """What `Target.apply` did with a run of batches of one partition."""

    messages: int = 0  # message copies newly applied
    bytes: int = 0
    done: int = 0  # batches applied or found present, from the start of the run
    conflict: dict[str, Any] | None = None


class Target(Protocol):
    """What a replicator needs of a target cluster; every argument is a name or plain data,
    so an HTTP implementation can carry it as JSON (payloads as bytes)."""

    cluster_id: str

    def stream_policies(self, stream: str) -> dict[str, Any] | None: ...

    def create_stream(self, stream: str, policies: dict[str, Any], creator: str) -> None: ...

    def check_admin(self, stream: str, user: str, groups: tuple[str, ...]) -> None: ...

    def ensure_topics(self, stream: str, topics: list[TopicSpec]) -> None:
        """Create the missing topics, grow partition counts, and give each topic the
        source's overrides of its stream's policies (an empty dict: none)."""

    def topic_partitions(self, stream: str) -> dict[str, int]: ...

    def end_offsets(
        self, stream: str, topics: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]: ...

    def batch_at(
        self, stream: str, topic: str, partition: int, offset: int
    ) -> tuple[int, int, str] | None: ...

    def apply(
        self,
        stream: str,
        topic: str,
        partition: int,
        batches: list[ReplicaBatch],
        aborted: list[tuple[int, int, int]] | None = None,
    ) -> ApplyResult:
        """Store `batches` (and transaction markers) at their offsets, after indexing
        `aborted`, the source's aborted transactions (producer id, first offset, marker
        offset) that meet them."""

    def merge_offsets(
        self, stream: str, rows: list[tuple[str, str, int, int, str, int]]
    ) -> int: ...

    def add_upstream(
        self, stream: str, source: str, source_stream: str, source_id: str
    ) -> None: ...

    def remove_upstream(self, stream: str, source_id: str, source_stream: str) -> None: ...

    def close(self) -> None: ...


def check_replica_batch(b: ReplicaBatch, where: str = "") -> None:
    """Raise `InvalidArgument` unless `b`, a batch from another cluster, is one this engine
    could have written: its payload a complete record batch whose record count, offsets and
    timestamps agree with its row (`engine.storage.batch.check`: offsets within 0..MAX_OFFSET,
    timestamps within 0..MAX_TIMESTAMP_MS, first_ts <= max_ts), a known timestamp type and
    a cluster uuid as its origin. `CorruptBatch` when it came with its source's checksum
    (`crc`) and does not match it."""
    try:
        if not isinstance(b, ReplicaBatch):
            raise InvalidArgument(f"a ReplicaBatch is required, not {type(b).__name__}")
        if isinstance(b.ts_type, bool) or b.ts_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise InvalidArgument(
                f"unknown timestamp type {shown(b.ts_type)} (0 create time, 1 log-append time)"
            )
        if not is_cluster_id(b.origin):
            raise InvalidArgument("its origin must be a cluster id (a uuid)")
        if (
            isinstance(b.append_ms, bool)
            or not isinstance(b.append_ms, int)
            or not 0 <= b.append_ms <= batch_codec.MAX_TIMESTAMP_MS
        ):
            raise InvalidArgument("its append_ms must be epoch milliseconds")
        _check_producer(b)
        if b.marker is not None:
            if b.payload or b.count or b.last_offset != b.base_offset:
                raise InvalidArgument("a transaction marker takes one offset and no payload")
            _int_in(b.base_offset, batch_codec.MAX_OFFSET, "its offset")
            return
        if b.crc is not None and not batch_codec.intact(
            b.base_offset, b.last_offset, b.ts_type, b.first_ts, b.max_ts, b.payload, b.crc
        ):
            raise CorruptBatch(
                f"a replicated batch {where + ' ' if where else ''}does not match the "
                f"CRC32C its source stored with it (offsets {b.base_offset}..{b.last_offset}, "
                f"from cluster {b.origin}): damaged at the source or on its way; nothing "
                "of this call was written"
            )
        batch_codec.check(
            b.payload,
            base_offset=b.base_offset,
            last_offset=b.last_offset,
            count=b.count,
            first_ts=b.first_ts,
            max_ts=b.max_ts,
        )
    except InvalidArgument as exc:
        offsets = ""
        if isinstance(b, ReplicaBatch):
            offsets = f"at offsets {shown(b.base_offset)}..{shown(b.last_offset)} "
        raise InvalidArgument(
            f"replicated batch {offsets}{where + ' ' if where else ''}refused: {exc}"
        ) from None


# Kafka's bounds of a batch's producer fields.
MAX_PRODUCER_ID = 2**63 - 1
MAX_PRODUCER_EPOCH = 2**15 - 1
MAX_SEQUENCE = 2**31 - 1


def _int_in(value: Any, high: int, what: str, low: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{what} must be an integer from {low} to {high}")


def _check_producer(b: ReplicaBatch) -> None:
    """A batch's producer fields: all None, or Kafka's ranges (a marker's base sequence is
    -1, as its control batch's)."""
    if b.marker is not None and not isinstance(b.marker, bool):
        raise InvalidArgument("its marker must be true (COMMIT), false (ABORT) or null")
    if b.producer_id is None and b.producer_epoch is None and b.base_seq is None:
        if b.marker is not None:
            raise InvalidArgument("a transaction marker names its producer")
        return
    _int_in(b.producer_id, MAX_PRODUCER_ID, "its producer id")
    _int_in(b.producer_epoch, MAX_PRODUCER_EPOCH, "its producer epoch")
    _int_in(b.base_seq, MAX_SEQUENCE, "its base sequence", -1 if b.marker is not None else 0)


def check_aborted(ranges: Any) -> None:
    """`InvalidArgument` unless `ranges` is a list of aborted transactions as a replica
    indexes them: (producer id, first offset, marker offset), first <= marker."""
    if not isinstance(ranges, list):
        raise InvalidArgument("aborted transactions are a list")
    for item in ranges:
        if not isinstance(item, tuple | list) or len(item) != 3:
            raise InvalidArgument(
                "an aborted transaction is (producer id, first offset, marker offset)"
            )
        producer_id, first, marker = item
        _int_in(producer_id, MAX_PRODUCER_ID, "an aborted transaction's producer id")
        _int_in(first, batch_codec.MAX_OFFSET, "an aborted transaction's first offset")
        _int_in(marker, batch_codec.MAX_OFFSET, "an aborted transaction's marker offset", first)


def is_cluster_id(text: Any) -> bool:
    """A uuid as clusters write their ids: the canonical lower-case 36-character form."""
    if not isinstance(text, str) or len(text) != 36:
        return False
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def conflict_record(
    topic: str, partition: int, batch: ReplicaBatch, here: tuple[int, int, str] | None
) -> dict[str, Any]:
    """A conflict as a link records it: a batch from the source meets `here`, (base, last,
    origin) of what the target holds at its offsets (None when nothing is found there)."""
    offset = batch.base_offset if here is None else max(batch.base_offset, here[0])
    return {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "source_origin": batch.origin,
        "source_offsets": [batch.base_offset, batch.last_offset],
        "target_origin": None if here is None else here[2],
        "target_offsets": None if here is None else [here[0], here[1]],
    }
