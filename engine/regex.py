"""Users' regular expressions, run by RE2 (`google-re2`): linear time, so no pattern and
no text can hang a thread (Python's `re` backtracks: `^(a+)+$` over thirty characters takes
minutes). Backreferences and lookaround are not RE2: such a pattern is refused with a
clear error where it is given (a schema's registration, a search, a subscription)."""

from __future__ import annotations

import threading
from typing import Any

import re2

from engine.errors import InvalidArgument

MAX_PATTERN_CHARS = 1_000

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is the user's error, said to them, not logged
_compiled: dict[str, Any] = {}
_lock = threading.Lock()


def compile_pattern(pattern: str, what: str = "pattern") -> Any:
    """`pattern` compiled by RE2 (cached); InvalidArgument naming `what` when it is too
    long or not an RE2 pattern. The result has `search`, `match` and `fullmatch`."""
    found = _compiled.get(pattern)
    if found is None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise InvalidArgument(f"{what}: a pattern has at most {MAX_PATTERN_CHARS} characters")
        try:
            found = re2.compile(pattern, options=_OPTIONS)
        except re2.error as exc:
            why = exc.args[0] if exc.args else ""
            why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
            raise InvalidArgument(
                f"{what}: {pattern!r} is not an RE2 pattern ({why}; backreferences and "
                "lookaround are not supported)"
            ) from None
        with _lock:
            if len(_compiled) > 256:
                _compiled.clear()
            _compiled[pattern] = found
    return found


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` (RE2) matches somewhere in `text`."""
    return compile_pattern(pattern).search(text) is not None
