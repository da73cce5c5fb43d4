"""Reading a partition's stored batches as replication sends and compares them: exactly as
stored (offsets, origin, payload), through the catalog's chain and the volumes' public
methods."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.storage.volume import DELETED, ReplicaBatch

if TYPE_CHECKING:
    from engine.cluster import Cluster


def batch_at(
    cluster: Cluster, topic_id: int, partition: int, offset: int
) -> tuple[int, int, str] | None:
    """(base, last, origin) of the batch holding `offset` in a partition, or None."""
    for pl in cluster.catalog.chain(topic_id, partition):
        if offset < pl.base_offset or (pl.end_offset is not None and offset >= pl.end_offset):
            continue
        found = cluster.reader(pl).batch_at(pl.id, offset)  # archived ones too
        if found is not None:
            return found
    return None


def source_batches(
    cluster: Cluster, topic_id: int, partition: int, position: int, limit: int, below: int
) -> list[ReplicaBatch]:
    """Up to `limit` stored batches holding offsets >= `position` and starting below
    `below`, from the first partitionlet of the chain that has any, with the transaction
    markers among them (and after them, below `below`), in offset order. A sealed
    partitionlet found gone from its volume (moved by rebalance, dropped by retention) makes
    the chain be read again, so nothing is skipped that still exists."""
    for _ in range(4):
        chain = cluster.catalog.chain(topic_id, partition)
        retry = False
        for pl in chain:
            if pl.end_offset is not None and pl.end_offset <= position:
                continue
            vol = cluster.reader(pl)  # an archived partitionlet reads from its file
            got = [b for b in vol.replica_batches(pl.id, position, limit) if b.base_offset < below]
            upto = below - 1 if len(got) < limit else got[-1].last_offset
            marks = vol.replica_markers(pl.id, position, upto) if upto >= position else []
            if got or marks:
                return _with_markers(got, marks, cluster.id)
            if pl.end_offset is None:
                return []
            state = vol.state(pl.id)
            if state is None or state.state == DELETED:
                retry = True
                break
            # emptied by compaction: go on with the next partitionlet
        if not retry:
            return []
    return []


def _with_markers(
    batches: list[ReplicaBatch],
    marks: list[tuple[int, int, int, bool, str | None]],
    here: str,
) -> list[ReplicaBatch]:
    """Batches and markers (offset, producer id, epoch, commit, origin or None for `here`)
    in one offset order."""
    if not marks:
        return batches
    items = batches + [
        ReplicaBatch(o, o, 0, 0, 0, 0, origin or here, b"", 0, pid, epoch, -1, commit)
        for o, pid, epoch, commit, origin in marks
    ]
    items.sort(key=lambda b: b.base_offset)
    return items


def source_aborted(
    cluster: Cluster, topic_id: int, partition: int, start: int, end: int
) -> list[tuple[int, int, int]]:
    """(producer id, first offset, marker offset) of the aborted transactions whose range
    meets offsets start..end-1 (the index a replica's read_committed readers need)."""
    if end <= start:
        return []
    return cluster.catalog.transactions.aborted(topic_id, partition, start, end - 1)


def source_stable_end(cluster: Cluster, topic_id: int, partition: int, name: str) -> int:
    """How far a replica may copy a partition: its last stable offset (the first offset of
    an open transaction, else the log end). The end is read before the open transactions:
    a transaction that joins after that read starts at or past it, and one whose batches
    lie below it but that no longer shows as open has completed, markers first and then its
    aborted range (engine.client.transactions), so `source_aborted`, read after this,
    knows every aborted range of what lies below."""
    end = source_end(cluster, topic_id, partition, name)
    key = (topic_id, partition)
    first_open = cluster.catalog.transactions.first_open_offsets([key]).get(key)
    return end if first_open is None else min(end, first_open)


def source_end(cluster: Cluster, topic_id: int, partition: int, name: str) -> int:
    """The partition's log end offset."""
    return cluster.partition_log(topic_id, partition, name).end_offset()
