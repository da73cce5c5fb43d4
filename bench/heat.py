"""The heat page benchmark: server time and HTML size of the web heat page (issue 16, item
4: under 100 ms for an hour's window) and the time of the engine call behind it, on a busy
cluster.

The cluster: `volumes` volumes, one stream `/busy` of `topics` topics of `partitions`
partitions each (2,400 partitions by default), every partition made by producing one
message to it. Then the last hour of heat is seeded through the volumes' heat API
(`Volume.add_heat`, as if it had been counted): every partition has a hotness (a few hot
ones, a long warm tail) and is written in a share of the hour's 10-second buckets that
grows with it (20 % to 100 %), and read in about half of those. The heat is seeded afresh
on every run, relative to now, so the cluster is not cached.

The Flask app is driven in this process with its test client, logged in as an
administrator; every page is requested `rounds` times after a warm-up: median and p95 in
milliseconds, and the HTML size. `Cluster.heat` (as the page calls it) is timed too.

Run it with `python -m bench.heat [--partitions-per-topic N] [--rounds R] [--markdown]`.
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.web import ADMIN, ADMIN_PASSWORD, TARGET_MS, PageTime, load_average, log_in

STREAM = "/busy"
TOPICS = 40
PARTITIONS = 60
VOLUMES = 3
ROUNDS = 20
WINDOWS = (300, 900, 3600)
HOUR_BUCKETS = 360


@dataclass
class PageSize(PageTime):
    html_bytes: int = 0


@dataclass
class HeatResult:
    partitions: int
    volumes: int
    heat_rows: int
    rounds: int
    pages: list[PageSize] = field(default_factory=list)
    engine: list[PageTime] = field(default_factory=list)
    load: tuple[float, float] | None = None

    def text(self) -> str:
        lines = [
            f"heat page: {self.partitions:,} warm partitions on {self.volumes} volumes, "
            f"{self.heat_rows:,} heat rows in the last hour ({self.rounds} requests each, "
            "Flask test client)"
        ]
        width = max(len(p.name) for p in self.pages + self.engine)
        for p in self.pages:
            lines.append(
                f"  {p.name:<{width}}  median {p.median:7.1f} ms   p95 {p.p95:7.1f} ms   "
                f"{p.html_bytes / 1000:7.1f} KB"
            )
        for e in self.engine:
            lines.append(f"  {e.name:<{width}}  median {e.median:7.1f} ms   p95 {e.p95:7.1f} ms")
        slow = [p.name for p in self.pages if p.median >= TARGET_MS]
        lines.append(
            f"  over {TARGET_MS:.0f} ms (median): {', '.join(slow)}"
            if slow
            else f"  all under {TARGET_MS:.0f} ms (median)"
        )
        if self.load:
            lines.append(f"  load average {self.load[0]:.2f} before, {self.load[1]:.2f} after")
        return "\n".join(lines)

    def markdown(self) -> str:
        lines = [
            f"{self.partitions:,} warm partitions on {self.volumes} volumes, "
            f"{self.heat_rows:,} heat rows in the last hour, {self.rounds} requests each:",
            "",
            "| what | median ms | p95 ms | HTML KB |",
            "| --- | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {p.name} | {p.median:.1f} | {p.p95:.1f} | {p.html_bytes / 1000:.1f} |"
            for p in self.pages
        ]
        lines += [f"| {p.name} | {p.median:.1f} | {p.p95:.1f} | |" for p in self.engine]
        return "\n".join(lines)


def build(path: Path, topics: int, partitions: int, volumes: int, seed: int = 16) -> int:
    """Make the cluster in `path` and seed the last hour of heat; the number of heat rows."""
    from engine import Cluster, Producer
    from engine.storage.volume import HEAT_BUCKET_S

    shutil.rmtree(path, ignore_errors=True)
    rng = random.Random(seed)
    with Cluster.open(path, name="bench-heat", volumes=volumes) as cluster:
        cluster.create_stream(STREAM, ttl=0)
        for t in range(topics):
            cluster.create_topic(f"{STREAM}:t{t:03d}", partitions=partitions)
        producer = Producer(cluster, acks=1)
        for t in range(topics):
            for p in range(partitions):
                producer.send(f"{STREAM}:t{t:03d}", value=b"x" * 100, partition=p)
        producer.flush()
        producer.close()
        cluster.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
        now = time.time_ns() // 1_000_000_000 // HEAT_BUCKET_S
        first = now - HOUR_BUCKETS + 1
        by_volume: dict[int, list[tuple[int, int, int, int, int, int]]] = {}
        for pl in cluster.partitionlets():
            hot = rng.paretovariate(1.2)  # a few hot partitions, a long warm tail
            share = min(1.0, 0.2 + hot / 10)
            rows = by_volume.setdefault(pl.volume, [])
            for bucket in range(first, now + 1):
                if rng.random() >= share:
                    continue
                wm = max(1, int(hot * rng.uniform(5, 50)))
                rm = wm if rng.random() < 0.5 else 0
                rows.append((bucket, pl.id, wm, wm * 120, rm, rm * 120))
        for volume_id, rows in by_volume.items():
            cluster.volume(volume_id).add_heat(rows)
    return sum(len(rows) for rows in by_volume.values())


def measure(path: Path, rounds: int, windows=WINDOWS) -> tuple[list[PageSize], list[PageTime]]:
    from web import close_app, create_app
    from web.heat import HOTTEST
    from web.heatmap import MAX_COLUMNS

    app = create_app(path)
    pages: list[PageSize] = []
    engine: list[PageTime] = []
    try:
        client = app.test_client()
        log_in(client)
        gc.freeze()  # as `plet web` does once it has started (web/cli.py)
        urls = [(f"heat page, {w} s", f"/heat?window={w}") for w in windows]
        urls.append(("heat page, 1 h, htmx refresh", "/heat/live?window=3600"))
        urls.append(("heat page, 1 h, read bytes", "/heat?window=3600&metric=read_bytes"))
        urls.append(
            ("heat page, 1 h, highlight", f"/heat?window=3600&topic={STREAM}:t007&partition=3")
        )
        for name, url in urls:
            headers = {"HX-Request": "true"} if "/live" in url else {}
            answer = client.get(url, headers=headers)  # warm-up, and a check
            if answer.status_code != 200:
                raise RuntimeError(f"GET {url} answered {answer.status_code}")
            timing = PageSize(name, url, html_bytes=len(answer.get_data()))
            for _ in range(rounds):
                start = time.perf_counter()
                answer = client.get(url, headers=headers)
                answer.get_data()
                timing.ms.append((time.perf_counter() - start) * 1000)
            pages.append(timing)
        cluster = _cluster_of(app)
        # the page's call (columns, from the cache), and the plain one (every bucket read)
        for w in windows:
            for columns in (MAX_COLUMNS, None):
                how = f", columns={columns}" if columns else ""
                call = PageTime(f"Cluster.heat({w}, top={HOTTEST}{how})", "")
                cluster.heat(w, top=HOTTEST, by="write_messages", columns=columns)
                for _ in range(rounds):
                    start = time.perf_counter()
                    cluster.heat(w, top=HOTTEST, by="write_messages", columns=columns)
                    call.ms.append((time.perf_counter() - start) * 1000)
                engine.append(call)
    finally:
        close_app(app)
    return pages, engine


def _cluster_of(app):
    from web.pages import app_cluster

    with app.app_context():
        return app_cluster()


def run(
    topics: int = TOPICS,
    partitions: int = PARTITIONS,
    volumes: int = VOLUMES,
    rounds: int = ROUNDS,
    workdir: Path | None = None,
) -> HeatResult:
    """Build the busy cluster in a fresh directory (under `workdir`), time the heat page,
    and remove the cluster."""
    base = Path(tempfile.mkdtemp(prefix="bench-heat-", dir=workdir))
    try:
        path = base / "cluster"
        rows = build(path, topics, partitions, volumes)
        before = load_average()
        pages, engine = measure(path, rounds)
        after = load_average()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    load = (before, after) if before is not None and after is not None else None
    return HeatResult(topics * partitions, volumes, rows, rounds, pages, engine, load)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.heat", description=__doc__)
    parser.add_argument("--topics", type=int, default=TOPICS)
    parser.add_argument("--partitions-per-topic", type=int, default=PARTITIONS)
    parser.add_argument("--volumes", type=int, default=VOLUMES)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--markdown", action="store_true", help="print the Markdown table too")
    args = parser.parse_args(argv[1:])
    result = run(args.topics, args.partitions_per_topic, args.volumes, args.rounds)
    print(result.text())
    if args.markdown:
        print()
        print(result.markdown())


if __name__ == "__main__":
    main(sys.argv)
