"""Reading pages of a topic's messages for the message browser, through the public
`Consumer` API (assign and seek, no group, nothing committed).

Called from worker threads only: every function here does engine I/O.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from console.values import matches
from engine import Cluster, Consumer, ConsumerRecord, PartitionInfo, TopicPartition, times
from engine.errors import InvalidArgument

PAGE = 200  # messages shown per page
MAX_SCAN = 100_000  # messages read at most while looking for filter matches
_POLL_BATCH = 500


@dataclass(frozen=True)
class Seek:
    """Where a page starts: the newest messages, the oldest, an offset or a time (epoch ms)."""

    kind: str  # "latest", "earliest", "offset" or "time"
    value: int = 0

    def describe(self) -> str:
        if self.kind == "offset":
            return f"from offset {self.value:,}"
        if self.kind == "time":
            from console.display import fmt_ms

            return f"from {fmt_ms(self.value)} UTC"
        return "newest" if self.kind == "latest" else "oldest"


LATEST = Seek("latest")


def parse_seek(text: str) -> Seek:
    """`""`/`latest`/`end` -> newest page; `earliest`/`beginning`/`start` -> oldest; digits ->
    an offset; anything else must be an ISO 8601 time (UTC when it has no zone)."""
    text = text.strip()
    low = text.lower()
    if low in ("", "latest", "end", "newest"):
        return LATEST
    if low in ("earliest", "beginning", "start", "oldest"):
        return Seek("earliest")
    if text.isascii() and text.isdigit():
        return Seek("offset", int(text))
    try:
        return Seek("time", times.parse_time(text))
    except InvalidArgument as exc:
        raise InvalidArgument(
            f"seek to an offset (e.g. 42), 'earliest', 'latest' or a time: {exc}"
        ) from None


@dataclass
class Page:
    """A page of messages ordered by time, and where following the tail continues."""

    topic: str
    partitions: list[PartitionInfo]
    records: list[ConsumerRecord]
    ends: dict[int, int] = field(default_factory=dict)  # partition -> next offset to follow
    scanned: int = 0
    truncated: bool = False  # stopped at MAX_SCAN before reaching the end


def _order(record: ConsumerRecord) -> tuple[int, int, int]:
    return (record.timestamp, record.partition, record.offset)


def read_page(
    cluster: Cluster,
    topic: str,
    *,
    seek: Seek = LATEST,
    partition: int | None = None,
    needle: str = "",
    limit: int = PAGE,
    max_scan: int = MAX_SCAN,
) -> Page:
    """Up to `limit` messages of `topic` (one partition or all) at `seek`, those matching
    `needle` only. From `latest`, the newest matches; otherwise the first ones at or after
    the position."""
    info = cluster.topic(topic)
    numbers = [p.partition for p in info.partitions]
    if partition is not None:
        if partition not in numbers:
            raise InvalidArgument(f"topic {topic} has no partition {partition}")
        numbers = [partition]
    tps = [TopicPartition(info.name, n) for n in numbers]
    consumer = Consumer(cluster, enable_auto_commit=False)
    try:
        consumer.assign(tps)
        starts = consumer.beginning_offsets(tps)
        ends = consumer.end_offsets(tps)
        if seek.kind == "latest":
            # Without a filter the newest `limit` of each partition is enough; with one, look
            # back as far as the scan budget allows and keep the newest matches.
            back = limit if not needle else max(limit, max_scan // max(1, len(tps)))
            for tp in tps:
                consumer.seek(tp, max(starts[tp], ends[tp] - back))
        elif seek.kind == "earliest":
            consumer.seek_to_beginning(*tps)
        elif seek.kind == "offset":
            for tp in tps:
                consumer.seek(tp, min(max(seek.value, starts[tp]), ends[tp]))
        else:
            found = consumer.offsets_for_times({tp: seek.value for tp in tps})
            for tp in tps:
                hit = found.get(tp)
                consumer.seek(tp, ends[tp] if hit is None else hit.offset)
        newest = seek.kind == "latest"
        kept: dict[TopicPartition, deque[ConsumerRecord] | list[ConsumerRecord]] = {
            tp: deque(maxlen=limit) if newest else [] for tp in tps
        }
        scanned = 0
        done: set[TopicPartition] = {tp for tp in tps if consumer.position(tp) >= ends[tp]}
        consumer.pause(*done)
        truncated = False
        while len(done) < len(tps):
            if scanned >= max_scan:
                truncated = True
                break
            batch = consumer.poll(timeout_ms=0, max_records=min(_POLL_BATCH, max_scan - scanned))
            if not batch:
                break  # nothing readable left (expired or removed offsets)
            for tp, records in batch.items():
                scanned += len(records)
                box = kept[tp]
                for record in records:
                    if record.offset >= ends[tp]:
                        break
                    if needle and not matches(record, needle):
                        continue
                    box.append(record)
                    if not newest and len(box) >= limit:
                        break
                full = not newest and len(box) >= limit
                if full or consumer.position(tp) >= ends[tp]:
                    done.add(tp)
                    consumer.pause(tp)
        merged = list(heapq.merge(*(sorted(box, key=_order) for box in kept.values()), key=_order))
        records = merged[-limit:] if newest else merged[:limit]
        return Page(
            info.name,
            info.partitions,
            records,
            {tp.partition: ends[tp] for tp in tps},
            scanned,
            truncated,
        )
    finally:
        consumer.close(autocommit=False)


def follow(
    cluster: Cluster,
    topic: str,
    ends: dict[int, int],
    *,
    needle: str,
    on_records: Callable[[list[ConsumerRecord]], None],
    cancelled: Callable[[], bool],
    poll_ms: int = 250,
) -> None:
    """Read what arrives after `ends` (partition -> offset) until `cancelled()`; hand every
    batch of matches to `on_records`. Other processes' writes are found by polling."""
    consumer = Consumer(cluster, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in ends]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, ends[tp.partition])
        while not cancelled():
            batch = consumer.poll(timeout_ms=poll_ms, max_records=_POLL_BATCH)
            found = sorted(
                (r for records in batch.values() for r in records if matches(r, needle)),
                key=_order,
            )
            if found and not cancelled():
                on_records(found)
    finally:
        consumer.close(autocommit=False)


def describe_partitions(partitions: Iterable[PartitionInfo]) -> str:
    return "  ".join(
        f"p{p.partition} {p.log_start_offset:,}..{p.log_end_offset:,}" for p in partitions
    )
