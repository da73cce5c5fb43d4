"""The Kafka wire benchmark (issue 14): unchanged Kafka clients against `plet serve`, side by
side with the embedded API in the same run.

In the run's work directory, N messages with a 100-byte value (printable ASCII, so kcat can
send them as lines) go through:
- the embedded API, in this process, on its own cluster: `engine.Producer` at acks=1
  (linger_ms=0) and acks="all" (linger_ms=5), as the main suite runs them, then one
  `engine.Consumer` reading the acks=1 topic back with polls of 500 records;
- `plet serve`, started as a user runs it (its own process, a fresh cluster, 127.0.0.1 on a
  free port): confluent-kafka's `Producer` at acks=1 and acks=all, timed from the first
  `produce()` to the end of `flush()` (every delivery report in), then its `Consumer`
  (manual assign of partition 0 from the beginning, after `list_topics` has given it the
  leader) reading the acks=1 topic, timed from the assign until the last message arrived;
- kcat: `kcat -P -l FILE` (N lines) and `kcat -C -e -o beginning`, as subprocesses, wall
  time from start to exit.
Each topic has one partition and is made before the server starts, so no case times a
topic's creation.

Two cases with more partitions (issue 24):
- 16 partitions of 1 KiB values (`multi` messages, sent round robin): confluent-kafka's
  producer at acks=1 and its consumer (all 16 assigned), beside `engine.Producer` (acks=1,
  linger_ms=0) and `engine.Consumer` doing the same through the embedded API;
- consume of 1,000 partitions (`wide` messages of 100 B spread over them, written before
  the server starts) by kafka-python, which uses fetch sessions (KIP-227), against a
  listener with fetch sessions and one without (`KafkaServer(max_fetch_sessions=0)`: every
  fetch a full one; `plet serve --max-fetch-sessions 0`), each in its own process; beside
  `engine.Consumer` reading the same 1,000 partitions. librdkafka has no fetch sessions, so
  it is not the client of this case. Reported: msg/s, MB/s of values, the ratio of each wire case to the
embedded case of the same operation and acks, and the CPU seconds the server process spent
in each case (utime + stime from /proc/<pid>/stat). After the server stops, the wire
cluster's log end offsets are checked against the messages the clients said were delivered.

The client settings are what a user tuning for throughput would set (`PRODUCER_SETTINGS`,
`CONSUMER_SETTINGS`, `KCAT_SETTINGS`). Targets (issue 14): confluent-kafka produce at acks=1
>= 250,000 msg/s and consume >= 500,000 msg/s, with one server process on two cores.

Run it with `plet bench --wire N` or on its own with `python -m bench.wire N` (`--multi M`,
`--wide W`, `--wide-partitions P` size the cases with more partitions; 0 leaves one out);
`python -m bench.wire N --profile FILE` (or PLET_BENCH_WIRE_PROFILE=FILE for `plet bench`)
runs the server under cProfile, every thread of it, and writes the merged pstats to FILE
(the numbers of such a run are not comparable: the profiler slows the server down).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import random
import shutil
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from bench.cases import MB

SIZE = 100
VALUE = "".join(random.Random(SIZE).choices(string.ascii_letters + string.digits, k=SIZE)).encode()
STREAM = "/wirebench"
PROFILE_ENV = "PLET_BENCH_WIRE_PROFILE"
TARGETS = {
    ("confluent-kafka", "produce", "1"): 250_000,
    ("confluent-kafka", "consume", ""): 500_000,
}
# a consumer that has read nothing for this long gives up (the case then reports an error)
IDLE_S = 15.0
START_TIMEOUT_S = 30.0

# Throughput tuning of librdkafka's producer: requests of up to 1 MiB per partition (about
# 9,000 records of 100 B), filled for up to 10 ms; a local queue that holds a whole run; no
# compression (the loopback is not the bottleneck, and the server would have to inflate
# every batch); a delivery report only for a failure, so the client spends no Python call
# per message (flush() still waits for every acknowledgement).
PRODUCER_SETTINGS = {
    "linger.ms": 10,
    "batch.size": 1_048_576,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
    "delivery.report.only.error": True,
}
# Fetches of up to 8 MiB per partition (64 MiB in all), answered as soon as there is data,
# and a local prefetch queue of 1M messages; messages taken 10,000 at a time by consume().
CONSUMER_SETTINGS = {
    "fetch.max.bytes": 64 * 1_048_576,
    "max.partition.fetch.bytes": 8 * 1_048_576,
    "fetch.min.bytes": 1,
    "fetch.wait.max.ms": 100,
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 1_048_576,
    "enable.auto.commit": False,
    "enable.partition.eof": False,
}
CONSUME_BATCH = 10_000
# kcat's producer gets the producer's tuning (its own default is acks=all, linger 5 ms)
KCAT_SETTINGS = {
    "acks": 1,
    "linger.ms": 10,
    "batch.size": 1_048_576,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
}
EMBEDDED_MAX_RECORDS = 500  # the Consumer's default max_poll_records, as the main suite
# the cases with more partitions (issue 24)
MULTI_PARTITIONS = 16
MULTI_VALUE = bytes(VALUE * 11)[:1024]  # 1 KiB
MULTI_OP = {
    "produce": f"produce {MULTI_PARTITIONS}x1KiB",
    "consume": f"consume {MULTI_PARTITIONS}x1KiB",
}
# the embedded reads of the topics the wire clients wrote
WIRE_PRODUCED = {op: f"{op} of wire batches" for op in ("consume", MULTI_OP["consume"])}
WIDE_PARTITIONS = 1_000
# kafka-python's consumer as a user reading many partitions sets it: long polls of 100 ms
WIDE_SETTINGS: dict[str, Any] = {
    "fetch_max_wait_ms": 100,
    "max_poll_records": 10_000,
    "enable_auto_commit": False,
}


@dataclass
class WireResult:
    client: str  # "embedded", "confluent-kafka" or "kcat"
    op: str  # "produce" or "consume"
    acks: str  # "1" or "all" for produce, "" for consume
    expected: int
    messages: int  # delivered (produce) or read back (consume)
    seconds: float
    value_bytes: int
    server_cpu_s: float | None = None  # the server's CPU seconds in this case
    client_cpu_s: float | None = None  # this process's (or kcat's) CPU seconds in this case
    settings: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.messages == self.expected

    @property
    def msg_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.value_bytes / MB / self.seconds if self.seconds > 0 else 0.0

    @property
    def server_us_per_msg(self) -> float | None:
        if self.server_cpu_s is None or not self.messages:
            return None
        return self.server_cpu_s * 1e6 / self.messages

    @property
    def name(self) -> str:
        acks = f" acks={self.acks}" if self.acks else ""
        return f"{self.client} {self.op}{acks}"


@dataclass
class WireRun:
    messages: int
    results: list[WireResult] = field(default_factory=list)
    server: str = ""  # the command line that started the server
    load: str = ""
    log_end_offsets: dict[str, int] = field(default_factory=dict)
    profile: str | None = None
    notes: list[str] = field(default_factory=list)

    def embedded(self, result: WireResult) -> WireResult | None:
        return next(
            (
                r
                for r in self.results
                if r.client == "embedded" and r.op == result.op and r.acks == result.acks
            ),
            None,
        )

    def ratio(self, result: WireResult) -> float | None:
        """A wire case's msg/s ÷ the embedded case's of the same operation and acks; an
        embedded read of what the wire clients wrote ÷ that of what the engine wrote."""
        if result.client == "embedded":
            op = next((op for op, wired in WIRE_PRODUCED.items() if wired == result.op), None)
            base = self.embedded(dataclasses.replace(result, op=op)) if op else None
        else:
            base = self.embedded(result)
        if base is None or base is result or not base.ok or not result.ok:
            return None
        return result.msg_per_s / base.msg_per_s if base.msg_per_s else None

    def targets(self) -> list[tuple[str, int, float | None, bool | None]]:
        """(case, required msg/s, measured msg/s or None, met or None) per target."""
        out: list[tuple[str, int, float | None, bool | None]] = []
        for (client, op, acks), minimum in TARGETS.items():
            r = next(
                (x for x in self.results if (x.client, x.op, x.acks) == (client, op, acks)), None
            )
            name = r.name if r else f"{client} {op}"
            if r is None or not r.ok:
                out.append((name, minimum, None, None if r is None else False))
            else:
                out.append((name, minimum, r.msg_per_s, r.msg_per_s >= minimum))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "value_bytes": SIZE,
            "server": self.server,
            "load": self.load,
            "profile": self.profile,
            "settings": {
                "producer": PRODUCER_SETTINGS,
                "consumer": {**CONSUMER_SETTINGS, "consume(num_messages)": CONSUME_BATCH},
                "kcat": KCAT_SETTINGS,
                "kafka-python (wide)": WIDE_SETTINGS,
                "embedded": {
                    "acks=1": "linger_ms=0",
                    "acks=all": "linger_ms=5",
                    "max_records": EMBEDDED_MAX_RECORDS,
                },
            },
            "log_end_offsets": self.log_end_offsets,
            "results": [
                {
                    **asdict(r),
                    "ok": r.ok,
                    "msg_per_s": r.msg_per_s,
                    "mb_per_s": r.mb_per_s,
                    "server_us_per_msg": r.server_us_per_msg,
                    "vs_embedded": self.ratio(r),
                }
                for r in self.results
            ],
            "targets": [
                {"case": name, "required": req, "actual": got, "met": met}
                for name, req, got, met in self.targets()
            ],
            "notes": self.notes,
        }


# --------------------------------------------------------------------------- the server


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process, from /proc/<pid>/stat (None where there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name in parentheses may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _plet() -> list[str]:
    """The `plet` script beside this interpreter (as a user runs it), else `-m engine.cli`."""
    script = Path(sys.executable).with_name("plet")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "engine.cli"]


# Run as `python -c PROFILED ...`: `plet` with every thread under its own cProfile, merged at
# exit. cProfile alone sees only the main thread, which here just waits for a signal.
PROFILED = """
import cProfile, pstats, sys, threading
out, argv = sys.argv[1], sys.argv[2:]
profiles, lock = [], threading.Lock()
run = threading.Thread.run
def profiled_run(self):
    p = cProfile.Profile()
    with lock:
        profiles.append(p)
    p.enable()
    try:
        run(self)
    finally:
        p.disable()
