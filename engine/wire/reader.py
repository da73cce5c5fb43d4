"""A connection's reads: a request's bytes received straight into the buffer it is read into.

asyncio's StreamReader receives each chunk into a new bytes object, appends it to a buffer
that grows, and copies a read out of that buffer; its limit pauses and resumes the socket
every 128 KiB. Reading produce requests of a megabyte, that was 0.9 ms of the event loop's
CPU per MiB, against 0.2 ms when the socket writes into the read's own buffer (measured on
loopback, with `plet serve`'s allocator settings; docs/BENCHMARKS.md, issue 28 item 4).

`FrameReader` is the protocol of a connection (an `asyncio.BufferedProtocol`) and its
reader: a read larger than its small buffer gets a bytearray of its own, into which the
socket (or TLS) writes directly; smaller reads (frame sizes, small requests) come from the
small buffer. The small buffer is all a connection holds besides the read in progress: when
it is full and nothing is being read, the socket is not read either.
"""

from __future__ import annotations

import asyncio
from asyncio.streams import FlowControlMixin
from collections.abc import Callable, Coroutine
from typing import Any

BUFFER_BYTES = 64 * 1024


class FrameReader(FlowControlMixin, asyncio.BufferedProtocol):
    """The protocol of one connection; `on_connected(reader, writer)` serves it (a task)."""

    def __init__(
        self,
        on_connected: Callable[[FrameReader, asyncio.StreamWriter], Coroutine[Any, Any, None]],
        buffer_bytes: int = BUFFER_BYTES,
    ) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(loop)
        self._event_loop = loop
        self._on_connected = on_connected
        self._small = bytearray(buffer_bytes)
        self._start = self._end = 0  # the small buffer's unread bytes
        # a large read in progress: the rest of its buffer, and how much of it is filled
        self._target: memoryview | None = None
        self._filled = 0
        self._eof = False
        self._exception: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._read_paused = False  # (FlowControlMixin's `_paused` is the writing side)
        self._over_tls = False
        self._transport: asyncio.BaseTransport | None = None
        self._closed: asyncio.Future[None] = self._event_loop.create_future()
        self.task: asyncio.Task[None] | None = None

    # --- the protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._over_tls = transport.get_extra_info("sslcontext") is not None
        assert isinstance(transport, asyncio.WriteTransport)
        writer = asyncio.StreamWriter(transport, self, None, self._event_loop)
        self.task = self._event_loop.create_task(self._on_connected(self, writer))

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            self._eof = True
        else:
            self._exception = exc
        self._wake()
        if not self._closed.done():
            if exc is None:
                self._closed.set_result(None)
            else:
                self._closed.set_exception(exc)
                self._closed.exception()  # retrieved: nobody need wait for it
        super().connection_lost(exc)  # wakes a writer waiting to drain
        self._transport = None

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        # as StreamReaderProtocol: keep the connection open to write the answers, except
        # over TLS, which cannot half-close
        return not self._over_tls

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._target is not None:
            return self._target[self._filled :]
        if self._start == self._end:
            self._start = self._end = 0
        elif self._end == len(self._small):  # room only at the front: move the rest there
            rest = self._end - self._start
            self._small[:rest] = self._small[self._start : self._end]
            self._start, self._end = 0, rest
        return memoryview(self._small)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._target is not None:
            self._filled += nbytes
            if self._filled == len(self._target):
                # full: what comes next goes to the small buffer (an empty buffer handed
                # to the transport would be an error that closes the connection)
                self._target.release()
                self._target = None
                self._wake()
            return
        self._end += nbytes
        if self._end - self._start == len(self._small):
            self._pause()  # full: read on once something is taken
        self._wake()

    def _get_close_waiter(self, stream: Any) -> asyncio.Future[None]:
        return self._closed

    # --- the reader -----------------------------------------------------------------------

    def at_eof(self) -> bool:
        return self._eof and self._start == self._end

    def exception(self) -> BaseException | None:
        return self._exception

    async def readexactly(self, n: int) -> bytes | bytearray:
        """`n` bytes: bytes when they fit the small buffer, else a bytearray of their own.
        Raises `asyncio.IncompleteReadError` when the connection ends first."""
        if n <= len(self._small):
            while self._end - self._start < n:
                if not await self._more():  # what came is taken, as StreamReader does
                    partial = bytes(self._small[self._start : self._end])
                    self._start = self._end = 0
                    raise asyncio.IncompleteReadError(partial, n)
            data = bytes(memoryview(self._small)[self._start : self._start + n])  # one copy
            self._start += n
            self._resume()
            return data
        buffer = bytearray(n)
        have = self._end - self._start
        buffer[:have] = memoryview(self._small)[self._start : self._end]
        self._start = self._end = 0
        self._target, self._filled = memoryview(buffer), have
        try:
            while self._filled < n:
                if not await self._more():
                    raise asyncio.IncompleteReadError(bytes(buffer[: self._filled]), n)
        finally:
            if self._target is not None:  # given up before it was full
                self._target.release()
                self._target = None
        return buffer

    async def _more(self) -> bool:
        """Wait for more bytes; False once the connection has ended."""
        if self._exception is not None:
            raise self._exception
        if self._eof:
            return False
        self._resume()
        self._waiter = self._event_loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
        return True

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _pause(self) -> None:
        if not self._read_paused and isinstance(self._transport, asyncio.ReadTransport):
            self._read_paused = True
            self._transport.pause_reading()

    def _resume(self) -> None:
        if self._read_paused and isinstance(self._transport, asyncio.ReadTransport):
            self._read_paused = False  # (FlowControlMixin's `_paused` is the writing side)
            self._transport.resume_reading()
