"""The Replays tab: the start dialog per kind, and a real copy job started and cancelled
(one Spark job process in the whole file: the machine is small)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Select, Static

from console.screens.replay_start import ReplayStartScreen
from console.widgets.replays import ReplaysPane
from spark_tasks import jobs
from tests.timing import scaled

pytestmark = pytest.mark.asyncio

TOPIC = "/apps/sensors:car-17"


async def _replays(app, pilot, until) -> ReplaysPane:
    app.open_path(TOPIC)
    await pilot.press("7")
    pane = app.query_one("#replays", ReplaysPane)
    await until(pilot, lambda: pane.loads >= 1)
    return pane


async def test_start_dialog_shows_the_fields_of_each_kind_and_checks_them(
    demo, cluster_path, make_app, until, click, monkeypatch
):
    warmed: list[Path] = []  # Spark started for the job as the dialog opens
    monkeypatch.setattr(jobs, "prewarm", lambda path: warmed.append(Path(path).resolve()))
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await _replays(app, pilot, until)
        assert "No replay jobs yet." in str(app.query_one("#replay-summary", Static).content)
        app.query_one("#replay-table").focus()
        await pilot.press("n")
        dialog = app.screen
        assert isinstance(dialog, ReplayStartScreen)
        await until(pilot, lambda: warmed == [Path(cluster_path).resolve()])
        assert dialog.query_one("#replay-source", Input).value == TOPIC
        assert dialog.query_one("#replay-row-target").display
        assert not dialog.query_one("#replay-row-window").display
        await click(pilot, "#replay-start")
        await until(pilot, lambda: "a copy job needs target" in _error(dialog))

        dialog.query_one("#replay-kind", Select).value = "window-counts"
        await until(pilot, lambda: dialog.query_one("#replay-row-window").display)
        assert not dialog.query_one("#replay-row-target").display
        dialog.query_one("#replay-kind", Select).value = "custom"
        await until(pilot, lambda: dialog.query_one("#replay-row-file").display)
        dialog.query_one("#replay-file", Input).value = "/no/such/file.py"
        await click(pilot, "#replay-start")  # pressed again: once it can take the click
        await until(pilot, lambda: "needs file" in _error(dialog))
        await pilot.press("escape")
        assert not isinstance(app.screen, ReplayStartScreen)
        assert pane.loads >= 1
    assert jobs.list(cluster=cluster_path) == []  # nothing was submitted


async def test_finished_jobs_show_progress_result_and_error(
    demo, cluster_path, make_app, until, record_job
):
    starting = record_job(  # its runner is up, Spark not yet: no task began
        cluster_path,
        "copy",
        {"source": TOPIC, "target": "/x:z"},
        jobs.RUNNING,
        1_714_564_700_000,
        tasks_total=2,
        started_ms=1_714_564_701_000,
    )
    ok = record_job(
        cluster_path,
        "window-counts",
        {"source": TOPIC, "window": "1 minute"},
        jobs.SUCCEEDED,
        1_714_564_800_000,
        tasks_done=13,
        tasks_total=13,
        result={"windows": 7, "messages": 120},
        started_ms=1_714_564_801_000,
        ended_ms=1_714_564_830_000,
    )
    bad = record_job(
        cluster_path,
        "copy",
        {"source": TOPIC, "target": "/x:y"},
        jobs.FAILED,
        1_714_564_900_000,
        tasks_done=1,
        tasks_total=4,
        error="AccessDenied: user 'bob' may not produce to stream /x",
        log_tail="line one\n26/11/24 05:10:12 WARN TaskSetManager: Lost task 0.0\n"
        "Traceback: the end",
    )
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await _replays(app, pilot, until)
        table = app.query_one("#replay-table", DataTable)
        assert table.row_count == 3  # newest first
        assert [str(c) for c in table.get_row(str(starting))[2:4]] == ["running", "starting Spark"]
        assert [str(c) for c in table.get_row(str(bad))[2:4]] == ["failed", "██░░░░░░░░ 1/4"]
        assert str(pane.selected) == str(bad)
        detail = str(app.query_one("#replay-detail", Static).content)
        assert "AccessDenied: user 'bob'" in detail and "Traceback: the end" in detail
        assert "line one" in detail and "WARN TaskSetManager" not in detail  # Spark's: hidden
        assert "1 lines of Spark output: l shows them" in detail
        bar = app.query_one("#replay-progress")
        assert (bar.progress, bar.total) == (25, 100)  # Job.progress: 1 of 4 tasks

        table.focus()
        await pilot.press("l")  # Spark's lines too
        spark = "Spark output:\n26/11/24 05:10:12 WARN TaskSetManager: Lost task 0.0"
        await until(pilot, lambda: spark in _detail(app))
        assert "Traceback: the end" in _detail(app)
        await pilot.press("down")
        await until(pilot, lambda: pane.selected == str(ok))
        assert [str(c) for c in table.get_row(str(ok))[2:4]] == ["succeeded", "██████████ 13/13"]
        detail = str(app.query_one("#replay-detail", Static).content)
        assert '"windows": 7' in detail
        assert (bar.progress, bar.total) == (100, 100)
        await pilot.press("x")  # a finished job is not cancelled again (a warning, no worker)
        assert jobs.status(ok, cluster=cluster_path).cancel_requested is False


async def test_start_a_copy_job_and_cancel_it(demo, cluster_path, make_app, until, click):
    app = make_app(refresh_s=0.5)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await _replays(app, pilot, until)
        await click(pilot, "#replay-new")
        await until(pilot, lambda: isinstance(app.screen, ReplayStartScreen))
        dialog = app.screen
        dialog.query_one("#replay-target", Input).value = "/apps/sensors:car-17-copy"
        dialog.query_one("#replay-from-offset", Input).value = "5"
        await click(pilot, "#replay-start")
        await until(pilot, lambda: _submitted(dialog), timeout=60)
        [job] = jobs.list(cluster=cluster_path)
        try:
            assert job.kind == "copy"
            assert job.params["source"] == TOPIC and job.params["from_offset"] == 5
            await until(pilot, lambda: str(job.id) in pane.jobs)
            assert pane.selected == str(job.id)
            assert app.query_one("#replay-table", DataTable).row_count == 1

            # Once its runner has claimed it, a cancel is a request the job's monitor reads
            # when Spark is up (a minute on a busy machine; not waited for here). A job
            # cancelled while still queued is tested in tests/spark_tasks/test_jobs.py.
            await until(pilot, lambda: pane.jobs[str(job.id)].state == jobs.RUNNING, timeout=60)
            app.query_one("#replay-table").focus()
            await pilot.press("x")
            await until(pilot, lambda: jobs.status(job.id, cluster=cluster_path).cancel_requested)
            assert jobs.status(job.id, cluster=cluster_path).state == jobs.RUNNING
            await until(pilot, lambda: "(cancelling)" in _detail(app))
            assert f"job {job.id}: copy running" in _detail(app)
        finally:
            _stop_runner(jobs.status(job.id, cluster=cluster_path))


def _submitted(dialog: ReplayStartScreen) -> bool:
    """Whether the start dialog has closed; an error it shows instead fails the test at
    once, with its text."""
    if not dialog.is_attached:
        return True
    error = str(dialog.query_one("#replay-error", Static).content)
    assert "error" not in error, error
    return False


def _error(dialog: ReplayStartScreen) -> str:
    return str(dialog.query_one("#replay-error", Static).content)


def _detail(app) -> str:
    return str(app.query_one("#replay-detail", Static).content)


def _stop_runner(job: jobs.Job) -> None:
    """End the job's own process group (the runner and its Spark JVM), which this test
    started, so that nothing outlives the test."""
    if job.done or not job.pid:
        return
    try:
        os.killpg(job.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + scaled(20)
    while time.monotonic() < deadline:
        try:
            os.killpg(job.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(job.pid, signal.SIGKILL)
