"""`Clock`: the one place the engine reads time.

Every engine object that needs the time takes a `Clock` (a `Cluster` passes its own down),
so tests move time with a `FakeClock` instead of sleeping. Two readings, as Kafka's `Time`
has: `now_ms()` is wall time (what timestamps, TTLs and expiry times are written in) and
`monotonic()` is for measuring intervals (timeouts, throttles, deadlines), which a wall
clock set back must not stretch.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """What the engine asks of a clock. Safe to call from any thread."""

    def now_ms(self) -> int:
        """Wall time in milliseconds since the Unix epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never goes back (for intervals only)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""
        ...


class SystemClock:
    """The real clock: the operating system's wall and monotonic time."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """A clock that moves only when told (`advance`, `set`, or `sleep`), for tests.

    Both readings move together, so a session timeout measured on `monotonic()` and an
    expiry written in `now_ms()` agree. Safe to share between threads.
    """

    def __init__(self, now_ms: int = 1_700_000_000_000, monotonic: float = 1_000.0) -> None:
        self._lock = threading.Lock()
        self._now_ms = int(now_ms)
        self._monotonic = float(monotonic)

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def advance(self, seconds: float = 0.0, *, ms: int = 0) -> None:
        """Move both readings forward by `seconds` plus `ms` milliseconds."""
        step = float(seconds) + ms / 1000.0
        if step < 0:
            raise ValueError(f"a clock does not go back (asked to move {step} s)")
        with self._lock:
            self._monotonic += step
            self._now_ms += round(step * 1000)

    def set(self, now_ms: int) -> None:
        """Set the wall reading (the monotonic one moves by the same amount, never back)."""
        with self._lock:
            step = max(0, int(now_ms) - self._now_ms)
            self._now_ms = int(now_ms)
            self._monotonic += step / 1000.0

    def sleep(self, seconds: float) -> None:
        # A fake sleep returns at once, having moved the clock: code that waits out a
        # delay under a FakeClock sees the delay pass without the test waiting for it.
        if seconds > 0:
            self.advance(seconds)

    def __repr__(self) -> str:
        return f"FakeClock(now_ms={self.now_ms()})"


SYSTEM_CLOCK: Clock = SystemClock()
"""The process's real clock, the default of every object that takes one."""


# Wall time in ms from the real clock, for code with no `Clock` of its own to ask
# (module-level helpers, frontends); engine objects ask their injected clock instead.
now_ms = SYSTEM_CLOCK.now_ms
