"""One client connection: framing, dispatch to the registry, responses in request order.

Kafka answers the requests of one connection in order, and handles them in that order. A
connection handles its next request once it answered the last, with one exception: a
produce request whose batches are queued in the engine producer (the handler returns a
`Deferred`) is answered once they are written, and meanwhile the connection reads and
queues the next produce requests, up to MAX_PIPELINED, so that the batches of several
requests go to the volume together, in one commit and one fsync (a client such as
librdkafka keeps several produce requests in flight). Any other request waits until
those are written, so it sees what they wrote (a Fetch, an EndTxn). The answers go out in
request order, written by a coroutine of their own. The engine work of a request runs in
the server's worker pool: the event loop only moves bytes.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka.protocol.metadata import ApiVersionsResponse

from engine.log_once import LogOnce
from engine.wire import codec, codes
from engine.wire.broker import Broker
from engine.wire.limits import Limits
from engine.wire.park import Deferred, Park
from engine.wire.reader import FrameReader
from engine.wire.registry import APIS

if TYPE_CHECKING:
    from engine.auth.logins import ScramLogin
    from engine.auth.users import UserInfo
    from engine.client.consumer import Consumer

log = logging.getLogger(__name__)
log_once = LogOnce(log)

_SIZE = struct.Struct(">i")
API_VERSIONS = 18
# What a connection may send before its SASL login (Kafka closes it for anything else).
_BEFORE_LOGIN = frozenset({API_VERSIONS, 17, 36})  # ApiVersions, SaslHandshake, SaslAuthenticate
# Until then a frame is at most this big (Kafka's sasl.server.max.receive.size): a client
# nobody knows yet cannot make the listener hold max_frame_bytes for it.
MAX_FRAME_BEFORE_LOGIN = 512 * 1024
# A frame is read in pieces of at most this size, so its memory grows with the bytes that
# came (a declared size is no allocation), and each piece counts against a budget before it
# is read (the listener's before the login, the user's after it).
_PIECE_BEFORE_LOGIN = 64 * 1024
_PIECE = 1024 * 1024
# A parked request looks this often whether its connection closed (then it is cancelled).
_CLOSE_CHECK_S = 0.25
PRODUCE = 0  # the api key of Produce
# Produce requests of one connection queued in the engine before the first of them is
# answered (the Java client's max.in.flight.requests.per.connection: 5)
MAX_PIPELINED = 5


@dataclass
class _Parked:
    """A request whose handler parked (engine.wire.park), with what encodes its answer."""

    park: Park
    name: str
    version: int
    correlation_id: int


@dataclass
class _Pending:
    """A request whose handler deferred its answer (engine.wire.park.Deferred)."""

    deferred: Deferred
    name: str
    version: int
    correlation_id: int


_Answer = bytes | bytearray | codec.Parts | codec.FramingError | None


class Session:
    """What the handlers of one connection share: the broker, and the engine consumer
    its fetches read through (made on first use, closed with the connection).

    With SASL, `broker` becomes a view acting as the logged-in user's principal
    (`Broker.as_principal`) once the login succeeded (handlers/sasl.py)."""

    def __init__(
        self,
        broker: Broker,
        peer: object,
        sasl_mechanisms: tuple[str, ...] = (),
        limits: Limits | None = None,
    ) -> None:
        self.broker = broker
        self.limits = limits if limits is not None else Limits()  # the listener's
        self.peer = peer  # the socket's peername: (host, port, ...) for TCP
        # the client's address, as login limits count it
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)
        self.consumer: Consumer | None = None
        self.committed_consumer: Consumer | None = None  # read_committed fetches
        self.sasl_mechanisms = sasl_mechanisms
        self.authenticated = not sasl_mechanisms
        self.sasl_stage: str | None = None  # set by a SaslHandshake
        self.sasl_mechanism: str | None = None  # the one the handshake chose
        self.scram: ScramLogin | None = None  # a SCRAM login between its two messages
        self.user: UserInfo | None = None  # the console user logged in
        self.close_after = False  # close once the response is sent (a refused login)
        self.fetch_session_ids: set[int] = set()  # the fetch sessions it made (KIP-227)
        # held while a request is served: a connection closed mid-request (the server
        # stopping) closes its consumer after that request, not under it
        self.lock = threading.Lock()

    def close(self) -> None:
        with self.lock:
            self._close()

    def _close(self) -> None:
        if self.fetch_session_ids:
            self.broker.fetch_sessions.drop(self, self.fetch_session_ids)
            self.fetch_session_ids.clear()
        if self.consumer is not None:
            self.consumer.close(autocommit=False)
            self.consumer = None
        if self.committed_consumer is not None:
            self.committed_consumer.close(autocommit=False)
            self.committed_consumer = None


class Connection:
    def __init__(
        self,
        reader: FrameReader,
        writer: asyncio.StreamWriter,
        broker: Broker,
        pool: Executor,
        max_frame_bytes: int,
        sasl_mechanisms: tuple[str, ...] = (),
        limits: Limits | None = None,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.pool = pool
        self.max_frame_bytes = max_frame_bytes
        self.session = Session(broker, writer.get_extra_info("peername"), sasl_mechanisms, limits)
        self.limits = self.session.limits
        self.opened = time.monotonic()
        self.parked: _Parked | None = None  # the request waiting on the event loop

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        # the answers in request order: each ready, or a task that makes it
        answers: asyncio.Queue[tuple[_Answer | asyncio.Task[_Answer], bool]] = asyncio.Queue()
        writing = loop.create_task(self._write_answers(answers))
        pipelined: list[asyncio.Task[_Answer]] = []  # produce answers not made yet
        try:
            while not writing.done():
                try:
                    frame = await self._read_frame()
                except asyncio.IncompleteReadError:
                    return  # the client went away
                except TimeoutError as exc:
                    log_once(
                        logging.INFO,
                        "timeout",
                        "closing connection from %s: %s",
                        self.session.peer,
                        exc.args[0] if exc.args else "timed out",
                    )
                    return
                if frame is None:
                    return
                pipelined = [t for t in pipelined if not t.done()]
                if pipelined and not self._is_produce(frame):
                    await asyncio.wait(pipelined)  # it sees what they wrote
                    pipelined = []
                out = await loop.run_in_executor(self.pool, self.answer, frame)
                while isinstance(out, _Parked):
                    self.parked = out
                    if not await self._wait(out.park):
                        return  # the client went away: `finally` cancels the park
                    out = await loop.run_in_executor(self.pool, self._resume, out)
                    self.parked = None
                if isinstance(out, _Pending):
                    task = loop.create_task(self._finish(out))
                    pipelined.append(task)
                    answers.put_nowait((task, False))
                    if len(pipelined) >= MAX_PIPELINED:
                        await asyncio.wait(pipelined, return_when=asyncio.FIRST_COMPLETED)
                    continue
                last = isinstance(out, codec.FramingError) or self.session.close_after
                answers.put_nowait((out, last))
                # the writer holds it now: a fetch's tens of megabytes must not live on here
                # while the next request is answered
                out = frame = None
                if last:
                    await writing  # the answers before it first, then it closes
                    return
        except (ConnectionError, OSError):
            return
        finally:
            # the engine writes the batches of answers not made yet: nobody reads them now
            for task in (writing, *pipelined):
                if not task.done():
                    task.cancel()
            if self.session.user is not None:
                self.limits.remove_user(self.session.user.name)
            parked, self.parked = self.parked, None
            if parked is not None and parked.park.cancel is not None:
                await loop.run_in_executor(self.pool, parked.park.cancel)
            await loop.run_in_executor(self.pool, self.session.close)
            self.writer.close()

    def _is_produce(self, frame: bytes | bytearray) -> bool:
        if self.session.sasl_stage == "raw" or len(frame) < 2:
            return False
        return int.from_bytes(frame[:2], "big", signed=True) == PRODUCE

    async def _finish(self, pending: _Pending) -> _Answer:
        """The answer of a deferred request, once its engine work is done (or at its
        deadline), made in a worker."""
        loop = asyncio.get_running_loop()
        deferred = pending.deferred
        try:
            left = deferred.deadline - time.monotonic()
            await asyncio.wait_for(deferred.when_done(loop), max(left, 0.0))
        except TimeoutError:
            pass  # `finish` answers what is not written by now with its error
        return await loop.run_in_executor(self.pool, self._finished, pending)

    def _finished(self, pending: _Pending) -> _Answer:
        try:
            response = pending.deferred.finish()
            encoded = self._encode(response, pending.name, pending.version, pending.correlation_id)
            assert not isinstance(encoded, _Parked | _Pending)  # a produce answer
            return encoded
        except Exception:
            return self._failed(pending.name, pending.version)

    def _failed(self, name: str, version: int) -> codec.FramingError:
        """A bug of ours, or the system out of something (files, memory): Kafka closes the
        connection on an unexpected server error too. Logged once per interval."""
        log_once(
            logging.ERROR,
            f"{name} failed",
            "%s v%d from %s failed",
            name,
            version,
            self.session.peer,
            exc_info=True,
        )
        return codec.FramingError(f"{name} failed")

    async def _write_answers(
        self, answers: asyncio.Queue[tuple[_Answer | asyncio.Task[_Answer], bool]]
    ) -> None:
        """Write the answers in request order; close the connection after a framing error
        or an answer after which it closes (a refused login)."""
        try:
            while True:
                item, last = await answers.get()
                out = await item if isinstance(item, asyncio.Task) else item
                if isinstance(out, codec.FramingError):
                    log.info("closing connection from %s: %s", self.session.peer, out)
                    self.writer.close()
                    return
                if isinstance(out, codec.Parts):
                    # a part at a time, each let go of once written: the socket's write
                    # buffer never holds more than one of them, and a response's memory is
                    # freed as it goes (the next one reuses it, rather than growing the heap)
                    out.reverse()
                    while out:
                        self.writer.write(out.pop())
                        await self.writer.drain()
                elif out is not None:
                    self.writer.write(out)
                    await self.writer.drain()
                item = out = None  # nothing of it kept while waiting for the next answer
                if last:
                    self.writer.close()
                    return
        except (ConnectionError, OSError):
            self.writer.close()

    async def _wait(self, park: Park) -> bool:
        """Wait on the event loop until the park's signal fires or its deadline comes
        (True), or the client goes away (False)."""
        closing = self.session.broker.closing
        while True:
            left = park.deadline - time.monotonic()
            if left <= 0 or park.signal.seq != park.seq or closing.is_set():
                return True
            await park.signal.wait(park.seq, min(left, _CLOSE_CHECK_S))
            if self.reader.at_eof() or self.writer.is_closing() or self.reader.exception():
                return False

    def _resume(self, parked: _Parked) -> _Answer | _Parked | _Pending:
        """Resume a parked request (in a worker thread)."""
        try:
            with self.session.lock:
                response = parked.park.resume()
            return self._encode(response, parked.name, parked.version, parked.correlation_id)
        except Exception:
            return self._failed(parked.name, parked.version)

    def _encode(
        self, response: Any, name: str, version: int, correlation_id: int
    ) -> bytes | bytearray | codec.Parts | _Parked | _Pending | None:
        if response is None:
            return None
        if isinstance(response, Park):
            return _Parked(response, name, version, correlation_id)
        if isinstance(response, Deferred):
            return _Pending(response, name, version, correlation_id)
        if isinstance(response, codec.Spliced):
            return codec.encode_spliced(response, version, correlation_id)
        return codec.encode_response(response, version, correlation_id)

    async def _read_frame(self) -> bytes | bytearray | None:
        """The next request frame; None after a framing error (logged). Raises
        TimeoutError when the client is too slow: to log in (SASL), to send its next
        request, or to finish a frame it began."""
        limits = self.limits
        if self.session.authenticated:
            wait = limits.idle_timeout_s
            why = f"idle for {wait:g} s"
        else:
            wait = self.opened + limits.login_timeout_s - time.monotonic()
            why = f"no login within {limits.login_timeout_s:g} s"
        try:
            async with asyncio.timeout(max(wait, 0)):
                head = await self.reader.readexactly(4)
        except TimeoutError:
            raise TimeoutError(why) from None
        (size,) = _SIZE.unpack(head)
        limit = self.max_frame_bytes
        if not self.session.authenticated:
            limit = min(limit, MAX_FRAME_BEFORE_LOGIN)
        if size < 8 or size > limit:
            # A framing error: nothing after it can be trusted to be a frame boundary.
            log_once(
                logging.INFO,
                "frame size",
                "closing connection from %s: frame of %d bytes (limit %d)",
                self.session.peer,
                size,
                limit,
            )
            return None
        try:
            async with asyncio.timeout(limits.frame_timeout_s):
                return await self._read_counted(size)
        except TimeoutError:
            raise TimeoutError(
                f"a frame of {size} bytes not complete within {limits.frame_timeout_s:g} s"
            ) from None

    async def _read_counted(self, size: int) -> bytes | bytearray | None:
        """A frame, read in pieces that each count against a budget while it is read:
        before the login, the listener's for all connections not logged in (Kafka bounds
        these frames by sasl.server.max.receive.size only); after it, the logged-in user's
        (without SASL, the one of every connection). None when the budget is spent."""
        limits = self.limits
        user = self.session.user
        if not self.session.authenticated:
            piece = _PIECE_BEFORE_LOGIN
            budget, name = limits.max_bytes_before_login, "max_bytes_before_login"
            whose = "clients not logged in"

            def reserve(n: int) -> bool:
                return limits.reserve_before_login(n)

            def release(n: int) -> None:
                limits.release_before_login(n)

        else:
            piece = _PIECE
            key = user.name if user is not None else ""
            budget, name = limits.max_bytes_per_user, "max_bytes_per_user"
            whose = f"user {key}" if user is not None else "all clients"

            def reserve(n: int) -> bool:
                return limits.reserve_frame(key, n)

            def release(n: int) -> None:
                limits.release_frame(key, n)

        pieces: list[bytes | bytearray] = []
        taken = 0
        try:
            while taken < size:
                n = min(size - taken, piece)
                if not reserve(n):
                    log_once(
                        logging.WARNING,
                        name,
                        "closing connection from %s: the %d bytes for unfinished frames of"
                        " %s are in use (%s)",
                        self.session.peer,
                        budget,
                        whose,
                        name,
                    )
                    return None
                taken += n
                pieces.append(await self.reader.readexactly(n))
            return pieces[0] if len(pieces) == 1 else b"".join(pieces)
        finally:
            release(taken)

    def answer(self, frame: bytes | bytearray) -> _Answer | _Parked | _Pending:
        """The framed response to one request frame (in a worker thread); a FramingError
        where Kafka closes the connection: an unknown api key, an unsupported version of
        anything but ApiVersions, a request that does not parse."""
        if self.session.sasl_stage == "raw":  # after SaslHandshake v0: a bare token
            from engine.wire.handlers.sasl import raw_token

            with self.session.lock:
                answer = raw_token(self.session, bytes(frame))
            return answer if answer is not None else codec.FramingError("SASL login refused")
        try:
            head = codec.peek_head(frame)
            if not self.session.authenticated and head.api_key not in _BEFORE_LOGIN:
                raise codec.FramingError(f"api key {head.api_key} before the SASL login")
            api = APIS.get(head.api_key)
            if api is None:
                raise codec.FramingError(f"unknown api key {head.api_key}")
            version = head.api_version
            if not api.min_version <= version <= api.max_version:
                if head.api_key == API_VERSIONS:
                    return _unsupported_api_versions(head.correlation_id)
                raise codec.FramingError(f"{api.name} v{version} is not supported")
            request = codec.decode_request(api.request, frame, version)
        except codec.FramingError as exc:
            return exc
        try:
            with self.session.lock:
                response = api.handler(self.session, request, version)
            return self._encode(response, api.name, version, head.correlation_id)
        except Exception:
            return self._failed(api.name, version)


def _unsupported_api_versions(correlation_id: int) -> bytes | bytearray:
    """Kafka's answer to an ApiVersions request newer than it knows: error 35 with a v0 body
    that lists what it does support, so the client retries with a version from the list."""
    from engine.wire.handlers.meta import api_versions_list

    response = ApiVersionsResponse(
        error_code=codes.UNSUPPORTED_VERSION, api_keys=api_versions_list(0)
    )
    return codec.encode_response(response, 0, correlation_id)
