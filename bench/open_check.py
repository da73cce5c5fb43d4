"""What opening a cluster's consistency check costs at a million topics (issue 26).

`Cluster.open` now checks each volume's SQLite header (a few bytes, without SQLite) and
leaves a damaged or missing volume aside instead of refusing the cluster; `plet check`
does the full work. `python -m bench.open_check N [PATH [open]]` builds (when PATH does not exist)
a cluster of N topics through the catalog's bulk path (`bench.search.seed`), gives every
partition its first partitionlet and writes one message to one topic in a hundred, then
times `Cluster.open` (median of ROUNDS) and, when the engine has it, `plet check --quick`
and `plet check` (not with `open`).

It uses only calls that existed before the check did, so the same file runs against the
engine before and after: build once, then run it with `PYTHONPATH` at a checkout of the
commit before (an exported tree, this file copied into its bench/) and at HEAD, on the
same PATH (docs/BENCHMARKS.md,
"Opening and checking a million topics").
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = 7
STEP = 50_000


def build(path: Path, topics: int) -> float:
    from bench.search import STREAM, seed, topic_name
    from engine import Cluster, Producer

    start = time.perf_counter()
    with Cluster.open(path, name="bench-open-check") as cluster:
        seed(cluster, topics)
        stream_id = cluster.catalog.stream(STREAM).id
        volumes = sorted(cluster.open_volumes())
        rows = cluster.catalog.topics(stream_id, None, None, 0)
        wanted = [
            (t.id, p, volumes[(t.id + p) % len(volumes)]) for t in rows for p in range(t.partitions)
        ]
        for i in range(0, len(wanted), STEP):
            cluster.catalog.add_first_partitionlets(wanted[i : i + STEP])
        producer = Producer(cluster, acks=1)
        for i in range(0, topics, 100):
            producer.send(f"{STREAM}:{topic_name(i)}", value=b"x", partition=0)
        producer.flush()
        producer.close()
    return time.perf_counter() - start


def _median_ms(call, rounds: int = ROUNDS) -> float:
    call()  # warm-up: the page cache holds the files, as for a process that opens often
    ms = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        ms.append((time.perf_counter() - start) * 1000)
    return statistics.median(ms)


def main(argv: list[str]) -> None:
    from engine import Cluster

    topics = int(argv[0]) if argv else 1_000_000
    if len(argv) > 1:
        path = Path(argv[1])
    else:
        path = Path(tempfile.mkdtemp(prefix="bench-open-check-")) / "cluster"
    if not path.exists():
        print(f"built {topics:,} topics in {build(path, topics):.1f} s at {path}")
    with Cluster.open(path) as cluster:
        partitionlets = len(cluster.catalog.all_partitionlets())
    print(f"| topics | {topics:,} |")
    print(f"| partitionlets | {partitionlets:,} |")
    print(f"| `Cluster.open` | {_median_ms(lambda: Cluster.open(path).close()):.1f} ms |")
    if argv[2:] == ["open"]:
        return  # `Cluster.open` only (interleaved before/after runs)
    try:
        from engine.ops import check
    except ImportError:
        return  # the engine before `plet check`
    for quick in (True, False):
        with Cluster.open(path) as cluster:
            start = time.perf_counter()
            report = check.run(cluster, quick=quick)
            took = time.perf_counter() - start
        name = "`plet check --quick`" if quick else "`plet check`"
        print(f"| {name} | {took:.1f} s ({len(report.problems)} problems) |")


if __name__ == "__main__":
    main(sys.argv[1:])
