"""The topic page: partitions and their partitionlet chains, a message browser (seek by
offset or time, filter, show as text, JSON or hex, live tail, download) and a form to
produce a message.

URLs carry the full topic name without its leading slash (/topics/apps/sensors:car-17).
The browser form asks for the page itself with query arguments, so every view of the
messages has a URL to share and reload; htmx gets back only the messages part
(topics/_messages.html). Reading is web/messages.py's: every read goes through a
`Consumer` made on the user's cluster, which checks consume_perm.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, abort, request, stream_with_context

from engine import Producer, errors
from engine.client.producer import MAX_HEADERS
from engine.records import TopicInfo
from web import messages as msgs
from web.messages import BadInput, Budget, MessageReader, Selection
from web.pages import cluster, render, wants_partial

topics = Blueprint("topics", __name__)

# How long the produce form waits for the write (acks="all": fsynced).
PRODUCE_TIMEOUT_S = 10
PRODUCE_FIELDS = ("key", "value", "headers", "partition")


def _topic(name: str) -> TopicInfo:
    # unknown names raise UnknownTopic/UnknownStream (404), bad ones InvalidName (400)
    return cluster().topic("/" + name)


def _status(status: int) -> int:
    # htmx swaps only 2xx answers: a partial with an inline error still answers 200
    return 200 if wants_partial() else status


def _partitions(info: TopicInfo, selection: Selection) -> list[int]:
    if selection.partition is None:
        return [p.partition for p in info.partitions]
    return [selection.partition]


def _rows(records: list, fmt: str) -> list[msgs.MessageView]:
    return [msgs.view(r, fmt) for r in records]


@topics.context_processor
def _limits() -> dict[str, Any]:
    return {
        "default_limit": msgs.DEFAULT_LIMIT,
        "max_limit": msgs.MAX_LIMIT,
        "export_default": msgs.EXPORT_DEFAULT,
        "export_max": msgs.EXPORT_MAX,
        "describe": msgs.describe,
    }


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
    partitions = _partitions(info, selection)
    try:
        reader = MessageReader(cluster(), info, partitions)
    except errors.AccessDenied as exc:
        return ctx | {"denied": str(exc), "status": 403}
    with reader:
        try:
            cursor = msgs.parse_positions(args.get("cursor"), partitions, "cursor")
        except BadInput as exc:
            return ctx | {"form_errors": exc.errors, "status": 400}
        begins, ends = reader.bounds()
        match = selection.filter.compile()
        if selection.newest_first:
            highs = {p: min(cursor.get(p, ends[p]), ends[p]) for p in partitions}
            scan = reader.backward(highs, begins, selection.limit, match, Budget())
            after = ends  # the live tail shows what comes after the newest
        else:
            starts = reader.starts(selection, begins, ends)
            if cursor:
                starts = {
                    p: min(max(cursor.get(p, starts[p]), begins[p]), ends[p]) for p in partitions
                }
            else:
                ctx["notes"] = _seek_notes(selection, begins, ends)
            scan = reader.forward(starts, ends, selection.limit, match, Budget())
            after = scan.cursor  # the live tail goes on where the page stops
    return ctx | {
        "scan": scan,
        "rows": _rows(scan.records, selection.fmt),
        "after": msgs.format_positions(after),
        "cursor": msgs.format_positions(scan.cursor),
    }


def _seek_notes(selection: Selection, begins: dict[int, int], ends: dict[int, int]) -> list[str]:
    """Say so when an offset to seek to lies outside a partition's messages."""
    notes = []
    if selection.start == "offset" and selection.offset is not None:
        for p in sorted(ends):
            if selection.offset < begins[p]:
                notes.append(
                    f"Partition {p} starts at offset {begins[p]:,} (older messages have "
                    f"expired or been compacted away): showing from there."
                )
            elif selection.offset > ends[p]:
                notes.append(
                    f"Offset {selection.offset:,} is past the end of partition {p} (its log "
                    f"end offset is {ends[p]:,}): nothing there yet."
                )
    return notes


def _page_context(info: TopicInfo) -> dict[str, Any]:
    return {
        "topic": info,
        "produce": {"form": {}, "errors": {}, "result": None, "error": None},
    }


@topics.route("/topics/<path:name>")
def topic(name: str):
    info = _topic(name)
    browse = _browse(info, request.args)
    status = browse.pop("status")
    body = render("topics/topic.html", "topics/_messages.html", **_page_context(info), **browse)
    return body, _status(status)


@topics.route("/topics/<path:name>/more")
def more(name: str):
    """The next page of the current view, appended below it (htmx)."""
    info = _topic(name)
    browse = _browse(info, request.args)
    status = browse.pop("status")
    if not wants_partial():
        # without htmx the link leads to a page that starts at the cursor
        body = render("topics/topic.html", None, **_page_context(info), **browse)
        return body, status
    return render("topics/_more.html", None, topic=info, **browse), 200


