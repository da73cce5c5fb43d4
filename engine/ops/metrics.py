"""The metrics history: throughput, consumer lag and replication over time, in the catalog.

`record(cluster)` (run every minute by engine.ops.maintenance, so by `plet web` and
`plet replicate`) turns what already is counted into per-minute series:

- throughput (`write_messages`, `write_bytes`, `read_messages`, `read_bytes`) of the
  cluster, of its busiest streams and of its busiest topics, summed from the volumes' heat
  buckets of every minute completed since the last record (heat is kept a day, so a
  process that was down catches up on what others wrote);
- `lag_messages` of each consumer group and `lag_messages`/`lag_seconds` of each
  replication link, read at the time of the record;
- `copied_messages`/`copied_bytes` of each link, added by the replicator itself, in the
  transaction that counts a run's copies (Catalog.count_replicated).

Minutes are rolled up into hours (counters summed, gauges at their highest). The history is
bounded: each minute adds at most `TOP_STREAMS` stream and `TOP_TOPICS` topic series (the
busiest; the cluster's series count everything) and `MAX_GROUPS` groups; minutes are kept
`KEEP_MINUTES_S`, hours `KEEP_HOURS_S`.

`series(cluster, scope, name, metric, window_s)` reads one series back as rates per second
(counters) or readings (gauges), one point per bucket, None where nothing was recorded.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import InvalidArgument, PartitionletError
from engine.storage.volume import HEAT_BUCKET_S

if TYPE_CHECKING:
    from engine.cluster import Cluster

MINUTE_S = 60
HOUR_S = 3600
KEEP_MINUTES_S = 86400  # a day of minutes
KEEP_HOURS_S = 90 * 86400  # a quarter of hours
TOP_STREAMS = 50
TOP_TOPICS = 100
MAX_GROUPS = 200
# A minute is recorded once it ended this long ago: consumers add their read counts to
# the heat every few seconds (engine.ops.heat.READ_FLUSH_S).
SETTLE_MS = 10_000
# How far back a first record looks into the heat (which is kept a day).
CATCH_UP_S = 86400
# The window of a replication link's steady throughput (ReplicaInfo.throughput_messages).
THROUGHPUT_WINDOW_S = 300

THROUGHPUT = ("write_messages", "write_bytes", "read_messages", "read_bytes")
COUNTERS = (*THROUGHPUT, "copied_messages", "copied_bytes")
GAUGES = ("lag_messages", "lag_seconds")
# scope -> the metrics it has
SCOPES: dict[str, tuple[str, ...]] = {
    "cluster": THROUGHPUT,
    "stream": THROUGHPUT,
    "topic": THROUGHPUT,
    "group": ("lag_messages",),
    "replica": ("copied_messages", "copied_bytes", "lag_messages", "lag_seconds"),
}
UNITS = {
    "write_messages": "msg/s",
    "read_messages": "msg/s",
    "copied_messages": "msg/s",
    "write_bytes": "B/s",
    "read_bytes": "B/s",
    "copied_bytes": "B/s",
    "lag_messages": "messages",
    "lag_seconds": "s",
}
MAX_WINDOW_S = KEEP_HOURS_S


@dataclass(frozen=True)
class MetricSeries:
    """One series over a window: `points` are (bucket start in epoch ms, value), oldest
    first, one per bucket of `resolution_s` seconds; a value is a rate per second for a
    counter (msg/s, B/s), a reading for a gauge (messages, s), None where nothing was
    recorded (no process recorded then, or the series was not among the busiest)."""

    scope: str
    name: str
    metric: str
    unit: str
    resolution_s: int
    window_s: int
    points: list[tuple[int, float | None]]

    @property
    def recorded(self) -> list[tuple[int, float]]:
        """The points that have a value."""
        return [(t, v) for t, v in self.points if v is not None]

    @property
    def latest(self) -> float | None:
        values = self.recorded
        return values[-1][1] if values else None

    @property
    def peak(self) -> float | None:
        values = self.recorded
        return max(v for _, v in values) if values else None


@dataclass(frozen=True)
class MetricsReport:
    """What one `record` added: minutes of throughput, and gauges read."""

    minutes: int
    groups: int
    links: int


def replica_name(stream: str, target: str) -> str:
    """The name of a replication link's series (scope "replica")."""
    return f"{stream} -> {target}"


