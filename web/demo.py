"""The demo behind `plet web --demo` (and `make run`): three clusters with something to show.

`prepare(root)` builds, through the engine's public API and the replay job API:

- `root/dc1`, `root/dc2`, `root/dc3`, clusters named `dc1`, `dc2` and `dc3`;
- in dc1, `engine.demo.seed`'s streams (`/apps/sensors`, `/apps/clicks` with the lagging
  group `analytics`, the compacted `/apps/profiles`, `/ops/logs`) and `/iot/fleet`, a
  stream of `topics` topics (100,000 by default) with one message each, made by producing;
- a replication ring dc1 -> dc2 -> dc3 -> dc1 on `/apps/clicks`, whose topic `web` is
  written in dc1 and `mobile` in dc2, so the ring carries traffic both ways without a
  conflict (a topic takes writes in one cluster only), run until every link is in sync;
- one finished Spark replay (`window-counts` over `/apps/sensors`), or a warning when Java or
  PySpark is missing or the job fails: the console still starts;
- the web console's first administrator (`engine.auth.users.ensure_admin`, before any other user
  exists; in dc2 and dc3 too, with the same password when this run made it) and a non-admin user `viewer` of group `analysts`, which `/apps/sensors`' consume
  ACE lets in, so the console has ACEs to show.

`prepare` is idempotent and resumable: it looks at what the clusters hold (topic counts,
links, jobs, users) instead of keeping a marker, so a second run adds nothing and returns
in a second or two, and a run stopped half-way carries on where it stopped.

The live parts, started by `plet web --demo` as the app's workers (objects with `stop()`):
`Traffic`, a producer thread with a modest, slowly varying load so the heat map moves, and
`ReplicatorWorker`, a cluster's replicator in a thread (dc2's and dc3's: dc1's is `plet
web`'s own).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import random
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import Cluster, Producer, Replicator, errors
from engine import demo as engine_demo
from engine.auth.users import ensure_admin
from engine.cluster import CATALOG_FILE

DEFAULT_ROOT = "data/demo"
CLUSTERS = ("dc1", "dc2", "dc3")
TOPICS = 100_000

FLEET = "/iot/fleet"
FLEET_POLICIES: dict[str, Any] = {"ttl": 0, "default_partitions": 1}  # 0: kept forever
RING_STREAM = engine_demo.CLICKS
RING_TOPIC_DC1 = f"{engine_demo.CLICKS}:web"  # seeded in dc1 by engine.demo
RING_TOPIC_DC2 = f"{engine_demo.CLICKS}:mobile"
ACE_STREAM = engine_demo.SENSORS
VIEWER = "viewer"
VIEWER_GROUP = "analysts"
VIEWER_ACE = f"u:<creator> | g:{VIEWER_GROUP}"
REPLAY_KIND = "window-counts"
REPLAY_PARAMS: dict[str, Any] = {"stream": engine_demo.SENSORS, "window": "5 minutes"}
REPLAY_TIMEOUT_S = 600

Echo = Callable[[str], Any]


def fleet_topic(i: int) -> str:
    return f"{FLEET}:vehicle-{i:06d}"


# What Traffic writes: dc1's topics that the seed made, plus two of the fleet's topics.
TRAFFIC_TOPICS = (
    f"{engine_demo.SENSORS}:car-17",
    f"{engine_demo.SENSORS}:car-42",
    RING_TOPIC_DC1,
    f"{engine_demo.LOGS}:api",
)


def traffic_topics(fleet_topics: int) -> tuple[str, ...]:
    """TRAFFIC_TOPICS and two fleet topics that exist (auto_create would add new ones)."""
    fleet = {fleet_topic(i % fleet_topics) for i in (7, 42)} if fleet_topics else set()
    return TRAFFIC_TOPICS + tuple(sorted(fleet))


@dataclass
class Demo:
    """What `prepare` found or made; `timings` holds the seconds each step took."""

    root: Path
    clusters: dict[str, Path]
    admin: tuple[str, str | None]  # (name, the generated password or None)
    viewer_password: str | None  # set only by the run that created the viewer
    fleet_topics: int  # topics in FLEET now
    fleet_created: int  # of which this run created
    ring: dict[str, str]  # "dc1 -> dc2" -> link state
    replay_job: int | None
    replay_state: str | None  # succeeded, failed, ... or None when skipped
    replay_note: str | None  # why a replay did not run or did not succeed
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def primary(self) -> Path:
        """The cluster the console serves (dc1)."""
        return self.clusters[CLUSTERS[0]]


def prepare(
    root: str | os.PathLike[str] = DEFAULT_ROOT,
    *,
    topics: int = TOPICS,
    replay: bool = True,
    echo: Echo = print,
) -> Demo:
    """Make (or find) the demo's three clusters under `root`; see the module's docstring."""
    if isinstance(topics, bool) or not isinstance(topics, int) or topics < 0:
        raise errors.InvalidArgument(f"topics must be an integer >= 0, got {topics!r}")
    root = Path(root).resolve()
    if (root / CATALOG_FILE).exists():
        # `plet demo` made a single cluster there; the ring's clusters go one level down.
        raise errors.InvalidArgument(
            f"{root} is a cluster itself (made by 'plet demo'?): remove it, or give the demo "
            "another directory"
        )
    paths = {name: root / name for name in CLUSTERS}
    timings: dict[str, float] = {}
    opened: dict[str, Cluster] = {}
    try:
        for name, path in paths.items():
            opened[name] = Cluster.open(path, name=name)
        dc1, dc2, dc3 = (opened[name] for name in CLUSTERS)

        # The administrator first: ensure_admin creates one only while no user exists.
        admin = ensure_admin(dc1)
        if admin[1] is not None:
            # plet web serves dc2 and dc3 too (linked by the ring), each with its own users:
            # a fresh demo gives their administrators dc1's password, printed once with it
            for other in (dc2, dc3):
                ensure_admin(other, admin[1])

        start = time.perf_counter()
        summary = engine_demo.seed(dc1)
        if summary.messages_produced:
            echo(f"demo: seeded dc1 with {summary.messages_produced:,} messages")
        timings["seed"] = time.perf_counter() - start

        start = time.perf_counter()
        fleet_created = _fleet(dc1, topics, echo)
        fleet_topics = dc1.topic_count(FLEET)
        timings["fleet"] = time.perf_counter() - start

        start = time.perf_counter()
        ring = _ring(dc1, dc2, dc3, echo)
        timings["ring"] = time.perf_counter() - start

        viewer_password = _viewer(dc1)
        _ace(dc1)
    finally:
        for cluster in opened.values():
            cluster.close()

    start = time.perf_counter()
    replay_job, replay_state, replay_note = (
        _replay(paths[CLUSTERS[0]], echo) if replay else (None, None, "not asked for")
    )
    timings["replay"] = time.perf_counter() - start
    return Demo(
        root=root,
        clusters=paths,
        admin=admin,
        viewer_password=viewer_password,
        fleet_topics=fleet_topics,
        fleet_created=fleet_created,
        ring=ring,
        replay_job=replay_job,
        replay_state=replay_state,
        replay_note=replay_note,
        timings=timings,
    )


# --- the many-topics stream --------------------------------------------------------------


def _fleet(cluster: Cluster, topics: int, echo: Echo) -> int:
    """Give FLEET its `topics` topics, one message each; returns how many it created."""
    try:
        cluster.create_stream(FLEET, **FLEET_POLICIES)
    except errors.StreamExists:
        pass
    have = cluster.topic_count(FLEET)
    if have >= topics:
        return 0
    # A run stopped half-way left some: only the missing names are produced. Reading the
    # names costs a fraction of a second even at 100,000, and only on this rare path.
    existing = set(cluster.topic_names(FLEET)) if have else set()
    missing = [n for n in map(fleet_topic, range(topics)) if n not in existing]
    echo(f"demo: creating {len(missing):,} topics in {FLEET} (one message each)...")
    rng = random.Random(2024)
    step = max(1, len(missing) // 10)
    start = time.perf_counter()
    producer = Producer(cluster, acks=1)  # a crash costs a re-run, not data anyone needs
    try:
        for i, name in enumerate(missing, 1):
            producer.send(name, key=name.rsplit(":", 1)[1].encode(), value=_position(rng))
            if i % step == 0 or i == len(missing):
                rate = i / max(time.perf_counter() - start, 1e-9)
                echo(f"demo:   {i:>9,} / {len(missing):,} topics  ({rate:,.0f}/s)")
        producer.flush()
    finally:
        producer.close()
    seconds = time.perf_counter() - start
    echo(f"demo: {len(missing):,} topics created in {seconds:.1f} s")
    return len(missing)


def _position(rng: random.Random) -> bytes:
    return json.dumps(
        {
            "lat": round(rng.uniform(47.0, 55.0), 5),
            "lon": round(rng.uniform(5.0, 15.0), 5),
            "speed_kmh": rng.randint(0, 130),
            "fuel_pct": rng.randint(5, 100),
        },
        separators=(",", ":"),
    ).encode()


# --- the replication ring ----------------------------------------------------------------


def _ring(dc1: Cluster, dc2: Cluster, dc3: Cluster, echo: Echo) -> dict[str, str]:
    """Links dc1 -> dc2 -> dc3 -> dc1 on RING_STREAM, synced; returns each link's state."""
    order = [(dc1, dc2), (dc2, dc3), (dc3, dc1)]
    for source, target in order:
        if _link(source, target) is None:
            # add_replica creates the stream in the target (dc2, dc3) when missing and copies
            # what the source holds, so each hop finds the stream it replicates.
            source.add_replica(RING_STREAM, target.path)
            echo(f"demo: replicating {RING_STREAM} {source.name} -> {target.name}")
        if source is dc2:
            _write_dc2(dc2)
    # A message needs up to two hops to reach every cluster; a few rounds settle the ring.
    for _ in range(5):
        for source, _target in order:
            with Replicator(source) as replicator:
                replicator.run_once()
        states = _ring_states(order)
        if all(state == "in_sync" for state in states.values()):
            break
    return states


