"""The demo of `plet web --demo` (web/demo.py): three real clusters on real files, the ring,
the live load, and the command itself in a real process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from tests.timing import scaled
from web import demo

TOPICS = 300


@pytest.fixture(autouse=True)
def _no_admin_password(monkeypatch):
    # The generated-password path is the one under test; a developer's env must not hide it.
    monkeypatch.delenv("PLET_ADMIN_PASSWORD", raising=False)
    monkeypatch.delenv("PLET_DEMO_VIEWER_PASSWORD", raising=False)


def _end_offsets(cluster: Cluster) -> dict[tuple[str, int], int]:
    """Every partition's log end offset in every stream of the cluster."""
    ends = {}
    for stream in cluster.streams():
        for topic in cluster.topics(stream.path):
            for p in topic.partitions:
                ends[(topic.name, p.partition)] = p.log_end_offset
    return ends


def _wait_for(predicate, timeout: float = 20, interval: float = 0.1):
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def test_prepare_builds_the_demo_and_a_second_run_adds_nothing(tmp_path):
    root = tmp_path / "demo"
    lines: list[str] = []
    got = demo.prepare(root, topics=TOPICS, replay=False, echo=lines.append)

    assert got.clusters == {name: root.resolve() / name for name in ("dc1", "dc2", "dc3")}
    assert got.ring == {
        "dc1 -> dc2": "in_sync",
        "dc2 -> dc3": "in_sync",
        "dc3 -> dc1": "in_sync",
    }
    assert got.fleet_created == TOPICS and got.replay_job is None
    assert any("300 / 300 topics" in line for line in lines)  # progress was shown

    with (
        Cluster.open(got.clusters["dc1"]) as dc1,
        Cluster.open(got.clusters["dc2"]) as dc2,
        Cluster.open(got.clusters["dc3"]) as dc3,
    ):
        assert [c.name for c in (dc1, dc2, dc3)] == ["dc1", "dc2", "dc3"]
        assert dc1.topic_count(demo.FLEET) == TOPICS
        assert {s.path for s in dc1.streams()} >= {
            "/apps/sensors",
            "/apps/clicks",
            "/apps/profiles",
            "/ops/logs",
            demo.FLEET,
        }
        # The ring carried dc1's clicks to dc2 and dc3, and dc2's round to dc3 and dc1,
        # at the same offsets everywhere.
        for topic in (demo.RING_TOPIC_DC1, demo.RING_TOPIC_DC2):
            ends = [[p.log_end_offset for p in c.topic(topic).partitions] for c in (dc1, dc2, dc3)]
            assert ends[0] == ends[1] == ends[2] and sum(ends[0]) > 0
        # The many-topic stream and its ring stay out of dc2 and dc3.
        with pytest.raises(errors.UnknownStream):
            dc2.stream(demo.FLEET)

        # The first administrator (with the password printed once) and the viewer.
        name, password = got.admin
        assert name == "admin" and password
        assert dc1.user("admin").admin
        assert dc1.authenticate("admin", password) is not None
        viewer = dc1.user(demo.VIEWER)
        assert not viewer.admin and viewer.groups == (demo.VIEWER_GROUP,)
        assert dc1.authenticate(demo.VIEWER, got.viewer_password) is not None

        # The ACE lets the viewer consume /apps/sensors, and nothing else of dc1's.
        assert demo.VIEWER_GROUP in dc1.stream(demo.ACE_STREAM).policies["consume_perm"]
        tp = TopicPartition(f"{demo.ACE_STREAM}:car-17", 0)
        consumer = Consumer(dc1, principal=viewer.principal, enable_auto_commit=False)
        try:
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            assert _wait_for(lambda: consumer.poll(timeout_ms=200).get(tp), timeout=5)
        finally:
            consumer.close()
        with pytest.raises(errors.AccessDenied):
            Consumer(dc1, demo.RING_TOPIC_DC1, principal=viewer.principal).poll(timeout_ms=10)
        before = [_end_offsets(c) for c in (dc1, dc2, dc3)]

    start = time.perf_counter()
    again = demo.prepare(root, topics=TOPICS, replay=False, echo=lines.append)
    assert time.perf_counter() - start < scaled(10)
    assert again.fleet_created == 0 and again.fleet_topics == TOPICS
    assert again.admin == ("admin", None) and again.viewer_password is None
    assert set(again.ring.values()) == {"in_sync"}
    with (
        Cluster.open(got.clusters["dc1"]) as dc1,
        Cluster.open(got.clusters["dc2"]) as dc2,
        Cluster.open(got.clusters["dc3"]) as dc3,
    ):
        assert [_end_offsets(c) for c in (dc1, dc2, dc3)] == before  # not one new message
        assert [u.name for u in dc1.users()] == ["admin", demo.VIEWER]
        assert len(dc1.replicas(demo.RING_STREAM)) == 1