def record(cluster: Cluster, now_ms: int | None = None) -> MetricsReport:
    """Add every completed minute since the last record, read the gauges, roll the hours
    up and forget what is too old."""
    now = cluster.clock.now_ms() if now_ms is None else now_ms
    table = cluster.catalog.metrics
    minute_ms = MINUTE_S * 1000
    this_minute = now // minute_ms * minute_ms
    done_before = (now - SETTLE_MS) // minute_ms * minute_ms  # minutes before it are complete
    last = table.last_bucket(MINUTE_S, "cluster", "write_messages")
    first = done_before - CATCH_UP_S * 1000 if last is None else last + minute_ms
    first = max(first, done_before - CATCH_UP_S * 1000)
    minutes = 0
    if first < done_before:
        minutes = _throughput(cluster, first, done_before)
    groups = _group_lag(cluster, this_minute)
    links = _replica_lag(cluster, this_minute)
    hour_ms = HOUR_S * 1000
    # the previous hour too: the replicator adds copies to its last minutes after a record
    since = min(first, this_minute - hour_ms) // hour_ms * hour_ms
    table.roll_up(MINUTE_S, HOUR_S, since, now, GAUGES)
    table.prune(MINUTE_S, now - KEEP_MINUTES_S * 1000)
    table.prune(HOUR_S, now - KEEP_HOURS_S * 1000)
    return MetricsReport(minutes, groups, links)


