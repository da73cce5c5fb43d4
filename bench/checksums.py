"""The checksums' cost (issue 26): what share of produce's and consume's CPU time goes to
the batch checksums (docs/ARCHITECTURE.md, "Checksums").

On a loaded machine two runs of the same code differ by more than the checksums cost, so
this does not compare two builds: it times the checksum code itself, inside one build, and
sets it against the whole. In a fresh one-volume cluster, N messages of `size` bytes are
produced (acks=1) to a one-partition topic and read back by one `Consumer` with `poll`;
every call of `engine.storage.batch.payload_crc` and `checksum` (writing) and `intact`
(reading) is recorded with its arguments, and once the phase is over the recorded calls are
made again, a few MiB of batches at a time with their bytes freshly copied (in the cache,
as a reader's just-read batch is), timed with the process's CPU clock: that is the
checksums' cost, without a clock read per call (which, at two system calls a batch, would
cost about as much as the checksum of a small batch). The produce's and consume's CPU time is this process's
(`time.process_time`). Each size is run `rounds` times; the report gives each round.

Run it with `python -m bench.checksums N` (sizes 100 and 1024).

Before and after in one run (`compare`, `plet bench --checksums N`): the same work with the
checksums on and off, alternated round after round in one run of one build. "Off" is the
engine before checksums: no CRC computed or stored on write (the batch rows get no `crc`,
as rows written before checksums have none) and none verified on read (`checksums_off`).
The cases, each timed by the CPU seconds of the process that does the checksum work:
- embedded produce (`engine.Producer`, acks=1) and consume (`engine.Consumer`, polls of 500),
  this process;
- wire produce and consume: confluent-kafka against `plet serve` (its own process, started
  with the checksums on or off), the server's CPU seconds;
- Spark's scan: `engine.storage.scan.read` of every task `Cluster.scan_plan` gives (what a
  Spark task runs in its Python worker), in this process.
The report gives each case's median over the rounds, on and off, and the change.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SIZES = (100, 1024)
ROUNDS = 3
COMPARE_ROUNDS = 5
# A replay's chunk of recorded calls (`Calls.replay`): well inside this machine's 32 MiB L3
REPLAY_CHUNK_BYTES = 4 * 1024 * 1024
TOPIC = "/crc:t"


@dataclass
class ChecksumShare:
    size: int
    messages: int
    produce_s: float  # process CPU seconds
    produce_checksum_s: float  # of which in the checksum code
    consume_s: float
    consume_checksum_s: float

    def text(self) -> str:
        return (
            f"{self.size} B x {self.messages:,}: produce {self.produce_s:.3f} s CPU, "
            f"checksums {self.produce_checksum_s * 1000:.1f} ms "
            f"({100 * self.produce_checksum_s / self.produce_s:.1f}%); consume "
            f"{self.consume_s:.3f} s CPU, checksums {self.consume_checksum_s * 1000:.1f} ms "
            f"({100 * self.consume_checksum_s / self.consume_s:.1f}%)"
        )


class Calls:
    """The checksum calls made since the last `replay`, with their arguments."""

    def __init__(self) -> None:
        self.made: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def replay(self) -> float:
        """Make the recorded calls again: their CPU seconds. Forgets them.

        A reader checks a batch's bytes just after SQLite copied them out of its pages, so
        they are in the CPU's cache; the recorded bytes, replayed long after, are not. So
        the calls are made a chunk at a time (up to REPLAY_CHUNK_BYTES of bytes arguments,
        which fit the last-level cache), each chunk's arguments copied untimed just before
        its calls are timed. Without the copies the replay reads every byte from memory
        and reports about twice the cost (docs/BENCHMARKS.md, "Checksums")."""
        made = self.made[:]
        self.made.clear()
        spent = 0.0
        chunk: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        size = 0
        for i, (f, args) in enumerate(made):
            chunk.append((f, args))
            size += sum(len(a) for a in args if isinstance(a, bytes))
            if size >= REPLAY_CHUNK_BYTES or i == len(made) - 1:
                fresh = [(f, tuple(_copy(a) for a in args)) for f, args in chunk]
                start = time.process_time()
                for f, args in fresh:
                    f(*args)
                spent += time.process_time() - start
                chunk, size = [], 0
        return spent


def _copy(arg: Any) -> Any:
    """A new copy of a bytes argument (as a read from SQLite makes), others as they are."""
    return memoryview(arg).tobytes() if isinstance(arg, bytes) else arg


@contextmanager
def recorded_checksums() -> Iterator[Calls]:
    """The batch module's checksum functions, each call recorded into the `Calls` given;
    put back afterwards."""
    from engine.storage import batch

    calls = Calls()
    names = ("payload_crc", "checksum", "intact")
    real = {name: getattr(batch, name) for name in names}

    depth = [0]  # only the outermost call is recorded: `intact` calls `checksum`

    def recording(f: Callable[..., Any]) -> Callable[..., Any]:
        append = calls.made.append

        def call(*args: Any) -> Any:
            if depth[0]:
                return f(*args)
            append((f, args))
            depth[0] += 1
            try:
                return f(*args)
            finally:
                depth[0] -= 1

        return call

    for name in names:
        setattr(batch, name, recording(real[name]))
    try:
        yield calls
    finally:
        for name in names:
            setattr(batch, name, real[name])


def run(size: int, messages: int) -> ChecksumShare:
    from engine import Cluster, Consumer, Producer, TopicPartition

    value = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    with (
        tempfile.TemporaryDirectory(prefix="plet-bench-crc-") as d,
        Cluster.open(f"{d}/c", name="checksums", volumes=1) as cluster,
        recorded_checksums() as calls,
    ):
        cluster.create_stream("/crc", ttl=0)
        cluster.create_topic("/crc:t", partitions=1)
        producer = Producer(cluster, acks=1)
        start = time.process_time()
        for _ in range(messages):
            producer.send("/crc:t", value=value, partition=0)
        producer.flush()
        produce_s = time.process_time() - start
        producer.close()
        produce_crc = calls.replay()
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("/crc:t", 0)])
        got = 0
        start = time.process_time()
        while got < messages:
            for records in consumer.poll(timeout_ms=100).values():
                got += len(records)
        consume_s = time.process_time() - start
        consumer.close()
        consume_crc = calls.replay()
    return ChecksumShare(size, messages, produce_s, produce_crc, consume_s, consume_crc)


@contextmanager
def checksums_off() -> Iterator[None]:
    """The engine as it was before checksums, in this process: no CRC written (rows get a
    NULL `crc`), none verified. Put back afterwards."""
    from engine.storage import batch

    saved = {name: getattr(batch, name) for name in ("payload_crc", "checksum", "intact")}
    # the engine before checksums: None where a CRC was, which the rows store as NULL
    batch.payload_crc = lambda *args: None  # type: ignore[assignment]  # None is no int
    batch.checksum = lambda *args, **kwargs: None  # type: ignore[assignment]  # None is no int
    batch.intact = lambda *args: True
    try:
        yield
    finally:
        for name, f in saved.items():
            setattr(batch, name, f)


# `plet serve` with the checksums off: `python -c SERVE_OFF serve ...`
SERVE_OFF = """
import sys
from bench.checksums import checksums_off
from engine.cli import cli
with checksums_off():
    cli.main(sys.argv[1:], prog_name="plet", standalone_mode=False)
