"""What topic-level policies cost a catalog of a million topics that has none (issue 24).

Overrides live in one JSON column of the topic's row (`topics.policies`), NULL when a topic
has none. `python -m bench.topic_policies [N]` makes one fresh cluster of N topics (default a
million) through the catalog's bulk path (`bench.search.seed`) and times what the column can
touch: the build, the catalog's size, `Cluster.open`, `Cluster.topic` (the join that reads
a topic with its stream's policies), and one retention and one compaction pass (whose
catalog walk filters on the topic's value, then the stream's, inside SQLite).

It uses only calls that existed before the column did, so the same file runs against the
engine before and after: run it once with `PYTHONPATH` at a checkout of the commit before
topic policies (42bf372^) and once at HEAD, and compare the two tables
(docs/BENCHMARKS.md, "A million topics without overrides").
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = 5
LOOKUPS = 2_000


def _median_ms(call) -> float:
    from bench.search import _time

    return _time(call, ROUNDS)[0]


def main(argv: list[str]) -> None:
    import engine
    from bench.search import STREAM, _cpu, seed, topic_name
    from engine import Cluster

    topics = int(argv[0]) if argv else 1_000_000
    path = Path(tempfile.mkdtemp(prefix="bench-topic-policies-")) / "cluster"
    start = time.perf_counter()
    with Cluster.open(path, name="bench-topic-policies") as cluster:
        seed(cluster, topics)
    build_s = time.perf_counter() - start
    catalog_bytes = (path / "catalog.db").stat().st_size

    open_ms = _median_ms(lambda: Cluster.open(path).close())
    rows: list[tuple[str, str]] = [
        ("topics", f"{topics:,}"),
        ("build (bulk path)", f"{build_s:.1f} s"),
        ("catalog.db after close", f"{catalog_bytes / 2**20:.1f} MiB"),
        ("`Cluster.open`", f"{open_ms:.1f} ms"),
    ]
    names = [
        f"{STREAM}:{topic_name(i)}"
        for i in random.Random(7).sample(range(topics), min(LOOKUPS, topics))
    ]
    with Cluster.open(path) as cluster:
        start = time.perf_counter()
        for name in names:
            cluster.topic(name)
        lookup_us = (time.perf_counter() - start) / len(names) * 1e6
        rows.append(
            (f"`Cluster.topic` ({len(names):,} names, each read once)", f"{lookup_us:.0f} µs")
        )
        rows.append(
            ("`enforce_retention()` pass", f"{_median_ms(cluster.enforce_retention):.0f} ms")
        )
        rows.append(("`compact()` pass", f"{_median_ms(cluster.compact):.0f} ms"))

    commit = subprocess.run(
        ["git", "-C", str(Path(engine.__file__).parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"engine at {commit or '?'} ({Path(engine.__file__).parent}); {_cpu()}")
    print("| what | time or size |")
    print("| --- | ---: |")
    for what, value in rows:
        print(f"| {what} | {value} |")


if __name__ == "__main__":
    main(sys.argv[1:])
