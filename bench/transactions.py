"""What transactions cost (issue 25): in one run, N messages of 100 B through

- the embedded API: `engine.Producer` at acks="all" plain, idempotent
  (`enable_idempotence=True`) and transactional with 100 and 10,000 messages per
  transaction (`begin_transaction` ... `commit_transaction`); then `engine.Consumer`
  reading the 10,000-per-transaction topic read_uncommitted and read_committed (polls of
  500);
- `plet serve` (its own process, its own cluster): confluent-kafka's producer at acks=all
  plain, idempotent and transactional with 100 and 10,000 messages per transaction, and its
  consumer read_uncommitted and read_committed; once on topics of one partition, once on
  topics of `WIDE_PARTITIONS` written round robin.

Each row gives msg/s and its ratio to the plain row of the same API (for consumes, to
read_uncommitted). Targets: 10,000-message transactions at >= 0.8x plain produce,
read_committed at >= 0.9x read_uncommitted. `python -m bench.transactions [N]` prints a
Markdown table for docs/BENCHMARKS.md; `python -m bench.transactions --runs K [N]` runs the
embedded cases K times and prints the 10,000-message ratio run by run, with its median;
`python -m bench.transactions --interleaved [K]` runs plain and 10,000-message transactions
by turns, K rounds of 100,000 messages each, in one cluster.
"""

from __future__ import annotations

import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

VALUE = b"v" * 100
TXN_SIZES = (100, 10_000)
# The wire cases run again on topics of this many partitions: librdkafka's idempotent and
# transactional producer keeps one produce request in flight per partition, so with one
# partition the listener's time per request is the producer's pace.
WIDE_PARTITIONS = 4


