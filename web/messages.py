"""A topic's messages as the web console reads, filters, shows and exports them.

- `parse_selection` turns the browser form (query arguments) into a `Selection`, or raises
  `BadInput` with one message per field, so every mistake is shown next to its field.
- `MessageReader` reads with one engine `Consumer` made on the logged-in user's cluster
  (no group: assign, seek, poll), so the engine checks the consume permission when the
  partitions are assigned, hides expired messages and counts the reads as heat.
  Scans are bounded by a `Budget` (messages and time): a filter that matches nothing in a
  big topic answers quickly with where it stopped, and the page offers to continue.
- `shown` renders a key, value or header as text, pretty JSON or a hex dump; always plain
  text for the templates to escape, never markup.
- `jsonl_lines` and `csv_lines` stream an export (format in docs/WEB.md, "Topics").
"""

from __future__ import annotations

import base64
import csv
import heapq
import io
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from engine import Consumer, ConsumerRecord, TopicPartition, times
from engine.records import LOG_APPEND_TIME, TopicInfo

FORMATS = ("text", "json", "hex")
STARTS = ("newest", "oldest", "offset", "time")
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
# A page's scan stops after this many messages or this much time, whichever comes first,
# and reports how far it got: search stays fast and never hangs on a big topic.
SCAN_MESSAGES = 200_000
SCAN_SECONDS = 0.2
# Messages read per poll while scanning with a filter.
SCAN_CHUNK = 10_000
# A live-tail tick shows at most this many new messages (the next tick shows the rest).
TAIL_MAX = 200
# The live tail stops after adding this many rows to a page (a browser table has limits).
TAIL_ROWS_MAX = 5000
EXPORT_DEFAULT = 10_000
EXPORT_MAX = 1_000_000
# What a page shows of one key, value or header at most (the export has all of it).
SHOW_BYTES = 16 * 1024
HEX_BYTES = 4 * 1024
PREVIEW_CHARS = 120

Match = Callable[[ConsumerRecord], bool]


