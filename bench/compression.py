"""The compression benchmark: bytes on disk per message, and produce and consume speed,
of a stream stored plain, with zstd and with lz4 (the `compression` policy, issue 15), and
`Consumer.poll_arrow`'s rows/s beside `poll`'s msg/s.

For each workload (100-B random values, which do not compress, and typical JSON events
such as {"device":"car-17","ts":...,"temp":21.5,"unit":"C","status":"ok"}, about 80 B)
and each codec, in a fresh cluster: N messages are produced to a one-partition topic by
one `Producer` (acks=1, the values made beforehand), timed on the wall clock; the stream's
stored bytes (the batches' payloads, as the volumes count them) over N give bytes per
message; then the topic is read back from the start `ROUNDS` times by one `Consumer` with
`poll(max_records=100_000)` (touching every value) and with `poll_arrow(max_records=
1_000_000)`, and the best round counts (the machine's noise only adds time).

Run it with `plet bench --compression N` or on its own with
`python -m bench.compression N`.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CODECS = ("none", "zstd", "lz4")
WORKLOADS = ("random 100 B", "JSON events")
ROUNDS = 3
POLL_RECORDS = 100_000
ARROW_RECORDS = 1_000_000


@dataclass
class CompressionResult:
    workload: str
    codec: str
    messages: int
    value_bytes: int  # of all the messages' values
    stored_bytes: int  # the stream's batches, as stored
    produce_s: float
    poll_s: float  # best round
    arrow_s: float  # best round

    @property
    def bytes_per_message(self) -> float:
        return self.stored_bytes / self.messages

    @property
    def value_per_message(self) -> float:
        return self.value_bytes / self.messages

    @property
    def produce_per_s(self) -> float:
        return self.messages / self.produce_s

    @property
    def poll_per_s(self) -> float:
        return self.messages / self.poll_s

    @property
    def arrow_per_s(self) -> float:
        return self.messages / self.arrow_s


def values(workload: str, messages: int) -> list[bytes]:
    if workload == WORKLOADS[0]:
        blob = os.urandom(100 * messages)
        return [blob[i : i + 100] for i in range(0, len(blob), 100)]
    rng = random.Random(17)
    ts = 1_700_000_000_000
    out = []
    for i in range(messages):
        ts += rng.randrange(0, 40)
        out.append(
            json.dumps(
                {
                    "device": f"car-{rng.randrange(1000)}",
                    "ts": ts,
                    "temp": round(rng.uniform(-10, 40), 1),
                    "unit": "C",
                    "status": "ok" if i % 50 else "warn",
                },
                separators=(",", ":"),
            ).encode()
        )
    return out


def _produce(cluster, topic: str, payloads: list[bytes]) -> float:
    from engine import Producer

    with Producer(cluster, acks=1, linger_ms=0) as producer:
        send = producer.send
        start = time.perf_counter()
        for value in payloads:
            send(topic, value=value)
        producer.flush()
        return time.perf_counter() - start


def _read(cluster, topic: str, messages: int, arrow: bool) -> float:
    from engine import Consumer, TopicPartition

    consumer = Consumer(cluster, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, 0)])
        count = 0
        start = time.perf_counter()
        if arrow:
            while count < messages:
                got = consumer.poll_arrow(timeout_ms=100, max_records=ARROW_RECORDS)
                if not got:
                    break
                for rb in got.values():
                    count += rb.num_rows
        else:
            nbytes = 0
            while count < messages:
                got = consumer.poll(timeout_ms=100, max_records=POLL_RECORDS)
                if not got:
                    break
                for records in got.values():
                    count += len(records)
                    for r in records:
                        nbytes += len(r.value)
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    if count != messages:
        raise RuntimeError(f"{topic}: read {count:,} of {messages:,}")
    return seconds


def run(workdir: Path, messages: int, rounds: int = ROUNDS) -> list[CompressionResult]:
    from engine import Cluster

    results = []
    for workload in WORKLOADS:
        payloads = values(workload, messages)
        for codec in CODECS:
            path = workdir / f"{workload.split()[0].lower()}-{codec}"
            with Cluster.open(str(path), name="compressionbench") as cluster:
                cluster.create_stream("/c", ttl=0, compression=codec)
                cluster.create_topic("/c:t", partitions=1)
                produce_s = _produce(cluster, "/c:t", payloads)
                stored = cluster.stream("/c").bytes
                poll_s = min(_read(cluster, "/c:t", messages, False) for _ in range(rounds))
                arrow_s = min(_read(cluster, "/c:t", messages, True) for _ in range(rounds))
            results.append(
                CompressionResult(
                    workload,
                    codec,
                    messages,
                    sum(map(len, payloads)),
                    stored,
                    produce_s,
                    poll_s,
                    arrow_s,
                )
            )
    return results


_TITLES = (
    "values",
    "compression",
    "value B/msg",
    "stored B/msg",
    "vs none",
    "produce msg/s",
    "poll msg/s",
    "poll_arrow rows/s",
)


def _rows(results: list[CompressionResult]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for r in results:
        plain = next(b for b in results if b.workload == r.workload and b.codec == "none")
        rows.append(
            (
                r.workload,
                r.codec,
                f"{r.value_per_message:.1f}",
                f"{r.bytes_per_message:.1f}",
                f"{r.bytes_per_message / plain.bytes_per_message:.2f}x",
                f"{r.produce_per_s:,.0f}",
                f"{r.poll_per_s:,.0f}",
                f"{r.arrow_per_s:,.0f}",
            )
        )
    return rows


def text(results: list[CompressionResult]) -> str:
    lines = [f"Compression: {results[0].messages:,} messages per case, reads best of {ROUNDS}"]
    for row in _rows(results):
        lines.append(
            f"  {row[0]:<13} {row[1]:<5} value {row[2]:>6} B  stored {row[3]:>6} B/msg "
            f"({row[4]:>5})  produce {row[5]:>10} msg/s  poll {row[6]:>10} msg/s  "
            f"poll_arrow {row[7]:>11} rows/s"
        )
    return "\n".join(lines)


def markdown(results: list[CompressionResult]) -> str:
    lines = [
        "| " + " | ".join(_TITLES) + " |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
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
