"""Wake-ups across processes: a consumer in one process learns of an append made by
another process at once, instead of at its next look at the files.

Each open `Cluster` that waits for appends (a consumer's idle poll, the wire listener's
parked fetches) gets a doorbell: a FIFO `<cluster>/wake/<pid>-<token>` and a daemon thread
blocked on it. After every append, `AppendSignal.notify` rings the others: one byte
written, without blocking, to every doorbell of the directory but its own. A FIFO rather
than a socket: its path may be as long as the cluster's (a UNIX socket's is limited to 107
bytes), and a full one (16 KiB of rings not yet read) means its owner will wake anyway.

Rings are wake-ups only, never data: a ring lost (a doorbell made between two looks at the
directory, a process that cannot write another user's FIFO) costs that waiter the time to
its next look at the files (`engine.client.consumer`, 20 ms), nothing else. A process that
dies leaves its FIFO behind; the first writer to find no reader on it and its process gone
removes it. Where FIFOs do not exist (Windows), or with `PLET_NO_DOORBELL` set, nobody rings
and waiters look at the files.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import select
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

WAKE_DIR = "wake"
# How often a writer lists the directory again even when its modification time did not
# move (file systems that keep it to a few milliseconds miss a doorbell made just after)
RELIST_S = 1.0
_RING = b"\x01"


def supported() -> bool:
    """Whether this process rings and has doorbells: where FIFOs exist, unless
    `PLET_NO_DOORBELL` is set (a file system where they misbehave; `bench/latency.py`'s
    case without them)."""
    return hasattr(os, "mkfifo") and not os.environ.get("PLET_NO_DOORBELL")


class Doorbells:
    """The doorbells of one cluster directory, seen from one open `Cluster`: `ring()` after
    an append (any thread), `listen()` once something waits, `close()` at the end.
    `on_ring` is called from the doorbell's thread when another process rang."""

    def __init__(self, cluster_path: str | os.PathLike[str], on_ring: Callable[[], None]):
        self._dir = Path(cluster_path) / WAKE_DIR
        self._on_ring = on_ring
        self._lock = threading.Lock()
        # writing side: the doorbells found, name -> open write end (None: not open yet)
        self._others: dict[str, int] = {}
        self._listed_mtime = -1
        self._listed_at = 0.0
        # listening side
        self._name: str | None = None
        self._read_fd = self._keep_fd = -1
        self._stop_r = self._stop_w = -1
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pid = os.getpid()

    # --- ringing ---------------------------------------------------------------------------

    def ring(self) -> None:
        """Wake every other process waiting on this cluster. Never blocks, never raises."""
        if self._closed:
            return
        if self._pid != os.getpid():
            self._forked()
        with self._lock:
            try:
                self._relist()
            except OSError as exc:
                log.debug("doorbells of %s not listed: %s", self._dir, exc)
                return
            for name, fd in list(self._others.items()):
                try:
                    os.write(fd, _RING)
                except BlockingIOError:
                    pass  # full: rung already, its owner wakes
                except OSError:  # its reader is gone (EPIPE): forget it, maybe remove it
                    os.close(fd)
                    del self._others[name]
                    self._remove_if_dead(name)

    def _relist(self) -> None:
        try:
            st = os.stat(self._dir)
        except FileNotFoundError:
            return  # nobody ever waited here
        now = time.monotonic()
        if st.st_mtime_ns == self._listed_mtime and now - self._listed_at < RELIST_S:
            return
        self._listed_mtime, self._listed_at = st.st_mtime_ns, now
        names = {n for n in os.listdir(self._dir) if n != self._name and not n.startswith(".")}
        for gone in set(self._others) - names:
            os.close(self._others.pop(gone))
        for name in names - set(self._others):
            try:
                self._others[name] = os.open(self._dir / name, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no reader: starting up, or its process died
                    self._remove_if_dead(name)
                # else another user's, or not a FIFO: it is not rung

    def _remove_if_dead(self, name: str) -> None:
        pid = name.split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            return
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            try:
                (self._dir / name).unlink()
            except OSError:
                pass
        except OSError:
            pass  # alive, as another user

    # --- listening -------------------------------------------------------------------------

    def listen(self) -> None:
        """Make this process's doorbell and its thread, once. A directory where no FIFO can
        be made (read-only, or no FIFOs here) leaves waiters to look at the files."""
        if self._pid != os.getpid():
            self._forked()
        if self._thread is not None or self._closed or not supported():
            return
        with self._lock:
            if self._thread is not None or self._closed:
                return
            try:
                self._dir.mkdir(mode=0o700, exist_ok=True)
                name = f"{os.getpid()}-{secrets.token_hex(6)}"
                path = self._dir / name
                os.mkfifo(path, 0o600)
                self._name = name  # removed again by _close_listening on failure
                self._read_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                # a write end of our own keeps the FIFO from reading end-of-file (and so
                # from waking the thread for nothing) while no writer has it open
                self._keep_fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                if not stat.S_ISFIFO(os.fstat(self._read_fd).st_mode):
                    raise OSError(f"{path} is not a FIFO")
            except OSError as exc:
                log.debug("no doorbell in %s (waiters look at the files): %s", self._dir, exc)
                self._close_listening()
                self._closed = True  # do not try again at every wait
                return
            self._stop_r, self._stop_w = os.pipe()
            self._thread = threading.Thread(
                target=self._run, name=f"plet-doorbell-{name}", daemon=True
            )
            self._thread.start()

    @property
    def listening(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        read_fd, stop_r = self._read_fd, self._stop_r
        while True:
            try:
                ready, _, _ = select.select([read_fd, stop_r], [], [])
            except (OSError, ValueError):
                return  # closed under us
            if stop_r in ready:
                return
            try:
                while os.read(read_fd, 4096):
                    pass  # every ring since the last wake is one wake
            except BlockingIOError:
                pass
            except OSError:
                return
            self._on_ring()

    def _forked(self) -> None:
        """In a child made by fork(): the parent's doorbell and thread are the parent's.
        Start over with none (the inherited descriptors are closed, the FIFO left alone)."""
        for fd in [
            *self._others.values(),
            self._read_fd,
            self._keep_fd,
            self._stop_r,
            self._stop_w,
        ]:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._lock = threading.Lock()
        self._others = {}
        self._listed_mtime = -1
        self._name, self._thread = None, None
        self._read_fd = self._keep_fd = self._stop_r = self._stop_w = -1
        self._pid = os.getpid()

    # --- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        if self._pid != os.getpid():
            self._forked()  # never the parent's doorbell
        with self._lock:
            if self._closed and self._thread is None:
                self._close_writers()
                return
            self._closed = True
            thread = self._thread
            if thread is not None:
                os.write(self._stop_w, b"x")
        if thread is not None:
            thread.join(5)
        with self._lock:
            self._thread = None
            self._close_listening()
            self._close_writers()

    def _close_writers(self) -> None:
        for fd in self._others.values():
            os.close(fd)
        self._others.clear()

    def _close_listening(self) -> None:
        for attr in ("_read_fd", "_keep_fd", "_stop_r", "_stop_w"):
            fd = getattr(self, attr)
            if fd >= 0:
                os.close(fd)
                setattr(self, attr, -1)
        if self._name is not None:
            try:
                (self._dir / self._name).unlink()
            except OSError:
                pass
            self._name = None


__all__ = ["RELIST_S", "WAKE_DIR", "Doorbells", "supported"]
