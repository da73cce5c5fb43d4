"""Replay jobs: submit, watch and cancel Spark jobs that run in their own processes.

This module never imports pyspark (the consoles use it). A job's record lives in the
cluster's catalog, table `jobs`, read and written through `Cluster.jobs`
(engine.storage.jobs), so every process that opens the cluster sees the same jobs:

    job_id = jobs.submit("data/dc1", "copy", source="/s:t", target="/s:t2")
    jobs.status(job_id, cluster="data/dc1")      # a Job: state, progress, result, log tail
    jobs.list(cluster="data/dc1"); jobs.cancel(job_id, cluster="data/dc1")

`status`, `list` and `cancel` take the cluster as the keyword `cluster`; without it they use
the cluster of this process's last `submit`, else `PLET_CLUSTER`.

A job is run by `python -m spark_tasks.run CLUSTER JOB_ID`, started detached (its own
session, output to `CLUSTER/jobs/job-ID.log`). States: queued -> running -> succeeded,
failed or cancelled. `cancel` marks a queued job cancelled at once and asks a running one to
stop: its runner cancels its Spark job group and ends as cancelled.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from engine import names, times
from engine.auth.principal import Principal
from engine.clock import now_ms
from engine.cluster import CATALOG_FILE, Cluster, JobTable
from engine.errors import (
    AccessDenied,
    InvalidArgument,
    NotFound,
    PartitionletError,
    TryLater,
    UnknownTopic,
)
from engine.storage import scan as engine_scan

KINDS = ("copy", "materialize", "window-counts", "custom")


class JobState(StrEnum):
    """A replay job's state: queued -> running -> succeeded, failed or cancelled. A str
    enum: stored, compared, printed and put in JSON as its value ("running")."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        """Whether the job has ended (nothing changes it any more)."""
        return self in FINAL_STATES


# The members under the module-level names callers used before the enum (the same objects).
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = JobState
FINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
DEFAULT_MASTER = "local[*]"
LOG_DIR = "jobs"
LOG_TAIL_CHARS = 4000
CLUSTER_ENV = "PLET_CLUSTER"
PHASE_STARTING = "starting Spark"  # Job.phase of a running job before its first Spark task

_last_cluster: str | None = None


class UnknownJob(NotFound):
    """No job of that id in the cluster."""


@dataclass(frozen=True)
class Job:
    id: int
    cluster: str
    kind: str
    params: dict[str, Any]
    state: JobState
    cancel_requested: bool
    pid: int | None
    host: str | None
    tasks_done: int
    tasks_total: int
    submitted_ms: int
    started_ms: int | None
    ended_ms: int | None
    result: Any
    error: str | None
    log_path: str | None
    log_tail: str
    # rows read from the source (the busiest Spark job of the replay) and their rate
    rows_read: int = 0
    rows_per_s: float | None = None
    # when the job's first Spark task began (ms since the epoch); None before that: the
    # runner is still starting its SparkSession and planning (the "starting Spark" phase)
    first_task_ms: int | None = None
    # the runner's progress, 0..1, which never goes back (spark_tasks.progress: the kind's
    # steps, each an equal part); None from an older runner, which recorded tasks only
    done_fraction: float | None = None
    step: str | None = None  # the step running, for people: "step 2 of 2: writing"

    def __post_init__(self) -> None:
        # a record read back holds the state's text: a JobState from here on (an unknown
        # text raises, rather than showing a state no code handles)
        object.__setattr__(self, "state", JobState(self.state))

    @property
    def done(self) -> bool:
        return self.state.final

    @property
    def starting(self) -> bool:
        """Whether the job runs but Spark has neither begun a task nor finished one yet
        (starting a local SparkSession alone takes 10-20 s)."""
        return self.state is JobState.RUNNING and self.first_task_ms is None and not self.tasks_done

    @property
    def phase(self) -> str:
        """What the job is doing, for people: its state, but "starting Spark" while
        `starting`."""
        return PHASE_STARTING if self.starting else self.state.value

    @property
    def progress(self) -> float | None:
        """How far the job is (0..1; it never goes back while the job runs), None before
        Spark has planned any task. Of a record an older runner wrote, tasks done of total
        over the Spark stages seen so far (which falls when Spark adds a stage)."""
        if self.done_fraction is not None and (self.tasks_total or self.done_fraction):
            return self.done_fraction
        return self.tasks_done / self.tasks_total if self.tasks_total else None

    @property
    def reading(self) -> str:
        """Rows read and their rate, for people ("1,200,000 rows read at 3.4 M rows/s"),
        '' before Spark has counted any."""
        if not self.rows_read:
            return ""
        text = f"{self.rows_read:,} rows read"
        if self.rows_per_s:
            rate = self.rows_per_s
            text += f" at {rate / 1e6:.2f} M rows/s" if rate >= 1e6 else f" at {rate:,.0f} rows/s"
        return text

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["done_fraction"]  # in `progress`
        d["progress"] = self.progress
        d["phase"] = self.phase
        return d


# --- the table ---------------------------------------------------------------------------


def _catalog(cluster: str | os.PathLike[str]) -> Path:
    path = Path(cluster) / CATALOG_FILE
    if not path.is_file():
        raise NotFound(f"no Partitionlet cluster at {str(cluster)!r}")
    return path


@contextmanager
def _jobs(cluster: str | os.PathLike[str]) -> Iterator[JobTable]:
    """The job table of the cluster at `cluster` (opening it creates the table in a
    catalog made by an older engine)."""
    _catalog(cluster)  # never create a cluster where there is none
    with Cluster.open(cluster) as opened:
        yield opened.jobs


def _job(cluster: str, row: Any) -> Job:
    """A `Job` from a row of `Cluster.jobs` (engine.storage.jobs.JobRow)."""
    return Job(
        row.id,
        cluster,
        row.kind,
        json.loads(row.params),
        row.state,
        row.cancel_requested,
        row.pid,
        row.host,
        row.tasks_done,
        row.tasks_total,
        row.submitted_ms,
        row.started_ms,
        row.ended_ms,
        json.loads(row.result) if row.result else None,
        row.error,
        row.log_path,
        row.log_tail,
        row.rows_read,
        row.rows_per_s,
        row.first_task_ms,
        row.progress,
        row.step,
    )


def _resolve_cluster(cluster: str | os.PathLike[str] | None) -> str:
    path = cluster or _last_cluster or os.environ.get(CLUSTER_ENV)
    if not path:
        raise InvalidArgument(f"which cluster? pass cluster=PATH or set {CLUSTER_ENV}")
    return str(path)


def update(cluster: str | os.PathLike[str], job_id: int, **fields: Any) -> None:
    """Set fields of a job's record (the runner's side)."""
    allowed = {
        "state",
        "pid",
        "tasks_done",
        "tasks_total",
        "started_ms",
        "ended_ms",
        "result",
        "error",
        "log_tail",
        "rows_read",
        "rows_per_s",
        "first_task_ms",
        "progress",
        "step",
    }
    if set(fields) - allowed:  # the runner's fields only (the table allows a few more)
        raise ValueError(f"cannot set {sorted(set(fields) - allowed)} of a job")
    if "result" in fields and fields["result"] is not None:
        fields["result"] = json.dumps(fields["result"], default=str)
    with _jobs(cluster) as table:
        table.update(job_id, **fields)


def claim(cluster: str | os.PathLike[str], job_id: int, pid: int) -> bool:
    """queued -> running, for the runner; False if the job was cancelled before it began."""
    with _jobs(cluster) as table:
        return table.update(
            job_id,
            (QUEUED,),
            state=RUNNING,
            pid=pid,
            host=socket.gethostname(),
            started_ms=now_ms(),
        )


def cancel_requested(cluster: str | os.PathLike[str], job_id: int) -> bool:
    with _jobs(cluster) as table:
        row = table.get(job_id)
    return bool(row and row.cancel_requested)


# --- parameters --------------------------------------------------------------------------


def _time_ms(value: Any, name: str) -> int:
    """ms since the epoch from an int, a datetime or an ISO 8601 string (UTC if naive)."""
    try:
        if isinstance(value, bool):
            pass  # an int, but no time
        elif isinstance(value, int):
            return times.check_ms(value)
        elif isinstance(value, str):
            return times.parse_time(value)
        elif isinstance(value, datetime):
            return times.datetime_ms(value)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{name}: {exc}") from None
    raise InvalidArgument(f"{name}: expected a time ({times.TIME_FORMS}), got {value!r}")


def check_params(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """Validated, JSON-ready parameters of a job of `kind` (raises InvalidArgument)."""
    if kind not in KINDS:
        raise InvalidArgument(f"unknown job kind {kind!r}: one of {', '.join(KINDS)}")
    p = {k: v for k, v in params.items() if v is not None}
    p.setdefault("master", DEFAULT_MASTER)
    if not p.get("source") and not p.get("stream"):
        raise InvalidArgument(f"a {kind} job needs source (a full topic name) or stream")
    for name in ("from_time", "to_time"):
        if name in p:
            p[name] = _time_ms(p[name], name)
    for name in ("from_offset", "to_offset"):
        if name in p:
            if isinstance(p[name], bool) or not isinstance(p[name], int) or p[name] < 0:
                raise InvalidArgument(f"{name} must be an offset (int >= 0), got {p[name]!r}")
    if p.get("isolation_level", engine_scan.READ_COMMITTED) not in engine_scan.ISOLATION_LEVELS:
        raise InvalidArgument(
            "isolation_level must be read_committed (committed transactions only, the "
            f"default) or read_uncommitted (aborted ones too), got {p['isolation_level']!r}"
        )
    if kind == "copy" and not p.get("target"):
        raise InvalidArgument("a copy job needs target (a full topic name)")
    if kind == "materialize" and not (p.get("target") or p.get("output")):
        raise InvalidArgument(
            "a materialize job needs target (a topic) or output (Parquet, or sqlite:PATH)"
        )
    sqlite_out = sqlite_output(p)
    if sqlite_out is not None:
        from engine.cli import export

        if kind != "materialize":
            raise InvalidArgument(f"a {kind} job writes Parquet, not {export.SQLITE_SCHEME}PATH")
        if not sqlite_out:
            raise InvalidArgument(f"output {export.SQLITE_SCHEME}PATH needs a PATH")
        if "table" not in p:
            raise InvalidArgument(f"output {export.SQLITE_SCHEME}PATH needs table (its name)")
        if not isinstance(p["table"], str):
            raise InvalidArgument(f"table must be a name, got {p['table']!r}")
        export.check_table_name(p["table"])
        p["output"] = export.SQLITE_SCHEME + str(Path(sqlite_out).expanduser().resolve())
    elif "table" in p:
        raise InvalidArgument(f"table goes with output {SQLITE_SCHEME}PATH")
    if p.get("topic_pattern") is not None:
        try:  # a job that would fail in Spark minutes later fails here at once
            re.compile(p["topic_pattern"])
        except (re.error, TypeError) as exc:
            raise InvalidArgument(f"topic_pattern is not a regular expression: {exc}") from None
        except RecursionError:  # re's parser recurses once per nested group
            raise InvalidArgument("topic_pattern nests its groups too deeply") from None
    if kind == "window-counts":
        p.setdefault("window", "1 minute")
    if kind == "custom":
        file = p.get("file")
        if not file or not Path(file).is_file():
            raise InvalidArgument(f"a custom job needs file, an existing Python file: {file!r}")
        p["file"] = str(Path(file).resolve())
        p.setdefault("function", "transform")
    if "output" in p and sqlite_out is None:
        p["output"] = str(Path(p["output"]).resolve())
    if "conf" in p and not isinstance(p["conf"], dict):
        raise InvalidArgument("conf must be a dict of Spark settings")
    json.dumps(p)  # must be JSON
    return p


# The materialize replay's `output` of sqlite:PATH (engine.cli.export.SQLITE_SCHEME). That
# module is imported only for such an output: engine.cli loads every command (half a second),
# which the consoles that import this module need not pay.
SQLITE_SCHEME = "sqlite:"


def sqlite_output(params: dict[str, Any]) -> str | None:
    """The PATH of an `output` of `sqlite:PATH` (the materialize replay's SQLite table),
    else None."""
    output = params.get("output")
    if isinstance(output, str) and output.startswith(SQLITE_SCHEME):
        return output[len(SQLITE_SCHEME) :]
    return None


def check_sqlite_output(cluster: str | os.PathLike[str], params: dict[str, Any]) -> None:
    """Refuse an output SQLite file that is one of the cluster's own files, or that cannot
    hold the table (engine.cli.export.check_sqlite_target), before any job starts."""
    path = sqlite_output(params)
    if path is not None:
        from engine.cli import export

        with Cluster.open(cluster) as opened:
            export.check_sqlite_target(path, params["table"], opened, export.STATE_PK)


def params_text(params: Mapping[str, Any]) -> str:
    """A job's parameters for its log and `plet replay status`: JSON, with its times (ms)
    as ISO 8601 UTC with `Z`."""
    shown = {
        k: times.iso_ms(v) if k in ("from_time", "to_time") and isinstance(v, int) else v
        for k, v in params.items()
    }
    return json.dumps(shown)


# --- the API ------------------------------------------------------------------------------


_children: builtins.list[subprocess.Popen] = []


# --- who may submit what --------------------------------------------------------------------
#
# A job's process runs as the operating-system user who started it, never as the console
# user who asked for it, so these checks, made by `submit` for every frontend (web form,
# JSON API, terminal console, `plet replay`), are the only gate between that user and the
# data: consume_perm on what the job reads, produce_perm (and topic_perm when the job would
# create the topic) on what it writes. What reaches outside the cluster is a cluster
# administrator's act (DESIGN, "Consoles"): a custom job runs a Python file on the server,
# `output` writes a path there, `master` and `conf` decide where and how Spark runs.

# The parameter that records who submitted a job as someone (`submit(principal=)`); the
# runner ignores it. That submitter may cancel the job, besides administrators.
SUBMITTED_BY = "submitted_by"
ADMIN_KINDS = frozenset({"custom"})
# A job is a process of some 160 MB from its start (a Python and a Spark JVM): unfinished
# jobs (queued or running) of one cluster at most, and of one user who is no administrator.
MAX_JOBS = 4
MAX_JOBS_PER_USER = 2
# held from the count of unfinished jobs to the new job's record, so that concurrent
# submits of one process cannot all pass the caps
_SUBMITTING = threading.Lock()


class TooManyJobs(TryLater):
    """A job refused because its user, or the cluster, has as many unfinished as allowed."""


ADMIN_PARAMS: dict[str, str] = {
    "file": "it runs a Python file on the server",
    "function": "it names what a custom job runs on the server",
    "output": "it writes a path on the server",
    "master": "it decides where Spark runs",
    "conf": "it decides how Spark runs on the server",
}


@dataclass(frozen=True)
class Refusal:
    """One reason a job may not be submitted: the parameter at fault ("kind" for the job
    as a whole) and the engine's error that says why (AccessDenied, NotFound,
    InvalidArgument, or TooManyJobs: not now, try later)."""

    param: str
    error: PartitionletError


def refusals(cluster: Cluster, kind: str, params: Mapping[str, Any]) -> builtins.list[Refusal]:
    """Every reason the principal of `cluster` (a cluster opened with `principal=`, or a
    view, `Cluster.as_principal`) may not submit a `kind` job with `params`; empty when it
    may. A parameter set to None counts as not given. `submit` raises the first; a form
    shows them all, each next to its field."""
    given = {k: v for k, v in params.items() if v is not None}
    admin = cluster.is_administrator
    try:  # a job writes (its target, its result): nothing a read-only user may do
        cluster.check_may_change("start jobs")
    except AccessDenied as exc:
        return [Refusal("kind", exc)]
    if kind in ADMIN_KINDS and not admin:
        denied = AccessDenied(
            f"Only administrators may run {kind} jobs: a {kind} job runs a Python file on the "
            "server, as the server's user."
        )
        return [Refusal("kind", denied)]
    too_many = _too_many_jobs(cluster)
    if too_many is not None:
        return [Refusal("kind", too_many)]
    found = [
        Refusal(name, AccessDenied(f"Only administrators may set {name}: {why}."))
        for name, why in ADMIN_PARAMS.items()
        if name in given and not admin
    ]
    for name in ("source", "stream", "target"):
        if name in given and not isinstance(given[name], str):  # a JSON body can carry any
            error = InvalidArgument(f"{name} must be a name (text), not {given.pop(name)!r}")
            found.append(Refusal(name, error))
    source, stream = given.get("source"), given.get("stream")
    try:  # Cluster.authorize: also refuses a stored ACE that does not parse
        if source:
            cluster.topic(source)
            cluster.authorize(names.split_full_name(source)[0], "consume_perm")
        elif stream:
            cluster.authorize(stream, "consume_perm")
        read = names.split_full_name(source)[0] if source else stream
        if read:
            _check_unmask(cluster, read)
    except PartitionletError as exc:
        found.append(Refusal("source" if source else "stream", exc))
    target = given.get("target")
    if target:
        try:
            target_stream = names.split_full_name(target)[0]
            cluster.authorize(target_stream, "produce_perm")
            try:
                cluster.topic(target)
            except UnknownTopic:
                cluster.authorize(target_stream, "topic_perm")  # the job creates it
            if target == source:
                raise InvalidArgument("The target must differ from the source.")
        except PartitionletError as exc:
            found.append(Refusal("target", exc))
    return found


def _check_unmask(cluster: Cluster, stream: str) -> None:
    """AccessDenied when `stream` masks fields from the principal (engine.masking): a
    replay reads the data itself, and its results hold it, so it needs `unmask_perm`."""
    mask = cluster.stream(stream).policies.get("mask")
    if mask and not cluster.may_unmask(stream):
        raise AccessDenied(
            f"stream {stream} masks {mask} from users without its unmask_perm, and a replay "
            "reads the data itself: only who may unmask the stream may replay it"
        )


# A job that reads fewer rows than this starts its driver JVM with the JIT stopped at C1
# (spark_tasks.session: 5-8 s sooner to its first task, about 0.8 us a row slower after,
# so it pays up to some 7,000,000 rows; this leaves a margin). Standby runners start so,
# and take only such jobs.
SHORT_ROWS = 5_000_000


def rows_at_most(cluster: Cluster, params: Mapping[str, Any]) -> int | None:
    """At most how many rows a job reads: the messages its source topic or stream holds
    now (its range and pattern only cut them); None when they cannot be counted (an
    unknown name, or one this principal may not see: the job reports that itself)."""
    try:
        if params.get("source"):
            topic = cluster.topic(params["source"])
            return sum(p.log_end_offset - p.log_start_offset for p in topic.partitions)
        if params.get("stream"):
            return cluster.stream(params["stream"]).messages
    except PartitionletError:
        return None
    return None


def is_short(cluster: Cluster, params: Mapping[str, Any]) -> bool:
    """Whether a job reads fewer than SHORT_ROWS rows, as far as can be told before it runs."""
    rows = rows_at_most(cluster, params)
    return rows is not None and rows < SHORT_ROWS


def _too_many_jobs(cluster: Cluster) -> TooManyJobs | None:
    """Why the principal of `cluster` may not start one more job now (MAX_JOBS unfinished
    in the cluster, or MAX_JOBS_PER_USER of theirs for a user who is no administrator),
    or None. A job whose process is known to have died does not count."""
    here = socket.gethostname()
    unfinished = [
        row
        for row in cluster.jobs.in_states((QUEUED, RUNNING))
        if not (row.pid and row.host == here and not _pid_alive(row.pid))
    ]
    if len(unfinished) >= MAX_JOBS:
        return TooManyJobs(
            f"{len(unfinished)} replay jobs are queued or running, as many as the server "
            "runs at once: try again when one has finished",
            retry_after=30,
        )
    if cluster.is_administrator:
        return None
    user = cluster.principal.user
    mine = sum(1 for row in unfinished if json.loads(row.params).get(SUBMITTED_BY) == user)
    if mine >= MAX_JOBS_PER_USER:
        return TooManyJobs(
            f"you have {mine} replay jobs queued or running, as many as a user may: try "
            "again when one has finished (or cancel one)",
            retry_after=30,
        )
    return None


def may_see(cluster: Cluster, job: Job) -> bool:
    """Whether the principal of `cluster` may see a job's result, error and log:
    administrators, and whoever may consume what the job read (its result is made of
    those messages)."""
    if cluster.is_administrator:
        return True
    source, stream = job.params.get("source"), job.params.get("stream")
    try:
        if isinstance(source, str) and source:
            stream = names.split_full_name(source)[0]
        if not isinstance(stream, str) or not stream:
            return False
        cluster.authorize(stream, "consume_perm")
    except PartitionletError:
        return False
    return True


def may_cancel(cluster: Cluster, job: Job) -> bool:
    """Whether the principal of `cluster` may cancel a job: administrators and whoever
    submitted it (`SUBMITTED_BY`); never a read-only user."""
    if cluster.principal.read_only:
        return False
    return cluster.is_administrator or job.params.get(SUBMITTED_BY) == cluster.principal.user


def submit(
    cluster_path: str | os.PathLike[str],
    kind: str,
    *,
    principal: Principal | None = None,
    warm: bool = False,
    **params: Any,
) -> int:
    """Record a job and start its process; returns its id. `master` picks the Spark
    master (default local[*]); `conf` is a dict of extra Spark settings.

    With `warm` (the consoles, which submit job after job), the job goes to a runner this
    process started before, whose Spark is up already, if one waits with the same master
    and settings (`Standbys`), and a new one is started for the next job: the job skips
    Spark's start, most of the wait before its first task (docs/SPARK.md). Standby runners
    start Spark for short jobs (C1, `is_short`): a job that may read SHORT_ROWS rows or
    more starts a runner of its own. `PLET_REPLAYS_WARM=0` turns this off.

    The job is submitted as `principal` (default: this process's own, a cluster
    administrator, as for any library call): its ACEs and the caps of unfinished jobs
    (MAX_JOBS, MAX_JOBS_PER_USER: `TooManyJobs`) are checked (`refusals`) and the first
    refusal is raised before anything is recorded or started; the job records who asked
    (`SUBMITTED_BY`)."""
    global _last_cluster
    cluster = str(Path(cluster_path).resolve())
    _catalog(cluster)  # never create a cluster where there is none
    with _SUBMITTING, Cluster.open(cluster, principal=principal) as opened:
        refused = refusals(opened, kind, params)
        if refused:
            raise refused[0].error
        if principal is not None:
            params.setdefault(SUBMITTED_BY, principal.user)
        p = check_params(kind, params)
        check_sqlite_output(cluster, p)
        # a standby takes it only if short; a runner of its own counts again for its JIT
        short = warm and is_short(opened, p)
        table = opened.jobs
        job_id = table.add(kind, json.dumps(p), QUEUED, now_ms())
        log_dir = Path(cluster) / LOG_DIR
        log_dir.mkdir(exist_ok=True)
        log_path = log_dir / f"job-{job_id}.log"
        table.update(job_id, log_path=str(log_path))
    warm = warm and os.environ.get(WARM_ENV, "1") != "0"
    setup = (p["master"], json.dumps(p.get("conf") or {}, sort_keys=True))
    # a standby's JIT stops at C1 (`_standby`): it takes short jobs only
    proc = _standbys.hand_over(cluster, setup, job_id, log_path) if warm and short else None
    if proc is None:
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "spark_tasks.run", cluster, str(job_id)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # detached: survives the submitter, own signals
                env=_runner_env(),
                cwd=log_dir,  # whatever Spark leaves behind stays out of the cluster's files
            )
    _children.append(proc)
    with _jobs(cluster) as table:  # so that a runner that never starts shows
        table.update(job_id, (QUEUED,), pid=proc.pid, host=socket.gethostname())
    # Reap it when it ends, so that no zombie is left in a long-lived submitter.
    threading.Thread(target=proc.wait, name=f"plet-job-{job_id}", daemon=True).start()
    _last_cluster = cluster
    return job_id


def _runner_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


WARM_ENV = "PLET_REPLAYS_WARM"
READY_LINE = b"Spark ready"  # what a standby runner logs once its Spark is up
STANDBY_IDLE_S = 600  # a standby runner nobody gave a job in this long stops


class Standbys:
    """Runners started ahead of their jobs by this process (`submit(warm=True)`), one per
    (cluster, master and settings): each starts its Spark at once, then waits for a job's
    id on its stdin (spark_tasks.run's `--standby`). Handing a job over to a runner whose
    Spark is ready starts the next one. A runner given nothing in STANDBY_IDLE_S, or whose submitter ends, reads the end
    of its stdin and stops. Its output goes to a log of its own, renamed the job's when
    it gets one. Any thread may call it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, tuple[str, str]], tuple[subprocess.Popen, Path]] = {}
        self._timers: dict[int, threading.Timer] = {}

    def hand_over(
        self, cluster: str, setup: tuple[str, str], job_id: int, log_path: Path
    ) -> subprocess.Popen | None:
        """Give job `job_id` to the runner waiting for `setup` (master, settings JSON),
        if one is alive, and start the next (not when the runner's Spark was not ready
        yet); returns the runner, or None (none waited)."""
        with self._lock:
            found = self._waiting.pop((cluster, setup), None)
            proc, ready = None, False
            if found is not None:
                runner, standby_log = found
                self._timers.pop(runner.pid).cancel()
                try:
                    if runner.poll() is not None or runner.stdin is None:
                        raise OSError("the standby runner has ended")
                    ready = READY_LINE in standby_log.read_bytes()
                    standby_log.rename(log_path)  # its Spark start-up lines are the job's
                    runner.stdin.write(f"{job_id}\n".encode())
                    runner.stdin.close()
                    proc = runner
                except OSError:  # it died: the job starts its own
                    self._let_go(runner)
            # The next one, unless the job came while its runner's Spark was still starting
            # (its form was submitted as it opened): a second Spark starting beside it on a
            # small machine would slow it down. The next form opened (prewarm) starts it.
            if proc is None or ready:
                self._start(cluster, setup)
            return proc

    def _start(self, cluster: str, setup: tuple[str, str]) -> None:
        """(lock held) A new standby runner for `setup`."""
        log_dir = Path(cluster) / LOG_DIR
        log_dir.mkdir(exist_ok=True)  # prewarmed before the cluster's first job
        log_path = log_dir / f"standby-{os.getpid()}-{uuid.uuid4().hex[:8]}.log"
        master, conf = setup
        with open(log_path, "ab") as log:
            runner = subprocess.Popen(
                [sys.executable, "-m", "spark_tasks.run", "--standby", cluster, master, conf],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=_runner_env(),
                cwd=log_dir,
            )
        self._waiting[(cluster, setup)] = (runner, log_path)
        timer = threading.Timer(STANDBY_IDLE_S, self._idle, (cluster, setup, runner))
        timer.daemon = True
        self._timers[runner.pid] = timer
        timer.start()
        threading.Thread(target=runner.wait, name="plet-standby", daemon=True).start()

    def _idle(self, cluster: str, setup: tuple[str, str], runner: subprocess.Popen) -> None:
        with self._lock:
            found = self._waiting.get((cluster, setup))
            if found is not None and found[0] is runner:
                del self._waiting[(cluster, setup)]
                self._timers.pop(runner.pid, None)
                self._let_go(runner, found[1])

    @staticmethod
    def _let_go(runner: subprocess.Popen, log_path: Path | None = None) -> None:
        """End a standby runner's stdin: it stops its Spark and exits."""
        try:
            if runner.stdin is not None:
                runner.stdin.close()
        except OSError:
            pass
        if log_path is not None:  # a runner that got no job leaves no log behind

            def remove() -> None:
                runner.wait()
                log_path.unlink(missing_ok=True)

            threading.Thread(target=remove, daemon=True).start()

    def close(self) -> None:
        """Let every waiting runner go (they stop)."""
        with self._lock:
            for runner, log_path in self._waiting.values():
                self._timers.pop(runner.pid).cancel()
                self._let_go(runner, log_path)
            self._waiting.clear()

    def ensure(self, cluster: str, setup: tuple[str, str]) -> None:
        """Start a runner for `setup` unless one waits."""
        with self._lock:
            found = self._waiting.get((cluster, setup))
            if found is not None and found[0].poll() is not None:  # it died: its timer goes
                self._timers.pop(found[0].pid).cancel()
                found = None
            if found is None:
                self._start(cluster, setup)

    def log_of(self, cluster: str, setup: tuple[str, str]) -> Path | None:
        """The log of the runner waiting for `setup`, None if none waits."""
        with self._lock:
            found = self._waiting.get((cluster, setup))
            return found[1] if found is not None else None


