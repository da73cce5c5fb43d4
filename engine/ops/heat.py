"""Heat: recent load, in messages and bytes written and read per second.

Each volume keeps counts per partitionlet in buckets of `HEAT_BUCKET_S` seconds (table
`heat`). Appends count their writes in their own transaction; a consumer counts what it
reads in memory (`ReadCounter`) and adds it to the volumes every few seconds, so neither
`send` nor `poll` pays a write for it. `heat_map` sums the buckets of a window per
volume, topic, partition and partitionlet, and per bucket for the heat maps.
"""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine import names
from engine.errors import InvalidArgument, NotFound, PartitionletError
from engine.records import TopicPartition
from engine.storage.volume import HEAT_BUCKET_S

if TYPE_CHECKING:
    from engine.cluster import Cluster

# How often a consumer adds its read counts to the volumes.
READ_FLUSH_S = 5.0
MAX_WINDOW_S = 86400


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
        self._next_flush = time.monotonic() + READ_FLUSH_S

    def add(self, volume_id: int, pl_id: int, messages: int, nbytes: int) -> None:
        counts = self._counts.get((volume_id, pl_id))
        if counts is None:
            self._counts[(volume_id, pl_id)] = [messages, nbytes]
        else:
            counts[0] += messages
            counts[1] += nbytes

    def maybe_flush(self) -> None:
        if self._counts and time.monotonic() >= self._next_flush:
            self.flush()

    def flush(self) -> None:
        counts, self._counts = self._counts, {}
        self._next_flush = time.monotonic() + READ_FLUSH_S
        if not counts:
            return
        bucket = time.time_ns() // 1_000_000 // (HEAT_BUCKET_S * 1000)
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
) -> HeatMap:
    """Sum the volumes' heat buckets of the last `window_s` seconds.

    With `top`, only the `top` hottest partitions (by messages per second) are in
    `partitions`, `partition_series` and `topics`, and `partitionlets` is left empty;
    volumes stay complete.
    A console asks for the hottest few, which stays fast when 100,000 partitions are warm.
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
    bucket_ms = HEAT_BUCKET_S * 1000
    now_bucket = time.time_ns() // 1_000_000 // bucket_ms
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
        result.volumes[volume_id] = Load(*totals, window)
        if top is None:  # a partitionlet lives in one volume: nothing to merge
            for pl_id, wm, wb, rm, rb in vol.heat_by_partitionlet(first, now_bucket):
                result.partitionlets[pl_id] = Load(wm, wb, rm, rb, window)
        for topic_id, partition, wm, wb, rm, rb in vol.heat_by_partition(first, now_bucket):
            _add(partition_sums.setdefault((topic_id, partition), [0, 0, 0, 0]), wm, wb, rm, rb)

    keys = list(partition_sums)
    if top is not None and len(keys) > top:
        columns = RANK_BY[by]
        keys = heapq.nlargest(top, keys, key=lambda k: sum(partition_sums[k][c] for c in columns))
        for tp in include:
            found = _stream_and_name(cluster, tp.topic)
            row = cluster.catalog.topic_or_none(*found) if found else None
            key = (row.id, tp.partition) if row is not None else None
            if key in partition_sums and key not in keys:
                keys.append(key)
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
        result.partitions[tp] = load = Load(*partition_sums[key], window)
        result.topics[name] = result.topics.get(name, Load(seconds=window)) + load
    return result
