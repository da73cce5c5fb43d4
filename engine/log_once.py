"""Logging a recurring error once per interval: a flood of one kind (a full disk failing
every write) writes one line per interval with a count of the others, not a line or a
traceback per occurrence. The wire listener and the producer log their errors through it."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

# How often one kind of message is logged at most, unless a caller says otherwise.
LOG_INTERVAL_S = 10.0


class LogOnce:
    """Log one kind of message at most once per `interval` seconds, with how many of its
    kind were not logged since the last line. Thread-safe."""

    def __init__(self, logger: logging.Logger, interval: float = LOG_INTERVAL_S) -> None:
        self._log = logger
        self._interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, int]] = {}  # kind -> (logged at, dropped since)

    def __call__(self, level: int, kind: str, msg: str, *args: Any, exc_info: Any = None) -> None:
        now = time.monotonic()
        with self._lock:
            at, dropped = self._last.get(kind, (-self._interval, 0))
            if now - at < self._interval:
                self._last[kind] = (at, dropped + 1)
                return
            self._last[kind] = (now, 0)
        if dropped:
            msg += f" ({dropped} more like it in the last {self._interval:g} s not logged)"
        self._log.log(level, msg, *args, exc_info=exc_info)
