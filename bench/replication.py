"""Replication benchmark: `python -m bench.replication [--messages N] [--size B] ...`.

Measures, on real files in a temporary directory:

1. throughput of copying a stream that holds `--messages` messages of `--size` bytes into an
   empty replica, between two cluster directories and over HTTP on loopback (the target's
   web app served by werkzeug from a thread, as `plet web` serves it): messages/s and MB/s
   of payload, from the first pass to the last;
2. the lag of a link (messages and seconds, as `replicas()` reports it) while a producer
   writes `--rate` messages/s for `--seconds` seconds and a replicator follows with
   `run_forever`: sampled every 0.25 s, reported as mean, p95 and max, for both transports.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from engine import Cluster, Producer, Replicator

STREAM = "/bench/repl"


def _machine() -> dict[str, object]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


@contextmanager
def _served(path: Path):
    """The target's web app on 127.0.0.1 from a thread; yields its base URL."""
    from werkzeug.serving import make_server

    from web import close_app, create_app

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = create_app(cluster_path=path)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
        close_app(app)


def _fill(cluster: Cluster, messages: int, size: int, partitions: int) -> int:
    cluster.create_stream(STREAM, ttl=0, default_partitions=partitions)
    cluster.create_topic(f"{STREAM}:t", partitions=partitions)
    producer = Producer(cluster, acks=1, linger_ms=5, default_stream=STREAM)
    value = os.urandom(size // 2).hex().encode()[:size]
    for i in range(messages):
        producer.send("t", value=value, key=b"k%d" % (i % 1000))
    producer.flush()
    producer.close()
    return messages * size


def _target(kind: str, target_dir: Path, stack):
    """The target address of a link to a fresh cluster at `target_dir`."""
    with Cluster.open(target_dir):
        pass
    if kind == "directory":
        return str(target_dir)
    with Cluster.open(target_dir) as tgt:
        token = tgt.create_replication_token(STREAM)
    host = stack.enter_context(_served(target_dir))
    return f"http://{token}@{host}"


def throughput(root: Path, kind: str, messages: int, size: int, partitions: int) -> dict:
    from contextlib import ExitStack

    with ExitStack() as stack, Cluster.open(root / f"src-{kind}") as src:
        payload = _fill(src, messages, size, partitions)
        target = _target(kind, root / f"dst-{kind}", stack)
        src.add_replica(STREAM, target, paused=True)
        src.resume_replica(STREAM, target)
        started = time.perf_counter()
        moved = 0
        with Replicator(src) as replicator:
            while True:
                got = replicator.run_once()
                moved += got
                if not got:
                    break
        elapsed = time.perf_counter() - started
        [link] = src.replicas(STREAM)
        assert link.state == "in_sync" and moved == messages, (link, moved)
        return {
            "transport": kind,
            "messages": messages,
            "value_bytes": size,
            "seconds": round(elapsed, 3),
            "messages_per_s": round(messages / elapsed),
            "mb_per_s": round(payload / elapsed / 1e6, 2),
            "stored_mb_per_s": round(link.copied_bytes / elapsed / 1e6, 2),
        }


def lag(root: Path, kind: str, rate: int, seconds: float, size: int, partitions: int) -> dict:
    from contextlib import ExitStack

    with ExitStack() as stack, Cluster.open(root / f"lag-src-{kind}") as src:
        _fill(src, 0, size, partitions)
        target = _target(kind, root / f"lag-dst-{kind}", stack)
        src.add_replica(STREAM, target)
        replicator = Replicator(src)
        follower = threading.Thread(target=replicator.run_forever, args=(0.05,), daemon=True)
        follower.start()
        stop = threading.Event()
        produced = [0]

        def produce() -> None:
            producer = Producer(src, acks=1, linger_ms=5, default_stream=STREAM)
            value = b"x" * size
            start = time.perf_counter()
            while not stop.is_set():
                due = int((time.perf_counter() - start) * rate)
                while produced[0] < due:
                    producer.send("t", value=value, key=b"k%d" % (produced[0] % 1000))
                    produced[0] += 1
                time.sleep(0.005)
            producer.close()

        writer = threading.Thread(target=produce, daemon=True)
        writer.start()
        samples: list[tuple[int, float]] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.25)
            [link] = src.replicas(STREAM)
            samples.append((link.lag_messages, link.lag_seconds))
        stop.set()
        writer.join(10)
        drained = time.monotonic()
        while time.monotonic() - drained < 30:
            [link] = src.replicas(STREAM)
            if link.state == "in_sync":
                break
            time.sleep(0.05)
        catch_up = time.monotonic() - drained
        replicator.stop()
        follower.join(10)
        msgs = sorted(m for m, _ in samples)
        secs = sorted(s for _, s in samples)

        def p95(values: list) -> float:
            return values[min(len(values) - 1, int(len(values) * 0.95))]

        return {
            "transport": kind,
            "rate_per_s": rate,
            "produced": produced[0],
            "samples": len(samples),
            "lag_messages_mean": round(statistics.fmean(msgs), 1),
            "lag_messages_p95": p95(msgs),
            "lag_messages_max": msgs[-1],
            "lag_seconds_mean": round(statistics.fmean(secs), 3),
            "lag_seconds_p95": round(p95(secs), 3),
            "lag_seconds_max": round(secs[-1], 3),
            "in_sync_after_stop_s": round(catch_up, 3),
            "final_state": link.state,
        }


def _markdown(result: dict) -> str:
    lines = [
        "| transport | messages | value bytes | seconds | messages/s | MB/s (values) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["throughput"]:
        lines.append(
            f"| {r['transport']} | {r['messages']:,} | {r['value_bytes']} | {r['seconds']} "
            f"| {r['messages_per_s']:,} | {r['mb_per_s']} |"
        )
    lines += [
        "",
        "| transport | produce rate/s | lag msgs mean / p95 / max | lag s mean / p95 / max "
        "| in sync after stop (s) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in result["lag"]:
        lines.append(
            f"| {r['transport']} | {r['rate_per_s']:,} | {r['lag_messages_mean']} / "
            f"{r['lag_messages_p95']} / {r['lag_messages_max']} | {r['lag_seconds_mean']} / "
            f"{r['lag_seconds_p95']} / {r['lag_seconds_max']} | {r['in_sync_after_stop_s']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replication", description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=5_000, help="produce rate for the lag test")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the lag test")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--dir", metavar="DIR", help="work here instead of a temporary dir")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="plet-bench-repl-", dir=args.dir) as tmp:
        root = Path(tmp)
        result = {
            "machine": _machine(),
            "settings": vars(args),
            "throughput": [
                throughput(root, kind, args.messages, args.size, args.partitions)
                for kind in ("directory", "http")
            ],
            "lag": [
                lag(root, kind, args.rate, args.seconds, args.size, args.partitions)
                for kind in ("directory", "http")
            ],
        }
    print(_markdown(result))
    print(json.dumps(result["machine"]), file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
