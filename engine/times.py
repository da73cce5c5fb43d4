"""The one grammar of a time written as text (DESIGN.md, "Times, headers and records in
text"), shared by the CLI, the web console and its API, the terminal console and the Spark
jobs, so that one string means one instant everywhere.

A time is ISO 8601 (`2024-05-01T12:00:00Z`, `2024-05-01T14:00+02:00`, `2024-05-01T12:00`,
`2024-05-01`) or a whole number of epoch milliseconds. A time written without a zone is
UTC, never the machine's local time: every console shows times in UTC, and a command must
not mean another instant when it runs on a machine in another zone. A time lies from 1970
to the end of the year 9999 (the range of a stored timestamp, engine.storage.batch.MAX_TIMESTAMP_MS).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from engine.errors import InvalidArgument
from engine.storage.batch import MAX_TIMESTAMP_MS

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_INTEGER = re.compile(r"-?[0-9]+")

# What help texts, placeholders and error messages say a time is.
TIME_FORMS = (
    "ISO 8601, e.g. 2024-05-01T12:00:00Z or 2024-05-01 (a time without a zone is UTC), "
    "or epoch milliseconds"
)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def check_ms(ms: int, shown: str | None = None) -> int:
    """`ms` if it is a time from 1970 to the year 9999, else InvalidArgument."""
    what = shown if shown is not None else f"{ms:,} ms"
    if ms < 0:
        raise InvalidArgument(f"{what} is before 1970: no message can be that old")
    if ms > MAX_TIMESTAMP_MS:
        raise InvalidArgument(
            f"{what} is too far in the future (after the year 9999; at most epoch "
            f"milliseconds {MAX_TIMESTAMP_MS:,})"
        )
    return ms


def utc(moment: datetime) -> datetime:
    """`moment` with its zone; a naive datetime is taken to be UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def datetime_ms(moment: datetime, shown: str | None = None) -> int:
    """Epoch milliseconds of `moment` (UTC when naive), from 1970 to the year 9999."""
    # exact integer arithmetic, not `timestamp() * 1000`, whose float can be off by one ms
    ms = (utc(moment) - EPOCH) // _MS
    return check_ms(ms, shown if shown is not None else _shown(moment.isoformat()))


def to_datetime(ms: int) -> datetime:
    """The UTC datetime of epoch milliseconds `ms` (from 1970 to the year 9999)."""
    return EPOCH + check_ms(ms) * _MS


def parse_time(text: str) -> int:
    """Epoch milliseconds of a time written as text (see the module docstring); a bad or
    out-of-range time raises InvalidArgument (a ValueError) saying what a time is."""
    s = text.strip() if isinstance(text, str) else ""
    if s.isascii() and _INTEGER.fullmatch(s):
        if len(s.lstrip("-")) > 19:  # far past any range, and int() of it would be slow
            return check_ms(-1 if s.startswith("-") else MAX_TIMESTAMP_MS + 1, _shown(text))
        return check_ms(int(s), _shown(text))
    try:
        moment = datetime.fromisoformat(s)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{_shown(str(text))} is not a time: write {TIME_FORMS}") from None
    return datetime_ms(moment, _shown(text))


# --- times and durations shown to people ------------------------------------------------------

# A duration's units in ms, largest first: a duration is shown in the largest one that holds
# it whole.
_DURATION_UNITS_MS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000))


def format_ms(ms: int | None, *, seconds: bool = False) -> str:
    """Epoch milliseconds as UTC text for people, the same in every frontend (the CLI's
    tables, the web pages, the terminal console, `plet replay`): `2024-05-01 12:00:00.123Z`,
    or `2024-05-01 12:00:00Z` with `seconds=True`. The `Z` says UTC, and `parse_time` reads
    the text back (seek by time). None (not known) or a negative time (Kafka's -1, no
    timestamp) is "-"."""
    if ms is None or ms < 0:
        return "-"
    text = (EPOCH + ms * _MS).strftime("%Y-%m-%d %H:%M:%S")  # exact: no float on the way
    return f"{text}Z" if seconds else f"{text}.{ms % 1000:03d}Z"


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC to the millisecond, `2024-05-01T12:00:00.123Z`:
    the `time` of a record's JSON (docs/API.md), for programs rather than people."""
    return format_ms(ms).replace(" ", "T", 1)


