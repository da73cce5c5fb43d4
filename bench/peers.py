"""The peers Partitionlet is measured against, in the same run on the same machine.

- Raw SQLite: the ceiling of the storage underneath, `executemany` into one WAL-mode table,
  one transaction per `txn_rows` rows, with `synchronous=NORMAL` (comparable to acks=1) and
  `synchronous=FULL` (comparable to acks="all"), read back with one SELECT cursor.
- Redis Streams through redis-py: XADD in pipelines, XRANGE in chunks, against a
  `redis-server` the benchmark starts itself (`--appendonly yes --appendfsync everysec
  --save ''`, comparable to acks=1) and stops at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.cases import MACHINE, PROCESS, Case, Context, Measurement, payload, stopwatch

# --------------------------------------------------------------------------- raw SQLite

SQLITE = "sqlite"


def sqlite_write(
    path: Path | str,
    messages: int,
    value: bytes,
    *,
    synchronous: str = "NORMAL",
    txn_rows: int = 10_000,
) -> Measurement:
    """Insert `messages` rows (id INTEGER PRIMARY KEY, value BLOB) into a new WAL-mode file."""
    if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise ValueError(f"bad synchronous level {synchronous!r}")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise RuntimeError(f"could not switch {path} to WAL mode (got {mode!r})")
        conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
        conn.execute("CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, value BLOB)")
        execute, executemany = conn.execute, conn.executemany
        sql = "INSERT INTO messages (id, value) VALUES (?, ?)"
        with stopwatch() as elapsed:
            for start in range(0, messages, txn_rows):
                end = min(start + txn_rows, messages)
                execute("BEGIN IMMEDIATE")
                executemany(sql, ((i, value) for i in range(start, end)))
                execute("COMMIT")
    finally:
        conn.close()
    return Measurement(
        messages,
        elapsed[0],
        messages * len(value),
        extra={"synchronous": synchronous.upper(), "txn_rows": txn_rows},
    )


def sqlite_read(path: Path | str) -> Measurement:
    """Read every row back through one SELECT cursor, counting rows and value bytes."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        count = nbytes = 0
        with stopwatch() as elapsed:
            for _id, value in conn.execute("SELECT id, value FROM messages ORDER BY id"):
                count += 1
                nbytes += len(value)
    finally:
        conn.close()
    return Measurement(count, elapsed[0], nbytes)


def _sqlite_file(ctx: Context, size: int, synchronous: str) -> Path:
    path = ctx.path("sqlite", f"{size}-{synchronous.lower()}.db")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(f"{path}{suffix}")
    return path


def _sqlite_produce_case(size: int, synchronous: str):
    def run(ctx: Context) -> Measurement:
        path = _sqlite_file(ctx, size, synchronous)
        n = ctx.settings.messages_for(size)
        measured = sqlite_write(
            path, n, payload(size), synchronous=synchronous, txn_rows=ctx.settings.sqlite_txn_rows
        )
        ctx.state[(SQLITE, size, synchronous)] = path
        return measured

    return run


def _sqlite_consume_case(size: int):
    def run(ctx: Context) -> Measurement:
        path = ctx.state.get((SQLITE, size, "NORMAL")) or ctx.state.get((SQLITE, size, "FULL"))
        if path is None:  # the write case failed or did not run: fill a file, untimed
            path = _sqlite_file(ctx, size, "NORMAL")
            sqlite_write(
                path,
                ctx.settings.messages_for(size),
                payload(size),
                txn_rows=ctx.settings.sqlite_txn_rows,
            )
        return sqlite_read(path)

    return run


def sqlite_cases(ctx: Context) -> list[Case]:
    """Raw SQLite: write with synchronous=NORMAL and FULL, then read back, per value size."""
    txn = ctx.settings.sqlite_txn_rows
    cases = []
    for size in ctx.settings.sizes:
        n = ctx.settings.messages_for(size)
        for sync, durability in (("NORMAL", PROCESS), ("FULL", MACHINE)):
            cases.append(
                Case(
                    SQLITE,
                    "produce",
                    size,
                    f"synchronous={sync}, {txn:,} rows/txn",
                    durability,
                    n,
                    _sqlite_produce_case(size, sync),
                    params={"synchronous": sync, "txn_rows": txn},
                )
            )
        cases.append(
            Case(SQLITE, "consume", size, "SELECT cursor", "", n, _sqlite_consume_case(size))
        )
    return cases


# --------------------------------------------------------------------------- Redis Streams

REDIS = "redis"
REDIS_ARGS = ("--appendonly", "yes", "--appendfsync", "everysec", "--save", "")


def redis_server_path() -> str | None:
    """The `redis-server` executable on PATH, or None."""
    return shutil.which("redis-server")