_standbys = Standbys()


def standby_log(
    cluster: str | os.PathLike[str], master: str = DEFAULT_MASTER, conf: dict | None = None
) -> Path | None:
    """The log of this process's standby runner for jobs on `master` with `conf`, if one
    waits (it says "Spark ready" once its Spark has started); for benchmarks and tests."""
    setup = (master, json.dumps(conf or {}, sort_keys=True))
    return _standbys.log_of(str(Path(cluster).resolve()), setup)


def prewarm(
    cluster: str | os.PathLike[str], master: str = DEFAULT_MASTER, conf: dict | None = None
) -> None:
    """Start a standby runner for jobs on `master` with `conf` unless one waits: the next
    `submit(warm=True)` of such a job skips Spark's start (a console may call this when a
    user opens a replay form)."""
    if os.environ.get(WARM_ENV, "1") == "0":
        return
    setup = (master, json.dumps(conf or {}, sort_keys=True))
    _standbys.ensure(str(Path(cluster).resolve()), setup)


def close_standbys() -> None:
    """Let this process's standby runners go: each stops its Spark and exits."""
    _standbys.close()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def log_tail(path: str | None) -> str:
    """The last LOG_TAIL_CHARS characters of a job's log file ("" when unreadable)."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - LOG_TAIL_CHARS))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


# --- the log: the job's own lines and Spark's -------------------------------------------
#
# A job's log file takes everything its process and its Spark JVM write. The runner tags
# the lines the job writes itself (its prints, its `spark_tasks` loggers, its traceback:
# spark_tasks.run) with JOB_LINE_PREFIX at the source. Untagged lines come from the JVM
# (log4j, progress bars), py4j and library warnings on stderr: those are Spark's when they
# look like it (`_SPARK_LINE`, and the stack traces and message lines that follow them);
# any other untagged line is kept with the job's, so that an error nobody foresaw (a crash
# of the interpreter) is never hidden among Spark's.

JOB_LINE_PREFIX = "[job] "
LOG_VIEW_BYTES = 512 * 1024  # of the log's end read for `job_log`
LOG_VIEW_LINES = 400  # lines kept of each side

_SPARK_LINE = re.compile(
    "|".join(
        (
            r"\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ",  # log4j
            r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}[,.]\d+ (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ",
            r"(TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (org\.apache|org\.sparkproject|io\.netty|py4j)\.",
            r"(DEBUG|INFO|WARNING|ERROR|CRITICAL):(py4j|pyspark|pyarrow|pandas)\b",  # logging
            r"py4j\.",
            r"WARNING: ",  # the JVM's ("Using incubator modules")
            r"OpenJDK .*warning:",
            r"SLF4J: ",
            r"Using Spark's default log4j profile",
            r"Setting default log level to",
            r"To adjust logging level use sc\.setLogLevel",
            r"Exception in thread ",
            r"\S.*:\d+: \w*Warning: ",  # warnings.showwarning: "file.py:12: UserWarning: ..."
        )
    )
)
_PROGRESS_BAR = re.compile(r"(\[Stage \d+:[^\]]*\])+")
# What goes on a Spark record: stack frames, causes, exception lines, a Python traceback
# inside a task failure, blank lines.
_SPARK_MORE = re.compile(
    r"\s|$|Caused by: |Suppressed: |Driver stacktrace:|Traceback \(most recent call last\):"
    r"|[A-Za-z_][\w$]*(\.[\w$]+)+(: |$)|[A-Za-z_]\w*(Error|Exception|Exit|Interrupt|Warning)\b"
)


@dataclass(frozen=True)
class JobLog:
    """A job's log split in two: `job`, the lines the job wrote itself (its progress
    notes, its result, its error and traceback), and `spark`, what Spark, its JVM, py4j and
    library warnings wrote. Each in the order written."""

    job: tuple[str, ...]
    spark: tuple[str, ...]


def split_log(text: str) -> JobLog:
    """Split a job's log text (its file, or `Job.log_tail`) into the job's lines and
    Spark's (see JOB_LINE_PREFIX). A log written before lines were tagged splits by text
    alone: whatever does not look like Spark's is the job's."""
    own: builtins.list[str] = []
    spark: builtins.list[str] = []
    in_spark = False  # whether the line before was Spark's (stack traces follow it)
    # "\r" ends a line too: the progress bar redraws itself with it
    for line in text.splitlines():
        # The progress bar ends without a newline when a job fails: what follows it on
        # its line was written by someone else.
        bar = _PROGRESS_BAR.match(line)
        if bar:
            spark.append(bar.group())
            line, in_spark = line[bar.end() :], False
        cut = line.find(JOB_LINE_PREFIX)
        if cut > 0:  # a tagged line after another writer's unfinished one
            if line[:cut].strip():
                spark.append(line[:cut])
            line = line[cut:]
        if line.startswith(JOB_LINE_PREFIX):
            own.append(line[len(JOB_LINE_PREFIX) :])
            in_spark = False
        elif _SPARK_LINE.match(line) or (in_spark and _SPARK_MORE.match(line)):
            if line.strip():
                spark.append(line)
            in_spark = True
        elif line.strip():
            own.append(line)
            in_spark = False
    return JobLog(tuple(own), tuple(spark))


def job_log(job: Job, *, lines: int = LOG_VIEW_LINES) -> JobLog:
    """The job's log, split (`split_log`), the last `lines` of each side: from its log
    file's last LOG_VIEW_BYTES, else from the record's `log_tail` (a file gone, empty or on
    another host)."""
    text = None
    if job.log_path:
        try:
            with open(job.log_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - LOG_VIEW_BYTES))
                data = f.read()
            if size > LOG_VIEW_BYTES:  # cut in the middle of a line: drop its end
                data = data.partition(b"\n")[2]
            text = data.decode(errors="replace")
        except OSError:
            pass
    split = split_log(text or job.log_tail)
    return JobLog(split.job[-lines:], split.spark[-lines:])


def status(job_id: int, *, cluster: str | os.PathLike[str] | None = None) -> Job:
    """The job's record; a job whose runner died without a word is marked failed."""
    path = _resolve_cluster(cluster)
    with _jobs(path) as table:
        row = table.get(int(job_id))
        if row is None:
            raise UnknownJob(f"no job {job_id} in cluster {path}")
        job = _job(path, row)
        here = job.host == socket.gethostname()  # a pid means something on its host only
        if job.state in (QUEUED, RUNNING) and job.pid and here and not _pid_alive(job.pid):
            time.sleep(0.2)  # the runner may be writing its last words
            table.update(
                job.id,
                (QUEUED, RUNNING),
                state=FAILED,
                error="the job's process died",
                ended_ms=now_ms(),
            )
            row = table.get(job.id)
            assert row is not None  # jobs are never deleted
            job = _job(path, row)
    if not job.done:  # live: the tail of the log as it grows
        job = Job(**{**asdict(job), "log_tail": log_tail(job.log_path)})
    return job


