"""Retention (the `ttl` and `retention_bytes` policies) and compaction (`compact`), each
by a topic's effective policies: its own overrides, else its stream's.

`enforce_retention(cluster)` drops whole partitionlets whose messages have all expired,
and the oldest sealed ones of a partition larger than its `retention_bytes` (while what
is left would still hold that much, as Kafka's retention.bytes).
Readers hide an expired message at once (engine.storage.log); this is where its storage goes.
A partitionlet is expired when its largest timestamp, as readers see it (create time or
log-append time, per batch), is older than `now - ttl`. A sealed one is purged from its
volume and then removed from the catalog; the active one is first sealed in its volume's
write transaction (`Volume.seal_expired`, so no append slips in) and given a successor
at its end offset, so the partition's offsets go on where they stopped. The last
partitionlet of a chain is never dropped: it carries the log end offset. The partition's
`log_start_offset`, the base offset of its first partitionlet, moves up by itself. A
partitionlet that lies wholly below a log start moved by DeleteRecords (`delete_records`)
is dropped too, whatever the ttl.

Volume first, catalog second: a crash in between leaves a catalog row whose volume row
is a DELETED tombstone; readers skip it (engine.storage.log) and the next run removes the row.
Nothing is leaked and nothing readable is lost.

`compact(cluster)` keeps, in every partition of a compacted stream, only the latest
message per key, across the whole partition (a key written again in a later partitionlet
goes from the earlier ones), the active partitionlet included:

- a message without a key is always kept;
- a message newer than `min_compaction_lag_ms` is kept, and counts as the latest of its key
  (older messages of that key go);
- a tombstone (value None) that is the latest of its key goes once it is older than
  `delete_retention_ms`; until then it stays (and the key's older messages go).

Kept messages keep their offsets: a batch is rewritten with offset deltas over the same
offset range, and one left empty is deleted. Each partitionlet is rewritten in one
BEGIN IMMEDIATE transaction of its volume (`Volume.rewrite_batches`), so a reader sees
either the old batches or the new ones, and appends made meanwhile are untouched (they
come after the plan, so they are never removed). Partitionlets are rewritten in offset
order, so a crash half-way never removes a tombstone before what it deletes.

Both passes walk the catalog a page of topics at a time, so no read transaction stays
open long; they may run in several processes at once.

A stream whose stored policies are invalid (a catalog written before every write was
checked) is skipped by both passes, logged, and named in the report's `skipped_streams`
with what is wrong; the other streams are maintained as usual.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from engine import policies as stream_policies
from engine.errors import CorruptBatch, InvalidPolicy
from engine.storage import batch as batch_codec
from engine.storage.catalog import PartitionletRow
from engine.storage.chain_lock import chain_lock
from engine.storage.volume import ACTIVE, DELETED, SEALED, BatchRewrite, PartitionletState

if TYPE_CHECKING:
    from engine.cluster import Cluster

log = logging.getLogger(__name__)

# Topics read from the catalog at a time (one short read each).
PAGE_TOPICS = 500
# Batches read from a volume at a time while compacting.
READ_BATCHES = 16


# --- reports -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicRetention:
    """What retention freed in one topic."""

    partitionlets: int = 0
    messages: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class RetentionReport:
    """The outcome of one `enforce_retention` pass.

    `partitionlets_sealed` counts active partitionlets that had expired and were sealed (and
    given a successor) so that they could be dropped; `by_topic` maps full topic names to
    what was freed there.
    """

    partitionlets_dropped: int = 0
    messages_freed: int = 0
    bytes_freed: int = 0
    partitionlets_sealed: int = 0
    by_topic: dict[str, TopicRetention] = field(default_factory=dict, hash=False)
    # stream path -> why it was skipped (its stored policies are invalid)
    skipped_streams: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class TopicCompaction:
    """What compaction removed in one topic."""

    messages_removed: int = 0
    tombstones_removed: int = 0
    bytes_freed: int = 0
    batches_rewritten: int = 0
    batches_deleted: int = 0


@dataclass(frozen=True)
class CompactionReport:
    """The outcome of one `compact` pass; `by_topic` maps full topic names (of the topics
    where something was removed) to what was removed there."""

    partitions: int = 0  # partitions examined
    partitionlets_rewritten: int = 0
    batches_rewritten: int = 0
    batches_deleted: int = 0
    messages_removed: int = 0
    tombstones_removed: int = 0
    bytes_freed: int = 0
    by_topic: dict[str, TopicCompaction] = field(default_factory=dict, hash=False)
    # stream path -> why it was skipped (its stored policies are invalid)
    skipped_streams: dict[str, str] = field(default_factory=dict, hash=False)
    # "topic partition N" -> the damaged batch that stopped its compaction (the other
    # partitions were compacted; a damaged batch is never rewritten, `plet check` finds it)
    damaged: dict[str, str] = field(default_factory=dict, hash=False)


# --- walking the catalog -------------------------------------------------------------------


@dataclass
class _Partition:
    topic: str  # full name
    topic_id: int
    partition: int
    policies: dict[str, Any]
    chain: list[PartitionletRow]


def _pages(
    cluster: Cluster,
    policy: str | tuple[str, ...],
    wanted: Callable[[dict[str, Any]], bool],
    skipped: dict[str, str],
    what: str,
) -> Iterator[list[_Partition]]:
    """The partitions (with their chains) of the topics whose `policy` (or any of several),
    the topic's own or else its stream's, is stored as anything but 0 or false (a cheap
    filter inside SQLite, `Catalog.topics_with_policy`) and whose effective policies pass
    `wanted`, a page of topics at a time. A stream (or topic) whose stored policies are
    invalid is left out and put in `skipped` (path or topic -> problem), logged once for
    the pass `what`.
    """
    catalog = cluster.catalog
    after = 0
    policies: dict[int, dict[str, Any] | None] = {}  # stream id -> its set; None: invalid
    # Policy sets are mostly alike (the defaults): check each distinct text once a pass.
    checked: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
    while True:
        rows = catalog.topics_with_policy(policy, after, PAGE_TOPICS)
        if not rows:
            return
        after = rows[-1][0]
        names: dict[int, tuple[str, dict[str, Any]]] = {}
        for topic_id, stream_id, path, name, text, own in rows:
            if stream_id not in policies:
                if text not in checked:
                    checked[text] = _checked(text)
                policies[stream_id], found = checked[text]
                if found is not None:
                    _skip(cluster, skipped, what, f"stream {path}", path, found)
            stream_policies = policies[stream_id]
            if stream_policies is None:
                continue
            full = f"{path}:{name}"
            if own is not None:
                mine, found = _checked_overrides(own)
                if mine is None:
                    _skip(cluster, skipped, what, f"topic {full}", full, found or "")
                    continue
                stream_policies = {**stream_policies, **mine}
            if wanted(stream_policies):
                names[topic_id] = (full, stream_policies)
        chains: dict[tuple[int, int], list[PartitionletRow]] = defaultdict(list)
        for pl in catalog.chains(list(names)):
            chains[(pl.topic_id, pl.partition)].append(pl)
        yield [
            _Partition(names[tid][0], tid, part, names[tid][1], chain)
            for (tid, part), chain in sorted(chains.items())
        ]


def _skip(
    cluster: Cluster, skipped: dict[str, str], what: str, whose: str, key: str, found: str
) -> None:
    skipped[key] = found
    log.warning(
        "%s skips %s of cluster %s: its stored policies are invalid (%s); edit them to "
        "valid values",
        what,
        whose,
        cluster.path,
        found,
    )


def _checked_overrides(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(a topic's checked overrides, None) of their stored JSON, or (None, what is wrong)."""
    try:
        stored = json.loads(text)
    except ValueError as exc:
        return None, f"the topic's stored policies are not JSON: {exc}"
    return stream_policies.stored_overrides(stored)