"""


@dataclass
class Compared:
    """One case's CPU seconds per round, checksums on and off."""

    case: str
    size: int
    messages: int
    on: list[float]
    off: list[float]

    @property
    def change(self) -> float:
        """The median's change from off to on (0.05: 5% more CPU time with checksums)."""
        return statistics.median(self.on) / statistics.median(self.off) - 1


def _value(size: int) -> bytes:
    return bytes(range(256)) * (size // 256) + bytes(range(size % 256))


def _embedded(workdir: Path, size: int, messages: int) -> dict[str, float]:
    """CPU seconds of the embedded produce, consume and scan of `messages` messages."""
    from engine import Cluster, Consumer, Producer, TopicPartition
    from engine.storage import scan

    value = _value(size)
    spent: dict[str, float] = {}
    with Cluster.open(workdir / "embedded", name="checksums", volumes=1) as cluster:
        cluster.create_stream("/crc", ttl=0)
        cluster.create_topic(TOPIC, partitions=1)
        producer = Producer(cluster, acks=1)
        start = time.process_time()
        for _ in range(messages):
            producer.send(TOPIC, value=value, partition=0)
        producer.flush()
        spent["embedded produce"] = time.process_time() - start
        producer.close()
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TopicPartition(TOPIC, 0)])
        got = 0
        start = time.process_time()
        while got < messages:
            for records in consumer.poll(timeout_ms=100).values():
                got += len(records)
        spent["embedded consume"] = time.process_time() - start
        consumer.close()
        tasks = cluster.scan_plan({TopicPartition(TOPIC, 0): (0, messages)})
        start = time.process_time()
        rows = sum(b.last_offset - b.base_offset + 1 for t in tasks for b in scan.read(t))
        spent["Spark scan (task reads)"] = time.process_time() - start
        if rows != messages:
            raise RuntimeError(f"the scan read {rows:,} of {messages:,} messages")
    return spent