threading.Thread.run = profiled_run
from engine.cli import cli
try:
    cli.main(argv, prog_name="plet", standalone_mode=False)
finally:
    stats = None
    for p in profiles:
        try:
            stats = pstats.Stats(p) if stats is None else stats.add(p)
        except TypeError:
            pass  # a thread that never ran Python code
    if stats is not None:
        stats.dump_stats(out)
"""


class Server:
    """`plet serve` on a cluster, in its own process, on 127.0.0.1 and a free port (with
    `--max-fetch-sessions` when `max_fetch_sessions` is given)."""

    def __init__(
        self,
        cluster: Path,
        log: Path,
        profile: Path | None = None,
        max_fetch_sessions: int | None = None,
    ) -> None:
        args = ["serve", "--cluster", str(cluster), "--listen", "127.0.0.1:0"]
        args += ["--default-stream", STREAM]
        if max_fetch_sessions is not None:
            args += ["--max-fetch-sessions", str(max_fetch_sessions)]
        if profile is None:
            self.command = [*_plet(), *args]
            self.display = " ".join(self.command)
        else:
            self.command = [sys.executable, "-c", PROFILED, str(profile), *args]
            self.display = " ".join(["plet (under cProfile)", *args])
        self.log = log
        self.bootstrap = ""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        with open(self.log, "wb") as err:
            self.process = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in self.log.read_text(errors="replace").splitlines():
                if line.startswith("serving the Kafka protocol on "):
                    self.bootstrap = line.split()[5]
                    return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"plet serve did not start: {self.tail()}")

    def cpu(self) -> float | None:
        return _cpu_seconds(self.process.pid) if self.process else None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()  # SIGTERM: a clean stop, and the profile gets written
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Measured(TypedDict, total=False):
    seconds: float
    client_cpu: float
    server_cpu: float | None  # None without a server (or its CPU time unknown)


@contextmanager
def measure(server: Server | None) -> Iterator[Measured]:
    """Wall time, this process's CPU time and the server's CPU time of a block."""
    out: Measured = {}
    cpu0 = server.cpu() if server else None
    own0 = time.process_time()
    start = time.perf_counter()
    try:
        yield out
    finally:
        out["seconds"] = time.perf_counter() - start
        out["client_cpu"] = time.process_time() - own0
        cpu1 = server.cpu() if server else None
        out["server_cpu"] = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None


def _settings(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


# --------------------------------------------------------------------------- the cases


def embedded_cases(workdir: Path, n: int) -> list[WireResult]:
    """The embedded API on its own cluster, as the main suite's cases run it."""
    from bench.engine_cases import consume, produce
    from engine import Cluster

    results = []
    with Cluster.open(str(workdir / "embedded"), name="embedded") as cluster:
        cluster.create_stream(STREAM, ttl=0, default_partitions=1)
        for acks, linger in ((1, 0), ("all", 5)):
            topic = f"{STREAM}:produce-acks{acks}"
            with measure(None) as m:
                got = produce(cluster, topic, n, VALUE, acks=acks, linger_ms=linger)
            results.append(
                WireResult(
                    "embedded",
                    "produce",
                    str(acks),
                    n,
                    got.extra["log_end_offset"],
                    got.seconds,
                    got.bytes,
                    client_cpu_s=m["client_cpu"],
                    settings=f"engine.Producer acks={acks}, linger_ms={linger}",
                    error=got.error,
                )
            )
        with measure(None) as m:
            got = consume(cluster, f"{STREAM}:produce-acks1", n, max_records=EMBEDDED_MAX_RECORDS)
        results.append(
            WireResult(
                "embedded",
                "consume",
                "",
                n,
                got.messages,
                got.seconds,
                got.bytes,
                client_cpu_s=m["client_cpu"],
                settings=f"engine.Consumer poll(max_records={EMBEDDED_MAX_RECORDS})",
                error=got.error,
            )
        )
    return results


