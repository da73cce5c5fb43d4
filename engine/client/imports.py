"""Import: the messages of a file in the export's own shape written into a topic.

A file is JSON lines (`browse.jsonl_lines`: one `browse.record_json` object a line) or CSV
(`browse.csv_lines`: a header row of `browse.CSV_COLUMNS`, `headers` as its JSON text), so a
download imports as it is (docs/API.md, "Records"). Of a record, `key`, `value`, their
encodings, `headers`, `partition` and `timestamp` (else `time`) are written; `topic`,
`offset` and `timestamp_type` are the source's and are not (the target gives offsets).
Only `value` is required: `{"value": "hello"}` is a line too.

Three steps, each a frontend's (the web console's Import, `plet topic import`):

- `parse` reads the whole file and checks every line, listing each bad one (`LineError`:
  its line and what is wrong) without stopping at the first;
- `plan` checks the records against the target topic (the produce permission, its
  partitions, its `max_message_bytes`) and says what would be written: the dry run. A plan
  with an error writes nothing, so an invalid file never half-imports;
- `write` (or `ImportJob`, the same in a thread, with its progress) writes a valid plan
  with a `Producer` on the caller's cluster, so its ACEs decide, in the file's order: each
  partition gets its messages in the order of the file.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import csv
import io
import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from engine import errors, times
from engine.client.browse import CSV_COLUMNS, unneutralize
from engine.client.producer import MAX_HEADERS, Producer
from engine.records import TopicInfo
from engine.storage.batch import MAX_TIMESTAMP_MS

__all__ = [
    "FORMATS",
    "ImportFile",
    "ImportJob",
    "ImportJobs",
    "ImportPlan",
    "ImportRecord",
    "LineError",
    "decoded",
    "format_of",
    "parse",
    "plan",
    "write",
]

FORMATS = ("jsonl", "csv")
# A file holds at most this many messages (the largest download), and a plan lists at most
# MAX_ERRORS of its bad lines (it counts them all).
MAX_RECORDS = 1_000_000
MAX_ERRORS = 100
# Messages sent between two flushes: the progress moves by this much at most.
CHUNK = 1000
FIELDS = frozenset(CSV_COLUMNS)
ENCODINGS = ("utf-8", "base64")


@dataclass(frozen=True)
class LineError:
    """A line (a CSV row: the file's line where it starts) the import refuses, and why;
    line 0 is the file as a whole."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass(frozen=True)
class ImportRecord:
    """A message to write, from line `line` of the file; `partition` and `timestamp` None
    when the file does not give them (the producer chooses)."""

    line: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    partition: int | None
    timestamp: int | None

    @property
    def size(self) -> int:
        """Bytes as `max_message_bytes` counts them (the producer's rule)."""
        size = len(self.value or b"") + len(self.key or b"")
        return size + sum(len(k) + len(v or b"") for k, v in self.headers)


@dataclass
class ImportFile:
    """A parsed file: its records, and its bad lines (the first MAX_ERRORS of
    `error_count`)."""

    format: str
    records: list[ImportRecord] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    error_count: int = 0

    @property
    def ok(self) -> bool:
        return not self.error_count

    def refuse(self, line: int, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(LineError(line, message))


def format_of(filename: str) -> str | None:
    """The format a file's name says: .jsonl, .ndjson or .json -> "jsonl", .csv -> "csv"."""
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    return None


def decoded(data: Any, encoding: Any, what: str) -> bytes | None:
    """The bytes of a key, value or header value written as `browse.encoded` writes it:
    text and "utf-8" (or no encoding), base64 text and "base64", or None. Raises
    InvalidArgument saying what is wrong with it (`what` names it)."""
    if data is None:
        if encoding is not None:
            raise errors.InvalidArgument(f"{what} is null but its encoding is {encoding!r}")
        return None
    if not isinstance(data, str):
        raise errors.InvalidArgument(f"{what} must be text or null, not {_kind(data)}")
    if encoding is None or encoding == "utf-8":
        try:
            return data.encode("utf-8")
        except UnicodeEncodeError:
            raise errors.InvalidArgument(f"{what} is not valid Unicode text") from None
    if encoding == "base64":
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise errors.InvalidArgument(f"{what} is not valid base64") from None
    raise errors.InvalidArgument(
        f"{what}'s encoding must be 'utf-8', 'base64' or null, not {_shown(encoding)}"
    )


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", bool: "true/false"}.get(
        type(value), type(value).__name__
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _headers(raw: Any) -> tuple[tuple[str, bytes | None], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise errors.InvalidArgument(
            f"headers must be a list of {{name, value, encoding}}, not {_kind(raw)}"
        )
    if len(raw) > MAX_HEADERS:
        raise errors.InvalidArgument(f"a message may carry at most {MAX_HEADERS:,} headers")
    found = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise errors.InvalidArgument(f"headers[{i}] needs a text name")
        unknown = set(item) - {"name", "value", "encoding"}
        if unknown:
            raise errors.InvalidArgument(f"headers[{i}] has unknown fields {sorted(unknown)}")
        value = decoded(item.get("value"), item.get("encoding"), f"headers[{i}].value")
        found.append((item["name"], value))
    return tuple(found)


def _whole(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())  # CSV cells are text
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise errors.InvalidArgument(
            f"{what} must be a whole number from {low} to {high:,}, not {_shown(value)}"
        )
    return value


def _record(line: int, obj: dict[str, Any]) -> ImportRecord:
    """The record of one line's fields (`record_json`'s names)."""
    unknown = set(obj) - FIELDS
    if unknown:
        raise errors.InvalidArgument(
            f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(sorted(unknown))} "
            f"(a record has {', '.join(CSV_COLUMNS)})"
        )
    if "value" not in obj:
        raise errors.InvalidArgument("no value (null for a tombstone)")
    key = decoded(obj.get("key"), obj.get("key_encoding"), "key")
    value = decoded(obj.get("value"), obj.get("value_encoding"), "value")
    headers = _headers(obj.get("headers"))
    partition = obj.get("partition")
    if partition is not None:
        partition = _whole(partition, "partition", 0, 2**31 - 1)
    stamp = obj.get("timestamp")
    if stamp is not None:
        stamp = _whole(stamp, "timestamp", 0, MAX_TIMESTAMP_MS)
    elif obj.get("time") is not None:
        if not isinstance(obj["time"], str):
            raise errors.InvalidArgument(f"time must be text, not {_kind(obj['time'])}")
        try:
            stamp = times.parse_time(obj["time"])
        except errors.InvalidArgument as exc:
            raise errors.InvalidArgument(f"time: {exc}") from None
    return ImportRecord(line, key, value, headers, partition, stamp)


def _text(source: IO[bytes], found: ImportFile) -> str | None:
    """The file as text (UTF-8, a BOM skipped), or None (and the error) when it is not."""
    data = source.read()
    try:
        return codecs.decode(data, "utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        found.refuse(line, "the file is not UTF-8 text")
        return None


def _jsonl(text: str, found: ImportFile) -> Iterator[tuple[int, dict[str, Any]]]:
    # lines end at LF alone: JSON text may hold U+2028 and the like, which str.splitlines
    # would break at
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            found.refuse(number, f"not JSON ({exc.msg} at column {exc.colno})")
            continue
        except RecursionError:
            found.refuse(number, "JSON nested too deeply to read")
            continue
        if not isinstance(obj, dict):
            found.refuse(number, f"a line is a JSON object (a record), not {_kind(obj)}")
            continue
        yield number, obj


def _csv(text: str, found: ImportFile, formulas: bool) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        columns = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        found.refuse(1, f"not CSV: {exc}")
        return
    unknown = [c for c in columns if c not in FIELDS]
    if unknown or "value" not in columns or len(set(columns)) != len(columns):
        found.refuse(
            1,
            f"the header row names the columns of a download ({', '.join(CSV_COLUMNS)}), "
            f"at least value, each once; not {', '.join(columns) or 'nothing'}",
        )
        return
    while True:
        number = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            found.refuse(number, f"not CSV: {exc}")
            return
        if not row:
            continue
        if len(row) != len(columns):
            found.refuse(number, f"{len(row)} cells, the header row has {len(columns)}")
            continue
        cells = dict(zip(columns, row, strict=True))
        if not formulas:  # what csv_lines did to a cell a spreadsheet would run
            cells = {c: unneutralize(v) for c, v in cells.items()}
        yield number, _csv_record(cells)


def _csv_record(cells: dict[str, str]) -> dict[str, Any]:
    """A CSV row as `record_json`'s fields: an empty cell is null (a download writes a
    null key or value as two empty cells; an empty one has its encoding), and `headers`
    is JSON text."""
    obj: dict[str, Any] = {c: (v if v != "" else None) for c, v in cells.items()}
    for name in ("key", "value"):
        if obj.get(name) is None and obj.get(f"{name}_encoding") is not None:
            obj[name] = ""  # an empty key or value: its encoding says it is not null
    raw = obj.get("headers")
    if raw is not None:
        try:
            obj["headers"] = json.loads(raw)
        except json.JSONDecodeError as exc:
            obj["headers"] = _BadHeaders(f"headers is not JSON ({exc.msg} at column {exc.colno})")
        except RecursionError:
            obj["headers"] = _BadHeaders("headers is JSON nested too deeply to read")
    return obj


class _BadHeaders(str):
    """A CSV headers cell that is not JSON: refused with its line."""


def parse(source: IO[bytes] | bytes, fmt: str, *, formulas: bool = False) -> ImportFile:
    """Read and check the file `source` (bytes, or a binary file) of format `fmt` ("jsonl"
    or "csv"); every bad line is in the answer's errors. CSV cells are taken as a download
    neutralized them for spreadsheets (`browse.unneutralize`), unless `formulas` says they
    are exact (a download with formulas kept)."""
    if fmt not in FORMATS:
        raise errors.InvalidArgument(f"import JSON lines (jsonl) or CSV (csv), not {fmt!r}")
    found = ImportFile(fmt)
    text = _text(io.BytesIO(source) if isinstance(source, bytes) else source, found)
    if text is None:
        return found
    rows = _jsonl(text, found) if fmt == "jsonl" else _csv(text, found, formulas)
    for number, obj in rows:
        if len(found.records) >= MAX_RECORDS:
            found.refuse(number, f"a file imports at most {MAX_RECORDS:,} messages")
            break
        if isinstance(obj.get("headers"), _BadHeaders):
            found.refuse(number, obj["headers"])
            continue
        try:
            found.records.append(_record(number, obj))
        except errors.InvalidArgument as exc:
            found.refuse(number, str(exc))
    if found.ok and not found.records:
        found.refuse(0, "the file holds no message")
    return found


# --- the dry run -------------------------------------------------------------------------------


@dataclass
class ImportPlan:
    """What an import of `file` into `topic` would write: the messages per partition
    (None: the producer's choice, by key or round-robin), the times they span, notes, and
    the file's bad lines with those the topic refuses. Only a plan that is `ok` writes."""

    topic: TopicInfo
    file: ImportFile
    keep_partitions: bool
    by_partition: dict[int | None, int]
    first_ms: int | None
    last_ms: int | None
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.file.ok

    @property
    def records(self) -> list[ImportRecord]:
        return self.file.records

    @property
    def errors(self) -> list[LineError]:
        return self.file.errors

    @property
    def error_count(self) -> int:
        return self.file.error_count

    def describe(self) -> str:
        """One line: what would be written where, or how many lines are refused."""
        if not self.ok:
            count = self.error_count
            return f"Nothing written: {count:,} line{'' if count == 1 else 's'} refused."
        total = len(self.records)
        parts = ", ".join(
            f"{n:,} to partition {p}" if p is not None else f"{n:,} by key or round-robin"
            for p, n in sorted(self.by_partition.items(), key=lambda i: (i[0] is None, i[0]))
        )
        return f"{total:,} message{'' if total == 1 else 's'} into {self.topic.name}: {parts}."


def plan(cluster: Any, topic: str, file: ImportFile, *, keep_partitions: bool = True) -> ImportPlan:
    """Check `file` against `topic` (a full name) as the cluster's principal: AccessDenied
    without its stream's produce permission (nothing else is told then); each record whose
    partition the topic lacks (with `keep_partitions`; else the producer chooses) or
    that is larger than its `max_message_bytes` is a bad line of the plan."""
    info = cluster.topic(topic)
    cluster.authorize(info.stream, "produce_perm", what="import messages into")
    count = info.partition_count
    limit = int(info.policies.get("max_message_bytes") or 0)
    by_partition: dict[int | None, int] = {}
    stamps = []
    for r in file.records:
        partition = r.partition if keep_partitions else None
        if partition is not None and partition >= count:
            file.refuse(
                r.line,
                f"partition {partition}: {info.name} has partitions 0 to {count - 1} "
                "(import by key instead of the file's partitions)",
            )
            continue
        if limit and r.size > limit:
            file.refuse(
                r.line,
                f"{r.size:,} bytes (key, value and headers), more than the topic's "
                f"max_message_bytes={limit:,}",
            )
            continue
        by_partition[partition] = by_partition.get(partition, 0) + 1
        if r.timestamp is not None:
            stamps.append(r.timestamp)
    notes = []
    if info.policies.get("timestamp_type") == "log_append":
        notes.append(
            f"{info.name} stamps messages with the time they are written (log_append): the "
            "file's timestamps are not kept."
        )
    if len(stamps) < len(file.records):
        notes.append("Messages without a timestamp get the time they are written.")
    file.errors.sort(key=lambda e: e.line)
    return ImportPlan(
        info,
        file,
        keep_partitions,
        by_partition,
        min(stamps) if stamps else None,
        max(stamps) if stamps else None,
        tuple(notes),
    )


# --- writing -----------------------------------------------------------------------------------


def write(
    cluster: Any,
    checked: ImportPlan,
    *,
    progress: Callable[[int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> int:
    """Write the messages of a valid plan (InvalidArgument for one with errors) into its
    topic, in the file's order, with one producer on `cluster` (acks all); `progress` is
    called with the count written (committed) after each CHUNK. Answers the count."""
    if not checked.ok:
        raise errors.InvalidArgument(checked.describe())
    name = checked.topic.name
    written = 0
    producer = Producer(cluster, acks="all")
    try:
        for chunk in _chunks(checked.records, CHUNK):
            if cancelled is not None and cancelled():
                break
            futures = [
                producer.send(
                    name,
                    value=r.value,
                    key=r.key,
                    partition=r.partition if checked.keep_partitions else None,
                    headers=list(r.headers) or None,
                    timestamp_ms=r.timestamp,
                )
                for r in chunk
            ]
            producer.flush()
            for future in futures:
                future.get(timeout=60)  # raises what the write met
            written += len(chunk)
            if progress is not None:
                progress(written)
    finally:
        producer.close()
    return written


def _chunks(records: list[ImportRecord], size: int) -> Iterable[list[ImportRecord]]:
    for start in range(0, len(records), size):
        yield records[start : start + size]


RUNNING, DONE, CANCELLED, FAILED = "running", "done", "cancelled", "failed"
_ids = itertools.count(1)


class ImportJob:
    """`write` in a thread: `state`, `written` of `total`, `error` when it failed."""

    def __init__(self, cluster: Any, checked: ImportPlan) -> None:
        if not checked.ok:
            raise errors.InvalidArgument(checked.describe())
        self.seq = next(_ids)
        # hard to guess: a job's id is all its URL needs (ImportJobs also checks the owner)
        self.id = f"{self.seq}-{secrets.token_hex(6)}"
        self.topic = checked.topic.name
        self.total = len(checked.records)
        self.state = RUNNING
        self.written = 0
        self.error = ""
        self.began = time.monotonic()
        self.ended: float | None = None
        self._cluster = cluster
        self._plan: ImportPlan | None = checked
        self._cancel = threading.Event()
        self._finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"import {self.topic}", daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    @property
    def percent(self) -> int:
        return 100 if self.state == DONE else self.written * 100 // max(self.total, 1)

    @property
    def seconds(self) -> float:
        return (self.ended or time.monotonic()) - self.began

    def describe(self) -> str:
        text = f"Wrote {self.written:,} of {self.total:,} messages ({self.percent}%)"
        if self.state == DONE:
            return text + f" into {self.topic} in {self.seconds:.1f} s."
        if self.state == CANCELLED:
            return text + ": cancelled."
        if self.state == FAILED:
            return text + f": failed: {self.error}"
        return text + "…"

    def cancel(self) -> None:
        """Stop after the chunk being written (what is written stays)."""
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._finished.wait(timeout)

    def _progress(self, written: int) -> None:
        self.written = written

    def _run(self) -> None:
        assert self._plan is not None
        try:
            write(self._cluster, self._plan, progress=self._progress, cancelled=self._cancel.is_set)
            self.state = CANCELLED if self._cancel.is_set() and self.written < self.total else DONE
        except Exception as exc:  # access revoked, the cluster closed ...: said, not raised
            self.state = FAILED
            self.error = str(exc) or type(exc).__name__
        finally:
            self._plan = None  # the records are not kept once written
            self.ended = time.monotonic()
            self._finished.set()


class ImportJobs:
    """The imports of one process, by owner (a user's name): one running per owner at a
    time (another is refused with TryLater), the last `kept` of each kept to be looked at."""

    def __init__(self, kept: int = 5) -> None:
        self.kept = kept
        self._lock = threading.Lock()
        self._jobs: dict[str, list[ImportJob]] = {}

    def start(self, owner: str, cluster: Any, checked: ImportPlan) -> ImportJob:
        with self._lock:
            mine = self._jobs.setdefault(owner, [])
            if any(not j.done for j in mine):
                raise errors.TryLater(
                    "your previous import is still being written: wait for it to finish", 2
                )
            job = ImportJob(cluster, checked)
            mine.append(job)
            del mine[: max(0, len(mine) - self.kept)]
        return job

    def get(self, owner: str, job_id: str) -> ImportJob | None:
        with self._lock:
            return next((j for j in self._jobs.get(owner, ()) if j.id == job_id), None)

    def close(self) -> None:
        """Cancel every import and wait for them (before the cluster closes)."""
        with self._lock:
            jobs = [j for mine in self._jobs.values() for j in mine]
        for job in jobs:
            job.cancel()
        for job in jobs:
            job.wait(60)
