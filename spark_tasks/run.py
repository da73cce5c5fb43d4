"""Run one replay job: `python -m spark_tasks.run CLUSTER JOB_ID` (started by jobs.submit).

The runner claims the job (queued -> running), starts a SparkSession on the job's master,
runs the job's kind under its own Spark job group, and meanwhile, every half second, copies
the progress from Spark's status tracker (tasks done of total, over the group's jobs, when
the first task began, and the rows read with their rate: `Monitor.rows`) into the job's
record and looks for a cancel request, which cancels the job group. It ends the record as
succeeded (with the kind's summary), failed (with the error) or cancelled, with the tail of
its log.

What the job writes itself (prints, the `spark_tasks` loggers, its traceback) goes to the
log with jobs.JOB_LINE_PREFIX on every line (`JobOutput`), so the consoles can tell it from
what Spark's JVM writes to the same file (jobs.split_log).
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
import urllib.request
import warnings
from contextlib import redirect_stdout
from datetime import UTC, datetime
from typing import Any, TextIO

from engine import clock
from spark_tasks import jobs, session
from spark_tasks.progress import Progress

POLL_S = 0.5
# until the first task is seen: the job's log and the consoles say "running" that soon
FIRST_TASK_POLL_S = 0.1
UI_TIMEOUT_S = 20  # each read of Spark's status REST API
UI_ATTEMPTS = 3
SQL_MAX = 10_000  # queries asked of the REST API (it answers 20 by default)


class Monitor(threading.Thread):
    """Progress and cancellation, from a thread beside the job's driver code."""

    def __init__(
        self,
        spark: Any,
        cluster: str,
        job_id: int,
        group: str,
        steps: tuple[str, ...] = ("running",),
    ) -> None:
        super().__init__(name="plet-job-monitor", daemon=True)
        self.spark = spark
        self.cluster = cluster
        self.job_id = job_id
        self.group = group
        self.cancelled = False
        self.finished = threading.Event()
        self._stages: dict[int, tuple[int, int]] = {}  # stage id -> (done, total)
        # the bar that never goes back: the kind's steps (replays.STEPS), begun by the kind
        # in its thread (`begin_step`), filled by this one
        self._progress = Progress(steps)
        self._progress_lock = threading.Lock()
        self.first_task_ms: int | None = None  # when a task was first seen begun
        self._task_seen = threading.Event()  # set then, or at `stop`
        self._recorded: dict[str, Any] = {}  # the progress fields last written
        # held while the thread writes the record, so that none of its writes lands after
        # `stop` (the runner's final record)
        self._writing = threading.Lock()

    def progress(self) -> tuple[int, int]:
        tracker = self.spark.sparkContext.statusTracker()
        for job_id in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job_id)
            if info is None:
                continue
            for stage_id in info.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    self._stages[stage_id] = (stage.numCompletedTasks, stage.numTasks)
                    begun = stage.numActiveTasks + stage.numCompletedTasks + stage.numFailedTasks
                    if begun:
                        self._first_task_seen()
        done = sum(d for d, _ in self._stages.values())
        total = sum(t for _, t in self._stages.values())
        with self._progress_lock:
            self._progress.update(self._stages)
        return done, total

    def begin_step(self, index: int) -> None:
        """The kind begins its step `index` (replays.on_step)."""
        with self._progress_lock:
            self._progress.begin(index)

    def progress_fields(self, *, finished: bool = False) -> dict[str, Any]:
        """The record's `progress` and `step`; a full bar when `finished`."""
        with self._progress_lock:
            value = self._progress.finish() if finished else self._progress.value
            return {"progress": value, "step": self._progress.label}

    def _first_task_seen(self) -> None:
        with self._writing:  # the runner's final read may run beside the thread's tick
            if self.first_task_ms is None:
                self.first_task_ms = clock.now_ms()
                self._task_seen.set()
                print("Spark started: its first task is running", flush=True)

    def rows(self) -> tuple[int, float | None]:
        """(rows read, rows per second) of the replay: the rows in its range read so far,
        counted by the query that read the most of them, over that query's time from
        submission to completion (or now). The busiest query, not the sum: a replay that
        caches what it read and writes it out reads the source once.

        Rows in the range, not rows scanned: Spark's Parquet reader reads whole row groups
        of an archived file the range cuts, and the offset filter (spark_tasks.history)
        drops the rows outside it; so the count is each scan's "number of output rows"
        (Spark's SQL metrics, as tasks end), taken after the filter right above a Parquet
        scan. From Spark's status REST API on the driver's UI (`uiWebUrl`); (0, None)
        without a UI."""
        sc = self.spark.sparkContext
        base = sc.uiWebUrl
        if not base:
            return 0, None
        app = f"{base}/api/v1/applications/{sc.applicationId}"
        ours = {j["jobId"] for j in _get_json(f"{app}/jobs") if j.get("jobGroup") == self.group}
        if not ours:
            return 0, None
        best, rate = 0, None
        now_ms = clock.now_ms()
        for query in _get_json(f"{app}/sql?details=true&planDescription=false&length={SQL_MAX}"):
            jobs_of = {
                *query.get("runningJobIds", ()),
                *query.get("successJobIds", ()),
                *query.get("failedJobIds", ()),
            }
            began = _ui_ms(query.get("submissionTime"))
            if not jobs_of & ours or began is None:
                continue
            rows = rows_in_range(query.get("nodes", ()), query.get("edges", ()))
            if rows <= best:
                continue
            running = query.get("status") == "RUNNING"
            end_ms = now_ms if running else began + int(query.get("duration") or 0)
            best, rate = rows, rows / (max(end_ms - began, 1) / 1000)
        return best, rate

    def tick(self) -> None:
        """Record the progress, look for a cancel request, then record the rows read."""
        self._tick_progress()
        self._record_rows()

    def _tick_progress(self) -> None:
        """Record the progress and look for a cancel request: the status tracker answers
        at once (the rows come from the UI's REST API, slow on a busy machine, so the
        running monitor reads them in another thread: `_count_rows`)."""
        done, total = self.progress()
        fields = {
            "tasks_done": done,
            "tasks_total": total,
            "first_task_ms": self.first_task_ms,
            **self.progress_fields(),
        }
        if fields != self._recorded:  # ticks are frequent until the first task
            self._record(**fields)
            self._recorded = fields
        if not self.cancelled and jobs.cancel_requested(self.cluster, self.job_id):
            self.cancelled = True
            print(f"cancel requested: cancelling Spark job group {self.group}", flush=True)
            self.spark.sparkContext.cancelJobGroup(self.group)

    def _record_rows(self) -> None:
        rows, rate = self.rows()
        self._record(rows_read=rows, rows_per_s=rate)

    def _record(self, **fields: Any) -> None:
        with self._writing:
            if not self.finished.is_set():
                jobs.update(self.cluster, self.job_id, **fields)

    def stop(self) -> None:
        """End the thread's ticks; it writes nothing more to the record after this."""
        with self._writing:
            self.finished.set()
            self._task_seen.set()

    def run(self) -> None:
        threading.Thread(target=self._count_rows, name="plet-job-rows", daemon=True).start()
        while not self.finished.wait(FIRST_TASK_POLL_S if self.first_task_ms is None else POLL_S):
            try:
                self._tick_progress()
            except Exception as exc:  # progress is best effort; the job goes on
                print(f"progress monitor: {exc}", flush=True)

    def _count_rows(self) -> None:
        """Record the rows read, in a thread of its own: the UI's first REST request starts
        its servlet (seconds on a busy machine), and the progress, the first task's time
        and cancelling must not wait for it."""
        self._task_seen.wait()  # not before: the servlet's start would compete with Spark's
        while not self.finished.wait(POLL_S):
            try:
                self._record_rows()
            except Exception as exc:  # best effort, as the progress
                print(f"progress monitor: {exc}", flush=True)


