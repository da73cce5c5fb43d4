"""The Replays tab: Spark replay jobs of the cluster with their state and progress; start
one (a dialog per kind), cancel one, and see its result, error and log tail.

Jobs run in their own processes (`spark_tasks.jobs`); this tab only reads and writes their
records, so it works the same whoever started them. The detail shows the job's own log lines;
`l` shows Spark's as well (spark_tasks.jobs.job_log)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, DataTable, ProgressBar, Static

from console.display import bar
from console.widgets.pane import Pane, fill_table, note
from console.widgets.table import Table
from engine.times import format_ms
from spark_tasks import jobs
from spark_tasks.jobs import JobState

STATE_STYLES = {
    JobState.QUEUED: "dim",
    JobState.RUNNING: "yellow",
    JobState.SUCCEEDED: "green",
    JobState.FAILED: "bold red",
    JobState.CANCELLED: "magenta",
}


def _what(job: jobs.Job) -> str:
    p = job.params
    source = p.get("source") or f"{p.get('stream')} (all topics)"
    dest = p.get("target") or p.get("output") or "result"
    return f"{source} → {dest}"


LOG_LINES = 15  # of each side of the log in the detail


def _progress(job: jobs.Job) -> Text:
    if job.starting:  # no bar yet: nothing Spark did is measured
        return Text(jobs.PHASE_STARTING, style="yellow")
    text = Text(bar(job.progress if not job.done else (job.progress or 1.0), 10))
    text.append(f" {job.tasks_done}/{job.tasks_total}" if job.tasks_total else " -")
    return text


class ReplaysPane(Pane):
    GATES: ClassVar[dict[str, str]] = {"start_replay": "replay-new"}
    BINDINGS = [
        Binding("n", "new_replay", "New replay"),
        Binding("x", "cancel_job", "Cancel job"),
        Binding("l", "toggle_spark_log", "Spark output"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.jobs: dict[str, jobs.Job] = {}
        self.selected: str | None = None
        self.show_spark = False  # Spark's log lines under the job's, in the detail

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-toolbar"):
            yield Static(id="replay-summary")
            yield Button("New replay…", id="replay-new", variant="primary", compact=True)
            yield Button("Cancel job", id="replay-cancel", variant="error", compact=True)
        table = Table(id="replay-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("ID", "Kind", "State", "Progress", "Submitted (UTC)", "Source → target")
        yield table
        yield ProgressBar(total=100, show_eta=False, id="replay-progress")
        with VerticalScroll(id="replay-detail-scroll"):
            yield Static(id="replay-detail")

    def fetch(self) -> list[jobs.Job]:
        return jobs.list(cluster=self.console.cluster_path, limit=50)

    def show(self, found: list[jobs.Job]) -> None:
        self.jobs = {str(j.id): j for j in found}
        running = sum(1 for j in found if not j.done)
        note(
            self.query_one("#replay-summary", Static),
            f"{len(found)} job(s), {running} queued or running" if found else "No replay jobs yet.",
        )
        fill_table(
            self.query_one("#replay-table", DataTable),
            (
                (
                    j.id,
                    (
                        j.id,
                        j.kind,
                        Text(j.state, style=STATE_STYLES.get(j.state, "")),
                        _progress(j),
                        format_ms(j.submitted_ms, seconds=True),
                        Text(_what(j)),
                    ),
                )
                for j in found
            ),
        )
        if self.selected not in self.jobs:
            self.selected = str(found[0].id) if found else None
        self._show_job()

    @on(DataTable.RowHighlighted, "#replay-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value if event.row_key is not None else None
        if key in self.jobs:
            self.selected = key
            self._show_job()

    def _show_job(self) -> None:
        job = self.jobs.get(self.selected or "")
        progress = self.query_one("#replay-progress", ProgressBar)
        detail = self.query_one("#replay-detail", Static)
        if job is None:
            progress.update(total=100, progress=0)
            detail.update("")
            return
        if job.starting:  # indeterminate while Spark starts
            progress.update(total=None, progress=0)
        elif job.progress is not None:  # the runner's, which never goes back
            progress.update(total=100, progress=round(100 * job.progress))
        else:
            progress.update(total=None if not job.done else 100, progress=100 if job.done else 0)
        text = Text()
        text.append(f"job {job.id}: {job.kind} ", style="bold")
        text.append(job.state, style=STATE_STYLES.get(job.state, ""))
        if job.starting:
            text.append(f" ({jobs.PHASE_STARTING})", style="yellow")
        elif job.step and not job.done:
            text.append(f" ({job.step})")
        if job.cancel_requested and not job.done:  # as the web console says it
            text.append(" (cancelling)", style="magenta")
        text.append(f"\nparams  {json.dumps(job.params, default=str)}")
        text.append(
            f"\nstarted {format_ms(job.started_ms, seconds=True)}  "
            f"ended {format_ms(job.ended_ms, seconds=True)}"
        )
        if job.reading:
            text.append(f"\nread    {job.reading}")
        if job.result is not None:
            text.append("\nresult  ", style="bold")
            text.append(json.dumps(job.result, default=str)[:2000])
        if job.error:
            text.append("\nerror   ", style="bold red")
            text.append(job.error)
        log = jobs.job_log(job, lines=LOG_LINES)
        if log.job:
            text.append("\nlog:\n", style="bold")
            text.append("\n".join(log.job))
        if self.show_spark:
            text.append("\nSpark output:\n", style="bold")
            text.append("\n".join(log.spark) or "(nothing)", style="dim")
        elif log.spark:
            text.append(f"\n({len(log.spark)} lines of Spark output: l shows them)", style="dim")
        detail.update(text)

    def action_toggle_spark_log(self) -> None:
        self.show_spark = not self.show_spark
        self._show_job()

    @on(Button.Pressed, "#replay-new")
    def action_new_replay(self, kind: str | None = None) -> None:
        if self.refused("start_replay"):
            return
        from console.screens.replay_start import ReplayStartScreen

        def started(job_id: Any) -> None:
            if job_id is not None:
                self.selected = str(job_id)
                self.notify(f"replay job {job_id} submitted")
                self.reload(quiet=True)

        self.app.push_screen(
            ReplayStartScreen(self.console.cluster_path, self.topic, kind=kind), started
        )

    @on(Button.Pressed, "#replay-cancel")
    def action_cancel_job(self) -> None:
        job = self.jobs.get(self.selected or "")
        if job is None:
            self.notify("Pick a job first.", severity="warning")
            return
        if self.refused("cancel_replay"):
            return
        if job.done:
            self.notify(f"job {job.id} has ended ({job.state})", severity="warning")
            return
        path, job_id = self.console.cluster_path, job.id

        def cancel() -> str:
            after = jobs.cancel(job_id, cluster=path)
            return f"job {job_id}: " + (after.state if after.done else "cancel requested")

        self.act(cancel)