def list(  # noqa: A001 - the job API's name
    *, cluster: str | os.PathLike[str] | None = None, limit: int = 100
) -> builtins.list[Job]:
    """Jobs of the cluster, newest first."""
    path = _resolve_cluster(cluster)
    with _jobs(path) as table:
        return [_job(path, r) for r in table.newest(limit)]


def cancel(job_id: int, *, cluster: str | os.PathLike[str] | None = None) -> Job:
    """Cancel a job: a queued one at once, a running one as soon as its runner notices
    (within a second). Cancelling a finished job changes nothing."""
    path = _resolve_cluster(cluster)
    with _jobs(path) as table:
        if table.get(int(job_id)) is None:
            raise UnknownJob(f"no job {job_id} in cluster {path}")
        # one conditional write each, so a job that starts meanwhile is still asked to stop
        if not table.update(
            int(job_id), (QUEUED,), state=CANCELLED, cancel_requested=1, ended_ms=now_ms()
        ):
            table.update(int(job_id), (RUNNING,), cancel_requested=1)
    return status(job_id, cluster=path)


def wait(
    job_id: int, *, cluster: str | os.PathLike[str] | None = None, timeout: float | None = None
) -> Job:
    """Poll until the job is finished (or `timeout` seconds pass); returns its record."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        job = status(job_id, cluster=cluster)
        if job.done or (deadline is not None and time.monotonic() >= deadline):
            return job
        time.sleep(0.5)
