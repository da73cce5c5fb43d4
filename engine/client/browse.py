"""The browse service: a topic's messages read page by page, the way a console shows them.

One implementation behind every frontend that shows messages (the web page, the JSON API,
the terminal console and `plet consume`):

- a `Query` says which partitions, where to start (`Seek`: newest, oldest, an offset or a
  time), which way to read (forward: oldest first; backward: newest first), what to match
  (`Filter`), how many to show (`limit`) and how much it may scan (`Budget`);
- `browse(cluster, query)` (or `Browser.page` for several reads on one topic) answers a
  `Page`: the records in display order, an opaque `cursor` that continues the read, whether
  the budget ran out before the page was full, and how many messages were scanned. A scan
  stops at its budget and says where, so a search never hangs on a big topic, and paging by
  cursor never skips or repeats a message;
- `Browser.export` streams the records of a query for a download; `jsonl_lines` and
  `csv_lines` write them;
- `record_json` is THE JSON shape of a record (docs/API.md, "Records").

Reads go through a public `Consumer` made on the caller's cluster (assign and seek, no
group, nothing committed), so the engine checks the consume permission, hides expired
messages and counts the reads as heat. Times are parsed by `engine.times` only.

A filter is anything with `compile()` (a test for records, or None to let all through) and
a truth value (whether it filters at all): `Filter` is the filter every console offers,
in the one filter grammar (engine.client.filters, docs/FILTERS.md). Queries (JMESPath over key, value, headers, ...) searched to the end of a range in
the background are engine.client.message_search (docs/SEARCH.md).
"""

from __future__ import annotations

import base64
import binascii
import csv
import heapq
import io
import json
import re
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any, Protocol

from engine import masking, times
from engine.client import filters
from engine.client.consumer import Consumer
from engine.errors import InvalidArgument
from engine.records import LOG_APPEND_TIME, ConsumerRecord, TopicInfo, TopicPartition
from engine.times import iso_ms  # the record JSON's time; importable here as before

SEEKS = ("newest", "oldest", "offset", "time")
FORWARD = "forward"
BACKWARD = "backward"
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
# A page's scan stops after this many messages or this much time, whichever comes first,
# and reports how far it got: search stays fast and never hangs on a big topic.
SCAN_MESSAGES = 200_000
SCAN_SECONDS = 0.2
# Messages read per poll while scanning with a filter.
SCAN_CHUNK = 10_000
# Offsets and times are SQLite integers: nothing above this is a position anyone can seek to.
MAX_OFFSET = 2**63 - 1
# A cursor longer than this is not one we wrote (a thousand partitions fit many times over).
MAX_CURSOR_CHARS = 100_000

Match = Callable[[ConsumerRecord], bool]