# What `parse_duration` reads: a number and a unit, repeated ("1h30m", "7 d", "500ms"); a
# number may group its thousands with commas, as `format_duration` shows it ("1,200 d").
_DURATION_PART = re.compile(
    r"\s*([0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?)\s*([a-z]+)", re.IGNORECASE
)
_DURATION_SIZES_MS = {
    "ms": 1, "msec": 1,
    "s": 1_000, "sec": 1_000, "secs": 1_000, "second": 1_000, "seconds": 1_000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hr": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
    "w": 604_800_000, "week": 604_800_000, "weeks": 604_800_000,
}  # fmt: skip


class NotADuration(ValueError):
    """Text that is no duration at all (as opposed to one with a bad unit or a fraction)."""


def parse_duration(text: str, unit_ms: int = 1_000) -> int:
    """A duration typed by a person, in units of `unit_ms` milliseconds (1,000: seconds,
    1: milliseconds): a whole number is in those units; else numbers with units, summed
    ("2d", "90m", "500ms", "1h30m", and what `format_duration` and `format_duration_ms`
    show: "7 d", "5 min", "12.5 s", "1,500 ms"). ValueError saying what is accepted, also for
    a duration that is not a whole number of the units ("500ms" in seconds)."""
    raw = text.strip()
    if re.fullmatch(r"[0-9]{1,20}", raw):
        return int(raw)
    total_ms = Decimal(0)  # exact: a float would round a duration of centuries in ms
    pos = 0
    for part in _DURATION_PART.finditer(raw):
        if part.start() != pos:
            break
        size = _DURATION_SIZES_MS.get(part.group(2).lower())
        if size is None:
            raise ValueError(
                f"{_shown(text)}: {part.group(2)!r} is not a unit of time (ms, s, m or min, "
                "h, d, w)"
            )
        total_ms += Decimal(part.group(1).replace(",", "")) * size
        pos = part.end()
    if not raw or pos != len(raw) or pos == 0:
        raise NotADuration(
            f"{_shown(text)} is not a duration: give a whole number, or numbers with units "
            "such as 2d, 90m, 1h30m or 500ms"
        )
    units, rest = divmod(int(total_ms), unit_ms)
    if rest or total_ms != int(total_ms):
        what = {1: "milliseconds", 1_000: "seconds"}.get(unit_ms, f"units of {unit_ms} ms")
        raise ValueError(f"{_shown(text)} is not a whole number of {what}")
    return int(units)


def format_duration(seconds: float | None, *, zero: str = "0 s") -> str:
    """A duration for people, the same in every frontend: in the largest unit that holds it
    whole ("7 d", "12 h", "5 min", "30 s"), else in seconds to a tenth ("12.3 s"). `zero`
    is what 0 says (a TTL of 0 keeps forever: `zero="forever"`); None (not known) is "-"."""
    if seconds is None:
        return "-"
    if seconds == 0:
        return zero
    if seconds != int(seconds):
        return f"{seconds:,.1f} s"
    return format_duration_ms(int(seconds) * 1_000, zero=zero)


def format_duration_ms(ms: int, *, zero: str = "0 s") -> str:
    """A duration of `ms` milliseconds exactly, in the largest unit that holds it whole
    ("7 d", "90 min", "1,500 ms"), as `format_duration` shows whole seconds; `parse_duration`
    reads it back to the same value. `zero` is what 0 says (a form shows "0")."""
    if ms == 0:
        return zero
    for unit, size in _DURATION_UNITS_MS:
        if ms % size == 0:
            return f"{ms // size:,} {unit}"
    return f"{ms:,} ms"
