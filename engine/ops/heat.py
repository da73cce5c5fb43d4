"""Heat: recent load, in messages and bytes written and read per second.

Each volume keeps counts per partitionlet in buckets of `HEAT_BUCKET_S` seconds (table
`heat`). Appends count their writes in their own transaction; a consumer counts what it
reads in memory (`ReadCounter`) and adds it to the volumes every few seconds, so neither
`send` nor `poll` pays a write for it. `heat_map` sums the buckets of a window per
volume, topic, partition and partitionlet, and per bucket for the heat maps.
"""

from __future__ import annotations

import heapq
import math
import threading
import weakref
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from engine import names
from engine.errors import InvalidArgument, NotFound, PartitionletError
from engine.records import TopicPartition
from engine.storage.volume import HEAT_BUCKET_S, Volume

if TYPE_CHECKING:
    from engine.cluster import Cluster

# How often a consumer adds its read counts to the volumes.
READ_FLUSH_S = 5.0
MAX_WINDOW_S = 86400
MIN_WINDOW_S = HEAT_BUCKET_S  # one bucket
# A bucket is final (no append or read flush still adds to it) this long after it ends;
# only final buckets are kept in the column cache (see `_Rollup`).
FINAL_AFTER_MS = 5000


@dataclass(frozen=True)
class Load:
    """Messages and bytes written and read during `seconds`."""

    write_messages: int = 0
    write_bytes: int = 0
    read_messages: int = 0
    read_bytes: int = 0
    seconds: float = HEAT_BUCKET_S

    def __add__(self, other: Load) -> Load:
        return Load(
            self.write_messages + other.write_messages,
            self.write_bytes + other.write_bytes,
            self.read_messages + other.read_messages,
            self.read_bytes + other.read_bytes,
            self.seconds,
        )

    @property
    def write_messages_per_s(self) -> float:
        return self.write_messages / self.seconds

    @property
    def write_bytes_per_s(self) -> float:
        return self.write_bytes / self.seconds

    @property
    def read_messages_per_s(self) -> float:
        return self.read_messages / self.seconds

    @property
    def read_bytes_per_s(self) -> float:
        return self.read_bytes / self.seconds

    @property
    def messages_per_s(self) -> float:
        return (self.write_messages + self.read_messages) / self.seconds


def _load(counts: Sequence[int], seconds: float) -> Load:
    """The Load of four counts (written messages and bytes, read messages and bytes)."""
    wm, wb, rm, rb = counts
    return Load(wm, wb, rm, rb, seconds)


@dataclass(frozen=True)
class HeatMap:
    """Load over the last `window_s` seconds, as totals and per bucket of `bucket_s`.

    `buckets` are the start times (epoch ms) of the buckets, oldest first; every series
    in `volume_series` and `partition_series` has one `Load` per bucket.
    """

    window_s: int
    bucket_s: int
    buckets: list[int]
    volumes: dict[int, Load] = field(default_factory=dict)
    topics: dict[str, Load] = field(default_factory=dict)
    partitions: dict[TopicPartition, Load] = field(default_factory=dict)
    partitionlets: dict[int, Load] = field(default_factory=dict)
    volume_series: dict[int, list[Load]] = field(default_factory=dict)
    partition_series: dict[TopicPartition, list[Load]] = field(default_factory=dict)

    @property
    def total(self) -> Load:
        result = Load(seconds=self.window_s)
        for load in self.volumes.values():
            result = result + load
        return result

    def hottest_partitions(self, n: int = 20) -> list[tuple[TopicPartition, Load]]:
        ranked = sorted(
            self.partitions.items(), key=lambda item: (-item[1].messages_per_s, item[0])
        )
        return ranked[:n]


