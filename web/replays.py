"""Replays: Spark jobs over a stream's history (spark_tasks.jobs), started from a form per
kind, watched live (state, progress bar, result, log tail) and cancelled.

A job runs in its own process as the operating-system user of the server, so the checks
`spark_tasks.jobs.submit` makes as the logged-in user (`jobs.refusals`: consume_perm on what
it reads, produce_perm and topic_perm on what it writes, administrators only for server
paths and custom code) are the only gate between a console user and the data; the form
shows each refusal next to its field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, abort, make_response, redirect, request, url_for

from engine import clock, errors, times
from spark_tasks import jobs
from web.allowed import may
from web.pages import cluster, cluster_path, principal, render, user, wants_partial

replays = Blueprint("replays", __name__)

# A Spark interval such as "1 minute" or "10 seconds" (what window-counts groups by).
_WINDOW = re.compile(r"\d{1,6} (second|minute|hour|day|week)s?")
LIST_LIMIT = 100


@dataclass(frozen=True)
class Field:
    """One input of a job form: the job parameter it sets and how it is shown."""

    name: str
    label: str
    kind: str = "text"  # text, int, time, isolation (a choice of isolation level)
    hint: str = ""
    admin_only: bool = False  # a path on the server (written or run as the server's user)

    @property
    def optional_range(self) -> bool:
        """Offsets and times: optional, shown folded under "Range"."""
        return self.kind in ("int", "time", "isolation")


_SOURCE = (
    Field("source", "Source topic", hint="Full name, such as /apps/sensors:car-17."),
    Field("stream", "Or every topic of stream", hint="A stream path, such as /apps/sensors."),
    Field("topic_pattern", "Topic pattern", hint="With a stream: a regex of topic names."),
    Field("from_offset", "From offset", "int", "First offset of every partition."),
    Field("to_offset", "To offset", "int", "End offset of every partition (exclusive)."),
    Field("from_time", "From time (UTC)", "time", "First message at or after it."),
    Field("to_time", "To time (UTC)", "time", "Last message at or before it."),
    Field(
        "isolation_level",
        "Transactions",
        "isolation",
        "Committed only (the default), or aborted ones too.",
    ),
)
_OUTPUT = Field("output", "Parquet output directory", hint="A path on the server.", admin_only=True)
FORMS: dict[str, tuple[str, tuple[Field, ...]]] = {
    "copy": (
        "Re-publish a topic's offset or time range into another topic.",
        (*_SOURCE, Field("target", "Target topic", hint="Full name; created if missing.")),
    ),
    "materialize": (
        "The latest value per key (the current-state view), to a topic or Parquet.",
        (*_SOURCE, Field("target", "Target topic", hint="Full name; created if missing."), _OUTPUT),
    ),
    "window-counts": (
        "Messages and bytes per time window and topic.",
        (
            *_SOURCE,
            Field("window", "Window", hint="Such as 1 minute, 10 seconds, 1 hour."),
            _OUTPUT,
        ),
    ),
    "custom": (
        "A Python file on the server with a function from DataFrame to DataFrame.",
        (
            *_SOURCE,
            Field("file", "Python file", hint="A path on the server.", admin_only=True),
            Field("function", "Function", hint="Default: transform.", admin_only=True),
            Field("target", "Target topic", hint="Needs a value column.", admin_only=True),
            _OUTPUT,
        ),
    ),
}


@dataclass
class JobForm:
    """A job form as typed, with its errors per field (`form` for the whole form)."""

    kind: str
    values: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    denied: bool = False  # refused for who the user is, not for what they typed
    busy: bool = False  # refused for now: too many unfinished jobs (try later)

    @property
    def fields(self) -> tuple[Field, ...]:
        return FORMS[self.kind][1]

    @property
    def description(self) -> str:
        return FORMS[self.kind][0]

    @property
    def main_fields(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if not f.optional_range)

    @property
    def range_fields(self) -> tuple[Field, ...]:  # and the isolation level
        return tuple(f for f in self.fields if f.optional_range)

    @property
    def range_used(self) -> bool:
        """Whether the folded range inputs hold something (then they are shown open)."""
        return any(self.values.get(f.name) or f.name in self.errors for f in self.range_fields)

    @property
    def admin_only(self) -> bool:
        return self.kind in jobs.ADMIN_KINDS

    def params(self) -> dict[str, Any]:
        """The job's parameters from the typed values; bad numbers go to `errors`."""
        params: dict[str, Any] = {}
        for f in self.fields:
            text = self.values.get(f.name, "")
            if not text:
                continue
            if f.kind == "int":
                if not text.isdigit():
                    self.errors[f.name] = "An offset is a whole number, 0 or more."
                    continue
                params[f.name] = int(text)
            else:
                params[f.name] = text
        if self.kind == "window-counts" and "window" in params:
            if not _WINDOW.fullmatch(params["window"]):
                self.errors["window"] = (
                    "A window is a number and a unit: seconds, minutes, hours, days or weeks "
                    "(such as 1 minute)."
                )
        return params


def blank_forms() -> list[JobForm]:
    return [JobForm(kind) for kind in FORMS]


# --- checks ----------------------------------------------------------------------------


def _field_of(message: str, form: JobForm) -> str:
    """The field an InvalidArgument message from check_params is about, else "form"."""
    for f in form.fields:
        if message.startswith(f.name):
            return f.name
    words = set(re.findall(r"\w+", message))
    for f in form.fields:
        if f.name in words:
            return f.name
    return "form"