def rows_in_range(nodes: Any, edges: Any) -> int:
    """Rows a query's scans gave (Spark's SQL plan graph from the REST API: `nodes` with
    their metrics, `edges` from child to parent), a Parquet scan's counted after the
    filter right above it (through ColumnarToRow): the replay's offset filter, with any
    filter Spark merged into it."""
    by_id = {n["nodeId"]: n for n in nodes}
    parent = {e["fromId"]: e["toId"] for e in edges}
    total = 0
    for node in nodes:
        name = node.get("nodeName", "")
        if not name.startswith(("Scan ", "BatchScan")):
            continue
        counted = node
        if name == "Scan parquet":
            above = parent.get(node["nodeId"])
            while above is not None and by_id[above].get("nodeName") == "ColumnarToRow":
                above = parent.get(above)
            if above is not None and by_id[above].get("nodeName") == "Filter":
                counted = by_id[above]
        total += _output_rows(counted)
    return total


def _output_rows(node: dict[str, Any]) -> int:
    for metric in node.get("metrics", ()):
        if metric.get("name") == "number of output rows":
            digits = str(metric.get("value", "")).split("\n")[0].replace(",", "").strip()
            return int(digits) if digits.isdigit() else 0
    return 0


def _get_json(url: str) -> list[dict[str, Any]]:
    # Generous, and tried again: the UI answers slowly on a busy machine, above all its
    # first REST request, which starts the REST servlet (14 s beside two busy loops, then
    # 0.06 s; a request that timed out leaves it starting). Only the monitor waits.
    for attempt in range(UI_ATTEMPTS):
        try:
            with urllib.request.urlopen(url, timeout=UI_TIMEOUT_S) as answer:
                return json.loads(answer.read())
        except OSError:  # timed out, refused or reset (URLError and TimeoutError are OSErrors)
            if attempt == UI_ATTEMPTS - 1:
                raise
            time.sleep(POLL_S)
    raise AssertionError("unreachable")