class ReadCounter:
    """A consumer's read counts, kept in memory and added to the volumes now and then.

    Used by one consumer thread; `flush` is cheap when nothing was read.
    """

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._counts: dict[tuple[int, int], list[int]] = {}
        self._next_flush = cluster.clock.monotonic() + READ_FLUSH_S

    def add(self, volume_id: int, pl_id: int, messages: int, nbytes: int) -> None:
        counts = self._counts.get((volume_id, pl_id))
        if counts is None:
            self._counts[(volume_id, pl_id)] = [messages, nbytes]
        else:
            counts[0] += messages
            counts[1] += nbytes

    def maybe_flush(self) -> None:
        if self._counts and self._cluster.clock.monotonic() >= self._next_flush:
            self.flush()

    def flush(self) -> None:
        counts, self._counts = self._counts, {}
        self._next_flush = self._cluster.clock.monotonic() + READ_FLUSH_S
        if not counts:
            return
        bucket = self._cluster.clock.now_ms() // (HEAT_BUCKET_S * 1000)
        by_volume: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
        for (volume_id, pl_id), (messages, nbytes) in counts.items():
            by_volume[volume_id].append((bucket, pl_id, messages, nbytes))
        for volume_id, rows in by_volume.items():
            try:
                self._cluster.volume(volume_id).add_read_heat(rows)
            except PartitionletError:
                pass  # heat is advisory: a busy volume must not fail a poll


def _add(into: list[int], wm: int, wb: int, rm: int, rb: int) -> None:
    into[0] += wm
    into[1] += wb
    into[2] += rm
    into[3] += rb


# What `top` ranks partitions by: indexes into [w_messages, w_bytes, r_messages, r_bytes].
RANK_BY = {
    "messages": (0, 2),
    "bytes": (1, 3),
    "write_messages": (0,),
    "write_bytes": (1,),
    "read_messages": (2,),
    "read_bytes": (3,),
}


def _stream_and_name(cluster: Cluster, full_name: str) -> tuple[int, str] | None:
    """(stream id, topic name) of a full topic name, or None when it does not exist."""
    try:
        stream_path, name = names.split_full_name(full_name)
        return cluster.catalog.stream(stream_path).id, name
    except (NotFound, ValueError):
        return None


def heat_map(
    cluster: Cluster,
    window_s: int = 300,
    top: int | None = None,
    by: str = "messages",
    include: Iterable[TopicPartition] = (),
    columns: int | None = None,
) -> HeatMap:
    """Sum the volumes' heat buckets of the last `window_s` seconds.

    With `top`, only the `top` hottest partitions (by messages per second) are in
    `partitions`, `partition_series` and `topics`, and `partitionlets` is left empty;
    volumes stay complete.
    A console asks for the hottest few, which stays fast when 100,000 partitions are warm.

    With `columns`, the series have at most `columns` entries, each summing whole
    buckets (see `_columns_map`): what a heat map draws, from a per-volume cache.
    """
    if (
        isinstance(window_s, bool)
        or not isinstance(window_s, int)
        or not (HEAT_BUCKET_S <= window_s <= MAX_WINDOW_S)
    ):
        raise InvalidArgument(
            f"window_s must be from {HEAT_BUCKET_S} to {MAX_WINDOW_S} seconds, got {window_s!r}"
        )
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
        raise InvalidArgument(f"top must be a count of partitions or None, got {top!r}")
    if by not in RANK_BY:
        raise InvalidArgument(f"by must be one of {', '.join(RANK_BY)}, got {by!r}")
    if columns is not None:
        if isinstance(columns, bool) or not isinstance(columns, int) or columns < 1:
            raise InvalidArgument(f"columns must be a count from 1 or None, got {columns!r}")
        return _columns_map(cluster, window_s, top, by, include, columns)
    bucket_ms = HEAT_BUCKET_S * 1000
    now_bucket = cluster.clock.now_ms() // bucket_ms
    count = window_s // HEAT_BUCKET_S
    first = now_bucket - count + 1
    buckets = [b * bucket_ms for b in range(first, now_bucket + 1)]
    empty = Load()
    window = float(count * HEAT_BUCKET_S)
    result = HeatMap(window_s, HEAT_BUCKET_S, buckets)

    # SQLite sums per bucket, partitionlet and partition; Python merges the volumes (a
    # partition's chain may span several) and builds Loads only for what is returned.
    partition_sums: dict[tuple[int, int], list[int]] = {}
    for volume_id, vol in sorted(cluster.open_volumes().items()):
        series = [empty] * count
        totals = [0, 0, 0, 0]
        for bucket, wm, wb, rm, rb in vol.heat_by_bucket(first, now_bucket):
            series[bucket - first] = Load(wm, wb, rm, rb)
            _add(totals, wm, wb, rm, rb)
        result.volume_series[volume_id] = series
        result.volumes[volume_id] = _load(totals, window)
        if top is None:  # a partitionlet lives in one volume: nothing to merge
            for pl_id, wm, wb, rm, rb in vol.heat_by_partitionlet(first, now_bucket):
                result.partitionlets[pl_id] = Load(wm, wb, rm, rb, window)
        for topic_id, partition, wm, wb, rm, rb in vol.heat_by_partition(first, now_bucket):
            _add(partition_sums.setdefault((topic_id, partition), [0, 0, 0, 0]), wm, wb, rm, rb)

    partition_sums = _consumable(cluster, partition_sums)
    if top is None and not cluster.is_administrator:
        _drop_partitionlets(cluster, result, {t for t, _ in partition_sums})
    keys = _ranked_keys(cluster, partition_sums, top, by, include)
    topic_ids = sorted({topic_id for topic_id, _ in keys})
    full_names = {row.id: row.full_name for row in cluster.catalog.topics_by_id(topic_ids)}
    wanted = set(keys)
    cells: dict[tuple[int, int], list[Load]] = {}
    # only the buckets of the partitions shown (all of them when every one is)
    shown = topic_ids if len(keys) < len(partition_sums) else None
    cell_rows = [
        r
        for vol in cluster.open_volumes().values()
        for r in vol.heat_cells(first, now_bucket, shown)
    ]
    for bucket, topic_id, partition, wm, wb, rm, rb in cell_rows:
        key = (topic_id, partition)
        if key not in wanted:
            continue
        series = cells.setdefault(key, [empty] * count)
        series[bucket - first] = series[bucket - first] + Load(wm, wb, rm, rb)
    for key in keys:
        name = full_names.get(key[0])
        if name is None:
            continue  # the topic was deleted
        tp = TopicPartition(name, key[1])
        result.partition_series[tp] = cells.get(key) or [empty] * count
        result.partitions[tp] = load = _load(partition_sums[key], window)
        result.topics[name] = result.topics.get(name, Load(seconds=window)) + load
    return result


