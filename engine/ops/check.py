"""`plet check`: verify a cluster's files against each other, name each problem, repair
what can be rebuilt.

What is checked (docs/ARCHITECTURE.md, "Durability"):

- `files`: every volume the catalog lists can be opened (present, a sound header, this
  cluster's), and no volume holds a partitionlet id the catalog never issued;
- `integrity`: SQLite's `integrity_check` of the catalog and every volume (`quick_check`
  with `quick`, which leaves indexes out);
- `chains`: each partition's chain in the catalog against the rows of its volumes: one
  chain without holes, its sealed partitionlets ending where their volume row ends, the
  active one's row starting where the catalog says;
- `counts`: each row's counts and next offset against its batches, read from the table
  itself (so a damaged index cannot hide one); with `quick`, only the next offset of an
  active row below the catalog's mark, by the index;
- `orphans`: volume rows the catalog does not place there (an interrupted move);
- `archives`: every archived partitionlet's file against the catalog;
- `checksums` (not `quick`): every stored batch against its CRC32C, live and archived;
- `groups`: committed offsets against their partitions' log ends.

Each check is one function `(Context) -> list[Problem]` in `CHECKS`; adding a check is
adding one. A problem says what can repair it: `plet check --repair` rebuilds indexes,
recounts rows, corrects a sealed end the volume vouches for and removes orphans; the rest
needs a replica or a backup. The last result is kept in the catalog (`last_check`), which
the consoles show.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from engine.errors import InvalidArgument, StorageError
from engine.storage.volume import ACTIVE, DELETED, PartitionletState

if TYPE_CHECKING:
    from engine.cluster import Cluster
    from engine.storage.catalog import PartitionletRow

# What `plet check` suggests when a problem cannot be rebuilt from what the cluster holds.
RESTORE = "restore the file from a replica (`plet replica`) or a backup"
# lost commits: what a replica or backup may still hold, or else give up for good
LOSS = (
    "restore the file from a replica (`plet replica`) or a backup, or give the lost offsets "
    "up: plet check --repair --accept-loss"
)
LAST_CHECK_KEY = "last_check"


@dataclass(frozen=True)
class Problem:
    """One thing found wrong: which check found it, in which file, about which partition
    (when it concerns one), what to do, and whether `plet check --repair` does it."""

    check: str
    file: str  # "catalog", "volume 2", or an archive file's name
    message: str
    topic: str | None = None
    partition: int | None = None
    repair: str = RESTORE
    repairable: bool = False

    @property
    def where(self) -> str:
        if self.topic is None:
            return self.file
        part = f" partition {self.partition}" if self.partition is not None else ""
        return f"{self.topic}{part} ({self.file})"


@dataclass(frozen=True)
class CheckReport:
    """What `check` found (and repaired): `ok` when nothing is wrong."""

    cluster: str
    path: str
    quick: bool
    checked_ms: int
    seconds: float
    checked: dict[str, int]  # what was looked at: volumes, partitionlets, groups, ...
    problems: tuple[Problem, ...]
    repaired: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


@dataclass(frozen=True)
class LastCheck:
    """The last `check` of a cluster, as the consoles show it."""

    checked_ms: int
    quick: bool
    problems: int
    summary: tuple[str, ...]  # the first problems, one line each

    @property
    def ok(self) -> bool:
        return self.problems == 0


@dataclass
class Context:
    """What the checks read once and share: the cluster, its catalog rows by partition,
    each readable volume's rows (and, unless `quick`, what its batches hold)."""

    cluster: Cluster
    quick: bool
    chains: dict[tuple[int, int], list[PartitionletRow]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    rows: dict[int, dict[int, PartitionletState]] = field(default_factory=dict)
    stored: dict[int, dict[int, tuple[int, int, int, int]]] = field(default_factory=dict)
    unreadable: set[int] = field(default_factory=set)  # volumes whose rows could not be read
    ends: dict[tuple[int, int], int] = field(default_factory=dict)  # log end offsets
    # (topic id, partition, first, end) of the offsets given up (`--accept-loss`)
    lost: set[tuple[int, int, int, int]] = field(default_factory=set)

    def stored_end(self, volume_id: int, pl_id: int) -> int | None:
        """The last offset a partitionlet's batches reach, whatever its row says: from the
        counts read (full check), else one index lookup (`quick`); None when unknown."""
        stored = self.stored.get(volume_id)
        if stored is not None:
            found = stored.get(pl_id)
            return None if found is None else found[3]
        try:
            return self.cluster.open_volumes()[volume_id].stored_ends([pl_id])[pl_id]
        except (KeyError, StorageError):
            return None  # `integrity` says why

    def name(self, topic_id: int) -> str:
        """A topic's full name, read when a problem needs it (most checks find none)."""
        name = self.names.get(topic_id)
        if name is None:
            topic = self.cluster.catalog.topic_by_id(topic_id)
            name = self.names[topic_id] = f"topic #{topic_id}" if topic is None else topic.full_name
        return name


Check = Callable[[Context], list[Problem]]


# --- the checks --------------------------------------------------------------------------


def _files(ctx: Context) -> list[Problem]:
    cluster = ctx.cluster
    found = []
    on_volume: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for key, chain in ctx.chains.items():
        for pl in chain:
            if pl.archive_file is None:
                on_volume[pl.volume_id].add(key)
    for vid, damage in sorted(cluster.damaged_volumes().items()):
        keys = sorted(on_volume.get(vid, ()))
        found.append(Problem("files", f"volume {vid}", damage, repair=RESTORE))
        found += [
            Problem(
                "files",
                f"volume {vid}",
                f"cannot be read or written: volume {vid} is damaged",
                ctx.name(t),
                p,
            )
            for t, p in keys
        ]
    issued = cluster.catalog.issued_partitionlet_id()
    for vid, vol in sorted(cluster.open_volumes().items()):
        highest = vol.max_partitionlet_id()
        if highest > issued:
            found.append(
                Problem(
                    "files",
                    "catalog",
                    f"volume {vid} holds partitionlet {highest} but the catalog issued ids up "
                    f"to {issued} only: the catalog lost commits (an old copy, or a cut WAL)",
                    repair="restore the catalog from a backup",
                )
            )
    return found


def _integrity(ctx: Context) -> list[Problem]:
    found = []
    files: list[tuple[str, Callable[[bool], list[str]]]] = [
        ("catalog", ctx.cluster.catalog.integrity)
    ]
    volumes = ctx.cluster.open_volumes()
    files += [(f"volume {vid}", vol.integrity) for vid, vol in volumes.items()]
    for name, run in files:
        lines = run(ctx.quick)
        if not lines:
            continue
        # An index that disagrees with its table is rebuilt from the table (and checked
        # again after); a table's own damage is not ours to rebuild.
        only_indexes = any(" index " in line for line in lines)
        shown = lines[:3] + ([f"... and {len(lines) - 3} more"] if len(lines) > 3 else [])
        text = "SQLite's integrity check: " + "; ".join(shown)
        repair = "rebuild its indexes: plet check --repair" if only_indexes else RESTORE
        where: list[tuple[str | None, int | None]] = [(None, None)]
        if name != "catalog":  # name the partitions whose batches the index lost
            rows = [int(m.group(1)) for m in map(_MISSING_ROW.match, lines) if m]
            placed = {pl.id: (pl.topic_id, pl.partition) for c in ctx.chains.values() for pl in c}
            try:
                pl_ids = volumes[int(name.split()[1])].partitionlets_of_batches(rows)
            except StorageError:
                pl_ids = set()
            keys = sorted({placed[i] for i in pl_ids if i in placed})
            where = [(ctx.name(t), p) for t, p in keys] or where
        found += [Problem("integrity", name, text, t, p, repair, only_indexes) for t, p in where]
    return found


_MISSING_ROW = re.compile(r"row (\d+) missing from index")


def _chains(ctx: Context) -> list[Problem]:
    found: list[Problem] = []
    for (topic_id, partition), chain in sorted(ctx.chains.items()):
        issues = _chain_issues(ctx, chain)
        if issues:
            topic = ctx.name(topic_id)
            found += [Problem("chains", *i[:2], topic, partition, *i[2:]) for i in issues]
    return found


def _span(pl: PartitionletRow) -> str:
    return f"{pl.base_offset}..{'' if pl.end_offset is None else pl.end_offset - 1}"


def _chain_issues(ctx: Context, chain: list[PartitionletRow]) -> list[tuple[str, str, str, bool]]:
    """(file, text, repair, repairable) of what is wrong with one partition's chain."""
    issues: list[tuple[str, str, str, bool]] = []
    for before, after in zip(chain, chain[1:], strict=False):
        given_up = (before.topic_id, before.partition, before.end_offset, after.base_offset)
        if before.end_offset != after.base_offset and given_up not in ctx.lost:
            end = "active" if before.end_offset is None else f"ends at {before.end_offset}"
            issues.append(
                (
                    "catalog",
                    f"partitionlet {before.id} {end} but the next one ({after.id}) starts at "
                    f"{after.base_offset}: a hole in the chain",
                    RESTORE,
                    False,
                )
            )
    for pl in chain:
        if pl.archive_file is not None or pl.volume_id in ctx.unreadable:
            continue
        row = ctx.rows.get(pl.volume_id, {}).get(pl.id)
        reached = pl.reached_offset if pl.end_offset is None else None
        if reached is not None and row is not None and row.next_offset < reached:
            # what its batches reach (a damaged row below them is the `counts` check's)
            last = ctx.stored_end(pl.volume_id, pl.id)
            if last is not None and last + 1 >= reached:
                reached = None
        if row is not None and row.state != DELETED and row.base_offset == pl.base_offset:
            if pl.end_offset is None and (reached is None or row.next_offset >= reached):
                continue  # the usual case, checked without making a string
            if row.state != ACTIVE and row.next_offset == pl.end_offset:
                continue
        vol = f"volume {pl.volume_id}"
        if reached is not None and (
            row is None or row.state == DELETED or row.next_offset < reached
        ):
            holds = (
                "nothing"
                if row is None or row.state == DELETED
                else f"{row.base_offset}..{row.next_offset - 1}"
            )
            text = (
                f"partitionlet {pl.id} reached offset {reached - 1} (the catalog's mark), "
                f"{vol} holds {holds}: the volume lost commits, and the offsets after what it "
                "holds may have been read already"
            )
            issues.append((vol, text, LOSS, False))
            continue
        if row is None or row.state == DELETED:
            if pl.end_offset is None and row is None:
                continue  # active, nothing appended yet
            text = f"partitionlet {pl.id} (offsets {_span(pl)}) has no row in {vol}: its "
            issues.append((vol, text + "messages are gone", LOSS, False))
            continue
        if row.base_offset != pl.base_offset:
            text = (
                f"partitionlet {pl.id} starts at {pl.base_offset} in the catalog, at "
                f"{row.base_offset} in {vol}"
            )
            issues.append((vol, text, RESTORE, False))
        if pl.end_offset is not None and (row.state == ACTIVE or row.next_offset != pl.end_offset):
            fix = (
                row.state != ACTIVE
                and row.next_offset > pl.base_offset
                and _successor_starts(chain, pl, row.next_offset)
            )
            text = (
                f"partitionlet {pl.id} holds offsets {_span(pl)} in the catalog, "
                f"{row.base_offset}..{row.next_offset - 1} in {vol}"
                + ("" if row.state != ACTIVE else " (not sealed there: its log was cut)")
            )
            repair = "correct the catalog from the volume: plet check --repair"
            if not fix:
                repair = LOSS if row.next_offset < pl.end_offset else RESTORE
            issues.append(("catalog" if fix else vol, text, repair, fix))
    return issues


def _successor_starts(chain: list[PartitionletRow], pl: PartitionletRow, end: int) -> bool:
    i = chain.index(pl)
    return i + 1 < len(chain) and chain[i + 1].base_offset == end


def _counts(ctx: Context) -> list[Problem]:
    if ctx.quick:
        return _quick_counts(ctx)
    found = []
    placed = {pl.id: key for key, chain in ctx.chains.items() for pl in chain}
    for vid, rows in sorted(ctx.rows.items()):
        stored = ctx.stored.get(vid, {})
        for pl_id, row in rows.items():
            if row.state == DELETED:
                continue
            batches, messages, nbytes, last = stored.get(pl_id, (0, 0, 0, row.base_offset - 1))
            wrong = []
            if row.next_offset <= last:
                wrong.append(f"its next offset is {row.next_offset}, it holds offsets up to {last}")
            if (row.batches, row.messages, row.bytes) != (batches, messages, nbytes):
                wrong.append(
                    f"its row counts {row.batches} batches, {row.messages} messages, "
                    f"{row.bytes} bytes; its batches are {batches}, {messages}, {nbytes}"
                )
            if wrong:
                topic_id, partition = placed.get(pl_id, (None, None))
                found.append(
                    Problem(
                        "counts",
                        f"volume {vid}",
                        f"partitionlet {pl_id}: " + "; ".join(wrong),
                        None if topic_id is None else ctx.name(topic_id),
                        partition,
                        "recount it from its batches: plet check --repair",
                        True,
                    )
                )
    return found


def _quick_counts(ctx: Context) -> list[Problem]:
    """Quick: only the rows whose next offset lies below the catalog's mark are checked
    against their batches (by the index), since those would take offsets again."""
    found = []
    for (topic_id, partition), chain in ctx.chains.items():
        pl = chain[-1]
        row = ctx.rows.get(pl.volume_id, {}).get(pl.id)
        if pl.end_offset is not None or pl.reached_offset is None or row is None:
            continue
        if row.state == DELETED or row.next_offset >= pl.reached_offset:
            continue
        last = ctx.stored_end(pl.volume_id, pl.id)
        if last is not None and row.next_offset <= last:
            found.append(
                Problem(
                    "counts",
                    f"volume {pl.volume_id}",
                    f"partitionlet {pl.id}: its next offset is {row.next_offset}, it holds "
                    f"offsets up to {last}",
                    ctx.name(topic_id),
                    partition,
                    "recount it from its batches: plet check --repair",
                    True,
                )
            )
    return found


def _orphans(ctx: Context) -> list[Problem]:
    placed = ctx.cluster.catalog.partitionlet_volumes()
    return [
        Problem(
            "orphans",
            f"volume {vid}",
            f"partitionlet {pl_id} has a row here but the catalog does not place it here "
            "(left by an interrupted move or delete)",
            repair="remove it: plet check --repair",
            repairable=True,
        )
        for vid, rows in sorted(ctx.rows.items())
        for pl_id, row in sorted(rows.items())
        if row.state != DELETED and placed.get(pl_id) != vid
    ]


def _archives(ctx: Context) -> list[Problem]:
    archived = [pl for chain in ctx.chains.values() for pl in chain if pl.archive_file]
    if not archived:
        return []
    from engine.storage import archive  # pyarrow: loaded when an archive is met

    found = []
    for pl in archived:
        text = archive.verify(ctx.cluster.path, pl)
        if text is not None:
            found.append(
                Problem("archives", str(pl.archive_file), text, ctx.name(pl.topic_id), pl.partition)
            )
    return found


def _groups(ctx: Context) -> list[Problem]:
    rows = ctx.cluster.catalog.groups.all_offsets(sorted({t for t, _ in ctx.chains}))
    found = []
    for group_id, topic_id, partition, offset, _, _ in rows:
        end = ctx.ends.get((topic_id, partition))
        if end is not None and offset > end:
            topic = ctx.name(topic_id)
            try:  # the end read now: the log may have grown since the rows were read
                end = ctx.cluster.partition_log(topic_id, partition, topic).end_offset()
            except StorageError:
                pass  # a damaged partition: what was read stands
            if offset <= end:
                continue
            found.append(
                Problem(
                    "groups",
                    "catalog",
                    f"group {group_id!r} committed offset {offset}, beyond the log end {end}: "
                    "messages it read are no longer stored",
                    topic,
                    partition,
                    f"restore the volume, or move the group: plet group reset --group "
                    f"{group_id} --topic {topic} --to-latest",
                )
            )
    return found


def _checksums(ctx: Context) -> list[Problem]:
    """Every stored batch against its CRC32C, live (`Volume.verify_batches`) and archived
    (each Parquet page and the footer, `archive.verify_pages`); full mode only: it reads
    every byte."""
    if ctx.quick:
        return []
    volumes = ctx.cluster.open_volumes()
    found: list[Problem] = []
    for (topic_id, partition), chain in sorted(ctx.chains.items()):
        for pl in chain:
            if pl.archive_file:
                from engine.storage import archive  # pyarrow: loaded when one is met

                try:
                    damaged = archive.verify_pages(ctx.cluster.path, pl)
                except StorageError:
                    continue  # missing or unreadable: `archives` says so
                where = str(pl.archive_file)
            else:
                vol = volumes.get(pl.volume_id)
                if vol is None or pl.volume_id in ctx.unreadable:
                    continue  # `files` and `integrity` say why
                damaged = vol.verify_batches(pl.id).problems
                where = f"volume {pl.volume_id}"
            found += [
                Problem("checksums", where, str(exc), ctx.name(topic_id), partition)
                for exc in damaged
            ]
    return found


CHECKS: list[tuple[str, Check]] = [
    ("files", _files),
    ("integrity", _integrity),
    ("chains", _chains),
    ("counts", _counts),
    ("orphans", _orphans),
    ("archives", _archives),
    ("checksums", _checksums),
    ("groups", _groups),
]


# --- running them ------------------------------------------------------------------------


def _context(cluster: Cluster, quick: bool) -> Context:
    ctx = Context(cluster, quick)
    for pl in cluster.catalog.all_partitionlets():
        ctx.chains.setdefault((pl.topic_id, pl.partition), []).append(pl)
    ctx.lost = {(t, p, first, end) for t, p, first, end, _ms in cluster.catalog.lost_offsets()}
    for vid, vol in cluster.open_volumes().items():
        try:
            rows, stored = vol.snapshot(counts=not quick)
            ctx.rows[vid] = {row.id: row for row in rows}
            if stored is not None:
                ctx.stored[vid] = stored
        except StorageError:
            ctx.unreadable.add(vid)  # `integrity` says why
    for key, chain in ctx.chains.items():
        last = chain[-1]
        if last.end_offset is not None:
            ctx.ends[key] = last.end_offset
        elif last.volume_id not in ctx.unreadable and last.volume_id in ctx.rows:
            row = ctx.rows[last.volume_id].get(last.id)
            ctx.ends[key] = last.base_offset if row is None else row.next_offset
    return ctx


def run(
    cluster: Cluster, *, quick: bool = False, repair: bool = False, accept_loss: bool = False
) -> CheckReport:
    """Check `cluster` (see the module's docstring); with `repair`, repair what can be
    rebuilt and check again. With `accept_loss` too, the offsets a volume lost (its commits
    cut off, its row gone) are given up for good (`accept_losses`). The result is kept as
    the cluster's last check."""
    if accept_loss and not repair:
        raise InvalidArgument("accept_loss is a repair: give repair=True with it")
    cluster.check_open()
    started = time.perf_counter()
    ctx, problems = _find(cluster, quick)
    repaired: list[Problem] = []
    if repair and any(p.repairable for p in problems):
        repaired = _repair(cluster, [p for p in problems if p.repairable])
        ctx, problems = _find(cluster, quick)
    if accept_loss and any(p.repair == LOSS for p in problems):
        repaired += accept_losses(cluster)
        ctx, problems = _find(cluster, quick)
    report = CheckReport(
        cluster.name,
        str(cluster.path),
        quick,
        cluster.clock.now_ms(),
        time.perf_counter() - started,
        {
            "volumes": len(cluster.open_volumes()) + len(cluster.damaged_volumes()),
            "partitionlets": sum(len(chain) for chain in ctx.chains.values()),
            "groups": len(cluster.catalog.group_ids()),
        },
        tuple(problems),
        tuple(repaired),
    )
    _remember(cluster, report)
    return report


def run_path(
    path: str | os.PathLike[str],
    *,
    quick: bool = False,
    repair: bool = False,
    accept_loss: bool = False,
) -> CheckReport:
    """`run` on the cluster at `path`; a catalog that cannot be opened is itself the
    report's one problem (nothing else can be checked without it)."""
    from engine.cluster import Cluster

    try:
        cluster = Cluster.open(path)
    except StorageError as exc:
        return CheckReport(
            "", str(path), quick, int(time.time() * 1000), 0.0, {},
            (Problem("files", "catalog", str(exc), repair=RESTORE),),
        )  # fmt: skip
    with cluster:
        return run(cluster, quick=quick, repair=repair, accept_loss=accept_loss)


def _find(cluster: Cluster, quick: bool) -> tuple[Context, list[Problem]]:
    """Run every check; on a live cluster, what a pass finds may be a writer caught half-way
    between two files (a roll, a move, a commit after the rows were read), so what a pass
    finds counts only if a second pass finds it too."""
    ctx, found = _pass(cluster, quick)
    if found:
        again = set(_pass(cluster, quick)[1])
        found = [p for p in found if p in again]
    return ctx, found


def _pass(cluster: Cluster, quick: bool) -> tuple[Context, list[Problem]]:
    ctx = _context(cluster, quick)
    found: list[Problem] = []
    for _, check in CHECKS:
        found += check(ctx)
    return ctx, found


def _repair(cluster: Cluster, problems: list[Problem]) -> list[Problem]:
    """Repair what `problems` say can be (indexes, counts, a sealed end, orphans)."""
    from engine.ops import balance

    done = []
    rebuilt: dict[str, bool] = {}
    for p in problems:
        if p.check == "integrity":
            if p.file not in rebuilt:
                try:
                    if p.file == "catalog":
                        cluster.catalog.reindex()
                    else:
                        cluster.volume(int(p.file.split()[1])).reindex()
                    rebuilt[p.file] = True
                except StorageError:
                    rebuilt[p.file] = False  # the check after says it is still there
            if rebuilt[p.file]:
                done.append(p)
    if any(p.check == "counts" for p in problems):
        for vol in cluster.open_volumes().values():
            stored = vol.stored()
            for row in vol.rows():
                if row.state == DELETED:
                    continue
                n, m, b, last = stored.get(row.id, (0, 0, 0, row.base_offset - 1))
                if (row.batches, row.messages, row.bytes) != (n, m, b) or row.next_offset <= last:
                    vol.recount(row.id, n, m, b, last)
        done += [p for p in problems if p.check == "counts"]
    chain_fixes = [p for p in problems if p.check == "chains"]
    if chain_fixes:
        for pl in cluster.catalog.all_partitionlets():
            if pl.end_offset is None or pl.archive_file is not None:
                continue
            holder = cluster.open_volumes().get(pl.volume_id)
            state = holder.state(pl.id) if holder is not None else None
            if state is not None and state.state != ACTIVE and state.next_offset != pl.end_offset:
                chain = cluster.catalog.chain(pl.topic_id, pl.partition)
                if _successor_starts(chain, pl, state.next_offset):
                    cluster.catalog.set_end_offset(pl.id, state.next_offset)
        done += chain_fixes
    if any(p.check == "orphans" for p in problems):
        balance.clean_orphans(cluster)
        done += [p for p in problems if p.check == "orphans"]
    return done


def accept_losses(cluster: Cluster) -> list[Problem]:
    """Give up, for good, the offsets the volumes lost (`plet check --repair --accept-loss`,
    for when no replica or backup holds them; Kafka's unclean leader election is the like
    of it): each partitionlet whose volume holds less than the catalog says (a sealed one
    ending short, or the active one below its writers' mark) is sealed where its volume
    ends, and the partition goes on after the lost offsets, which are recorded
    (`Catalog.lost_offsets`) and never handed out again. Readers pass over them; a group
    committed inside them reads on from the first offset after. One entry per range."""
    catalog = cluster.catalog
    volumes = cluster.open_volumes()
    live = [pl for pl in catalog.all_partitionlets() if pl.archive_file is None]
    by_volume: dict[int, list[int]] = defaultdict(list)
    for pl in live:
        by_volume[pl.volume_id].append(pl.id)
    states: dict[int, PartitionletState] = {}
    for vid, ids in by_volume.items():  # one read transaction per volume
        if vid in volumes:
            states.update(volumes[vid].states(ids))
    done = []
    for pl in live:
        holder = volumes.get(pl.volume_id)
        if holder is None:
            continue  # a volume that cannot be opened: restore it
        state = states.get(pl.id)
        if state is not None and state.state == DELETED:
            continue
        lost_end = pl.reached_offset if pl.end_offset is None else pl.end_offset
        if lost_end is None:
            continue  # active with no mark: nothing known lost
        held = pl.base_offset if state is None else state.next_offset
        if held < lost_end:  # unless its row says less than its batches hold (a recount)
            stored = holder.stored_ends([pl.id])[pl.id]
            held = held if stored is None else max(held, stored + 1)
        if held >= lost_end:
            continue
        topic = catalog.topic_by_id(pl.topic_id)
        if topic is None:
            continue  # deleted meanwhile
        end = holder.seal_as_it_is(
            pl.id, topic.stream_id, pl.topic_id, pl.partition, pl.base_offset
        )
        if end is None or end >= lost_end:
            continue
        if catalog.accept_loss(pl.id, end, lost_end, pl.volume_id):
            done.append(
                Problem(
                    "chains",
                    f"volume {pl.volume_id}",
                    f"offsets {end}..{lost_end - 1} given up (partitionlet {pl.id} ends at "
                    f"{end}, where its volume ends; none of them is handed out again)",
                    topic.full_name,
                    pl.partition,
                    LOSS,
                )
            )
    return done


def _remember(cluster: Cluster, report: CheckReport) -> None:
    summary = [f"{p.where}: {p.message}" for p in report.problems[:5]]
    value = {
        "checked_ms": report.checked_ms,
        "quick": report.quick,
        "problems": len(report.problems),
        "summary": summary,
    }
    try:
        cluster.catalog.set_setting(LAST_CHECK_KEY, json.dumps(value))
    except StorageError:
        pass  # a catalog that cannot be written: the report itself says why


def last_check(cluster: Cluster) -> LastCheck | None:
    """The last `plet check` of this cluster (None: never checked)."""
    text = cluster.catalog.settings().get(LAST_CHECK_KEY)
    if text is None:
        return None
    data = json.loads(text)
    return LastCheck(
        int(data["checked_ms"]), bool(data["quick"]), int(data["problems"]), tuple(data["summary"])
    )


def health(cluster: Cluster) -> tuple[bool, str]:
    """(sound, one line) of what the consoles show: the volumes found damaged at open and
    the last `plet check`'s result, or that none ran."""
    from engine.times import format_ms

    damaged = cluster.damaged_volumes()
    last = last_check(cluster)
    parts = []
    if damaged:
        parts.append(
            f"damaged volume{'s' if len(damaged) > 1 else ''} {', '.join(map(str, damaged))}"
        )
    if last is None:
        parts.append("never checked (plet check)")
    else:
        kind = "quick check" if last.quick else "check"
        found = (
            "no problems"
            if last.ok
            else f"{last.problems} problem{'s' if last.problems > 1 else ''}"
        )
        parts.append(f"last {kind} {format_ms(last.checked_ms, seconds=True)}: {found}")
    return not damaged and (last is None or last.ok), "; ".join(parts)


def suggestions(report: CheckReport) -> list[str]:
    """The distinct repairs the report's problems call for, repairable ones first."""
    seen: dict[str, bool] = {}
    for p in report.problems:
        seen.setdefault(p.repair, p.repairable)
    return sorted(seen, key=lambda r: not seen[r])


__all__ = [
    "CHECKS",
    "CheckReport",
    "LastCheck",
    "Problem",
    "health",
    "last_check",
    "run",
    "run_path",
    "suggestions",
]