def test_a_missing_spark_is_a_warning_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "spark_missing", lambda: "Java is not installed (test)")
    lines: list[str] = []
    got = demo.prepare(tmp_path / "demo", topics=5, replay=True, echo=lines.append)
    assert got.replay_job is None and got.replay_state is None
    assert "Java is not installed" in got.replay_note
    assert any("WARNING" in line and "Java" in line for line in lines)


def test_a_cluster_directory_is_not_taken_as_the_demo_root(tmp_path):
    with Cluster.open(tmp_path / "old-demo"):
        pass
    with pytest.raises(errors.InvalidArgument, match="is a cluster itself"):
        demo.prepare(tmp_path / "old-demo", topics=0, replay=False, echo=lambda _: None)
    assert not (tmp_path / "old-demo" / "dc1").exists()


def test_plet_demo_and_the_consoles_examples_work_after_make_run(tmp_path, monkeypatch):
    """`make run` builds data/demo/{dc1,dc2,dc3}; `plet demo` and `plet tui --cluster
    data/demo/dc1` (the examples of --help) then use dc1, which holds the tour's data."""
    from click.testing import CliRunner

    from engine.cli import cli

    monkeypatch.chdir(tmp_path)
    demo.prepare(tmp_path / "data" / "demo", topics=0, replay=False, echo=lambda _: None)
    result = CliRunner().invoke(cli, ["demo"])
    assert result.exit_code == 0, result.output
    assert "cluster 'dc1' at data/demo/dc1" in result.output
    assert "Already seeded: nothing added" in result.output
    result = CliRunner().invoke(
        cli, ["consume", "/apps/sensors:car-17", "--max-messages", "1", "--cluster",
              "data/demo/dc1"],
    )  # fmt: skip
    assert result.exit_code == 0 and result.output.strip(), result.output


def test_traffic_moves_offsets_and_stops(tmp_path):
    got = demo.prepare(tmp_path / "demo", topics=50, replay=False, echo=lambda _: None)
    topics = [demo.RING_TOPIC_DC1, f"{demo.ACE_STREAM}:car-17", demo.fleet_topic(7)]
    with Cluster.open(got.clusters["dc1"]) as dc1:
        before = _end_offsets(dc1)
        traffic = demo.Traffic(got.clusters["dc1"], topics, rate=200, tick_s=0.05).start()
        try:
            assert traffic.running
            moved = _wait_for(
                lambda: sum(_end_offsets(dc1).values()) - sum(before.values()) >= 50, timeout=20
            )
        finally:
            traffic.stop()
        assert moved, traffic.last_error
        assert not traffic.running and traffic.last_error is None
        after = _end_offsets(dc1)
        assert {t for (t, _), end in after.items() if end != before.get((t, _))} <= set(topics)
        # time passes on purpose: traffic that went on would have written 100 messages
        time.sleep(0.5)
        assert _end_offsets(dc1) == after  # stopped means stopped (and flushed)


def test_replicator_workers_carry_dc2_writes_round_the_ring(tmp_path):
    got = demo.prepare(tmp_path / "demo", topics=0, replay=False, echo=lambda _: None)
    with Cluster.open(got.clusters["dc2"]) as dc2:
        producer = Producer(dc2, acks=1)
        producer.send(demo.RING_TOPIC_DC2, key=b"u-new", value=b'{"page":"/"}').get(
            timeout=scaled(10)
        )
        producer.close()
        end = sum(p.log_end_offset for p in dc2.topic(demo.RING_TOPIC_DC2).partitions)
    workers = [demo.ReplicatorWorker(got.clusters[n]).start() for n in ("dc2", "dc3")]
    try:
        with Cluster.open(got.clusters["dc1"]) as dc1:
            reached = _wait_for(
                lambda: (
                    sum(p.log_end_offset for p in dc1.topic(demo.RING_TOPIC_DC2).partitions) == end
                )
            )
    finally:
        for worker in workers:
            worker.stop()
    assert reached
    assert all(not w.thread.is_alive() and w.cluster.closed for w in workers)


