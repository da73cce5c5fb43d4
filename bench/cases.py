"""The benchmark's building blocks: settings, a run context, cases and their results.

A *case* is one measurement: a small function that takes the run's `Context` and returns a
`Measurement` (messages, seconds, value bytes). The `Case` record around it says what is
measured (system, operation, value size, variant, durability), so the report can line it up
against its peers. A module that adds cases exposes a *provider*, a function from `Context`
to a list of `Case`s, and `bench.suite.PROVIDERS` lists the providers in the order they run.

Shared, costly things (an open cluster, a running redis-server) are *resources*: a context
manager factory handed to `Context.resource`, entered on first use and closed at the end of
the run. Facts one case leaves for a later one (which topic holds the 100-byte messages)
go in `Context.state`.
"""

from __future__ import annotations

import contextlib
import gc
import random
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

MB = 1_000_000  # MB/s in the report are decimal megabytes (10**6 bytes) of message values

DEFAULT_MESSAGES = {100: 1_000_000, 1024: 200_000}
DEFAULT_SIZES = (100, 1024)
DEFAULT_ACKS: tuple[int | str, ...] = (0, 1, "all")
QUICK_MESSAGES = 2_000

# Durability classes, used to pick the comparable peer of a produce case.
NONE = "none"  # nothing promised (acks=0)
PROCESS = "process"  # survives a crash of the process (acks=1, WAL NORMAL, AOF everysec)
MACHINE = "machine"  # survives a crash of the machine (acks="all", synchronous=FULL)

T = TypeVar("T")


def default_messages(size: int) -> int:
    """Messages per case for a value size when `--messages` is not given."""
    if size in DEFAULT_MESSAGES:
        return DEFAULT_MESSAGES[size]
    return max(10_000, min(1_000_000, 200_000_000 // max(size, 1)))


@dataclass(frozen=True)
class Settings:
    """What one run measures. `messages` maps a value size to its message count."""

    workdir: Path
    sizes: tuple[int, ...] = DEFAULT_SIZES
    acks: tuple[int | str, ...] = DEFAULT_ACKS
    messages: dict[int, int] = field(default_factory=dict)
    redis: bool = True
    linger_ms_all: int = 5
    sqlite_txn_rows: int = 10_000
    redis_pipeline: int = 1_000
    redis_read_chunk: int = 10_000
    consume_max_records: int = 100_000
    smoke: bool = False  # `--quick`: too few messages to judge a target by

    def messages_for(self, size: int) -> int:
        return self.messages.get(size) or default_messages(size)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workdir": str(self.workdir),
            "sizes": list(self.sizes),
            "acks": list(self.acks),
            "messages": {str(size): self.messages_for(size) for size in self.sizes},
            "redis": self.redis,
            "linger_ms_all": self.linger_ms_all,
            "sqlite_txn_rows": self.sqlite_txn_rows,
            "redis_pipeline": self.redis_pipeline,
            "redis_read_chunk": self.redis_read_chunk,
            "consume_max_records": self.consume_max_records,
            "smoke": self.smoke,
        }


@dataclass
class Measurement:
    """What a case function returns. `error` marks a run that finished but is wrong."""

    messages: int
    seconds: float
    bytes: int
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class Case:
    """One measurement to take; `run` does the work and times it itself."""

    system: str  # "partitionlet", "sqlite", "redis", ...
    op: str  # "produce" or "consume"
    size: int  # bytes per message value
    variant: str  # human label: "acks=1", "synchronous=FULL", ...
    durability: str  # NONE, PROCESS, MACHINE, or "" for reads
    messages: int  # how many messages the case is asked to move
    run: Callable[[Context], Measurement]
    params: dict[str, Any] = field(default_factory=dict, hash=False)  # e.g. {"acks": 1}

    @property
    def name(self) -> str:
        return case_name(self.system, self.op, self.size, self.variant)


@dataclass
class Result:
    """A case and what was measured; `error` is set when the case failed or was wrong."""

    system: str
    op: str
    size: int
    variant: str
    durability: str
    planned: int
    messages: int
    seconds: float
    bytes: int
    params: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def name(self) -> str:
        return case_name(self.system, self.op, self.size, self.variant)

    @property
    def ok(self) -> bool:
        return self.error is None and self.seconds > 0

    @property
    def msg_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / MB / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.name,
            "system": self.system,
            "op": self.op,
            "size": self.size,
            "variant": self.variant,
            "durability": self.durability,
            "params": self.params,
            "planned": self.planned,
            "messages": self.messages,
            "seconds": self.seconds,
            "bytes": self.bytes,
            "msg_per_s": self.msg_per_s,
            "mb_per_s": self.mb_per_s,
            "extra": self.extra,
            "error": self.error,
        }


