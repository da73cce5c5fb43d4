"""The chain lock: one maintenance job at a time rewrites partition chains.

Rebalance moves, orphan clean-up, compaction, retention and archiving change partitionlets
behind the readers' backs; they take this lock so that none of them sees another's work
half done: a move in progress looks like an orphan, and a compaction must not rewrite a
partitionlet that a move is copying. Writers and readers never take it.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.clock import SYSTEM_CLOCK, Clock
from engine.errors import FileLocked

CHAIN_LOCK_FILE = ".chains.lock"
CHAIN_LOCK_TIMEOUT_S = 30.0
# How often a waiting job tries the lock again.
_RETRY_S = 0.05


@contextmanager
def chain_lock(
    directory: Path, timeout_s: float | None = None, *, clock: Clock = SYSTEM_CLOCK
) -> Iterator[None]:
    """Hold an flock on `directory`'s lock file (the cluster directory) for the block,
    across threads and processes (released if the process dies); waits up to `timeout_s`
    of `clock`'s time, then raises `errors.FileLocked`. Any thread may take it; it is not
    re-entrant (a thread holding it that asks again waits for itself)."""
    if timeout_s is None:
        timeout_s = CHAIN_LOCK_TIMEOUT_S
    deadline = clock.monotonic() + timeout_s
    with open(Path(directory) / CHAIN_LOCK_FILE, "a") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if clock.monotonic() >= deadline:
                    raise FileLocked(
                        f"another maintenance job (rebalance, compaction or retention) of "
                        f"{directory} has held its lock for more than {timeout_s:.0f} s; "
                        "try again when it has finished"
                    ) from None
                clock.sleep(_RETRY_S)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
