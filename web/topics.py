"""The topic page: its facts, then tabs (`TABS`): the message browser (seek by offset or
time, filter, show as text, JSON or hex, live tail, download, and a form to produce a
message a click away), the partitions and their partitionlet chains, the consumer groups
reading it, its policies (configs), its schemas and its charts.

The page opens on its messages. A tab is a link (`?tab=partitions`), so a reload or Back
shows the same tab and the page works without JavaScript; htmx loads a tab's panel in place
and pushes its URL.

URLs carry the full topic name without its leading slash (/topics/apps/sensors:car-17).
The browser form asks for the page itself with query arguments, so every view of the
messages has a URL to share and reload; htmx gets back only the messages part
(topics/_messages.html). Reading is the engine's browse service: every read goes through a
`Consumer` made on the user's cluster, which checks consume_perm.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flask import (
    Blueprint,
    Response,
    abort,
    flash,
    redirect,
    render_template,
    request,
    stream_with_context,
    url_for,
)
from htmx_flask import request as htmx_request

from engine import errors, times
from engine import policies as policy_table
from engine.client import browse
from engine.client.browse import FORWARD, NEWEST, BadQuery, Browser, Marker, TransactionMarks
from engine.client.producer import produce_one
from engine.client.schemas import RegisteredSchema
from engine.client.schemas import encode as encode_with_schema
from engine.client.transactions import Transactions
from engine.headers import parse_headers
from engine.records import TopicInfo
from web import messages as msgs
from web.allowed import may
from web.messages import BadInput
from web.pages import cluster, render, wants_partial
from web.streams import TOPIC_POLICY_FIELDS, _override_error, _override_values, _policy_form

topics = Blueprint("topics", __name__)

PRODUCE_FIELDS = ("key", "value", "headers", "partition")

# The page's tabs, (name in the URL, label); the first is the page's own.
TABS = (
    ("messages", "Messages"),
    ("partitions", "Partitions"),
    ("consumers", "Consumers"),
    ("configs", "Configs"),
    ("schema", "Schema"),
    ("charts", "Charts"),
)
TAB_NAMES = tuple(name for name, _label in TABS)


def _topic(name: str) -> TopicInfo:
    # unknown names raise UnknownTopic/UnknownStream (404), bad ones InvalidName (400)
    return cluster().topic("/" + name)


def _status(status: int) -> int:
    # htmx swaps only 2xx answers: a partial with an inline error still answers 200
    return 200 if wants_partial() else status


def _rows(
    records: list, fmt: str, marks: TransactionMarks | None = None, forward: bool = True
) -> list[msgs.MessageView | Marker]:
    """The rows of the message table: a view of each record (marked when an aborted
    transaction wrote it) and, with `marks`, the transaction markers among them."""
    # values in the Confluent wire format show decoded
    decoder = msgs.decoder(records[0].topic if records else None)
    if marks is None:
        return [msgs.view(r, fmt, decoder) for r in records]
    return [
        r if isinstance(r, Marker) else msgs.view(r, fmt, decoder, aborted=marks.is_aborted(r))
        for r in marks.rows(records, forward)
    ]


@topics.context_processor
def _limits() -> dict[str, Any]:
    return {
        "default_limit": msgs.DEFAULT_LIMIT,
        "max_limit": msgs.MAX_LIMIT,
        "export_default": msgs.EXPORT_DEFAULT,
        "export_max": msgs.EXPORT_MAX,
        "describe": msgs.describe,
        "stable_offsets": _stable_offsets,
    }


def _stable_offsets(info: TopicInfo) -> dict[int, int]:
    """Each partition's last stable offset, for the partition table."""
    return Transactions(cluster()).stable_offsets(info)


# --- the page and its message browser -----------------------------------------------------


def _browse(info: TopicInfo, args: Any) -> dict[str, Any]:
    """What the messages part shows for the query `args`, and its HTTP status."""
    ctx: dict[str, Any] = {
        "selection": None,
        "form_errors": {},
        "denied": None,
        "scan": None,
        "rows": [],
        "notes": [],
        "after": "",
        "status": 200,
    }
    try:
        selection = msgs.parse_selection(args, info)
    except BadInput as exc:
        return ctx | {"form_errors": exc.errors, "status": 400}
    ctx["selection"] = selection
    try:
        browser = Browser(cluster(), info, selection.request.partitions)
    except errors.AccessDenied as exc:
        return ctx | {"denied": str(exc), "status": 403}
    with browser:
        try:
            page = browser.page(selection.request)
        except BadQuery as exc:  # a cursor that is not one of this view's
            return ctx | {"form_errors": exc.fields, "status": 400}
        marks = browser.marks(page.records)
    return ctx | {
        "scan": page,
        "rows": _rows(page.records, selection.fmt, marks, page.forward),
        "notes": list(page.notes),
        "after": page.tail,  # the live tail goes on after the newest message seen
        "cursor": page.cursor,
    }