class _Rollup:
    """One volume's final heat over a sliding window of columns, summed per column and
    partitionlet, kept between calls.

    Every call adds only the buckets that became final since the last one and drops the
    columns that slid out of the window, so a page refreshed every few seconds over an
    hour of 100,000 warm partitionlets reads a few buckets, not the hour. Buckets still
    open (the last `FINAL_AFTER_MS`) are read afresh every call and never cached.
    """

    def __init__(self, per: int) -> None:
        self.per = per
        self.lock = threading.Lock()
        self.start = 0  # first bucket summed
        self.done = -1  # last bucket summed (final)
        # column -> partitionlet -> (w_messages, w_bytes, r_messages, r_bytes)
        self.columns: dict[int, dict[int, tuple[int, ...]]] = {}
        self.totals: dict[int, list[int]] = {}  # column -> sums of the whole volume
        self.sums: dict[int, list[int]] = {}  # partitionlet -> sums over `columns`
        # The partitionlets in the volume now (id -> (topic id, partition)), as last read,
        # and `sums` added up per partition over those only: what ranks the hottest, kept
        # as it changes so that a call does not add up 100,000 partitionlets again.
        self.rows: list[tuple[int, int, int]] | None = None
        self.keys: dict[int, tuple[int, int]] = {}
        self.key_sums: dict[tuple[int, int], tuple[int, ...]] = {}

    def partitionlets(self, rows: list[tuple[int, int, int]]) -> dict[int, tuple[int, int]]:
        """The volume's partitionlets (`Volume.heat_partitionlets` rows) as a map to their
        partitions; `key_sums` follows those that left or arrived (a move, a delete)."""
        if rows == self.rows:
            return self.keys
        keys = dict(zip((r[0] for r in rows), ((r[1], r[2]) for r in rows), strict=True))
        old = self.keys
        for pl in old.keys() - keys.keys():
            self._key_add(old[pl], self.sums.get(pl), -1)
        for pl in keys.keys() - old.keys():
            self._key_add(keys[pl], self.sums.get(pl), 1)
        self.rows, self.keys = rows, keys
        return keys

    def _key_add(self, key: tuple[int, int], counts: Sequence[int] | None, sign: int) -> None:
        if not counts:
            return
        had = self.key_sums.get(key, (0, 0, 0, 0))
        now = tuple(had[i] + sign * counts[i] for i in range(4))
        if any(now):
            self.key_sums[key] = now
        else:
            self.key_sums.pop(key, None)

    def update(self, vol: Volume, first_col: int, final: int) -> None:
        lo = first_col * self.per
        if lo < self.start or lo > self.done + 1:  # first call, or a long pause: start over
            self.start, self.done, self.columns, self.sums, self.totals = lo, lo - 1, {}, {}, {}
            self.key_sums = {}
        keys = self.keys
        for col in [c for c in self.totals if c < first_col]:
            del self.totals[col]
        for col in [c for c in self.columns if c < first_col]:
            for pl, counts in self.columns.pop(col).items():
                total = self.sums[pl]
                for i in range(4):
                    total[i] -= counts[i]
                if not any(total):
                    del self.sums[pl]
                key = keys.get(pl)
                if key is not None:
                    self._key_add(key, counts, -1)
        self.start = lo
        if final > self.done:
            for col, pl, *added in vol.heat_by_column(self.done + 1, final, self.per):
                # Tuples of ints, not lists: the garbage collector stops tracking them, and
                # an hour of 100,000 warm partitionlets caches millions (its full passes
                # over that many lists cost more than the map itself).
                column = self.columns.setdefault(col, {})
                had = column.get(pl)
                column[pl] = tuple(added) if had is None else _plus(had, added)
                _add(self.sums.setdefault(pl, [0, 0, 0, 0]), *added)
                _add(self.totals.setdefault(col, [0, 0, 0, 0]), *added)
                key = keys.get(pl)
                if key is not None:
                    self._key_add(key, added, 1)
            self.done = final