class BadQuery(InvalidArgument):
    """A query that cannot be run: `fields` maps each query field to what is wrong with
    it, so a form can show every mistake next to its field."""

    def __init__(self, fields: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = dict(fields)


def chosen_partitions(info: TopicInfo, partitions: Iterable[int] | None) -> list[int]:
    """The partitions of topic `info` that `partitions` names (None: all), sorted, each
    once; `BadQuery` on the `partition` field for one the topic does not have."""
    count = len(info.partitions)
    chosen = sorted(set(range(count) if partitions is None else partitions))
    wrong = [p for p in chosen if not 0 <= p < count]
    if wrong:
        raise BadQuery(
            {
                "partition": f"{wrong[0]!r} is not a partition of this topic: "
                f"choose 0 to {count - 1} or all"
            }
        )
    return chosen


def whole(raw: str) -> int | None:
    """`raw` as a whole number from 0 to MAX_OFFSET, or None (ASCII digits only: `"²"`
    passes str.isdigit() but is no number)."""
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        return None
    number = int(raw)
    return number if number <= MAX_OFFSET else None


# --- where to start --------------------------------------------------------------------------


@dataclass(frozen=True)
class Seek:
    """Where a read starts in each partition: `newest` (after the last message), `oldest`
    (the log start offset), `offset` (`value`, clamped to each partition's offsets) or
    `time` (`value` in epoch ms: the first message at or after it)."""

    kind: str = "newest"
    value: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in SEEKS:
            raise InvalidArgument(f"seek to one of {', '.join(SEEKS)}, not {self.kind!r}")
        if self.kind in ("offset", "time") and self.value is None:
            raise InvalidArgument(f"a seek to an {self.kind} needs its value")

    @classmethod
    def offset(cls, offset: int) -> Seek:
        return cls("offset", offset)

    @classmethod
    def time(cls, ms: int) -> Seek:
        return cls("time", ms)

    @classmethod
    def parse(cls, text: str) -> Seek:
        """One box for all seeks (the terminal console's, a command's `--seek`): empty,
        `newest`/`latest`/`end`; `oldest`/`earliest`/`beginning`/`start`; digits, an
        offset; anything else a time (engine.times: ISO 8601, UTC without a zone)."""
        text = text.strip()
        low = text.lower()
        if low in ("", "latest", "end", "newest"):
            return NEWEST
        if low in ("earliest", "beginning", "start", "oldest"):
            return OLDEST
        number = whole(text)
        if number is not None:
            return cls.offset(number)
        try:
            return cls.time(times.parse_time(text))
        except InvalidArgument as exc:
            raise InvalidArgument(
                f"seek to an offset (e.g. 42), 'oldest', 'newest' or a time: {exc}"
            ) from None

    @property
    def default_direction(self) -> str:
        """The newest messages are read newest first; a read from anywhere else goes
        forward in time."""
        return BACKWARD if self.kind == "newest" else FORWARD

    def describe(self) -> str:
        if self.kind == "offset":
            return f"from offset {self.value:,}"
        if self.kind == "time":
            return f"from {iso_ms(self.value or 0)}"
        return self.kind


NEWEST = Seek("newest")
OLDEST = Seek("oldest")


# --- what to match ---------------------------------------------------------------------------


class RecordFilter(Protocol):
    """What a query matches records with: `Filter`, or a later expression language."""

    def compile(self) -> Match | None: ...

    def __bool__(self) -> bool: ...


@dataclass(frozen=True)
class Filter:
    """What a record must match, all of the fields given: `key` and `value` are text its
    key or value contains; `header` and `expression` are filters in the one grammar
    (engine.client.filters, docs/FILTERS.md): `header` a header (`host: api-2`,
    `host=api-2`, `host:api-2`) or text in one of its headers, `expression` a header or
    text anywhere (the terminal's filter box, `plet consume --filter`); `text` is text
    found anywhere, as it is. Bytes are matched as UTF-8; `ignore_case` folds case.

    A `header` or `expression` that reads two ways raises `InvalidArgument` here, so a
    filter that exists can always be compiled."""

    key: str = ""
    value: str = ""
    header: str = ""
    text: str = ""
    ignore_case: bool = False
    expression: str = ""

    def __post_init__(self) -> None:
        self.terms()  # refuse a filter that reads two ways when it is made

    def __bool__(self) -> bool:
        return bool(self.key or self.value or self.text or self.terms())

    def terms(self) -> list[filters.Term]:
        """The `header` and `expression` as the grammar reads them (empty ones left out)."""
        terms = [
            filters.parse(self.header, where=filters.HEADERS),
            filters.parse(self.expression),
        ]
        return [t for t in terms if t is not None]

    def compile(self) -> Match | None:
        """A test for records, or None when the filter lets everything through."""
        icase = self.ignore_case
        tests: list[Callable[[ConsumerRecord], bool]] = []
        if self.key:
            key = filters.contains(self.key, icase)
            tests.append(lambda r: key(r.key))
        if self.value:
            value = filters.contains(self.value, icase)
            tests.append(lambda r: value(r.value))
        if self.text:
            tests.append(filters.matcher(filters.Text(self.text), ignore_case=icase))
        tests += [filters.matcher(t, ignore_case=icase) for t in self.terms()]
        if not tests:
            return None
        if len(tests) == 1:
            return tests[0]
        return lambda r: all(test(r) for test in tests)


# --- the query and its answer ----------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """How much one page may scan: messages and wall time, whichever runs out first."""

    messages: int = SCAN_MESSAGES
    seconds: float = SCAN_SECONDS

    def start(self) -> _Meter:
        return _Meter(self.messages, time.monotonic() + self.seconds)


class _Meter:
    def __init__(self, left: int, deadline: float) -> None:
        self.left = left
        self.deadline = deadline

    def spend(self, messages: int) -> None:
        self.left -= messages

    @property
    def exhausted(self) -> bool:
        return self.left <= 0 or time.monotonic() >= self.deadline


@dataclass(frozen=True)
class Query:
    """One page to read. `partitions` None means all; `direction` None means the seek's
    default (backward from newest, forward otherwise); `cursor` (a `Page.cursor` or
    `Page.tail` of the same topic and direction) continues a read and overrides `seek`."""

    topic: str
    partitions: tuple[int, ...] | None = None
    seek: Seek = NEWEST
    direction: str | None = None
    filter: RecordFilter = field(default_factory=Filter)
    limit: int = DEFAULT_LIMIT
    budget: Budget = field(default_factory=Budget)
    cursor: str | None = None

    def __post_init__(self) -> None:
        if self.direction not in (None, FORWARD, BACKWARD):
            raise BadQuery({"direction": f"read forward or backward, not {self.direction!r}"})
        if not 1 <= self.limit <= MAX_OFFSET:
            raise BadQuery({"limit": f"a page holds at least 1 message, not {self.limit}"})

    @property
    def forward(self) -> bool:
        return (self.direction or self.seek.default_direction) == FORWARD


@dataclass(frozen=True)
class Page:
    """One page of a read.

    `records` are in display order: forward pages oldest first, backward pages newest
    first, merged across partitions by timestamp. `cursor` continues the read in the same
    direction (it is always given: a forward cursor at the end finds what arrives later);
    `more` says whether the next page may hold something as of this read;
    `budget_exhausted` that the scan stopped at its budget before the page was full.
    `tail` is a forward cursor from the newest message this page knows of, for following.
    """

    topic: str
    partitions: tuple[int, ...]
    forward: bool
    records: list[ConsumerRecord]
    cursor: str
    more: bool
    budget_exhausted: bool
    scanned: int
    positions: dict[int, int]  # where the next page starts in each partition
    begins: dict[int, int]  # log start offsets at the time of the read
    ends: dict[int, int]  # log end offsets at the time of the read
    looked: dict[int, tuple[int, int]]  # first and last offset scanned, per partition
    tail: str
    notes: tuple[str, ...] = ()  # what a seek met (an offset before the start, past the end)


# --- transactions on a page ------------------------------------------------------------------


@dataclass(frozen=True)
class Marker:
    """A transaction marker (Kafka's control record) as a message browser shows it: it
    takes an offset but holds no message."""

    partition: int
    offset: int
    producer_id: int
    epoch: int
    commit: bool

    @property
    def kind(self) -> str:
        return "COMMIT" if self.commit else "ABORT"


# Markers right after a page's last record are looked for this far (a page that ends with a
# transaction shows its markers).
MARKER_LOOKAHEAD = 64


@dataclass(frozen=True)
class TransactionMarks:
    """What transactions did to a page: the (partition, offset) of its records that an
    aborted transaction wrote, and the markers among (and right after) its records."""

    aborted: frozenset[tuple[int, int]]
    markers: tuple[Marker, ...]

    def is_aborted(self, record: ConsumerRecord) -> bool:
        return (record.partition, record.offset) in self.aborted

    def rows(self, records: Iterable[ConsumerRecord], forward: bool) -> list[Any]:
        """The records (in display order) with the markers among them, each next to the
        records of its partition around it: `ConsumerRecord`s and `Marker`s."""
        left: dict[int, list[Marker]] = {}
        for m in sorted(self.markers, key=lambda m: m.offset, reverse=not forward):
            left.setdefault(m.partition, []).append(m)
        out: list[Any] = []
        for r in records:
            queue = left.get(r.partition, [])
            while queue and (queue[0].offset < r.offset if forward else queue[0].offset > r.offset):
                out.append(queue.pop(0))
            out.append(r)
        for queue in left.values():
            out += queue
        return out


# --- cursors ---------------------------------------------------------------------------------


_CURSOR_CHARS = re.compile(r"[A-Za-z0-9_-]+={0,2}")  # base64url, padding optional


def _topic_tag(topic: str) -> str:
    # A cursor names its topic by a checksum: enough to refuse one pasted from another topic.
    return format(zlib.crc32(topic.encode()), "08x")


def encode_cursor(topic: str, forward: bool, positions: Mapping[int, int]) -> str:
    """An opaque, URL-safe string that continues a read of `topic` from `positions`."""
    body = {
        "v": 1,
        "d": "f" if forward else "b",
        "t": _topic_tag(topic),
        "p": {str(p): o for p, o in sorted(positions.items())},
    }
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(
    cursor: str, topic: str, forward: bool, partitions: Iterable[int]
) -> dict[int, int]:
    """The positions `cursor` holds, or BadQuery saying why it is not a cursor of this
    read (garbled, another topic, the other direction, a partition not selected)."""

    def bad(why: str) -> BadQuery:
        return BadQuery({"cursor": why})

    if (
        not isinstance(cursor, str)
        or len(cursor) > MAX_CURSOR_CHARS
        or not _CURSOR_CHARS.fullmatch(cursor)
    ):
        raise bad("not a cursor this service wrote: ask for the first page again")
    try:
        bare = cursor.rstrip("=")
        raw = base64.urlsafe_b64decode(bare + "=" * (-len(bare) % 4))
        body = json.loads(raw)
    except (binascii.Error, ValueError, RecursionError):
        raise bad("not a cursor this service wrote: ask for the first page again") from None
    if not isinstance(body, dict) or body.get("v") != 1 or not isinstance(body.get("p"), dict):
        raise bad("not a cursor this service wrote: ask for the first page again")
    if body.get("t") != _topic_tag(topic):
        raise bad(f"this cursor continues a read of another topic, not {topic}")
    if body.get("d") != ("f" if forward else "b"):
        raise bad(
            "this cursor continues a "
            + ("backward (newest first)" if forward else "forward (oldest first)")
            + " read: ask with the same start"
        )
    wanted = set(partitions)
    positions: dict[int, int] = {}
    for p, o in body["p"].items():
        partition = whole(p) if isinstance(p, str) else None
        if partition is None or isinstance(o, bool) or not isinstance(o, int):
            raise bad("not a cursor this service wrote: ask for the first page again")
        if not 0 <= o <= MAX_OFFSET:
            raise bad(f"offset {o} of partition {partition} is out of range")
        if partition not in wanted:
            raise bad(f"partition {partition} is not one of those selected")
        positions[partition] = o
    return positions


# --- reading ---------------------------------------------------------------------------------


class Browser:
    """Reads some partitions of one topic, page after page; close it (or use `with`).

    Making it checks the consume permission (the engine's `Consumer.assign` does) and
    raises `errors.AccessDenied` when the cluster's principal may not read; an unknown
    topic raises `UnknownTopic`, a partition it does not have `BadQuery`.

    `mask` is the stream's data mask when it applies to the principal (engine.masking),
    else None: every record read is masked as it is read, so pages, filters, the live
    tail and exports all see the masked record, and each page says so in its notes.
    """

    def __init__(
        self,
        cluster: Any,
        topic: str | TopicInfo,
        partitions: Iterable[int] | None = None,
        *,
        isolation_level: str = "read_uncommitted",
    ) -> None:
        info = cluster.topic(topic) if isinstance(topic, str) else topic
        self.info = info
        self.topic = info.name
        self.partitions = tuple(chosen_partitions(info, partitions))
        self._tps = {p: TopicPartition(info.name, p) for p in self.partitions}
        # read_committed: no aborted transaction, nothing past the last stable offset (the
        # Consumer's isolation level); read_uncommitted shows every message
        self._consumer = Consumer(
            cluster, enable_auto_commit=False, isolation_level=isolation_level
        )
        try:
            self._consumer.assign(list(self._tps.values()))
            # Read one partition at a time: poll() would otherwise mix them round-robin.
            self._consumer.pause(*self._tps.values())
            self.mask = masking.for_reader(cluster, info)
        except BaseException:
            self._consumer.close(autocommit=False)
            raise
        self._reading: int | None = None

    def close(self) -> None:
        self._consumer.close(autocommit=False)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- positions ------------------------------------------------------------------------

    def bounds(self) -> tuple[dict[int, int], dict[int, int]]:
        """(log start offsets, log end offsets) of the partitions."""
        tps = list(self._tps.values())
        begins = self._consumer.beginning_offsets(tps)
        ends = self._consumer.end_offsets(tps)
        return (
            {tp.partition: o for tp, o in begins.items()},
            {tp.partition: o for tp, o in ends.items()},
        )

    def marks(
        self, records: Iterable[ConsumerRecord], since: str | None = None
    ) -> TransactionMarks:
        """Which of `records` (read by this browser) aborted transactions wrote, and the
        transaction markers among them and right after the last of each partition; with
        `since` (the forward cursor `records` were read from, as a live tail reads), also
        the markers between it and the first of them, which arrived since the last read."""
        start = decode_cursor(since, self.topic, True, self.partitions) if since else {}
        offsets: dict[int, list[int]] = {}
        for r in records:
            offsets.setdefault(r.partition, []).append(r.offset)
        aborted: set[tuple[int, int]] = set()
        markers: list[Marker] = []
        for p, shown in offsets.items():
            tp, low, high = self._tps[p], min(shown), max(shown)
            for first, last in self._consumer.aborted_ranges(tp, low, high + 1):
                aborted |= {(p, o) for o in shown if first <= o <= last}
            found = self._consumer.markers(
                tp, min(start.get(p, low), low), high + 1 + MARKER_LOOKAHEAD
            )
            after = high + 1  # past the last record: only the markers right after it
            for offset, producer_id, epoch, commit in found:
                if offset > high:
                    if offset != after:
                        break
                    after += 1
                markers.append(Marker(p, offset, producer_id, epoch, commit))
        return TransactionMarks(frozenset(aborted), tuple(markers))

    def offsets_at(self, time_ms: int, ends: Mapping[int, int]) -> dict[int, int]:
        """The first offset at or after `time_ms` in each partition (the end if none)."""
        found = self._consumer.offsets_for_times({tp: time_ms for tp in self._tps.values()})
        return {
            tp.partition: ends[tp.partition] if f is None else f.offset for tp, f in found.items()
        }

    def _seek_positions(
        self, seek: Seek, begins: Mapping[int, int], ends: Mapping[int, int]
    ) -> dict[int, int]:
        if seek.kind == "oldest":
            return dict(begins)
        if seek.kind == "offset":
            assert seek.value is not None
            return {p: min(max(seek.value, begins[p]), ends[p]) for p in ends}
        if seek.kind == "time":
            assert seek.value is not None
            return self.offsets_at(seek.value, ends)
        return dict(ends)

    def _start(
        self, query: Query, begins: Mapping[int, int], ends: Mapping[int, int]
    ) -> tuple[dict[int, int], tuple[str, ...]]:
        """Where `query` starts in each partition, and notes on what its seek met."""
        if query.topic != self.topic:
            raise BadQuery({"topic": f"this browser reads {self.topic}, not {query.topic}"})
        selected = self.partitions if query.partitions is None else tuple(query.partitions)
        if sorted(selected) != list(self.partitions):
            raise BadQuery({"partition": "the query selects other partitions than the browser"})
        positions = self._seek_positions(query.seek, begins, ends)
        if query.cursor is None:
            return positions, _seek_notes(query.seek, begins, ends)
        given = decode_cursor(query.cursor, self.topic, query.forward, self.partitions)
        # A partition the cursor does not name (added since) starts at the seek; a
        # position outside the partition's offsets now (expired, or a forged cursor) is
        # clamped to them.
        for p, o in given.items():
            positions[p] = min(max(o, begins[p]), ends[p])
        return positions, ()

    # --- pages ----------------------------------------------------------------------------

    def page(self, query: Query) -> Page:
        """The page `query` asks for (see the module docstring)."""
        begins, ends = self.bounds()
        positions, notes = self._start(query, begins, ends)
        match = query.filter.compile() if query.filter else None
        meter = query.budget.start()
        if query.forward:
            records, after, looked, scanned, stopped = self._forward(
                positions, ends, query.limit, match, meter
            )
            more = any(after[p] < ends[p] for p in after)
            tail = after
        else:
            records, after, looked, scanned, stopped = self._backward(
                positions, begins, query.limit, match, meter
            )
            more = any(after[p] > begins[p] for p in after)
            tail = dict(ends)  # what arrives after this read comes after the ends
        return Page(
            topic=self.topic,
            partitions=self.partitions,
            forward=query.forward,
            records=records,
            cursor=encode_cursor(self.topic, query.forward, after),
            more=more,
            budget_exhausted=stopped,
            scanned=scanned,
            positions=after,
            begins=begins,
            ends=ends,
            looked=looked,
            tail=encode_cursor(self.topic, True, tail),
            notes=notes if self.mask is None else (*notes, self.mask.note),
        )

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
        if self.mask is not None:
            got = [self.mask.record(r) for r in got]
        if got and got[-1].offset >= end:
            got = [r for r in got if r.offset < end]
            following = end
        if not got:
            following = max(following, end)
        return got, following

    def _forward(
        self,
        starts: Mapping[int, int],
        ends: Mapping[int, int],
        limit: int,
        match: Match | None,
        meter: _Meter,
    ) -> tuple[list[ConsumerRecord], dict[int, int], dict[int, tuple[int, int]], int, bool]:
        """The first `limit` records (matching `match`) from `starts` up to `ends`,
        oldest first, merged across partitions by timestamp."""
        position = dict(starts)
        found: dict[int, list[ConsumerRecord]] = {p: [] for p in position}
        looked: dict[int, tuple[int, int]] = {}
        scanned = 0
        active = [p for p in sorted(position) if position[p] < ends[p]]
        stopped = False
        while active and not stopped:
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
                meter.spend(len(got))
                if not got or position[p] >= ends[p] or len(found[p]) >= limit:
                    active.remove(p)
                if active and meter.exhausted:
                    stopped = True
                    break
        shown = list(
            islice(
                heapq.merge(*(found[p] for p in sorted(found)), key=_order),
                limit,
            )
        )
        after = dict(position)
        taken = _count_by_partition(shown)
        for p, records in found.items():
            if len(records) > taken.get(p, 0):
                after[p] = records[taken.get(p, 0)].offset  # not shown yet: next page
        return shown, after, looked, scanned, stopped

    def _backward(
        self,
        highs: Mapping[int, int],
        begins: Mapping[int, int],
        limit: int,
        match: Match | None,
        meter: _Meter,
    ) -> tuple[list[ConsumerRecord], dict[int, int], dict[int, tuple[int, int]], int, bool]:
        """The `limit` newest records (matching `match`) below `highs` down to `begins`,
        newest first, merged across partitions by timestamp."""
        high = dict(highs)
        found: dict[int, list[ConsumerRecord]] = {p: [] for p in high}  # newest first
        looked: dict[int, tuple[int, int]] = {}
        scanned = 0
        active = [p for p in sorted(high) if high[p] > begins[p]]
        stopped = False
        while active and not stopped:
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
                meter.spend(len(got))
                found[p].extend(reversed(hits))
                high[p] = new_high
                if high[p] <= begins[p] or len(found[p]) >= limit:
                    active.remove(p)
                if active and meter.exhausted:
                    stopped = True
                    break
        shown = list(
            islice(
                heapq.merge(*(found[p] for p in sorted(found)), key=_order, reverse=True),
                limit,
            )
        )
        after = dict(high)
        taken = _count_by_partition(shown)
        for p, records in found.items():
            if len(records) > taken.get(p, 0):
                after[p] = records[taken.get(p, 0)].offset + 1
        return shown, after, looked, scanned, stopped

    def _read_range(self, p: int, low: int, high: int) -> list[ConsumerRecord]:
        records: list[ConsumerRecord] = []
        position = low
        while position < high:
            got, position = self._read(p, position, high, high - position)
            if not got:
                break
            records.extend(got)
        return records

    # --- export ---------------------------------------------------------------------------

    def export_plan(
        self,
        query: Query,
        max_count: int,
        *,
        until_ms: int | None = None,
        to_offset: int | None = None,
        budget: Budget | None = None,
    ) -> ExportPlan:
        """Where an export of what `query` selects starts and ends in each partition.

        Without a filter: from the query's seek (from newest, the last `max_count` offsets
        of each partition) to the end. With a filter, the matches are counted first, so the
        export holds what the filter selects however far back it lies: forward, the first
        `max_count` matches in partition order; from newest, the last `max_count` matches
        of each partition. Counting stops at `budget` (messages and seconds; none: no
        limit), and the plan says it is `partial` and how far it got."""
        begins, ends = self.bounds()
        if until_ms is not None:
            ends = self.offsets_at(until_ms + 1, ends)
        if to_offset is not None:
            ends = {p: min(ends[p], to_offset + 1) for p in self.partitions}
        newest = query.seek.kind == "newest" and query.cursor is None
        match = query.filter.compile() if query.filter else None
        if newest and match is None:
            starts = {p: max(begins[p], ends[p] - max_count) for p in self.partitions}
            return ExportPlan(starts, ends)
        if newest:
            starts = dict(ends)  # each partition's start is found counting back from its end
        else:
            starts, _ = self._start(replace(query, direction=FORWARD), begins, ends)
            starts = {p: min(starts[p], ends[p]) for p in starts}
        if match is None:
            return ExportPlan(starts, ends)
        meter = (budget or Budget(MAX_OFFSET, float("inf"))).start()
        scanned = 0
        if newest:
            for p in sorted(starts):
                low, found = ends[p], 0
                while low > begins[p] and found < max_count and not meter.exhausted:
                    chunk_low = max(begins[p], low - SCAN_CHUNK)
                    got = self._read_range(p, chunk_low, low)
                    meter.spend(len(got))
                    scanned += len(got)
                    hits = [r.offset for r in got if match(r)]
                    if found + len(hits) >= max_count:
                        low = hits[len(hits) - (max_count - found)]
                        found = max_count
                    else:
                        low, found = chunk_low, found + len(hits)
                starts[p] = low
                if meter.exhausted and low > begins[p] and found < max_count:
                    return ExportPlan(starts, ends, partial=True, scanned=scanned)
            return ExportPlan(starts, ends, scanned=scanned)
        found = 0
        for i, p in enumerate(sorted(starts)):
            position = starts[p]
            while position < ends[p] and found < max_count and not meter.exhausted:
                got, following = self._read(p, position, ends[p], SCAN_CHUNK)
                if not got:
                    position = ends[p]
                    break
                meter.spend(len(got))
                scanned += len(got)
                for r in got:
                    if match(r):
                        found += 1
                        if found == max_count:
                            following = r.offset + 1
                            break
                position = following
            if found >= max_count or (meter.exhausted and position < ends[p]):
                ends[p] = position
                for later in sorted(starts)[i + 1 :]:
                    ends[later] = starts[later]  # nothing of the partitions after it
                return ExportPlan(starts, ends, partial=found < max_count, scanned=scanned)
        return ExportPlan(starts, ends, scanned=scanned)

    def export(
        self,
        query: Query,
        max_count: int,
        *,
        until_ms: int | None = None,
        to_offset: int | None = None,
        plan: ExportPlan | None = None,
    ) -> Iterator[ConsumerRecord]:
        """The records `query` selects, partition by partition in offset order, at most
        `max_count` of them, up to and including `until_ms` and `to_offset` when given:
        those of `plan` (`export_plan`, made here when not given). No budget of its own:
        an export is streamed (a generator), as long as the reader reads."""
        if plan is None:
            plan = self.export_plan(query, max_count, until_ms=until_ms, to_offset=to_offset)
        starts, ends = plan.starts, plan.ends
        match = query.filter.compile() if query.filter else None
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


@dataclass(frozen=True)
class ExportPlan:
    """Where an export reads in each partition, [starts, ends), and whether counting its
    matches stopped at the budget first (`partial`: the export holds fewer than it could),
    after `scanned` messages."""

    starts: dict[int, int]
    ends: dict[int, int]
    partial: bool = False
    scanned: int = 0


def _order(record: ConsumerRecord) -> tuple[int, int, int]:
    return (record.timestamp, record.partition, record.offset)


def _count_by_partition(records: Iterable[ConsumerRecord]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for r in records:
        counts[r.partition] = counts.get(r.partition, 0) + 1
    return counts


def _seek_notes(seek: Seek, begins: Mapping[int, int], ends: Mapping[int, int]) -> tuple[str, ...]:
    """Say so when an offset to seek to lies outside a partition's messages."""
    notes = []
    if seek.kind == "offset" and seek.value is not None:
        for p in sorted(ends):
            if seek.value < begins[p]:
                notes.append(
                    f"Partition {p} starts at offset {begins[p]:,} (older messages have "
                    f"expired or been compacted away): showing from there."
                )
            elif seek.value > ends[p]:
                notes.append(
                    f"Offset {seek.value:,} is past the end of partition {p} (its log "
                    f"end offset is {ends[p]:,}): nothing there yet."
                )
    return tuple(notes)


def browse(cluster: Any, query: Query) -> Page:
    """One page of `query`, read with a browser made and closed for it."""
    with Browser(cluster, query.topic, query.partitions) as browser:
        return browser.page(query)


def export(
    cluster: Any,
    query: Query,
    max_count: int,
    *,
    until_ms: int | None = None,
    to_offset: int | None = None,
    isolation_level: str = "read_uncommitted",
) -> Iterator[ConsumerRecord]:
    """`Browser.export` with a browser of its own (of `isolation_level`), closed when the
    iterator ends or is closed. The permission check happens here, before the first record
    is asked for."""
    browser = Browser(cluster, query.topic, query.partitions, isolation_level=isolation_level)

    def records() -> Iterator[ConsumerRecord]:
        try:
            yield from browser.export(query, max_count, until_ms=until_ms, to_offset=to_offset)
        finally:
            browser.close()

    return records()


def follow(
    cluster: Any,
    topic: str,
    tail: str,
    *,
    partitions: Iterable[int] | None = None,
    filter: RecordFilter | None = None,
    on_records: Callable[[list[ConsumerRecord], TransactionMarks], None],
    cancelled: Callable[[], bool],
    poll_ms: int = 250,
    batch: int = 500,
) -> None:
    """Hand every batch of new records after the cursor `tail` (a `Page.tail`) that
    match `filter` to `on_records`, oldest first, with their `TransactionMarks` (aborted
    ones, markers among them), until `cancelled()`. Other processes' writes are found by
    polling every `poll_ms`."""
    # the markers of the next records are looked for from where the last records ended: a
    # poll that finds only a marker (a commit after the last record) moves the cursor past
    # it, and the marker then comes with the next record of its partition
    since = tail
    with Browser(cluster, topic, partitions) as browser:
        while not cancelled():
            page = browser.page(
                Query(
                    browser.topic,
                    browser.partitions,
                    OLDEST,
                    FORWARD,
                    filter if filter is not None else Filter(),
                    batch,
                    cursor=tail,
                )
            )
            if page.records and not cancelled():
                on_records(page.records, browser.marks(page.records, since=since))
                since = page.cursor
            tail = page.cursor
            if not page.more:
                time.sleep(poll_ms / 1000)


# --- the query string grammar of the web page and the API ------------------------------------


def parse_query(
    args: Mapping[str, str],
    topic: TopicInfo,
    *,
    default_start: str = "newest",
    default_limit: int = DEFAULT_LIMIT,
    max_limit: int = MAX_LIMIT,
    budget: Budget | None = None,
) -> Query:
    """The `Query` that URL query arguments ask for, the same grammar for the web page and
    the JSON API; BadQuery names every bad field.

    `partition` (a number or `all`), `start` (newest, oldest, offset, time), `offset`,
    `time` (engine.times), `direction` (forward, backward), `limit` (1 to `max_limit`),
    `key`, `value`, `text` (substrings; matched as typed, spaces included), `header` (a
    header, `host: api-2`, or text in a header) and `filter` (a header, or text anywhere)
    in the filter grammar (engine.client.filters), `icase` (any non-empty value folds
    case), `cursor`. Empty fields count as not given.
    An offset (else a time) given without `start`, or with `start` newest or oldest, says
    where to start.
    """
    errors: dict[str, str] = {}

    def text(name: str) -> str:
        return (args.get(name) or "").strip()

    partitions: tuple[int, ...] | None = None
    raw = text("partition")
    if raw and raw != "all":
        count = len(topic.partitions)
        number = whole(raw)
        if number is None or number >= count:
            errors["partition"] = (
                f"{raw!r} is not a partition of this topic: choose 0 to {count - 1} or all"
            )
        else:
            partitions = (number,)

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
            time_ms = times.parse_time(raw)
        except InvalidArgument as exc:
            errors["time"] = str(exc)

    start = text("start") or default_start
    if start in ("newest", "oldest"):
        start = "offset" if offset is not None else "time" if time_ms is not None else start
    seek = NEWEST
    if start not in SEEKS:
        errors["start"] = f"start at one of {', '.join(SEEKS)}, not {start!r}"
    elif start == "offset":
        if offset is not None:
            seek = Seek.offset(offset)
        elif "offset" not in errors:
            errors["offset"] = "give the offset to start at"
    elif start == "time":
        if time_ms is not None:
            seek = Seek.time(time_ms)
        elif "time" not in errors:
            errors["time"] = "give the time to start at"
    else:
        seek = Seek(start)

    direction = text("direction") or None
    if direction not in (None, FORWARD, BACKWARD):
        errors["direction"] = f"read forward or backward, not {direction!r}"

    limit = default_limit
    raw = text("limit")
    if raw:
        number = whole(raw)
        if number is None or not 1 <= number <= max_limit:
            errors["limit"] = f"show 1 to {max_limit} messages a page, not {raw!r}"
        else:
            limit = number

    # a filter is matched as typed: spaces may be what someone looks for
    grammar = {"header": filters.HEADERS, "filter": filters.ANYWHERE}
    for name, where in grammar.items():
        try:
            filters.parse(args.get(name) or "", where=where)
        except InvalidArgument as exc:
            errors[name] = str(exc)

    if errors:
        raise BadQuery(errors)
    return Query(
        topic=topic.name,
        partitions=partitions,
        seek=seek,
        direction=direction,
        filter=Filter(
            key=args.get("key") or "",
            value=args.get("value") or "",
            header=args.get("header") or "",
            text=args.get("text") or "",
            ignore_case=bool(args.get("icase")),
            expression=args.get("filter") or "",
        ),
        limit=limit,
        budget=budget or Budget(),
        cursor=text("cursor") or None,
    )


# --- the JSON of a record --------------------------------------------------------------------


def encoded(data: bytes | str | None) -> tuple[str | None, str | None]:
    """(text, encoding) of a key, value or header value: the text itself when the bytes
    are valid UTF-8 (`"utf-8"`), else base64 (`"base64"`); (None, None) for null."""
    if data is None:
        return None, None
    raw = filters.as_bytes(data)
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), "base64"


def timestamp_type_name(timestamp_type: int) -> str:
    return "log_append" if timestamp_type == LOG_APPEND_TIME else "create"


def record_json(record: ConsumerRecord) -> dict[str, Any]:
    """THE JSON shape of a record: the CLI's `--format json` lines, the API's messages and
    the JSON-lines downloads (docs/API.md, "Records")."""
    key, key_encoding = encoded(record.key)
    value, value_encoding = encoded(record.value)
    headers = []
    for name, raw in record.headers or ():
        text, encoding = encoded(raw)
        headers.append({"name": name, "value": text, "encoding": encoding})
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": timestamp_type_name(record.timestamp_type),
        "time": iso_ms(record.timestamp),
        "key": key,
        "key_encoding": key_encoding,
        "value": value,
        "value_encoding": value_encoding,
        "headers": headers,
    }