def _value_schema(info: TopicInfo) -> RegisteredSchema | None:
    """The latest schema of the topic's values (docs/SCHEMAS.md), which the produce form
    offers to encode with; None when there is none or the user may not read it."""
    try:
        return cluster().schemas.for_topic(info.name)
    except errors.PartitionletError:
        return None


def _tab(args: Any) -> str:
    """The tab the URL names (`?tab=`); the messages without one. An unknown tab is a 404."""
    tab = args.get("tab") or TAB_NAMES[0]
    if tab not in TAB_NAMES:
        abort(404, description=f"The topic page has no tab {tab!r}: it has {', '.join(TAB_NAMES)}.")
    return tab


def _consumers(info: TopicInfo) -> list[dict[str, Any]]:
    """The consumer groups with offsets in (or members assigned to) the topic, those the
    user may describe, each with its committed offsets and lag on this topic alone."""
    found = []
    for group in cluster().groups():
        partitions = [p for p in group.partitions if p.topic == info.name]
        members = [m for m in group.members if any(tp.topic == info.name for tp in m.assignment)]
        if partitions or members:
            found.append(
                {
                    "group": group,
                    "partitions": partitions,
                    "members": len(members),
                    "lag": sum(p.lag for p in partitions),
                }
            )
    return found


def _page_context(info: TopicInfo, tab: str = "messages", **parts: Any) -> dict[str, Any]:
    """What topic.html shows on `tab`: only that tab's panel is read and rendered; `parts`
    replace a panel's context (a form sent with its errors)."""
    context: dict[str, Any] = {"topic": info, "tabs": TABS, "tab": tab}
    if tab == "messages":
        context["produce"] = {
            "form": {},
            "errors": {},
            "result": None,
            "error": None,
            "schema": _value_schema(info),
        }
        context["produce_open"] = False
    elif tab == "configs":
        context.update(_policies_context(info))
    elif tab == "consumers":
        context["consumers"] = _consumers(info)
    return context | parts


def _tabs_partial() -> bool:
    """Whether htmx asked for the tabs and their panel (a tab's link), not the messages."""
    return wants_partial() and htmx_request.htmx.target == "topic-tabs"


@topics.route("/topics/<path:name>")
def topic(name: str):
    info = _topic(name)
    tab = _tab(request.args)
    context = _page_context(info, tab)
    status = 200
    if tab == "messages":
        browse_ctx = _browse(info, request.args)
        status = browse_ctx.pop("status")
        context.update(browse_ctx)
    if _tabs_partial():
        return render_template("topics/_tabs.html", **context), 200
    body = render("topics/topic.html", "topics/_messages.html", **context)
    return body, _status(status)


@topics.route("/topics/<path:name>/more")
def more(name: str):
    """The next page of the current view, appended below it (htmx)."""
    info = _topic(name)
    browse_ctx = _browse(info, request.args)
    status = browse_ctx.pop("status")
    if not wants_partial():
        # without htmx the link leads to a page that starts at the cursor
        body = render("topics/topic.html", None, **_page_context(info) | browse_ctx)
        return body, status
    return render("topics/_more.html", None, topic=info, **browse_ctx), 200


@topics.route("/topics/<path:name>/tail")
def tail(name: str):
    """New messages after the `after` cursor (a page's tail), for the live tail (htmx
    polls it).

    Answers 204 (htmx swaps nothing) when nothing moved, else the rows to add and a
    poller that asks from the new cursor on. An error stops the tail with a message.
    """
    after = request.args.get("after") or None
    try:
        info = _topic(name)
        selection = msgs.parse_selection(request.args, info)
        query = replace(
            selection.request, seek=NEWEST, direction=FORWARD, cursor=after, limit=msgs.TAIL_MAX
        )
        with Browser(cluster(), info, query.partitions) as browser:
            page = browser.page(query)
            marks = browser.marks(page.records, since=after)
    except (BadQuery, errors.PartitionletError) as exc:
        message = "; ".join(exc.fields.values()) if isinstance(exc, BadQuery) else str(exc)
        return render("topics/_tail_stopped.html", None, message=message), 200
    if page.cursor == after or (after is None and not page.records):
        return Response(status=204)
    records = page.records[::-1] if selection.newest_first else page.records
    if records:
        info = _topic(name)  # the page's counts and offsets, as of now
    added = (msgs.whole(request.args.get("added") or "0") or 0) + len(records)
    return render(
        "topics/_tail.html",
        None,
        topic=info,
        selection=selection,
        after=page.cursor,
        added=added,
        tail_full=added >= msgs.TAIL_ROWS_MAX,
        new_rows=_rows(records, selection.fmt, marks, not selection.newest_first),
    )


