"""Heat: recent load, in messages and bytes written and read per second.

Each volume keeps counts per partitionlet in buckets of `HEAT_BUCKET_S` seconds (table
`heat`). Appends count their writes in their own transaction; a consumer counts what it
reads in memory (`ReadCounter`) and adds it to the volumes every few seconds, so neither
`send` nor `poll` pays a write for it. `heat_map` sums the buckets of a window per
volume, topic, partition and partitionlet, and per bucket for the heat maps.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.errors import InvalidArgument, PartitionletError
from engine.records import TopicPartition
from engine.volume import HEAT_BUCKET_S

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
                self._cluster._volume(volume_id).add_read_heat(rows)
            except PartitionletError:
                pass  # heat is advisory: a busy volume must not fail a poll


def heat_map(cluster: Cluster, window_s: int = 300) -> HeatMap:
    """Sum the volumes' heat buckets of the last `window_s` seconds."""
    if (
        isinstance(window_s, bool)
        or not isinstance(window_s, int)
        or not (HEAT_BUCKET_S <= window_s <= MAX_WINDOW_S)
    ):
        raise InvalidArgument(
            f"window_s must be from {HEAT_BUCKET_S} to {MAX_WINDOW_S} seconds, got {window_s!r}"
        )
    bucket_ms = HEAT_BUCKET_S * 1000
    now_bucket = time.time_ns() // 1_000_000 // bucket_ms
    count = window_s // HEAT_BUCKET_S
    first = now_bucket - count + 1
    buckets = [b * bucket_ms for b in range(first, now_bucket + 1)]
    empty = Load()
    result = HeatMap(window_s, HEAT_BUCKET_S, buckets)
    names: dict[int, str | None] = {}
    catalog = cluster._catalog

    def topic_name(topic_id: int) -> str | None:
        if topic_id not in names:
            row = catalog.topic_by_id(topic_id) if topic_id >= 0 else None
            names[topic_id] = row.full_name if row else None
        return names[topic_id]

    for volume_id, vol in sorted(cluster._volumes.items()):
        series = [empty] * count
        for bucket, pl_id, topic_id, partition, wm, wb, rm, rb in vol.heat_rows(first):
            load = Load(wm, wb, rm, rb)
            i = bucket - first
            series[i] = series[i] + load
            result.partitionlets[pl_id] = result.partitionlets.get(pl_id, empty) + load
            name = topic_name(topic_id)
            if name is None:
                continue
            tp = TopicPartition(name, partition)
            part_series = result.partition_series.setdefault(tp, [empty] * count)
            part_series[i] = part_series[i] + load
        result.volume_series[volume_id] = series
    window = float(count * HEAT_BUCKET_S)

    def total(series: list[Load]) -> Load:
        out = Load(seconds=window)
        for load in series:
            out = out + load
        return out

    for volume_id, series in result.volume_series.items():
        result.volumes[volume_id] = total(series)
    for tp, series in result.partition_series.items():
        result.partitions[tp] = load = total(series)
        result.topics[tp.topic] = result.topics.get(tp.topic, Load(seconds=window)) + load
    for pl_id, load in list(result.partitionlets.items()):
        result.partitionlets[pl_id] = Load(
            load.write_messages, load.write_bytes, load.read_messages, load.read_bytes, window
        )
    return result
