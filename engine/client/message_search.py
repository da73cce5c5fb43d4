"""Message search: a query over a topic's messages, run to the end of its range in the
background, with progress, matches streaming in, and cancel (docs/SEARCH.md).

The query language is JMESPath (`jmespath` on PyPI: a specification with a compliance
suite and a kept parser) evaluated over one document per message::

    {"key": text or null, "value": parsed JSON (else text, or null), "headers": {name: text},
     "timestamp": epoch ms, "offset": n, "partition": n}

A message matches when the expression's result is truthy the JMESPath way (not false,
null, "", [] or {}; 0 is true). Values in the Confluent wire format are decoded with their
schema first (engine.client.schemas), so a search sees the JSON a console shows.

Two conveniences over plain JMESPath, applied with JMESPath's own lexer: a bare number
outside an index (`value.id == 42`) is the JSON literal `42`, and double-quoted text right
after a comparison or as a function argument (`headers.unit == "C"`) is a string rather
than a field name, as people write them. Functions added: `re2_match(subject, pattern)`
(RE2: linear time, so no pattern can hang a search; a number subject is matched as its
text) and `ms(time)` (engine.times: an ISO 8601 time as epoch ms, for `timestamp`).

`search(cluster, topic, query, ...)` checks the query, the topic and the consume
permission at once (and finds the stream's data mask for the principal: a query sees, and
a match holds, the masked message, engine.masking), then reads in a thread with
`Consumer.poll_arrow` (columns, no object per message unless it matches) and answers a
`SearchJob`. Its cost is bounded: at most
`max_rate` messages a second (the thread sleeps to keep to it, leaving the GIL to the
console), at most `max_scanned` messages in all, at most `max_matches` matches kept (the
rest are counted). `SearchJobs` keeps each owner's jobs, a few at a time.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jmespath
from jmespath import exceptions as jp_errors
from jmespath import functions as jp_functions
from jmespath.lexer import Lexer
from jmespath.visitor import Options, TreeInterpreter

from engine import masking, regex, times
from engine.client.browse import OLDEST, BadQuery, Seek, chosen_partitions
from engine.client.consumer import Consumer
from engine.errors import InvalidArgument, TryLater
from engine.records import ConsumerRecord, TopicPartition

MAX_QUERY_CHARS = 4_000
MAX_PATTERN_CHARS = regex.MAX_PATTERN_CHARS
MAX_MATCHES = 1_000  # matches kept by a job; more are counted, not kept
MAX_SCANNED = 20_000_000  # messages one job may scan
MAX_RATE = 250_000  # messages a second one job may scan
CHUNK = 5_000  # messages read and evaluated between looks at cancel and the rate
MAX_VALUE_SIZE = 8_000_000  # about the JSON length of any value a query makes, per message
MAX_STEPS = 2_000_000  # expression nodes visited per message (looked at with cancel)
CANCEL_STEPS = 4_096  # steps between looks at cancel (about a millisecond)
CANCEL_MESSAGES = 64  # messages between looks at cancel
MAX_JSON_BYTES = 1_000_000  # a bigger value is searched as text (parsing it costs too much)
JOBS_PER_OWNER = 3  # running or finished jobs kept per owner; the oldest go first
JOBS_RUNNING = 8  # running jobs of all owners; one more cancels the oldest

_COMPARATORS = {"eq", "ne", "lt", "lte", "gt", "gte"}
_JSON_STARTS = frozenset('{["-0123456789tfn')


class BadSearch(BadQuery):
    """A query that does not parse or cannot run; `position` is the 0-based column in the
    query text where the problem is, when known."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__({"query": message})
        self.position = position


# --- the functions a query may call ------------------------------------------------------


def _regex(pattern: str) -> Any:
    return regex.compile_pattern(pattern, "re2_match")


class _Functions(jp_functions.Functions):
    @jp_functions.signature({"types": []}, {"types": ["string"]})
    def _func_re2_match(self, subject: Any, pattern: str) -> bool:
        if isinstance(subject, bool) or not isinstance(subject, (str, int, float)):
            return False
        text = subject if isinstance(subject, str) else json.dumps(subject)
        return _regex(pattern).search(text) is not None

    @jp_functions.signature({"types": ["string"]})
    def _func_ms(self, text: str) -> int:
        return times.parse_time(text)


