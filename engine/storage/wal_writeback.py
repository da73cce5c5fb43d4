"""A volume's -wal file written back to disk ahead of its checkpoint, off the commit path.

SQLite checkpoints a WAL file in the connection whose commit took it past
`wal_autocheckpoint` pages. In WAL mode with `synchronous=NORMAL` (acks=1) no commit
fsyncs the log, so the checkpoint's first step, an fsync of the log, writes out every page
committed since the last one: some 2 ms for the 4 MiB budget on this machine, against
0.4 ms for the rest (copying the pages into the database file and fsyncing that). A
one-message append writes six 16-KiB pages of log, so one write in about 40 paid those
2 ms: the p99 of produce-to-consume latency (issue 28, item 5; docs/BENCHMARKS.md).

So after a commit that did not fsync, the writer asks this process's writeback thread to
fsync the log, at most every `INTERVAL_S` per file: the kernel writes the pages out while
the writer goes on (an fsync takes no SQLite lock), and the checkpoint then finds little
left to write. Nothing about durability changes: an fsync only makes sooner what the
checkpoint makes anyway. Commits that fsync themselves (acks=all) ask for nothing.

Only the -wal file is opened here, never the -shm file: closing a descriptor drops every
POSIX lock the process holds on that file, and SQLite keeps its WAL locks on -shm (and its
file locks on the database file), none on -wal.
"""

from __future__ import annotations

import logging
import os
import threading
import time

log = logging.getLogger(__name__)

INTERVAL_S = 0.005  # at most this often per file


class Writeback:
    """One thread per process that fsyncs the -wal files asked for, in the order asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._pending: dict[str, None] = {}  # an ordered set of database paths
        self._asked: dict[str, float] = {}  # path -> when it was last asked for (monotonic)
        self._busy: str | None = None
        self._thread: threading.Thread | None = None

    def after_commit(self, path: str) -> None:
        """A commit to `path` that did not fsync its log: have the log written back soon."""
        now = time.monotonic()
        if now - self._asked.get(path, -INTERVAL_S) < INTERVAL_S:
            return  # lock-free fast path: asked for recently
        with self._lock:
            self._asked[path] = now
            if path in self._pending:
                return
            self._pending[path] = None
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
            while self._busy == path:
                self._wake.wait()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._wake.wait()
                path = next(iter(self._pending))
                del self._pending[path]
                self._busy = path
            try:
                write_back(path)
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