def _timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def embedded(path: Path, n: int) -> list[tuple[str, float, str]]:
    """(case, seconds, the case it is compared with)."""
    from engine import Cluster, Consumer, Producer, TopicPartition

    rows: list[tuple[str, float, str]] = []
    with Cluster.open(path) as cluster:
        cluster.create_stream("/b")
        for name in ("plain", "idem", *(f"txn{s}" for s in TXN_SIZES)):
            cluster.create_topic(f"/b:{name}", partitions=1)

        def produce(producer: Producer, topic: str, per_txn: int | None) -> None:
            send = producer.send
            if per_txn is None:
                for _ in range(n):
                    send(topic, VALUE, partition=0)
                producer.flush()
                return
            for start in range(0, n, per_txn):
                producer.begin_transaction()
                for _ in range(min(per_txn, n - start)):
                    send(topic, VALUE, partition=0)
                producer.commit_transaction()

        plain = "embedded produce plain acks=all"
        cases: list[tuple[str, dict[str, Any], str, int | None]] = [
            (plain, {}, "/b:plain", None),
            ("embedded produce idempotent", {"enable_idempotence": True}, "/b:idem", None),
        ] + [
            (f"embedded produce {s:,}/transaction", {"transactional_id": f"t{s}"}, f"/b:txn{s}", s)
            for s in TXN_SIZES
        ]
        for case, kwargs, topic, per_txn in cases:
            producer = Producer(cluster, acks="all", linger_ms=5, **kwargs)
            if per_txn is not None:
                producer.init_transactions()
            rows.append((case, _timed(partial(produce, producer, topic, per_txn)), plain))
            producer.close()
        topic = f"/b:txn{TXN_SIZES[-1]}"
        uncommitted = "embedded consume read_uncommitted"
        for isolation in ("read_uncommitted", "read_committed"):
            consumer = Consumer(
                cluster,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level=isolation,
                max_poll_records=500,
            )
            consumer.assign([TopicPartition(topic, 0)])

            def drain(c: Consumer = consumer) -> None:
                got = 0
                while got < n:
                    got += sum(len(rs) for rs in c.poll(timeout_ms=1000).values())

            rows.append((f"embedded consume {isolation}", _timed(drain), uncommitted))
            consumer.close()
    return rows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wire(path: Path, n: int, partitions: int = 1) -> list[tuple[str, float, str]]:
    """The wire cases on topics of `partitions` partitions, written round robin."""
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer
    from confluent_kafka import TopicPartition as CKTP

    from engine import Cluster

    with Cluster.open(path) as cluster:
        cluster.create_stream("/kafka")
        for name in ("plain", "idem", *(f"txn{s}" for s in TXN_SIZES)):
            cluster.create_topic(f"/kafka:{name}", partitions=partitions)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "serve", "--cluster", str(path), "--listen",
         f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = proc.stderr.readline() if proc.stderr else ""
    if not re.search(rf":{port} ", line):
        proc.kill()
        raise RuntimeError(f"plet serve did not start: {line}")
    bootstrap = f"127.0.0.1:{port}"
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000}
    rows: list[tuple[str, float, str]] = []
    over = "" if partitions == 1 else f", {partitions} partitions"
    try:
        plain = f"confluent-kafka produce plain acks=all{over}"
        cases: list[tuple[str, dict[str, Any], str, int | None]] = [
            (plain, {"acks": "all"}, "plain", None),
            (
                f"confluent-kafka produce idempotent{over}",
                {"enable.idempotence": True},
                "idem",
                None,
            ),
        ]
        for size in TXN_SIZES:
            txn: dict[str, Any] = {"transactional.id": f"t{size}-{partitions}"}
            case = f"confluent-kafka produce {size:,}/transaction{over}"
            cases.append((case, txn, f"txn{size}", size))
        for case, extra, topic, per_txn in cases:
            producer = CKProducer({**settings, **extra})

            def produce(p: CKProducer = producer, t: str = topic, s: int | None = per_txn) -> None:
                def send(count: int) -> None:
                    for i in range(count):
                        while True:
                            try:
                                p.produce(t, VALUE, partition=i % partitions)
                                break
                            except BufferError:
                                p.poll(0.05)

                if s is None:
                    send(n)
                    p.flush(300)
                    return
                for start in range(0, n, s):
                    p.begin_transaction()
                    send(min(s, n - start))
                    p.commit_transaction(300)

            # one message first, and its delivery waited for (in a transaction of its own
            # for a transactional producer): the connections, and an idempotent producer's
            # id, which librdkafka asks for 0.5 s after it starts (its first try finds no
            # broker up), are start-up, not throughput
            if per_txn is not None:
                producer.init_transactions(60)
                producer.begin_transaction()
            producer.produce(topic, VALUE, partition=0)
            if per_txn is not None:
                producer.commit_transaction(60)
            producer.flush(60)
            rows.append((case, _timed(produce), plain))
        uncommitted = f"confluent-kafka consume read_uncommitted{over}"
        for isolation in ("read_uncommitted", "read_committed"):
            consumer = CKConsumer(
                {"bootstrap.servers": bootstrap, "group.id": f"b-{isolation}",
                 "isolation.level": isolation, "enable.auto.commit": False,
                 "fetch.wait.max.ms": 100}
            )  # fmt: skip
            consumer.list_topics(timeout=30)
            consumer.assign([CKTP(f"txn{TXN_SIZES[-1]}", p, 0) for p in range(partitions)])

            def drain(c: CKConsumer = consumer) -> None:
                got = 0
                while got < n:
                    got += sum(1 for m in c.consume(min(10000, n - got), 5) if not m.error())

            case = f"confluent-kafka consume {isolation}{over}"
            rows.append((case, _timed(drain), uncommitted))
            consumer.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return rows


def embedded_runs(runs: int, n: int) -> None:
    """The embedded 10,000-message case against plain produce, `runs` times in a row (each
    in a fresh cluster), with the ratios run by run and their median: plain produce swings
    from run to run more than a transaction's cost, so one run says little."""
    import statistics

    from bench.search import _cpu

    plain, txn = (
        "embedded produce plain acks=all",
        f"embedded produce {TXN_SIZES[-1]:,}/transaction",
    )
    print(f"{n:,} messages of {len(VALUE)} B per case; {_cpu()}, {platform.python_version()}")
    print(
        "| run | plain acks=all msg/s | 10,000/transaction msg/s | ratio | read_committed vs read_uncommitted |"
    )
    print("| ---: | ---: | ---: | ---: | ---: |")
    ratios = []
    for run in range(1, runs + 1):
        root = Path(tempfile.mkdtemp(prefix="bench-transactions-"))
        try:
            seconds = {case: s for case, s, _ in embedded(root / "embedded", n)}
        finally:
            shutil.rmtree(root, ignore_errors=True)
        ratios.append(seconds[plain] / seconds[txn])
        committed = (
            seconds["embedded consume read_uncommitted"]
            / seconds["embedded consume read_committed"]
        )
        print(
            f"| {run} | {n / seconds[plain]:,.0f} | {n / seconds[txn]:,.0f} | {ratios[-1]:.2f}x "
            f"| {committed:.2f}x |",
            flush=True,
        )
    print(f"median ratio {statistics.median(ratios):.3f}x")