_FUNCTIONS = _Functions()
_OPTIONS = Options(custom_functions=_FUNCTIONS)


class _Cancelled(Exception):
    """The job was cancelled in the middle of a message."""


class QueryTooCostly(InvalidArgument):
    """An evaluation that would pass MAX_VALUE_SIZE or MAX_STEPS on one message."""


class Interpreter(TreeInterpreter):
    """JMESPath's interpreter with a bound on each message's evaluation: every value a
    multi-select or a function makes has at most MAX_VALUE_SIZE (about its JSON length,
    counting a value as often as it is referred to), checked before `join` or
    `to_string` make text, and at most MAX_STEPS nodes are visited. Without them `join`
    over eight `@`, piped five times, makes 15^5 copies of a message (1.39 GB from a
    318-character query). Sizes are kept per evaluation, so a value shared by many
    references is measured once. One interpreter per thread."""

    def __init__(self, cancel: threading.Event | None = None) -> None:
        super().__init__(_OPTIONS)
        self._sizes: dict[int, tuple[Any, int]] = {}  # the value is kept so its id stays its own
        self._steps = 0
        self._methods: dict[str, Any] = {}
        self._cancel = cancel  # looked at every CANCEL_STEPS steps: one message may be long

    def evaluate(self, tree: Any, doc: Mapping[str, Any]) -> Any:
        self._sizes.clear()
        self._steps = 0
        try:
            return self.visit(tree, doc)
        finally:
            self._sizes.clear()

    def visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
        # Visitor.visit, inlined with the count: it runs for every node of every message
        self._steps += 1
        if not self._steps % CANCEL_STEPS:
            if self._steps > MAX_STEPS:
                raise QueryTooCostly(
                    f"the query takes more than {MAX_STEPS:,} steps on one message"
                )
            if self._cancel is not None and self._cancel.is_set():
                raise _Cancelled
        method = self._methods.get(node["type"])
        if method is None:
            method = self._methods[node["type"]] = getattr(
                self, f"visit_{node['type']}", self.default_visit
            )
        return method(node, *args, **kwargs)

    def visit_multi_select_list(self, node: Any, value: Any) -> Any:
        return self._checked(super().visit_multi_select_list(node, value))

    def visit_multi_select_dict(self, node: Any, value: Any) -> Any:
        return self._checked(super().visit_multi_select_dict(node, value))

    def visit_function_expression(self, node: Any, value: Any) -> Any:
        args = [self.visit(child, value) for child in node["children"]]
        if node["value"] in ("join", "to_string"):
            # the text they make is about as long as their arguments
            self._checked(args)
        return self._checked(_FUNCTIONS.call_function(node["value"], args))

    def _checked(self, value: Any) -> Any:
        try:
            self._size(value)
        except RecursionError:
            raise QueryTooCostly("the query makes values nested too deep") from None
        return value

    def _size(self, value: Any) -> int:
        if isinstance(value, str):
            return len(value) + 2
        if not isinstance(value, (list, dict)):
            return 8
        known = self._sizes.get(id(value))
        if known is not None:
            return known[1]
        total = 2
        if isinstance(value, dict):
            for key, item in value.items():
                total += len(key) + 3 + self._size(item)
                if total > MAX_VALUE_SIZE:
                    break
        else:
            for item in value:
                total += 1 + self._size(item)
                if total > MAX_VALUE_SIZE:
                    break
        if total > MAX_VALUE_SIZE:
            raise QueryTooCostly(
                f"the query makes a value of more than {MAX_VALUE_SIZE:,} characters"
            )
        self._sizes[id(value)] = (value, total)
        return total


# --- the query ------------------------------------------------------------------------------


