"""Replays: the wait from submitting a job to its first Spark task (issue 27).

    python -m bench.replay_startup [RUNS [MASTER]]     # default 3 runs on local[2]
    python -m bench.replay_startup --phases [MASTER]   # where a cold start goes

Each run submits a `copy` of a small topic twice: cold (`jobs.submit(warm=False)`: the
job's own runner starts Spark, as every job did before) and warm (a standby runner started
Spark before the job came: `jobs.prewarm`, then `jobs.submit(warm=True)`, as the consoles
submit), and prints the time from the submit to the job's first Spark task (`first_task_ms`,
the end of the "starting Spark" phase), the time to its end, and the medians.

`--phases` times a cold start's parts in this process: importing pyspark and the engine,
the SparkSession (the driver JVM and its SparkContext), registering the data source (Spark
SQL's session state is set up then), planning the read (the engine's scan plan, Spark's
and the data source's plans) and the wait for the first task of the first count.
"""

from __future__ import annotations

import os
import shutil
import statistics
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


def one(path: Path, master: str, n: int, warm: bool) -> tuple[float, float]:
    """(s from submit to first task, s from submit to the end) of one copy job."""
    from spark_tasks import jobs

    job_id = jobs.submit(
        path, "copy", source="/b:t", target=f"/b:copy{n}", master=master, warm=warm
    )
    job = jobs.wait(job_id, cluster=path, timeout=READY_TIMEOUT_S)
    if job.state is not jobs.SUCCEEDED or job.first_task_ms is None or job.ended_ms is None:
        raise SystemExit(f"job {job_id} {job.state}: {job.error}\n{job.log_tail}")
    return (job.first_task_ms - job.submitted_ms) / 1000, (job.ended_ms - job.submitted_ms) / 1000


def wait_ready(path: Path, master: str) -> None:
    from spark_tasks import jobs

    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        log = jobs.standby_log(path, master)
        if log is not None and log.exists() and b"Spark ready" in log.read_bytes():
            return
        time.sleep(0.5)
    raise SystemExit("the standby runner did not start Spark in time")


def runs(count: int, master: str) -> None:
    from spark_tasks import jobs

    root = Path(tempfile.mkdtemp(prefix="plet-bench-replays-"))
    try:
        path = root / "cluster"
        build(path)
        cold, warm = [], []
        print(
            f"{'run':>3}  {'cold: first task':>17}  {'end':>6}  {'warm: first task':>17}  {'end':>6}"
        )
        for n in range(count):
            c_first, c_end = one(path, master, 2 * n, warm=False)
            jobs.prewarm(path, master)
            wait_ready(path, master)
            w_first, w_end = one(path, master, 2 * n + 1, warm=True)
            jobs.close_standbys()  # the one started for the next job: not measured here
            cold.append(c_first)
            warm.append(w_first)
            print(
                f"{n + 1:>3}  {c_first:>15.1f} s  {c_end:>4.1f} s  {w_first:>15.1f} s  {w_end:>4.1f} s"
            )
        print(
            f"median to the first task: cold {statistics.median(cold):.1f} s, "
            f"warm {statistics.median(warm):.1f} s ({master}, {os.cpu_count()} cores, "
            f"load {os.getloadavg()[0]:.1f})"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def phases(master: str) -> None:
    began = last = time.monotonic()

    def mark(name: str) -> None:
        nonlocal last
        now = time.monotonic()
        print(f"{name:<40} {now - last:6.1f} s", flush=True)
        last = now

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import spark_tasks
    from spark_tasks import replays

    mark("import pyspark, spark_tasks, the engine")
    root = Path(tempfile.mkdtemp(prefix="plet-bench-replays-"))
    try:
        path = root / "cluster"
        build(path)
        last = time.monotonic()  # the cluster's making is no part of a job's start
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
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--phases":
        phases(args[1] if len(args) > 1 else "local[2]")
    else:
        runs(int(args[0]) if args else 3, args[1] if len(args) > 1 else "local[2]")
