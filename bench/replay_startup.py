"""Replays: the wait from submitting a job to its first Spark task (issue 27).

    python -m bench.replay_startup [RUNS [MASTER]]     # default 3 runs on local[2]
    python -m bench.replay_startup --phases [MASTER]   # where a cold start goes

Each run submits a `copy` of a small topic four ways, one after the other on the same
machine (so that its load weighs on each alike), and prints the time from the submit to the
job's first Spark task (`first_task_ms`, the end of the "starting Spark" phase), the time
to its end, and the medians:

- before: a cold job as every job started before issue 27 (`jobs.submit(warm=False)` with
  `PLET_SPARK_FAST_START=0`: its runner starts Spark the plain way);
- cli: `plet replay copy` (a child process), whose runner starts Spark the fast way
  (spark_tasks.session: the class-data archive, C1, the workers' cached pyspark);
- first: a console's first job: `jobs.prewarm` as the replay form opens, and the job
  submitted at once (`jobs.submit(warm=True)`), before its standby's Spark is ready: the
  worst case, a user who fills the form in no time;
- warm: a console's next job, handed to a standby runner whose Spark is ready.

`--phases` times a cold start's parts in this process: importing pyspark and the engine,
the SparkSession (the driver JVM and its SparkContext), registering the data source (Spark
SQL's session state is set up then), planning the read (the engine's scan plan, Spark's
and the data source's plans, a Python process each) and the wait for the first task of
the first count; `--phases --fast` starts the session as a runner does.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MESSAGES = 20_000
READY_TIMEOUT_S = 600


def build(path: Path) -> None:
    from engine import Cluster, Producer

    with Cluster.open(path, partitionlet_bytes=40_000) as c:
        c.create_stream("/b", ttl=0)
        c.create_topic("/b:t", partitions=2)
        producer = Producer(c, acks=1)
        for i in range(MESSAGES):
            producer.send("/b:t", key=b"k%d" % (i % 7), value=b"v%06d" % i, partition=i % 2)
        producer.close()


def one(path: Path, master: str, n: int, how: str) -> tuple[float, float]:
    """(s from submit to first task, s from submit to the end) of one copy job submitted
    `how` (the module's doc)."""
    from spark_tasks import jobs, session

    target = f"/b:copy{n}"
    if how == "cli":
        argv = ["replay", "copy", "--cluster", str(path), "--source", "/b:t", "--target", target]
        out = subprocess.run(
            [sys.executable, "-m", "engine.cli", *argv, "--master", master, "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        job_id = json.loads(out.stdout)["id"]
    else:
        if how == "before":
            os.environ[session.FAST_ENV] = "0"  # the runner's environment is this one's
        try:
            job_id = jobs.submit(
                path, "copy", source="/b:t", target=target, master=master, warm=how != "before"
            )
        finally:
            os.environ.pop(session.FAST_ENV, None)
    job = jobs.wait(job_id, cluster=path, timeout=READY_TIMEOUT_S)
    if job.state is not jobs.SUCCEEDED or job.first_task_ms is None or job.ended_ms is None:
        raise SystemExit(f"job {job_id} {job.state}: {job.error}\n{job.log_tail}")
    return (job.first_task_ms - job.submitted_ms) / 1000, (job.ended_ms - job.submitted_ms) / 1000


def wait_ready(path: Path, master: str) -> None:
    from spark_tasks import jobs

    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        log = jobs.standby_log(path, master)
        if log is not None and log.exists() and jobs.READY_LINE in log.read_bytes():
            return
        time.sleep(0.5)
    raise SystemExit("the standby runner did not start Spark in time")


WAYS = ("before", "cli", "first", "warm")


def runs(count: int, master: str) -> None:
    from spark_tasks import jobs, session

    archive = session.archive_path()
    print(
        f"class-data archive {archive}: {'there' if archive and archive.exists() else 'none yet'}"
    )
    root = Path(tempfile.mkdtemp(prefix="plet-bench-replays-"))
    try:
        path = root / "cluster"
        build(path)
        firsts: dict[str, list[float]] = {way: [] for way in WAYS}
        print(f"{'run':>3}  " + "  ".join(f"{way + ': first task, end':>24}" for way in WAYS))
        for n in range(count):
            cells = []
            for way in WAYS:
                if way == "first":
                    jobs.close_standbys()
                    jobs.prewarm(path, master)  # the form opens, the user submits at once
                elif way == "warm":
                    jobs.prewarm(path, master)
                    wait_ready(path, master)
                first, end = one(path, master, len(WAYS) * n + WAYS.index(way), way)
                firsts[way].append(first)
                cells.append(f"{first:>15.1f} s {end:>5.1f} s")
            jobs.close_standbys()  # the one started for the next job: not measured here
            print(f"{n + 1:>3}  " + "  ".join(cells), flush=True)
        medians = {way: statistics.median(v) for way, v in firsts.items()}
        print(
            "median to the first task: "
            + ", ".join(f"{way} {m:.1f} s" for way, m in medians.items())
            + f" ({master}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})"
        )
    finally:
        jobs.close_standbys()
        shutil.rmtree(root, ignore_errors=True)


def phases(master: str, fast: bool = False) -> None:
    began = last = time.monotonic()

    def mark(name: str) -> None:
        nonlocal last
        now = time.monotonic()
        print(f"{name:<40} {now - last:6.1f} s", flush=True)
        last = now

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers import the engine
    from pyspark.sql import SparkSession

    import spark_tasks
    from spark_tasks import replays, session

    mark("import pyspark, spark_tasks, the engine")
    root = Path(tempfile.mkdtemp(prefix="plet-bench-replays-"))
    try:
        path = root / "cluster"
        build(path)
        last = time.monotonic()  # the cluster's making is no part of a job's start
        if fast:
            spark, archive = session.start(master, {}, "bench")
            mark("SparkSession, data source (fast start)")
        else:
            spark = SparkSession.builder.master(master).config("spark.ui.port", "0").getOrCreate()
            mark("SparkSession (driver JVM, SparkContext)")
            spark_tasks.register(spark)
            mark("register the data source (SQL state)")
        df = replays.source_frame(spark, str(path), {"source": "/b:t"})
        mark("plan the read")
        spark.sparkContext.setJobGroup("bench", "first task", True)
        first: list[float] = []

        def watch() -> None:
            tracker = spark.sparkContext.statusTracker()
            while not first:
                for job in tracker.getJobIdsForGroup("bench"):
                    info = tracker.getJobInfo(job)
                    for stage in info.stageIds if info else ():
                        s = tracker.getStageInfo(stage)
                        if s and s.numActiveTasks + s.numCompletedTasks:
                            first.append(time.monotonic())
                            return
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        df.count()
        watcher.join(timeout=5)
        if first:
            print(f"{'first task of the first count':<40} {first[0] - last:6.1f} s")
            print(f"{'in all, to the first task':<40} {first[0] - began:6.1f} s")
        if fast:
            session.stop(spark, archive)
        else:
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--phases":
        fast = "--fast" in args
        rest = [a for a in args[1:] if a != "--fast"]
        phases(rest[0] if rest else "local[2]", fast)
    else:
        runs(int(args[0]) if args else 3, args[1] if len(args) > 1 else "local[2]")
