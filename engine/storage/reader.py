"""What reads the stored batches of one partitionlet (`Cluster.reader`): its `Volume` while
it lives in a volume file, an `archive.ArchiveReader` once it is archived. Both have the
reading methods of `BatchReader`, with the same row shapes, so a reader needs not know
which tier a partitionlet is on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from engine.storage.volume import PartitionletState, ReplicaBatch

# One batch as read: (base_offset, last_offset, ts_type, first_ts, max_ts, payload)
StoredBatch = tuple[int, int, int, int, int, bytes]


class ArchivedRows(NamedTuple):
    """A run of an archived partitionlet's stored batches as its Parquet file holds them
    (`ArchiveReader.read_rows`): `rows`, a `pyarrow.Table` slice of one row group, with the
    columns of `engine.client.arrow.schema` but the topic and partition (the reader knows
    them), in offset order, and `offsets`, its offset column as a numpy array.
    `base_offset` .. `last_offset` are the run's offsets (a stored batch that row groups
    cut is cut there too); `first_ts` and `max_ts` bound its timestamps (ms)."""

    base_offset: int
    last_offset: int
    first_ts: int
    max_ts: int
    rows: Any
    offsets: Any


class RowReader(Protocol):
    """What reads an archived partitionlet's rows as Arrow columns (an `ArchiveReader`)."""

    def read_rows(
        self,
        pl_id: int,
        from_offset: int,
        max_runs: int,
        skip: Sequence[tuple[int, int, int]] = (),
    ) -> list[ArchivedRows]:
        """Runs holding offsets >= `from_offset` (the first may end before it), in offset
        order, but the batches of the aborted transactions in `skip`."""
        ...


class BatchReader(Protocol):
    def read(
        self,
        pl_id: int,
        from_offset: int,
        max_batches: int,
        skip: Sequence[tuple[int, int, int]] = (),
    ) -> list[StoredBatch]:
        """Batches holding offsets >= `from_offset`, in offset order, but those of the
        aborted transactions in `skip` (producer id, first offset, marker offset)."""
        ...

    def markers(
        self, pl_id: int, from_offset: int, to_offset: int
    ) -> list[tuple[int, int, int, bool]]:
        """The transaction markers at offsets from_offset..to_offset: (offset, producer id,
        epoch, True for COMMIT)."""
        ...

    def aborted_offsets(
        self, pl_id: int, skip: Sequence[tuple[int, int, int]]
    ) -> list[tuple[int, int]]:
        """(base offset, last offset) of the stored batches of the aborted transactions of
        `skip` (producer id, first offset, marker offset), in offset order."""
        ...

    def replica_markers(
        self, pl_id: int, from_offset: int, to_offset: int
    ) -> list[tuple[int, int, int, bool, str | None]]:
        """`markers` with each one's origin (None: this cluster's), for replication."""
        ...

    def producers(self, pl_id: int) -> list[tuple[int, int, int, int]]:
        """The idempotent producers that wrote here, from their last batch: (producer id,
        epoch, last sequence, last timestamp)."""
        ...

    def gap_end(
        self, pl_id: int, position: int, skip: Sequence[tuple[int, int, int]] = ()
    ) -> int | None:
        """The partitionlet's next offset when no batch (but those in `skip`) holds
        `position` or later; None otherwise."""
        ...

    def first_batch_at_time(self, pl_id: int, timestamp_ms: int) -> StoredBatch | None:
        """The first batch whose running max timestamp reaches `timestamp_ms`."""
        ...

    def state(self, pl_id: int) -> PartitionletState | None: ...

    def states(self, pl_ids: list[int]) -> dict[int, PartitionletState]: ...

    def replica_batches(self, pl_id: int, from_offset: int, limit: int) -> list[ReplicaBatch]:
        """The stored batches holding offsets >= `from_offset`, exactly as stored."""
        ...

    def batch_at(self, pl_id: int, offset: int) -> tuple[int, int, str] | None:
        """(base_offset, last_offset, origin) of the batch holding `offset`."""
        ...
