"""A volume: one SQLite file (WAL mode) that stores the record batches of partitionlets.

Invariants:
- the `partitionlets` row of an active partitionlet holds `next_offset`, the log end offset
  of its partition; it is the only place that fact lives, and it changes only in the same
  transaction that appends the batch ending there, so no two writers (threads or processes)
  can hand out one offset twice;
- the batches of a partitionlet do not overlap and grow with `last_offset`;
- a sealed row (`state` 1) never takes another append; a deleted one (`state` 2) is kept as
  a tombstone so that a writer with stale metadata cannot bring it back.

Thread-safety: one `Volume` may be shared; each thread uses its own connection.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.clock import SYSTEM_CLOCK, Clock
from engine.errors import CorruptBatch, CorruptFile, DamagedPartition
from engine.storage import batch as batch_codec
from engine.storage import connection, wal_writeback
from engine.storage.connection import (
    BUSY_TIMEOUT_MS,
    ThreadConnections,
    integrity,
    read_transaction,
    reindex,
    translate,
    write_transaction,
)
from engine.storage.reader import StoredBatch

ACTIVE, SEALED, DELETED = 0, 1, 2
PAGE_SIZE = 16384
# `read` stops at the batch that reaches this many bytes (always one batch at least)
READ_AHEAD_BYTES = 1 << 20
# A volume connection's page cache, in KiB. Batches are read once, in order, and any other
# connection's commit empties a reader's cache (SQLite, WAL mode), so a big cache bought
# nothing but memory: 16 MB per thread and volume filled by a listener's first large reads
# (about 300 MB faulted in, a page served costing two; docs/BENCHMARKS.md, issue 28).
# Writes measured the same with 2 MB as with 16.
CACHE_KIB = 2048
# What a damaged batch's error names, given its topic id: (the cluster's name, the topic's
# full name or None). The cluster passes it; a volume opened without it names ids.
Names = Callable[[int], tuple[str, str | None]]
_MISMATCH = "its bytes do not match the CRC32C stored with them"

SCHEMA = """
CREATE TABLE IF NOT EXISTS volume_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS partitionlets (
    id          INTEGER PRIMARY KEY,   -- the catalog's partitionlet id
    stream_id   INTEGER NOT NULL,
    topic_id    INTEGER NOT NULL,
    partition   INTEGER NOT NULL,
    base_offset INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,      -- log end offset while active
    state       INTEGER NOT NULL DEFAULT 0,
    bytes       INTEGER NOT NULL DEFAULT 0,
    batches     INTEGER NOT NULL DEFAULT 0,
    messages    INTEGER NOT NULL DEFAULT 0,  -- stored now (compaction and TTL remove some)
    first_ts    INTEGER,
    max_ts      INTEGER,
    created_ms  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    id           INTEGER PRIMARY KEY,
    partitionlet INTEGER NOT NULL,
    base_offset  INTEGER NOT NULL,
    last_offset  INTEGER NOT NULL,
    count        INTEGER NOT NULL,
    first_ts     INTEGER NOT NULL,
    max_ts       INTEGER NOT NULL,
    ts_high      INTEGER NOT NULL,     -- running max of max_ts: a monotonic time index
    ts_type      INTEGER NOT NULL,     -- 0 create time, 1 log-append time
    append_ms    INTEGER NOT NULL,
    origin       TEXT NOT NULL,        -- uuid of the cluster where the messages were written
    bytes        INTEGER NOT NULL,
    payload      BLOB NOT NULL,
    producer_id    INTEGER,            -- an idempotent producer's batch (ADDED_COLUMNS)
    producer_epoch INTEGER,
    base_seq       INTEGER,
    crc            INTEGER             -- batch.checksum; NULL: written before checksums
);
CREATE UNIQUE INDEX IF NOT EXISTS batches_by_offset ON batches (partitionlet, last_offset);
CREATE INDEX IF NOT EXISTS batches_by_time ON batches (partitionlet, ts_high);
CREATE TABLE IF NOT EXISTS stream_usage (  -- so a stream's size needs no scan of its topics
    stream_id INTEGER PRIMARY KEY,
    messages  INTEGER NOT NULL,
    bytes     INTEGER NOT NULL
);
-- Heat (engine.ops.heat): messages and bytes written and read per partitionlet, in buckets
-- of HEAT_BUCKET_S seconds. Writes are counted in the append's own transaction; readers
-- count in memory and add theirs every few seconds.
CREATE TABLE IF NOT EXISTS heat (
    bucket       INTEGER NOT NULL,     -- unix time // HEAT_BUCKET_S
    partitionlet INTEGER NOT NULL,
    w_messages   INTEGER NOT NULL DEFAULT 0,
    w_bytes      INTEGER NOT NULL DEFAULT 0,
    r_messages   INTEGER NOT NULL DEFAULT 0,
    r_bytes      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, partitionlet)
) WITHOUT ROWID;
"""
# Columns added to SCHEMA's tables after volumes were written without them (table, column,
# declaration), and indexes on them; `Volume.ensure_schema` adds them to an older volume.
# An idempotent producer's batch carries Kafka's batch fields (NULL for other batches): the
# log itself is the producer state, so a resent batch is recognised by any process, after
# any crash (`_Sequences`).
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("batches", "producer_id", "INTEGER"),
    ("batches", "producer_epoch", "INTEGER"),
    ("batches", "base_seq", "INTEGER"),
    # The CRC32C of each batch (engine.storage.batch.checksum), verified by every read.
    # Batches written before it have none (NULL): they are read unchecked, as before.
    ("batches", "crc", "INTEGER"),
    ("markers", "origin", "TEXT"),
)
# The last batches of one producer in a partitionlet (the idempotence check); partial, so
# batches without a producer cost no index entry.
ADDED_INDEXES = """
CREATE INDEX IF NOT EXISTS batches_by_producer ON batches (partitionlet, producer_id)
    WHERE producer_id IS NOT NULL;
