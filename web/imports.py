"""Importing messages into a topic from a file (the topic page's Messages tab, *Import
messages*): JSON lines or CSV in a download's own shape, read, checked and written by the
engine (engine.client.imports) as the logged-in user, so the stream's produce permission
decides.

`POST /topics/<name>/import` takes the file with `mode=dry` (the dry run: what would be
written where, or every refused line; nothing is written) or `mode=write` (the same check,
then, when the file is valid, the write starts in the background). An invalid file writes
nothing. The write's progress is `/topics/<name>/import/<job>`, which htmx polls until it
ends (a link reloads it without JavaScript). Each user runs one import at a time; the
file is at most the console's request limit (`plet web --max-request-bytes`; `plet topic
import` reads files of any size).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, request

from engine import errors
from engine.client import imports as engine_imports
from engine.records import TopicInfo
from web.pages import cluster, render, user, wants_partial

imports = Blueprint("imports", __name__)

EXTENSION = "imports"
POLL_MS = 1000
# the dry run shows this many of the messages it would write
PREVIEW = 20


@imports.app_template_filter("import_preview")
def import_preview(data: bytes | None, chars: int = 80) -> str:
    """A key, value or header value of the dry run: text (invalid UTF-8 as U+FFFD), cut."""
    if data is None:
        return "null"
    text = data[: chars * 4].decode("utf-8", errors="replace")
    return text if len(text) <= chars else text[: chars - 1] + "…"


def jobs() -> engine_imports.ImportJobs:
    """The app's imports, made on first use."""
    found = current_app.extensions.get(EXTENSION)
    if found is None:
        found = current_app.extensions.setdefault(EXTENSION, engine_imports.ImportJobs())
    return found


def _topic(name: str) -> TopicInfo:
    return cluster().topic("/" + name)


def _form() -> dict[str, Any]:
    upload = request.files.get("file")
    return {
        "filename": upload.filename if upload is not None else "",
        "format": request.form.get("format") or "auto",
        "partitions": request.form.get("partitions") or "keep",
        "formulas": request.form.get("formulas") == "keep",
        "mode": request.form.get("mode") or "dry",
    }


def _answer(info: TopicInfo, status: int, **imported: Any) -> tuple[str, int]:
    """The import part (htmx), or the page of it, with `imported`'s dry run, job or error."""
    context = {"topic": info, "imported": imported, "poll_ms": POLL_MS, "preview": PREVIEW}
    body = render("topics/import.html", "topics/_import_result.html", **context)
    return body, (200 if wants_partial() else status)


@imports.route("/topics/<path:name>/import", methods=["POST"])
def start(name: str):
    info = _topic(name)
    form = _form()
    upload = request.files.get("file")
    if upload is None or not upload.filename:
        return _answer(info, 400, form=form, error="Choose a file to import.")
    fmt = form["format"]
    if fmt == "auto":
        fmt = engine_imports.format_of(upload.filename) or ""
        if not fmt:
            return _answer(
                info,
                400,
                form=form,
                error=f"{upload.filename!r} is not named .jsonl or .csv: choose its format.",
            )
    try:
        parsed = engine_imports.parse(upload.stream, fmt, formulas=form["formulas"])
        plan = engine_imports.plan(
            cluster(), info.name, parsed, keep_partitions=form["partitions"] == "keep"
        )
    except errors.AccessDenied as exc:
        return _answer(info, 403, form=form, error=f"Access denied: {exc}")
    except errors.InvalidArgument as exc:
        return _answer(info, 400, form=form, error=str(exc))
    if form["mode"] != "write" or not plan.ok:
        return _answer(info, 200 if plan.ok else 400, form=form, plan=plan)
    try:
        job = jobs().start(user().name, cluster(), plan)
    except errors.TryLater as exc:
        return _answer(info, 429, form=form, plan=plan, error=str(exc))
    return _answer(info, 202, form=form, job=job)


@imports.route("/topics/<path:name>/import/<job_id>")
def progress(name: str, job_id: str):
    info = _topic(name)
    job = jobs().get(user().name, job_id)
    if job is None or job.topic != info.name:
        return _answer(info, 404, error="No such import of yours (imports are kept a while).")
    return _answer(info, 200, job=job)
