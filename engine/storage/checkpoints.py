"""WAL checkpoints off the commit path.

SQLite checkpoints a WAL file in the connection whose commit took it past
`wal_autocheckpoint` pages: that commit then copies megabytes into the database file and
fsyncs it, and the message it carried reaches its consumers milliseconds late. A one-message
append writes six 16-KiB pages (the batch, its indexes, the partitionlet, usage and heat
rows), so at 200 msg/s one write in 40 paid for a checkpoint: the p99 of produce-to-consume
latency (issue 28, item 5).

Here a commit only looks at the size of the `-wal` file, which `connect` has SQLite cut
back to what the log holds when it starts over (`journal_size_limit` 0). Never at the
`-shm` file: closing a descriptor of one's own drops every lock the process holds on it
(POSIX), and another process then deletes it under SQLite's map (SIGBUS). Once the log
holds the budget more than the last checkpoint copied, the commit asks this process's
checkpointer thread for a PASSIVE checkpoint on a connection of its own: in WAL mode a
checkpoint runs beside the writer, which does not wait for it. When the copy is complete
and no reader needs the log, the next write starts the log over, so between writes (200
msg/s leaves milliseconds) the log stays within the budget. Under writes back to back the
copy is never complete at a write's start: once the log holds `SAFETY_FACTOR` budgets,
the committing writer checkpoints it itself (all but the last budget copied already),
so the log starts over as it did with SQLite's own automatic checkpoint.

A file's owner calls `settle(path)` before closing it, so no checkpoint of it is left
running once its cluster is closed (tests copy and damage closed clusters' files).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path
from urllib.parse import quote

log = logging.getLogger(__name__)

SAFETY_FACTOR = 2  # the writer checkpoints a log of this many budgets itself
_WAL_HEADER, _FRAME_HEADER = 32, 24  # bytes (sqlite.org/fileformat.html, "WAL file format")


def wal_size(path: Path | str) -> int:
    """The bytes of the -wal file of `path` (0 if there is none)."""
    try:
        return os.stat(f"{path}-wal").st_size
    except OSError:
        return 0


class Checkpointer:
    """One thread per process that checkpoints the files whose WAL passed its budget, in
    the order they asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending: dict[str, None] = {}  # an ordered set
        self._busy: str | None = None
        self._thread: threading.Thread | None = None
        # per file: the bytes of log the last checkpoint had copied, as a -wal size
        self.copied: dict[str, int] = {}

    def request(self, path: str) -> None:
        with self._lock:
            if path in self._pending or path == self._busy:
                return
            self._pending[path] = None
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="plet-checkpointer", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    def settle(self, path: str) -> None:
        """Drop a waiting checkpoint of `path`; wait for a running one to end."""
        with self._lock:
            self._pending.pop(path, None)
            while self._busy == path:
                self._changed.wait()

    def uncopied(self, path: str, size: int) -> int:
        """The bytes of a log of `size` not copied by this process's last checkpoint of it
        (all of them once the log has started over, and so been cut back)."""
        copied = self.copied.get(path, 0)
        if size < copied:
            self.copied[path] = copied = 0
        return size - copied

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._changed.wait()
                path = next(iter(self._pending))
                del self._pending[path]
                self._busy = path
            try:
                copied = checkpoint(path)
                if copied is not None:
                    self.copied[path] = copied
            except Exception:  # a bug: say so, and keep checkpointing the other files
                log.exception("checkpoint of %s failed", path)
            finally:
                with self._lock:
                    self._busy = None
                    self._changed.notify_all()


def checkpoint(path: str) -> int | None:
    """A PASSIVE checkpoint of `path` on a connection of its own: it copies what no reader
    still needs and never waits for a lock. Returns the bytes of log copied, as a -wal
    size. A file gone or failing is left to its owner, whose next commit (or SQLite's own
    checkpoint) meets the problem."""
    try:
        # mode=rw: a file deleted meanwhile is not created again, empty
        conn = sqlite3.connect(f"file:{quote(path)}?mode=rw", uri=True, timeout=0)
    except sqlite3.Error as exc:
        log.debug("checkpoint of %s not run: %s", path, exc)
        return None
    try:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        _, _, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return _WAL_HEADER + max(0, int(copied)) * (int(page) + _FRAME_HEADER)
    except sqlite3.Error as exc:
        log.debug("checkpoint of %s failed: %s", path, exc)
        return None
    finally:
        conn.close()


CHECKPOINTER = Checkpointer()


def _forked() -> None:
    """In a child made by fork(): the parent's thread is not here; start afresh."""
    global CHECKPOINTER
    CHECKPOINTER = Checkpointer()


os.register_at_fork(after_in_child=_forked)


def after_commit(conn: sqlite3.Connection, path: Path | str, budget: int) -> None:
    """Called after each commit on `conn` to `path`, whose log should hold about `budget`
    bytes of pages."""
    size = wal_size(path)
    name = str(path)
    if size >= budget * SAFETY_FACTOR:
        CHECKPOINTER.settle(name)  # one checkpoint at a time: SQLite refuses a second
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:  # the commit stands; the next one tries again
            log.debug("checkpoint of %s failed: %s", path, exc)
    elif CHECKPOINTER.uncopied(name, size) >= budget:
        CHECKPOINTER.request(name)


def settle(path: Path | str) -> None:
    CHECKPOINTER.settle(str(path))