def _link(source: Cluster, target: Cluster):
    want = str(target.path.resolve())
    for info in source.replicas(RING_STREAM):
        if info.target == want:
            return info
    return None


def _ring_states(order: Sequence[tuple[Cluster, Cluster]]) -> dict[str, str]:
    states = {}
    for source, target in order:
        info = _link(source, target)
        states[f"{source.name} -> {target.name}"] = info.state if info else "missing"
    return states


def _write_dc2(dc2: Cluster) -> None:
    """Clicks of the mobile app, written in dc2 only (once: while the topic is empty)."""
    try:
        dc2.create_topic(RING_TOPIC_DC2)
    except errors.TopicExists:
        if any(p.log_end_offset for p in dc2.topic(RING_TOPIC_DC2).partitions):
            return
    rng = random.Random(11)
    producer = Producer(dc2, acks=1)
    try:
        for _ in range(40):
            key, value = _click(rng, "ios")
            producer.send(RING_TOPIC_DC2, key=key, value=value)
        producer.flush()
    finally:
        producer.close()


# --- users and ACEs ----------------------------------------------------------------------


def _viewer(cluster: Cluster) -> str | None:
    """The non-admin user; returns its password when this call created it."""
    try:
        cluster.user(VIEWER)
        return None
    except errors.UnknownUser:
        pass
    password = os.environ.get("PLET_DEMO_VIEWER_PASSWORD") or secrets.token_urlsafe(12)
    cluster.add_user(VIEWER, password, groups=(VIEWER_GROUP,), admin=False)
    return password