def format_size(size: int) -> str:
    """100 -> '100 B', 1024 -> '1 KiB', 1536 -> '1536 B'."""
    if size >= 1024 * 1024 and size % (1024 * 1024) == 0:
        return f"{size // (1024 * 1024)} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size // 1024} KiB"
    return f"{size} B"


def case_name(system: str, op: str, size: int, variant: str) -> str:
    name = f"{system} {op} {format_size(size)}"
    return f"{name} {variant}" if variant else name


def payload(size: int) -> bytes:
    """The value every message of a case carries: fixed pseudo-random bytes (incompressible)."""
    return random.Random(size).randbytes(size)


class Context:
    """What a case sees of the run: settings, lazily opened resources, shared state, notes."""

    def __init__(self, settings: Settings, stack: contextlib.ExitStack) -> None:
        self.settings = settings
        self.state: dict[Any, Any] = {}
        self.notes: list[str] = []
        self._stack = stack
        self._resources: dict[str, Any] = {}
        self._failed: dict[str, BaseException] = {}

    def resource(
        self, key: str, factory: Callable[[Context], contextlib.AbstractContextManager[T]]
    ) -> T:
        """Enter `factory(self)` once per run and return its value; it closes at the run's end.

        A factory that failed fails again at once for the later cases that need it.
        """
        if key in self._failed:
            raise RuntimeError(f"{key} is unavailable: {self._failed[key]}") from self._failed[key]
        if key not in self._resources:
            try:
                self._resources[key] = self._stack.enter_context(factory(self))
            except Exception as exc:
                self._failed[key] = exc
                raise
        return self._resources[key]

    def path(self, *parts: str) -> Path:
        """A path inside the run's work directory (its parent exists)."""
        path = self.settings.workdir.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def note(self, text: str) -> None:
        self.notes.append(text)


@contextlib.contextmanager
def stopwatch() -> Iterator[list[float]]:
    """`with stopwatch() as t: ...` then `t[0]` holds the elapsed seconds (perf_counter)."""
    elapsed = [0.0]
    start = time.perf_counter()
    try:
        yield elapsed
    finally:
        elapsed[0] = time.perf_counter() - start


def run_case(ctx: Context, case: Case) -> Result:
    """Run one case; an exception becomes a `Result` with `error` set, never escapes."""
    gc.collect()
    result = Result(
        system=case.system,
        op=case.op,
        size=case.size,
        variant=case.variant,
        durability=case.durability,
        planned=case.messages,
        messages=0,
        seconds=0.0,
        bytes=0,
        params=dict(case.params),
    )
    try:
        measured = case.run(ctx)
    except Exception as exc:  # a benchmark reports failures, it does not stop at the first
        result.error = f"{type(exc).__name__}: {exc}"
        result.extra["traceback"] = traceback.format_exc()
        return result
    result.messages = measured.messages
    result.seconds = measured.seconds
    result.bytes = measured.bytes
    result.extra.update(measured.extra)
    result.error = measured.error
    if result.error is None and measured.messages != case.messages:
        result.error = f"expected {case.messages:,} messages, moved {measured.messages:,}"
    return result


def run_cases(
    ctx: Context,
    cases: Iterable[Case],
    progress: Callable[[Case, Result | None], None] | None = None,
) -> list[Result]:
    """Run cases in order; `progress(case, None)` before and `progress(case, result)` after."""
    results = []
    for case in cases:
        if progress:
            progress(case, None)
        result = run_case(ctx, case)
        if progress:
            progress(case, result)
        results.append(result)
    return results


def collect_cases(
    ctx: Context, providers: Sequence[Callable[[Context], Iterable[Case]]]
) -> list[Case]:
    """Ask every provider for its cases; a provider that fails becomes a note."""
    cases: list[Case] = []
    for provider in providers:
        try:
            cases.extend(provider(ctx))
        except Exception as exc:
            ctx.note(f"{getattr(provider, '__module__', provider)}: no cases ({exc})")
    return cases
