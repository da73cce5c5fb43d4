"""Replay jobs: submit, watch and cancel Spark jobs that run in their own processes.

This module never imports pyspark (the consoles use it). A job's record lives in the
cluster's catalog, table `jobs` (engine/catalog.py creates it; only this package uses it),
so every process that opens the cluster sees the same jobs:

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
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from engine import times
from engine.cluster import CATALOG_FILE, Cluster
from engine.errors import InvalidArgument, NotFound

KINDS = ("copy", "materialize", "window-counts", "custom")
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
    "queued",
    "running",
    "succeeded",
    "failed",
    "cancelled",
)
FINAL_STATES = frozenset({SUCCEEDED, FAILED, CANCELLED})
DEFAULT_MASTER = "local[*]"
LOG_DIR = "jobs"
LOG_TAIL_CHARS = 4000
CLUSTER_ENV = "PLET_CLUSTER"

_last_cluster: str | None = None
_COLUMNS = (
    "id, kind, params, state, cancel_requested, pid, host, tasks_done, tasks_total, submitted_ms, "
    "started_ms, ended_ms, result, error, log_path, log_tail"
)


class UnknownJob(NotFound):
    """No job of that id in the cluster."""


@dataclass(frozen=True)
class Job:
    id: int
    cluster: str
    kind: str
    params: dict[str, Any]
    state: str
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

    @property
    def done(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def progress(self) -> float | None:
        """Tasks done of total (0..1), None before Spark has planned any."""
        return self.tasks_done / self.tasks_total if self.tasks_total else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["progress"] = self.progress
        return d


# --- the table ---------------------------------------------------------------------------


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _catalog(cluster: str | os.PathLike[str]) -> Path:
    path = Path(cluster) / CATALOG_FILE
    if not path.is_file():
        raise NotFound(f"no Partitionlet cluster at {str(cluster)!r}")
    return path


@contextmanager
def _connect(
    cluster: str | os.PathLike[str], *, write: bool = False
) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(_catalog(cluster), timeout=30, isolation_level=None)
    try:
        if write:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        else:
            yield conn
    finally:
        conn.close()


def _ensure_table(cluster: str | os.PathLike[str]) -> None:
    """Opening the cluster creates the table in a catalog made by an older engine."""
    _catalog(cluster)
    Cluster.open(cluster).close()


def _row(cluster: str, row: tuple) -> Job:
    (
        job_id,
        kind,
        params,
        state,
        cancel_requested,
        pid,
        host,
        done,
        total,
        submitted,
        started,
        ended,
        result,
        error,
        log_path,
        log_tail,
    ) = row
    return Job(
        job_id,
        cluster,
        kind,
        json.loads(params),
        state,
        bool(cancel_requested),
        pid,
        host,
        done,
        total,
        submitted,
        started,
        ended,
        json.loads(result) if result else None,
        error,
        log_path,
        log_tail,
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
    }
    if set(fields) - allowed:
        raise ValueError(f"cannot set {sorted(set(fields) - allowed)} of a job")
    if "result" in fields and fields["result"] is not None:
        fields["result"] = json.dumps(fields["result"], default=str)
    sets = ", ".join(f"{k} = ?" for k in fields)
    with _connect(cluster, write=True) as conn:
        conn.execute(f"UPDATE jobs SET {sets} WHERE id = ?", (*fields.values(), job_id))


def claim(cluster: str | os.PathLike[str], job_id: int, pid: int) -> bool:
    """queued -> running, for the runner; False if the job was cancelled before it began."""
    with _connect(cluster, write=True) as conn:
        cur = conn.execute(
            "UPDATE jobs SET state = ?, pid = ?, host = ?, started_ms = ? "
            "WHERE id = ? AND state = ?",
            (RUNNING, pid, socket.gethostname(), _now_ms(), job_id, QUEUED),
        )
        return cur.rowcount == 1


def cancel_requested(cluster: str | os.PathLike[str], job_id: int) -> bool:
    with _connect(cluster) as conn:
        row = conn.execute("SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return bool(row and row[0])


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
    if kind == "copy" and not p.get("target"):
        raise InvalidArgument("a copy job needs target (a full topic name)")
    if kind == "materialize" and not (p.get("target") or p.get("output")):
        raise InvalidArgument("a materialize job needs target (a topic) or output (Parquet)")
    if kind == "window-counts":
        p.setdefault("window", "1 minute")
    if kind == "custom":
        file = p.get("file")
        if not file or not Path(file).is_file():
            raise InvalidArgument(f"a custom job needs file, an existing Python file: {file!r}")
        p["file"] = str(Path(file).resolve())
        p.setdefault("function", "transform")
    if "output" in p:
        p["output"] = str(Path(p["output"]).resolve())
    if "conf" in p and not isinstance(p["conf"], dict):
        raise InvalidArgument("conf must be a dict of Spark settings")
    json.dumps(p)  # must be JSON
    return p


# --- the API ------------------------------------------------------------------------------


_children: builtins.list[subprocess.Popen] = []


def submit(cluster_path: str | os.PathLike[str], kind: str, **params: Any) -> int:
    """Record a job and start its process; returns its id. `master` picks the Spark
    master (default local[*]); `conf` is a dict of extra Spark settings."""
    global _last_cluster
    cluster = str(Path(cluster_path).resolve())
    _ensure_table(cluster)
    p = check_params(kind, params)
    with _connect(cluster, write=True) as conn:
        cur = conn.execute(
            "INSERT INTO jobs (kind, params, state, submitted_ms) VALUES (?, ?, ?, ?)",
            (kind, json.dumps(p), QUEUED, _now_ms()),
        )
        job_id = cur.lastrowid
    log_dir = Path(cluster) / LOG_DIR
    log_dir.mkdir(exist_ok=True)
    log_path = log_dir / f"job-{job_id}.log"
    update_log = {"log_path": str(log_path)}
    with _connect(cluster, write=True) as conn:
        conn.execute("UPDATE jobs SET log_path = ? WHERE id = ?", (update_log["log_path"], job_id))
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "spark_tasks.run", cluster, str(job_id)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # detached: survives the submitter, own signals
            env=env,
            cwd=log_dir,  # whatever Spark leaves behind stays out of the cluster's files
        )
    _children.append(proc)
    with _connect(cluster, write=True) as conn:  # so that a runner that never starts shows
        conn.execute(
            "UPDATE jobs SET pid = ?, host = ? WHERE id = ? AND state = ?",
            (proc.pid, socket.gethostname(), job_id, QUEUED),
        )
    # Reap it when it ends, so that no zombie is left in a long-lived submitter.
    threading.Thread(target=proc.wait, name=f"plet-job-{job_id}", daemon=True).start()
    _last_cluster = cluster
    return job_id


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail(path: str | None) -> str:
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


def status(job_id: int, *, cluster: str | os.PathLike[str] | None = None) -> Job:
    """The job's record; a job whose runner died without a word is marked failed."""
    path = _resolve_cluster(cluster)
    with _connect(path) as conn:
        row = conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (int(job_id),)).fetchone()
    if row is None:
        raise UnknownJob(f"no job {job_id} in cluster {path}")
    job = _row(path, row)
    here = job.host == socket.gethostname()  # a pid means something on its host only
    if job.state in (QUEUED, RUNNING) and job.pid and here and not _pid_alive(job.pid):
        time.sleep(0.2)  # the runner may be writing its last words
        with _connect(path, write=True) as conn:
            conn.execute(
                "UPDATE jobs SET state = ?, error = ?, ended_ms = ? "
                "WHERE id = ? AND state IN (?, ?)",
                (FAILED, "the job's process died", _now_ms(), job.id, QUEUED, RUNNING),
            )
            row = conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job.id,)).fetchone()
        job = _row(path, row)
    if not job.done:  # live: the tail of the log as it grows
        job = Job(**{**asdict(job), "log_tail": _tail(job.log_path)})
    return job


def list(  # noqa: A001 - the job API's name
    *, cluster: str | os.PathLike[str] | None = None, limit: int = 100
) -> builtins.list[Job]:
    """Jobs of the cluster, newest first."""
    path = _resolve_cluster(cluster)
    try:
        with _connect(path) as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM jobs ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    return [_row(path, r) for r in rows]


def cancel(job_id: int, *, cluster: str | os.PathLike[str] | None = None) -> Job:
    """Cancel a job: a queued one at once, a running one as soon as its runner notices
    (within a second). Cancelling a finished job changes nothing."""
    path = _resolve_cluster(cluster)
    with _connect(path, write=True) as conn:
        row = conn.execute("SELECT state FROM jobs WHERE id = ?", (int(job_id),)).fetchone()
        if row is None:
            raise UnknownJob(f"no job {job_id} in cluster {path}")
        if row[0] == QUEUED:
            conn.execute(
                "UPDATE jobs SET state = ?, cancel_requested = 1, ended_ms = ? WHERE id = ?",
                (CANCELLED, _now_ms(), job_id),
            )
        elif row[0] == RUNNING:
            conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
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