def interleaved(rounds: int, chunk: int = 100_000) -> tuple[float, float, list[float]]:
    """The embedded 10,000-message case and plain produce (acks=all) taking turns in one
    cluster: per round, `chunk` plain messages then as many in transactions. A machine
    whose speed drifts within a second (this one's plain rate swings by a third from run to
    run) then slows both alike. Returns the plain and the transactional msg/s over all
    rounds, and each round's ratio."""
    from engine import Cluster, Producer

    root = Path(tempfile.mkdtemp(prefix="bench-transactions-"))
    try:
        with Cluster.open(root / "interleaved") as cluster:
            cluster.create_stream("/b")
            cluster.create_topic("/b:plain", partitions=1)
            cluster.create_topic("/b:txn", partitions=1)
            plain = Producer(cluster, acks="all", linger_ms=5)
            txn = Producer(cluster, acks="all", linger_ms=5, transactional_id="interleaved")
            txn.init_transactions()
            size = TXN_SIZES[-1]

            def plain_chunk() -> None:
                send = plain.send
                for _ in range(chunk):
                    send("/b:plain", VALUE, partition=0)
                plain.flush()

            def txn_chunk() -> None:
                send = txn.send
                for start in range(0, chunk, size):
                    txn.begin_transaction()
                    for _ in range(min(size, chunk - start)):
                        send("/b:txn", VALUE, partition=0)
                    txn.commit_transaction()

            ratios: list[float] = []
            plain_s = txn_s = 0.0
            for _ in range(rounds):
                a, b = _timed(plain_chunk), _timed(txn_chunk)
                plain_s, txn_s = plain_s + a, txn_s + b
                ratios.append(a / b)
            plain.close()
            txn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rounds * chunk / plain_s, rounds * chunk / txn_s, ratios


def main(argv: list[str]) -> None:
    import statistics

    from bench.search import _cpu

    if argv[:1] == ["--runs"]:
        embedded_runs(int(argv[1]), int(argv[2]) if len(argv) > 2 else 200_000)
        return
    if argv[:1] == ["--interleaved"]:
        rounds = int(argv[1]) if len(argv) > 1 else 5
        plain, txn, ratios = interleaved(rounds)
        print(
            f"{rounds} rounds of 100,000 messages of {len(VALUE)} B each way; "
            f"{_cpu()}, {platform.python_version()}"
        )
        print(
            f"plain acks=all {plain:,.0f} msg/s, {TXN_SIZES[-1]:,}/transaction {txn:,.0f} msg/s: "
            f"{txn / plain:.2f}x (rounds: median {statistics.median(ratios):.2f}x, "
            f"{min(ratios):.2f}x to {max(ratios):.2f}x)"
        )
        return
    n = int(argv[0]) if argv else 200_000
    root = Path(tempfile.mkdtemp(prefix="bench-transactions-"))
    try:
        rows = embedded(root / "embedded", n) + wire(root / "wire", n)
        rows += wire(root / "wire-4", n, partitions=WIDE_PARTITIONS)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    seconds = {case: s for case, s, _ in rows}
    print(f"{n:,} messages of {len(VALUE)} B per case; {_cpu()}, {platform.python_version()}")
    print("| case | msg/s | vs |")
    print("| --- | ---: | ---: |")
    for case, s, base in rows:
        ratio = "" if case == base else f"{seconds[base] / s:.2f}x {base.split(' ', 2)[-1]}"
        print(f"| {case} | {n / s:,.0f} | {ratio} |")


if __name__ == "__main__":
    main(sys.argv[1:])