def confluent_produce(
    server: Server,
    topic: str,
    n: int,
    acks: str,
    *,
    partitions: int = 1,
    value: bytes = VALUE,
    op: str = "produce",
) -> WireResult:
    """n copies of `value` to partition 0, or round robin over `partitions`."""
    from confluent_kafka import Producer

    failed: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:  # only failures are reported (delivery.report.only.error)
            failed.append(str(err))

    config = {"bootstrap.servers": server.bootstrap, "acks": acks, **PRODUCER_SETTINGS}
    producer = Producer({**config, "on_delivery": on_delivery})
    produce, poll = producer.produce, producer.poll
    error = None
    with measure(server) as m:
        if partitions == 1:
            for _ in range(n):
                try:
                    produce(topic, value, partition=0)
                except BufferError:  # the local queue is full: wait for room, then send again
                    poll(0.05)
                    produce(topic, value, partition=0)
        else:
            for i in range(n):
                try:
                    produce(topic, value, partition=i % partitions)
                except BufferError:
                    poll(0.05)
                    produce(topic, value, partition=i % partitions)
        left = producer.flush(300)
    if left:
        error = f"{left:,} messages still unacknowledged after flush(300)"
    elif failed:
        error = f"{len(failed):,} failed deliveries, first: {failed[0]}"
    delivered = n - left - len(failed)
    return WireResult(
        "confluent-kafka",
        op,
        acks,
        n,
        delivered,
        m["seconds"],
        delivered * len(value),
        m["server_cpu"],
        m["client_cpu"],
        _settings({"acks": acks, **PRODUCER_SETTINGS}),
        error,
    )