def _plus(a: tuple[int, ...], b: Sequence[int]) -> tuple[int, ...]:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])


_ROLLUPS: weakref.WeakKeyDictionary[Volume, dict[tuple[int, int], _Rollup]] = (
    weakref.WeakKeyDictionary()
)
_ROLLUPS_LOCK = threading.Lock()


def _rollup(vol: Volume, per: int, ncols: int) -> _Rollup:
    with _ROLLUPS_LOCK:
        by_key = _ROLLUPS.setdefault(vol, {})
        found = by_key.get((per, ncols))
        if found is None:
            found = by_key[(per, ncols)] = _Rollup(per)
        return found


def _columns_map(
    cluster: Cluster,
    window_s: int,
    top: int | None,
    by: str,
    include: Iterable[TopicPartition],
    max_columns: int,
) -> HeatMap:
    """The heat map in at most `max_columns` columns of `per` whole buckets each, aligned
    on multiples of `per` so that a column, once final, never changes: the window is the
    columns up to the current one (still filling; its rates are over the time it has
    covered so far), so it spans a little less than `window_s` when that column is young,
    and up to a column's length more when `per` does not divide the window's buckets
    (7 columns of an hour: 7 x 52 buckets); `Load.seconds` say what each one covers.
    """
    bucket_ms = HEAT_BUCKET_S * 1000
    now_ms = cluster.clock.now_ms()
    now_bucket = now_ms // bucket_ms
    final = (now_ms - FINAL_AFTER_MS) // bucket_ms - 1  # the last bucket no one adds to
    count = window_s // HEAT_BUCKET_S
    per = math.ceil(count / max_columns)
    ncols = math.ceil(count / per)
    last_col = now_bucket // per
    first_col = last_col - ncols + 1
    col_s = per * HEAT_BUCKET_S
    seconds = [float(col_s)] * ncols
    seconds[-1] = float((now_bucket - last_col * per + 1) * HEAT_BUCKET_S)
    window = float((now_bucket - first_col * per + 1) * HEAT_BUCKET_S)
    result = HeatMap(window_s, col_s, [c * per * bucket_ms for c in range(first_col, last_col + 1)])

    # Per volume: the cached final columns, plus the open buckets read now.
    vol_parts = []  # (volume id, rollup, fresh columns, partitionlet keys)
    partition_sums: dict[tuple[int, int], tuple[int, ...]] = {}
    for volume_id, vol in sorted(cluster.open_volumes().items()):
        rows = vol.heat_partitionlets()
        rollup = _rollup(vol, per, ncols)
        with rollup.lock:
            keys = rollup.partitionlets(rows)
            rollup.update(vol, first_col, max(final, first_col * per - 1))
            # a column still filling is copied: the next call adds to it (in another thread,
            # maybe, while this one reads it unlocked)
            filling = (rollup.done + 1) // per
            columns = {
                c: (dict(rollup.columns.get(c, {})) if c >= filling else rollup.columns.get(c, {}))
                for c in range(first_col, last_col + 1)
            }
            col_totals = {c: list(v) for c, v in rollup.totals.items()}
            # summed while locked, so the cached sums need no copy
            pl_sums: dict[int, list[int]] | None = None
            if top is None:
                pl_sums = {pl: list(v) for pl, v in rollup.sums.items()}
            elif not partition_sums:
                partition_sums.update(rollup.key_sums)  # tuples: shared, never changed
            else:
                _merge_partitions(partition_sums, rollup.key_sums)
        fresh: dict[int, dict[int, list[int]]] = {}
        fresh_sums: dict[int, list[int]] = {} if pl_sums is None else pl_sums
        for col, pl, *counts in vol.heat_by_column(
            max(final + 1, first_col * per), now_bucket, per
        ):
            _add(fresh.setdefault(col, {}).setdefault(pl, [0, 0, 0, 0]), *counts)
            _add(fresh_sums.setdefault(pl, [0, 0, 0, 0]), *counts)
        series = []
        totals = [0, 0, 0, 0]
        for i, col in enumerate(range(first_col, last_col + 1)):
            # all of the volume's heat, as heat_by_bucket sums it
            column = col_totals.get(col, [0, 0, 0, 0])
            for counts in fresh.get(col, {}).values():
                _add(column, *counts)
            _add(totals, *column)
            series.append(_load(column, seconds[i]))
        result.volume_series[volume_id] = series
        result.volumes[volume_id] = _load(totals, window)
        if pl_sums is not None:
            for pl, counts in pl_sums.items():
                if pl in keys:
                    result.partitionlets[pl] = _load(counts, window)
        _sum_partitions(partition_sums, fresh_sums, keys)
        vol_parts.append((columns, fresh, keys))

    partition_sums = _consumable(cluster, partition_sums)
    if top is None and not cluster.is_administrator:
        _drop_partitionlets(cluster, result, {t for t, _ in partition_sums})
    wanted_keys = _ranked_keys(cluster, partition_sums, top, by, include)
    wanted = set(wanted_keys)
    cells: dict[tuple[int, int], list[list[int]]] = {}
    for columns, fresh, keys in vol_parts:
        shown = [(pl, key) for pl, key in keys.items() if key in wanted]
        for i, col in enumerate(range(first_col, last_col + 1)):
            for part in (columns[col], fresh.get(col)):
                if not part:
                    continue
                for pl, key in shown:
                    cell = part.get(pl)
                    if cell is not None:
                        row = cells.get(key)
                        if row is None:
                            row = cells[key] = [[0, 0, 0, 0] for _ in range(ncols)]
                        _add(row[i], *cell)
    empty = [Load(seconds=s) for s in seconds]
    _fill_partitions(cluster, result, wanted_keys, partition_sums, window, cells, empty, seconds)
    return result


