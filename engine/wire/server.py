"""`KafkaServer`: an asyncio listener in its own thread, engine work in a worker pool."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from engine import errors, names
from engine.auth.logins import LIMITER, LoginLimiter
from engine.cluster import Cluster
from engine.wire import auth, fetch_sessions, limits
from engine.wire import names as wire_names
from engine.wire.broker import Broker
from engine.wire.connection import Connection, log_once
from engine.wire.reader import FrameReader
from engine.wire.registry import load

log = logging.getLogger(__name__)

DEFAULT_MAX_FRAME_BYTES = limits.DEFAULT_MAX_FRAME_BYTES
# Worker threads: engine work only (a long poll or a held JoinGroup waits on the event
# loop, engine.wire.park); each connection uses at most one at a time.
DEFAULT_WORKERS = 64


class KafkaServer:
    """A Kafka protocol listener on `cluster`: node 0, leader of every partition.

    `sasl=True` (or `sasl_mechanisms=("PLAIN",)`) makes every connection log in as a
    console user or with an API token, and act as that user's principal; without it every
    client acts as the cluster's principal. `ssl_context`, or `tls_cert` and `tls_key` (PEM
    files), serve TLS. A non-loopback `listen` address is refused unless it has both SASL
    and TLS, or `insecure=True` (docs/WIRE.md, Security). Topics of streams other than
    `default_stream` have Kafka-legal names such as `apps.sensors..car-17`, with
    `stream_separator` (None: full names only); Metadata for all topics lists at most
    `max_listed_topics` (docs/WIRE.md, Topic names). The limits (docs/WIRE.md,
    Limits): a fetch waits at most `max_fetch_wait_ms`, a rebalance at most
    `max_rebalance_timeout_ms`; a JoinGroup's session timeout must lie within
    `min_session_timeout_ms` and `max_session_timeout_ms`; connections are capped in all
    (`max_connections`, default half the file limit), per client address and per SASL
    user; a SASL client must log in within `login_timeout_s`, a frame once begun must be
    complete within `frame_timeout_s`, a connection idle for `idle_timeout_s` is closed;
    the unfinished frames of clients not logged in share `max_bytes_before_login`, those of
    one logged-in user's connections `max_bytes_per_user`; the batches of one produce
    request decompress to at most `max_decompressed_bytes`.
    Failed logins are limited per client address by `login_limiter` (default: this
    process's, engine.auth.logins). Fetch sessions (KIP-227): at most `max_fetch_sessions`
    in the listener (Kafka's max.incremental.fetch.session.cache.slots; 0 turns them off:
    every fetch is a full one) and, with SASL, `max_fetch_sessions_per_user` per user
    (engine.wire.fetch_sessions); `fetch_sessions.stats()` counts their use."""

    def __init__(
        self,
        cluster: Cluster,
        listen: tuple[str, int] = ("127.0.0.1", 9092),
        advertise: tuple[str, int] | None = None,
        default_stream: str = "/kafka",
        *,
        insecure: bool = False,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        workers: int = DEFAULT_WORKERS,
        sasl: bool = False,
        sasl_mechanisms: Iterable[str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        max_fetch_wait_ms: int = limits.DEFAULT_MAX_FETCH_WAIT_MS,
        max_rebalance_timeout_ms: int = limits.DEFAULT_MAX_REBALANCE_TIMEOUT_MS,
        min_session_timeout_ms: int = limits.DEFAULT_MIN_SESSION_TIMEOUT_MS,
        max_session_timeout_ms: int = limits.DEFAULT_MAX_SESSION_TIMEOUT_MS,
        max_connections: int | None = None,
        max_connections_per_address: int = limits.DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
        max_connections_per_user: int = limits.DEFAULT_MAX_CONNECTIONS_PER_USER,
        login_timeout_s: float = limits.DEFAULT_LOGIN_TIMEOUT_S,
        frame_timeout_s: float = limits.DEFAULT_FRAME_TIMEOUT_S,
        idle_timeout_s: float = limits.DEFAULT_IDLE_TIMEOUT_S,
        max_bytes_before_login: int = limits.DEFAULT_MAX_BYTES_BEFORE_LOGIN,
        max_bytes_per_user: int = limits.DEFAULT_MAX_BYTES_PER_USER,
        max_decompressed_bytes: int = limits.DEFAULT_MAX_DECOMPRESSED_BYTES,
        login_limiter: LoginLimiter | None = None,
        stream_separator: str | None = wire_names.DEFAULT_SEPARATOR,
        max_listed_topics: int = limits.DEFAULT_MAX_LISTED_TOPICS,
        max_fetch_sessions: int = limits.DEFAULT_MAX_FETCH_SESSIONS,
        max_fetch_sessions_per_user: int = limits.DEFAULT_MAX_FETCH_SESSIONS_PER_USER,
    ) -> None:
        # checked before binding: nothing to undo
        names.validate_stream_path(default_stream)
        wire_names.check_separator(stream_separator)
        if isinstance(max_listed_topics, bool) or not isinstance(max_listed_topics, int):
            raise errors.InvalidArgument(
                f"max_listed_topics must be a whole number, got {max_listed_topics!r}"
            )
        if max_listed_topics < 0:
            raise errors.InvalidArgument(f"max_listed_topics must be >= 0, got {max_listed_topics}")
        host, port = listen
        self.sasl_mechanisms = auth.mechanisms(sasl, sasl_mechanisms)
        if ssl_context is not None and (tls_cert or tls_key):
            raise errors.InvalidArgument("give ssl_context or tls_cert and tls_key, not both")
        if tls_key and not tls_cert:
            raise errors.InvalidArgument("tls_key needs tls_cert")
        if tls_cert:
            ssl_context = auth.server_ssl_context(tls_cert, tls_key)
        self.ssl_context = ssl_context
        auth.check_exposure(
            host, sasl=bool(self.sasl_mechanisms), tls=ssl_context is not None, insecure=insecure
        )
        if not isinstance(max_frame_bytes, int) or max_frame_bytes < 1024:
            raise errors.InvalidArgument(
                f"max_frame_bytes must be >= 1024, got {max_frame_bytes!r}"
            )
        self.limits = limits.Limits(
            max_connections_per_address=max_connections_per_address,
            max_connections_per_user=max_connections_per_user,
            login_timeout_s=login_timeout_s,
            frame_timeout_s=frame_timeout_s,
            idle_timeout_s=idle_timeout_s,
            max_bytes_before_login=max_bytes_before_login,
            max_bytes_per_user=max_bytes_per_user,
            max_decompressed_bytes=max_decompressed_bytes,
            logins=login_limiter if login_limiter is not None else LIMITER,
        )
        if max_connections is not None:
            self.limits.max_connections = max_connections
        self.limits.check()
        _check_waits(
            max_fetch_wait_ms,
            max_rebalance_timeout_ms,
            min_session_timeout_ms,
            max_session_timeout_ms,
        )
        sessions = fetch_sessions.FetchSessions(max_fetch_sessions, max_fetch_sessions_per_user)
        self.cluster = cluster
        self.max_frame_bytes = max_frame_bytes
        self._listen = (host, port)
        self._advertise = advertise
        self._default_stream = default_stream
        load()
        # bind now, so `address` is known (port 0 picks a free one) and errors show at once
        self._sock = socket.create_server((host, port), reuse_port=False)
        self._sock.setblocking(False)
        bound = self._sock.getsockname()[:2]
        self.address: tuple[str, int] = (bound[0], bound[1])
        adv_host, adv_port = advertise or self.address
        self.broker = Broker(
            cluster,
            default_stream,
            adv_host,
            adv_port,
            stream_separator=stream_separator,
            max_listed_topics=max_listed_topics,
        )
        self.broker.max_fetch_wait_ms = max_fetch_wait_ms
        protocol = ("SASL_" if self.sasl_mechanisms else "") + (
            "SSL" if ssl_context is not None else "PLAINTEXT"
        )
        self.broker.listeners = f"{protocol}://{self.address[0]}:{self.address[1]}"
        self.broker.advertised_listeners = f"{protocol}://{adv_host}:{adv_port}"
        self.broker.fetch_sessions = sessions
        # the fetch session cache: `fetch_sessions.stats()` counts full and incremental fetches
        self.fetch_sessions = sessions
        groups = self.broker.groups
        groups.max_rebalance_timeout_ms = max_rebalance_timeout_ms
        groups.min_session_timeout_ms = min_session_timeout_ms
        groups.max_session_timeout_ms = max_session_timeout_ms
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="plet-wire")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._closed = False
        # closing the cluster closes the listener first: its requests end, its producers flush
        cluster.on_close(self.close)

    def start(self) -> KafkaServer:
        """Serve in a background thread; returns once the listener accepts connections."""
        self._thread = threading.Thread(target=self.serve_forever, name="plet-wire", daemon=True)
        self._thread.start()
        self._ready.wait()
        return self

    def serve_forever(self) -> None:
        """Serve until `close()` (from another thread or a signal handler)."""
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.set_exception_handler(_log_loop_error)
        self._stopped = asyncio.Event()
        tasks: set[asyncio.Task[Any]] = set()

        async def on_client(reader: FrameReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("peername")
            address = str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)
            refused = self.limits.admit(address)
            if refused is not None:
                log_once(logging.WARNING, "refused", "refusing a connection: %s", refused)
                writer.transport.abort()
                return
            try:
                await serve(reader, writer)
            finally:
                self.limits.leave(address)

        async def serve(reader: FrameReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = asyncio.current_task()
            if task is not None:
                tasks.add(task)
            try:
                await Connection(
                    reader,
                    writer,
                    self.broker,
                    self._pool,
                    self.max_frame_bytes,
                    self.sasl_mechanisms,
                    self.limits,
                ).run()
            except asyncio.CancelledError:
                pass  # the server is closing
            finally:
                if task is not None:
                    tasks.discard(task)

        # a 64 KiB read buffer per connection: bounded memory besides the frame being read
        server = await self._loop.create_server(
            lambda: FrameReader(on_client),
            sock=self._sock,
            ssl=self.ssl_context,
            # a client that never finishes its TLS handshake holds no task for long
            ssl_handshake_timeout=10.0 if self.ssl_context is not None else None,
        )
        self._ready.set()
        if self._closed:
            self._stopped.set()
        async with server:
            await self._stopped.wait()
            server.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        """Stop listening, drop the connections, flush the engine producers."""
        if self._closed:
            return
        self._closed = True
        self.broker.closing.set()
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopped.set)
            except RuntimeError:
                pass  # the loop has just ended
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.broker.close()
        self._sock.close()

    def __enter__(self) -> KafkaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_waits(
    fetch_ms: int, rebalance_ms: int, min_session_ms: int, max_session_ms: int
) -> None:
    """Refuse wait caps that are not positive whole milliseconds, or session bounds whose
    minimum lies above their maximum."""
    given = {
        "max_fetch_wait_ms": fetch_ms,
        "max_rebalance_timeout_ms": rebalance_ms,
        "min_session_timeout_ms": min_session_ms,
        "max_session_timeout_ms": max_session_ms,
    }
    for name, value in given.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise errors.InvalidArgument(f"{name} must be a positive integer, got {value!r}")
    if min_session_ms > max_session_ms:
        raise errors.InvalidArgument(
            f"min_session_timeout_ms ({min_session_ms}) is above max_session_timeout_ms"
            f" ({max_session_ms})"
        )


def _log_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's errors (an accept that fails with "too many open files", ...),
    logged once per interval with a count instead of a traceback each time."""
    message = str(context.get("message", "event loop error"))
    exc = context.get("exception")
    kind = f"{message}: {type(exc).__name__}" if exc is not None else message
    log_once(logging.ERROR, kind, "%s: %s", message, exc, exc_info=exc)
