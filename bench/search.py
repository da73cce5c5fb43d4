"""The name search and the all-topics page at a million topics (issue 16, item 1).

`seed(cluster, n)` makes the stream `/fleet` of `n` topics (`car-0000000` ...) and 40 small
streams of one topic each straight through the catalog's bulk path (`create_topics`, one
transaction per 100,000 names; the triggers fill the trigram index as they go), about a
minute for a million, as the Playwright test does. `python -m bench.search [N]` then times
`Cluster.search` and the web pages (server time, Flask test client) and prints a Markdown
table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

STREAM = "/fleet"
OTHER_STREAMS = 40
STEP = 100_000
ROUNDS = 20


def topic_name(i: int) -> str:
    return f"car-{i:07d}"


def seed(cluster, topics: int) -> None:
    """Streams and `topics` topics, made through the catalog's bulk path."""
    cluster.create_stream(STREAM, ttl=0, default_partitions=1)
    for i in range(OTHER_STREAMS):
        cluster.create_stream(f"/apps/s-{i:06d}")
        cluster.create_topic(f"/apps/s-{i:06d}:events")
    stream_id = cluster.catalog.stream(STREAM).id
    for start in range(0, topics, STEP):
        cluster.catalog.create_topics(
            stream_id,
            [(topic_name(i), 1 + i % 3) for i in range(start, min(topics, start + STEP))],
            exist_ok=False,
        )


def _time(call, rounds: int = ROUNDS) -> tuple[float, float]:
    call()  # warm-up
    ms = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        ms.append((time.perf_counter() - start) * 1000)
    ms.sort()
    return statistics.median(ms), ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str]) -> None:
    from bench.web import ADMIN, ADMIN_PASSWORD, log_in
    from engine import Cluster
    from web import close_app, create_app

    topics = int(argv[0]) if argv else 1_000_000
    root = Path(tempfile.mkdtemp(prefix="bench-search-"))
    path = root / "cluster"
    start = time.perf_counter()
    with Cluster.open(path, name="bench-search") as cluster:
        seed(cluster, topics)
        cluster.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
        seeded = time.perf_counter() - start
        cluster.record_metrics()  # a day of the cluster's minutes, for the charts
        middle = topic_name(topics // 2)[4:]
        rows = [
            (f"`search({middle!r})` (one match)", _time(lambda: cluster.search(middle))),
            (
                "`search('s-00001')` (10 streams)",
                _time(lambda: cluster.search("s-00001")),
            ),
            ("`search('car')` (capped at 2,000)", _time(lambda: cluster.search("car"))),
            ("`topic_listing(sort='name')`", _time(lambda: cluster.topic_listing(sort="name"))),
        ]
    app = create_app(path)
    try:
        client = app.test_client()
        log_in(client)
        live = {"HX-Request": "true", "HX-Target": "search-live"}
        pages = [
            ("page `/search?q=" + middle + "`", f"/search?q={middle}", {}),
            ("live results (htmx)", f"/search?q={middle}", live),
            ("page `/search?q=car` (capped)", "/search?q=car", {}),
            ("page `/topics` (by name)", "/topics", {}),
            (
                "page `/topics?sort=stream` (2nd page)",
                "/topics?sort=stream&after=/fleet~car-0500000",
                {},
            ),
            ("page `/topics?sort=partitions&order=desc`", "/topics?sort=partitions&order=desc", {}),
            ("page `/topics?sort=created`", "/topics?sort=created", {}),
            ("stream page `/streams/apps/s-000001`", "/streams/apps/s-000001", {}),
            (
                "stream page, topic search `?tq=" + middle + "`",
                f"/streams/fleet?tq={middle}&htmx",
                live,
            ),
            ("stream page `/streams/fleet` (a million topics)", "/streams/fleet", {}),
            ("topic page `/topics/fleet:car-0500000`", "/topics/fleet:car-0500000", {}),
            (
                "chart of `/fleet`, 1 h (htmx)",
                "/charts?scope=stream&name=/fleet&metric=write_messages&metric=read_messages",
                live,
            ),
            (
                "chart of the cluster, 7 d (htmx)",
                "/charts?scope=cluster&metric=write_messages&metric=read_messages&window=7d",
                live,
            ),
            ("overview `/`", "/", {}),
            ("effective permissions `/users/NAME/permissions`", f"/users/{ADMIN}/permissions", {}),
        ]
        for name, url, headers in pages:
            url = url.replace("&htmx", "")
            assert client.get(url, headers=headers).status_code == 200, url
            rows.append((name, _time(lambda u=url, h=headers: client.get(u, headers=h).get_data())))
    finally:
        close_app(app)
    load = os.getloadavg()[0]
    print(
        f"{topics:,} topics seeded in {seeded:.0f} s; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, load average {load:.2f}"
    )
    print("\n| what | median ms | p95 ms |\n| --- | ---: | ---: |")
    for name, (median, p95) in rows:
        print(f"| {name} | {median:.1f} | {p95:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