def _ace(cluster: Cluster) -> None:
    info = cluster.stream(ACE_STREAM)
    if f"g:{VIEWER_GROUP}" not in str(info.policies.get("consume_perm", "")):
        cluster.edit_stream(ACE_STREAM, consume_perm=VIEWER_ACE)


# --- the replay ----------------------------------------------------------------------------


def spark_missing() -> str | None:
    """Why a Spark job cannot run here, or None when Java and PySpark are present."""
    if importlib.util.find_spec("pyspark") is None:
        return "PySpark is not installed (pip install -e '.[spark]')"
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        return "Java is not installed (Spark needs Java 17 or later)"
    return None


def _replay(cluster_path: Path, echo: Echo) -> tuple[int | None, str | None, str | None]:
    """One finished window-counts job: found, or run now. Never raises for Spark's sake."""
    from spark_tasks import jobs

    for job in jobs.list(cluster=cluster_path):
        if job.kind == REPLAY_KIND and job.state == jobs.SUCCEEDED:
            return job.id, job.state, None
    why = spark_missing()
    if why:
        echo(f"demo: WARNING: no replay: {why}; the console starts without one")
        return None, None, why
    pending = [j for j in jobs.list(cluster=cluster_path) if j.kind == REPLAY_KIND and not j.done]
    try:
        job_id = (
            pending[0].id if pending else jobs.submit(cluster_path, REPLAY_KIND, **REPLAY_PARAMS)
        )
        echo(
            f"demo: running replay job {job_id} ({REPLAY_KIND} over {REPLAY_PARAMS['stream']}; "
            "starting Spark takes a while)..."
        )
        job = jobs.wait(job_id, cluster=cluster_path, timeout=REPLAY_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the demo goes on without a replay
        echo(f"demo: WARNING: the replay could not run: {exc}")
        return None, None, str(exc)
    if job.state == jobs.SUCCEEDED:
        seconds = ((job.ended_ms or 0) - job.submitted_ms) / 1000
        echo(f"demo: replay job {job.id} succeeded in {seconds:.1f} s")
        return job.id, job.state, None
    if not job.done:
        note = f"still {job.state} after {REPLAY_TIMEOUT_S} s; it goes on in the background"
    else:
        note = (job.error or job.state).strip().splitlines()[-1]
    echo(f"demo: WARNING: replay job {job.id} {job.state}: {note} (log: {job.log_path})")
    return job.id, job.state, note


# --- live load -----------------------------------------------------------------------------


_USERS = ("u-alice", "u-bob", "u-carol", "u-dave", "u-erin", "u-frank", "u-grace", "u-heidi")
_PAGES = ("/", "/pricing", "/docs", "/blog", "/signup", "/cart", "/checkout")


def _click(rng: random.Random, app: str) -> tuple[bytes, bytes]:
    user = rng.choice(_USERS)
    event = {"user": user, "page": rng.choice(_PAGES), "app": app}
    return user.encode(), json.dumps(event, separators=(",", ":")).encode()


def _message(topic: str, rng: random.Random) -> tuple[bytes | None, bytes, list | None]:
    """A plausible message for one of the demo's topics: (key, value, headers)."""
    stream = topic.rsplit(":", 1)[0]
    if stream == engine_demo.SENSORS:
        sensor = rng.choice(("engine-temp", "oil-pressure", "speed", "battery"))
        return sensor.encode(), f"{rng.uniform(0, 100):.1f}".encode(), [("unit", b"C")]
    if stream == engine_demo.CLICKS:
        key, value = _click(rng, "mobile" if topic == RING_TOPIC_DC2 else "web")
        return key, value, None
    if stream == engine_demo.LOGS:
        status = rng.choices((200, 404, 500), weights=(90, 7, 3))[0]
        line = {"level": "ERROR" if status >= 500 else "INFO", "msg": f"GET /v1/orders {status}"}
        return None, json.dumps(line).encode(), [("host", b"api-1")]
    if stream == FLEET:
        return topic.rsplit(":", 1)[1].encode(), _position(rng), None
    return None, f"tick {rng.random():.6f}".encode(), None


class Traffic:
    """A producer thread writing a modest load to a few topics of one cluster.

    The rate swings around `rate` messages per second over a `period_s` cycle, and one topic
    at a time (changing every `hot_s` seconds) takes most of it, so the heat map shows load
    moving between partitions and volumes. `stop()` waits for the thread and closes what it
    opened.
    """

    def __init__(
        self,
        cluster_path: str | os.PathLike[str],
        topics: Iterable[str] = TRAFFIC_TOPICS,
        *,
        rate: float = 300,
        period_s: float = 120,
        hot_s: float = 30,
        tick_s: float = 0.1,
    ) -> None:
        self.cluster_path = Path(cluster_path)
        self.topics = tuple(topics)
        if not self.topics:
            raise errors.InvalidArgument("Traffic needs at least one topic")
        self.rate = float(rate)
        self.period_s = float(period_s)
        self.hot_s = float(hot_s)
        self.tick_s = float(tick_s)
        self.sent = 0
        self.last_error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Traffic:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="plet-demo-traffic", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float | None = 30) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _rate_at(self, elapsed: float) -> float:
        return self.rate * (1 + 0.6 * math.sin(2 * math.pi * elapsed / self.period_s))

    def _run(self) -> None:
        rng = random.Random()
        cluster = Cluster.open(self.cluster_path)
        producer = Producer(cluster, acks=1, linger_ms=20)
        start = time.monotonic()
        owed = 0.0  # fractional messages carried to the next tick, so low rates still send
        try:
            for tick in itertools.count():
                if self._stop.wait(self.tick_s):
                    break
                elapsed = time.monotonic() - start
                hot = self.topics[int(elapsed // self.hot_s) % len(self.topics)]
                owed += self._rate_at(elapsed) * self.tick_s
                count, owed = int(owed), owed - int(owed)
                try:
                    for _ in range(count):
                        topic = hot if rng.random() < 0.7 else rng.choice(self.topics)
                        key, value, headers = _message(topic, rng)
                        producer.send(topic, key=key, value=value, headers=headers)
                    if tick % 10 == 0:
                        producer.flush(timeout=10)
                    self.sent += count
                except Exception as exc:  # noqa: BLE001 - a demo load keeps going
                    self.last_error = exc
                    self._stop.wait(1)
        finally:
            try:
                producer.close(timeout=10)
            finally:
                cluster.close()


class ReplicatorWorker:
    """One cluster's replicator following its links in a daemon thread, on a Cluster of its
    own; `stop()` waits for it and closes the cluster."""

    def __init__(self, cluster_path: str | os.PathLike[str], interval_s: float = 0.5) -> None:
        self.cluster = Cluster.open(cluster_path)
        self.replicator = Replicator(self.cluster)
        self.thread = threading.Thread(
            target=self.replicator.run_forever,
            args=(interval_s,),
            name=f"plet-replicator-{self.cluster.name}",
            daemon=True,
        )

    def start(self) -> ReplicatorWorker:
        self.thread.start()
        return self

    def stop(self, timeout: float | None = 30) -> None:
        self.replicator.stop()
        if self.thread.is_alive():
            self.thread.join(timeout)
        self.cluster.close()


def live_workers(demo: Demo) -> list[Any]:
    """The started workers of a running demo, except dc1's replicator (plet web's own):
    traffic in dc1 and, smaller, in dc2 (whose clicks go round the ring the other way),
    and the replicators of dc2 and dc3. Stop them in the order given."""
    workers: list[Any] = []
    try:
        workers.append(Traffic(demo.clusters["dc1"], traffic_topics(demo.fleet_topics)).start())
        workers.append(Traffic(demo.clusters["dc2"], [RING_TOPIC_DC2], rate=10).start())
        for name in CLUSTERS[1:]:
            workers.append(ReplicatorWorker(demo.clusters[name]).start())
    except BaseException:
        for worker in workers:
            worker.stop()
        raise
    return workers