def _ui_ms(text: str | None) -> int | None:
    """ms since the epoch of a time of Spark's REST API ("2026-11-24T02:55:01.123GMT")."""
    if not text:
        return None
    stamp = datetime.strptime(text.removesuffix("GMT"), "%Y-%m-%dT%H:%M:%S.%f")
    return int(stamp.replace(tzinfo=UTC).timestamp() * 1000)


class Cancelled(Exception):
    pass


class JobOutput(io.TextIOBase):
    """A text stream that writes each line to `out` with jobs.JOB_LINE_PREFIX, whole (one
    write and a flush a line: the JVM writes to the same file meanwhile)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._partial = ""
        self._lock = threading.Lock()  # the monitor thread prints too

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            *lines, self._partial = (self._partial + text).split("\n")
            if lines:
                self.out.write("".join(f"{jobs.JOB_LINE_PREFIX}{line}\n" for line in lines))
                self.out.flush()
        return len(text)

    def close_line(self) -> None:
        """Write what was left without a newline."""
        if self._partial:
            self.write("\n")


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    # A library's warning (pandas, pyarrow) on one line of stderr, which jobs.split_log
    # files under Spark's: the default form spreads it over several.
    text = " ".join(str(message).split())
    print(f"{filename}:{lineno}: {category.__name__}: {text}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    output = JobOutput(sys.stdout)
    log = logging.getLogger("spark_tasks")  # the replays' notes ("reading ...")
    handler = logging.StreamHandler(output)
    saved = (log.level, log.propagate, warnings.showwarning)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    warnings.showwarning = _one_line_warning
    try:
        with redirect_stdout(output):
            if argv and argv[0] == STANDBY:
                return _standby(argv[1:])
            return _run(argv)
    finally:
        output.close_line()
        log.removeHandler(handler)
        log.level, log.propagate, warnings.showwarning = saved


STANDBY = "--standby"


def _standby(argv: list[str]) -> int:
    """A runner started before its job (jobs.submit's `warm`): it starts Spark with the
    master and settings it is given, then reads its job's id from stdin and runs it as
    `_run` does; at the end of stdin (its submitter let it go) it stops, at once if Spark
    is still starting (its JVM ends with this process)."""
    cluster, master, conf = argv[0], argv[1], json.loads(argv[2])
    began = time.monotonic()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    given: list[str] = []
    ready, got = threading.Event(), threading.Event()

    def read_job() -> None:
        given.append(sys.stdin.readline().strip())
        got.set()
        if not given[0] and not ready.is_set():
            # let go before Spark was up: nothing to stop cleanly, and the main thread is
            # inside Spark's start; SIGTERM's default action ends the process at once
            signal.raise_signal(signal.SIGTERM)

    threading.Thread(target=read_job, name="plet-standby-stdin", daemon=True).start()
    try:
        # a standby takes short jobs only (jobs.submit), so its JIT stops at C1
        spark, archive = session.start(master, conf, "plet-replay", short=True)
        if not got.is_set():
            _warm_up(spark)
        print(f"Spark ready in {time.monotonic() - began:.1f} s: waiting for a job", flush=True)
    except Exception:  # its job, if one comes, starts Spark again and records the error
        traceback.print_exc(file=sys.stdout)
        spark, archive = None, None
    ready.set()
    got.wait()
    if not given[0]:
        if spark is not None:
            session.stop(spark, archive)
        return 0
    return _run([cluster, given[0]], spark=spark, archive=archive)


def _warm_up(spark: Any) -> None:
    """What a standby does before its job comes, so that the job finds it done: a read
    through a data source of this package (spark_tasks.source.WarmUpDataSource) in one
    task per slot warms the scheduler and code generation, and leaves Spark's Python
    planner and one Python worker per slot running with the engine imported (Spark reuses
    idle workers; a warm job's first task came 2.3 s sooner, its planning 0.7 s); one
    request to the UI's REST API starts its servlet, which the job's rows are read from."""
    from spark_tasks import source

    # each step best effort: a standby whose warm-up failed still has its Spark up
    try:
        slots = spark.sparkContext.defaultParallelism
        spark.read.format(source.WARM_UP).option("tasks", str(slots)).load().count()
    except Exception as exc:
        print(f"warming Spark's Python workers up failed: {exc}", flush=True)
    base = spark.sparkContext.uiWebUrl
    if base:
        try:
            with urllib.request.urlopen(f"{base}/api/v1/applications", timeout=UI_TIMEOUT_S):
                pass
        except OSError as exc:
            print(f"the UI's REST API did not answer: {exc}", flush=True)


def _run(argv: list[str], spark: Any = None, archive: session.Archive | None = None) -> int:
    """Run job `argv[1]` of cluster `argv[0]`, in `spark` when a standby runner started it
    already (`_standby`), else in a session started here."""
    cluster, job_id = argv[0], int(argv[1])
    if not jobs.claim(cluster, job_id, os.getpid()):
        print(f"job {job_id} is no longer queued (cancelled?): not running it", flush=True)
        if spark is not None:
            session.stop(spark, archive)
        return 0
    job = jobs.status(job_id, cluster=cluster)
    params = job.params
    print(f"job {job_id}: {job.kind} {jobs.params_text(params)}", flush=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    monitor = None
    state, result, error = jobs.FAILED, None, None
    try:
        from spark_tasks import replays

        if spark is None:
            master = params.get("master", jobs.DEFAULT_MASTER)
            name = f"plet-replay-{job_id}-{job.kind}"
            conf = params.get("conf") or {}
            spark, archive = session.start(master, conf, name, short=_short(cluster, params))
        group = f"plet-job-{job_id}"
        spark.sparkContext.setJobGroup(group, f"{job.kind} replay {job_id}", True)
        monitor = Monitor(spark, cluster, job_id, group, replays.STEPS[job.kind])
        replays.on_step = monitor.begin_step
        monitor.start()
        if jobs.cancel_requested(cluster, job_id):
            raise Cancelled()
        result = replays.json_ready(replays.KINDS[job.kind](spark, cluster, params))
        if monitor.cancelled:
            raise Cancelled()
        state = jobs.SUCCEEDED
        print(f"job {job_id} succeeded: {json.dumps(result)}", flush=True)
    except BaseException as exc:
        if isinstance(exc, Cancelled) or (monitor is not None and monitor.cancelled):
            state = jobs.CANCELLED
            print(f"job {job_id} cancelled", flush=True)
        else:
            traceback.print_exc(file=sys.stdout)  # the job's own lines, tagged
            error = f"{type(exc).__name__}: {exc}"[:4000]
            sys.stdout.flush()
    finally:
        fields: dict[str, Any] = {}
        if monitor is not None:
            monitor.stop()
            # the progress first: a UI read that fails after it leaves the record its
            # final progress
            try:
                done, total = monitor.progress()
                if state == jobs.SUCCEEDED:
                    done = total
                fields.update(tasks_done=done, tasks_total=total)
                fields.update(monitor.progress_fields(finished=state == jobs.SUCCEEDED))
                fields.update(first_task_ms=monitor.first_task_ms)
                rows, rate = monitor.rows()
                fields.update(rows_read=rows, rows_per_s=rate)
            except Exception as exc:
                print(f"progress monitor: {exc}", flush=True)
        sys.stdout.flush()
        sys.stderr.flush()
        time.sleep(0.1)
        jobs.update(
            cluster,
            job_id,
            state=state,
            result=result,
            error=error,
            ended_ms=clock.now_ms(),
            log_tail=jobs.log_tail(job.log_path),
            **fields,
        )
        # after the record: the job's result does not wait for Spark to stop, nor for its
        # JVM to write the class-data archive
        if spark is not None:
            try:
                session.stop(spark, archive)
            except Exception:
                pass
    return 0 if state == jobs.SUCCEEDED else 1


def _short(cluster: str, params: dict[str, Any]) -> bool:
    """Whether the job is short enough for a C1 JIT (jobs.is_short); False when its
    cluster cannot be opened here (the job then fails with the reason)."""
    from engine.cluster import Cluster
    from engine.errors import PartitionletError

    try:
        with Cluster.open(cluster) as opened:
            return jobs.is_short(opened, params)
    except PartitionletError:
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