def _normalize(text: str) -> tuple[str, list[int]]:
    """`text` with the two conveniences applied (see the module docstring), and for each
    character of the result the column of `text` it came from."""
    tokens = list(Lexer().tokenize(text))
    out: list[str] = []
    origin: list[int] = []
    at = 0
    stack: list[str] = []  # what each open bracket is: index, filter, call, group
    previous: Mapping[str, Any] = {"type": ""}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        kind = token["type"]
        start = token["start"]
        replacement = None
        if kind == "number" and (not stack or stack[-1] != "index"):
            end = token["end"]
            # JMESPath's lexer has no fractions: 1.5 comes as 1, a dot, 5
            if (
                i + 2 < len(tokens)
                and tokens[i + 1]["type"] == "dot"
                and tokens[i + 1]["start"] == end
                and tokens[i + 2]["type"] == "number"
                and tokens[i + 2]["start"] == end + 1
                and str(tokens[i + 2]["value"]).isdigit()
            ):
                end = tokens[i + 2]["end"]
                i += 2
            replacement = "`" + text[start:end] + "`"
        elif kind == "quoted_identifier" and (
            previous["type"] in _COMPARATORS
            or (previous["type"] in ("comma", "lparen") and stack and stack[-1] == "call")
        ):
            end = _quoted_end(text, start)
            # a JSON literal holds any text exactly (a raw string keeps backslashes as typed)
            replacement = "`" + json.dumps(token["value"]).replace("`", "\\`") + "`"
        if replacement is not None:
            out.append(text[at:start])
            origin.extend(range(at, start))
            out.append(replacement)
            origin.extend([start] * len(replacement))
            at = end
        if kind == "lbracket":
            stack.append("index")
        elif kind == "filter":
            stack.append("filter")
        elif kind == "lbrace":
            stack.append("group")
        elif kind == "lparen":
            stack.append("call" if previous["type"] == "unquoted_identifier" else "group")
        elif kind in ("rbracket", "rbrace", "rparen") and stack:
            stack.pop()
        previous = token
        i += 1
    out.append(text[at:])
    origin.extend(range(at, len(text) + 1))
    return "".join(out), origin


def _quoted_end(text: str, start: int) -> int:
    """The end of the double-quoted identifier that starts at `start` (after its quote)."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return len(text)


def _nodes(node: Any) -> Iterable[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for child in node.get("children", ()):
            yield from _nodes(child)


def _near(text: str, position: int) -> str:
    snippet = text[position : position + 20]
    return f": near {snippet!r}" if snippet else " (at the end)"


@dataclass(frozen=True)
class SearchQuery:
    """A checked query: `text` as typed, `expression` as JMESPath runs it."""

    text: str
    expression: str
    parsed: Any
    lazy: bool  # whether value and headers may be made only when the query asks for them

    def evaluate(self, doc: Mapping[str, Any]) -> Any:
        return Interpreter().evaluate(self.parsed.parsed, doc)

    def matches(self, doc: Mapping[str, Any]) -> bool:
        return truthy(self.evaluate(doc))


def truthy(result: Any) -> bool:
    """JMESPath's truth: false, null, "", [] and {} are false, everything else (0 too) true."""
    if result is None or result is False:
        return False
    if isinstance(result, (str, list, dict)):
        return bool(result)
    return True


def compile_query(text: str) -> SearchQuery:
    """`text` checked and compiled, or BadSearch saying what is wrong and where."""
    if not isinstance(text, str) or not text.strip():
        raise BadSearch("write a query, e.g. value.user.id == 42")
    if len(text) > MAX_QUERY_CHARS:
        raise BadSearch(f"a query has at most {MAX_QUERY_CHARS:,} characters, not {len(text):,}")
    try:
        expression, origin = _normalize(text)
    except jp_errors.LexerError as exc:
        at = exc.lexer_position
        raise BadSearch(f"{exc.message} at column {at + 1}{_near(text, at)}", at) from None
    try:
        parsed = jmespath.compile(expression)
    except jp_errors.IncompleteExpressionError:
        raise BadSearch(f"the query ends too early (column {len(text) + 1})", len(text)) from None
    except jp_errors.LexerError as exc:
        at = origin[min(exc.lexer_position, len(origin) - 1)]
        raise BadSearch(f"{exc.message} at column {at + 1}{_near(text, at)}", at) from None
    except jp_errors.ParseError as exc:
        at = origin[min(max(exc.lex_position, 0), len(origin) - 1)]
        what = "unexpected" if exc.msg == "Invalid jmespath expression" else exc.msg.lower()
        if exc.token_type == "eof":
            raise BadSearch(f"the query ends too early (column {at + 1})", at) from None
        raise BadSearch(
            f"{what} {exc.token_value!r} at column {at + 1}{_near(text, at)}", at
        ) from None
    except (jp_errors.JMESPathError, RecursionError) as exc:
        raise BadSearch(str(exc).splitlines()[0]) from None
    lazy = True
    for node in _nodes(parsed.parsed):
        kind = node.get("type")
        if kind in ("current", "identity"):
            lazy = False  # `@` may look at the whole document
        if kind == "function_expression":
            _check_call(node)
    return SearchQuery(text, expression, parsed, lazy)