def confluent_consume(
    server: Server, topic: str, n: int, *, partitions: int = 1, op: str = "consume"
) -> WireResult:
    """Partitions 0 to `partitions` - 1 of `topic` read from the beginning."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    config = {"bootstrap.servers": server.bootstrap, "group.id": "plet-bench-wire"}
    consumer = Consumer({**config, **CONSUMER_SETTINGS})
    count = nbytes = 0
    errors: list[str] = []
    try:
        consume = consumer.consume
        # The client learns the partition's leader first, as a running consumer has: an
        # assign() with no metadata yet waits for librdkafka's offset-query timer (about
        # 0.5 s, measured) before its first ListOffsets, a client start-up cost, not a
        # rate of the server.
        consumer.list_topics(topic, timeout=10)
        with measure(server) as m:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
            idle_since = time.monotonic()
            while count < n:
                batch = consume(CONSUME_BATCH, 1.0)
                if not batch:
                    if time.monotonic() - idle_since > IDLE_S:
                        break
                    continue
                idle_since = time.monotonic()
                for msg in batch:
                    if msg.error():
                        errors.append(str(msg.error()))
                        continue
                    count += 1
                    nbytes += len(msg.value() or b"")
    finally:
        consumer.close()
    error = None
    if errors:
        error = f"{len(errors):,} consume errors, first: {errors[0]}"
    elif count != n:
        error = f"read {count:,} of {n:,} messages, then nothing for {IDLE_S:.0f} s"
    return WireResult(
        "confluent-kafka",
        op,
        "",
        n,
        count,
        m["seconds"],
        nbytes,
        m["server_cpu"],
        m["client_cpu"],
        _settings({**CONSUMER_SETTINGS, "consume(num_messages)": CONSUME_BATCH}),
        error,
    )


def embedded_partition_cases(
    workdir: Path, multi: int, wide: int, wide_partitions: int
) -> list[WireResult]:
    """The embedded side of the cases with more partitions, on its own cluster: 1 KiB values
    round robin over 16 partitions (acks=1, linger_ms=0) and read back; a read of
    `wide_partitions` partitions holding `wide` messages."""
    from engine import Cluster, Producer

    results = []
    with Cluster.open(str(workdir / "embedded-partitions"), name="embedded") as cluster:
        cluster.create_stream(STREAM, ttl=0, default_partitions=1)
        if multi:
            topic = f"{STREAM}:multi"
            cluster.create_topic(topic, partitions=MULTI_PARTITIONS)
            producer = Producer(cluster, acks=1, linger_ms=0)
            try:
                send, value, last = producer.send, MULTI_VALUE, None
                with measure(None) as m:
                    for i in range(multi):
                        last = send(topic, value=value, partition=i % MULTI_PARTITIONS)
                    producer.flush()
                if last is not None:
                    last.get(timeout=60)
            finally:
                producer.close()
            written = sum(p.log_end_offset for p in cluster.topic(topic).partitions)
            results.append(
                WireResult(
                    "embedded",
                    MULTI_OP["produce"],
                    "1",
                    multi,
                    written,
                    m["seconds"],
                    written * len(MULTI_VALUE),
                    client_cpu_s=m["client_cpu"],
                    settings="engine.Producer acks=1, linger_ms=0",
                )
            )
            results.append(
                _embedded_read(cluster, topic, MULTI_PARTITIONS, multi, MULTI_OP["consume"])
            )
        if wide:
            topic = f"{STREAM}:wide"
            _fill_wide(cluster, topic, wide, wide_partitions)
            results.append(
                _embedded_read(cluster, topic, wide_partitions, wide, _wide_op(wide_partitions))
            )
    return results


def _embedded_read(
    cluster: Any, topic: str, partitions: int, n: int, op: str, acks: str = ""
) -> WireResult:
    from engine import Consumer, TopicPartition

    consumer = Consumer(cluster, group_id=None, auto_offset_reset="earliest")
    count = nbytes = 0
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        idle_since = time.monotonic()
        with measure(None) as m:
            while count < n and time.monotonic() - idle_since < IDLE_S:
                got = consumer.poll(timeout_ms=100, max_records=EMBEDDED_MAX_RECORDS)
                for records in got.values():
                    idle_since = time.monotonic()
                    count += len(records)
                    nbytes += sum(len(r.value) for r in records)
    finally:
        consumer.close()
    return WireResult(
        "embedded",
        op,
        acks,
        n,
        count,
        m["seconds"],
        nbytes,
        client_cpu_s=m["client_cpu"],
        settings=f"engine.Consumer poll(max_records={EMBEDDED_MAX_RECORDS})",
        error=None if count == n else f"read {count:,} of {n:,} messages",
    )


def _wide_op(partitions: int) -> str:
    return f"consume {partitions}p"


def _fill_wide(cluster: Any, topic: str, n: int, partitions: int) -> None:
    """`n` 100-B messages round robin over a new topic of `partitions` partitions."""
    from engine import Producer

    cluster.create_topic(topic, partitions=partitions)
    with Producer(cluster, acks=1, linger_ms=5) as producer:
        for i in range(n):
            producer.send(topic, value=VALUE, partition=i % partitions)


def kafka_python_consume_wide(
    server: Server, topic: str, n: int, partitions: int, sessions: bool
) -> WireResult:
    """kafka-python reading every partition of `topic` (a plain name of the default stream:
    kafka-python refuses `/stream:topic`) from the beginning, timed from its seek."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        fetch_max_wait_ms=WIDE_SETTINGS["fetch_max_wait_ms"],
        max_poll_records=WIDE_SETTINGS["max_poll_records"],
        enable_auto_commit=WIDE_SETTINGS["enable_auto_commit"],
    )
    count = nbytes = 0
    try:
        consumer.partitions_for_topic(topic)  # metadata first, as a running consumer has it
        with measure(server) as m:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            consumer.seek_to_beginning()
            idle_since = time.monotonic()
            while count < n and time.monotonic() - idle_since < IDLE_S:
                for records in consumer.poll(timeout_ms=1000).values():
                    idle_since = time.monotonic()
                    count += len(records)
                    nbytes += sum(len(r.value) for r in records)
    finally:
        consumer.close()
    label = "fetch sessions" if sessions else "no fetch sessions (max_fetch_sessions=0)"
    return WireResult(
        "kafka-python (sessions)" if sessions else "kafka-python (no sessions)",
        _wide_op(partitions),
        "",
        n,
        count,
        m["seconds"],
        nbytes,
        m["server_cpu"],
        m["client_cpu"],
        f"{label}; " + _settings(WIDE_SETTINGS),
        None
        if count == n
        else f"read {count:,} of {n:,} messages, then nothing for {IDLE_S:.0f} s",
    )


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def _kcat(
    server: Server, args: list[str], stdout: Any, timeout: float
) -> tuple[Measured, str | None]:
    command = ["kcat", "-b", server.bootstrap, "-q", *args]
    children0 = _children_cpu()
    with measure(server) as m:
        try:
            done = subprocess.run(
                command, stdout=stdout, stderr=subprocess.PIPE, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            done = None
    m["client_cpu"] = _children_cpu() - children0  # kcat's CPU time, not this process's
    if done is None:
        return m, f"kcat timed out after {timeout:.0f} s"
    if done.returncode != 0:
        return m, f"kcat exited {done.returncode}: {done.stderr.decode(errors='replace')[-500:]}"
    return m, None


def kcat_produce(server: Server, topic: str, n: int, lines: Path) -> WireResult:
    settings: list[str] = []
    for key, value in KCAT_SETTINGS.items():
        settings += ["-X", f"{key}={value}"]
    m, error = _kcat(server, ["-P", "-t", topic, "-p", "0", *settings, "-l", str(lines)], None, 600)
    return WireResult(
        "kcat",
        "produce",
        str(KCAT_SETTINGS["acks"]),
        n,
        0 if error else n,  # kcat exits non-zero when a delivery failed; checked again later
        m["seconds"],
        0 if error else n * len(VALUE),
        m["server_cpu"],
        m["client_cpu"],
        "kcat -P -l FILE " + " ".join(settings),
        error,
    )


def kcat_consume(server: Server, topic: str, n: int, out: Path) -> WireResult:
    with open(out, "wb") as f:
        m, error = _kcat(server, ["-C", "-t", topic, "-p", "0", "-o", "beginning", "-e"], f, 600)
    count = nbytes = 0
    with open(out, "rb") as f:
        for line in f:
            count += 1
            nbytes += len(line) - 1  # kcat writes each value and a newline
    if error is None and count != n:
        error = f"kcat printed {count:,} messages, expected {n:,}"
    return WireResult(
        "kcat",
        "consume",
        "",
        n,
        count,
        m["seconds"],
        nbytes,
        m["server_cpu"],
        m["client_cpu"],
        "kcat -C -o beginning -e",
        error,
    )


def _guard(case: Callable[[], WireResult], fallback: WireResult) -> WireResult:
    """A case's result; an exception becomes the fallback with the error set."""
    try:
        return case()
    except Exception as exc:
        fallback.error = f"{type(exc).__name__}: {exc}"
        return fallback


def run(
    workdir: Path,
    messages: int,
    *,
    profile: Path | None = None,
    kcat: bool = True,
    progress: Callable[[str], None] | None = None,
    multi: int | None = None,
    wide: int | None = None,
    wide_partitions: int = WIDE_PARTITIONS,
) -> WireRun:
    """Every case in one run, in `workdir` (made if missing). `multi` (default: a fifth of
    `messages`) 1 KiB messages go over 16 partitions, `wide` (default: a tenth) 100-B
    messages are read from `wide_partitions` partitions; 0 leaves a case out."""
    from engine import Cluster

    say = progress or (lambda line: None)
    workdir.mkdir(parents=True, exist_ok=True)
    if profile is None and os.environ.get(PROFILE_ENV):
        profile = Path(os.environ[PROFILE_ENV])
    out = WireRun(messages, profile=str(profile) if profile else None)
    if profile is not None:
        out.notes.append("The server ran under cProfile: its numbers are not comparable.")

    multi = messages // 5 if multi is None else multi
    wide = messages // 10 if wide is None else wide
    if wide and wide < wide_partitions:
        wide = wide_partitions  # a message in every partition at least
    say("wire: embedded API ...")
    out.results += embedded_cases(workdir, messages)
    if multi or wide:
        say("wire: embedded API, more partitions ...")
        out.results += embedded_partition_cases(workdir, multi, wide, wide_partitions)

    topics = {
        "produce-1": "produce-acks1",
        "produce-all": "produce-acksall",
        "kcat": "kcat-acks1",
    }
    cluster_path = workdir / "served"
    with Cluster.open(str(cluster_path), name="served") as cluster:
        cluster.create_stream(STREAM, ttl=0, default_partitions=1)
        for topic in topics.values():
            cluster.create_topic(f"{STREAM}:{topic}", partitions=1)
        if multi:
            cluster.create_topic(f"{STREAM}:multi", partitions=MULTI_PARTITIONS)
    use_kcat = kcat and shutil.which("kcat") is not None
    if kcat and not use_kcat:
        out.notes.append("kcat is not installed: its cases were not run.")
    lines = workdir / "values.txt"
    if use_kcat:
        with open(lines, "wb") as f:
            f.write((VALUE + b"\n") * messages)

    server = Server(cluster_path, workdir / "serve.log", profile)
    out.server = server.display
    server.start()
    try:
        for acks in ("1", "all"):
            say(f"wire: confluent-kafka produce acks={acks} ...")
            out.results.append(
                _guard(
                    functools.partial(
                        confluent_produce, server, topics[f"produce-{acks}"], messages, acks
                    ),
                    WireResult("confluent-kafka", "produce", acks, messages, 0, 0.0, 0),
                )
            )
        say("wire: confluent-kafka consume ...")
        out.results.append(
            _guard(
                lambda: confluent_consume(server, topics["produce-1"], messages),
                WireResult("confluent-kafka", "consume", "", messages, 0, 0.0, 0),
            )
        )
        if use_kcat:
            say("wire: kcat produce ...")
            out.results.append(
                _guard(
                    lambda: kcat_produce(server, topics["kcat"], messages, lines),
                    WireResult("kcat", "produce", "1", messages, 0, 0.0, 0),
                )
            )
            say("wire: kcat consume ...")
            out.results.append(
                _guard(
                    lambda: kcat_consume(server, topics["kcat"], messages, workdir / "kcat.out"),
                    WireResult("kcat", "consume", "", messages, 0, 0.0, 0),
                )
            )
        if multi:
            say(f"wire: confluent-kafka {MULTI_OP['produce']} ...")
            out.results.append(
                _guard(
                    lambda: confluent_produce(
                        server,
                        "multi",
                        multi,
                        "1",
                        partitions=MULTI_PARTITIONS,
                        value=MULTI_VALUE,
                        op=MULTI_OP["produce"],
                    ),
                    WireResult("confluent-kafka", MULTI_OP["produce"], "1", multi, 0, 0.0, 0),
                )
            )
            say(f"wire: confluent-kafka {MULTI_OP['consume']} ...")
            out.results.append(
                _guard(
                    lambda: confluent_consume(
                        server, "multi", multi, partitions=MULTI_PARTITIONS, op=MULTI_OP["consume"]
                    ),
                    WireResult("confluent-kafka", MULTI_OP["consume"], "", multi, 0, 0.0, 0),
                )
            )
    finally:
        server.stop()
    if server.process is not None and server.process.returncode not in (0, None):
        out.notes.append(f"plet serve exited {server.process.returncode}: {server.tail(5)}")

    # what the server wrote, read back after it stopped: every acknowledged message is there
    with Cluster.open(str(cluster_path)) as cluster:
        for topic in topics.values():
            info = cluster.topic(f"{STREAM}:{topic}")
            out.log_end_offsets[topic] = info.partitions[0].log_end_offset
        if multi:
            parts = cluster.topic(f"{STREAM}:multi").partitions
            out.log_end_offsets["multi"] = sum(p.log_end_offset for p in parts)
        # The embedded API reading what confluent-kafka produced: batches stored as the
        # client sent them, which an embedded reader lays out in columns first
        say("wire: embedded consume of what confluent-kafka produced ...")
        topic = f"{STREAM}:{topics['produce-1']}"
        out.results.append(_embedded_read(cluster, topic, 1, messages, WIRE_PRODUCED["consume"]))
        if multi:
            op = WIRE_PRODUCED[MULTI_OP["consume"]]
            out.results.append(
                _embedded_read(cluster, f"{STREAM}:multi", MULTI_PARTITIONS, multi, op)
            )
    for r in out.results:
        if r.client == "confluent-kafka" and r.op == MULTI_OP["produce"] and r.error is None:
            if out.log_end_offsets["multi"] != r.messages:
                r.error = (
                    f"multi holds {out.log_end_offsets['multi']:,} messages, "
                    f"the client reported {r.messages:,} delivered"
                )
        if r.client != "embedded" and r.op == "produce" and r.error is None:
            topic = topics["kcat"] if r.client == "kcat" else topics[f"produce-{r.acks}"]
            if out.log_end_offsets[topic] != r.messages:
                r.error = (
                    f"{topic} holds {out.log_end_offsets[topic]:,} messages, "
                    f"the client reported {r.messages:,} delivered"
                )
    if wide:
        out.results += wide_cases(workdir, wide, wide_partitions, say)
    return out


def wide_cases(
    workdir: Path, n: int, partitions: int, say: Callable[[str], None]
) -> list[WireResult]:
    """kafka-python reading `partitions` partitions from a listener with fetch sessions and
    from one without, each a process of its own on the same cluster (written first)."""
    from engine import Cluster

    cluster_path = workdir / "served-wide"
    with Cluster.open(str(cluster_path), name="served") as cluster:
        cluster.create_stream(STREAM, ttl=0, default_partitions=1)
        _fill_wide(cluster, f"{STREAM}:wide", n, partitions)
    results = []
    for sessions in (True, False):
        label = "with" if sessions else "without"
        server = Server(
            cluster_path,
            workdir / f"serve-wide-{label}.log",
            max_fetch_sessions=1_000 if sessions else 0,
        )
        say(f"wire: kafka-python {_wide_op(partitions)} {label} fetch sessions ...")
        server.start()
        try:
            results.append(
                _guard(
                    functools.partial(
                        kafka_python_consume_wide, server, "wide", n, partitions, sessions
                    ),
                    WireResult(
                        f"kafka-python ({'' if sessions else 'no '}sessions)",
                        _wide_op(partitions),
                        "",
                        n,
                        0,
                        0.0,
                        0,
                    ),
                )
            )
        finally:
            server.stop()
    return results


# --------------------------------------------------------------------------- the report


def _cells(run: WireRun, r: WireResult) -> tuple[str, ...]:
    ratio = run.ratio(r)
    server = "" if r.server_cpu_s is None else f"{r.server_cpu_s:.2f}"
    per_msg = r.server_us_per_msg
    return (
        r.name,
        f"{r.messages:,}",
        f"{r.seconds:.3f}",
        f"{r.msg_per_s:,.0f}" if r.ok else "error",
        f"{r.mb_per_s:,.1f}" if r.ok else "—",
        "" if r.client == "embedded" else (f"{ratio:.2f}x" if ratio is not None else "—"),
        server,
        "" if per_msg is None else f"{per_msg:.2f}",
        "" if r.client_cpu_s is None else f"{r.client_cpu_s:.2f}",
    )


_TITLES = (
    "case",
    "messages",
    "seconds",
    "msg/s",
    "MB/s",
    "÷ embedded",
    "server CPU s",
    "server µs/msg",
    "client CPU s",
)


def _target_lines(run: WireRun) -> list[str]:
    lines = []
    for name, minimum, got, met in run.targets():
        actual = "not measured" if got is None else f"{got:,.0f} msg/s"
        verdict = {True: "met", False: "NOT MET", None: "n/a"}[met]
        lines.append(f"{name}: >= {minimum:,} msg/s, {actual}: {verdict}")
    return lines


def text(run: WireRun) -> str:
    rows = [_TITLES, *(_cells(run, r) for r in run.results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_TITLES))]
    lines = [
        f"Kafka wire listener: {run.messages:,} messages of {SIZE} B, one partition, "
        f"server: {run.server}",
    ]
    for i, row in enumerate(rows):
        cells = [
            row[0].ljust(widths[0]),
            *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)),
        ]
        lines.append("  " + "  ".join(cells).rstrip())
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    errors = [f"{r.name}: {r.error}" for r in run.results if r.error]
    if errors:
        lines += ["  Errors:", *(f"    {e}" for e in errors)]
    lines += ["  Targets (issue 14, one server process):"]
    lines += [f"    {line}" for line in _target_lines(run)]
    if run.load:
        lines.append(f"  Load: {run.load}")
    lines += [f"  Note: {note}" for note in run.notes]
    return "\n".join(lines)