# --- download ------------------------------------------------------------------------------


def _export_args(
    args: Any, info: TopicInfo
) -> tuple[msgs.Selection, str, int, int | None, int | None]:
    """(selection, "jsonl" or "csv", max messages, until ms, to offset) of a download; a
    400 page naming every bad argument otherwise."""
    problems: dict[str, str] = {}
    try:
        selection = msgs.parse_selection(args, info)
    except BadInput as exc:
        problems.update(exc.errors)
        selection = None
    kind = args.get("file") or "jsonl"
    if kind not in ("jsonl", "csv"):
        problems["file"] = f"download as jsonl or csv, not {kind!r}"
    raw = (args.get("max") or "").strip()
    max_count = msgs.EXPORT_DEFAULT
    if raw:
        number = msgs.whole(raw)
        if number is None or not 1 <= number <= msgs.EXPORT_MAX:
            problems["max"] = f"download 1 to {msgs.EXPORT_MAX:,} messages, not {raw!r}"
        else:
            max_count = number
    until = None
    raw = (args.get("until") or "").strip()
    if raw:
        try:
            until = times.parse_time(raw)
        except ValueError as exc:
            problems["until"] = str(exc)
    to_offset = None
    raw = (args.get("to_offset") or "").strip()
    if raw:
        to_offset = msgs.whole(raw)
        if to_offset is None:
            problems["to_offset"] = f"an offset is a whole number from 0, not {raw!r}"
    if problems:
        abort(
            400,
            description="Cannot download: "
            + "; ".join(f"{field}: {message}" for field, message in problems.items()),
        )
    assert selection is not None
    return selection, kind, max_count, until, to_offset


@topics.route("/topics/<path:name>/download")
def download(name: str):
    """The selection as a JSON-lines or CSV file, streamed (format: docs/API.md,
    "Records")."""
    info = _topic(name)
    selection, kind, max_count, until, to_offset = _export_args(request.args, info)
    # "this selection" from its start: a page's cursor is not part of a download
    query = replace(selection.request, cursor=None)
    browser = Browser(cluster(), info, query.partitions)  # AccessDenied: a 403 page
    try:
        budget = browse.Budget(msgs.EXPORT_SCAN_MESSAGES, msgs.EXPORT_SCAN_SECONDS)
        plan = browser.export_plan(
            query, max_count, until_ms=until, to_offset=to_offset, budget=budget
        )
        records = browser.export(query, max_count, plan=plan)
        if kind == "csv":
            lines = browse.csv_lines(records, formulas=request.args.get("formulas") == "keep")
        else:
            lines = browse.jsonl_lines(records)
        response = Response(
            stream_with_context(lines),
            mimetype="text/csv" if kind == "csv" else "application/x-ndjson",
        )
    except BaseException:
        browser.close()
        raise
    response.call_on_close(browser.close)
    which = "all" if selection.partition is None else f"p{selection.partition}"
    partial = "_partial" if plan.partial else ""
    filename = f"{info.stream[1:].replace('/', '_')}_{info.topic}_{which}{partial}.{kind}"
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    if plan.partial:  # the count of matches stopped at its budget: fewer than could be
        response.headers["X-Partitionlet-Partial"] = (
            f"the search for matches stopped after {plan.scanned:,} messages "
            f"({msgs.EXPORT_SCAN_SECONDS:g} s at most): the file holds those it found"
        )
    # an export holds what only this user may read: never kept by a browser or proxy cache
    response.headers["Cache-Control"] = "no-store"
    return response


# --- produce --------------------------------------------------------------------------------