class BadInput(ValueError):
    """Form input that cannot be used: `errors` maps each field to what is wrong."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = dict(errors)


# Offsets and times are SQLite integers: nothing above this is a position anyone can seek to.
MAX_WHOLE = 2**63 - 1


def whole(raw: str) -> int | None:
    """`raw` as a whole number from 0 to MAX_WHOLE, or None (ASCII digits only: `"²"`
    passes str.isdigit() but is no number)."""
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        return None
    number = int(raw)
    return number if number <= MAX_WHOLE else None


# --- what the user asked for ------------------------------------------------------------


@dataclass(frozen=True)
class Filter:
    """Substrings the key, the value and a header (`name: value`) must each contain."""

    key: str = ""
    value: str = ""
    header: str = ""
    ignore_case: bool = False

    def __bool__(self) -> bool:
        return bool(self.key or self.value or self.header)

    def compile(self) -> Match | None:
        """A test for records, or None when the filter lets everything through."""
        if not self:
            return None
        key = _contains(self.key, self.ignore_case) if self.key else None
        value = _contains(self.value, self.ignore_case) if self.value else None
        header = _contains(self.header, self.ignore_case) if self.header else None

        def match(r: ConsumerRecord) -> bool:
            if key is not None and not key(r.key):
                return False
            if value is not None and not value(r.value):
                return False
            if header is not None:
                return any(header(_header_bytes(n, v)) for n, v in r.headers or ())
            return True

        return match


def _header_bytes(name: str, value: bytes | None) -> bytes:
    return name.encode() + b": " + (value or b"")


def _contains(needle: str, ignore_case: bool) -> Callable[[Any], bool]:
    if not ignore_case:
        raw = needle.encode()
        return lambda data: data is not None and raw in data
    if needle.isascii():
        # bytes.lower() folds ASCII only, which is all an ASCII needle can match
        low = needle.lower().encode()
        return lambda data: data is not None and low in data.lower()
    folded = needle.casefold()
    return lambda data: (
        data is not None and folded in bytes(data).decode("utf-8", "replace").casefold()
    )


@dataclass(frozen=True)
class Selection:
    """The browser's query: which partitions, where to start, how many, what to match."""

    partition: int | None  # None: every partition
    start: str  # one of STARTS
    offset: int | None = None
    time_ms: int | None = None
    limit: int = DEFAULT_LIMIT
    filter: Filter = field(default_factory=Filter)
    fmt: str = "text"
    follow: bool = False
    text: dict[str, str] = field(default_factory=dict)  # the fields as typed, for the form

    @property
    def newest_first(self) -> bool:
        return self.start == "newest"

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
        f = self.filter
        for name, value in (("key", f.key), ("value", f.value), ("header", f.header)):
            if value:
                args[name] = value
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

    Empty fields count as not given. A given offset (else time) says where to start;
    without either, `start` says newest (the default) or oldest.
    """
    errors: dict[str, str] = {}

    def text(name: str) -> str:
        return (args.get(name) or "").strip()

    partition: int | None = None
    raw = text("partition")
    if raw and raw != "all":
        count = len(topic.partitions)
        number = whole(raw)
        if number is None or number >= count:
            errors["partition"] = (
                f"{raw!r} is not a partition of this topic: choose 0 to {count - 1} or all"
            )
        else:
            partition = number

    offset = None
    raw = text("offset")
    if raw:
        offset = whole(raw)
        if offset is None:
            errors["offset"] = f"an offset is a whole number from 0, not {raw!r}"

    time_ms = None
    raw = text("time")
    if raw:
        try:
            time_ms = parse_time(raw)
        except ValueError as exc:
            errors["time"] = str(exc)

    # An offset or a time typed in the form says where to start: newest and oldest are
    # what the page does when neither is given.
    start = text("start") or "newest"
    if start in ("newest", "oldest"):
        start = "offset" if offset is not None else "time" if time_ms is not None else start
    if start not in STARTS:
        errors["start"] = f"start at one of {', '.join(STARTS)}, not {start!r}"
    elif start == "offset" and offset is None and "offset" not in errors:
        errors["offset"] = "give the offset to start at"
    elif start == "time" and time_ms is None and "time" not in errors:
        errors["time"] = "give the time to start at"

    limit = DEFAULT_LIMIT
    raw = text("limit")
    if raw:
        number = whole(raw)
        if number is None or not 1 <= number <= MAX_LIMIT:
            errors["limit"] = f"show 1 to {MAX_LIMIT} messages a page, not {raw!r}"
        else:
            limit = number

    fmt = text("format") or "text"
    if fmt not in FORMATS:
        errors["format"] = f"show as one of {', '.join(FORMATS)}, not {fmt!r}"

    if errors:
        raise BadInput(errors)
    return Selection(
        partition=partition,
        start=start,
        offset=offset,
        time_ms=time_ms,
        limit=limit,
        # a filter is matched as typed: spaces may be what someone looks for
        filter=Filter(
            key=args.get("key") or "",
            value=args.get("value") or "",
            header=args.get("header") or "",
            ignore_case=bool(args.get("icase")),
        ),
        fmt=fmt,
        follow=bool(args.get("follow")),
        text={name: text(name) for name in ("offset", "time")},
    )


def parse_time(text: str) -> int:
    """Epoch milliseconds of a time typed in a form (engine.times: ISO 8601, UTC when it
    has no zone, as the form of a datetime-local input sends it, or epoch milliseconds);
    InvalidArgument, a ValueError, when it is not one."""
    return times.parse_time(text)


def parse_positions(raw: str | None, partitions: Iterable[int], what: str) -> dict[int, int]:
    """`{partition: offset}` from "0:12,1:40" (a cursor the page itself wrote)."""
    wanted = set(partitions)
    positions: dict[int, int] = {}
    for part in (raw or "").split(","):
        if not part.strip():
            continue
        p, sep, o = part.strip().partition(":")
        partition, offset = whole(p), whole(o)
        if not sep or partition is None or offset is None:
            raise BadInput({what: f"{raw!r} is not a list of partition:offset pairs"})
        if partition not in wanted:
            raise BadInput({what: f"partition {p} is not one of those selected"})
        positions[partition] = offset
    return positions


def format_positions(positions: Mapping[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(positions.items()))


# --- reading ------------------------------------------------------------------------------


class Budget:
    """How much one request may scan: messages and wall time."""

    def __init__(self, messages: int | None = None, seconds: float | None = None) -> None:
        self.left = SCAN_MESSAGES if messages is None else messages
        self.deadline = time.monotonic() + (SCAN_SECONDS if seconds is None else seconds)

    def spend(self, messages: int) -> None:
        self.left -= messages

    @property
    def exhausted(self) -> bool:
        return self.left <= 0 or time.monotonic() >= self.deadline


@dataclass
class Scan:
    """One page of a scan: the records to show (in display order), where the next page
    starts in each partition (`cursor`), and how far the scan looked."""

    records: list[ConsumerRecord]
    cursor: dict[int, int]
    limits: dict[int, int]  # forward: the end offsets scanned up to; backward: the starts
    forward: bool
    scanned: int = 0
    looked: dict[int, tuple[int, int]] = field(default_factory=dict)  # first, last offset
    stopped: bool = False  # the budget ran out before the page was full

    @property
    def more(self) -> bool:
        """Whether a next page may hold something (in the scan's direction)."""
        if self.forward:
            return any(self.cursor[p] < self.limits[p] for p in self.cursor)
        return any(self.cursor[p] > self.limits[p] for p in self.cursor)


def describe(scan: Scan, selection: Selection) -> str:
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
            return f"No messages at or after {_iso(selection.time_ms or 0)} in {where}."
        return f"No messages in {where}."
    if scan.stopped:
        return text + " Stopped to stay fast: continue to search further."
    if not scan.more:
        return text + (
            " Reached the oldest message." if selection.newest_first else " Reached the end."
        )
    return text


def _s(count: int) -> str:
    return "" if count == 1 else "s"


class MessageReader:
    """Reads some partitions of one topic for one request; close it (or use `with`).

    Making it checks the consume permission (the engine's `Consumer.assign` does) and
    raises `errors.AccessDenied` when the cluster's principal may not read.
    """

    def __init__(self, cluster: Any, topic: TopicInfo, partitions: Iterable[int]) -> None:
        self.topic = topic.name
        self.partitions = sorted(partitions)
        self._tps = {p: TopicPartition(topic.name, p) for p in self.partitions}
        self._consumer = Consumer(cluster, enable_auto_commit=False)
        try:
            self._consumer.assign(list(self._tps.values()))
            # Read one partition at a time: poll() would otherwise mix them round-robin.
            self._consumer.pause(*self._tps.values())
        except BaseException:
            self._consumer.close()
            raise
        self._reading: int | None = None

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> MessageReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- offsets --------------------------------------------------------------------------

    def bounds(self) -> tuple[dict[int, int], dict[int, int]]:
        """(log start offsets, log end offsets) of the partitions."""
        tps = list(self._tps.values())
        begins = self._consumer.beginning_offsets(tps)
        ends = self._consumer.end_offsets(tps)
        return (
            {tp.partition: o for tp, o in begins.items()},
            {tp.partition: o for tp, o in ends.items()},
        )

    def starts(
        self, selection: Selection, begins: Mapping[int, int], ends: Mapping[int, int]
    ) -> dict[int, int]:
        """Where a forward read of `selection` starts in each partition (the end, for
        "newest")."""
        if selection.start == "oldest":
            return dict(begins)
        if selection.start == "offset":
            assert selection.offset is not None
            return {p: min(max(selection.offset, begins[p]), ends[p]) for p in ends}
        if selection.start == "time":
            assert selection.time_ms is not None
            return self.offsets_at(selection.time_ms, ends)
        return dict(ends)

    def offsets_at(self, time_ms: int, ends: Mapping[int, int]) -> dict[int, int]:
        """The first offset at or after `time_ms` in each partition (the end if none)."""
        found = self._consumer.offsets_for_times({tp: time_ms for tp in self._tps.values()})
        return {
            tp.partition: ends[tp.partition] if f is None else f.offset for tp, f in found.items()
        }

    # --- reading --------------------------------------------------------------------------

    def _read(self, p: int, position: int, end: int, n: int) -> tuple[list[ConsumerRecord], int]:
        """Up to `n` records of partition `p` at offsets in [position, end), and where the
        next read starts. No records means none are left below `end`."""
        tp = self._tps[p]
        consumer = self._consumer
        if self._reading != p:
            if self._reading is not None:
                consumer.pause(self._tps[self._reading])
            consumer.resume(tp)
            self._reading = p
        consumer.seek(tp, position)
        got = consumer.poll(timeout_ms=0, max_records=max(1, n)).get(tp, [])
        following = consumer.position(tp)
        if got and got[-1].offset >= end:
            got = [r for r in got if r.offset < end]
            following = end
        if not got:
            following = max(following, end)
        return got, following

    def forward(
        self,
        starts: Mapping[int, int],
        ends: Mapping[int, int],
        limit: int,
        match: Match | None,
        budget: Budget,
    ) -> Scan:
        """The first `limit` records (matching `match`) from `starts` up to `ends`,
        oldest first, merged across partitions by timestamp."""
        position = dict(starts)
        found: dict[int, list[ConsumerRecord]] = {p: [] for p in position}
        looked: dict[int, tuple[int, int]] = {}
        scanned = 0
        active = [p for p in sorted(position) if position[p] < ends[p]]
        stopped = False
        while active:
            for p in list(active):
                want = limit - len(found[p])
                n = min(SCAN_CHUNK if match else want, ends[p] - position[p])
                got, following = self._read(p, position[p], ends[p], n)
                if match is None:
                    hits = got
                else:
                    hits = []
                    for r in got:
                        if match(r):
                            hits.append(r)
                            if len(hits) == want:
                                following = r.offset + 1  # the next page starts after it
                                break
                if got:
                    last = min(following, ends[p]) - 1
                    looked[p] = (looked.get(p, (position[p], 0))[0], last)
                    scanned += sum(1 for r in got if r.offset <= last)
                found[p].extend(hits)
                position[p] = following
                budget.spend(len(got))
                if not got or position[p] >= ends[p] or len(found[p]) >= limit:
                    active.remove(p)
                if active and budget.exhausted:
                    stopped = True
                    break
            if stopped:
                break
        shown = list(
            islice(
                heapq.merge(
                    *(found[p] for p in sorted(found)),
                    key=lambda r: (r.timestamp, r.partition, r.offset),
                ),
                limit,
            )
        )
        cursor = dict(position)
        taken = _count_by_partition(shown)
        for p, records in found.items():
            if len(records) > taken.get(p, 0):
                cursor[p] = records[taken.get(p, 0)].offset  # not shown yet: next page
        return Scan(shown, cursor, dict(ends), True, scanned, looked, stopped)

    def backward(
        self,
        highs: Mapping[int, int],
        begins: Mapping[int, int],
        limit: int,
        match: Match | None,
        budget: Budget,
    ) -> Scan:
        """The `limit` newest records (matching `match`) below `highs` down to `begins`,
        newest first, merged across partitions by timestamp."""
        high = dict(highs)
        found: dict[int, list[ConsumerRecord]] = {p: [] for p in high}  # newest first
        looked: dict[int, tuple[int, int]] = {}
        scanned = 0
        active = [p for p in sorted(high) if high[p] > begins[p]]
        stopped = False
        while active:
            for p in list(active):
                want = limit - len(found[p])
                low = max(begins[p], high[p] - (SCAN_CHUNK if match else want))
                got = self._read_range(p, low, high[p])
                hits = got if match is None else [r for r in got if match(r)]
                if len(hits) > want:
                    hits = hits[-want:]
                    new_high = hits[0].offset  # older ones wait for the next page
                else:
                    new_high = low
                if new_high < high[p]:
                    looked[p] = (new_high, looked.get(p, (0, high[p] - 1))[1])
                scanned += sum(1 for r in got if r.offset >= new_high)
                budget.spend(len(got))
                found[p].extend(reversed(hits))
                high[p] = new_high
                if high[p] <= begins[p] or len(found[p]) >= limit:
                    active.remove(p)
                if active and budget.exhausted:
                    stopped = True
                    break
            if stopped:
                break
        shown = list(
            islice(
                heapq.merge(
                    *(found[p] for p in sorted(found)),
                    key=lambda r: (r.timestamp, r.partition, r.offset),
                    reverse=True,
                ),
                limit,
            )
        )
        cursor = dict(high)
        taken = _count_by_partition(shown)
        for p, records in found.items():
            if len(records) > taken.get(p, 0):
                cursor[p] = records[taken.get(p, 0)].offset + 1
        return Scan(shown, cursor, dict(begins), False, scanned, looked, stopped)

    def _read_range(self, p: int, low: int, high: int) -> list[ConsumerRecord]:
        records: list[ConsumerRecord] = []
        position = low
        while position < high:
            got, position = self._read(p, position, high, high - position)
            if not got:
                break
            records.extend(got)
        return records

    def export(
        self,
        starts: Mapping[int, int],
        ends: Mapping[int, int],
        max_count: int,
        match: Match | None,
    ) -> Iterator[ConsumerRecord]:
        """Records from `starts` up to `ends`, partition by partition in offset order,
        at most `max_count` of them (a generator: an export is streamed)."""
        count = 0
        for p in sorted(starts):
            position = starts[p]
            while position < ends[p] and count < max_count:
                got, position = self._read(p, position, ends[p], SCAN_CHUNK)
                if not got:
                    break
                for r in got:
                    if match is None or match(r):
                        yield r
                        count += 1
                        if count >= max_count:
                            return


def _count_by_partition(records: Iterable[ConsumerRecord]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for r in records:
        counts[r.partition] = counts.get(r.partition, 0) + 1
    return counts


# --- showing --------------------------------------------------------------------------------

# C0 controls (but tab and newline) and DEL as visible symbols (U+2400...), so a terminal
# escape or a NUL in a value shows as what it is instead of vanishing or breaking a line.
_CONTROLS = {c: 0x2400 + c for c in range(32) if c not in (9, 10)}
_CONTROLS[127] = 0x2421


@dataclass(frozen=True)
class Shown:
    """A key, value or header as the page shows it. `text` is plain text (the template
    escapes it); `kind` is "null", "text", "json", "binary" (text that was not valid
    UTF-8) or "hex"."""

    text: str
    kind: str
    size: int
    truncated: bool = False
    note: str = ""

    @property
    def preview(self) -> str:
        """One line of at most PREVIEW_CHARS characters."""
        line = " ".join(self.text.split()) if self.kind == "json" else self.text
        line = line.replace("\n", "⏎")
        return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"

    @property
    def long(self) -> bool:
        """Whether the preview hides something (the page offers to expand it)."""
        return self.truncated or "\n" in self.text or len(self.text) > PREVIEW_CHARS


def shown(data: bytes | None, fmt: str, *, say_not_json: bool = True) -> Shown:
    """`data` as text, pretty JSON (when it parses; else as text, with a note unless
    `say_not_json` is false) or a hex dump."""
    if data is None:
        return Shown("null", "null", 0)
    data = bytes(data)
    size = len(data)
    if fmt == "hex":
        part = data[:HEX_BYTES]
        return Shown(hex_dump(part), "hex", size, size > len(part))
    part = data[:SHOW_BYTES]
    truncated = size > len(part)
    try:
        text = part.decode("utf-8")
        kind = "text"
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(part) - 3:  # cut inside a character
            text, kind = part[: exc.start].decode("utf-8", "replace"), "text"
        else:
            text, kind = part.decode("utf-8", "replace"), "binary"
    note = ""
    if fmt == "json" and not truncated:
        try:
            pretty = (
                json.dumps(json.loads(text), indent=2, ensure_ascii=False)
                if kind == "text"
                else None
            )
        except (ValueError, RecursionError):  # a hostile value may nest deeply
            pretty = None
            note = "not JSON"
        else:
            if pretty is not None:
                return Shown(pretty.translate(_CONTROLS), "json", size)
        if kind == "binary":
            note = "not JSON"
    elif fmt == "json":
        note = "too long to parse as JSON here"
    if not say_not_json:
        note = ""
    if kind == "binary":
        note = note or "not valid UTF-8: see hex"
    return Shown(text.translate(_CONTROLS), kind, size, truncated, note)


def hex_dump(data: bytes) -> str:
    """Lines of 16 bytes: offset, bytes in hex, and the printable ASCII ones."""
    lines = []
    for at in range(0, len(data), 16):
        row = data[at : at + 16]
        hexes = " ".join(f"{b:02x}" for b in row)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{at:08x}  {hexes:<47}  {text}")
    return "\n".join(lines)


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


def view(record: ConsumerRecord, fmt: str) -> MessageView:
    return MessageView(
        record.partition,
        record.offset,
        record.timestamp,
        "log-append" if record.timestamp_type == LOG_APPEND_TIME else "create",
        shown(record.key, fmt, say_not_json=False),
        shown(record.value, fmt),
        [
            (name.translate(_CONTROLS), shown(v, fmt, say_not_json=False))
            for name, v in record.headers or ()
        ],
    )


# --- exporting ------------------------------------------------------------------------------


def _encoded(data: bytes | None) -> tuple[str | None, str | None]:
    """(text, encoding): UTF-8 text when the bytes are valid UTF-8, else base64."""
    if data is None:
        return None, None
    data = bytes(data)
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def record_dict(record: ConsumerRecord) -> dict[str, Any]:
    """One exported message (the JSON-lines object; CSV has the same columns)."""
    key, key_encoding = _encoded(record.key)
    value, value_encoding = _encoded(record.value)
    headers = []
    for name, raw in record.headers or ():
        text, encoding = _encoded(raw)
        headers.append({"name": name, "value": text, "encoding": encoding})
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": "log_append" if record.timestamp_type == LOG_APPEND_TIME else "create",
        "time": _iso(record.timestamp),
        "key": key,
        "key_encoding": key_encoding,
        "value": value,
        "value_encoding": value_encoding,
        "headers": headers,
    }


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


CSV_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestamp_type",
    "time",
    "key",
    "key_encoding",
    "value",
    "value_encoding",
    "headers",
)


