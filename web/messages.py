"""A topic's messages as the web console asks for and shows them.

Reading, filtering, paging, the scan budget, cursors and exports are the engine's browse
service (engine.client.browse); this module holds what is the page's own:

- `parse_selection` turns the browser form (query arguments) into a `Selection`: the
  engine's `Query` (one grammar with the JSON API: `browse.parse_query`) plus how to show
  it, or raises `BadInput` with one message per field, so every mistake is shown next to
  its field.
- `describe` says what a page looked at and found, for its status line.
- `shown` renders a key, value or header as text, pretty JSON or a hex dump; always plain
  text for the templates to escape, never markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine import ConsumerRecord
from engine.client import browse
from engine.client.browse import DEFAULT_LIMIT, MAX_LIMIT, BadQuery, Page, Query
from engine.client.rendering import FORMATS, Shown, shown, visible
from engine.client.schemas import SchemaDecoder
from engine.records import LOG_APPEND_TIME, TopicInfo
from engine.times import iso_ms

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "BadInput", "MAX_WHOLE", "whole"]

# A live-tail tick shows at most this many new messages (the next tick shows the rest).
TAIL_MAX = 200
# The live tail stops after adding this many rows to a page (a browser table has limits).
TAIL_ROWS_MAX = 5000
# A page's scan budget (the engine's defaults): read when a request comes, so a test can
# make it small.
SCAN_MESSAGES = browse.SCAN_MESSAGES
SCAN_SECONDS = browse.SCAN_SECONDS
EXPORT_DEFAULT = 10_000
EXPORT_MAX = 1_000_000
# A filtered download counts its matches before it streams them; the count stops here
# (messages scanned, seconds), and the file is then marked partial.
EXPORT_SCAN_MESSAGES = 5_000_000
EXPORT_SCAN_SECONDS = 30.0
MAX_WHOLE = browse.MAX_OFFSET
whole = browse.whole


class BadInput(BadQuery):
    """Form input that cannot be used: `errors` maps each field to what is wrong."""

    @property
    def errors(self) -> dict[str, str]:
        return self.fields


@dataclass(frozen=True)
class Selection:
    """The browser's query: the engine's `request`, and how the page shows it."""

    request: Query
    fmt: str = "text"
    follow: bool = False
    text: dict[str, str] = field(default_factory=dict)  # the fields as typed, for the form

    @property
    def partition(self) -> int | None:  # None: every partition
        parts = self.request.partitions
        return None if parts is None else parts[0]

    @property
    def start(self) -> str:
        return self.request.seek.kind

    @property
    def offset(self) -> int | None:
        return self.request.seek.value if self.start == "offset" else None

    @property
    def time_ms(self) -> int | None:
        return self.request.seek.value if self.start == "time" else None

    @property
    def limit(self) -> int:
        return self.request.limit

    @property
    def filter(self) -> browse.Filter:
        return self.request.filter  # type: ignore[return-value]  # the web builds each Query with a browse.Filter

    @property
    def newest_first(self) -> bool:
        return not self.request.forward

    def query(self, **extra: Any) -> dict[str, str]:
        """Query arguments that ask for this selection again (plus `extra`)."""
        args: dict[str, str] = {
            "partition": "all" if self.partition is None else str(self.partition),
            "start": self.start,
            "limit": str(self.limit),
            "format": self.fmt,
        }
        if self.start == "offset" and self.offset is not None:
            args["offset"] = str(self.offset)
        if self.start == "time" and self.time_ms is not None:
            args["time"] = self.text.get("time") or str(self.time_ms)
        if self.request.direction is not None:
            args["direction"] = self.request.direction
        f = self.filter
        for name in ("key", "value", "header", "text"):
            if getattr(f, name):
                args[name] = getattr(f, name)
        if f.expression:
            args["filter"] = f.expression
        if f.ignore_case:
            args["icase"] = "1"
        if self.follow:
            args["follow"] = "1"
        for name, value in extra.items():
            if value is None:
                args.pop(name, None)
            else:
                args[name] = str(value)
        return args


def parse_selection(args: Mapping[str, str], topic: TopicInfo) -> Selection:
    """The `Selection` the query arguments ask for, or `BadInput` naming every bad field.

    The browsing fields are `browse.parse_query`'s (newest first unless an offset, a time
    or `start` says otherwise); `format` and `follow` are the page's.
    """
    errors: dict[str, str] = {}
    request = None
    try:
        request = browse.parse_query(
            args,
            topic,
            default_start="newest",
            budget=browse.Budget(SCAN_MESSAGES, SCAN_SECONDS),
        )
    except BadQuery as exc:
        errors.update(exc.fields)
    fmt = (args.get("format") or "").strip() or "text"
    if fmt not in FORMATS:
        errors["format"] = f"show as one of {', '.join(FORMATS)}, not {fmt!r}"
    if errors or request is None:
        raise BadInput(errors)
    return Selection(
        request,
        fmt,
        bool(args.get("follow")),
        {name: (args.get(name) or "").strip() for name in ("offset", "time")},
    )


def describe(scan: Page, selection: Selection) -> str:
    """What a page looked at and found, in a sentence or three, for its status line."""
    looked = scan.looked
    if not selection.filter:
        # without a filter, say which offsets the page shows
        looked = {}
        for r in scan.records:
            first, last = looked.get(r.partition, (r.offset, r.offset))
            looked[r.partition] = (min(first, r.offset), max(last, r.offset))
    spans = "; ".join(
        f"partition {p}: offsets {first:,}..{last:,}" for p, (first, last) in sorted(looked.items())
    )
    spans = f" ({spans})" if spans else ""
    found = len(scan.records)
    if selection.filter:
        text = (
            f"Scanned {scan.scanned:,} message{_s(scan.scanned)}{spans}, "
            f"{found:,} match{'' if found == 1 else 'es'}."
        )
    elif found:
        text = f"Showing {found:,} message{_s(found)}{spans}."
    else:
        where = "this partition" if selection.partition is not None else "this topic"
        if selection.start == "offset":
            return f"No messages from offset {selection.offset:,} on in {where}."
        if selection.start == "time":
            return f"No messages at or after {iso_ms(selection.time_ms or 0)} in {where}."
        return f"No messages in {where}."
    if scan.budget_exhausted:
        return text + " Stopped to stay fast: continue to search further."
    if not scan.more:
        return text + (" Reached the end." if scan.forward else " Reached the oldest message.")
    return text


def _s(count: int) -> str:
    return "" if count == 1 else "s"


# --- showing --------------------------------------------------------------------------------

# C0 controls (but tab and newline) and DEL as visible symbols (U+2400...), so a terminal
# escape or a NUL in a value shows as what it is instead of vanishing or breaking a line.


@dataclass(frozen=True)
class MessageView:
    """A record ready for the template."""

    partition: int
    offset: int
    timestamp: int
    timestamp_type: str  # "create" or "log-append"
    key: Shown
    value: Shown
    headers: list[tuple[str, Shown]]
    aborted: bool = False  # written by a transaction that was aborted


def decoder(topic: str | None = None) -> SchemaDecoder:
    """Decodes keys and values (of `topic`) in the Confluent wire format with the registry,
    as the request's user (one per page: it keeps the schemas it read)."""
    from web.pages import cluster

    return SchemaDecoder(cluster().schemas, topic=topic)


def view(
    record: ConsumerRecord,
    fmt: str,
    decoder: SchemaDecoder | None = None,
    *,
    aborted: bool = False,
) -> MessageView:
    return MessageView(
        record.partition,
        record.offset,
        record.timestamp,
        "log-append" if record.timestamp_type == LOG_APPEND_TIME else "create",
        shown(record.key, fmt, say_not_json=False, decoder=decoder),
        shown(record.value, fmt, decoder=decoder),
        [(visible(name), shown(v, fmt, say_not_json=False)) for name, v in record.headers or ()],
        aborted,
    )
