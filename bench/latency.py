"""Produce-to-consume latency across processes (issue 28, item 5): how long after a message
is sent does a consumer in another process have it.

In one run, N messages of 100 B at `RATE` msg/s (one at a time, each flushed), each
carrying its send time (`time.time_ns()`, one clock: one machine), read by a consumer that
is already waiting:

- embedded, another process: `engine.Producer` (acks=1) in a child process on the cluster
  directory, `engine.Consumer` here; once with the doorbells (engine.doorbell) and once
  without (`PLET_NO_DOORBELL=1` in both processes: the consumer looks at the files every
  20 ms, as before them); then with the doorbells at full rate: still one message at a
  time, each flushed, but back to back (the issue's "at full rate": the write path busy
  all the time, its checkpoints included);
- embedded, one process: producer and consumer on one `Cluster` (the in-process signal);
- over the wire: `plet serve` on the cluster, confluent-kafka's producer (linger 0,
  acks=1) in a child process and its consumer here (fetch.wait.max.ms=100).

Reported per case: p50, p90, p99 and max in ms, and each p50 and p99 against the wire's.
`python -m bench.latency [N]` (default 1,000) prints a Markdown table for
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RATE = 200  # messages per second
TOPIC = "t"
VALUE_SIZE = 100
ROOT = Path(__file__).resolve().parents[1]

# The producer, in its own process: argv kind, cluster path or bootstrap, n, rate.
PRODUCER = """
import sys, time
kind, where, n, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
pad = b"x" * 80
def paced(send):
    start = time.perf_counter()
    for i in range(n):
        wait = start + i / rate - time.perf_counter() if rate else 0
        if wait > 0:
            time.sleep(wait)
        send(b"%020d" % time.time_ns() + pad)
if kind == "embedded":
    from engine import Cluster, Producer
    with Cluster.open(where) as cluster:
        producer = Producer(cluster, acks=1, linger_ms=0)
        def send(value):
            producer.send("/lat:t", value, partition=0)
            producer.flush()
        paced(send)
        producer.close()
else:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": where, "linger.ms": 0, "acks": 1})
    def send(value):
        producer.produce("t", value, partition=0)
        producer.flush()
    paced(send)