def redis_server_version(executable: str | None = None) -> str | None:
    """'7.0.15' from `redis-server --version`, or None when it is missing or says nothing."""
    executable = executable or redis_server_path()
    if not executable:
        return None
    try:
        out = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for word in out.split():
        if word.startswith("v="):
            return word[2:]
    return out.strip() or None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class RedisServer:
    """A redis-server process this benchmark started, and how to reach it."""

    host: str
    port: int
    directory: Path
    process: subprocess.Popen
    version: str | None

    def client(self) -> Any:
        import redis

        return redis.Redis(host=self.host, port=self.port, socket_timeout=120)


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def _stop(process: subprocess.Popen, timeout: float = 15.0) -> None:
    if process.poll() is not None:
        return
    process.terminate()  # SIGTERM: redis-server shuts down cleanly (flushes the AOF)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def redis_server(
    directory: Path | str,
    *,
    executable: str | None = None,
    args: tuple[str, ...] = REDIS_ARGS,
    host: str = "127.0.0.1",
    startup_timeout: float = 15.0,
    attempts: int = 3,
) -> Iterator[RedisServer]:
    """Start a private redis-server on `host` and a free port, in `directory`; stop it after.

    It does not daemonize, so it is this process's child and goes away with the block.
    """
    import redis

    executable = executable or redis_server_path()
    if not executable:
        raise FileNotFoundError("redis-server is not on PATH")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "redis.log"
    error = "no attempt made"
    for _ in range(attempts):  # another program may take the free port before redis binds it
        port = free_port(host)
        command = [
            executable,
            "--bind",
            host,
            "--port",
            str(port),
            "--dir",
            str(directory),
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
            "--logfile",
            str(log),
            *args,
        ]
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=directory,
        )
        server = RedisServer(host, port, directory, process, redis_server_version(executable))
        deadline = time.monotonic() + startup_timeout
        client = redis.Redis(host=host, port=port, socket_connect_timeout=1)
        try:
            while time.monotonic() < deadline and process.poll() is None:
                try:
                    if client.ping():
                        break
                except redis.exceptions.ConnectionError:
                    time.sleep(0.05)
                except redis.exceptions.BusyLoadingError:
                    time.sleep(0.05)
            else:
                code = process.poll()
                error = f"exited with {code}" if code is not None else "did not answer in time"
                error += f"; log: {_log_tail(log)}" if _log_tail(log) else ""
                _stop(process)
                continue
        finally:
            client.close()
        try:
            yield server
        finally:
            _stop(process)
        return
    raise RuntimeError(f"could not start redis-server: {error}")


def redis_write(
    client: Any, key: str, messages: int, value: bytes, *, pipeline: int = 1_000
) -> Measurement:
    """XADD `messages` entries {v: value} to stream `key`, `pipeline` commands per round trip."""
    pipe = client.pipeline(transaction=False)
    fields = {b"v": value}
    xadd, execute = pipe.xadd, pipe.execute
    with stopwatch() as elapsed:
        for start in range(0, messages, pipeline):
            for _ in range(min(pipeline, messages - start)):
                xadd(key, fields)
            execute()
    length = client.xlen(key)
    error = None if length == messages else f"stream holds {length:,} of {messages:,} entries"
    return Measurement(
        messages, elapsed[0], messages * len(value), extra={"pipeline": pipeline}, error=error
    )


def redis_read(client: Any, key: str, *, chunk: int = 10_000) -> Measurement:
    """Read stream `key` from the start with XRANGE, `chunk` entries per call."""
    count = nbytes = 0
    low: bytes | str = "-"
    xrange = client.xrange
    with stopwatch() as elapsed:
        while True:
            entries = xrange(key, min=low, max="+", count=chunk)
            if not entries:
                break
            for _id, fields in entries:
                nbytes += len(fields[b"v"])
            count += len(entries)
            if len(entries) < chunk:
                break
            low = b"(" + entries[-1][0]
    return Measurement(count, elapsed[0], nbytes, extra={"chunk": chunk})


def _redis(ctx: Context) -> RedisServer:
    return ctx.resource(REDIS, lambda ctx: redis_server(ctx.path("redis")))


def _redis_produce_case(size: int):
    def run(ctx: Context) -> Measurement:
        server = _redis(ctx)
        client = server.client()
        try:
            key = f"bench:{size}"
            client.delete(key)
            measured = redis_write(
                client,
                key,
                ctx.settings.messages_for(size),
                payload(size),
                pipeline=ctx.settings.redis_pipeline,
            )
            ctx.state[(REDIS, size)] = key
            measured.extra["redis_server"] = server.version
            return measured
        finally:
            client.close()

    return run


def _redis_consume_case(size: int):
    def run(ctx: Context) -> Measurement:
        server = _redis(ctx)
        client = server.client()
        try:
            key = ctx.state.get((REDIS, size))
            if key is None:  # the write case failed or did not run: fill the stream, untimed
                key = f"bench:{size}"
                client.delete(key)
                redis_write(
                    client,
                    key,
                    ctx.settings.messages_for(size),
                    payload(size),
                    pipeline=ctx.settings.redis_pipeline,
                )
            measured = redis_read(client, key, chunk=ctx.settings.redis_read_chunk)
            client.delete(key)  # free the server's memory for the next size
            ctx.state.pop((REDIS, size), None)
            return measured
        finally:
            client.close()

    return run


def redis_cases(ctx: Context) -> list[Case]:
    """Redis Streams: XADD pipelined, then XRANGE, per value size (skipped with a note)."""
    if not ctx.settings.redis:
        ctx.note("Redis peer disabled (--no-redis).")
        return []
    if redis_server_path() is None:
        ctx.note(
            "Redis peer skipped: redis-server is not on PATH (`make setup-test` installs "
            "it; Debian: apt-get install redis-server)."
        )
        return []
    try:
        import redis  # noqa: F401
    except ImportError:
        ctx.note(
            "Redis peer skipped: redis-py is not installed (pip install 'partitionlet[bench]')."
        )
        return []
    s = ctx.settings
    variant = f"XADD pipeline {s.redis_pipeline:,}, AOF everysec"
    cases = []
    for size in s.sizes:
        n = s.messages_for(size)
        cases.append(
            Case(
                REDIS,
                "produce",
                size,
                variant,
                PROCESS,
                n,
                _redis_produce_case(size),
                params={"pipeline": s.redis_pipeline, "appendfsync": "everysec"},
            )
        )
        cases.append(
            Case(
                REDIS,
                "consume",
                size,
                f"XRANGE count {s.redis_read_chunk:,}",
                "",
                n,
                _redis_consume_case(size),
                params={"chunk": s.redis_read_chunk},
            )
        )
    return cases