# --- the command, in a real process ---------------------------------------------------------

_URL = re.compile(r"Web console: (http://\S+)")
_PASSWORD = re.compile(r"log in as\s+admin / (\S+)")


def _plet() -> list[str]:
    script = Path(sys.executable).parent / "plet"
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli"]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Served:
    """`plet web ...` in a subprocess, its output collected by a reader thread."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PLET_ADMIN_PASSWORD",)}
        env.pop("PLET_CLUSTER", None)
        env["PYTHONFAULTHANDLER"] = "1"  # SIGABRT on a stuck stop dumps every thread
        self.proc = subprocess.Popen(
            [*_plet(), "web", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # as a shell starts a background job: SIGINT ignored, which the child inherits;
            # `plet web` handles SIGINT itself, so Ctrl+C and `kill -INT` stop it all the same
            preexec_fn=_ignore_sigint,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def url(self, timeout: float = 120) -> str:
        match = _wait_for(
            lambda: _URL.search(self.output) or self.proc.poll() is not None, timeout=timeout
        )
        assert isinstance(match, re.Match), f"no address printed:\n{self.output}"
        return match.group(1)

    def stop(self, signum: int = signal.SIGINT) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)  # Ctrl+C (or kill): either way out is clean
        try:
            return self.proc.wait(timeout=scaled(60))
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # faulthandler prints where it is stuck
            self.proc.wait(timeout=scaled(10))
            self.reader.join(5)
            raise AssertionError(f"plet web did not stop:\n{self.output}") from None
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.reader.join(5)


def _get(url: str) -> tuple[int, str]:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=30) as response:
            return response.status, ""
    except urllib.error.HTTPError as exc:  # a 3xx arrives here once redirects are off
        return exc.code, exc.headers.get("Location", "")


def test_plet_web_demo_serves_dc1_and_prints_the_login(tmp_path):
    root = tmp_path / "demo"
    served = _Served(
        [
            "--demo",
            "--cluster",
            str(root),
            "--port",
            "0",
            "--demo-topics",
            "40",
            "--no-demo-replay",
        ],
        tmp_path,
    )
    try:
        url = served.url()
        status, location = _get(url)
        assert status == 200 or (status in (302, 303) and "/login" in location), (status, location)
        password = _PASSWORD.search(served.output).group(1)
        # The demo's workers run while it serves: the live load moves dc1's offsets.
        with Cluster.open(root / "dc1") as dc1:
            before = sum(_end_offsets(dc1).values())
            assert _wait_for(lambda: sum(_end_offsets(dc1).values()) > before, timeout=20)
            assert dc1.authenticate("admin", password) is not None
            assert dc1.topic_count(demo.FLEET) == 40
        # dc2 and dc3, linked by the ring, are served too, with their own administrator
        for name in ("dc2", "dc3"):
            assert f"{url}c/{name}/" in served.output
            with Cluster.open(root / name) as other:
                assert other.authenticate("admin", password) is not None
            assert _get(f"{url}c/{name}/")[1].startswith(f"/c/{name}/login")
    finally:
        code = served.stop()
    assert code == 0, served.output
    assert "Traceback" not in served.output, served.output
    assert (root / "dc2").is_dir() and (root / "dc3").is_dir()


def test_plet_web_makes_the_first_admin_and_prints_its_password_once(tmp_path):
    path = tmp_path / "cluster"
    with Cluster.open(path):
        pass
    first = _Served(["--cluster", str(path), "--port", "0", "--no-replicate"], tmp_path)
    try:
        first.url()
        password = _PASSWORD.search(first.output).group(1)
    finally:
        assert first.stop() == 0, first.output
    with Cluster.open(path) as cluster:
        assert cluster.authenticate("admin", password) is not None
    second = _Served(["--cluster", str(path), "--port", "0", "--no-replicate"], tmp_path)
    try:
        second.url()
    finally:
        assert second.stop(signal.SIGTERM) == 0, second.output
    assert not _PASSWORD.search(second.output)
    assert "PLET_ADMIN_PASSWORD" in second.output and "plet user passwd admin" in second.output