# --- export files ----------------------------------------------------------------------------

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

# A spreadsheet reads a cell that starts with one of these as a formula (CSV injection):
# a message's key, value or header is whatever a producer wrote, so by default such a cell
# gets a leading apostrophe, which spreadsheets show as text (OWASP's advice).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralize(cell: str) -> str:
    """`cell` made safe to open in a spreadsheet: a leading `'` when it could start a
    formula. A cell that already starts with `'`s before such a character gets one more,
    so `unneutralize` gives every cell back exactly (an import of a download)."""
    return "'" + cell if cell.lstrip("'").startswith(FORMULA_STARTS) else cell


def unneutralize(cell: str) -> str:
    """The cell `neutralize` was given: one leading `'` fewer before a formula's start."""
    if cell.startswith("'") and cell.lstrip("'").startswith(FORMULA_STARTS):
        return cell[1:]
    return cell


def jsonl_lines(records: Iterable[ConsumerRecord]) -> Iterator[bytes]:
    """One `record_json` object a line."""
    for record in records:
        yield (json.dumps(record_json(record), ensure_ascii=False) + "\n").encode()


def csv_lines(records: Iterable[ConsumerRecord], *, formulas: bool = False) -> Iterator[bytes]:
    """A header row (CSV_COLUMNS), then one row per message, the fields of `record_json`
    with `headers` as its JSON text. Cells that a spreadsheet would run as a formula are
    neutralized (see FORMULA_STARTS) unless `formulas` asks for the bytes exactly."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for record in records:
        row = record_json(record)
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
