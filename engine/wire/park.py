"""Requests that wait without a thread: a long-polling Fetch, a JoinGroup held until its
rebalance completes, a SyncGroup waiting for the leader's assignment.

A handler that cannot answer yet returns a `Park` instead of a response. The connection
then waits on the event loop (no worker thread is held) until the park's `Signal` fires or
its deadline comes, and calls `resume()` in a worker, which answers or parks again. When
the connection closes meanwhile, `cancel()` runs instead (in a worker) and nothing is
answered. So a thousand long polls cost a thousand small objects, not a thousand threads,
and closing a socket frees what it waited for.

A produce handler returns a `Deferred` instead: its answer waits for the engine to write
what it queued, and meanwhile the connection reads its next request (engine.wire.connection).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Signal:
    """A change counter that any thread fires and event-loop coroutines wait on.

    A waiter reads `seq` before it looks at the state it waits for, and passes it to
    `wait`: a change in between is never missed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seq = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def fire(self) -> None:
        with self._lock:
            self.seq += 1
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            try:
                loop.call_soon_threadsafe(_resolve, future)
            except RuntimeError:
                pass  # that loop has ended

    async def wait(self, seq: int, timeout: float) -> None:
        """Return when the counter moved past `seq`, or after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        entry = (loop, future)
        with self._lock:
            if self.seq != seq:
                return
            self._waiters.append(entry)
        try:
            await asyncio.wait_for(future, max(timeout, 0.0))
        except TimeoutError:
            pass
        finally:
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass
class Park:
    """A handler's answer that is not ready yet (see the module's docstring)."""

    resume: Callable[[], Any]  # in a worker: the response, or another Park
    signal: Signal
    seq: int  # `signal.seq` read before the handler last looked
    deadline: float  # time.monotonic() by which `resume` is called in any case
    cancel: Callable[[], None] | None = None  # in a worker, when the connection closes


class Deferred:
    """A handler's answer that depends on engine work it queued (a produce request's
    batches, handed to the engine producer): the connection reads its next request
    meanwhile, and `finish()` (in a worker) makes the answer once every one of `futures`
    is done, or at `deadline` (time.monotonic()) in any case. So the batches of several
    requests of one connection are written together (one commit and one fsync), while
    the answers still go out in request order (engine.wire.connection)."""

    def __init__(self, futures: list[Any], deadline: float, finish: Callable[[], Any]) -> None:
        self.futures = futures  # engine producer futures (add_both)
        self.deadline = deadline
        self.finish = finish

    def when_done(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """A future of `loop` that resolves once every engine future is done (their
        callbacks run in the producer's sender thread)."""
        done: asyncio.Future[None] = loop.create_future()
        left = [len(self.futures)]
        lock = threading.Lock()

        def one(*_: Any) -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                try:
                    loop.call_soon_threadsafe(_resolve, done)
                except RuntimeError:
                    pass  # the loop has ended: nobody waits

        if not self.futures:
            done.set_result(None)
        for future in self.futures:
            future.add_both(one)
        return done
