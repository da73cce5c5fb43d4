"""How long tests wait: one slowdown factor for every timeout, and deadline polls.

`PLET_TEST_SLOWDOWN` (a float, default 1) multiplies every timeout of the tests: waits for a
condition, subprocess and socket timeouts, Playwright's `expect`, pytest-timeout's limit.
A slow or busy machine sets it (`PLET_TEST_SLOWDOWN=3 make test`) instead of a test
growing its own margin. Waits are deadline polls on a condition, never fixed sleeps:
`wait_until` returns as soon as the condition holds and fails with what it last saw."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _slowdown() -> float:
    raw = os.environ.get("PLET_TEST_SLOWDOWN", "").strip()
    if not raw:
        return 1.0
    value = float(raw)
    if value <= 0:
        raise ValueError(f"PLET_TEST_SLOWDOWN must be a positive number, got {raw!r}")
    return value


SLOWDOWN = _slowdown()


def scaled(seconds: float) -> float:
    """`seconds` of a timeout on a machine as fast as the one the test was written on."""
    return seconds * SLOWDOWN


def wait_until(
    condition: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.02,
    message: str | Callable[[], str] = "",
) -> T:
    """Call `condition` until it returns something true, and return that; after `timeout`
    seconds (scaled) raise AssertionError with `message` and the last value it returned."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            what = message() if callable(message) else message
            raise AssertionError(
                f"timed out after {scaled(timeout):g} s waiting for "
                f"{what or getattr(condition, '__name__', condition)}; last value: {value!r}"
            )
        time.sleep(interval)