def markdown(run: WireRun) -> str:
    lines = [
        "| " + " | ".join(_TITLES) + " |",
        "| --- | " + " | ".join("---:" for _ in _TITLES[1:]) + " |",
    ]
    lines += ["| " + " | ".join(_cells(run, r)) + " |" for r in run.results]
    errors = [f"{r.name}: {r.error}" for r in run.results if r.error]
    if errors:
        lines += ["", *(f"- error: {e}" for e in errors)]
    lines += ["", *(f"- {line}" for line in _target_lines(run))]
    lines += [f"- {note}" for note in run.notes]
    return "\n".join(lines)


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):
        return ""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.wire",
        description="Kafka clients against `plet serve`, beside the embedded API (issue 14).",
    )
    parser.add_argument("messages", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--profile", type=Path, help="run the server under cProfile, write here")
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp"), help="where to work")
    parser.add_argument("--no-kcat", action="store_true")
    parser.add_argument(
        "--multi", type=int, help="1 KiB messages over 16 partitions (default: a fifth of N)"
    )
    parser.add_argument(
        "--wide", type=int, help="messages read from --wide-partitions (default: a tenth of N)"
    )
    parser.add_argument("--wide-partitions", type=int, default=WIDE_PARTITIONS)
    args = parser.parse_args(argv)
    before = _load()
    with tempfile.TemporaryDirectory(prefix="plet-bench-wire-", dir=args.dir) as tmp:
        got = run(
            Path(tmp),
            args.messages,
            profile=args.profile,
            kcat=not args.no_kcat,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
            multi=args.multi,
            wide=args.wide,
            wide_partitions=args.wide_partitions,
        )
    if before:
        got.load = f"{before} before, {_load()} after (1-minute average)"
    print(text(got))
    print()
    print(markdown(got))


if __name__ == "__main__":
    main()
