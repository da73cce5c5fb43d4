"""The poll-size benchmark: what one record costs in a large `poll()` against a small one.

A poll's records are made in one go and live until the caller drops them. Made as objects
the cyclic garbage collector tracks, each 700 of them set off a collection, and the older
generations' collections walk every one made so far: a large poll paid more per record
than a small one (issue 13, item 6). This measures it.

In a fresh one-volume cluster, N messages of 100 B are written to two one-partition topics,
one without headers and one with a header on every record (`("unit", b"C")`, as in
DESIGN's example), and each topic is read back from the start by one `Consumer` with
`poll(max_records=M)` for every M asked for (500, the default `max_poll_records`, 5,000
and 100,000), touching every record's value. Reading is repeated `ROUNDS` times, the sizes
taken in turn, and the best round counts (the machine's noise only ever adds time). Time
is this process's CPU time (`time.process_time`, kernel time such as page faults
included), which other work on the machine disturbs less than the wall clock; the read is
single-threaded. Reported per topic and M: msg/s, ns per record, the ratio of ns per
record to that of the smallest M, the garbage collections the reads set off, and the page
faults they took (minor faults of the process per 1,000 records: memory mapped afresh,
which the kernel zeroes page by page; issue 28).

Run it with `plet bench --poll N` or on its own with `python -m bench.poll_size N`.
"""

from __future__ import annotations

import gc
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VALUE = bytes(range(100))
HEADERS = [("unit", b"C")]
STREAM = "/pollbench"
SIZES = (500, 5_000, 100_000)
ROUNDS = 3


@dataclass
class PollResult:
    headers: bool
    max_records: int
    messages: int
    seconds: float  # CPU seconds of the best round
    collections: tuple[int, int, int]  # garbage collections per generation, in that round
    faults: int  # minor page faults of the process in that round

    @property
    def per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def ns_per_record(self) -> float:
        return self.seconds * 1e9 / self.messages

    @property
    def faults_per_1000(self) -> float:
        return self.faults * 1000 / self.messages


def _fill(cluster, topic: str, messages: int, headers: bool) -> None:
    from engine import Producer

    cluster.create_topic(topic, partitions=1)
    with Producer(cluster, acks=1, linger_ms=0) as producer:
        send = producer.send
        extra: dict[str, Any] = {"headers": HEADERS} if headers else {}
        for _ in range(messages):
            send(topic, value=VALUE, **extra)
        producer.flush()


def _read(cluster, topic: str, messages: int, max_records: int) -> tuple[float, tuple, int]:
    """Seconds to read `messages` records of partition 0 of `topic`, the collections and
    the page faults."""
    from engine import Consumer, TopicPartition

    consumer = Consumer(cluster, group_id=None, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, 0)])
        poll = consumer.poll
        count = nbytes = 0
        gc.collect()
        before = [s["collections"] for s in gc.get_stats()]
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.process_time()
        while count < messages:
            batch = poll(timeout_ms=100, max_records=max_records)
            if not batch:
                raise RuntimeError(f"{topic}: read {count:,} of {messages:,}, then nothing")
            for records in batch.values():
                count += len(records)
                for record in records:
                    nbytes += len(record.value)
            del batch, records  # as a caller that drops a poll before the next one
        seconds = time.process_time() - start
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        after = [s["collections"] for s in gc.get_stats()]
    finally:
        consumer.close()
    if count != messages or nbytes != messages * len(VALUE):
        raise RuntimeError(f"{topic}: read {count:,} records, expected {messages:,}")
    return seconds, tuple(a - b for a, b in zip(after, before, strict=True)), faults


def run(
    workdir: Path, messages: int, sizes: tuple[int, ...] = SIZES, rounds: int = ROUNDS
) -> list[PollResult]:
    from engine import Cluster

    results = []
    with Cluster.open(str(workdir / "poll"), name="pollbench") as cluster:
        cluster.create_stream(STREAM, ttl=0, default_partitions=1)
        for headers in (False, True):
            topic = f"{STREAM}:{'headers' if headers else 'plain'}"
            _fill(cluster, topic, messages, headers)
            best: dict[int, tuple[float, tuple, int]] = {}
            for _ in range(rounds):
                for size in sizes:
                    got = _read(cluster, topic, messages, size)
                    if size not in best or got[0] < best[size][0]:
                        best[size] = got
            for size in sizes:
                seconds, collections, faults = best[size]
                results.append(PollResult(headers, size, messages, seconds, collections, faults))
    return results


def _rows(results: list[PollResult]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for r in results:
        base = next(
            b.ns_per_record for b in results if b.headers == r.headers
        )  # the smallest size of that topic, which runs first
        rows.append(
            (
                "one header" if r.headers else "none",
                f"{r.max_records:,}",
                f"{r.per_s:,.0f}",
                f"{r.ns_per_record:,.0f}",
                f"{r.ns_per_record / base:.2f}x",
                " / ".join(f"{c:,}" for c in r.collections),
                f"{r.faults_per_1000:,.1f}",
            )
        )
    return rows


_TITLES = (
    "headers",
    "max_records",
    "msg/s",
    "ns/record",
    "ns/record vs smallest poll",
    "gc runs (gen 0 / 1 / 2)",
    "page faults / 1,000 records",
)


def text(results: list[PollResult]) -> str:
    lines = [f"Poll size: {results[0].messages:,} messages of 100 B, best of {ROUNDS} reads"]
    for row in _rows(results):
        lines.append(
            f"  headers {row[0]:<10} poll {row[1]:>8}  {row[2]:>10} msg/s  {row[3]:>5} ns/record"
            f"  {row[4]:>6}  gc {row[5]}  faults/1k {row[6]}"
        )
    return "\n".join(lines)


def markdown(results: list[PollResult]) -> str:
    lines = [
        "| " + " | ".join(_TITLES) + " |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(results)]
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        got = run(Path(tmp), count)
    print(text(got))
    print()
    print(markdown(got))
