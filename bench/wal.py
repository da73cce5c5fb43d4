"""The WAL-size benchmark: how large a running cluster's -wal files grow, and what the
checkpoint policy costs in throughput.

For each checkpoint policy (the one before issue 12, a checkpoint every 4,000 pages, i.e.
64 MiB at a volume's 16 KiB pages, and the engine's current `WAL_CHECKPOINT_BYTES` /
`JOURNAL_SIZE_LIMIT`), in a fresh cluster of 4 volumes:
- one producer writes N 100-byte messages round-robin over 8 partitions (so every volume
  takes writes) at the given acks, while one consumer tails the same partitions, as a
  console's live tail or a replicator would;
- a sampler reads the sizes of every -wal file of the cluster (volumes and catalog) every
  20 ms.
Reported: produce and consume msg/s, the largest total of the -wal files during the run,
and the total left on disk when the producer has stopped and the cluster is still open
(what a long-running `plet web` keeps).

Run it with `plet bench --wal N` or on its own with `python -m bench.wal N`.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PARTITIONS = 8
VALUE = bytes(range(100))
MIB = 1024 * 1024
# (label, checkpoint bytes, journal size limit); None means the engine's current value
POLICIES = (
    ("before: 4,000 pages (64 MiB), limit 64 MiB", 4000 * 16384, 64 * MIB),
    ("now", None, None),
)


@dataclass
class WalResult:
    label: str
    acks: str
    messages: int
    produce_s: float
    consume_s: float
    peak_bytes: int
    idle_bytes: int
    files: int
    samples: int = 0
    per_file_peak: dict[str, int] = field(default_factory=dict)

    @property
    def produce_per_s(self) -> float:
        return self.messages / self.produce_s

    @property
    def consume_per_s(self) -> float:
        return self.messages / self.consume_s


def _wal_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*-wal"))


def _sizes(root: Path) -> dict[str, int]:
    out = {}
    for path in _wal_files(root):
        try:
            out[path.name] = path.stat().st_size
        except FileNotFoundError:
            pass
    return out


def _one(workdir: Path, label: str, ckpt: int | None, limit: int | None, acks, n: int):
    from engine import Cluster, Consumer, Producer, TopicPartition
    from engine.storage import connection, wal_writeback

    saved = connection.WAL_CHECKPOINT_BYTES, connection.JOURNAL_SIZE_LIMIT
    saved_ahead = connection.WAL_AHEAD_BYTES
    if ckpt is not None:
        connection.WAL_CHECKPOINT_BYTES = ckpt
        connection.WAL_AHEAD_BYTES = max(ckpt, saved_ahead)  # acks=1's bound never below it
    if limit is not None:
        connection.JOURNAL_SIZE_LIMIT = limit
    root = workdir / f"wal-{len(list(workdir.iterdir()))}"
    peak: dict[str, int] = {}
    total_peak = 0
    samples = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal total_peak, samples
        while not stop.is_set():
            sizes = _sizes(root)
            samples += 1
            total_peak = max(total_peak, sum(sizes.values()))
            for name, size in sizes.items():
                peak[name] = max(peak.get(name, 0), size)
            stop.wait(0.02)

    try:
        with Cluster.open(root, name="wal", volumes=4) as cluster:
            cluster.create_stream("/b", ttl=0)
            cluster.create_topic("/b:t", partitions=PARTITIONS)
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            consumed = 0
            consume_end = [0.0]

            def tail() -> None:
                nonlocal consumed
                consumer = Consumer(cluster, group_id=None, auto_offset_reset="earliest")
                consumer.assign([TopicPartition("/b:t", p) for p in range(PARTITIONS)])
                try:
                    while consumed < n:
                        for records in consumer.poll(timeout_ms=100, max_records=500).values():
                            consumed += len(records)
                finally:
                    consume_end[0] = time.perf_counter()
                    consumer.close()

            producer = Producer(cluster, acks=acks, linger_ms=5 if acks == "all" else 0)
            reader = threading.Thread(target=tail, daemon=True)
            start = time.perf_counter()
            reader.start()
            send = producer.send
            for i in range(n):
                send("/b:t", value=VALUE, partition=i % PARTITIONS)
            producer.flush()
            produce_s = time.perf_counter() - start
            producer.close()
            reader.join(600)
            consume_s = consume_end[0] - start
            # the producer is gone, the cluster stays open: what is kept once the writeback
            # thread has found the volumes quiet
            time.sleep(wal_writeback.IDLE_S + 0.5)
            idle = sum(_sizes(root).values())
            stop.set()
            sampler.join(5)
            files = len(_wal_files(root))
        if consumed < n:
            raise RuntimeError(f"{label}: consumed {consumed:,} of {n:,}")
        return WalResult(
            label, str(acks), n, produce_s, consume_s, total_peak, idle, files, samples, peak
        )
    finally:
        connection.WAL_CHECKPOINT_BYTES, connection.JOURNAL_SIZE_LIMIT = saved
        connection.WAL_AHEAD_BYTES = saved_ahead
        shutil.rmtree(root, ignore_errors=True)


def run(workdir: Path, messages: int, acks_levels=(1, "all")) -> list[WalResult]:
    """Every policy at every acks level, alternating so drift hits both alike."""
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    for acks in acks_levels:
        for label, ckpt, limit in POLICIES:
            results.append(_one(workdir, label, ckpt, limit, acks, messages))
    return results


def _now_label() -> str:
    from engine.storage import connection

    return (
        f"now: {connection.WAL_CHECKPOINT_BYTES // MIB} MiB "
        f"(acks=1: a thread's, {connection.WAL_AHEAD_BYTES // MIB} MiB in the writer), "
        f"limit {connection.JOURNAL_SIZE_LIMIT // MIB} MiB"
    )


def text(results: list[WalResult]) -> str:
    lines = [
        f"WAL size: {results[0].messages:,} messages of 100 B over {PARTITIONS} partitions "
        "and 4 volumes, a consumer tailing",
    ]
    for r in results:
        label = _now_label() if r.label == "now" else r.label
        lines.append(
            f"  acks={r.acks:<3} {label:<44} produce {r.produce_per_s:>9,.0f} msg/s  "
            f"consume {r.consume_per_s:>9,.0f} msg/s  -wal peak {r.peak_bytes / MIB:6.1f} MiB"
            f"  idle {r.idle_bytes / MIB:6.1f} MiB ({r.files} files)"
        )
    return "\n".join(lines)


def markdown(results: list[WalResult]) -> str:
    rows = [
        "| acks | checkpoint policy | produce msg/s | consume msg/s | -wal peak (MiB) "
        "| -wal kept idle (MiB) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        label = _now_label() if r.label == "now" else r.label
        rows.append(
            f"| {r.acks} | {label} | {r.produce_per_s:,.0f} | {r.consume_per_s:,.0f} | "
            f"{r.peak_bytes / MIB:.1f} | {r.idle_bytes / MIB:.1f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    import tempfile

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        got = run(Path(tmp), count)
    print(text(got))
    print()
    print(markdown(got))
