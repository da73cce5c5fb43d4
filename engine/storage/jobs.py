"""Replay job records in the catalog (table `jobs`), for spark_tasks.jobs.

A job runs in its own process and keeps its record here, so that every process that
opens the cluster (CLI, consoles) can list, watch and cancel it. What a state means and
when it changes is spark_tasks.jobs' business; this module only reads and writes rows,
each call one short transaction. `params` and `result` are JSON text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from engine.storage.catalog import Catalog


class JobRow(NamedTuple):
    id: int
    kind: str
    params: str
    state: str
    cancel_requested: bool
    pid: int | None
    host: str | None
    tasks_done: int
    tasks_total: int
    submitted_ms: int
    started_ms: int | None
    ended_ms: int | None
    result: str | None
    error: str | None
    log_path: str | None
    log_tail: str
    rows_read: int
    rows_per_s: float | None
    first_task_ms: int | None = None  # when the job's first Spark task began (None: not yet)
    progress: float | None = None  # 0..1, never lower; None from a runner that wrote none
    step: str | None = None  # the step running, for people ("step 2 of 2: writing")


_COLUMNS = ", ".join(JobRow._fields)
# What `update` may set: everything but the id, the kind, the parameters and the submit time.
FIELDS = frozenset(JobRow._fields) - {"id", "kind", "params", "submitted_ms"}


def _row(row: tuple[Any, ...]) -> JobRow:
    return JobRow._make((*row[:4], bool(row[4]), *row[5:]))


class JobTable:
    """The `jobs` table of one catalog (`catalog.jobs`): one short transaction per call,
    so a state change guarded by `only_in` cannot race another process's; times are given
    by the caller. Any thread and any process may call it."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def add(self, kind: str, params: str, state: str, submitted_ms: int) -> int:
        """Insert a job; returns its id."""
        with self._catalog.write():
            cur = self._catalog.conn.execute(
                "INSERT INTO jobs (kind, params, state, submitted_ms) VALUES (?, ?, ?, ?)",
                (kind, params, state, submitted_ms),
            )
            return int(cur.lastrowid or 0)

    def update(self, job_id: int, only_in: tuple[str, ...] = (), **fields: Any) -> bool:
        """Set `fields` of job `job_id` (when its state is one of `only_in`, if given);
        returns whether a row changed. Unknown field names are a ValueError."""
        unknown = set(fields) - FIELDS
        if unknown:
            raise ValueError(f"cannot set {sorted(unknown)} of a job")
        if not fields:
            return False
        sets = ", ".join(f"{k} = ?" for k in fields)
        sql = f"UPDATE jobs SET {sets} WHERE id = ?"
        args: tuple[Any, ...] = (*fields.values(), job_id)
        if only_in:
            sql += f" AND state IN ({', '.join('?' * len(only_in))})"
            args += only_in
        with self._catalog.write():
            return self._catalog.conn.execute(sql, args).rowcount > 0

    def get(self, job_id: int) -> JobRow | None:
        rows = self._catalog.query(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return _row(rows[0]) if rows else None

    def newest(self, limit: int) -> list[JobRow]:
        """The newest `limit` jobs, newest first (none in a catalog made before jobs)."""
        if not self._catalog.query(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'"
        ):
            return []
        return [
            _row(r)
            for r in self._catalog.query(
                f"SELECT {_COLUMNS} FROM jobs ORDER BY id DESC LIMIT ?", (limit,)
            )
        ]

    def in_states(self, states: tuple[str, ...]) -> list[JobRow]:
        """The jobs whose state is one of `states`, oldest first."""
        if not states or not self._catalog.query(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'"
        ):
            return []
        marks = ", ".join("?" * len(states))
        rows = self._catalog.query(
            f"SELECT {_COLUMNS} FROM jobs WHERE state IN ({marks}) ORDER BY id", states
        )
        return [_row(r) for r in rows]