def _check_call(node: dict[str, Any]) -> None:
    name = node["value"]
    spec = _FUNCTIONS.FUNCTION_TABLE.get(name)
    if spec is None:
        raise BadSearch(f"there is no function {name}() (docs/SEARCH.md lists them)")
    signature = spec["signature"]
    given = len(node["children"])
    if signature and signature[-1].get("variadic"):
        if given < len(signature):
            raise BadSearch(f"{name}() takes at least {len(signature)} arguments, not {given}")
    elif given != len(signature):
        raise BadSearch(f"{name}() takes {len(signature)} argument(s), not {given}")
    if name == "re2_match":
        pattern = node["children"][1]
        if pattern.get("type") == "literal" and isinstance(pattern.get("value"), str):
            try:
                _regex(pattern["value"])
            except InvalidArgument as exc:
                raise BadSearch(str(exc)) from None


# --- the document of a message --------------------------------------------------------------


def _text(data: Any) -> str | None:
    if data is None:
        return None
    if isinstance(data, str):
        return data
    return bytes(data).decode("utf-8", "replace")


def parse_value(data: Any, decoder: Any = None) -> Any:
    """A value as a query sees it: decoded with its schema (wire format), parsed JSON, or
    text; None for null."""
    if data is None:
        return None
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if decoder is not None and raw[:1] == b"\x00" and len(raw) >= 5:
        decoded = decoder.decode(raw)
        if decoded is not None and decoded.ok:
            return decoded.value
    text = raw.decode("utf-8", "replace")
    stripped = text.lstrip()
    if stripped and stripped[0] in _JSON_STARTS and len(raw) <= MAX_JSON_BYTES:
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            pass
    return text


def _headers(pairs: Any) -> dict[str, str | None]:
    # a name given twice keeps its last value (Kafka's lastHeader); Arrow gives dicts
    return {
        (p["key"] if isinstance(p, dict) else p[0]): _text(
            p["value"] if isinstance(p, dict) else p[1]
        )
        for p in pairs or ()
    }


class _Document(dict[str, Any]):
    """A message's document whose value and headers are made when the query first asks
    (JMESPath reads fields with `get`): a query on the key never parses the value."""

    __slots__ = ("_raw_value", "_raw_headers", "_decoder")
    _raw_value: bytes | None
    _raw_headers: Any  # as _headers takes them
    _decoder: Any

    def get(self, name: Any, default: Any = None) -> Any:
        if name == "value" and "value" not in self:
            self["value"] = parse_value(self._raw_value, self._decoder)
        elif name == "headers" and "headers" not in self:
            self["headers"] = _headers(self._raw_headers)
        return super().get(name, default)


def document(record: ConsumerRecord, decoder: Any = None) -> dict[str, Any]:
    """The document a query sees for `record` (docs/SEARCH.md)."""
    return {
        "key": _text(record.key),
        "value": parse_value(record.value, decoder),
        "headers": _headers(record.headers),
        "timestamp": record.timestamp,
        "offset": record.offset,
        "partition": record.partition,
    }


# --- the job ----------------------------------------------------------------------------------


RUNNING, DONE, CANCELLED, STOPPED, FAILED = "running", "done", "cancelled", "stopped", "failed"