def _checked(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the complete checked policies, None) of a stored set, or (None, what is wrong)."""
    try:
        stored = json.loads(text)
    except ValueError as exc:
        return None, f"the stored policies are not JSON: {exc}"
    try:
        return stream_policies.check_stored("", stored), None
    except InvalidPolicy:
        return None, stream_policies.problem(stored)


def checked_policies(
    text: str, overrides: str | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """(the complete checked policies, None) of a stored set as JSON text, with a topic's
    stored overrides (JSON) on top when given, or (None, what is wrong); the archive pass
    walks topics as these passes do."""
    base, found = _checked(text)
    if base is None or overrides is None:
        return base, found
    mine, found = _checked_overrides(overrides)
    return (None, found) if mine is None else ({**base, **mine}, None)


def _states(cluster: Cluster, pls: list[PartitionletRow]) -> dict[int, PartitionletState]:
    by_volume: dict[int, list[int]] = defaultdict(list)
    for pl in pls:
        by_volume[pl.volume_id].append(pl.id)
    states: dict[int, PartitionletState] = {}
    for volume_id, ids in by_volume.items():
        states.update(cluster.volume(volume_id).states(ids))
    return states


# --- retention -------------------------------------------------------------------------------


def enforce_retention(cluster: Cluster) -> RetentionReport:
    """Drop every partitionlet whose messages have all expired, in topics with ttl > 0, and
    the oldest of partitions larger than their `retention_bytes`."""
    with chain_lock(cluster.path, clock=cluster.clock):
        return _enforce_retention(cluster)


def _enforce_retention(cluster: Cluster) -> RetentionReport:
    dropped = messages = nbytes = sealed = 0
    by_topic: dict[str, list[int]] = {}
    skipped: dict[str, str] = {}
    for drops, n_sealed in _retention_drops(cluster, skipped):
        sealed += n_sealed
        if not drops:
            continue
        for topic, _pl, freed in _drop(cluster, drops):
            got = by_topic.setdefault(topic, [0, 0, 0])
            got[0] += 1
            got[1] += freed[0]
            got[2] += freed[1]
            dropped += 1
            messages += freed[0]
            nbytes += freed[1]
    return RetentionReport(
        dropped,
        messages,
        nbytes,
        sealed,
        {t: TopicRetention(*v) for t, v in sorted(by_topic.items())},
        dict(sorted(skipped.items())),
    )


def _retention_drops(
    cluster: Cluster, skipped: dict[str, str]
) -> Iterator[tuple[list[tuple[str, PartitionletRow]], int]]:
    """The partitionlets to drop, a page at a time, with how many active ones were sealed:
    the expired ones and those over retention_bytes, then, whatever the ttl, those wholly
    below a log start that DeleteRecords moved."""
    # Not only ttl > 0: a stored ttl that is not a number must reach the check (and the
    # report), not be left out silently (topics_with_policy keeps all but 0).
    for page in _pages(
        cluster,
        ("ttl", "retention_bytes"),
        lambda p: p["ttl"] > 0 or p["retention_bytes"] > 0,
        skipped,
        "retention",
    ):
        now = cluster.clock.now_ms()
        drops, n_sealed = _expired(cluster, [p for p in page if p.policies["ttl"] > 0], now)
        # then, by size, the oldest of partitions larger than their retention_bytes
        yield drops + _oversized(cluster, page, {pl.id for _, pl in drops}), n_sealed
    yield cluster.catalog.below_log_starts(), 0


def _expired(
    cluster: Cluster, page: list[_Partition], now: int
) -> tuple[list[tuple[str, PartitionletRow]], int]:
    """The partitionlets of `page` to drop, as (topic, row), sealing expired active ones
    (and giving them successors) on the way; and how many were sealed."""
    cutoffs = {}
    maybe: list[tuple[_Partition, PartitionletRow]] = []
    archived: list[tuple[str, PartitionletRow]] = []
    for p in page:
        cutoff = cutoffs[(p.topic_id, p.partition)] = now - int(p.policies["ttl"]) * 1000
        for pl in p.chain:
            if pl.archive_file is not None:
                # Archived: its file goes with its row (_drop); the catalog's max_ts is
                # the file's. (Its volume copy, if a pass died before removing it, too.)
                if pl.max_ts is None or pl.max_ts < cutoff:
                    archived.append((p.topic, pl))
                continue
            # The catalog's max_ts of a sealed partitionlet is copied from its volume when
            # it rolls, and only ever lowered since (compaction): trust it to skip.
            if pl.end_offset is None or pl.max_ts is None or pl.max_ts < cutoff:
                maybe.append((p, pl))
    if not maybe:
        return archived, 0
    states = _states(cluster, [pl for _, pl in maybe])
    drops: list[tuple[str, PartitionletRow]] = archived
    successors: list[tuple[int, int, int, int, int | None]] = []
    rolled: list[tuple[str, PartitionletRow, PartitionletState]] = []
    for p, pl in maybe:
        st = states.get(pl.id)
        if st is None:
            continue  # nothing appended yet, or on its way to another volume
        cutoff = cutoffs[(p.topic_id, p.partition)]
        if pl.end_offset is not None:
            # (A sealed catalog row always has a sealed volume row: the catalog seals only
            # after the volume did. Never drop one that still looks active.)
            if st.state == DELETED or (st.state == SEALED and _all_expired(st, cutoff)):
                drops.append((p.topic, pl))
            continue
        # The active partitionlet: seal it (in its volume) if all of it has expired.
        if st.state == ACTIVE:
            if not _all_expired(st, cutoff):
                continue
            st = cluster.volume(pl.volume_id).seal_expired(pl.id, cutoff)
            if st is None or st.state != SEALED:
                continue  # an append came first
        if st.state == SEALED:
            # Sealed now, or rolled by a writer that has not told the catalog yet: the
            # catalog learns the end offset and a successor starts there (or the one
            # another writer made is kept).
            successors.append(
                (pl.topic_id, pl.partition, cluster.placement.choose(), st.next_offset, pl.id)
            )
            rolled.append((p.topic, pl, st))
    n_sealed = 0
    if successors:
        cluster.catalog.add_partitionlets(successors)
        for topic, pl, st in rolled:
            if _all_expired(st, cutoffs[(pl.topic_id, pl.partition)]):
                n_sealed += 1
                drops.append((topic, replace(pl, end_offset=st.next_offset)))
    return drops, n_sealed


def _oversized(
    cluster: Cluster, page: list[_Partition], dropping: set[int]
) -> list[tuple[str, PartitionletRow]]:
    """The partitionlets to drop, oldest first, in partitions of `page` larger than their
    `retention_bytes`: as Kafka's retention.bytes, one goes only when what is left of the
    partition (its active partitionlet included) still holds at least that many bytes.
    Only sealed partitionlets go, never the last of a chain; those in `dropping` (expired
    already) are not counted."""
    chains = [
        (p, [pl for pl in p.chain if pl.id not in dropping])
        for p in page
        if p.policies["retention_bytes"] > 0
    ]
    if not chains:
        return []
    states = _states(cluster, [pl for _, chain in chains for pl in chain if not pl.archived])
    drops: list[tuple[str, PartitionletRow]] = []
    for p, chain in chains:
        sizes = []
        for pl in chain:
            st = states.get(pl.id)
            if pl.archived:
                sizes.append(pl.archive_bytes or 0)
            else:
                sizes.append(0 if st is None or st.state == DELETED else st.bytes)
        total = sum(sizes)
        limit = p.policies["retention_bytes"]
        for pl, size in zip(chain[:-1], sizes, strict=False):
            st = states.get(pl.id)
            sealed = pl.archived or (st is not None and st.state in (SEALED, DELETED))
            if pl.end_offset is None or not sealed or total - size < limit:
                break
            drops.append((p.topic, pl))
            total -= size
    return drops


def _all_expired(st: PartitionletState, cutoff: int) -> bool:
    if st.next_offset <= st.base_offset:
        return False  # never written to
    return st.max_ts is None or st.max_ts < cutoff  # None: compaction emptied it


def _drop(
    cluster: Cluster, drops: list[tuple[str, PartitionletRow]]
) -> list[tuple[str, PartitionletRow, tuple[int, int]]]:
    """Purge these sealed partitionlets from their volumes, then remove their catalog rows
    (bumping the topology version so readers and writers drop cached chains).

    Returns what was dropped, with (messages, bytes) freed.
    """
    by_volume: dict[int, list[int]] = defaultdict(list)
    for _, pl in drops:
        by_volume[pl.volume_id].append(pl.id)
    freed: dict[int, tuple[int, int]] = {}
    for volume_id, ids in by_volume.items():
        freed.update(cluster.volume(volume_id).drop(ids))
    dropped = set(cluster.catalog.drop_partitionlets([pl for _, pl in drops]))
    cluster.catalog.transactions.prune_aborted(
        (pl.topic_id, pl.partition, pl.end_offset)
        for _, pl in drops
        if pl.id in dropped and pl.end_offset is not None
    )
    for _, pl in drops:
        if pl.archive_file is not None and pl.id in dropped:
            from engine.storage import archive  # pyarrow: loaded when an archive is met

            # Catalog first, then the file: a crash in between leaves a file nobody reads.
            archive.delete(cluster.path, pl.archive_file)
            freed[pl.id] = (pl.archive_messages or 0, pl.archive_bytes or 0)
    return [(topic, pl, freed.get(pl.id, (0, 0))) for topic, pl in drops if pl.id in dropped]


def delete_records(cluster: Cluster, topic_id: int, full: str, partition: int, offset: int) -> int:
    """Move a partition's log start up to `offset` (the catalog's logical start: readers
    begin there at once), then drop the sealed partitionlets that lie wholly below it
    (what retention drops, by offset rather than by age); returns the log start after it.
    A partitionlet that straddles `offset` keeps its bytes until it lies wholly below the
    start (sealed) and retention drops it (`_below_log_start`)."""
    with chain_lock(cluster.path, clock=cluster.clock):
        chain = cluster.catalog.chain(topic_id, partition)
        first = chain[0].base_offset if chain else 0
        start = max(first, cluster.catalog.raise_log_start(topic_id, partition, offset))
        drops = [(full, pl) for pl in chain if pl.end_offset is not None and pl.end_offset <= start]
        if drops:
            _drop(cluster, drops)
    return start


# --- compaction ------------------------------------------------------------------------------


def compact(cluster: Cluster) -> CompactionReport:
    """Keep only the latest message per key in every partition of compacted streams."""
    with chain_lock(
        cluster.path, clock=cluster.clock
    ):  # a rebalance must not move a partitionlet under it
        return _compact(cluster)


def _compact(cluster: Cluster) -> CompactionReport:
    totals: defaultdict[str, int] = defaultdict(int)
    by_topic: dict[str, dict[str, int]] = {}
    skipped: dict[str, str] = {}
    damaged: dict[str, str] = {}
    # Not only true: a stored `compact` that is not a boolean must reach the check (and
    # the report), not be left out silently (topics_with_policy keeps all but false).
    for page in _pages(cluster, "compact", lambda p: p["compact"], skipped, "compaction"):
        for p in page:
            totals["partitions"] += 1
            try:
                done = _compact_partition(cluster, p)
            except CorruptBatch as exc:
                damaged[f"{p.topic} partition {p.partition}"] = str(exc)
                log.warning("compaction of %s partition %s stopped: %s", p.topic, p.partition, exc)
                continue
            for key, value in done.items():
                totals[key] += value
                if key != "partitionlets_rewritten":
                    by_topic.setdefault(p.topic, defaultdict(int))[key] += value
    return CompactionReport(
        partitions=totals["partitions"],
        partitionlets_rewritten=totals["partitionlets_rewritten"],
        batches_rewritten=totals["batches_rewritten"],
        batches_deleted=totals["batches_deleted"],
        messages_removed=totals["messages_removed"],
        tombstones_removed=totals["tombstones_removed"],
        bytes_freed=totals["bytes_freed"],
        by_topic={
            t: TopicCompaction(**v)
            for t, v in sorted(by_topic.items())
            if v.get("messages_removed")
        },
        skipped_streams=dict(sorted(skipped.items())),
        damaged=damaged,
    )


def _batches(cluster: Cluster, pl: PartitionletRow) -> Iterator[tuple[Any, ...]]:
    """(batch id, base_offset, last_offset, count, payload, producer id or None) of a
    partitionlet, in offset order, read a few at a time (each read is one consistent
    statement)."""
    vol = cluster.volume(pl.volume_id)
    after = -1
    while True:
        rows = vol.batch_rows(pl.id, after, READ_BATCHES)
        if not rows:
            return
        yield from rows
        after = rows[-1][2]


def _compact_partition(cluster: Cluster, p: _Partition) -> dict[str, int]:
    now = cluster.clock.now_ms()
    lag = int(p.policies["min_compaction_lag_ms"])
    # Newer than this (strictly): not compacted away, and the latest of its key.
    protect_after = now - lag if lag > 0 else None
    tombstone_before = now - int(p.policies["delete_retention_ms"])
    # Transactions (Kafka's cleaner rules): nothing at or past the last stable offset is
    # looked at (an open transaction may still abort), an aborted batch never supersedes a
    # committed message of its key and is removed itself; markers, kept in their own table,
    # stay, so offsets and read_committed answers do not change. Each producer's last
    # batch is kept whole, as Kafka's cleaner does: it is the producer's state (the
    # sequence its next batch must follow, engine.storage.volume._Sequences).
    key = (p.topic_id, p.partition)
    tables = cluster.catalog.transactions
    stable = tables.first_open_offsets([key]).get(key)
    aborted: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)  # by producer id
    for pid, first, marker in tables.aborted(p.topic_id, p.partition, 0, 2**62):
        aborted[pid].append((first, marker))

    def settled(base: int, producer_id: int | None) -> bool | None:
        """True: committed or not transactional; False: aborted; None: not yet stable."""
        if stable is not None and base >= stable:
            return None
        return producer_id is None or not any(
            first <= base <= marker for first, marker in aborted.get(producer_id, ())
        )

    # Pass 1: the latest offset of every key over the whole partition.
    latest: dict[bytes | None, int] = {}
    touched: set[int] = set()  # partitionlets holding any key or aborted batch
    last_of: dict[int, int] = {}  # producer id -> the id of its last batch
    for pl in p.chain:
        for batch_id, base, _, _, payload, producer_id in _batches(cluster, pl):
            if producer_id is not None:
                last_of[producer_id] = batch_id
            state = settled(base, producer_id)
            if state is False:
                touched.add(pl.id)
            if not state:
                continue
            b = batch_codec.decode(payload, base)
            if b.keys.count(None) != len(b.keys):
                latest.update(zip(b.keys, b.offsets, strict=True))
                touched.add(pl.id)
    latest.pop(None, None)
    stats: dict[str, int] = defaultdict(int)
    if not touched:
        return stats

    # Pass 2: rewrite, a partitionlet at a time, in offset order.
    kept = set(last_of.values())
    for pl in p.chain:
        if pl.id not in touched:
            continue
        plan = []
        for batch_id, base, _, count, payload, producer_id in _batches(cluster, pl):
            state = settled(base, producer_id)
            if state is None or batch_id in kept:
                continue
            if state is False:
                plan.append(BatchRewrite(batch_id, count, None, 0, 0, 0, 0))
                continue
            rw = _plan(batch_id, base, count, payload, latest, protect_after, tombstone_before)
            if rw is not None:
                plan.append(rw)
        if not plan:
            continue
        applied, freed = cluster.volume(pl.volume_id).rewrite_batches(pl.id, plan)
        if not applied:
            continue
        stats["partitionlets_rewritten"] += 1
        stats["bytes_freed"] += freed
        for rw in applied:
            stats["messages_removed"] += rw.expect_count - rw.count
            stats["tombstones_removed"] += rw.tombstones
            stats["batches_deleted" if rw.payload is None else "batches_rewritten"] += 1
        if pl.end_offset is not None:
            # Keep the catalog's copy of a sealed partitionlet's statistics true (listings
            # and retention read it).
            st = cluster.volume(pl.volume_id).state(pl.id)
            if st is not None and st.state != DELETED:
                cluster.catalog.record_sealed_stats(pl.id, st.bytes, st.first_ts, st.max_ts)
    return stats


def _plan(
    batch_id: int,
    base: int,
    count: int,
    payload: bytes,
    latest: dict[bytes | None, int],
    protect_after: int | None,
    tombstone_before: int,
) -> BatchRewrite | None:
    """The compacted form of one batch, or None when it keeps every message."""
    b = batch_codec.decode(payload, base)
    if b.keys.count(None) == count:
        return None  # no keys: nothing to compact
    keep: list[int] = []
    tombstones = 0
    for i, (offset, key, ts, value) in enumerate(
        zip(b.offsets, b.keys, b.timestamps, b.values, strict=True)
    ):
        if key is None or (protect_after is not None and ts > protect_after):
            keep.append(i)
            continue
        last = latest.get(key)
        if last is None or offset > last:
            keep.append(i)  # written after the map was made: nothing supersedes it yet
        elif offset == last and (value is not None or ts >= tombstone_before):
            keep.append(i)  # the latest of its key (a tombstone still within retention)
        elif value is None:
            tombstones += 1
    if len(keep) == count:
        return None
    if not keep:
        return BatchRewrite(batch_id, count, None, 0, 0, 0, tombstones)
    stamps = [b.timestamps[i] for i in keep]
    keys = [b.keys[i] for i in keep]
    deltas = [b.offsets[i] - base for i in keep]
    new_payload = batch_codec.encode(
        [b.values[i] for i in keep],
        stamps,
        None if keys.count(None) == len(keys) else keys,
        None if b.headers is None else [b.headers[i] for i in keep],
        None if deltas[-1] == len(deltas) - 1 else deltas,
    )
    return BatchRewrite(
        batch_id, count, new_payload, len(keep), min(stamps), max(stamps), tombstones
    )
