"""The archive pass: sealed partitionlets older than their topic's `archive_after` become
one Parquet file each (engine.storage.archive), read by every reader as if they were live.

For each such partitionlet, under the chain lock (so that no rebalance, retention or
compaction changes it meanwhile):

1. if its stream compacts, the pass has run compaction first (once, before the first);
2. its stored batches are written as one Parquet file at a deterministic path;
3. the file's footer is read back and compared (row count, offsets) with the volume's;
4. the catalog records it as archived with its file, in one fsynced transaction;
5. only then are its batches removed from its volume.

Transactions: a partitionlet is archived only below its partition's last stable offset
(as Kafka's tiered storage copies only segments below it), so every transaction that wrote
to it has ended and its aborted ranges are in the catalog for good. The file keeps each
batch's producer and the partitionlet's markers (engine.storage.archive, format 2), so
read_committed readers skip aborted batches of archived history as of live history.

A crash (kill -9) anywhere loses nothing and duplicates nothing: before step 4 the
catalog still points at the volume and a rerun overwrites the file at the same path; after
it, readers read the file, and the next pass removes the volume's copy, which nobody reads
any more. `step_hook(step, pl)` is called after steps 2 ("written"), 4 ("recorded") and 5
("purged"), for tests that kill the process there.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.client import arrow
from engine.errors import PartitionletError
from engine.ops import retention
from engine.storage import archive as store
from engine.storage import batch as batch_codec
from engine.storage.catalog import PartitionletRow
from engine.storage.chain_lock import chain_lock
from engine.storage.log import Columns
from engine.storage.volume import DELETED, SEALED

if TYPE_CHECKING:
    from engine.cluster import Cluster

log = logging.getLogger(__name__)

# Topics read from the catalog at a time, and batches from a volume at a time.
PAGE_TOPICS = 500
READ_BATCHES = 64


@dataclass(frozen=True)
class ArchivedPartitionlet:
    """One partitionlet the pass archived: where it went, and what it holds."""

    id: int
    topic: str
    partition: int
    base_offset: int
    end_offset: int
    messages: int
    bytes: int  # of the Parquet file
    volume_bytes: int  # it took in its volume
    file: str  # the file's URI


@dataclass(frozen=True)
class ArchiveReport:
    """The outcome of one `archive` pass. `purged` counts volume copies of partitionlets
    archived by an earlier pass that died before removing them; `failed` maps partitionlet
    ids to why they were not archived (they stay live and are tried again next pass)."""

    archived: tuple[ArchivedPartitionlet, ...] = ()
    purged: int = 0
    compacted: bool = False
    failed: dict[int, str] = field(default_factory=dict, hash=False)
    skipped_streams: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def messages(self) -> int:
        return sum(a.messages for a in self.archived)

    @property
    def bytes(self) -> int:
        return sum(a.bytes for a in self.archived)

    @property
    def volume_bytes(self) -> int:
        return sum(a.volume_bytes for a in self.archived)


@dataclass
class _Candidate:
    topic: str  # full name
    stream: str
    topic_name: str
    pl: PartitionletRow
    policies: dict[str, Any]


def archive(
    cluster: Cluster,
    stream: str | None = None,
    *,
    step_hook: Callable[[str, PartitionletRow], None] | None = None,
) -> ArchiveReport:
    """Archive every sealed partitionlet whose newest message is older than its topic's
    `archive_after` (its own, else its stream's), of `stream` or of every stream; see the
    module docstring."""
    skipped: dict[str, str] = {}
    candidates, leftovers = _scan(cluster, stream, skipped)
    purged = _purge_leftovers(cluster, leftovers)
    compacted = False
    if any(c.policies["compact"] for c in candidates):
        # Compaction first, so that what is archived is what compaction keeps.
        retention.compact(cluster)
        compacted = True
        candidates, _ = _scan(cluster, stream, {})
    done: list[ArchivedPartitionlet] = []
    failed: dict[int, str] = {}
    for c in candidates:
        try:
            with chain_lock(cluster.path, clock=cluster.clock):
                got = _archive_one(cluster, c, step_hook)
        except PartitionletError as exc:
            failed[c.pl.id] = str(exc)
            log.warning("archiving partitionlet %s of %s failed: %s", c.pl.id, c.topic, exc)
            continue
        if got is not None:
            done.append(got)
    return ArchiveReport(tuple(done), purged, compacted, failed, dict(sorted(skipped.items())))


def _pages(cluster: Cluster, skipped: dict[str, str]) -> Iterator[list[tuple[Any, ...]]]:
    catalog = cluster.catalog
    after = 0
    while True:
        rows = catalog.topics_with_policy("archive_after", after, PAGE_TOPICS)
        if not rows:
            return
        after = rows[-1][0]
        yield rows


def _scan(
    cluster: Cluster, stream: str | None, skipped: dict[str, str]
) -> tuple[list[_Candidate], list[PartitionletRow]]:
    """(partitionlets to archive now, archived ones whose volume may still hold a copy)."""
    now = cluster.clock.now_ms()
    candidates: list[_Candidate] = []
    leftovers: list[PartitionletRow] = []
    checked: dict[tuple[str, str | None], tuple[dict[str, Any] | None, str | None]] = {}
    tables = cluster.catalog.transactions
    for rows in _pages(cluster, skipped):
        topics = {}
        for topic_id, _stream_id, path, name, text, own in rows:
            if stream is not None and path != stream:
                continue
            if (text, own) not in checked:
                checked[(text, own)] = retention.checked_policies(text, own)
            policies, problem = checked[(text, own)]
            if policies is None:
                # the stream's set, or else the topic's own, is bad
                bad = path if retention.checked_policies(text)[0] is None else f"{path}:{name}"
                skipped[bad] = problem or "invalid policies"
                continue
            if policies["archive_after"] > 0:
                topics[topic_id] = (path, name, policies)
        if not topics:
            continue
        chains = cluster.catalog.chains(list(topics))
        # the first offset of each open transaction: nothing at or past it is archived
        stable = tables.first_open_offsets(sorted({(pl.topic_id, pl.partition) for pl in chains}))
        for pl in chains:
            path, name, policies = topics[pl.topic_id]
            if pl.archive_file is not None:
                leftovers.append(pl)
                continue
            if pl.end_offset is None:
                continue
            cutoff = now - int(policies["archive_after"]) * 1000
            # The catalog's max_ts is copied from the volume at sealing (None: not yet;
            # the volume's own is checked before the file is written).
            if pl.max_ts is not None and pl.max_ts >= cutoff:
                continue
            lso = stable.get((pl.topic_id, pl.partition))
            if lso is not None and pl.end_offset > lso:
                continue  # an open transaction may still write its end here: not yet
            candidates.append(_Candidate(f"{path}:{name}", path, name, pl, policies))
    return candidates, leftovers


def _purge_leftovers(cluster: Cluster, pls: list[PartitionletRow]) -> int:
    """Remove the volume copies of archived partitionlets (a pass died before it did)."""
    by_volume: dict[int, list[int]] = defaultdict(list)
    for pl in pls:
        by_volume[pl.volume_id].append(pl.id)
    purged = 0
    for volume_id, ids in by_volume.items():
        vol = cluster.volume(volume_id)
        states = vol.states(ids)
        left = [i for i, st in states.items() if st.state != DELETED]
        if left:
            vol.drop(left)
            purged += len(left)
    return purged


def _parts(
    cluster: Cluster, c: _Candidate
) -> Iterator[tuple[Any, Any, bool, tuple[int, int, int] | None]]:
    """The partitionlet's stored batches, each as an Arrow RecordBatch of the Kafka
    source's columns, with the stored batch, whether it has headers and its producer (id,
    epoch, base sequence; None: none)."""
    vol = cluster.volume(c.pl.volume_id)
    producers = {base: (p, e, s) for base, p, e, s in vol.batch_producers(c.pl.id)}
    position = c.pl.base_offset
    while True:
        got = vol.replica_batches(c.pl.id, position, READ_BATCHES)
        if not got:
            return
        for b in got:
            payload = batch_codec.plain(b.payload)
            at = batch_codec.positions(payload)
            cols = Columns(payload, at, b.base_offset, b.ts_type, b.first_ts, 0, at.count)
            rb = arrow.record_batch(c.topic, c.pl.partition, [cols], None)
            yield rb, b, at.headers_at is not None, producers.get(b.base_offset)
        position = got[-1].last_offset + 1


def _archive_one(
    cluster: Cluster,
    c: _Candidate,
    step_hook: Callable[[str, PartitionletRow], None] | None,
) -> ArchivedPartitionlet | None:
    catalog = cluster.catalog
    pl = catalog.partitionlet(c.pl.id)  # again, under the lock
    if pl is None or pl.archive_file is not None or pl.end_offset is None:
        return None
    vol = cluster.volume(pl.volume_id)
    st = vol.state(pl.id)
    if st is None or st.state != SEALED:
        return None
    cutoff = cluster.clock.now_ms() - int(c.policies["archive_after"]) * 1000
    if st.max_ts is not None and st.max_ts >= cutoff:
        return None
    root = store.root(c.policies["archive_uri"])
    name = store.file_name(
        root, c.stream, c.topic_name, pl.partition, pl.base_offset, pl.end_offset, pl.id
    )
    # with the volume's own statistics (the catalog's may be missing)
    pl_now = PartitionletRow(
        pl.id, pl.topic_id, pl.partition, pl.volume_id, pl.base_offset, pl.end_offset,
        pl.created_ms, pl.sealed_ms, pl.bytes, st.first_ts, st.max_ts,
    )  # fmt: skip
    markers = vol.replica_markers(pl.id, pl.base_offset, pl.end_offset - 1)
    written = store.write(cluster.path, name, pl_now, arrow.schema(), _parts(cluster, c), markers)
    if written.rows != st.messages:
        # The volume changed under us (it cannot while the chain lock is held): leave it.
        raise PartitionletError(
            f"partitionlet {pl.id}: wrote {written.rows} messages, the volume holds {st.messages}"
        )
    if step_hook is not None:
        step_hook("written", pl)
    store.check(cluster.path, name, pl_now, written)
    if pl_now.first_ts != pl.first_ts or pl_now.max_ts != pl.max_ts:
        catalog.record_sealed_stats(pl.id, st.bytes, st.first_ts, st.max_ts)
    if not catalog.mark_archived(pl, name, written.rows, written.bytes):
        return None  # changed meanwhile; the file is overwritten by a later pass
    if step_hook is not None:
        step_hook("recorded", pl)
    vol.drop([pl.id])
    if step_hook is not None:
        step_hook("purged", pl)
    return ArchivedPartitionlet(
        pl.id,
        c.topic,
        pl.partition,
        pl.base_offset,
        pl.end_offset,
        written.rows,
        written.bytes,
        st.bytes,
        store.file_uri(cluster.path, name),
    )
