"""Rebalancing: moving sealed partitionlets between volumes to even out bytes and heat.

The score
---------
Each volume gets a load, in bytes::

    load(v) = bytes(v) + HEAT_WEIGHT * heat(v)
    heat(v) = write_bytes(v) + sum(read_bytes(p) for the partitionlets p on v)

`bytes(v)` is what the volume stores now (its live partitionlets, active ones included).
`write_bytes(v)` is what producers appended to it in the last `HEAT_WINDOW_S` seconds
(`Volume.recent_write_bytes`) and `read_bytes(p)` what consumers read from partitionlet
`p` in that window (`engine.ops.heat`; it is counted per partitionlet, so it moves with
it, while a volume's own read counter would keep what was read there before). With
`HEAT_WEIGHT` = 1 the heat term reads as "the bytes this volume is about to take or serve
at its recent rate": stored bytes (days of retention) dominate, and heat (five minutes of
traffic) counts as a second term that tips the balance away from busy volumes.

Moving a sealed partitionlet `p` carries its weight ``bytes(p) + HEAT_WEIGHT *
read_bytes(p)`` from one volume to another; write heat stays where it is (writes go to
active partitionlets, which never move). The plan is greedy: while the gap between the
most and the least loaded volumes is more than `BALANCED_FRACTION` of the mean load, it
takes, over every source volume, the move to the least loaded volume that lowers the sum
of squared loads the most (a weight `w` over a gap `g` gains ``w * (g - w)``, so only
``0 < w < g`` helps and ``w = g / 2`` helps most). A partitionlet moves at most once per
rebalance, and a run on a balanced cluster moves nothing.

The move
--------
One partitionlet at a time, so that others read and write all along:

1. copy: the row (state SEALED) and every batch go into the target volume in one target
   transaction, read from one snapshot of the source, fsynced;
2. switch: the catalog row's `volume_id` changes in one catalog transaction, only if the
   partitionlet is still sealed and still on the source, with a topology bump so that
   producers and consumers re-read their metadata; fsynced;
3. delete: the source is purged (leaving a tombstone), in one source transaction that
   first checks that the source is still as it was copied; if a compaction rewrote it
   meanwhile, the copy is refreshed from it (unless the copy was rewritten too, by a
   compaction that already read the new chain) and the delete tried again.

A reader that cached the chain before the switch and reads the source after the purge
finds no batches and a DELETED row: `engine.storage.log` then re-reads the chain and reads the
target, so nothing is skipped or read twice.

Crash safety: a process that dies between copy and switch leaves an orphan copy in the
target; one that dies between switch and delete leaves an orphan in the source. An orphan
is a live row of a volume whose partitionlet the catalog places on another volume (or
nowhere). Nothing reads orphans (readers go through the catalog); every rebalance starts
by purging them, and a copy replaces any leftover row of its partitionlet in the target.
Moves and orphan clean-up of one cluster are serialized across threads and processes by a
lock file, because a move in progress looks exactly like an orphan to anyone else.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import InvalidArgument, InvalidPartition, PartitionletError
from engine.ops.heat import heat_map
from engine.storage.chain_lock import chain_lock
from engine.storage.volume import SEALED

if TYPE_CHECKING:
    from engine.cluster import Cluster

HEAT_WINDOW_S = 300
HEAT_WEIGHT = 1.0
# Volumes whose loads are all within this fraction of the mean load are balanced.
BALANCED_FRACTION = 0.02
# Times a move copies its source again because a compaction rewrote it during the move.
MAX_REFRESHES = 8


@dataclass(frozen=True)
class Move:
    """A partitionlet moved (or, in a dry run, to be moved) from one volume to another."""

    partitionlet: int
    topic: str  # full name
    partition: int
    from_volume: int
    to_volume: int
    bytes: int


@dataclass(frozen=True)
class VolumeBalance:
    """One volume before and after a rebalance.

    `bytes_before` is measured at the start (orphans left out); `bytes_after` is measured
    at the end, or projected in a dry run. `heat` is the volume's heat at the start (its
    recent write bytes plus the read bytes of the partitionlets on it); the scores are
    ``bytes + HEAT_WEIGHT * heat``, the heat after counting the read heat that moved.
    """

    volume: int
    bytes_before: int
    bytes_after: int
    heat: int
    score_before: int
    score_after: int


@dataclass(frozen=True)
class Orphan:
    """A live copy of a partitionlet in a volume where the catalog does not place it."""

    partitionlet: int
    volume: int
    bytes: int


@dataclass(frozen=True)
class RebalanceReport:
    """What `rebalance` did (or, with `dry_run`, would do).

    `orphans` were found at the start and purged (not in a dry run); `skipped` holds the
    planned partitionlets that changed before their turn (dropped by retention, deleted
    with their topic) and so were left alone.
    """

    dry_run: bool
    moves: tuple[Move, ...]
    volumes: tuple[VolumeBalance, ...]
    orphans: tuple[Orphan, ...] = ()
    skipped: tuple[int, ...] = ()

    @property
    def bytes_moved(self) -> int:
        return sum(m.bytes for m in self.moves)

    @property
    def bytes_before(self) -> dict[int, int]:
        return {v.volume: v.bytes_before for v in self.volumes}

    @property
    def bytes_after(self) -> dict[int, int]:
        return {v.volume: v.bytes_after for v in self.volumes}


@dataclass(frozen=True)
class Candidate:
    """A sealed partitionlet the planner may move; `weight` is its share of the load."""

    id: int
    volume: int
    weight: int
    bytes: int = 0
    topic_id: int = 0
    partition: int = 0


# --- the entry points --------------------------------------------------------------------


def rebalance(
    cluster: Cluster, *, dry_run: bool = False, max_moves: int | None = None
) -> RebalanceReport:
    """Move sealed partitionlets between the volumes of `cluster` to even out their loads
    (see the module docstring); at most `max_moves` of them when given. With `dry_run`,
    plan and report only: nothing is written, orphans included."""
    cluster.check_open()
    if max_moves is not None and (
        isinstance(max_moves, bool) or not isinstance(max_moves, int) or max_moves < 0
    ):
        raise InvalidArgument(
            f"max_moves must be a non-negative integer or None, got {max_moves!r}"
        )
    with chain_lock(cluster.path, clock=cluster.clock):
        orphans, live = _find_orphans(cluster)
        if not dry_run:
            _purge_orphans(cluster, orphans)
        catalog = cluster.catalog
        orphan_ids = {(o.volume, o.partitionlet) for o in orphans}
        volume_bytes = {
            vid: sum(b for pl_id, (_, b) in rows.items() if (vid, pl_id) not in orphan_ids)
            for vid, rows in live.items()
        }
        read_heat = _read_heat(cluster)
        write_heat = {
            vid: vol.recent_write_bytes(HEAT_WINDOW_S)
            for vid, vol in cluster.open_volumes().items()
        }
        placed = catalog.partitionlet_volumes()
        heat = dict(write_heat)
        for pl_id, vid in placed.items():
            if vid in heat:
                heat[vid] += read_heat.get(pl_id, 0)
        loads = {vid: volume_bytes[vid] + _scaled(heat[vid]) for vid in volume_bytes}

        candidates = []
        for row in catalog.all_partitionlets():
            state = live.get(row.volume_id, {}).get(row.id)
            if row.active or row.archive_file is not None or state is None or state[0] != SEALED:
                continue  # archived ones live in their file: nothing to move
            candidates.append(
                Candidate(
                    row.id,
                    row.volume_id,
                    state[1] + _scaled(read_heat.get(row.id, 0)),
                    state[1],
                    row.topic_id,
                    row.partition,
                )
            )
        planned = plan(loads, candidates, max_moves=max_moves)

        names: dict[int, str | None] = {}

        def topic_name(topic_id: int) -> str | None:
            if topic_id not in names:
                row = catalog.topic_by_id(topic_id)
                names[topic_id] = row.full_name if row else None
            return names[topic_id]

        moves: list[Move] = []
        skipped: list[int] = []
        moved_heat: dict[int, int] = dict.fromkeys(heat, 0)
        for cand, target in planned:
            name = topic_name(cand.topic_id)
            if name is None:
                skipped.append(cand.id)
                continue
            move = Move(cand.id, name, cand.partition, cand.volume, target, cand.bytes)
            if not dry_run and not _execute(cluster, move):
                skipped.append(cand.id)
                continue
            moves.append(move)
            r = read_heat.get(cand.id, 0)
            moved_heat[cand.volume] -= r
            moved_heat[target] += r

        if dry_run:
            after = dict(volume_bytes)
            for m in moves:
                after[m.from_volume] -= m.bytes
                after[m.to_volume] += m.bytes
        else:
            after = {vid: vol.sizes()[0] for vid, vol in cluster.open_volumes().items()}
        volumes = tuple(
            VolumeBalance(
                vid,
                volume_bytes[vid],
                after[vid],
                heat[vid],
                volume_bytes[vid] + _scaled(heat[vid]),
                after[vid] + _scaled(heat[vid] + moved_heat[vid]),
            )
            for vid in sorted(volume_bytes)
        )
        return RebalanceReport(dry_run, tuple(moves), volumes, tuple(orphans), tuple(skipped))


def move(cluster: Cluster, partitionlet: int, to_volume: int) -> Move | None:
    """Move one sealed partitionlet to `to_volume` (copy, switch, delete; see the module
    docstring). Returns the move, or None when it did not happen because the partitionlet
    is gone or was not sealed any more by the time of the copy. Refuses an active one."""
    cluster.check_open()
    if to_volume not in cluster.open_volumes():
        raise InvalidArgument(f"no volume {to_volume!r} in this cluster")
    catalog = cluster.catalog
    with chain_lock(cluster.path, clock=cluster.clock):
        row = catalog.partitionlet(partitionlet)
        if row is None:
            return None
        if row.active:
            raise InvalidPartition(
                f"partitionlet {partitionlet} is active: only sealed partitionlets move"
            )
        if row.volume_id == to_volume or row.archive_file is not None:
            return None  # archived: its file is not in a volume
        topic = catalog.topic_by_id(row.topic_id)
        state = cluster.volume(row.volume_id).state(partitionlet)
        if topic is None or state is None or state.state != SEALED:
            return None
        result = Move(
            partitionlet, topic.full_name, row.partition, row.volume_id, to_volume, state.bytes
        )
        return result if _execute(cluster, result) else None


def clean_orphans(cluster: Cluster) -> list[Orphan]:
    """Purge every orphan copy (left by a move that died half-way); returns them."""
    cluster.check_open()
    with chain_lock(cluster.path, clock=cluster.clock):
        orphans, _ = _find_orphans(cluster)
        _purge_orphans(cluster, orphans)
        return orphans


# --- planning ----------------------------------------------------------------------------


def plan(
    loads: dict[int, int],
    candidates: list[Candidate],
    *,
    max_moves: int | None = None,
    balanced_fraction: float = BALANCED_FRACTION,
) -> list[tuple[Candidate, int]]:
    """The moves (candidate, target volume) that even out `loads`, greedily (see the module
    docstring). Pure: changes neither argument."""
    loads = dict(loads)
    if len(loads) < 2:
        return []
    # Per volume, the movable weights in ascending order, for a bisection on gap / 2.
    weights: dict[int, list[tuple[int, int]]] = {vid: [] for vid in loads}
    by_id: dict[int, Candidate] = {}
    for cand in candidates:
        if cand.volume in weights and cand.weight > 0:
            weights[cand.volume].append((cand.weight, cand.id))
            by_id[cand.id] = cand
    for items in weights.values():
        items.sort()
    tolerance = balanced_fraction * sum(loads.values()) / len(loads)
    moves: list[tuple[Candidate, int]] = []
    while max_moves is None or len(moves) < max_moves:
        low = min(loads, key=lambda v: (loads[v], v))
        best: tuple[int, int, int] | None = None  # (gain, source, weight)
        for source in sorted(loads, key=lambda v: (-loads[v], v)):
            gap = loads[source] - loads[low]
            if gap <= tolerance:
                break  # sources come in decreasing load: no later gap is wider
            items = weights[source]
            i = bisect.bisect_left(items, (gap / 2, -1))
            for j in (i - 1, i):  # the weights on either side of gap / 2
                if 0 <= j < len(items) and items[j][0] < gap:
                    w = items[j][0]
                    gain = w * (gap - w)
                    if best is None or gain > best[0]:
                        best = (gain, source, w)
        if best is None:
            break
        _, source, w = best
        # Of equal weights, the oldest partitionlet (smallest id): the coldest data.
        j = bisect.bisect_left(weights[source], (w, -1))
        _, pl_id = weights[source].pop(j)
        loads[source] -= w
        loads[low] += w
        moves.append((by_id[pl_id], low))
    return moves


def _scaled(heat: int) -> int:
    return round(HEAT_WEIGHT * heat)


def _read_heat(cluster: Cluster) -> dict[int, int]:
    """Bytes read per partitionlet in the last `HEAT_WINDOW_S` seconds, wherever it lived."""
    counts = heat_map(cluster, HEAT_WINDOW_S).partitionlets
    return {pl_id: load.read_bytes for pl_id, load in counts.items() if load.read_bytes}


# --- moving ------------------------------------------------------------------------------


def _execute(cluster: Cluster, move: Move) -> bool:
    """Copy, switch, delete. False (with nothing left behind) if the partitionlet changed
    under the move; an error part-way leaves at most an orphan, purged here if possible
    and otherwise by the next rebalance."""
    pl_id = move.partitionlet
    source = cluster.volume(move.from_volume)
    target = cluster.volume(move.to_volume)
    copied = target.copy_partitionlet_from(source, pl_id)
    if copied is None:
        return False  # not sealed on the source any more: dropped by retention
    try:
        switched = cluster.catalog.move_partitionlet(pl_id, move.from_volume, move.to_volume)
    except Exception:
        _settle(cluster, move)
        raise
    if not switched:
        target.purge([pl_id])  # the catalog moved on (retention, topic deleted): an orphan
        return False
    # Delete the source only as it was copied. If a compaction rewrote it meanwhile, copy
    # it again, unless a later compaction (one that read the new chain) rewrote the target
    # too: that one is the newer truth.
    for _ in range(MAX_REFRESHES):
        if source.purge_if_unchanged(pl_id, copied):
            return True
        copied = target.copy_partitionlet_from(source, pl_id, expect_here=copied)
        if copied is None:
            break
    source.purge([pl_id])
    return True


def _settle(cluster: Cluster, move: Move) -> None:
    """After a failed switch: purge whichever copy the catalog does not point at."""
    try:
        row = cluster.catalog.partitionlet(move.partitionlet)
        keep = row.volume_id if row is not None else None
        for vid in (move.from_volume, move.to_volume):
            if vid != keep:
                cluster.volume(vid).purge([move.partitionlet])
    except PartitionletError:
        pass  # the next rebalance finds the orphan


def _find_orphans(cluster: Cluster) -> tuple[list[Orphan], dict[int, dict[int, tuple[int, int]]]]:
    """Orphans, and the live rows of every volume ({volume: {id: (state, bytes)}}).

    The volumes are read before the catalog: a partitionlet enters the catalog before any
    volume holds a row of it, so a row seen in a volume is already in the catalog when the
    catalog is read, unless it was deleted meanwhile (and then it is an orphan indeed).
    """
    live = {vid: vol.live_partitionlets() for vid, vol in sorted(cluster.open_volumes().items())}
    placed = cluster.catalog.partitionlet_volumes()
    orphans = [
        Orphan(pl_id, vid, nbytes)
        for vid, rows in live.items()
        for pl_id, (_, nbytes) in sorted(rows.items())
        if placed.get(pl_id) != vid
    ]
    return orphans, live


def _purge_orphans(cluster: Cluster, orphans: list[Orphan]) -> None:
    by_volume: dict[int, list[int]] = {}
    for o in orphans:
        by_volume.setdefault(o.volume, []).append(o.partitionlet)
    for vid, ids in by_volume.items():
        cluster.volume(vid).purge(ids)