_V = TypeVar("_V")


def _consumable(
    cluster: Cluster, partition_sums: dict[tuple[int, int], _V]
) -> dict[tuple[int, int], _V]:
    """The partitions of topics whose streams the cluster's principal may consume: a
    topic's load is its consumers' (and administrators') to see, as its messages are
    (docs/WEB.md, "What users see"); the volumes' totals stay everyone's."""
    if cluster.is_administrator:
        return partition_sums
    allowed: set[int] = set()
    by_stream: dict[int, bool] = {}
    for row in cluster.catalog.topics_by_id(sorted({t for t, _ in partition_sums})):
        ok = by_stream.get(row.stream_id)
        if ok is None:
            ok = by_stream[row.stream_id] = cluster.may_consume(row.stream)
        if ok:
            allowed.add(row.id)
    return {k: v for k, v in partition_sums.items() if k[0] in allowed}


def _drop_partitionlets(cluster: Cluster, result: HeatMap, topic_ids: set[int]) -> None:
    """Keep in `result.partitionlets` only those of `topic_ids` (see `_consumable`)."""
    keep = {
        pl
        for vol in cluster.open_volumes().values()
        for pl, topic_id, _ in vol.heat_partitionlets()
        if topic_id in topic_ids
    }
    for pl in [pl for pl in result.partitionlets if pl not in keep]:
        del result.partitionlets[pl]