def _throughput(cluster: Cluster, first_ms: int, end_ms: int) -> int:
    """Store the throughput minutes first_ms .. end_ms (exclusive); returns how many."""
    per_minute = MINUTE_S // HEAT_BUCKET_S
    first_bucket = first_ms // 1000 // HEAT_BUCKET_S
    last_bucket = end_ms // 1000 // HEAT_BUCKET_S - 1
    # minute index -> topic id -> [wm, wb, rm, rb], summed over the volumes
    sums: dict[int, dict[int, list[int]]] = defaultdict(dict)
    for vol in cluster.open_volumes().values():
        for minute, topic_id, *counts in vol.heat_by_topic_span(
            first_bucket, last_bucket, per_minute
        ):
            into = sums[minute].setdefault(topic_id, [0, 0, 0, 0])
            for i in range(4):
                into[i] += counts[i]
    topic_ids = sorted({t for by_topic in sums.values() for t in by_topic})
    topics = {row.id: row for row in cluster.catalog.topics_by_id(topic_ids)}
    rows = []
    minute_ms = MINUTE_S * 1000
    for start in range(first_ms, end_ms, minute_ms):
        by_topic = sums.get(start // minute_ms, {})
        total = [0, 0, 0, 0]
        by_stream: dict[str, list[int]] = {}
        by_name: dict[str, list[int]] = {}
        for topic_id, counts in by_topic.items():
            row = topics.get(topic_id)
            if row is None:
                continue  # deleted since
            by_name[row.full_name] = counts
            into = by_stream.setdefault(row.stream, [0, 0, 0, 0])
            for i in range(4):
                into[i] += counts[i]
                total[i] += counts[i]
        rows += _rows("cluster", {"": total}, start, keep_zero=True)
        rows += _rows("stream", _busiest(by_stream, TOP_STREAMS), start)
        rows += _rows("topic", _busiest(by_name, TOP_TOPICS), start)
    cluster.catalog.metrics.put(rows)
    return (end_ms - first_ms) // minute_ms


def _busiest(counts: dict[str, list[int]], n: int) -> dict[str, list[int]]:
    if len(counts) <= n:
        return counts
    names = heapq.nlargest(n, counts, key=lambda k: (counts[k][0] + counts[k][2], k))
    return {k: counts[k] for k in names}


def _rows(
    scope: str, series: dict[str, list[int]], start: int, keep_zero: bool = False
) -> list[tuple[int, str, str, str, int, float]]:
    return [
        (MINUTE_S, scope, name, metric, start, float(value))
        for name, counts in series.items()
        for metric, value in zip(THROUGHPUT, counts, strict=True)
        if value or keep_zero
    ]


def _group_lag(cluster: Cluster, minute: int) -> int:
    rows = []
    for group_id in cluster.catalog.group_ids()[:MAX_GROUPS]:
        try:
            lag = cluster.group(group_id).lag
        except PartitionletError:
            continue  # gone since it was listed
        rows.append((MINUTE_S, "group", group_id, "lag_messages", minute, float(lag)))
    cluster.catalog.metrics.put(rows)
    return len(rows)


def _replica_lag(cluster: Cluster, minute: int) -> int:
    from engine.replication import status

    rows = []
    for info in status.links(cluster):
        name = replica_name(info.stream, info.target)
        rows.append((MINUTE_S, "replica", name, "lag_messages", minute, float(info.lag_messages)))
        rows.append((MINUTE_S, "replica", name, "lag_seconds", minute, float(info.lag_seconds)))
    cluster.catalog.metrics.put(rows)
    return len(rows) // 2


def _check(scope: str, metric: str, window_s: int) -> None:
    if scope not in SCOPES:
        raise InvalidArgument(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if metric not in SCOPES[scope]:
        raise InvalidArgument(f"a {scope}'s metrics are {', '.join(SCOPES[scope])}, not {metric!r}")
    if (
        isinstance(window_s, bool)
        or not isinstance(window_s, int)
        or not (MINUTE_S <= window_s <= MAX_WINDOW_S)
    ):
        raise InvalidArgument(
            f"window_s must be from {MINUTE_S} to {MAX_WINDOW_S} seconds, got {window_s!r}"
        )


def resolution_for(window_s: int) -> int:
    """Minutes for a window of up to a day (what they are kept for), hours beyond."""
    return MINUTE_S if window_s <= KEEP_MINUTES_S else HOUR_S


def series(
    cluster: Cluster,
    scope: str,
    name: str,
    metric: str,
    window_s: int = 3600,
    now_ms: int | None = None,
) -> MetricSeries:
    """One series over the last `window_s` seconds (see the module's doc)."""
    _check(scope, metric, window_s)
    if scope == "cluster":
        name = ""
    now = cluster.clock.now_ms() if now_ms is None else now_ms
    resolution = resolution_for(window_s)
    width = resolution * 1000
    if metric in THROUGHPUT:
        # a throughput minute exists once recorded: end at the last complete one
        end = (now - SETTLE_MS) // (MINUTE_S * 1000) * (MINUTE_S * 1000) - 1
    else:
        end = now
    last = end // width * width
    count = max(1, window_s // resolution)
    first = last - (count - 1) * width
    table = cluster.catalog.metrics
    values = dict(table.series(resolution, scope, name, metric, first, last))
    if metric in COUNTERS:
        # a sparse series (only the busiest are stored) is 0, not unknown, where the
        # cluster's own series shows that a record ran
        recorded = (
            values
            if scope == "cluster"
            else dict(table.series(resolution, "cluster", "", "write_messages", first, last))
        )
        if metric in ("copied_messages", "copied_bytes"):
            recorded = {}  # copies are added as they happen: a missing minute copied nothing
        points: list[tuple[int, float | None]] = []
        for t in range(first, last + 1, width):
            if t in values:
                points.append((t, values[t] / resolution))
            elif t in recorded or metric in ("copied_messages", "copied_bytes"):
                points.append((t, 0.0))
            else:
                points.append((t, None))
    else:
        points = [(t, values.get(t)) for t in range(first, last + 1, width)]
    return MetricSeries(scope, name, metric, UNITS[metric], resolution, window_s, points)


def busiest(
    cluster: Cluster, scope: str, metric: str, window_s: int = 3600, limit: int = 10
) -> list[tuple[str, float]]:
    """The names of the `limit` series of `scope` with the most `metric` over the window,
    with their average per second (counters) or their sum of readings (gauges)."""
    _check(scope, metric, window_s)
    resolution = resolution_for(window_s)
    first = cluster.clock.now_ms() - window_s * 1000
    top = cluster.catalog.metrics.top(resolution, scope, metric, first, limit)
    if metric in COUNTERS:
        return [(name, total / window_s) for name, total in top]
    return top


def steady_rates(cluster: Cluster, now_ms: int | None = None) -> dict[str, tuple[float, float]]:
    """Replication links' (messages/s, bytes/s) over the last THROUGHPUT_WINDOW_S seconds,
    by series name (`replica_name`): copies counted per minute, divided by the time the
    window covers (from the start of its first minute to now)."""
    now = cluster.clock.now_ms() if now_ms is None else now_ms
    minute_ms = MINUTE_S * 1000
    first = (now - THROUGHPUT_WINDOW_S * 1000) // minute_ms * minute_ms + minute_ms
    seconds = max((now - first) / 1000, 1.0)
    table = cluster.catalog.metrics
    messages = dict(table.sums(MINUTE_S, "replica", "copied_messages", first))
    nbytes = dict(table.sums(MINUTE_S, "replica", "copied_bytes", first))
    return {name: (messages[name] / seconds, nbytes.get(name, 0.0) / seconds) for name in messages}
