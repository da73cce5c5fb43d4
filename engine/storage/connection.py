"""Opening SQLite files: the pragmas and their reasons, in one place, and error translation.

Every catalog and volume connection is made here. Connections are per thread (see
`Cluster`); a connection is never used by two threads at once.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.errors import CorruptFile, DiskFull, FileLocked, StorageError

# How long a writer waits for another process's write lock before giving up. Writers hold
# it for one batch commit (milliseconds), so a long wait means something is stuck.
BUSY_TIMEOUT_MS = 30_000

# The -wal file's size, which a running cluster keeps on disk per volume and catalog:
# - a commit checkpoints (PASSIVE: it never waits for readers) once the log holds this many
#   bytes of pages. It is a byte budget, not SQLite's page count, because volumes use 16 KiB
#   pages: the 4,000 pages set before made a 64 MiB log per volume before the first
#   checkpoint, with no gain in throughput (docs/BENCHMARKS.md, "WAL size");
# - when the log starts over after a checkpoint, the file is cut back to JOURNAL_SIZE_LIMIT
#   (SQLite would keep it at its largest size forever, e.g. after a reader held it back).
WAL_CHECKPOINT_BYTES = 4 * 1024 * 1024
# A volume's commits that do not fsync (acks=1) leave the checkpoint to a thread of their
# own (engine/storage/wal_writeback.py), and checkpoint in the writer only past this much
# log, should that thread fall behind: the writer spent some 40% of a 1-KiB produce waiting
# on its checkpoints' fsyncs (docs/BENCHMARKS.md, issue 28, item 4).
WAL_AHEAD_BYTES = 32 * 1024 * 1024
JOURNAL_SIZE_LIMIT = 8 * 1024 * 1024


def connect(path: Path, *, what: str, page_size: int | None = None) -> sqlite3.Connection:
    """Open `path` in WAL mode with autocommit off at the SQL level (we issue BEGIN ourselves).

    `page_size` applies to a file that does not exist yet (SQLite fixes it at creation).
    """
    try:
        conn = sqlite3.connect(
            path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,  # explicit BEGIN IMMEDIATE / COMMIT, never implicit ones
            check_same_thread=False,  # Cluster.close() closes every thread's connections
            cached_statements=256,
        )
        if page_size is not None:
            conn.execute(f"PRAGMA page_size={int(page_size)}")
        # WAL: readers never block the writer and the writer never blocks readers, across
        # processes; commits append to the -wal file.
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise StorageError(f"{what} {path}: could not switch to WAL mode (got {mode!r})")
        # NORMAL in WAL mode: a commit survives a crash of the process (acks=1); the
        # producer switches to FULL for the commits that must survive a machine crash.
        conn.execute("PRAGMA synchronous=NORMAL")
        # The -wal file's size: see WAL_CHECKPOINT_BYTES.
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute(f"PRAGMA wal_autocheckpoint={max(16, WAL_CHECKPOINT_BYTES // page)}")
        conn.execute(f"PRAGMA journal_size_limit={int(JOURNAL_SIZE_LIMIT)}")
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA cache_size=-16000")  # 16 MB page cache per connection
        # Off (some builds turn it on): deleting N bytes would overwrite them with zeros, so
        # freeing space on a full disk would need as much free space as it frees. Deleted
        # data stays in free pages until they are reused, as in any file system.
        conn.execute("PRAGMA secure_delete=OFF")
        return conn
    except sqlite3.DatabaseError as exc:
        raise translate(exc, path, what) from exc


def translate(exc: sqlite3.Error, path: Path | str, what: str) -> StorageError:
    """A clear engine error for an SQLite failure on a data file."""
    text = str(exc)
    name = getattr(exc, "sqlite_errorname", "")
    if (
        name in ("SQLITE_NOTADB", "SQLITE_CORRUPT")
        or "not a database" in text
        or "malformed" in text
    ):
        return CorruptFile(
            f"{what} {path} is not a readable SQLite database ({text}); restore it from a "
            "replica or backup, or move it aside"
        )
    if name == "SQLITE_FULL" or "database or disk is full" in text:
        return DiskFull(
            f"{what} {path}: the disk is full ({text}); nothing of this write was stored. "
            "Free space on it (delete topics, shorten retention, move volumes), then try again"
        )
    if name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED") or "locked" in text:
        return FileLocked(
            f"{what} {path} stayed locked by another process for more than "
            f"{BUSY_TIMEOUT_MS // 1000} s ({text}); is a process stuck holding it?"
        )
    return StorageError(f"{what} {path}: {text}")


@contextmanager
def write_transaction(conn: sqlite3.Connection, path: Path | str, what: str) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any error.

    IMMEDIATE because a deferred transaction that turns into a write gets SQLITE_BUSY at
    once, whatever the busy timeout, when another connection writes in between.
    """
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.DatabaseError as exc:
        raise translate(exc, path, what) from exc
    try:
        yield
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.DatabaseError):
            raise translate(exc, path, what) from exc
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise translate(exc, path, what) from exc