def jsonl_lines(records: Iterable[ConsumerRecord]) -> Iterator[bytes]:
    for record in records:
        yield (json.dumps(record_dict(record), ensure_ascii=False) + "\n").encode()


# A spreadsheet reads a cell that starts with one of these as a formula (CSV injection):
# a message's key, value or header is whatever a producer wrote, so by default such a cell
# gets a leading apostrophe, which spreadsheets show as text (OWASP's advice).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralize(cell: str) -> str:
    """`cell` made safe to open in a spreadsheet: a leading `'` when it could start a
    formula."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def csv_lines(records: Iterable[ConsumerRecord], *, formulas: bool = False) -> Iterator[bytes]:
    """A header row, then one row per message; `headers` is the JSON list of the JSON-lines
    format. Text cells that a spreadsheet would run as a formula are neutralized (see
    FORMULA_STARTS) unless `formulas` asks for the bytes exactly."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for record in records:
        row = record_dict(record)
        row["headers"] = json.dumps(row["headers"], ensure_ascii=False)
        cells = ["" if row[c] is None else row[c] for c in CSV_COLUMNS]
        if not formulas:
            cells = [neutralize(c) if isinstance(c, str) else c for c in cells]
        writer.writerow(cells)
        if buffer.tell() >= 64 * 1024:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()