def _wire(workdir: Path, size: int, messages: int, on: bool) -> dict[str, float]:
    """The server's CPU seconds of a confluent-kafka produce and consume."""
    from bench import wire
    from engine import Cluster

    path = workdir / "wire"
    with Cluster.open(path, name="checksums-wire", volumes=1) as cluster:
        cluster.create_stream(wire.STREAM, ttl=0)
        cluster.create_topic(f"{wire.STREAM}:t", partitions=1)
    server = wire.Server(path, workdir / "serve.log")
    if not on:
        args = server.command[server.command.index("serve") :]
        server.command = [sys.executable, "-c", SERVE_OFF, *args]
    server.start()
    try:
        produced = wire.confluent_produce(server, "t", messages, "1", value=_value(size))
        consumed = wire.confluent_consume(server, "t", messages)
    finally:
        server.stop()
    spent = {}
    for r in (produced, consumed):
        if not r.ok or r.server_cpu_s is None:
            raise RuntimeError(f"wire {r.op}: {r.error or 'no server CPU time'}")
        spent[f"wire {r.op} (server)"] = r.server_cpu_s
    return spent


def compare(
    workdir: Path, size: int, messages: int, rounds: int = COMPARE_ROUNDS
) -> list[Compared]:
    """Each case with the checksums on and off, alternated (off first in even rounds)."""
    found: dict[str, Compared] = {}
    for round_ in range(rounds):
        for on in (False, True) if round_ % 2 == 0 else (True, False):
            where = workdir / f"r{round_}-{'on' if on else 'off'}"
            where.mkdir(parents=True)
            try:
                if on:
                    spent = _embedded(where, size, messages)
                else:
                    with checksums_off():
                        spent = _embedded(where, size, messages)
                spent |= _wire(where, size, messages, on)
            finally:
                shutil.rmtree(where, ignore_errors=True)
            for case, seconds in spent.items():
                c = found.setdefault(case, Compared(case, size, messages, [], []))
                (c.on if on else c.off).append(seconds)
    return list(found.values())


def text(results: list[Compared]) -> str:
    lines = ["Checksums, before (off) and after (on) in one run: CPU seconds, medians"]
    for c in results:
        lines.append(
            f"  {c.case}, {c.size:,} B x {c.messages:,}: off {statistics.median(c.off):.3f} s, "
            f"on {statistics.median(c.on):.3f} s ({c.change:+.1%})"
        )
    return "\n".join(lines)


def markdown(results: list[Compared]) -> str:
    rounds = len(results[0].on) if results else 0
    lines = [
        f"CPU seconds, median of {rounds} rounds each (off and on alternated):",
        "",
        "| case | messages | off | on | change | off, range | on, range |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in results:
        lines.append(
            f"| {c.case}, {c.size:,} B | {c.messages:,} | {statistics.median(c.off):.3f} | "
            f"{statistics.median(c.on):.3f} | {c.change:+.1%} | {min(c.off):.3f}–{max(c.off):.3f} "
            f"| {min(c.on):.3f}–{max(c.on):.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if len(argv) > 1 and argv[1] == "compare":
        messages = int(argv[2]) if len(argv) > 2 else 200_000
        with tempfile.TemporaryDirectory(prefix="plet-bench-crc-") as d:
            results = [
                c
                for size in SIZES
                for c in compare(Path(d), size, messages if size <= 100 else messages // 3)
            ]
        print(text(results))
        print()
        print(markdown(results))
        return
    messages = int(argv[1]) if len(argv) > 1 else 300_000
    for size in SIZES:
        count = messages if size <= 100 else max(1, messages // 3)
        for _ in range(ROUNDS):
            print(run(size, count).text(), flush=True)


if __name__ == "__main__":
    main(sys.argv)