-- Transaction markers (Kafka's control records): each takes an offset of its partition, in
-- the append transaction that writes it, but holds no message, so every reader sees a gap
-- there; the wire listener answers them as control batches.
CREATE TABLE IF NOT EXISTS markers (
    partitionlet   INTEGER NOT NULL,
    offset         INTEGER NOT NULL,
    producer_id    INTEGER NOT NULL,
    producer_epoch INTEGER NOT NULL,
    is_commit      INTEGER NOT NULL,   -- 1 COMMIT, 0 ABORT
    append_ms      INTEGER NOT NULL,
    origin         TEXT,               -- a replicated marker's cluster (NULL: this one's)
    PRIMARY KEY (partitionlet, offset)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS markers_by_producer ON markers (partitionlet, producer_id, offset);
"""
# How many of a producer's last batches per partition a resend is compared with: Kafka's
# (a producer has at most five requests in flight).
PRODUCER_WINDOW = 5
HEAT_BUCKET_S = 10
# Heat older than this is deleted now and then by the writer (it only feeds recent views).
HEAT_KEEP_S = 86400


@dataclass
class BatchCheck:
    """What `Volume.verify_batches` found in one partitionlet: `batches` read, `unchecked`
    of them written before checksums (no CRC to compare), and a `CorruptBatch` for each
    damaged one, in offset order."""

    partitionlet: int
    batches: int = 0
    unchecked: int = 0
    problems: list[CorruptBatch] = field(default_factory=list)


@dataclass(frozen=True)
class PartitionletState:
    id: int
    base_offset: int
    next_offset: int
    state: int
    bytes: int
    batches: int
    messages: int
    first_ts: int | None
    max_ts: int | None
    created_ms: int


_STATE_COLUMNS = (
    "id, base_offset, next_offset, state, bytes, batches, messages, first_ts, max_ts, created_ms"
)


@dataclass(slots=True)
class BatchWrite:
    """One encoded batch for one partition, the one record of the write path: the producer
    makes it, `engine.storage.appender.Appender` says where it goes (`pl_id`,
    `pl_base_offset`), `Volume.append` fills in `offset` (its base offset) or `sealed_at`
    (the partitionlet was sealed: the offset its successor starts at), and the appender
    `error` when it could not be written."""

    stream_id: int
    topic_id: int
    partition: int
    payload: bytes
    count: int
    first_ts: int
    max_ts: int
    ts_type: int
    origin: str
    new_topic: bool = False  # created by this writer just now: no partitionlet yet
    offset: int | None = None
    error: BaseException | None = None
    pl_id: int = 0  # the active partitionlet it is sent to
    pl_base_offset: int = 0
    # the catalog's mark of the offset that partitionlet's appends reached (None: none)
    pl_reached: int | None = None
    sealed_at: int | None = None
    compression: str | None = None  # the topic's own codec; None: its stream's policy
    # an idempotent producer's batch: (producer id, epoch, base sequence)
    producer: tuple[int, int, int] | None = None
    duplicate: bool = False  # a resend of a batch stored before: `offset` is that one's
    # the producer's last batches in the partitionlet before this one, [(epoch, base
    # sequence, count, base offset)], when the volume asked (`needs_history`)
    history: list[tuple[int, int, int, int]] | None = None
    needs_history: bool = False
    # a transaction marker, not a batch: True COMMIT, False ABORT (`producer` names whose;
    # it takes one offset and stores no message)
    marker: bool | None = None
    # batch.payload_crc of `payload` as it is stored, computed before the write lock is
    # taken (None: the volume computes it)
    payload_crc: int | None = None

    @property
    def key(self) -> tuple[int, int]:
        return (self.topic_id, self.partition)


@dataclass(slots=True)
class _Partitionlet:
    """A partitionlet's row as one write transaction changes it (written back at its end)."""

    next_offset: int
    state: int
    bytes: int
    created_ms: int
    base_offset: int
    first_ts: int | None
    max_ts: int | None
    batches: int
    messages: int
    changed: bool = False
    # Set when the row does not exist yet: (stream_id, topic_id, partition) to insert it.
    new: tuple[int, int, int] | None = None

    def written(self) -> tuple[Any, ...]:
        """The columns an append changes, in the order of `_PARTITIONLET_WRITTEN`."""
        return (
            self.next_offset, self.state, self.bytes, self.first_ts, self.max_ts, self.batches,
            self.messages,
        )  # fmt: skip


_PARTITIONLET_WRITTEN = "next_offset, state, bytes, first_ts, max_ts, batches, messages"
_UPDATE_PARTITIONLET = (
    "UPDATE partitionlets SET "
    + ", ".join(f"{c.strip()} = ?" for c in _PARTITIONLET_WRITTEN.split(","))
    + " WHERE id = ?"
)


def should_roll(pl: _Partitionlet, now_ms: int, *, roll_bytes: int, roll_ms: int) -> bool:
    """Whether the active partitionlet `pl` takes no more batches (Kafka's `shouldRoll`,
    asked before each append; the batch then goes to the successor): it holds
    `roll_bytes`, or it took appends and is `roll_ms` old. After an append only the size
    is asked again (`is_full`): a partitionlet filled by a batch is sealed in the
    transaction of that batch, so its end offset is fixed in one place."""
    return is_full(pl, roll_bytes) or (
        pl.next_offset > pl.base_offset and now_ms - pl.created_ms >= roll_ms
    )


def is_full(pl: _Partitionlet, roll_bytes: int) -> bool:
    return pl.bytes >= roll_bytes


_INSERT_BATCHES = (
    "INSERT INTO batches (partitionlet, base_offset, last_offset, count, first_ts, max_ts, "
    "ts_high, ts_type, append_ms, origin, bytes, payload, producer_id, producer_epoch, "
    "base_seq, crc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_NO_PRODUCER = (None, None, None)
_MARKER_COLUMNS = "partitionlet, offset, producer_id, producer_epoch, is_commit, append_ms, origin"
_INSERT_MARKERS = f"INSERT INTO markers ({_MARKER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
_SELECT_PARTITIONLET = (
    "SELECT id, next_offset, state, bytes, created_ms, base_offset, first_ts, max_ts, batches, "
    "messages FROM partitionlets "
)


def _add_usage(conn: sqlite3.Connection, per_stream: dict[int, list[int]]) -> None:
    """Inside a write transaction: add (messages, bytes) to streams' usage."""
    conn.executemany(
        "INSERT INTO stream_usage (stream_id, messages, bytes) VALUES (?, ?, ?) "
        "ON CONFLICT (stream_id) DO UPDATE SET "
        "messages = messages + excluded.messages, bytes = bytes + excluded.bytes",
        [(sid, m, b) for sid, (m, b) in per_stream.items()],
    )


class _Appending:
    """The batches one write transaction appends (produced or replicated), and what they
    add to their partitionlets' rows, the heat and the streams' usage; `write` stores it
    all with one statement per kind, so appending to many partitions at once, as a
    producer creating topics does, stays cheap."""

    __slots__ = ("now", "rows", "heat", "usage")

    def __init__(self, now: int) -> None:
        self.now = now
        self.rows: list[tuple[Any, ...]] = []
        self.heat: dict[int, list[int]] = {}
        self.usage: dict[int, list[int]] = {}

    def add(
        self,
        pl_id: int,
        pl: _Partitionlet,
        stream_id: int,
        base_offset: int,
        last_offset: int,
        count: int,
        first_ts: int,
        max_ts: int,
        ts_type: int,
        origin: str,
        payload: bytes,
        producer: tuple[int, int, int] | None = None,
        crc: int | None = None,
        crc_of_payload: int | None = None,
    ) -> None:
        """One batch; `crc` is its `batch.checksum` when known (a replicated batch checked
        against it), else computed here (from `crc_of_payload`, its payload's part, when
        known)."""
        size = len(payload)
        if crc is None:
            crc = batch_codec.checksum(
                base_offset, last_offset, ts_type, first_ts, max_ts, payload, crc_of_payload
            )
        # ts_high, the running max of max_ts, is the time index of `first_batch_at_time`.
        ts_high = max_ts if pl.max_ts is None or max_ts > pl.max_ts else pl.max_ts
        self.rows.append(
            (
                pl_id,
                base_offset,
                last_offset,
                count,
                first_ts,
                max_ts,
                ts_high,
                ts_type,
                self.now,
                origin,
                size,
                payload,
                *(producer or _NO_PRODUCER),
                crc,
            )
        )
        pl.next_offset = last_offset + 1
        pl.bytes += size
        pl.first_ts = first_ts if pl.first_ts is None or first_ts < pl.first_ts else pl.first_ts
        pl.max_ts = ts_high
        pl.batches += 1
        pl.messages += count
        pl.changed = True
        heat = self.heat.get(pl_id)
        if heat is None:
            self.heat[pl_id] = [count, size]
        else:
            heat[0] += count
            heat[1] += size
        usage = self.usage.get(stream_id)
        if usage is None:
            self.usage[stream_id] = [count, size]
        else:
            usage[0] += count
            usage[1] += size

    def write(self, conn: sqlite3.Connection, partitionlets: dict[int, _Partitionlet]) -> None:
        """Inside the write transaction: new partitionlet rows, the batches, the changed
        rows, the write heat and the usage."""
        now = self.now
        # a new row is inserted as this transaction leaves it: one row write, not two
        conn.executemany(
            "INSERT INTO partitionlets (id, stream_id, topic_id, partition, base_offset, "
            f"{_PARTITIONLET_WRITTEN}, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (pl_id, *pl.new, pl.base_offset, *pl.written(), now)
                for pl_id, pl in partitionlets.items()
                if pl.new is not None
            ],
        )
        conn.executemany(_INSERT_BATCHES, self.rows)
        conn.executemany(
            _UPDATE_PARTITIONLET,
            [
                (*pl.written(), pl_id)
                for pl_id, pl in partitionlets.items()
                if pl.changed and pl.new is None
            ],
        )
        if not self.rows:
            return
        bucket = now // (HEAT_BUCKET_S * 1000)
        conn.executemany(
            "INSERT INTO heat (bucket, partitionlet, w_messages, w_bytes) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (bucket, partitionlet) DO UPDATE SET "
            "w_messages = w_messages + excluded.w_messages, "
            "w_bytes = w_bytes + excluded.w_bytes",
            [(bucket, pl_id, m, b) for pl_id, (m, b) in self.heat.items()],
        )
        if bucket % 360 == 0:  # about once an hour of appends: forget old heat
            conn.execute(
                "DELETE FROM heat WHERE bucket < ?", (bucket - HEAT_KEEP_S // HEAT_BUCKET_S,)
            )
        _add_usage(conn, self.usage)


@dataclass(frozen=True)
class BatchRewrite:
    """A compacted batch for `Volume.rewrite_batches`: its new payload (None deletes it)."""

    batch_id: int
    expect_count: int  # the batch's count when the rewrite was planned
    payload: bytes | None
    count: int
    first_ts: int
    max_ts: int
    tombstones: int = 0  # tombstones among the removed messages (for reports)


def _lost(reached: int) -> str:
    return f"where the catalog's mark says it reached offset {reached - 1}: the volume lost commits"


def _producer_batches(
    conn: sqlite3.Connection, pl_id: int, producer_id: int, origin: str
) -> list[tuple[int, int, int, int]]:
    """A producer's last PRODUCER_WINDOW batches in a partitionlet, oldest first: [(epoch,
    base sequence, count, base offset)]. Producer ids are a cluster's own: those of batches
    replicated from another cluster (another `origin`) are another producer's."""
    rows = conn.execute(
        "SELECT producer_epoch, base_seq, count, base_offset FROM batches "
        "WHERE partitionlet = ? AND producer_id = ? AND origin = ? ORDER BY id DESC LIMIT ?",
        (pl_id, producer_id, origin, PRODUCER_WINDOW),
    ).fetchall()
    return [(r[0], r[1], r[2], r[3]) for r in reversed(rows)]


class _Sequences:
    """Kafka's idempotence check inside one append transaction: each idempotent batch is
    compared with its producer's last batches in the partition (read from the stored batch
    rows, then those this transaction appended). A resend of one of them is not written
    again (its stored offset answers it); an older epoch is fenced; a sequence that does not
    follow the last one is refused. The state is the log, so it holds in every process and
    after any crash."""

    def __init__(self) -> None:
        # (partitionlet, producer id) -> [(epoch, base sequence, count, base offset)]
        self._recent: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}
        # (partitionlet, producer id) -> the epoch of its last marker there (-1: none)
        self._fence: dict[tuple[int, int], int] = {}

    def recent(
        self, conn: sqlite3.Connection, w: BatchWrite, pl: _Partitionlet
    ) -> list[tuple[int, int, int, int]] | None:
        """The producer's last batches, oldest first; None when this partitionlet holds none
        of them but its partition began before it (the caller looks in the one before)."""
        assert w.producer is not None
        key = (w.pl_id, w.producer[0])
        recent = self._recent.get(key)
        if recent is None:
            recent = _producer_batches(conn, w.pl_id, w.producer[0], w.origin)
            if not recent:
                if w.history is None and pl.base_offset > 0:
                    return None
                recent = list(w.history or ())
            self._recent[key] = recent
            # A marker of a newer epoch (a newer producer of the transactional id ended
            # this one's transaction) fences the older epoch here as well.
            row = conn.execute(
                "SELECT producer_epoch FROM markers WHERE partitionlet = ? AND producer_id = ? "
                "AND origin IS NULL ORDER BY offset DESC LIMIT 1",
                key,
            ).fetchone()
            self._fence[key] = row[0] if row is not None else -1
        return recent

    def admit(self, w: BatchWrite, recent: list[tuple[int, int, int, int]]) -> bool:
        """Whether `w` is to be appended; else it is marked a `duplicate` (with the stored
        offset) or given its `error`."""
        from engine.errors import InvalidProducerEpoch, OutOfOrderSequence

        assert w.producer is not None
        producer_id, epoch, base_seq = w.producer
        fence = self._fence.get((w.pl_id, producer_id), -1)
        if epoch < fence:
            w.error = InvalidProducerEpoch(
                f"producer {producer_id} epoch {epoch} was fenced: epoch {fence} ended its "
                "transaction in this partition"
            )
            return False
        if not recent:
            return True  # a new producer (or one whose batches are gone): any sequence
        last_epoch, last_base, last_count, _ = recent[-1]
        if epoch < last_epoch:
            w.error = InvalidProducerEpoch(
                f"producer {producer_id} epoch {epoch} is older than epoch {last_epoch}, "
                "which already wrote to this partition: a newer producer fenced it"
            )
            return False
        for seen_epoch, seen_base, seen_count, seen_offset in recent:
            if (seen_epoch, seen_base, seen_count) == (epoch, base_seq, w.count):
                w.offset, w.duplicate = seen_offset, True
                return False
        expected = (last_base + last_count) & 0x7FFFFFFF if epoch == last_epoch else 0
        if base_seq != expected:
            w.error = OutOfOrderSequence(
                f"producer {producer_id} sent sequence {base_seq} where {expected} was "
                "expected (a batch in between was lost)"
            )
            return False
        return True

    def appended(self, w: BatchWrite, offset: int) -> None:
        assert w.producer is not None
        recent = self._recent[(w.pl_id, w.producer[0])]
        recent.append((w.producer[1], w.producer[2], w.count, offset))
        del recent[:-PRODUCER_WINDOW]


def _small_cache(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")


def _checkpoint_pages(conn: sqlite3.Connection) -> tuple[int, int]:
    """A volume's two checkpoint budgets, in its pages: a commit that fsyncs (acks=all,
    transactions, markers) checkpoints in the writer past WAL_CHECKPOINT_BYTES of log, as
    every other write does (connection.connect); one that does not leaves the checkpoint to
    the writeback thread, and checkpoints itself only past WAL_AHEAD_BYTES."""
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    # read from the module at the call: bench.wal sets them to measure other policies
    return (
        max(16, connection.WAL_CHECKPOINT_BYTES // page),
        connection.WAL_AHEAD_BYTES // page,
    )


class Volume:
    """One volume file: the batches of the partitionlets placed on it, their states, and
    their heat. A partitionlet's next offset lives here and moves only in the transaction
    that appends to it, and a partitionlet is sealed in the transaction of its last
    append, so offsets are unique whichever process writes; times come from `clock`.
    Any thread may call it (each thread has its own connection), and any process."""

    def __init__(
        self,
        volume_id: int,
        path: Path,
        clock: Clock = SYSTEM_CLOCK,
        names: Names | None = None,
    ) -> None:
        self.id = volume_id
        self.path = path
        self._clock = clock
        self._names = names
        # 16 KiB pages: batches are blobs of up to a few MiB, and larger pages mean fewer
        # overflow pages to chain and checksum (measured: about a third less CPU per MB
        # written than with 4 KiB pages).
        self._conns = ThreadConnections(
            path, f"volume {volume_id}", setup=_small_cache, page_size=PAGE_SIZE
        )
        # Why this file cannot be used (set by Cluster.open: missing, a bad header,
        # unreadable); every statement on it then raises `CorruptFile` with it.
        self.damage: str | None = None
        self._checkpoint_pages: tuple[int, int] | None = None  # read at the first write

    @property
    def conn(self) -> sqlite3.Connection:
        if self.damage is not None:
            raise CorruptFile(self.damage)
        return self._conns.get()

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One read statement, its rows, and SQLite's errors as the engine's."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc

    @contextmanager
    def _writing(self, sync: bool) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE) on this thread's connection; with
        `sync`, that commit is fsynced (`synchronous=FULL`, acks=all), the others not."""
        conn = self.conn
        if self._checkpoint_pages is None:
            self._checkpoint_pages = _checkpoint_pages(conn)
        in_writer, ahead = self._checkpoint_pages
        if sync:
            conn.execute("PRAGMA synchronous=FULL")
        else:
            conn.execute(f"PRAGMA wal_autocheckpoint={ahead}")
        try:
            with write_transaction(conn, self.path, "volume"):
                yield conn
        finally:
            if sync:
                conn.execute("PRAGMA synchronous=NORMAL")
            else:
                conn.execute(f"PRAGMA wal_autocheckpoint={in_writer}")
        if not sync:  # written back and checkpointed by a thread of its own (wal_writeback)
            wal_writeback.WRITEBACK.after_commit(str(self.path), self._checkpoint_ahead)

    def _partitionlets(self, pl_ids: list[int]) -> dict[int, _Partitionlet]:
        """Inside a write transaction: the rows of these partitionlets that exist."""
        conn = self.conn
        found: dict[int, _Partitionlet] = {}
        for i in range(0, len(pl_ids), 500):
            chunk = pl_ids[i : i + 500]
            for row in conn.execute(
                _SELECT_PARTITIONLET + f"WHERE id IN ({','.join('?' * len(chunk))})", chunk
            ):
                found[row[0]] = _Partitionlet(*row[1:])
        return found

    def _checkpoint_ahead(self, quiet: bool) -> None:
        """In the writeback thread: copy what the log holds into the database file
        (PASSIVE: no lock waited for, no writer held up). Once writes have stopped (`quiet`),
        a log they left large is cut: SQLite starts it over only at the next write, which
        may not come for a long time. Never while they go on: cutting takes the write lock,
        and a writer then waits (the p99 of produce-to-consume at full rate went from 1.3-1.9
        to 4.2-4.4 ms, measured)."""
        conn = self.conn  # a volume found damaged meanwhile raises: left alone
        busy, pages, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if not quiet or busy or pages != done:
            return
        try:
            size = os.stat(f"{self.path}-wal").st_size
        except OSError:
            return
        if size > connection.JOURNAL_SIZE_LIMIT:  # read at the call, as the budgets
            # never waits: a writer or a reader of the log at work makes it return at once
            conn.execute("PRAGMA busy_timeout=0")
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    def close(self) -> None:
        wal_writeback.WRITEBACK.settle(str(self.path))
        self._conns.close()

    # --- checksums ------------------------------------------------------------------------

    def corrupt(
        self, pl_id: int, base_offset: Any, last_offset: Any, problem: str = _MISMATCH
    ) -> CorruptBatch:
        """The error of a damaged batch of `pl_id`, naming the cluster, this volume, the
        topic and partition (as far as they can be read) and the offsets."""
        cluster = topic = partition = None
        try:
            row = self.conn.execute(
                "SELECT topic_id, partition FROM partitionlets WHERE id = ?", (pl_id,)
            ).fetchone()
        except sqlite3.DatabaseError:
            row = None
        if row is not None:
            topic, partition = f"#{row[0]}", row[1]
            if self._names is not None:
                try:
                    cluster, name = self._names(row[0])
                except Exception:  # noqa: BLE001 - the error names what it can
                    name = None
                topic = name or topic
        return CorruptBatch(
            problem,
            cluster=cluster,
            volume=f"{self.id} ({self.path})",
            topic=topic,
            partition=partition,
            base_offset=base_offset,
            last_offset=last_offset,
            partitionlet=pl_id,
        )

    def _verified(self, pl_id: int, rows: list[tuple[Any, ...]]) -> list[StoredBatch]:
        """Read rows of (base_offset, last_offset, ts_type, first_ts, max_ts, payload, crc)
        as `StoredBatch`es, each checked against its crc (NULL: a batch written before
        checksums). The rows before the first damaged one are returned; a damaged first
        one raises `CorruptBatch`, so a reader gets everything up to the damage, then
        the error, and never a byte of a damaged batch."""
        intact = batch_codec.intact
        for i, row in enumerate(rows):
            if not intact(row[0], row[1], row[2], row[3], row[4], row[5], row[6]):
                if i:
                    rows = rows[:i]
                    break
                raise self.corrupt(pl_id, row[0], row[1])
        return [row[:6] for row in rows]

    def _check_copied(self, pl_id: int, rows: list[tuple[Any, ...]]) -> None:
        """Raise `CorruptBatch` for the first damaged row of `pl_id` among `rows`, full rows
        of the batches table in the column order of `_INSERT_BATCHES` (a move's copy)."""
        for r in rows:
            if not batch_codec.intact(r[1], r[2], r[7], r[4], r[5], r[11], r[15]):
                raise self.corrupt(pl_id, r[1], r[2])

    def verify_batches(self, pl_id: int, chunk: int = 256) -> BatchCheck:
        """Check every batch of partitionlet `pl_id` against its checksum (`plet check`):
        read in chunks of `chunk` batches, each in its own read transaction, so appends
        go on meanwhile. Returns what was checked and a `CorruptBatch` per damaged batch,
        in offset order; never raises for a damaged batch."""
        result = BatchCheck(pl_id)
        after = -1
        while True:
            rows = self._query(
                "SELECT base_offset, last_offset, ts_type, first_ts, max_ts, payload, crc "
                "FROM batches WHERE partitionlet = ? AND last_offset > ? "
                "ORDER BY last_offset LIMIT ?",
                (pl_id, after, chunk),
            )
            for row in rows:
                result.batches += 1
                if row[6] is None:
                    result.unchecked += 1
                elif not batch_codec.intact(*row):
                    result.problems.append(self.corrupt(pl_id, row[0], row[1]))
            if len(rows) < chunk:
                return result
            try:
                after = int(rows[-1][1])
            except (TypeError, ValueError):  # a damaged last offset: nothing after it is found
                return result

    def initialize(self, cluster_id: str) -> None:
        try:
            self.conn.executescript(SCHEMA)
            self.conn.executescript(ADDED_INDEXES)
            with write_transaction(self.conn, self.path, "volume"):
                self.conn.execute(
                    "INSERT OR IGNORE INTO volume_meta (key, value) VALUES ('cluster_id', ?)",
                    (cluster_id,),
                )
                self.conn.execute(
                    "INSERT OR IGNORE INTO volume_meta (key, value) VALUES ('volume_id', ?)",
                    (str(self.id),),
                )
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc

    def ensure_schema(self) -> None:
        """Add the columns and indexes a newer engine introduced (cheap when present). Runs
        under Cluster.open's lock file, so two processes never alter one table at once."""
        try:
            for table, column, decl in ADDED_COLUMNS:
                have = {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}
                if have and column not in have:  # a missing table is made whole below
                    self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
            self.conn.executescript(ADDED_INDEXES)
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc

    def producer_batches(
        self, pl_id: int, producer_id: int, origin: str
    ) -> list[tuple[int, int, int, int]]:
        """A producer's last batches in a partitionlet, oldest first: [(epoch, base sequence,
        count, base offset)] (the idempotence check's history, read from a sealed one)."""
        try:
            return _producer_batches(self.conn, pl_id, producer_id, origin)
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc

    def batch_producers(self, pl_id: int) -> list[tuple[int, int, int, int]]:
        """The batches of idempotent and transactional producers in a partitionlet, in
        offset order: [(base offset, producer id, epoch, base sequence)] (the archive keeps
        them, so that aborted transactions stay recognisable)."""
        return [
            (r[0], r[1], r[2], r[3])
            for r in self._query(
                "SELECT base_offset, producer_id, producer_epoch, base_seq FROM batches "
                "WHERE partitionlet = ? AND producer_id IS NOT NULL ORDER BY last_offset",
                (pl_id,),
            )
        ]

    def header_problem(self) -> str | None:
        """What is wrong with the file before SQLite reads it: None unless it is too short
        to hold an SQLite header (SQLite would take an empty file for a new database and
        make it again, handing its offsets out twice). A zeroed or overwritten header is
        SQLite's to find, at the open's first read (`ensure_schema`, `check`): read here
        through a descriptor of our own, its close would drop every POSIX lock this
        process holds on the file, those of its other connections too; read around
        SQLite's locks, a checkpoint half-way looks like a file cut short."""
        try:
            size = self.path.stat().st_size
        except OSError as exc:
            return f"volume {self.id} ({self.path}) cannot be read: {exc}"
        if size < 100:
            return (
                f"volume {self.id} ({self.path}) has no SQLite header (zeroed, cut or "
                f"overwritten: {size} bytes)"
            )
        return None

    def check(self, cluster_id: str) -> None:
        """Fail clearly if this file is another cluster's volume; note in `damage` why it
        cannot be read, if it cannot."""
        try:
            meta = dict(self.conn.execute("SELECT key, value FROM volume_meta").fetchall())
        except sqlite3.DatabaseError as exc:
            self.damage = str(translate(exc, self.path, "volume"))
            return
        if meta.get("cluster_id") != cluster_id:
            raise CorruptFile(
                f"volume {self.path} belongs to cluster {meta.get('cluster_id')!r}, not "
                f"{cluster_id!r}: a file was swapped or copied from another cluster"
            )

    # --- writing --------------------------------------------------------------------------

    def append(
        self, writes: list[BatchWrite], *, sync: bool, roll_bytes: int, roll_ms: int
    ) -> None:
        """Append batches in one transaction, each to its `pl_id`; fills each
        `BatchWrite.offset`, or `sealed_at` when its partitionlet is sealed.

        `sync=True` makes this commit durable against a machine crash (fsync of the WAL).
        A partitionlet that `should_roll` is sealed here, in the same transaction as its
        last append, so its end offset is fixed in one place.
        """
        now = self._clock.now_ms()
        with self._writing(sync) as conn:
            ids = sorted({w.pl_id for w in writes})
            pls = self._partitionlets(ids)
            ends = self._stored_ends(ids)
            refused: dict[int, DamagedPartition | None] = {}
            appending = _Appending(now)
            sequences = _Sequences()
            markers: list[tuple[int, int, int, int, int, int, str | None]] = []
            for w in writes:
                w.offset = w.sealed_at = None
                w.needs_history = w.duplicate = False
                if w.pl_id not in refused:
                    refused[w.pl_id] = self._disagreement(
                        w.pl_id, w.topic_id, w.partition, w.pl_base_offset,
                        pls.get(w.pl_id), ends[w.pl_id], w.pl_reached,
                    )  # fmt: skip
                if refused[w.pl_id] is not None:
                    w.error = refused[w.pl_id]
                    continue
                pl = pls.get(w.pl_id)
                if pl is None:  # its first append: the row is made at the end
                    base = w.pl_base_offset
                    pl = pls[w.pl_id] = _Partitionlet(
                        base, ACTIVE, 0, now, base, None, None, 0, 0, True,
                        (w.stream_id, w.topic_id, w.partition),
                    )  # fmt: skip
                if pl.state != ACTIVE:
                    w.sealed_at = pl.next_offset
                    continue
                if should_roll(pl, now, roll_bytes=roll_bytes, roll_ms=roll_ms):
                    # Full or too old to take more: sealed before this batch, which goes to
                    # the successor.
                    pl.state = SEALED
                    pl.changed = True
                    w.sealed_at = pl.next_offset
                    continue
                if w.marker is not None:
                    assert w.producer is not None
                    w.offset = pl.next_offset
                    pl.next_offset += 1
                    pl.changed = True
                    markers.append(
                        (w.pl_id, w.offset, w.producer[0], w.producer[1], int(w.marker), now, None)
                    )
                    continue
                if w.producer is not None:
                    recent = sequences.recent(conn, w, pl)
                    if recent is None:  # the appender looks in the partitionlet before
                        w.needs_history = True
                        continue
                    if not sequences.admit(w, recent):
                        continue  # a resend (`duplicate`) or refused (`error`)
                w.offset = offset = pl.next_offset
                appending.add(
                    w.pl_id, pl, w.stream_id, offset, offset + w.count - 1, w.count,
                    w.first_ts, w.max_ts, w.ts_type, w.origin, w.payload, w.producer,
                    crc_of_payload=w.payload_crc,
                )  # fmt: skip
                if w.producer is not None:
                    sequences.appended(w, offset)
                if is_full(pl, roll_bytes):
                    pl.state = SEALED
                    w.sealed_at = pl.next_offset
            appending.write(conn, pls)
            if markers:
                conn.executemany(_INSERT_MARKERS, markers)

    def _stored_ends(self, pl_ids: list[int]) -> dict[int, int | None]:
        """Inside a transaction: the last offset each partitionlet's batches and
        markers hold (None: none), one index lookup each, whatever its row says."""
        ends: dict[int, int | None] = {}
        for i in range(0, len(pl_ids), 500):
            chunk = pl_ids[i : i + 500]
            for pl_id, last, marker in self.conn.execute(
                "SELECT p.value, (SELECT max(last_offset) FROM batches WHERE partitionlet "
                "= p.value), (SELECT max(offset) FROM markers WHERE partitionlet = p.value) "
                "FROM json_each(?) p",
                (json.dumps(chunk),),
            ):
                ends[pl_id] = (
                    last if marker is None or (last is not None and last > marker) else marker
                )
        return ends

    def _disagreement(
        self,
        pl_id: int,
        topic_id: int,
        partition: int,
        base_offset: int,
        pl: _Partitionlet | None,
        end: int | None,
        reached: int | None = None,
    ) -> DamagedPartition | None:
        """Why partitionlet `pl_id` (row `pl`, holding offsets up to `end`) must take no
        append (an offset would be handed out twice, or past a hole), or None: its row must
        exist whenever it holds batches, start where the catalog's chain says
        (`base_offset`), point past the last offset stored, and be past the catalog's mark
        of the offset its appends `reached` (less: this file lost commits, whose offsets
        may have been read already)."""
        if pl is None:
            if end is None:
                if reached is None or reached <= base_offset:
                    return None  # its first append
                problem = f"its row and batches are missing, {_lost(reached)}"
            else:
                problem = f"holds offsets up to {end} but its row is missing"
        elif pl.state == DELETED:
            return None  # a tombstone: the append finds it closed, as a sealed one
        elif None in (pl.next_offset, pl.state, pl.base_offset, pl.bytes, pl.created_ms):
            problem = "its row is damaged (empty fields)"
        elif pl.base_offset != base_offset:
            problem = (
                f"its row starts at offset {pl.base_offset}, the catalog's chain at {base_offset}"
            )
        elif pl.next_offset < pl.base_offset or (end is not None and pl.next_offset <= end):
            problem = f"its row's next offset is {pl.next_offset} but it holds offsets up to {end}"
        elif reached is not None and pl.next_offset < reached:
            problem = f"it holds offsets {pl.base_offset}..{pl.next_offset - 1}, {_lost(reached)}"
        else:
            return None
        where = (
            f"partition {partition} of topic #{topic_id} (partitionlet {pl_id}, "
            f"volume {self.id}, {self.path})"
        )
        return DamagedPartition(
            f"{where}: {problem}; writes to this partition are refused so that no offset is "
            "handed out twice; run `plet check` for the repair"
        )

    def create_partitionlet(
        self, pl_id: int, stream_id: int, topic_id: int, partition: int, base_offset: int
    ) -> None:
        with write_transaction(self.conn, self.path, "volume"):
            self.conn.execute(
                "INSERT OR IGNORE INTO partitionlets (id, stream_id, topic_id, partition, "
                "base_offset, next_offset, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    pl_id,
                    stream_id,
                    topic_id,
                    partition,
                    base_offset,
                    base_offset,
                    self._clock.now_ms(),
                ),
            )

    def purge(self, pl_ids: list[int]) -> None:
        """Delete the batches of these partitionlets; keep tombstones so nobody revives them."""
        self.drop(pl_ids)

    def _purge_one(self, pl_id: int, now: int) -> tuple[int, int]:
        """Inside a write transaction: delete a partitionlet's batches, take them off its
        stream's usage, leave a DELETED tombstone row; returns the (messages, bytes) freed."""
        conn = self.conn
        row = conn.execute(
            "SELECT stream_id, coalesce(sum(b.count), 0), coalesce(sum(b.bytes), 0) "
            "FROM partitionlets p LEFT JOIN batches b ON b.partitionlet = p.id "
            "WHERE p.id = ? GROUP BY p.id",
            (pl_id,),
        ).fetchone()
        if row is not None:
            conn.execute(
                "UPDATE stream_usage SET messages = messages - ?, bytes = bytes - ? "
                "WHERE stream_id = ?",
                (row[1], row[2], row[0]),
            )
        conn.execute("DELETE FROM batches WHERE partitionlet = ?", (pl_id,))
        conn.execute("DELETE FROM markers WHERE partitionlet = ?", (pl_id,))
        conn.execute(
            "INSERT INTO partitionlets (id, stream_id, topic_id, partition, base_offset, "
            "next_offset, state, created_ms) VALUES (?, -1, -1, -1, 0, 0, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET state = excluded.state, bytes = 0, "
            "batches = 0, messages = 0",
            (pl_id, DELETED, now),
        )
        return (row[1], row[2]) if row is not None else (0, 0)

    # --- maintenance (engine.ops.retention) ---------------------------------------------------

    def seal_expired(self, pl_id: int, cutoff_ms: int) -> PartitionletState | None:
        """Seal the active partitionlet `pl_id` if it took appends and every message it
        stores is older than `cutoff_ms` (or compaction left none).

        Check and seal happen in one write transaction, so no append slips in between: an
        append that comes later finds the partitionlet sealed and goes to its successor.
        Returns the state afterwards (None if the volume has no row for it): SEALED when
        this call or an earlier roll sealed it, else ACTIVE (or DELETED).
        """
        conn = self.conn
        with write_transaction(conn, self.path, "volume"):
            row = conn.execute(
                f"SELECT {_STATE_COLUMNS} FROM partitionlets WHERE id = ?", (pl_id,)
            ).fetchone()
            if row is None:
                return None
            st = PartitionletState(*row)
            if (
                st.state == ACTIVE
                and st.next_offset > st.base_offset
                and (st.max_ts is None or st.max_ts < cutoff_ms)
            ):
                conn.execute("UPDATE partitionlets SET state = ? WHERE id = ?", (SEALED, pl_id))
                st = replace(st, state=SEALED)
        return st

    def seal_as_it_is(
        self, pl_id: int, stream_id: int, topic_id: int, partition: int, base_offset: int
    ) -> int | None:
        """Seal `pl_id` where its batches end here (its row's next offset, or past its last
        batch when the row says less), making an empty sealed row at `base_offset` when
        its row is gone (what a volume that lost commits holds, given up by `plet check
        --repair --accept-loss`). Its next offset afterwards, or None for a tombstone."""
        conn = self.conn
        with write_transaction(conn, self.path, "volume"):
            row = conn.execute(
                "SELECT state, next_offset FROM partitionlets WHERE id = ?", (pl_id,)
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO partitionlets (id, stream_id, topic_id, partition, base_offset, "
                    "next_offset, created_ms, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (pl_id, stream_id, topic_id, partition, base_offset, base_offset,
                     self._clock.now_ms(), SEALED),
                )  # fmt: skip
                return base_offset
            state, next_offset = row
            if state == DELETED:
                return None
            last = self._stored_ends([pl_id])[pl_id]
            if last is not None and last >= next_offset:  # a damaged row: what it holds
                next_offset = last + 1
            conn.execute(
                "UPDATE partitionlets SET state = ?, next_offset = ? WHERE id = ?",
                (SEALED, next_offset, pl_id),
            )
            return int(next_offset)

    def drop(self, pl_ids: list[int]) -> dict[int, tuple[int, int]]:
        """Purge these partitionlets in one transaction, returning the (messages, bytes)
        each one freed (0, 0 for one purged already)."""
        if not pl_ids:
            return {}
        now = self._clock.now_ms()
        with write_transaction(self.conn, self.path, "volume"):
            return {pl_id: self._purge_one(pl_id, now) for pl_id in pl_ids}

    def batch_rows(self, pl_id: int, after_offset: int, limit: int) -> list[tuple[Any, ...]]:
        """Batches whose last offset is > `after_offset`, in offset order, as tuples of
        (batch id, base_offset, last_offset, count, payload, producer id or None), each
        checked against its checksum as `read` does (compaction never rewrites a damaged
        batch into one with a good checksum)."""
        rows = self._query(
            "SELECT base_offset, last_offset, ts_type, first_ts, max_ts, payload, crc, id, "
            "count, producer_id FROM batches "
            "WHERE partitionlet = ? AND last_offset > ? ORDER BY last_offset LIMIT ?",
            (pl_id, after_offset, limit),
        )
        good = len(self._verified(pl_id, rows))
        return [(r[7], r[0], r[1], r[8], r[5], r[9]) for r in rows[:good]]

    def rewrite_batches(
        self, pl_id: int, rewrites: list[BatchRewrite]
    ) -> tuple[list[BatchRewrite], int]:
        """Replace or delete batches of one partitionlet in one write transaction
        (compaction); returns the rewrites applied and the bytes they freed.

        A rewrite applies only if its batch still holds `expect_count` messages (batches
        only ever shrink, so an equal count means nobody rewrote it since it was planned);
        the others are skipped, as is everything of a dropped partitionlet. Rows keep their
        base and last offsets, so readers still find every offset. The partitionlet's
        counters, the stream's usage and the batches' running time index (`ts_high`) are
        brought up to date in the same transaction; appends that came after the plan are
        untouched.
        """
        conn = self.conn
        applied: list[BatchRewrite] = []
        freed_bytes = removed = deleted = 0
        # A rewrite keeps the codec of the batch it replaces (a change of the compression
        # policy affects new batches only); compressed here, before the write
        # transaction, so appends do not wait for it.
        codecs: dict[int, str] = {}
        for rw in rewrites:
            if rw.payload is not None:
                got = self._query(
                    "SELECT substr(payload, 1, 2) FROM batches WHERE id = ?", (rw.batch_id,)
                )
                if got:
                    codecs[rw.batch_id] = batch_codec.codec_of(got[0][0])
        packed = {
            rw.batch_id: batch_codec.compress(rw.payload, codecs[rw.batch_id])
            for rw in rewrites
            if rw.payload is not None and rw.batch_id in codecs
        }
        with write_transaction(conn, self.path, "volume"):
            row = conn.execute(
                "SELECT stream_id, state FROM partitionlets WHERE id = ?", (pl_id,)
            ).fetchone()
            if row is None or row[1] == DELETED:
                return applied, 0
            stream_id = row[0]
            for rw in rewrites:
                cur = conn.execute(
                    "SELECT count, bytes, substr(payload, 1, 2), base_offset, last_offset, "
                    "ts_type FROM batches WHERE id = ? AND partitionlet = ?",
                    (rw.batch_id, pl_id),
                ).fetchone()
                if cur is None or cur[0] != rw.expect_count:
                    continue
                payload = packed.get(rw.batch_id, rw.payload)
                if payload is not None and batch_codec.codec_of(cur[2]) != codecs.get(
                    rw.batch_id, "none"
                ):
                    # rewritten since the codecs were read (its count would have changed)
                    assert rw.payload is not None  # payload is rw.payload or its packed form
                    payload = batch_codec.compress(rw.payload, batch_codec.codec_of(cur[2]))
                if payload is None:
                    conn.execute("DELETE FROM batches WHERE id = ?", (rw.batch_id,))
                    deleted += 1
                    freed_bytes += cur[1]
                    removed += cur[0]
                else:
                    crc = batch_codec.checksum(
                        cur[3], cur[4], cur[5], rw.first_ts, rw.max_ts, payload
                    )
                    conn.execute(
                        "UPDATE batches SET payload = ?, count = ?, first_ts = ?, max_ts = ?, "
                        "bytes = ?, crc = ? WHERE id = ?",
                        (
                            payload,
                            rw.count,
                            rw.first_ts,
                            rw.max_ts,
                            len(payload),
                            crc,
                            rw.batch_id,
                        ),
                    )
                    freed_bytes += cur[1] - len(payload)
                    removed += cur[0] - rw.count
                applied.append(rw)
            if not applied:
                return applied, 0
            # ts_high is the running max of max_ts in offset order (the time index of
            # `first_batch_at_time`); recompute it over what is left, and the partitionlet's
            # first and max timestamps with it.
            running = first = None
            fixes = []
            for batch_id, first_ts, max_ts, ts_high in conn.execute(
                "SELECT id, first_ts, max_ts, ts_high FROM batches WHERE partitionlet = ? "
                "ORDER BY last_offset",
                (pl_id,),
            ):
                running = max_ts if running is None or max_ts > running else running
                first = first_ts if first is None or first_ts < first else first
                if ts_high != running:
                    fixes.append((running, batch_id))
            conn.executemany("UPDATE batches SET ts_high = ? WHERE id = ?", fixes)
            conn.execute(
                "UPDATE partitionlets SET bytes = bytes - ?, messages = messages - ?, "
                "batches = batches - ?, first_ts = ?, max_ts = ? WHERE id = ?",
                (freed_bytes, removed, deleted, first, running, pl_id),
            )
            conn.execute(
                "UPDATE stream_usage SET messages = messages - ?, bytes = bytes - ? "
                "WHERE stream_id = ?",
                (removed, freed_bytes, stream_id),
            )
        return applied, freed_bytes

    # --- reading --------------------------------------------------------------------------

    def state(self, pl_id: int) -> PartitionletState | None:
        rows = self._query(f"SELECT {_STATE_COLUMNS} FROM partitionlets WHERE id = ?", (pl_id,))
        return PartitionletState(*rows[0]) if rows else None

    def states(self, pl_ids: list[int]) -> dict[int, PartitionletState]:
        result = {}
        conn = self.conn
        try:
            with read_transaction(conn):
                for pl_id in pl_ids:
                    row = conn.execute(
                        f"SELECT {_STATE_COLUMNS} FROM partitionlets WHERE id = ?", (pl_id,)
                    ).fetchone()
                    if row:
                        result[pl_id] = PartitionletState(*row)
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc
        return result

    def read(
        self,
        pl_id: int,
        from_offset: int,
        max_batches: int,
        skip: Sequence[tuple[int, int, int]] = (),
    ) -> list[StoredBatch]:
        """Batches holding offsets >= `from_offset`, in offset order, as tuples of
        (base_offset, last_offset, ts_type, first_ts, max_ts, payload). `skip` leaves out
        the batches of aborted transactions: (producer id, first offset, marker offset)."""
        sql = (
            "SELECT base_offset, last_offset, ts_type, first_ts, max_ts, payload, crc "
            "FROM batches WHERE partitionlet = ? AND last_offset >= ?"
        )
        args: list[Any] = [pl_id, from_offset]
        for producer_id, first, marker in skip:
            sql += " AND NOT (producer_id IS ? AND base_offset BETWEEN ? AND ?)"
            args += [producer_id, first, marker]
        rows: list[tuple[Any, ...]] = []
        size = 0
        try:
            cursor = self.conn.execute(sql + " ORDER BY last_offset LIMIT ?", (*args, max_batches))
            # what a reader holds ahead of its position is bounded in bytes too: a partition
            # of megabyte batches read 16 ahead held 16 MiB each, never freed until served
            for row in cursor:
                rows.append(row)
                size += len(row[5])
                if size >= READ_AHEAD_BYTES:
                    break
            cursor.close()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc
        return self._verified(pl_id, rows)

    def gap_end(
        self, pl_id: int, position: int, skip: Sequence[tuple[int, int, int]] = ()
    ) -> int | None:
        """The next offset of a partitionlet that holds no batch (but those of the aborted
        transactions in `skip`) at or after `position`: what lies between is a gap
        (transaction markers, compacted or aborted batches). Read in one statement, so a
        batch appended meanwhile is never jumped over; None when a batch holds `position`
        or later, or there is no gap."""
        sql = (
            "SELECT next_offset FROM partitionlets WHERE id = ? AND next_offset > ? "
            "AND NOT EXISTS (SELECT 1 FROM batches WHERE partitionlet = ? AND last_offset >= ?"
        )
        args: list[Any] = [pl_id, position, pl_id, position]
        for producer_id, first, marker in skip:
            sql += " AND NOT (producer_id IS ? AND base_offset BETWEEN ? AND ?)"
            args += [producer_id, first, marker]
        rows = self._query(sql + ")", tuple(args))
        return rows[0][0] if rows else None

    def markers(
        self, pl_id: int, from_offset: int, to_offset: int
    ) -> list[tuple[int, int, int, bool]]:
        """The transaction markers at offsets from_offset..to_offset: (offset, producer id,
        epoch, True for COMMIT)."""
        return [
            (r[0], r[1], r[2], bool(r[3]))
            for r in self._query(
                "SELECT offset, producer_id, producer_epoch, is_commit FROM markers "
                "WHERE partitionlet = ? AND offset BETWEEN ? AND ? ORDER BY offset",
                (pl_id, from_offset, to_offset),
            )
        ]

    def producers(self, pl_id: int) -> list[tuple[int, int, int, int]]:
        """The idempotent producers of this cluster that wrote to a partitionlet, each from
        its last batch there: (producer id, epoch, last sequence, last timestamp). Batches
        replicated from another cluster carry that cluster's ids, another producer's."""
        # SQLite takes the bare columns from the row that has max(id): the last batch.
        return [
            (r[0], r[2], r[3], r[4])
            for r in self._query(
                "SELECT producer_id, max(id), producer_epoch, base_seq + count - 1, max_ts "
                "FROM batches WHERE partitionlet = ? AND producer_id IS NOT NULL AND origin = "
                "(SELECT value FROM volume_meta WHERE key = 'cluster_id') GROUP BY producer_id",
                (pl_id,),
            )
        ]

    def aborted_offsets(
        self, pl_id: int, skip: Sequence[tuple[int, int, int]]
    ) -> list[tuple[int, int]]:
        """(base offset, last offset) of the stored batches of the aborted transactions of
        `skip` (producer id, first offset, marker offset), in offset order: what `read`
        leaves out with that `skip`."""
        if not skip:
            return []
        sql = " OR ".join(["(producer_id = ? AND base_offset BETWEEN ? AND ?)"] * len(skip))
        args = [pl_id, *(x for s in skip for x in s)]
        return [
            (r[0], r[1])
            for r in self._query(
                "SELECT base_offset, last_offset FROM batches WHERE partitionlet = ? AND "
                f"({sql}) ORDER BY last_offset",
                tuple(args),
            )
        ]

    def first_batch_at_time(self, pl_id: int, timestamp_ms: int) -> StoredBatch | None:
        """The first batch whose running max timestamp reaches `timestamp_ms`, in the form
        of `read`."""
        rows = self._query(
            "SELECT base_offset, last_offset, ts_type, first_ts, max_ts, payload, crc "
            "FROM batches WHERE partitionlet = ? AND ts_high >= ? "
            "ORDER BY ts_high, last_offset LIMIT 1",
            (pl_id, timestamp_ms),
        )
        return self._verified(pl_id, rows)[0] if rows else None

    def recent_bytes(self, window_s: int = 300) -> tuple[int, int]:
        """(bytes written, bytes read) here in the last `window_s` seconds."""
        since = (self._clock.now_ms() - window_s * 1000) // (HEAT_BUCKET_S * 1000)
        ((written, read),) = self._query(
            "SELECT coalesce(sum(w_bytes), 0), coalesce(sum(r_bytes), 0) FROM heat "
            "WHERE bucket >= ?",
            (since,),
        )
        return written, read

    def recent_write_bytes(self, window_s: int = 300) -> int:
        return self.recent_bytes(window_s)[0]

    def add_read_heat(self, rows: list[tuple[int, int, int, int]]) -> None:
        """Add readers' counts: (bucket, partitionlet, messages, bytes)."""
        with write_transaction(self.conn, self.path, "volume"):
            self.conn.executemany(
                "INSERT INTO heat (bucket, partitionlet, r_messages, r_bytes) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (bucket, partitionlet) DO UPDATE SET "
                "r_messages = r_messages + excluded.r_messages, "
                "r_bytes = r_bytes + excluded.r_bytes",
                rows,
            )

    def add_heat(self, rows: list[tuple[int, int, int, int, int, int]]) -> None:
        """Add counts to past or present buckets: (bucket, partitionlet, w_messages, w_bytes,
        r_messages, r_bytes). For benchmarks and imports; appends count their own."""
        with write_transaction(self.conn, self.path, "volume"):
            self.conn.executemany(
                "INSERT INTO heat (bucket, partitionlet, w_messages, w_bytes, r_messages, "
                "r_bytes) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (bucket, partitionlet) DO "
                "UPDATE SET w_messages = w_messages + excluded.w_messages, "
                "w_bytes = w_bytes + excluded.w_bytes, "
                "r_messages = r_messages + excluded.r_messages, "
                "r_bytes = r_bytes + excluded.r_bytes",
                rows,
            )

    # Heat is summed by SQLite (GROUP BY), so a window in which 100,000 partitions were
    # written costs one pass in C, not 100,000 Python additions.
    _HEAT_SUMS = "sum(h.w_messages), sum(h.w_bytes), sum(h.r_messages), sum(h.r_bytes)"

    def heat_by_bucket(self, first: int, last: int) -> list[tuple[int, int, int, int, int]]:
        """(bucket, w_messages, w_bytes, r_messages, r_bytes) per bucket in first..last."""
        return self._query(
            f"SELECT h.bucket, {self._HEAT_SUMS} FROM heat h "
            "WHERE h.bucket BETWEEN ? AND ? GROUP BY h.bucket",
            (first, last),
        )

    def heat_by_partitionlet(self, first: int, last: int) -> list[tuple[int, int, int, int, int]]:
        """(partitionlet, w_messages, w_bytes, r_messages, r_bytes) in buckets first..last."""
        return self._query(
            f"SELECT h.partitionlet, {self._HEAT_SUMS} FROM heat h "
            "WHERE h.bucket BETWEEN ? AND ? GROUP BY h.partitionlet",
            (first, last),
        )

    def heat_by_partition(self, first: int, last: int) -> list[tuple[int, ...]]:
        """(topic_id, partition, w_messages, w_bytes, r_messages, r_bytes) of the
        partitionlets still here, in buckets first..last."""
        return self._query(
            f"SELECT p.topic_id, p.partition, {self._HEAT_SUMS} "
            "FROM heat h JOIN partitionlets p ON p.id = h.partitionlet "
            "WHERE h.bucket BETWEEN ? AND ? GROUP BY p.topic_id, p.partition",
            (first, last),
        )

    def heat_cells(
        self, first: int, last: int, topic_ids: list[int] | None = None
    ) -> list[tuple[int, ...]]:
        """(bucket, topic_id, partition, w_messages, w_bytes, r_messages, r_bytes) per
        bucket, for the partitions of these topics (None: of every topic)."""
        select = (
            f"SELECT h.bucket, p.topic_id, p.partition, {self._HEAT_SUMS} "
            "FROM heat h JOIN partitionlets p ON p.id = h.partitionlet "
            "WHERE h.bucket BETWEEN ? AND ? "
        )
        group = "GROUP BY h.bucket, p.topic_id, p.partition"
        if topic_ids is None:
            return self._query(select + group, (first, last))
        rows: list[tuple[int, ...]] = []
        for i in range(0, len(topic_ids), 500):
            chunk = topic_ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows += self._query(
                select + f"AND p.topic_id IN ({marks}) " + group, (first, last, *chunk)
            )
        return rows

    def heat_by_column(self, first: int, last: int, per: int) -> list[tuple[int, ...]]:
        """(column, partitionlet, w_messages, w_bytes, r_messages, r_bytes) in buckets
        first..last, summed over columns of `per` buckets (column = bucket // per): what
        the heat maps draw, without one row per bucket."""
        return self._query(
            f"SELECT h.bucket / ?, h.partitionlet, {self._HEAT_SUMS} FROM heat h "
            "WHERE h.bucket BETWEEN ? AND ? GROUP BY 1, 2",
            (per, first, last),
        )

    def heat_partitionlets(self) -> list[tuple[int, int, int]]:
        """(partitionlet, topic_id, partition) of every partitionlet here: whose heat counts."""
        return self._query("SELECT id, topic_id, partition FROM partitionlets")

    def heat_by_topic_span(self, first: int, last: int, span: int) -> list[tuple[int, ...]]:
        """(span index, topic_id, w_messages, w_bytes, r_messages, r_bytes) in buckets
        first..last, summed over spans of `span` buckets (bucket // span): the metrics
        history's minutes (engine.ops.metrics)."""
        return self._query(
            f"SELECT h.bucket / ?, p.topic_id, {self._HEAT_SUMS} "
            "FROM heat h JOIN partitionlets p ON p.id = h.partitionlet "
            "WHERE h.bucket BETWEEN ? AND ? GROUP BY 1, 2",
            (span, first, last),
        )

    def sizes(self) -> tuple[int, int, int]:
        """(data bytes, partitionlets, active partitionlets) stored here."""
        row = self.conn.execute(
            "SELECT coalesce(sum(bytes), 0), count(*), coalesce(sum(state = 0), 0) "
            "FROM partitionlets WHERE state != 2"
        ).fetchone()
        return row[0], row[1], row[2]

    def usage_totals(self) -> tuple[int, int]:
        """(messages, bytes) of every stream stored here."""
        row = self.conn.execute(
            "SELECT coalesce(sum(messages), 0), coalesce(sum(bytes), 0) FROM stream_usage"
        ).fetchone()
        return row[0], row[1]

    def stream_usage(self, stream_id: int) -> tuple[int, int]:
        row = self.conn.execute(
            "SELECT messages, bytes FROM stream_usage WHERE stream_id = ?", (stream_id,)
        ).fetchone()
        return (row[0], row[1]) if row else (0, 0)

    def file_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    # --- checking (engine.ops.check) -------------------------------------------------------

    def integrity(self, quick: bool) -> list[str]:
        """What SQLite's integrity_check (quick_check) finds wrong here; [] when sound."""
        return integrity(self.conn, self.path, "volume", quick)

    def reindex(self) -> None:
        """Rebuild this file's indexes from its tables."""
        reindex(self.path, "volume")

    def rows(self) -> list[PartitionletState]:
        """Every partitionlet row here, tombstones too, by id."""
        return [
            PartitionletState(*r)
            for r in self._query(f"SELECT {_STATE_COLUMNS} FROM partitionlets ORDER BY id")
        ]

    def stored(self) -> dict[int, tuple[int, int, int, int]]:
        """{partitionlet id: (batches, messages, bytes, last offset)} counted from the
        batches themselves, read from the table, not through an index that may be damaged;
        the last offset also counts transaction markers."""
        found = {
            pl_id: (n, m, b, last)
            for pl_id, n, m, b, last in self._query(
                "SELECT partitionlet, count(*), sum(count), sum(bytes), max(last_offset) "
                "FROM batches NOT INDEXED GROUP BY partitionlet"
            )
        }
        for pl_id, last in self._query(
            "SELECT partitionlet, max(offset) FROM markers GROUP BY partitionlet"
        ):
            n, m, b, end = found.get(pl_id, (0, 0, 0, -1))
            found[pl_id] = (n, m, b, max(end, last))
        return found

    def partitionlets_of_batches(self, batch_ids: list[int]) -> set[int]:
        """The partitionlets these batches (by row id, as integrity_check names them) are of."""
        found: set[int] = set()
        for i in range(0, len(batch_ids), 500):
            chunk = batch_ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            found.update(
                r[0]
                for r in self._query(
                    f"SELECT DISTINCT partitionlet FROM batches WHERE id IN ({marks})",
                    tuple(chunk),
                )
            )
        return found

    def snapshot(
        self, *, counts: bool
    ) -> tuple[list[PartitionletState], dict[int, tuple[int, int, int, int]] | None]:
        """`rows()` and (with `counts`) `stored()`, read in one transaction, so an append
        between the two cannot make them disagree."""
        try:
            with read_transaction(self.conn):
                return self.rows(), self.stored() if counts else None
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc

    def stored_ends(self, pl_ids: list[int]) -> dict[int, int | None]:
        """The last offset each partitionlet's batches and markers reach (None: none), by
        the index, whatever its row says: one lookup each (`plet check --quick`)."""
        try:
            with read_transaction(self.conn):
                return self._stored_ends(pl_ids)
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc

    def max_partitionlet_id(self) -> int:
        """The highest partitionlet id this volume has a row of (0: none)."""
        return int(self._query("SELECT coalesce(max(id), 0) FROM partitionlets")[0][0])

    def recount(self, pl_id: int, batches: int, messages: int, nbytes: int, last: int) -> None:
        """Set a row's counts to what its batches hold, and its next offset past `last`
        when it points at or below it (never lower: an offset is never handed out twice)."""
        with self._writing(sync=True) as conn:
            conn.execute(
                "UPDATE partitionlets SET batches = ?, messages = ?, bytes = ?, "
                "next_offset = max(next_offset, ?) WHERE id = ?",
                (batches, messages, nbytes, last + 1, pl_id),
            )

    # --- moving partitionlets between volumes (engine.ops.balance) ---------------------------

    def live_partitionlets(self) -> dict[int, tuple[int, int]]:
        """{partitionlet id: (state, bytes)} of every row here that is not a tombstone."""
        try:
            rows = self.conn.execute(
                "SELECT id, state, bytes FROM partitionlets WHERE state != ?", (DELETED,)
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc
        return {pl_id: (state, nbytes) for pl_id, state, nbytes in rows}

    def copy_partitionlet_from(
        self,
        source: Volume,
        pl_id: int,
        *,
        sync: bool = True,
        expect_here: PartitionletState | None = None,
        chunk: int = 64,
    ) -> PartitionletState | None:
        """Copy the sealed partitionlet `pl_id` of `source` into this volume.

        The source is read in one read transaction (a consistent snapshot, so a concurrent
        compaction or purge is seen entirely or not at all) and everything is written here
        in one write transaction: the row, in state SEALED, its batches (`chunk` at a time,
        so a large partitionlet is never held in memory whole) and the stream usage. Any row
        of that id this volume held before is replaced: a tombstone left when the
        partitionlet moved away earlier, or an orphan copy left by a move that died before
        the catalog switched to it. Ids are never reused, so such a row can only be a
        remnant of this very partitionlet, and a tombstone is only needed where the
        partitionlet was once active (a sealed row keeps stale writers out just as well).

        `sync=True` makes the commit durable against a machine crash, as it must be before
        the catalog points at the copy and the source is purged. With `expect_here`, the
        copy replaces only a row here in exactly that state (a refresh of an earlier copy
        that nobody has rewritten since). Returns the state of the copy, or None, writing
        nothing, when `source` holds no sealed partitionlet `pl_id` or the row here is not
        as expected.
        """
        from engine.errors import InvalidArgument

        if source is self or source.path == self.path:
            raise InvalidArgument(f"partitionlet {pl_id}: source and target are one volume")
        src = source.conn
        try:
            with read_transaction(src):
                row = src.execute(
                    "SELECT id, stream_id, topic_id, partition, base_offset, next_offset, state, "
                    "bytes, batches, messages, first_ts, max_ts, created_ms "
                    "FROM partitionlets WHERE id = ?",
                    (pl_id,),
                ).fetchone()
                if row is None or row[6] != SEALED:
                    return None
                stream_id = row[1]
                with self._writing(sync) as conn:
                    if expect_here is not None:
                        here = conn.execute(
                            f"SELECT {_STATE_COLUMNS} FROM partitionlets WHERE id = ?", (pl_id,)
                        ).fetchone()
                        if here is None or PartitionletState(*here) != expect_here:
                            return None
                    self._drop_for_copy(pl_id)
                    conn.execute(
                        "INSERT INTO partitionlets (id, stream_id, topic_id, partition, "
                        "base_offset, next_offset, state, bytes, batches, messages, first_ts, "
                        "max_ts, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        row,
                    )
                    # Batches as they are (their append time, time index and checksum too);
                    # a move is no write, so it adds no heat. Each is checked first: a
                    # damaged batch stops the move (the source stays as it is), so a move
                    # never spreads damage.
                    cursor = src.execute(
                        "SELECT ?, base_offset, last_offset, count, first_ts, max_ts, ts_high, "
                        "ts_type, append_ms, origin, bytes, payload, producer_id, "
                        "producer_epoch, base_seq, crc FROM batches "
                        "WHERE partitionlet = ? ORDER BY last_offset",
                        (pl_id, pl_id),
                    )
                    messages = nbytes = 0
                    while rows := cursor.fetchmany(chunk):
                        source._check_copied(pl_id, rows)
                        conn.executemany(_INSERT_BATCHES, rows)
                        messages += sum(r[3] for r in rows)
                        nbytes += sum(r[10] for r in rows)
                    if messages or nbytes:
                        _add_usage(conn, {stream_id: [messages, nbytes]})
                    conn.executemany(
                        f"INSERT INTO markers ({_MARKER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        src.execute(
                            f"SELECT {_MARKER_COLUMNS} FROM markers WHERE partitionlet = ?",
                            (pl_id,),
                        ),
                    )
        except sqlite3.DatabaseError as exc:
            raise translate(exc, source.path, "volume") from exc
        return self.state(pl_id)

    def _drop_for_copy(self, pl_id: int) -> None:
        """Inside a write transaction: remove any row and batches of `pl_id`, keeping the
        stream usage right (a tombstone has no batches left to count)."""
        conn = self.conn
        row = conn.execute(
            "SELECT p.stream_id, coalesce(sum(b.count), 0), coalesce(sum(b.bytes), 0) "
            "FROM partitionlets p LEFT JOIN batches b ON b.partitionlet = p.id "
            "WHERE p.id = ? GROUP BY p.id",
            (pl_id,),
        ).fetchone()
        if row is None:
            return
        if row[1] or row[2]:
            conn.execute(
                "UPDATE stream_usage SET messages = messages - ?, bytes = bytes - ? "
                "WHERE stream_id = ?",
                (row[1], row[2], row[0]),
            )
        conn.execute("DELETE FROM batches WHERE partitionlet = ?", (pl_id,))
        conn.execute("DELETE FROM markers WHERE partitionlet = ?", (pl_id,))
        conn.execute("DELETE FROM partitionlets WHERE id = ?", (pl_id,))

    def purge_if_unchanged(self, pl_id: int, expected: PartitionletState) -> bool:
        """What `purge` does to one partitionlet, but only if its row is still exactly in
        the `expected` state (checked in the same transaction); True if purged.

        A move (engine.ops.balance) deletes its source this way, so that a compaction that
        rewrote the source after the copy was taken is noticed instead of lost.
        """
        conn = self.conn
        with write_transaction(conn, self.path, "volume"):
            row = conn.execute(
                f"SELECT {_STATE_COLUMNS} FROM partitionlets WHERE id = ?", (pl_id,)
            ).fetchone()
            if row is None or PartitionletState(*row) != expected:
                return False
            self._purge_one(pl_id, self._clock.now_ms())
        return True

    # --- replication (engine.replication) ------------------------------------------------

    def replica_batches(self, pl_id: int, from_offset: int, limit: int) -> list[ReplicaBatch]:
        """Batches holding offsets >= `from_offset`, in offset order, with everything a
        replica needs to store them as they are here (origin and producer fields included;
        the transaction markers are `markers`)."""
        try:
            rows = self.conn.execute(
                "SELECT base_offset, last_offset, count, first_ts, max_ts, ts_type, origin, "
                "payload, append_ms, producer_id, producer_epoch, base_seq, crc FROM batches "
                "WHERE partitionlet = ? AND last_offset >= ? ORDER BY last_offset LIMIT ?",
                (pl_id, from_offset, limit),
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc
        batches = [ReplicaBatch.of_row(row) for row in rows]
        # checked as `read` checks: the batches up to a damaged one, or the error
        for i, b in enumerate(batches):
            if not batch_codec.intact(
                b.base_offset, b.last_offset, b.ts_type, b.first_ts, b.max_ts, b.payload, b.crc
            ):
                if i:
                    return batches[:i]
                raise self.corrupt(pl_id, b.base_offset, b.last_offset)
        return batches

    @staticmethod
    def _replicated_marker_here(
        conn: sqlite3.Connection, pl_id: int, b: ReplicaBatch
    ) -> tuple[str, tuple[int, int, str] | None]:
        """Inside `append_replicated`: ("present", None) when the marker `b` below the next
        offset is here already (or nothing holds its offset), else ("conflict", what holds
        it)."""
        mark = conn.execute(
            "SELECT producer_id, is_commit, coalesce(origin, "
            "(SELECT value FROM volume_meta WHERE key = 'cluster_id')) FROM markers "
            "WHERE partitionlet = ? AND offset = ?",
            (pl_id, b.base_offset),
        ).fetchone()
        if mark is not None:
            if (mark[0], bool(mark[1]), mark[2]) == (b.producer_id, b.marker, b.origin):
                return "present", None
            return "conflict", (b.base_offset, b.base_offset, mark[2])
        here = conn.execute(
            "SELECT base_offset, last_offset, origin FROM batches "
            "WHERE partitionlet = ? AND last_offset >= ? ORDER BY last_offset LIMIT 1",
            (pl_id, b.base_offset),
        ).fetchone()
        if here is None or here[0] > b.base_offset:
            return "present", None  # a gap here: compacted away, or a marker not copied
        return "conflict", (here[0], here[1], here[2])

    def replica_markers(
        self, pl_id: int, from_offset: int, to_offset: int
    ) -> list[tuple[int, int, int, bool, str | None]]:
        """The transaction markers at offsets from_offset..to_offset as replication moves
        them: (offset, producer id, epoch, True for COMMIT, origin; None: this cluster)."""
        return [
            (r[0], r[1], r[2], bool(r[3]), r[4])
            for r in self._query(
                "SELECT offset, producer_id, producer_epoch, is_commit, origin FROM markers "
                "WHERE partitionlet = ? AND offset BETWEEN ? AND ? ORDER BY offset",
                (pl_id, from_offset, to_offset),
            )
        ]

    def batch_at(self, pl_id: int, offset: int) -> tuple[int, int, str] | None:
        """(base_offset, last_offset, origin) of the batch of `pl_id` holding `offset`, or
        (offset, offset, origin) of the transaction marker there."""
        try:
            row = self.conn.execute(
                "SELECT base_offset, last_offset, origin FROM batches "
                "WHERE partitionlet = ? AND last_offset >= ? ORDER BY last_offset LIMIT 1",
                (pl_id, offset),
            ).fetchone()
            if row is None or row[0] > offset:
                row = self.conn.execute(
                    "SELECT offset, offset, coalesce(origin, "
                    "(SELECT value FROM volume_meta WHERE key = 'cluster_id')) FROM markers "
                    "WHERE partitionlet = ? AND offset = ?",
                    (pl_id, offset),
                ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc
        if row is None:
            return None
        return row[0], row[1], row[2]

    def append_replicated(
        self,
        target: ReplicaTarget,
        batches: list[ReplicaBatch],
        *,
        sync: bool,
        roll_bytes: int,
        roll_ms: int,
    ) -> ReplicaAppend:
        """Append batches copied from another cluster at their own offsets, in one
        transaction, with their origin; the replication twin of `append`.

        Each batch, in order, is compared with this partitionlet inside the transaction:
        - it starts at or after the next offset: appended there (`applied`); offsets the
          source does not hold (retention, compaction) stay a gap, as they are there;
        - it lies below the next offset and a batch with the same offsets and origin is
          here: it was applied before (`present`, a retry or a second route of a cycle);
        - a batch with other offsets or another origin holds its first offset: `conflict`
          (two clusters wrote the same offsets); nothing is changed;
        - it lies below this partitionlet (`behind`): the caller looks in the chain.
        The first batch that is neither applied nor present stops the call, as does a
        partitionlet found sealed (`sealed`: the caller rolls and tries again).
        """
        now = self._clock.now_ms()
        result = ReplicaAppend([])
        statuses = result.statuses
        pl_id = target.pl_id
        with self._writing(sync) as conn:
            pls = self._partitionlets([pl_id])
            pl = pls.get(pl_id)
            refused = self._disagreement(
                pl_id, target.topic_id, target.partition, target.pl_base_offset, pl,
                self._stored_ends([pl_id])[pl_id],
            )  # fmt: skip
            if refused is not None:
                raise refused
            if pl is None:
                base = target.pl_base_offset
                pl = pls[pl_id] = _Partitionlet(
                    base, ACTIVE, 0, now, base, None, None, 0, 0, True,
                    (target.stream_id, target.topic_id, target.partition),
                )  # fmt: skip
            appending = _Appending(now)
            markers: list[tuple[int, int, int, int, int, int, str | None]] = []
            for b in batches:
                if pl.state != ACTIVE:
                    statuses.append("sealed")
                    break
                if b.base_offset < pl.next_offset:
                    if b.base_offset < target.pl_base_offset:
                        statuses.append("behind")
                        break
                    if b.marker is not None:
                        status, clash = self._replicated_marker_here(conn, pl_id, b)
                        statuses.append(status)
                        if clash is not None:
                            result.conflict_with = clash
                            break
                        continue
                    here = conn.execute(
                        "SELECT base_offset, last_offset, origin FROM batches "
                        "WHERE partitionlet = ? AND last_offset >= ? "
                        "ORDER BY last_offset LIMIT 1",
                        (pl_id, b.base_offset),
                    ).fetchone()
                    if here is None or here[0] > b.last_offset:
                        # Nothing here holds these offsets (compacted away): settled.
                        statuses.append("present")
                    elif here == (b.base_offset, b.last_offset, b.origin):
                        statuses.append("present")
                    else:
                        statuses.append("conflict")
                        result.conflict_with = (here[0], here[1], here[2])
                        break
                    continue
                if should_roll(pl, now, roll_bytes=roll_bytes, roll_ms=roll_ms):
                    pl.state = SEALED
                    pl.changed = True
                    statuses.append("sealed")
                    break
                if b.marker is not None:
                    # A control record: it takes its offset and holds no message, as there.
                    assert b.producer_id is not None and b.producer_epoch is not None
                    markers.append(
                        (
                            pl_id, b.base_offset, b.producer_id, b.producer_epoch,
                            int(b.marker), now, b.origin,
                        )
                    )  # fmt: skip
                    pl.next_offset = b.base_offset + 1
                    pl.changed = True
                    statuses.append("applied")
                    continue
                producer = None
                if b.producer_id is not None:
                    assert b.producer_epoch is not None and b.base_seq is not None
                    producer = (b.producer_id, b.producer_epoch, b.base_seq)
                # Not checked against this cluster's producers (`_Sequences`): the source
                # checked them, and its producer ids are its own.
                # b.crc, when it came with one, was checked against the batch
                # (engine.replication.protocol.check_replica_batch)
                appending.add(
                    pl_id, pl, target.stream_id, b.base_offset, b.last_offset, b.count,
                    b.first_ts, b.max_ts, b.ts_type, b.origin, b.payload, producer, b.crc,
                )  # fmt: skip
                statuses.append("applied")
                if is_full(pl, roll_bytes):
                    pl.state = SEALED
                    break
            if pl.state == SEALED:
                result.sealed_at = pl.next_offset
            result.next_offset = pl.next_offset
            appending.write(conn, pls)
            if markers:
                conn.executemany(_INSERT_MARKERS, markers)
        usage = appending.usage.get(target.stream_id)
        if usage is not None:
            result.messages, result.bytes = usage
        return result


@dataclass(frozen=True)
class ReplicaBatch:
    """A stored batch as replication moves it: offsets, timestamps, origin, payload and an
    idempotent producer's fields exactly as in the source (`append_ms` is the source's, for
    lag). With `marker` set (True COMMIT, False ABORT) it is a transaction marker of
    producer `producer_id`: one offset, no message, an empty payload."""

    base_offset: int
    last_offset: int
    count: int
    first_ts: int
    max_ts: int
    ts_type: int
    origin: str
    payload: bytes
    append_ms: int
    producer_id: int | None = None
    producer_epoch: int | None = None
    base_seq: int | None = None
    marker: bool | None = None
    # its batch.checksum, as stored at the source (None: not known, as from a source
    # before checksums); a replica checks it before writing and stores it
    crc: int | None = None

    @classmethod
    def of_row(cls, r: tuple[Any, ...]) -> ReplicaBatch:
        """A stored batch: a row of its fields in order, but `marker`, then its crc."""
        return cls(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], crc=r[12])  # fmt: skip


@dataclass(frozen=True)
class ReplicaTarget:
    """The active partitionlet a replicated batch goes to."""

    pl_id: int
    stream_id: int
    topic_id: int
    partition: int
    pl_base_offset: int


@dataclass
class ReplicaAppend:
    """What `Volume.append_replicated` did: one status per batch it looked at."""

    statuses: list[str]
    next_offset: int | None = None
    sealed_at: int | None = None
    conflict_with: tuple[int, int, str] | None = None
    messages: int = 0
    bytes: int = 0
