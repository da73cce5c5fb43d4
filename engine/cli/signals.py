"""Long-running commands (`consume --follow`, `produce` from a pipe, `replicate`) stop on
SIGTERM as on Ctrl-C: a service manager's or `kill`'s stop then commits a group's offsets
and leaves the group at once, instead of leaving a dead member until its session ends."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be."""


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises `Terminated` (a KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (the CLI under a test runner's thread)
        return

    def terminated(signum: int, frame: Any) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """The shell's code for the signal that stopped the command: 143 SIGTERM, 130 SIGINT."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)