def _refuse(form: JobForm, params: dict[str, Any]) -> None:
    """Put in `form.errors` every reason the logged-in user may not run this job: the
    checks `jobs.submit` makes (`jobs.refusals`), each shown next to its field."""
    for refusal in jobs.refusals(cluster(), form.kind, params):
        if refusal.param == "kind":  # for who the user is, not for what they typed
            form.errors["form"] = str(refusal.error)
            if isinstance(refusal.error, errors.TryLater):
                form.busy = True
            else:
                form.denied = True
            return
        shown = refusal.param if refusal.param in {f.name for f in form.fields} else "form"
        form.errors.setdefault(shown, str(refusal.error))


# --- what the templates show -----------------------------------------------------------


def params_summary(job: jobs.Job) -> str:
    shown = {
        k: v for k, v in job.params.items() if k not in ("master", jobs.SUBMITTED_BY) and v != ""
    }
    for key in ("from_time", "to_time"):
        if isinstance(shown.get(key), int):
            shown[key] = times.format_ms(shown[key])
    return ", ".join(f"{k}={v}" for k, v in shown.items())


def duration_s(job: jobs.Job) -> float | None:
    if job.started_ms is None:
        return None
    end = job.ended_ms if job.ended_ms is not None else clock.now_ms()
    return max(0, end - job.started_ms) / 1000


def progress(job: jobs.Job) -> tuple[int, int] | None:
    """(value, max) for the progress bar, None while Spark is starting (`Job.starting`) or
    has planned no task yet."""
    if job.state is jobs.JobState.SUCCEEDED:
        return (job.tasks_total, job.tasks_total) if job.tasks_total else (1, 1)
    if not job.tasks_total or job.starting:
        return None
    if job.done_fraction is not None:  # the runner's bar, which never goes back
        return round(1000 * job.done_fraction), 1000
    return job.tasks_done, job.tasks_total


def result_table(result: Any) -> dict[str, Any] | None:
    """A list of dicts as columns and rows (for a table), else None."""
    if isinstance(result, list) and result and all(isinstance(r, dict) for r in result):
        columns: list[str] = []
        for row in result:
            columns.extend(k for k in row if k not in columns)
        return {"columns": columns, "rows": result}
    return None


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str)


@replays.app_context_processor
def replay_helpers() -> dict[str, Any]:
    return {
        "job_params_summary": params_summary,
        "job_duration_s": duration_s,
        "job_progress": progress,
        "job_result_table": result_table,
        "job_json": as_json,
    }


def _live(found: list[jobs.Job]) -> bool:
    return any(not j.done for j in found)


# --- views -----------------------------------------------------------------------------


@replays.route("/replays")
def index():
    found = jobs.list(cluster=cluster_path(), limit=LIST_LIMIT)
    return render(
        "replays/index.html",
        "replays/_jobs.html",
        jobs=found,
        live=_live(found),
        forms=blank_forms(),
    )


@replays.route("/replays/new/<kind>", methods=["POST"])
def submit(kind: str):
    if kind not in FORMS:
        abort(404)
    typed = {f.name: (request.form.get(f.name) or "").strip() for f in FORMS[kind][1]}
    form = JobForm(kind, typed)
    params = form.params()
    if not form.errors:
        _refuse(form, params)
    if not form.errors:
        try:
            jobs.check_params(kind, dict(params))
        except errors.InvalidArgument as exc:
            form.errors[_field_of(str(exc), form)] = str(exc)
    if not form.errors:
        job_id = jobs.submit(cluster_path(), kind, principal=principal(), warm=True, **params)
        target = url_for("replays.job", job_id=job_id)
        if wants_partial():
            response = make_response("")
            response.headers["HX-Redirect"] = target  # a full load of the job's page
            return response
        return redirect(target, 303)
    if wants_partial():  # htmx swaps 2xx answers only: the form with its errors
        return render("replays/index.html", "replays/_form.html", form=form)
    found = jobs.list(cluster=cluster_path(), limit=LIST_LIMIT)
    forms = [form if f.kind == kind else f for f in blank_forms()]
    status = 403 if form.denied else 429 if form.busy else 400
    return render("replays/index.html", jobs=found, live=_live(found), forms=forms), status


def _job_page(found: jobs.Job, cancellable: bool):
    """The job's page (or its live part): the job's own log lines, and Spark's as well with
    `?spark=1` (a query parameter, not an open <details>: the part reloads every second)."""
    visible = jobs.may_see(cluster(), found)
    return render(
        "replays/job.html",
        "replays/_job.html",
        job=found,
        visible=visible,
        cancellable=cancellable,
        show_process=cluster().is_administrator,  # the server's pid and host
        log=jobs.job_log(found) if visible else None,
        show_spark=request.args.get("spark") == "1",
    )


@replays.route("/replays/warm", methods=["POST"])
def warm():
    """Start Spark for the next job now (`jobs.prewarm`: a standby runner, which stops when
    idle for jobs.STANDBY_IDLE_S), so that the first job submitted from this page starts
    as the later ones do. The replays page asks for it as it loads, for a user who may
    start jobs; `PLET_REPLAYS_WARM=0` turns it off."""
    if not may("start_replay"):
        abort(403)
    jobs.prewarm(cluster_path())
    return "", 204


@replays.route("/replays/<int:job_id>")
def job(job_id: int):
    found = jobs.status(job_id, cluster=cluster_path())
    return _job_page(found, jobs.may_cancel(cluster(), found))


@replays.route("/replays/<int:job_id>/cancel", methods=["POST"])
def cancel(job_id: int):
    found = jobs.status(job_id, cluster=cluster_path())
    if not jobs.may_cancel(cluster(), found):
        raise errors.AccessDenied(
            f"user {user().name!r} may not cancel job {job_id}: only its submitter or an "
            "administrator may"
        )
    found = jobs.cancel(job_id, cluster=cluster_path())
    if wants_partial():
        return _job_page(found, True)
    return redirect(url_for("replays.job", job_id=job_id), 303)