def integrity(conn: sqlite3.Connection, path: Path | str, what: str, quick: bool) -> list[str]:
    """What SQLite's `integrity_check` (or the cheaper `quick_check`, which leaves indexes
    out) finds wrong in a file: [] when sound; a file too damaged to check says so."""
    pragma = "quick_check" if quick else "integrity_check"
    try:
        lines = [row[0] for row in conn.execute(f"PRAGMA {pragma}(1000)")]
    except sqlite3.DatabaseError as exc:
        return [str(translate(exc, path, what))]
    found = []
    for line in lines:
        found += [part for part in str(line).splitlines() if part and part != "ok"]
    return [line for line in found if not line.startswith("*** in database")]


def reindex(path: Path, what: str) -> None:
    """Rebuild every index of a file from its tables (what a damaged index needs).

    REINDEX walks an index's pages to free them, which fails when those pages are damaged;
    such an index is taken out of the schema (its pages left unused), made again from its
    table, and the file vacuumed to take the pages back. Uses a connection of its own, so
    no cached schema outlives the change; other connections see the schema version move.
    """
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        broken = []
        for name, sql in conn.execute(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL"
        ).fetchall():
            try:
                with write_transaction(conn, path, what):
                    conn.execute(f'REINDEX "{name}"')
            except CorruptFile:
                broken.append((name, sql))
        if not broken:
            return
        conn.execute("PRAGMA writable_schema=ON")
        try:
            with write_transaction(conn, path, what):
                conn.executemany(
                    "DELETE FROM sqlite_schema WHERE type = 'index' AND name = ?",
                    [(name,) for name, _ in broken],
                )
                version = conn.execute("PRAGMA schema_version").fetchone()[0]
                conn.execute(f"PRAGMA schema_version={int(version) + 1}")
        finally:
            conn.execute("PRAGMA writable_schema=OFF")
        conn.close()
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        for _, sql in broken:
            with write_transaction(conn, path, what):
                conn.execute(sql)
        try:
            conn.execute("VACUUM")  # the dropped indexes' pages
        except sqlite3.DatabaseError:
            pass  # they stay unused; `plet check` says so, and a later repair vacuums
    except sqlite3.DatabaseError as exc:
        raise translate(exc, path, what) from exc
    finally:
        conn.close()


@contextmanager
def read_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """A consistent snapshot over several statements; kept short so checkpoints can run."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


class _Held:
    """A thread's connection, held by that thread's `threading.local` only: when the thread
    ends, the holder goes and its finalizer closes the connection (web servers start a
    thread per request, so connections of dead threads must not pile up)."""

    __slots__ = ("conn", "__weakref__")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        weakref.finalize(self, _close_quietly, conn)


def _close_quietly(conn: sqlite3.Connection) -> None:
    try:
        conn.close()
    except sqlite3.Error:
        pass


class ThreadConnections:
    """One connection per thread to one file, all closed together by `close()`, and each
    closed on its own when its thread ends; `get()` never hands a thread another thread's
    connection, and none after `close()`. Any thread may call it.

    sqlite3 connections must not be used by two threads at once; keeping one per thread
    avoids a lock around every statement and lets reads run in parallel.
    """

    def __init__(
        self,
        path: Path,
        what: str,
        setup: Callable[[sqlite3.Connection], object] | None = None,
        page_size: int | None = None,
    ) -> None:
        self.path = path
        self.what = what
        self.page_size = page_size
        self._setup = setup
        self._local = threading.local()
        self._all: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False

    def get(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)  # every statement comes here: keep it short
        if conn is None:
            if self._closed:
                from engine.errors import Closed

                raise Closed(f"{self.what} {self.path} is closed")
            conn = connect(self.path, what=self.what, page_size=self.page_size)
            if self._setup is not None:
                self._setup(conn)
            held = _Held(conn)
            self._local.conn, self._local.held = conn, held
            with self._lock:
                self._all.add(held)
        return conn

    def close(self) -> None:
        self._closed = True
        with self._lock:
            held, self._all = list(self._all), weakref.WeakSet()
        for h in held:
            _close_quietly(h.conn)
        self._local = threading.local()