def _produce(info: TopicInfo, form: Any) -> tuple[dict[str, Any], int]:
    """Send one message from the form; the produce part's context and a status."""
    values = {field: form.get(field, "") for field in PRODUCE_FIELDS}
    values["null_value"] = bool(form.get("null_value"))
    values["encode"] = bool(form.get("encode"))
    schema = _value_schema(info)
    state: dict[str, Any] = {
        "form": values,
        "errors": {},
        "result": None,
        "error": None,
        "schema": schema,
    }
    problems: dict[str, str] = {}
    partition = None
    raw = values["partition"].strip()
    if raw:
        count = len(info.partitions)
        number = msgs.whole(raw)
        if number is None or number >= count:
            problems["partition"] = (
                f"{raw!r} is not a partition of this topic: leave it empty or give 0 to {count - 1}"
            )
        else:
            partition = number
    try:  # `name=value` lines: the engine's one header syntax
        headers = parse_headers(values["headers"])
    except errors.InvalidArgument as exc:
        problems["headers"] = str(exc)
        headers = []
    if problems:
        return state | {"errors": problems}, 400
    # browsers send a textarea's line breaks as CRLF: store what the user typed, LF
    key = values["key"].replace("\r\n", "\n").encode() if values["key"] else None
    value = None if values["null_value"] else values["value"].replace("\r\n", "\n").encode()
    if value is not None and values["encode"]:
        # JSON in the form, the Confluent wire format with the topic's schema in the message
        if schema is None:
            return state | {"errors": {"value": "this topic's values have no schema"}}, 400
        try:
            value = encode_with_schema(cluster().schemas, schema, values["value"])
        except errors.InvalidArgument as exc:
            return state | {"errors": {"value": f"Not valid for the schema: {exc}"}}, 400
    try:
        state["result"] = produce_one(
            cluster(), info.name, value=value, key=key, partition=partition, headers=headers
        )
    except errors.MessageTooLarge as exc:
        return state | {"errors": {"value": str(exc)}}, 400
    except errors.InvalidPartition as exc:
        return state | {"errors": {"partition": str(exc)}}, 400
    except errors.PartitionletError as exc:
        from web.errors import status_of

        return state | {"error": f"{type(exc).__name__}: {exc}"}, status_of(exc)
    return state, 200


@topics.route("/topics/<path:name>/produce", methods=["POST"])
def produce(name: str):
    info = _topic(name)
    produced, status = _produce(info, request.form)
    if wants_partial():
        return render("topics/_produce.html", None, topic=info, produce=produced), 200
    context = _page_context(info, produce=produced, produce_open=True)
    browse_ctx = _browse(info, {})
    browse_ctx.pop("status")
    return render("topics/topic.html", None, **context | browse_ctx), status


# --- policies: the topic's effective values, where each comes from, its overrides --------


def _policies_context(
    info: TopicInfo,
    values: dict[str, str] | None = None,
    overridden: set[str] | None = None,
    found: dict[str, str] | None = None,
    saved: bool = False,
) -> dict[str, Any]:
    """The Policies part: each policy a topic may override with its effective value and
    source, and the form of its overrides (as sent, when `found` has errors)."""
    stream = cluster().stream(info.stream)
    may_edit = may("edit_topic", info.stream)
    form = {k: v for k, v in _policy_form(info, values).items() if k in policy_table.TOPIC_POLICIES}
    return {
        "policy_fields": TOPIC_POLICY_FIELDS,
        "policy_sources": policy_table.sources(stream.policies, info.overrides),
        "policy_form": form,
        "policy_overridden": set(info.overrides) if overridden is None else overridden,
        "policy_errors": found or {},
        "policy_saved": saved,
        "may_edit_policies": bool(may_edit),
        "edit_policies_refused": may_edit.reason,
        "topic_perm": stream.policies.get("topic_perm"),
    }


@topics.route("/topics/<path:name>/policies", methods=["POST"])
def edit_policies(name: str):
    """Set the overrides ticked in the form (`override`, with each one's value) and remove
    the others; each value is checked as a stream's policy is, every error at once."""
    info = _topic(name)  # 404 before anything else
    wanted, values, found = _override_values(request.form)
    overridden = set(wanted)
    denied = False
    if not found:
        changes: dict[str, Any] = {p.name: None for p in TOPIC_POLICY_FIELDS}
        changes.update(wanted)
        try:
            info = cluster().edit_topic(info.name, **changes)
        except errors.InvalidPolicy as exc:
            found[_override_error(exc, wanted, "form")] = str(exc)
        except errors.AccessDenied as exc:
            found["form"] = str(exc)
            denied = True
    context = _policies_context(
        info,
        values if found else None,
        overridden if found else None,
        found,
        saved=not found,
    )
    if wants_partial():
        return render("topics/_policies.html", None, topic=info, **context)
    if not found:
        flash(f"Saved the policies of {info.name}.")
        return redirect(
            url_for("topics.topic", name=info.name.lstrip("/"), tab="configs"), code=303
        )
    page = _page_context(info, "configs", **context)
    return render("topics/topic.html", None, **page), (403 if denied else 400)
