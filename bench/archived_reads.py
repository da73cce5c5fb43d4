"""Archived reads against live ones (issue 28, item 6): what a `Consumer` pays to read
history from the archive tier's Parquet files rather than from a volume.

In a fresh cluster whose partitionlets roll at 4 MiB, N messages of 100 random bytes (no
key, no headers) go to a one-partition topic of a stream with `archive_after` 1 s, and
the same N values to a one-partition topic of a stream that keeps them live; then
`cluster.archive()` moves the first topic's sealed partitionlets to Parquet (all but the
active one, which stays live, as it would in use). Each topic is then read from the start
by a fresh `Consumer` in three ways, polls of `MAX_RECORDS`:

- `poll`: records, every value touched (its length summed);
- `poll_arrow`: one `RecordBatch` per poll (its value lengths summed, in Arrow);
- `poll_arrow_batches`: what the wire listener's fetch reads (one `RecordBatch` per chunk).

An archived partitionlet's reader keeps the last row group it decoded (the files here
hold one each), so a read soon after another finds the columns decoded: "archived" is
that read, "archived, decoded" one that finds no reader open (each file opened and its
row groups decoded, as the first read of a file in a process does).

Time is this process's CPU time (`time.process_time`), which other work on the machine
disturbs less than the wall clock. A cold round (files opened, pages cached) is not
counted; then `ROUNDS` rounds, each reading archived and live in turn, reading by reading.
Reported: rows/s of each, and the ratio archived / live within each round (the two reads
of a ratio are seconds apart, so load moves them together).

Run it with `plet bench --archived N` or on its own with `python -m bench.archived_reads
N` (or `python bench/archived_reads.py N` with another checkout's engine first on
PYTHONPATH, to measure that one: the script needs nothing of bench but itself).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ARCHIVED, LIVE = "/archived:t", "/live:t"
VALUE_BYTES = 100
PARTITIONLET_BYTES = 4 << 20
MAX_RECORDS = 10_000
ROUNDS = 2
MODES = ("poll", "poll_arrow", "poll_arrow_batches")
_CHUNK = 100_000  # values made at once


@dataclass
class ArchivedRead:
    """One way of reading, archived and live: CPU seconds of each counted round."""

    mode: str
    messages: int
    archived_s: list[float] = field(default_factory=list)
    decoded_s: list[float] = field(default_factory=list)  # no reader open: files decoded
    live_s: list[float] = field(default_factory=list)

    def rate(self, seconds: float) -> float:
        return self.messages / seconds


@dataclass
class ArchivedReads:
    messages: int
    archived_partitionlets: int
    live_tail: int  # messages of the archived topic still live (its active partitionlet)
    reads: list[ArchivedRead]
    load: str = ""


def _fill(cluster: Any, messages: int, partitionlet_bytes: int) -> None:
    from engine import Producer

    cluster.create_stream("/archived", ttl=0)
    cluster.create_stream("/live", ttl=0)
    cluster.create_topic(ARCHIVED, partitions=1)
    cluster.create_topic(LIVE, partitions=1)
    # a partitionlet rolls after the batch that fills it: batches of a quarter of one, so
    # that a run of any size archives several, however fast the producer fills its batches
    batch_size = max(VALUE_BYTES, partitionlet_bytes // 4)
    with Producer(cluster, acks=1, linger_ms=5, batch_size=batch_size) as producer:
        send = producer.send
        for at in range(0, messages, _CHUNK):
            count = min(_CHUNK, messages - at)
            blob = os.urandom(VALUE_BYTES * count)
            for i in range(count):
                value = blob[VALUE_BYTES * i : VALUE_BYTES * (i + 1)]
                send(ARCHIVED, value=value)
                send(LIVE, value=value)
        producer.flush()


def _archive(cluster: Any) -> tuple[int, int]:
    """Archive the first topic's sealed partitionlets; (archived ones, live messages)."""
    cluster.edit_stream("/archived", archive_after=1)
    time.sleep(1.5)  # older than archive_after
    cluster.archive()
    infos = cluster.partitionlets(ARCHIVED)
    archived = [p for p in infos if p.tier == "archive"]
    if not archived:
        raise RuntimeError("nothing was archived")
    return len(archived), cluster.topic(ARCHIVED).partitions[0].log_end_offset - sum(
        p.messages for p in archived
    )


