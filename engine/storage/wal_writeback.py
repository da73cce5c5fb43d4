"""A volume's -wal file written back to disk and checkpointed by a thread of its own, off
the commit path.

SQLite checkpoints a WAL file in the connection whose commit took it past
`wal_autocheckpoint` pages. In WAL mode with `synchronous=NORMAL` (acks=1) no commit
fsyncs the log, so the checkpoint's first step, an fsync of the log, writes out every page
committed since the last one: some 2 ms for the 4 MiB budget on this machine, against
0.4 ms for the rest (copying the pages into the database file and fsyncing that). A
one-message append writes six 16-KiB pages of log, so one write in about 40 paid those
2 ms: the p99 of produce-to-consume latency (issue 28, item 5; docs/BENCHMARKS.md). And a
writer of large batches waited on those fsyncs for some 40% of its time (item 4).

So after a commit that did not fsync, the writer asks this process's writeback thread to
fsync the log, at most every `INTERVAL_S` per file, then to run the volume's checkpoint
(PASSIVE: it never waits for a lock, and no writer waits for it). The writer's commits go
on meanwhile; they checkpoint themselves only once the log passes
`connection.WAL_AHEAD_BYTES`, should this thread fall behind. Nothing about durability
changes: an fsync only makes sooner what the checkpoint makes anyway, and SQLite's
checkpoint is the same whichever connection runs it. Commits that fsync themselves
(acks=all, transactions) ask for nothing and checkpoint in the writer as before: a
checkpoint's fsyncs beside theirs cost transactions a quarter of their throughput
(session 36).

Only the -wal file is opened here, never the -shm file: closing a descriptor drops every
POSIX lock the process holds on that file, and SQLite keeps its WAL locks on -shm (and its
file locks on the database file), none on -wal. The checkpoint goes through the volume's
own SQLite connection for this thread, which SQLite's locking knows of.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

INTERVAL_S = 0.005  # at most this often per file
IDLE_S = 1.0  # a file asked for nothing for this long is quiet: its log may be cut
# A checkpoint at most this often per file. Every 5 ms (each writeback) restarted the log
# at nearly every commit of a slow writer, which then rewrote pages still being written
# back: p50 of produce-to-consume in one process 0.54-0.58 -> 0.84-0.98 ms, measured.
CHECKPOINT_S = 0.05
# A volume's checkpoint, called with True once the volume is quiet
Checkpoint = Callable[[bool], object]


class Writeback:
    """One thread per process that fsyncs the -wal files asked for, in the order asked, and
    checkpoints them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        # database paths in the order asked, each with its checkpoint (or None)
        self._pending: dict[str, Checkpoint | None] = {}
        # path -> (when it is quiet if nothing more is asked, its checkpoint)
        self._quiet: dict[str, tuple[float, Checkpoint]] = {}
        self._checkpointed: dict[str, float] = {}  # path -> its last checkpoint (monotonic)
        self._asked: dict[str, float] = {}  # path -> when it was last asked for (monotonic)
        self._busy: str | None = None
        self._thread: threading.Thread | None = None

    def after_commit(self, path: str, checkpoint: Checkpoint | None = None) -> None:
        """A commit to `path` that did not fsync its log: have the log written back soon,
        then `checkpoint(False)` called (in this thread), and `checkpoint(True)` once no
        commit has asked for `IDLE_S`."""
        now = time.monotonic()
        if now - self._asked.get(path, -INTERVAL_S) < INTERVAL_S:
            return  # lock-free fast path: asked for recently
        with self._lock:
            self._asked[path] = now
            if path in self._pending:
                return
            self._pending[path] = checkpoint
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="plet-wal-writeback", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def settle(self, path: str) -> None:
        """Drop a waiting writeback of `path`; wait for a running one to end (its owner is
        closing the file)."""
        with self._lock:
            self._pending.pop(path, None)
            self._asked.pop(path, None)
            self._quiet.pop(path, None)
            self._checkpointed.pop(path, None)
            while self._busy == path:
                self._wake.wait()

    def _next(self) -> tuple[str, Checkpoint | None, bool]:
        """Under the lock, waiting for it: the next file asked for, with its checkpoint and
        False; else, once one has been quiet for `IDLE_S`, that file, its checkpoint and
        True."""
        while True:
            if self._pending:
                path, checkpoint = next(iter(self._pending.items()))
                del self._pending[path]
                return path, checkpoint, False
            if not self._quiet:
                self._wake.wait()
                continue
            path = min(self._quiet, key=lambda p: self._quiet[p][0])
            due = self._quiet[path][0]
            if due <= time.monotonic():
                return path, self._quiet.pop(path)[1], True
            self._wake.wait(due - time.monotonic())

    def _run(self) -> None:
        while True:
            with self._lock:
                path, checkpoint, quiet = self._next()
                self._busy = path
            try:
                if not quiet:
                    write_back(path)
                    if checkpoint is not None:
                        now = time.monotonic()
                        with self._lock:
                            self._quiet[path] = (now + IDLE_S, checkpoint)
                        if now - self._checkpointed.get(path, -CHECKPOINT_S) < CHECKPOINT_S:
                            checkpoint = None  # checkpointed a moment ago
                        else:
                            self._checkpointed[path] = now
                if checkpoint is not None:
                    try:
                        checkpoint(quiet)
                    except Exception as exc:  # noqa: BLE001 - the writer's own checkpoint remains
                        log.debug("checkpoint of %s failed: %s", path, exc)
            finally:
                with self._lock:
                    self._busy = None
                    self._wake.notify_all()


def write_back(path: str) -> None:
    """fsync the -wal file of `path`, if there is one (a log deleted meanwhile, or a disk
    that fails, is left to the checkpoint, which meets the problem itself)."""
    try:
        fd = os.open(f"{path}-wal", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        log.debug("writeback of %s-wal failed: %s", path, exc)
    finally:
        os.close(fd)


WRITEBACK = Writeback()


def _forked() -> None:
    """In a child made by fork(): the parent's thread is not here; start afresh."""
    global WRITEBACK
    WRITEBACK = Writeback()


os.register_at_fork(after_in_child=_forked)
