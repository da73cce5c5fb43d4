"""Fixtures of the terminal console's tests: a demo cluster, the app driven by Textual's
pilot, a way to wait for workers' answers, a click that waits until a button takes it, and
replay jobs' records. (Snapshots of whole screens come from pytest-textual-snapshot's
`snap_compare`.)"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.timing import scaled


@pytest.fixture
def demo(cluster):
    """The cluster with engine.demo's data set."""
    from engine.demo import seed

    seed(cluster)
    return cluster


@pytest.fixture
def make_app(cluster_path, cluster):
    """ConsoleApp with the test's cluster injected (refreshing slowly unless asked)."""
    from console.app import ConsoleApp

    def make(topic: str | None = None, refresh_s: float = 60.0) -> ConsoleApp:
        return ConsoleApp(cluster_path, topic=topic, cluster=cluster, refresh_s=refresh_s)

    return make


Until = Callable[..., Awaitable[None]]


@pytest.fixture
def until() -> Until:
    """`await until(pilot, lambda: ...)`: let the app run until it holds, 30 s at most (a
    deadline costs nothing when things go well, and a crowded machine needs more than 10 s
    at times; it scales with PLET_TEST_SLOWDOWN, tests/timing.py)."""

    async def wait(pilot, predicate: Callable[[], object], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + scaled(timeout)
        while True:
            await pilot.pause(0.02)
            if predicate():
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {scaled(timeout):g} s waiting for {predicate}"
                )

    return wait


Click = Callable[..., Awaitable[None]]


@pytest.fixture
def click(until) -> Click:
    """`await click(pilot, "#save")`: click a button once its screen shows it, it is laid
    out and can take the click, and check that the click landed on it. Textual ignores a click (or Enter) on a
    button that still shows its last press (0.2 s, more on a busy machine); a person never
    presses again that fast, a test does."""
    from textual.widgets import Button

    async def press(pilot, selector: str) -> None:
        # a dialog opened by the last key may still be composing (a busy machine)
        await until(pilot, lambda: len(pilot.app.screen.query(selector)) > 0)
        button = pilot.app.screen.query_one(selector, Button)
        await until(pilot, lambda: button.region.area and not button.has_class("-active"))
        assert await pilot.click(selector), f"the click missed {selector}"

    return press


@pytest.fixture
def record_job():
    """`record_job(cluster_path, kind, params, state, submitted_ms, **fields)`: a replay
    job's record as its runner would leave it, without starting Spark; returns its id."""
    import json
    import sqlite3

    from spark_tasks import jobs

    def record(cluster_path, kind: str, params: dict, state: str, submitted_ms: int, **fields):
        conn = sqlite3.connect(Path(cluster_path) / "catalog.db", timeout=30)
        with conn:
            job_id = conn.execute(
                "INSERT INTO jobs (kind, params, state, submitted_ms) VALUES (?, ?, ?, ?)",
                (kind, json.dumps(params), "queued", submitted_ms),
            ).lastrowid
        conn.close()
        jobs.update(cluster_path, job_id, state=state, **fields)
        return job_id

    return record
