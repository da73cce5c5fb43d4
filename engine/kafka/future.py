"""An already resolved future, and the rule for calling the program's callbacks.

`KafkaConsumer.commit_async` commits before it returns, so its future is resolved at
once; it has the face of kafka-python's `kafka.future.Future`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def call_user(f: Callable[..., Any], *args: Any) -> None:
    """Call a callback of the program; as in kafka-python, its failure is logged, not
    raised into the client."""
    try:
        f(*args)
    except Exception:
        log.exception("callback %r failed", f)


class DoneFuture:
    """A future resolved with `value`, or failed with `exception`."""

    def __init__(self, value: Any = None, exception: BaseException | None = None) -> None:
        self.value = value
        self.exception = exception
        self.is_done = True

    def succeeded(self) -> bool:
        return self.exception is None

    def failed(self) -> bool:
        return self.exception is not None

    def retriable(self) -> bool:
        return bool(getattr(self.exception, "retriable", False))

    def get(self, timeout: float | None = None) -> Any:
        if self.exception is not None:
            raise self.exception
        return self.value

    def add_callback(self, f: Callable[..., Any], *args: Any) -> DoneFuture:
        if self.exception is None:
            call_user(f, *args, self.value)
        return self

    def add_errback(self, f: Callable[..., Any], *args: Any) -> DoneFuture:
        if self.exception is not None:
            call_user(f, *args, self.exception)
        return self

    def add_both(self, f: Callable[..., Any], *args: Any) -> DoneFuture:
        self.add_callback(f, *args)
        return self.add_errback(f, *args)
