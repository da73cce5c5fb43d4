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
    cluster: Cluster, topic_id: int, partition: int, position: int, limit: int
) -> list[ReplicaBatch]:
    """Up to `limit` stored batches holding offsets >= `position`, from the first
    partitionlet of the chain that has any. A sealed partitionlet found gone from its volume
    (moved by rebalance, dropped by retention) makes the chain be read again, so nothing is
    skipped that still exists."""
    for _ in range(4):
        chain = cluster.catalog.chain(topic_id, partition)
        retry = False
        for pl in chain:
            if pl.end_offset is not None and pl.end_offset <= position:
                continue
            vol = cluster.reader(pl)  # an archived partitionlet reads from its file
            got = vol.replica_batches(pl.id, position, limit)
            if got:
                return got
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


def source_end(cluster: Cluster, topic_id: int, partition: int, name: str) -> int:
    """The partition's log end offset."""
    return cluster.partition_log(topic_id, partition, name).end_offset()
