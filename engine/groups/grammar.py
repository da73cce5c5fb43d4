"""The words of a group offset reset, parsed once for every frontend: where to reset to
(`earliest`, `latest`, an offset, a time, or the committed offset shifted by N) and which
partitions (`0, 2, 5-7`).

`reset_target` reads what `Cluster.reset_offsets` takes from a program; `parse_target`
reads one value typed by a person (the CLI's `--to`, the JSON API's `"to"`); `form_target`
reads a form's choice of kind and its value (the web form, the terminal console). All three
give a `ResetTarget`, which `Cluster.plan_offset_reset` takes as it is. Each bad input
raises an `errors` class with a message saying what is wanted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engine import times
from engine.errors import InvalidArgument, InvalidOffset, InvalidPartition

# The kinds of target a form offers, with what each means.
TARGETS = (
    ("earliest", "the oldest message"),
    ("latest", "after the newest message"),
    ("offset", "an offset (clamped to what exists)"),
    ("time", "the first message at or after a time"),
    ("shift", "the committed offset shifted by N (clamped)"),
)
TARGET_KINDS = tuple(kind for kind, _ in TARGETS)
MAX_OFFSET = 2**63 - 1  # what SQLite stores
MAX_SHIFT = 10**18 - 1  # "shift:±N" takes up to 18 digits
MAX_PARTITION_TEXT = 2000  # a partition list longer than this is not one a person typed
MAX_RANGE = 100_000  # partitions in one "a-b" range

_SHIFT = re.compile(r"shift:([+-]?[0-9]{1,18})", re.ASCII)
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_SIGNED = re.compile(r"[+-]?([0-9]{1,18})", re.ASCII)


@dataclass(frozen=True)
class ResetTarget:
    """Where a reset goes: `kind` is "earliest", "latest", "offset" (value: the offset),
    "time" (value: epoch ms) or "shift" (value: ±N from the committed offset)."""

    kind: str
    value: int = 0

    def __str__(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "shift":
            return f"shift:{self.value:+d}"
        return f"{self.kind} {self.value}"


# What `Cluster.reset_offsets(..., to)` takes.
ResetTo = str | int | datetime | ResetTarget


def reset_target(to: object) -> ResetTarget:
    """The target of `Cluster.reset_offsets(..., to)`: "earliest", "latest", an offset
    >= 0, a datetime (UTC when naive), "shift:-N"/"shift:+N", or a ResetTarget."""
    if isinstance(to, ResetTarget):
        return to
    if isinstance(to, datetime):
        return ResetTarget("time", times.datetime_ms(to))
    if to in ("earliest", "latest"):
        return ResetTarget(str(to))
    if isinstance(to, int) and not isinstance(to, bool) and to >= 0:
        return ResetTarget("offset", to)
    if isinstance(to, str) and (m := _SHIFT.fullmatch(to)):
        return ResetTarget("shift", int(m.group(1)))
    raise InvalidOffset(
        "reset to 'earliest', 'latest', an offset >= 0, a datetime or 'shift:-N'/'shift:+N', "
        f"not {to!r}"
    )


def parse_target(value: object) -> ResetTarget:
    """A target typed as one value: "earliest", "latest", "shift:-N"/"shift:+N", an offset
    (digits, or a whole number), else a time (ISO 8601, UTC without a zone). A bad shift or
    offset raises InvalidOffset; anything else that is no time, InvalidArgument."""
    if isinstance(value, int) and not isinstance(value, bool):
        return ResetTarget("offset", _offset(value))
    if not isinstance(value, str):
        raise InvalidArgument(
            "to must be 'earliest', 'latest', 'shift:-N', 'shift:+N', an offset or an ISO 8601 "
            f"time, not {value!r}"
        )
    text = value.strip()
    if text in ("earliest", "latest") or text.startswith("shift:"):
        return reset_target(text)
    if _DIGITS.fullmatch(text):
        return ResetTarget("offset", _offset(int(text) if len(text) <= 19 else MAX_OFFSET + 1))
    try:
        return ResetTarget("time", times.parse_time(text))
    except InvalidArgument as exc:
        raise InvalidArgument(
            f"earliest, latest, an offset, shift:-N / shift:+N or a time, not {text[:40]!r} ({exc})"
        ) from None


def form_target(kind: str, text: str) -> ResetTarget:
    """A target chosen on a form: one of TARGET_KINDS and the text of its value (an offset,
    a time, or a shift such as -100 or +5; ignored for earliest and latest)."""
    text = text.strip()
    if kind in ("earliest", "latest"):
        return ResetTarget(kind)
    if kind == "offset":
        if not _DIGITS.fullmatch(text) or len(text) > 19 or int(text) > MAX_OFFSET:
            raise InvalidOffset(
                f"an offset is a whole number from 0 to {MAX_OFFSET:,}, not {text[:40]!r}"
            )
        return ResetTarget("offset", int(text))
    if kind == "time":
        return ResetTarget("time", times.parse_time(text))
    if kind == "shift":
        if not _SIGNED.fullmatch(text):
            raise InvalidOffset(
                f"a shift is a whole number such as -100 or +5 (at most {MAX_SHIFT:,} either "
                f"way), not {text[:40]!r}"
            )
        return ResetTarget("shift", int(text))
    raise InvalidArgument(f"reset to one of {', '.join(TARGET_KINDS)}, not {str(kind)[:40]!r}")


def _offset(number: int) -> int:
    if not 0 <= number <= MAX_OFFSET:
        raise InvalidOffset(f"an offset to reset to is from 0 to {MAX_OFFSET}")
    return number


def parse_partitions(text: str) -> list[int] | None:
    """ "0, 2, 5-7" -> [0, 2, 5, 6, 7]; blank -> None (every partition). Raises
    InvalidArgument for anything else."""
    text = text.strip()
    if not text:
        return None
    if len(text) > MAX_PARTITION_TEXT:
        raise InvalidArgument("too long: list partitions as 0, 2, 5-7")
    chosen: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        bounds = [low.strip(), high.strip()] if dash else [low.strip()]
        if not all(_DIGITS.fullmatch(b) and len(b) <= 6 for b in bounds):
            raise InvalidArgument(
                f"partitions are numbers or ranges such as 0, 2, 5-7, not {part.strip()[:40]!r}"
            )
        first, last = int(bounds[0]), int(bounds[-1])
        if last < first or last - first > MAX_RANGE:
            raise InvalidArgument(f"the range {part.strip()!r} is empty or too wide")
        chosen.update(range(first, last + 1))
    return sorted(chosen)


def check_partitions(partitions: object, count: int, topic: str) -> list[int]:
    """The sorted distinct partitions of a reset of `topic` (which has `count`); every one
    when `partitions` is None."""
    if partitions is None:
        return list(range(count))
    if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Sequence | set):
        raise InvalidArgument(f"partitions must be a list of partition numbers, not {partitions!r}")
    chosen = set()
    for p in partitions:
        if not isinstance(p, int) or isinstance(p, bool):
            raise InvalidPartition(f"a partition is a whole number, not {p!r}")
        if not 0 <= p < count:
            raise InvalidPartition(f"{topic} has partitions 0 to {count - 1}, not {p}")
        chosen.add(p)
    if not chosen:
        raise InvalidArgument("partitions must name at least one partition (None: all)")
    return sorted(chosen)