def _close_files(cluster: Any) -> None:
    """Drop the process's readers of the archived files (their decoded row groups)."""
    from engine.storage import archive

    root = Path(cluster.path).resolve()
    for p in cluster.partitionlets(ARCHIVED):
        if p.tier == "archive":
            archive.forget(str(Path(urlsplit(p.file).path).relative_to(root)))


def _read(cluster: Any, topic: str, mode: str, messages: int) -> float:
    """CPU seconds for one fresh Consumer to read `messages` from the start of `topic`."""
    from engine import Consumer, TopicPartition

    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    count = nbytes = 0
    try:
        start = time.process_time()
        if mode == "poll":
            while count < messages:
                got = consumer.poll(timeout_ms=100, max_records=MAX_RECORDS)
                if not got:
                    break
                for records in got.values():
                    count += len(records)
                    for record in records:
                        nbytes += len(record.value)
        else:
            import pyarrow.compute as pc

            poll = getattr(consumer, mode)
            while count < messages:
                got = poll(timeout_ms=100, max_records=MAX_RECORDS)
                if not got:
                    break
                for value in got.values():
                    for rb in value if isinstance(value, list) else [value]:
                        count += rb.num_rows
                        nbytes += pc.sum(pc.binary_length(rb.column("value"))).as_py() or 0
        seconds = time.process_time() - start
    finally:
        consumer.close()
    if count != messages or nbytes != messages * VALUE_BYTES:
        raise RuntimeError(f"{topic} by {mode}: {count:,} records, {nbytes:,} B of {messages:,}")
    return seconds


def run(
    workdir: Path,
    messages: int,
    rounds: int = ROUNDS,
    partitionlet_bytes: int = PARTITIONLET_BYTES,
) -> ArchivedReads:
    from engine import Cluster

    path = workdir / "cluster"
    with Cluster.open(path, name="archbench", partitionlet_bytes=partitionlet_bytes) as cluster:
        _fill(cluster, messages, partitionlet_bytes)
        archived, tail = _archive(cluster)
        reads = [ArchivedRead(mode, messages) for mode in MODES]
        for r in reads:  # the cold round
            _read(cluster, ARCHIVED, r.mode, messages)
            _read(cluster, LIVE, r.mode, messages)
        for _ in range(rounds):
            for r in reads:
                r.archived_s.append(_read(cluster, ARCHIVED, r.mode, messages))
                r.live_s.append(_read(cluster, LIVE, r.mode, messages))
                _close_files(cluster)
                r.decoded_s.append(_read(cluster, ARCHIVED, r.mode, messages))
    return ArchivedReads(messages, archived, tail, reads)


def _ratios(r: ArchivedRead, archived: list[float]) -> str:
    """Archived / live rows/s per round, and their ratios."""
    return "; ".join(
        f"{r.rate(a):,.0f} / {r.rate(live):,.0f} ({live / a:.2f}x)"
        for a, live in zip(archived, r.live_s, strict=True)
    )


def _rows(result: ArchivedReads) -> list[tuple[str, ...]]:
    return [
        (f"`{r.mode}`", _ratios(r, r.archived_s), _ratios(r, r.decoded_s)) for r in result.reads
    ]


def _title(result: ArchivedReads) -> str:
    return (
        f"Archived reads: {result.messages:,} messages of {VALUE_BYTES} B, "
        f"{result.archived_partitionlets} partitionlets archived ({result.live_tail:,} "
        f"messages live after them); polls of {MAX_RECORDS:,}, CPU time"
    )


def text(result: ArchivedReads) -> str:
    lines = [_title(result)]
    if result.load:
        lines.append(f"  load: {result.load}")
    for mode, warm, decoded in _rows(result):
        lines.append(f"  {mode:<22} archived / live rows/s: {warm}")
        lines.append(f"  {'':<22} archived, decoded:       {decoded}")
    return "\n".join(lines)


def markdown(result: ArchivedReads) -> str:
    lines = [
        _title(result) + (f"; load {result.load}" if result.load else "") + ".",
        "",
        "| read | archived / live rows/s, per round | archived, decoded / live |",
        "| --- | ---: | ---: |",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(result)]
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile

    count = int(sys.argv[1].replace("_", "")) if len(sys.argv) > 1 else 300_000
    load = f"{os.getloadavg()[0]:.2f}"
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        got = run(Path(tmp), count)
    got.load = f"{load} before, {os.getloadavg()[0]:.2f} after (1-minute average)"
    print(text(got))
    print()
    print(markdown(got))
