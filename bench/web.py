"""The web console benchmark: server time per page of the Streams pages with one stream of
N topics (issue 6: under 100 ms with a million topics).

The cluster is built once and cached under bench/scratch/ (a million topics take about two
minutes to make): one stream `/fleet` whose topics are made as bench/topics.py makes them,
by producing one 100-byte message to each new topic, plus a few small streams so the
Streams list has rows. Then the Flask app (`web.create_app`) is driven in this process with
its test client, logged in as an administrator through the login form, and each page is
requested a number of times; the report gives the median and p95 in milliseconds. The test
client runs the whole WSGI stack (session, CSRF, view, template) without a socket, so the
numbers are the server's time, not the network's.

Run it with `plet bench --web N` (after the throughput cases) or on its own with
`python -m bench.web [N] [--streams S] [--rounds R] [--markdown]` (`--streams` makes the
Streams list long too: S other streams of one topic each).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.topics import VALUE

SCRATCH = Path(__file__).resolve().parent / "scratch"
STREAM = "/fleet"
STREAMS = 40  # other streams (/apps/s-000000 ..), one topic each: rows for the Streams list
ROUNDS = 30
TARGET_MS = 100.0
ADMIN = "bench"
ADMIN_PASSWORD = "bench-password-1"
DONE = "bench-web-complete"  # written once the cluster is fully built

_CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')


def topic_name(i: int) -> str:
    return f"car-{i:07d}"


def build(
    path: Path,
    topics: int,
    progress: Callable[[str], None] | None = None,
    streams: int = STREAMS,
) -> Path:
    """Make (or reuse, when a complete one is there) the benchmark cluster in `path`: the
    stream of `topics` topics and `streams` other streams."""
    from engine import Cluster, Producer

    if (path / DONE).exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    with Cluster.open(path, name="bench-web") as cluster:
        cluster.create_stream(STREAM, ttl=0, default_partitions=1)
        for i in range(streams):
            cluster.create_stream(f"/apps/s-{i:06d}", ttl=86400 * (i % 7 + 1))
            cluster.create_topic(f"/apps/s-{i:06d}:events", partitions=1 + i % 3)
            if progress and i and i % 100_000 == 0:
                progress(f"  {i:,} streams")
        producer = Producer(cluster, acks=1)
        start = time.perf_counter()
        for i in range(topics):
            producer.send(f"{STREAM}:{topic_name(i)}", value=VALUE)
            if progress and i and i % 100_000 == 0:
                progress(f"  {i:,} topics ({i / (time.perf_counter() - start):,.0f}/s)")
        producer.flush()
        producer.close()
        if cluster.topic_count(STREAM) != topics:
            raise RuntimeError(f"expected {topics:,} topics, found {cluster.topic_count(STREAM)}")
        cluster.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
    (path / DONE).write_text(f"{topics}\n", encoding="utf-8")
    return path


@dataclass
class PageTime:
    name: str
    url: str
    ms: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.ms)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


@dataclass
class WebResult:
    topics: int
    rounds: int
    pages: list[PageTime]
    streams: int = STREAMS
    load: tuple[float, float] | None = None  # 1-minute load average before and after

    @property
    def slow(self) -> list[str]:
        return [p.name for p in self.pages if p.p95 >= TARGET_MS]

    def text(self) -> str:
        lines = [
            f"web console: server time per page, stream of {self.topics:,} topics and "
            f"{self.streams:,} other streams ({self.rounds} requests each, Flask test client)",
        ]
        width = max(len(p.name) for p in self.pages)
        for p in self.pages:
            lines.append(f"  {p.name:<{width}}  median {p.median:7.1f} ms   p95 {p.p95:7.1f} ms")
        verdict = (
            f"over {TARGET_MS:.0f} ms (p95): {', '.join(self.slow)}"
            if self.slow
            else f"all under {TARGET_MS:.0f} ms (p95)"
        )
        lines.append(f"  {verdict}")
        if self.load:
            lines.append(f"  load average {self.load[0]:.2f} before, {self.load[1]:.2f} after")
        return "\n".join(lines)

    def markdown(self) -> str:
        lines = [
            f"Stream of {self.topics:,} topics and {self.streams:,} other streams, "
            f"{self.rounds} requests per page:",
            "",
            "| page | URL | median ms | p95 ms |",
            "| --- | --- | ---: | ---: |",
        ]
        lines += [f"| {p.name} | `{p.url}` | {p.median:.1f} | {p.p95:.1f} |" for p in self.pages]
        return "\n".join(lines)


def log_in(client) -> None:
    page = client.get("/login").get_data(as_text=True)
    found = _CSRF_FIELD.search(page)
    if found is None:
        raise RuntimeError("the login page has no CSRF token field")
    token = found.group(1)
    answer = client.post(
        "/login", data={"username": ADMIN, "password": ADMIN_PASSWORD, "csrf_token": token}
    )
    if answer.status_code != 302:
        raise RuntimeError(f"login failed: {answer.status_code}")


def pages(topics: int, app, streams: int = STREAMS) -> list[tuple[str, str]]:
    """(name, URL) of every page timed: the Streams list (first and last page, path
    descending, a search, a sort), the stream page and its topic pages (keyset: first,
    middle, last), a search, and a topic page when one exists."""
    s = STREAM.lstrip("/")
    middle = topic_name(topics // 2)
    found = [
        ("streams list", "/streams"),
        ("streams: last page", f"/streams?page={(streams + 1 + 49) // 50}"),
        ("streams: path descending", "/streams?order=desc"),
        ("streams search", "/streams?q=/fle"),
        ("streams, sorted by size", "/streams?sort=bytes&order=desc&size=200"),
        ("stream page (first topics)", f"/streams/{s}"),
        ("topics: middle page", f"/streams/{s}?after={middle}"),
        ("topics: last page", f"/streams/{s}?last=1"),
        ("topics: search", f"/streams/{s}?tq={topic_name(topics // 3)[:-2]}"),
        ("topics partial (htmx)", f"/streams/{s}?after={middle}&htmx"),
        ("replicas fragment", f"/streams/{s}/~/replicas"),
    ]
    if "topics.topic" in app.view_functions:
        found.append(("topic page (middle topic)", f"/topics/{s}:{middle}"))
    return found


def measure(path: Path, topics: int, rounds: int = ROUNDS, streams: int = STREAMS) -> WebResult:
    """Time every page of `pages()` `rounds` times on the cluster in `path`."""
    from web import close_app, create_app

    before = load_average()
    app = create_app(path)
    try:
        client = app.test_client()
        log_in(client)
        results = []
        for name, url in pages(topics, app, streams):
            headers = {}
            if url.endswith("&htmx"):
                url = url[: -len("&htmx")]
                headers = {"HX-Request": "true", "HX-Target": "topics"}
            timing = PageTime(name, url)
            answer = client.get(url, headers=headers)  # warm-up, and a check
            if answer.status_code != 200:
                raise RuntimeError(f"GET {url} answered {answer.status_code}")
            for _ in range(rounds):
                start = time.perf_counter()
                answer = client.get(url, headers=headers)
                answer.get_data()
                timing.ms.append((time.perf_counter() - start) * 1000)
            results.append(timing)
    finally:
        close_app(app)
    after = load_average()
    load = (before, after) if before is not None and after is not None else None
    return WebResult(topics, rounds, results, streams=streams, load=load)


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def run(
    topics: int,
    cache: Path | None = None,
    rounds: int = ROUNDS,
    progress: Callable[[str], None] | None = None,
    streams: int = STREAMS,
) -> WebResult:
    """Build (or reuse from `cache`, default bench/scratch/) the cluster of `topics` topics
    and `streams` other streams, and time the pages."""
    cache = SCRATCH if cache is None else cache
    path = cache / f"web-{topics}-{streams}"
    cache.mkdir(parents=True, exist_ok=True)
    if progress and not (path / DONE).exists():
        progress(f"building {path} ({topics:,} topics, {streams:,} other streams) ...")
    build(path, topics, progress, streams)
    return measure(path, topics, rounds, streams)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.web", description=__doc__)
    parser.add_argument("topics", nargs="?", type=int, default=1_000_000)
    parser.add_argument(
        "--streams", type=int, default=STREAMS, help="other streams, for the Streams list"
    )
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--cache", type=Path, default=SCRATCH)
    parser.add_argument("--markdown", action="store_true", help="print the Markdown table too")
    args = parser.parse_args(argv[1:])
    result = run(
        args.topics,
        args.cache,
        args.rounds,
        progress=lambda m: print(m, file=sys.stderr),
        streams=args.streams,
    )
    print(result.text())
    if args.markdown:
        print()
        print(result.markdown())


if __name__ == "__main__":
    main(sys.argv)