"""


@dataclass
class Latencies:
    case: str
    ms: list[float]

    def q(self, p: float) -> float:
        ordered = sorted(self.ms)
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def _received(value: bytes) -> float:
    return (time.time_ns() - int(value[:20])) / 1e6


def _child(
    kind: str, where: str, n: int, no_doorbell: bool, rate: float = RATE
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if no_doorbell:
        env["PLET_NO_DOORBELL"] = "1"
    else:
        env.pop("PLET_NO_DOORBELL", None)
    return subprocess.Popen(
        [sys.executable, "-c", PRODUCER, kind, where, str(n), str(rate)], env=env
    )


def _cluster(path: Path) -> None:
    from engine import Cluster

    with Cluster.open(path, volumes=1) as cluster:
        cluster.create_stream("/lat", ttl=0)
        cluster.create_topic("/lat:t", partitions=1)


def embedded_other_process(
    workdir: Path, n: int, doorbell: bool, full_rate: bool = False
) -> Latencies:
    """`full_rate`: the producer sends back to back (each message still flushed)."""
    from engine import Cluster, Consumer, TopicPartition

    path = workdir / f"embedded-{'bell' if doorbell else 'files'}{'-full' if full_rate else ''}"
    _cluster(path)
    saved = os.environ.pop("PLET_NO_DOORBELL", None)
    if not doorbell:
        os.environ["PLET_NO_DOORBELL"] = "1"  # the engine without doorbells (engine.doorbell)
    try:
        with Cluster.open(path) as cluster:
            consumer = Consumer(cluster, auto_offset_reset="latest", enable_auto_commit=False)
            consumer.assign([TopicPartition("/lat:t", 0)])
            consumer.poll(timeout_ms=50)  # at the end, waiting: the doorbell is up
            child = _child("embedded", str(path), n, not doorbell, 0 if full_rate else RATE)
            got = _consume(consumer.poll, n)
            child.wait(60)
            consumer.close()
    finally:
        os.environ.pop("PLET_NO_DOORBELL", None)
        if saved is not None:
            os.environ["PLET_NO_DOORBELL"] = saved
    how = "doorbells" if doorbell else "looking at the files (before)"
    if full_rate:
        how += ", full rate"
    return Latencies(f"embedded, producer in another process, {how}", got)


def embedded_one_process(workdir: Path, n: int) -> Latencies:
    from engine import Cluster, Consumer, Producer, TopicPartition

    path = workdir / "embedded-one"
    _cluster(path)
    with Cluster.open(path) as cluster:
        consumer = Consumer(cluster, auto_offset_reset="latest", enable_auto_commit=False)
        consumer.assign([TopicPartition("/lat:t", 0)])
        consumer.poll(timeout_ms=50)
        producer = Producer(cluster, acks=1, linger_ms=0)

        def produce() -> None:
            start = time.perf_counter()
            for i in range(n):
                wait = start + i / RATE - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                producer.send("/lat:t", b"%020d" % time.time_ns() + b"x" * 80, partition=0)
                producer.flush()

        thread = threading.Thread(target=produce)
        thread.start()
        got = _consume(consumer.poll, n)
        thread.join()
        producer.close()
        consumer.close()
    return Latencies("embedded, one process", got)


def _consume(poll: Callable[..., dict[Any, list[Any]]], n: int) -> list[float]:
    got: list[float] = []
    deadline = time.monotonic() + n / RATE + 60
    while len(got) < n and time.monotonic() < deadline:
        for records in poll(timeout_ms=500).values():
            got += [_received(r.value) for r in records]
    return got


def wire(workdir: Path, n: int) -> Latencies:
    from confluent_kafka import Consumer as KafkaConsumer
    from confluent_kafka import KafkaError, KafkaException

    from bench.wire import Server

    path = workdir / "wire"
    _cluster(path)
    server = Server(path, workdir / "serve.log")
    server.command[server.command.index("--default-stream") + 1] = "/lat"
    server.start()
    try:
        consumer = KafkaConsumer({
            "bootstrap.servers": server.bootstrap, "group.id": "lat",
            "auto.offset.reset": "latest", "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        })  # fmt: skip
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.1)
        # "latest" is looked up by the first fetch, which may come after the first message
        # (a run received 999 of 1,000): start at the log end offset known now instead
        (tp,) = consumer.assignment()
        tp.offset = consumer.get_watermark_offsets(tp, timeout=30)[1]
        while True:
            try:
                consumer.seek(tp)
                break
            except KafkaException as exc:
                # librdkafka refuses a seek until the partition's fetcher has started it
                # (seen on a busy machine): wait for that in poll
                if exc.args[0].code() != KafkaError._STATE or time.monotonic() > deadline:
                    raise
                consumer.poll(0.1)
        child = _child("wire", server.bootstrap, n, False)
        got: list[float] = []
        end = time.monotonic() + n / RATE + 60
        while len(got) < n and time.monotonic() < end:
            m = consumer.poll(0.5)
            value = None if m is None or m.error() is not None else m.value()
            if value is not None:
                got.append(_received(value))
        child.wait(60)
        consumer.close()
    finally:
        server.stop()
    return Latencies("over the wire (plet serve, confluent-kafka)", got)


def run(n: int, workdir: Path | None = None) -> list[Latencies]:
    """Every case, in `workdir` (made if missing) or a temporary directory."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="plet-bench-latency-") as d:
            return run(n, Path(d))
    workdir.mkdir(parents=True, exist_ok=True)
    return [
        embedded_other_process(workdir, n, doorbell=True),
        embedded_other_process(workdir, n, doorbell=False),
        embedded_other_process(workdir, n, doorbell=True, full_rate=True),
        embedded_one_process(workdir, n),
        wire(workdir, n),
    ]


def text(results: list[Latencies]) -> str:
    lines = [
        f"Latency, produce to consume ({RATE} msg/s unless at full rate, one message at a time)"
    ]
    for r in results:
        if r.ms:
            lines.append(
                f"  {r.case}: p50 {r.q(0.5):.2f} ms, p99 {r.q(0.99):.2f} ms, "
                f"max {max(r.ms):.2f} ms ({len(r.ms):,} received)"
            )
        else:
            lines.append(f"  {r.case}: nothing received")
    return "\n".join(lines)


def markdown(results: list[Latencies], n: int) -> str:
    wire_case = results[-1]
    lines = [
        f"{n:,} messages of {VALUE_SIZE} B at {RATE} msg/s (full rate: back to back), each "
        "timed from its send to its "
        f"receipt; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}.",
        "",
        "| case | received | p50 ms | p90 ms | p99 ms | max ms | p50 vs wire | p99 vs wire |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        if not r.ms:
            lines.append(f"| {r.case} | 0 | | | | | | |")
            continue
        lines.append(
            f"| {r.case} | {len(r.ms):,} | {r.q(0.5):.2f} | {r.q(0.9):.2f} | {r.q(0.99):.2f} | "
            f"{max(r.ms):.2f} | {r.q(0.5) / wire_case.q(0.5):.2f}x | "
            f"{r.q(0.99) / wire_case.q(0.99):.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    n = int(argv[1]) if len(argv) > 1 else 1_000
    results = run(n)
    print(text(results))
    print()
    print(markdown(results, n))


if __name__ == "__main__":
    main(sys.argv)
