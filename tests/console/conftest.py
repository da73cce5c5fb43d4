"""Fixtures of the terminal console's tests: a demo cluster, the app driven by Textual's
pilot, a way to wait for workers' answers, and text snapshots of whole screens."""

from __future__ import annotations

import difflib
import io
import os
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from rich.console import Console

SIZE = (140, 44)
SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE_ENV = "PLET_UPDATE_SNAPSHOTS"


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
    """`await until(pilot, lambda: ..., timeout=10)`: let the app run until it holds."""

    async def wait(pilot, predicate: Callable[[], object], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            await pilot.pause(0.02)
            if predicate():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")

    return wait


def screen_text(app) -> str:
    """The screen as plain text, the way `App.export_screenshot` renders it (without the
    SVG's colours, ids and fonts, which change between Textual releases)."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    return "\n".join(lines).rstrip() + "\n"


@pytest.fixture
def snapshot() -> Callable[..., Awaitable[None]]:
    """`await snapshot(pilot, "name")` compares the screen, once it has settled, with
    snapshots/name.txt; with PLET_UPDATE_SNAPSHOTS=1 it writes the file instead. `masks`
    are regexes of text that depends on the clock (replaced by as many #)."""

    async def check(pilot, name: str, masks: tuple[str, ...] = ()) -> None:
        # Widgets finish their layout over a few frames (a table sizes its columns when
        # the app is idle, which takes a while on a busy machine): wait until the screen
        # has not changed for 0.3 s.
        text = screen_text(pilot.app)
        same = 0
        deadline = time.monotonic() + 10
        while same < 6 and time.monotonic() < deadline:
            await pilot.pause(0.05)
            again = screen_text(pilot.app)
            same = same + 1 if again == text else 0
            text = again
        for pattern in masks:
            # Same length, so that the layout around what is masked is still compared.
            text = re.sub(pattern, lambda m: "#" * len(m.group()), text)
        path = SNAPSHOTS / f"{name}.txt"
        update = os.environ.get(UPDATE_ENV) == "1"
        if update:
            SNAPSHOTS.mkdir(exist_ok=True)
            path.write_text(text)
            return
        if not path.exists():
            pytest.fail(f"no snapshot {path}: run with {UPDATE_ENV}=1 to write it")
        expected = path.read_text()
        if text != expected:
            diff = "\n".join(
                difflib.unified_diff(
                    expected.splitlines(), text.splitlines(), "expected", "actual", lineterm=""
                )
            )
            pytest.fail(f"screen differs from {path.name} ({UPDATE_ENV}=1 rewrites it):\n{diff}")

    return check


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