@topics.route("/topics/<path:name>/tail")
def tail(name: str):
    """New messages after the `after` offsets, for the live tail (htmx polls it).

    Answers 204 (htmx swaps nothing) when nothing moved, else the rows to add and a
    poller that asks from the new offsets on. An error stops the tail with a message.
    """
    try:
        info = _topic(name)
        selection = msgs.parse_selection(request.args, info)
        partitions = _partitions(info, selection)
        after = msgs.parse_positions(request.args.get("after"), partitions, "after")
        with MessageReader(cluster(), info, partitions) as reader:
            begins, ends = reader.bounds()
            starts = {p: min(max(after.get(p, ends[p]), begins[p]), ends[p]) for p in partitions}
            scan = reader.forward(starts, ends, msgs.TAIL_MAX, selection.filter.compile(), Budget())
    except (BadInput, errors.PartitionletError) as exc:
        message = "; ".join(exc.errors.values()) if isinstance(exc, BadInput) else str(exc)
        return render("topics/_tail_stopped.html", None, message=message), 200
    if scan.cursor == starts:
        return Response(status=204)
    records = scan.records[::-1] if selection.newest_first else scan.records
    if records:
        info = _topic(name)  # the page's counts and offsets, as of now
    added = (msgs.whole(request.args.get("added") or "0") or 0) + len(records)
    return render(
        "topics/_tail.html",
        None,
        topic=info,
        selection=selection,
        after=msgs.format_positions(scan.cursor),
        added=added,
        tail_full=added >= msgs.TAIL_ROWS_MAX,
        new_rows=_rows(records, selection.fmt),
    )


# --- download ------------------------------------------------------------------------------


def _export_args(args: Any, info: TopicInfo) -> tuple[Selection, str, int, int | None, int | None]:
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
            until = msgs.parse_time(raw)
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
    """The selection as a JSON-lines or CSV file, streamed (format: docs/WEB.md)."""
    info = _topic(name)
    selection, kind, max_count, until, to_offset = _export_args(request.args, info)
    partitions = _partitions(info, selection)
    reader = MessageReader(cluster(), info, partitions)  # AccessDenied: a 403 page
    try:
        begins, ends = reader.bounds()
        if selection.newest_first:
            starts = {p: max(begins[p], ends[p] - max_count) for p in partitions}
        else:
            starts = reader.starts(selection, begins, ends)
        if until is not None:
            ends = reader.offsets_at(until + 1, ends)  # up to and including `until`
        if to_offset is not None:
            ends = {p: min(ends[p], to_offset + 1) for p in partitions}
        records = reader.export(starts, ends, max_count, selection.filter.compile())
        if kind == "csv":
            lines = msgs.csv_lines(records, formulas=request.args.get("formulas") == "keep")
        else:
            lines = msgs.jsonl_lines(records)
        response = Response(
            stream_with_context(lines),
            mimetype="text/csv" if kind == "csv" else "application/x-ndjson",
        )
    except BaseException:
        reader.close()
        raise
    response.call_on_close(reader.close)
    which = "all" if selection.partition is None else f"p{selection.partition}"
    filename = f"{info.stream[1:].replace('/', '_')}_{info.topic}_{which}.{kind}"
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    # an export holds what only this user may read: never kept by a browser or proxy cache
    response.headers["Cache-Control"] = "no-store"
    return response


# --- produce --------------------------------------------------------------------------------


def parse_headers(text: str) -> list[tuple[str, bytes]]:
    """`name: value` lines (blank lines skipped) as message headers; BadInput names the
    first line that is not one."""
    headers = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise BadInput(
                {"headers": f"line {number} ({line.strip()[:40]!r}) is not `name: value`"}
            )
        if len(headers) >= MAX_HEADERS:  # the engine's limit, said next to the field
            raise BadInput({"headers": f"a message may carry at most {MAX_HEADERS:,} headers"})
        headers.append((name.strip(), value.strip().encode()))
    return headers


def _produce(info: TopicInfo, form: Any) -> tuple[dict[str, Any], int]:
    """Send one message from the form; the produce part's context and a status."""
    values = {field: form.get(field, "") for field in PRODUCE_FIELDS}
    values["null_value"] = bool(form.get("null_value"))
    state: dict[str, Any] = {"form": values, "errors": {}, "result": None, "error": None}
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
    try:
        headers = parse_headers(values["headers"])
    except BadInput as exc:
        problems.update(exc.errors)
        headers = []
    if problems:
        return state | {"errors": problems}, 400
    # browsers send a textarea's line breaks as CRLF: store what the user typed, LF
    key = values["key"].replace("\r\n", "\n").encode() if values["key"] else None
    value = None if values["null_value"] else values["value"].replace("\r\n", "\n").encode()
    producer = Producer(cluster(), acks="all")
    try:
        future = producer.send(
            info.name, value=value, key=key, partition=partition, headers=headers or None
        )
        state["result"] = future.get(timeout=PRODUCE_TIMEOUT_S)
    except errors.MessageTooLarge as exc:
        return state | {"errors": {"value": str(exc)}}, 400
    except errors.InvalidPartition as exc:
        return state | {"errors": {"partition": str(exc)}}, 400
    except errors.PartitionletError as exc:
        from web.errors import status_of

        return state | {"error": f"{type(exc).__name__}: {exc}"}, status_of(exc)
    finally:
        producer.close(timeout=PRODUCE_TIMEOUT_S)
    return state, 200


@topics.route("/topics/<path:name>/produce", methods=["POST"])
def produce(name: str):
    info = _topic(name)
    produced, status = _produce(info, request.form)
    if wants_partial():
        return render("topics/_produce.html", None, topic=info, produce=produced), 200
    context = _page_context(info) | {"produce": produced}
    browse = _browse(info, {})
    browse.pop("status")
    return render("topics/topic.html", None, **context, **browse), status
