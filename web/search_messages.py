"""Searching a topic's messages with a query (docs/SEARCH.md): the search page, its
progress and its results as they come, and Cancel.

`/topics/<name>/search?query=...&partition=...&from=...&until=...&format=...` is the page:
bookmarkable, it starts the search (the engine's `engine.client.message_search`, run as the
logged-in user) and shows a progress part that htmx polls
(`/topics/<name>/search/<job>?shown=N`): each answer is the progress again plus the
matches found since the last, appended to the table out of band. `Cancel` posts to
`/topics/<name>/search/<job>/cancel`. A query that does not parse is shown next to its
field (400), never a 500.

Jobs are kept per user in the app (`SearchJobs`): a few each (starting one more ends the
oldest), and a bound on those running in all; each is bounded by the engine (rate,
messages scanned, matches kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Blueprint, current_app, request

from engine import errors
from engine.client import message_search
from engine.client.browse import OLDEST, BadQuery, Seek
from engine.records import TopicInfo
from web import messages as msgs
from web.pages import app_cluster, principal, render, user, wants_partial

message_search_pages = Blueprint("message_search", __name__)

EXTENSION = "message_searches"
# matches added to the page per poll (the rest come with the next polls)
ROWS_PER_POLL = 200
POLL_MS = 500
# a search's bounds (the engine's defaults): read when a search starts, so a test can
# make them small
MAX_RATE = message_search.MAX_RATE
MAX_MATCHES = message_search.MAX_MATCHES


def jobs() -> message_search.SearchJobs:
    """The app's searches, made on first use."""
    found = current_app.extensions.get(EXTENSION)
    if found is None:
        found = current_app.extensions.setdefault(EXTENSION, message_search.SearchJobs())
    return found


@dataclass(frozen=True)
class SearchForm:
    """The search form as typed (`text`) and what it asks for."""

    text: dict[str, str]
    partitions: tuple[int, ...] | None
    start: Seek
    end: Seek | None
    fmt: str

    def args(self) -> dict[str, str]:
        return {k: v for k, v in self.text.items() if v}


def parse_form(args: Any, info: TopicInfo) -> tuple[SearchForm, dict[str, str]]:
    """The form and a message per bad field (empty when all is well)."""
    text = {
        name: (args.get(name) or "").strip()
        for name in ("query", "partition", "from", "until", "format")
    }
    text["query"] = args.get("query") or ""  # as typed: spaces may matter in a string
    problems: dict[str, str] = {}
    partitions = None
    raw = text["partition"]
    if raw and raw != "all":
        number = msgs.whole(raw)
        count = len(info.partitions)
        if number is None or number >= count:
            problems["partition"] = (
                f"{raw!r} is not a partition of this topic: choose 0 to {count - 1} or all"
            )
        else:
            partitions = (number,)
    start: Seek = OLDEST
    end: Seek | None = None
    for name in ("from", "until"):
        if not text[name]:
            continue
        try:
            seek = Seek.parse(text[name])
        except errors.InvalidArgument as exc:
            problems[name] = str(exc)
            continue
        if name == "from":
            start = seek
        else:
            end = None if seek.kind == "newest" else seek
    fmt = text["format"] or "text"
    if fmt not in msgs.FORMATS:
        problems["format"] = f"show as one of {', '.join(msgs.FORMATS)}, not {fmt!r}"
    if text["query"].strip():
        try:
            message_search.compile_query(text["query"])
        except message_search.BadSearch as exc:
            problems["query"] = exc.fields["query"]
    return SearchForm(text, partitions, start, end, fmt), problems


@dataclass(frozen=True)
class _Shown:
    fmt: str  # what topics/_row.html asks of `selection`


def _rows(job: message_search.SearchJob, shown: int, fmt: str) -> list[msgs.MessageView]:
    records = job.results(shown, shown + ROWS_PER_POLL)
    decoder = msgs.decoder(job.topic)
    return [msgs.view(r, fmt, decoder, aborted=job.is_aborted(r)) for r in records]


def _progress(info: TopicInfo, job: message_search.SearchJob, shown: int, fmt: str) -> dict:
    progress = job.progress  # read before the rows: rows found meanwhile come next poll
    rows = _rows(job, shown, fmt)
    shown += len(rows)
    return {
        "topic": info,
        "job": job,
        "progress": progress,
        "rows": rows,
        "shown": shown,
        # poll while the job runs or rows wait to be added
        "polling": progress.running or shown < progress.kept,
        "poll_ms": POLL_MS,
        "fmt": fmt,
        "selection": _Shown(fmt),
    }


def _topic(name: str) -> TopicInfo:
    from web.pages import cluster

    return cluster().topic("/" + name)


@message_search_pages.route("/topics/<path:name>/search")
def page(name: str):
    info = _topic(name)
    form, problems = parse_form(request.args, info)
    context: dict[str, Any] = {
        "topic": info,
        "form": form,
        "form_errors": problems,
        "denied": None,
        "started": None,
    }
    status = 200
    if problems:
        status = 400
    elif form.text["query"].strip():
        try:
            job = jobs().start(
                user().name,
                app_cluster(),
                info.name,
                form.text["query"],
                partitions=form.partitions,
                start=form.start,
                end=form.end,
                principal=principal(),
                max_rate=MAX_RATE,
                max_matches=MAX_MATCHES,
            )
        except message_search.BadSearch as exc:
            context["form_errors"] = exc.fields
            status = 400
        except BadQuery as exc:
            context["form_errors"] = exc.fields
            status = 400
        except errors.AccessDenied as exc:
            context["denied"] = str(exc)
            status = 403
        else:
            context["started"] = _progress(info, job, 0, form.fmt)
    body = render("topics/search.html", "topics/_search.html", **context)
    return body, (200 if wants_partial() else status)


def _job(name: str, job_id: str) -> tuple[TopicInfo, message_search.SearchJob | None]:
    info = _topic(name)
    job = jobs().get(user().name, job_id)
    if job is not None and job.topic != info.name:
        job = None
    return info, job


@message_search_pages.route("/topics/<path:name>/search/<job_id>")
def progress(name: str, job_id: str):
    """The progress part again and the matches after the first `shown` (htmx polls it)."""
    info, job = _job(name, job_id)
    fmt = request.args.get("format") or "text"
    if fmt not in msgs.FORMATS:
        fmt = "text"
    if job is None:
        return render("topics/_search_gone.html", None, topic=info), 200
    shown = msgs.whole(request.args.get("shown") or "0") or 0
    return render("topics/_search_progress.html", None, **_progress(info, job, shown, fmt))


@message_search_pages.route("/topics/<path:name>/search/<job_id>/cancel", methods=["POST"])
def cancel(name: str, job_id: str):
    info, job = _job(name, job_id)
    if job is None:
        return render("topics/_search_gone.html", None, topic=info), 200
    job.cancel()
    job.wait(5)  # it stops within one chunk: show it stopped
    fmt = request.args.get("format") or "text"
    if fmt not in msgs.FORMATS:
        fmt = "text"
    shown = msgs.whole(request.args.get("shown") or "0") or 0
    return render("topics/_search_progress.html", None, **_progress(info, job, shown, fmt))