def _sum_partitions(
    into: dict[tuple[int, int], tuple[int, ...]],
    sums: dict[int, list[int]],
    keys: dict[int, tuple[int, int]],
) -> None:
    """Add partitionlets' sums to their partitions' (those no longer in the volume, moved
    or deleted, count no more)."""
    for pl, counts in sums.items():
        key = keys.get(pl)
        if key is not None:
            total = into.get(key)
            into[key] = tuple(counts) if total is None else _plus(total, counts)


def _merge_partitions(
    into: dict[tuple[int, int], tuple[int, ...]], sums: dict[tuple[int, int], tuple[int, ...]]
) -> None:
    """Add partitions' sums (another volume's) to `into`."""
    for key, counts in sums.items():
        total = into.get(key)
        into[key] = counts if total is None else _plus(total, counts)


def _ranked_keys(
    cluster: Cluster,
    partition_sums: Mapping[tuple[int, int], Sequence[int]],
    top: int | None,
    by: str,
    include: Iterable[TopicPartition],
) -> list[tuple[int, int]]:
    """The (topic id, partition) keys to list: all, or the `top` hottest by `by` and those
    in `include` that had any heat."""
    keys = list(partition_sums)
    if top is not None and len(keys) > top:
        columns = RANK_BY[by]
        if len(columns) == 1:
            (a,) = columns

            def score(kv: tuple[tuple[int, int], Sequence[int]]) -> int:
                return kv[1][a]
        else:
            a, b = columns

            def score(kv: tuple[tuple[int, int], Sequence[int]]) -> int:
                return kv[1][a] + kv[1][b]

        # A deleted topic's partitionlets count until their volumes let them go: rank
        # again without the topics that are gone, so the map still lists `top` rows.
        gone: set[int] = set()
        while True:
            items: Iterable[tuple[tuple[int, int], Sequence[int]]] = partition_sums.items()
            if gone:
                items = [kv for kv in items if kv[0][0] not in gone]
            keys = [key for key, _ in heapq.nlargest(top, items, key=score)]
            ids = sorted({topic_id for topic_id, _ in keys})
            missing = set(ids) - {row.id for row in cluster.catalog.topics_by_id(ids)}
            if not missing:
                break
            gone |= missing
        for tp in include:
            found = _stream_and_name(cluster, tp.topic)
            row = cluster.catalog.topic_or_none(*found) if found else None
            key = (row.id, tp.partition) if row is not None else None
            if key is not None and key in partition_sums and key not in keys:
                keys.append(key)
    return keys


def _fill_partitions(
    cluster: Cluster,
    result: HeatMap,
    keys: list[tuple[int, int]],
    partition_sums: Mapping[tuple[int, int], Sequence[int]],
    window: float,
    cells: dict[tuple[int, int], list[list[int]]],
    empty: list[Load],
    seconds: list[float],
) -> None:
    topic_ids = sorted({topic_id for topic_id, _ in keys})
    full_names = {row.id: row.full_name for row in cluster.catalog.topics_by_id(topic_ids)}
    for key in keys:
        name = full_names.get(key[0])
        if name is None:
            continue  # the topic was deleted
        tp = TopicPartition(name, key[1])
        row = cells.get(key)
        result.partition_series[tp] = (
            [_load(c, s) if any(c) else e for c, s, e in zip(row, seconds, empty, strict=True)]
            if row is not None
            else list(empty)
        )
        result.partitions[tp] = load = _load(partition_sums[key], window)
        result.topics[name] = result.topics.get(name, Load(seconds=window)) + load