@dataclass(frozen=True)
class Progress:
    """Where a search is. `covered` of `total` offsets are behind it (`scanned` messages:
    fewer when some have expired); `matches` matched, of which the first `kept` are kept.
    `state`: running, done (reached the end), cancelled, stopped (at `max_scanned`),
    failed (`error` says why). `errors` counts messages the query could not be evaluated
    on (a function given the wrong type), `first_error` says how."""

    state: str
    scanned: int
    covered: int
    total: int
    matches: int
    kept: int
    seconds: float
    errors: int = 0
    first_error: str = ""
    error: str = ""

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def percent(self) -> int:
        if self.state == DONE or not self.total:
            return 100 if self.state == DONE else 0
        return min(100, self.covered * 100 // self.total)

    @property
    def more_matched(self) -> bool:
        return self.matches > self.kept

    def describe(self) -> str:
        text = (
            f"Scanned {self.covered:,} of {self.total:,} offsets ({self.percent}%), "
            f"{self.matches:,} match{'' if self.matches == 1 else 'es'}"
        )
        if self.more_matched:
            text += f" (the first {self.kept:,} kept)"
        text += f", {self.seconds:.1f} s."
        if self.state == DONE:
            text += " Reached the end."
        elif self.state == CANCELLED:
            text += " Cancelled."
        elif self.state == STOPPED:
            text += " Stopped at the scan limit."
        elif self.state == FAILED:
            text += f" Failed: {self.error}"
        if self.errors:
            text += f" The query could not be evaluated on {self.errors:,} messages ({self.first_error})."
        return text


_ids = itertools.count(1)


class SearchJob:
    """One search running in a thread: `progress`, `results`, `cancel`, `wait`."""

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        query: SearchQuery,
        starts: dict[int, int],
        ends: dict[int, int],
        *,
        decoder: Any,
        max_matches: int,
        max_scanned: int,
        max_rate: int,
        stop_when_full: bool = False,
        mask: masking.Mask | None = None,
    ) -> None:
        self.seq = next(_ids)
        # hard to guess: a job's id is all its URL needs (the registry also checks the owner)
        self.id = f"{self.seq}-{secrets.token_hex(6)}"
        self.topic = topic
        self.query = query
        self.partitions = tuple(sorted(starts))
        self.starts = dict(starts)
        self.ends = dict(ends)
        self._consumer = consumer
        self._decoder = decoder
        self.mask = mask  # applied to each message before the query sees it
        self._max_matches = max_matches
        self._max_scanned = max_scanned
        self._max_rate = max_rate
        # stop at the first match past max_matches, its offset the partition's position, so
        # `positions` continues the search without losing a match (the JSON API's pages)
        self._stop_when_full = stop_when_full
        self._positions = dict(starts)
        self._lock = threading.Lock()
        self._results: list[ConsumerRecord] = []
        self._aborted: set[tuple[int, int]] = set()  # matches an aborted transaction wrote
        self._matches = 0
        self._scanned = 0
        self._covered = 0
        self._total = sum(max(0, ends[p] - starts[p]) for p in starts)
        self._errors = 0
        self._first_error = ""
        self._state = RUNNING
        self._error = ""
        self._cancel = threading.Event()
        self._finished = threading.Event()
        self._began = time.monotonic()
        self._ended: float | None = None
        self._thread = threading.Thread(target=self._run, name=f"search {topic}", daemon=True)

    # --- what callers use ---------------------------------------------------------------

    @property
    def progress(self) -> Progress:
        with self._lock:
            end = self._ended if self._ended is not None else time.monotonic()
            return Progress(
                self._state,
                self._scanned,
                self._covered,
                self._total,
                self._matches,
                len(self._results),
                end - self._began,
                self._errors,
                self._first_error,
                self._error,
            )

    @property
    def positions(self) -> dict[int, int]:
        """Per partition, the next offset to scan (its end once scanned to it): where a
        search of the rest of the range starts."""
        with self._lock:
            return dict(self._positions)

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    def results(self, start: int = 0, stop: int | None = None) -> list[ConsumerRecord]:
        """The matches kept so far (in the order found), from index `start`."""
        with self._lock:
            return self._results[start:stop]

    def is_aborted(self, record: ConsumerRecord) -> bool:
        """Whether a match was written by a transaction that aborted (read_committed
        readers never see it), as the consoles mark it."""
        with self._lock:
            return (record.partition, record.offset) in self._aborted

    def cancel(self) -> None:
        """Stop the search (it ends within one chunk); what it found stays."""
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the search to end; whether it did."""
        return self._finished.wait(timeout)

    # --- the thread ---------------------------------------------------------------------

    def _start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._scan()
        except Exception as exc:  # access revoked, the cluster closed ...: said, not raised
            with self._lock:
                self._state = FAILED
                self._error = str(exc) or type(exc).__name__
        finally:
            try:
                self._consumer.close(autocommit=False)
            except Exception:
                pass
            with self._lock:
                self._ended = time.monotonic()
            self._finished.set()

    def _scan(self) -> None:
        consumer = self._consumer
        tps = {p: TopicPartition(self.topic, p) for p in self.partitions}
        position = dict(self.starts)
        active = [p for p in self.partitions if position[p] < self.ends[p]]
        reading: int | None = None
        query = self.query
        interpreter = Interpreter(self._cancel)
        tree = query.parsed.parsed
        decoder = self._decoder
        lazy = query.lazy
        began = time.monotonic()
        while active:
            for p in list(active):
                if self._cancel.is_set():
                    self._finish(CANCELLED)
                    return
                if self._scanned >= self._max_scanned:
                    self._finish(STOPPED)
                    return
                tp = tps[p]
                if reading != p:
                    if reading is not None:
                        consumer.pause(tps[reading])
                    consumer.resume(tp)
                    reading = p
                end = self.ends[p]
                consumer.seek(tp, position[p])
                n = max(1, min(CHUNK, end - position[p], self._max_scanned - self._scanned))
                batch = consumer.poll_arrow(timeout_ms=0, max_records=n).get(tp)
                following = consumer.position(tp)
                hits: list[ConsumerRecord]
                if batch is None or batch.num_rows == 0:
                    following = end
                    hits, count, errors, first = [], 0, 0, ""
                else:
                    hits, count, errors, first, stopped_at = self._evaluate(
                        batch, p, end, interpreter, tree, decoder, lazy
                    )
                    if stopped_at is not None:  # cancelled: go on from there next time
                        following = stopped_at
                following = min(max(following, position[p]), end)
                aborted = (
                    consumer.aborted_ranges(tp, hits[0].offset, hits[-1].offset + 1) if hits else []
                )
                full = False
                with self._lock:
                    room = self._max_matches - len(self._results)
                    if self._stop_when_full and len(hits) > max(room, 0):
                        following = hits[max(room, 0)].offset  # the first match not kept
                        hits = hits[: max(room, 0)]
                        full = True
                    self._scanned += count
                    self._covered += following - position[p]
                    self._matches += len(hits)
                    if room > 0:
                        self._results.extend(hits[:room])
                        self._aborted |= {
                            (p, h.offset)
                            for h in hits[:room]
                            if any(a <= h.offset <= b for a, b in aborted)
                        }
                    self._errors += errors
                    if first and not self._first_error:
                        self._first_error = first
                position[p] = following
                with self._lock:
                    self._positions[p] = following
                if full:
                    self._finish(STOPPED)
                    return
                if following >= end:
                    active.remove(p)
                # keep to the rate: sleeping also leaves the interpreter to other threads
                ahead = self._scanned / self._max_rate - (time.monotonic() - began)
                if ahead > 0:
                    self._cancel.wait(ahead)
        self._finish(DONE)

    def _finish(self, state: str) -> None:
        with self._lock:
            self._state = state

    def _evaluate(
        self,
        batch: Any,
        partition: int,
        end: int,
        interpreter: Interpreter,
        tree: Any,
        decoder: Any,
        lazy: bool,
    ) -> tuple[list[ConsumerRecord], int, int, str, int | None]:
        """The matches, messages evaluated, errors, the first error, and the offset it
        stopped at when cancelled (else None). Cancel is looked at every CANCEL_MESSAGES
        messages and inside a long evaluation, so a cancel (the API's time bound) holds
        within milliseconds, however costly each message."""
        cancel = self._cancel
        offsets = batch.column("offset").to_pylist()
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        stamps = batch.column("timestamp").cast("int64").to_pylist()  # microseconds
        headers = batch.column("headers").to_pylist()
        kinds = batch.column("timestampType").to_pylist()
        hits: list[ConsumerRecord] = []
        errors = 0
        first = ""
        count = 0
        for i, offset in enumerate(offsets):
            if offset >= end:
                break
            if not i % CANCEL_MESSAGES and cancel.is_set():
                return hits, count, errors, first, offset
            count += 1
            pairs = headers[i]  # [{"key": name, "value": bytes}] or None; made pairs on use
            ms = stamps[i] // 1000
            key, value = keys[i], values[i]
            if self.mask is not None:
                found = [(h["key"], h["value"]) for h in pairs or ()]
                record = ConsumerRecord(
                    self.topic, partition, offset, ms, kinds[i], key, value, found
                )
                masked = self.mask.record(record)
                key, value, found = masked.key, masked.value, masked.headers
                pairs = [{"key": n, "value": v} for n, v in found]
            doc: dict[str, Any]
            if lazy:
                doc = lazy_doc = _Document(
                    key=_text(key), timestamp=ms, offset=offset, partition=partition
                )
                lazy_doc._raw_value = value
                lazy_doc._raw_headers = pairs
                lazy_doc._decoder = decoder
            else:
                doc = {
                    "key": _text(key),
                    "value": parse_value(value, decoder),
                    "headers": _headers(pairs),
                    "timestamp": ms,
                    "offset": offset,
                    "partition": partition,
                }
            try:
                matched = truthy(interpreter.evaluate(tree, doc))
            except _Cancelled:
                return hits, count - 1, errors, first, offset
            except (jp_errors.JMESPathError, InvalidArgument, TypeError, ValueError) as exc:
                errors += 1
                if not first:
                    why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    # the error may quote the whole value: a line is enough
                    first = f"offset {offset}: {why[:200]}"
                continue
            if matched:
                found = [(h["key"], h["value"]) for h in pairs or ()]
                hits.append(
                    ConsumerRecord(self.topic, partition, offset, ms, kinds[i], key, value, found)
                )
        return hits, count, errors, first, None


def _positions(
    consumer: Consumer,
    tps: dict[int, TopicPartition],
    seek: Seek | None,
    begins: dict[int, int],
    ends: dict[int, int],
    default: dict[int, int],
) -> dict[int, int]:
    if seek is None:
        return dict(default)
    if seek.kind == "oldest":
        return dict(begins)
    if seek.kind == "newest":
        return dict(ends)
    assert seek.value is not None
    if seek.kind == "offset":
        return {p: min(max(seek.value, begins[p]), ends[p]) for p in ends}
    found = consumer.offsets_for_times({tp: seek.value for tp in tps.values()})
    return {tp.partition: ends[tp.partition] if f is None else f.offset for tp, f in found.items()}


def search(
    cluster: Any,
    topic: str,
    query: str | SearchQuery,
    *,
    partitions: Iterable[int] | None = None,
    start: Seek = OLDEST,
    end: Seek | None = None,
    principal: Any = None,
    max_matches: int = MAX_MATCHES,
    max_scanned: int = MAX_SCANNED,
    max_rate: int = MAX_RATE,
    schemas: bool = True,
    positions: Mapping[int, int] | None = None,
    stop_when_full: bool = False,
) -> SearchJob:
    """Start searching `topic` for the messages `query` matches, from `start` (a `Seek`:
    oldest by default) up to `end` (a `Seek`, exclusive: an offset, a time, or None for
    the end of each partition as the search starts), in a thread; answers the running
    `SearchJob` (cancel it and `wait()` before closing the cluster). Raises at once (nothing started) `BadSearch` for a bad query, `BadQuery`
    for a partition the topic lacks, `AccessDenied`, `UnknownTopic`. `principal` (else the
    cluster's own) is whom the consume permission is checked for. `positions` (a
    partition's offset, e.g. a previous job's `positions`) overrides `start` for the
    partitions it names; `stop_when_full` ends the search at the first match past
    `max_matches` (see `SearchJob.positions`)."""
    compiled = query if isinstance(query, SearchQuery) else compile_query(query)
    for name, number in (
        ("max_matches", max_matches),
        ("max_scanned", max_scanned),
        ("max_rate", max_rate),
    ):
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise InvalidArgument(f"{name} must be a whole number from 1, not {number!r}")
    if principal is not None:
        cluster = cluster.as_principal(principal)
    info = cluster.topic(topic)
    chosen = chosen_partitions(info, partitions)
    tps = {p: TopicPartition(info.name, p) for p in chosen}
    consumer = Consumer(cluster, enable_auto_commit=False)
    try:
        consumer.assign(list(tps.values()))  # checks the consume permission
        consumer.pause(*tps.values())  # one partition is read at a time
        begins = {
            tp.partition: o for tp, o in consumer.beginning_offsets(list(tps.values())).items()
        }
        ends = {tp.partition: o for tp, o in consumer.end_offsets(list(tps.values())).items()}
        starts = _positions(consumer, tps, start, begins, ends, begins)
        for p, offset in (positions or {}).items():
            if p in starts:  # clamped: an expired position starts at the log's start
                starts[p] = min(max(offset, begins[p]), ends[p])
        stops = _positions(consumer, tps, end, begins, ends, ends)
        stops = {p: max(starts[p], stops[p]) for p in stops}
        mask = masking.for_reader(cluster, info)
        decoder = None
        if schemas:
            from engine.client.schemas import SchemaDecoder

            decoder = SchemaDecoder(cluster.schemas, topic=info.name)
        job = SearchJob(
            consumer,
            info.name,
            compiled,
            starts,
            stops,
            decoder=decoder,
            max_matches=max_matches,
            max_scanned=max_scanned,
            max_rate=max_rate,
            stop_when_full=stop_when_full,
            mask=mask,
        )
    except BaseException:
        consumer.close(autocommit=False)
        raise
    job._start()
    return job


class TooManySearches(TryLater):
    """A search refused because its owner, or the whole process, runs as many as allowed."""


class SearchJobs:
    """The searches of one process, by owner (a user's name): at most `per_owner` of an
    owner's and `running` in all run at once, however they were started.

    `start` (the web console's searches, kept to be looked at): at most `per_owner` kept
    per owner (starting one more cancels and forgets the oldest), and one more than
    `running` cancels the oldest running. `run` (the JSON API's searches, answered within
    their request and not kept): refused with TooManySearches when the owner already runs
    `per_owner` or the process `running`."""

    def __init__(self, per_owner: int = JOBS_PER_OWNER, running: int = JOBS_RUNNING) -> None:
        self.per_owner = per_owner
        self.running = running
        self._lock = threading.Lock()
        self._jobs: dict[str, list[SearchJob]] = {}  # kept, by owner
        self._unkept: dict[str, list[SearchJob]] = {}  # run, by owner, until they end
        self._starting: dict[str, int] = {}  # run, by owner, not yet started

    def start(
        self, owner: str, cluster: Any, topic: str, query: str | SearchQuery, **kwargs: Any
    ) -> SearchJob:
        job = search(cluster, topic, query, **kwargs)
        with self._lock:
            mine = self._jobs.setdefault(owner, [])
            mine.append(job)
            while len(mine) > self.per_owner:
                mine.pop(0).cancel()
            live = sorted(
                (j for jobs in self._every() for j in jobs if not j.done),
                key=lambda j: j.seq,
            )
            for old in live[: max(0, len(live) - self.running)]:
                old.cancel()
        return job

    def run(
        self, owner: str, cluster: Any, topic: str, query: str | SearchQuery, **kwargs: Any
    ) -> SearchJob:
        """Start a search not kept (the caller cancels it and waits for it); TooManySearches
        when the bounds are reached, nothing started."""
        with self._lock:
            for jobs in self._unkept.values():
                jobs[:] = [j for j in jobs if not j.done]
            mine = sum(not j.done for j in self._jobs.get(owner, ()))
            mine += len(self._unkept.get(owner, ())) + self._starting.get(owner, 0)
            if mine >= self.per_owner:
                raise TooManySearches(
                    f"{owner} already runs {mine} searches: at most {self.per_owner} at once"
                )
            live = sum(not j.done for jobs in self._every() for j in jobs)
            if live + sum(self._starting.values()) >= self.running:
                raise TooManySearches(
                    f"the server runs {self.running} searches already: try again shortly"
                )
            self._starting[owner] = self._starting.get(owner, 0) + 1
        job = None
        try:
            job = search(cluster, topic, query, **kwargs)
            return job
        finally:
            with self._lock:
                self._starting[owner] -= 1
                if not self._starting[owner]:
                    del self._starting[owner]
                if job is not None:
                    self._unkept.setdefault(owner, []).append(job)

    def _every(self) -> Iterator[list[SearchJob]]:
        yield from self._jobs.values()
        yield from self._unkept.values()

    def get(self, owner: str, job_id: str) -> SearchJob | None:
        with self._lock:
            for job in self._jobs.get(owner, ()):
                if job.id == job_id:
                    return job
        return None

    def of(self, owner: str) -> list[SearchJob]:
        with self._lock:
            return list(self._jobs.get(owner, ()))

    def close(self, timeout: float = 10.0) -> None:
        """Cancel every job and wait for their threads (before the cluster closes: a
        thread still reading a closing cluster could crash the process)."""
        with self._lock:
            every = [job for jobs in self._every() for job in jobs]
            self._jobs.clear()
            self._unkept.clear()
        for job in every:
            job.cancel()
        deadline = time.monotonic() + timeout
        for job in every:
            job.wait(max(0.0, deadline - time.monotonic()))
