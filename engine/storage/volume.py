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

import sqlite3
import time
from dataclasses import dataclass, replace
from pathlib import Path

from engine.storage.connection import (
    ThreadConnections,
    read_transaction,
    translate,
    write_transaction,
)

ACTIVE, SEALED, DELETED = 0, 1, 2
PAGE_SIZE = 16384

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
    payload      BLOB NOT NULL
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
HEAT_BUCKET_S = 10
# Heat older than this is deleted now and then by the writer (it only feeds recent views).
HEAT_KEEP_S = 86400


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


@dataclass
class Append:
    """One batch to append. `offset` is filled in by `Volume.append` (or left None if stale)."""

    pl_id: int
    stream_id: int
    topic_id: int
    partition: int
    pl_base_offset: int
    payload: bytes
    count: int
    first_ts: int
    max_ts: int
    ts_type: int
    origin: str
    offset: int | None = None
    # Set when the partitionlet is sealed: the offset its successor starts at.
    sealed_at: int | None = None


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


class Volume:
    def __init__(self, volume_id: int, path: Path) -> None:
        self.id = volume_id
        self.path = path
        # 16 KiB pages: batches are blobs of up to a few MiB, and larger pages mean fewer
        # overflow pages to chain and checksum (measured: about a third less CPU per MB
        # written than with 4 KiB pages).
        self._conns = ThreadConnections(path, f"volume {volume_id}", page_size=PAGE_SIZE)

    @property
    def conn(self) -> sqlite3.Connection:
        return self._conns.get()

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        """One read statement, its rows, and SQLite's errors as the engine's."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc

    def close(self) -> None:
        self._conns.close()

    def initialize(self, cluster_id: str) -> None:
        try:
            self.conn.executescript(SCHEMA)
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

    def check(self, cluster_id: str) -> None:
        """Fail clearly if this file is not this cluster's volume (or not readable)."""
        from engine.errors import CorruptFile

        try:
            meta = dict(self.conn.execute("SELECT key, value FROM volume_meta").fetchall())
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc
        if meta.get("cluster_id") != cluster_id:
            raise CorruptFile(
                f"volume {self.path} belongs to cluster {meta.get('cluster_id')!r}, not "
                f"{cluster_id!r}: a file was swapped or copied from another cluster"
            )

    # --- writing --------------------------------------------------------------------------

    def append(self, appends: list[Append], *, sync: bool, roll_bytes: int, roll_ms: int) -> None:
        """Append batches in one transaction; fills each `Append.offset` or `sealed_at`.

        `sync=True` makes this commit durable against a machine crash (fsync of the WAL).
        A partitionlet that reached `roll_bytes` or `roll_ms` of age is sealed here, in the
        same transaction as its last append, so its end offset is fixed in one place.
        Statements are issued per kind, not per batch (one read of the partitionlets, one
        executemany each for batches, partitionlets, heat and usage), so appending to many
        partitions at once, as a producer creating topics does, stays cheap.
        """
        conn = self.conn
        now = time.time_ns() // 1_000_000
        if sync:
            conn.execute("PRAGMA synchronous=FULL")
        try:
            with write_transaction(conn, self.path, "volume"):
                # [next_offset, state, bytes, created_ms, base, first_ts, max_ts, batches,
                #  messages, changed, Append that created it or None]
                states: dict[int, list] = {}
                ids = sorted({a.pl_id for a in appends})
                for i in range(0, len(ids), 500):
                    chunk = ids[i : i + 500]
                    for row in conn.execute(
                        "SELECT id, next_offset, state, bytes, created_ms, base_offset, "
                        "first_ts, max_ts, batches, messages FROM partitionlets "
                        f"WHERE id IN ({','.join('?' * len(chunk))})",
                        chunk,
                    ):
                        states[row[0]] = [*row[1:], False, None]
                batch_rows = []
                heat_rows = []
                per_stream: dict[int, list[int]] = {}
                for a in appends:
                    st = states.get(a.pl_id)
                    if st is None:  # its first append: the row is made below
                        st = states[a.pl_id] = [
                            a.pl_base_offset,
                            ACTIVE,
                            0,
                            now,
                            a.pl_base_offset,
                            None,
                            None,
                            0,
                            0,
                            True,
                            a,
                        ]
                    next_offset, state, nbytes, created_ms, base, first_ts, max_ts = st[:7]
                    if state != ACTIVE:
                        a.sealed_at = next_offset
                        continue
                    if next_offset > base and now - created_ms >= roll_ms:
                        # Too old to take more: seal before this append; it goes to the successor.
                        st[1] = SEALED
                        st[9] = True
                        a.sealed_at = next_offset
                        continue
                    size = len(a.payload)
                    ts_high = a.max_ts if max_ts is None or a.max_ts > max_ts else max_ts
                    batch_rows.append(
                        (
                            a.pl_id,
                            next_offset,
                            next_offset + a.count - 1,
                            a.count,
                            a.first_ts,
                            a.max_ts,
                            ts_high,
                            a.ts_type,
                            now,
                            a.origin,
                            size,
                            a.payload,
                        )
                    )
                    heat_rows.append((a.pl_id, a.count, size))
                    a.offset = next_offset
                    st[0] = next_offset + a.count
                    st[2] = nbytes + size
                    st[5] = a.first_ts if first_ts is None else min(first_ts, a.first_ts)
                    st[6] = ts_high
                    st[7] += 1
                    st[8] += a.count
                    st[9] = True
                    usage = per_stream.get(a.stream_id)
                    if usage is None:
                        per_stream[a.stream_id] = [a.count, size]
                    else:
                        usage[0] += a.count
                        usage[1] += size
                    if st[2] >= roll_bytes:
                        st[1] = SEALED
                        a.sealed_at = st[0]
                conn.executemany(
                    "INSERT INTO batches (partitionlet, base_offset, last_offset, count, "
                    "first_ts, max_ts, ts_high, ts_type, append_ms, origin, bytes, payload) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    batch_rows,
                )
                made = [(pl_id, st[10]) for pl_id, st in states.items() if st[10] is not None]
                conn.executemany(
                    "INSERT INTO partitionlets (id, stream_id, topic_id, partition, "
                    "base_offset, next_offset, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            pl_id,
                            a.stream_id,
                            a.topic_id,
                            a.partition,
                            a.pl_base_offset,
                            a.pl_base_offset,
                            now,
                        )
                        for pl_id, a in made
                    ],
                )
                conn.executemany(
                    "UPDATE partitionlets SET next_offset = ?, state = ?, bytes = ?, first_ts = ?, "
                    "max_ts = ?, batches = ?, messages = ? WHERE id = ?",
                    [
                        (st[0], st[1], st[2], st[5], st[6], st[7], st[8], pl_id)
                        for pl_id, st in states.items()
                        if st[9]
                    ],
                )
                if batch_rows:
                    bucket = now // (HEAT_BUCKET_S * 1000)
                    conn.executemany(
                        "INSERT INTO heat (bucket, partitionlet, w_messages, w_bytes) "
                        "VALUES (?, ?, ?, ?) ON CONFLICT (bucket, partitionlet) DO UPDATE SET "
                        "w_messages = w_messages + excluded.w_messages, "
                        "w_bytes = w_bytes + excluded.w_bytes",
                        [(bucket, *row) for row in heat_rows],
                    )
                    if bucket % 360 == 0:  # about once an hour of appends: forget old heat
                        conn.execute(
                            "DELETE FROM heat WHERE bucket < ?",
                            (bucket - HEAT_KEEP_S // HEAT_BUCKET_S,),
                        )
                    conn.executemany(
                        "INSERT INTO stream_usage (stream_id, messages, bytes) VALUES (?, ?, ?) "
                        "ON CONFLICT (stream_id) DO UPDATE SET "
                        "messages = messages + excluded.messages, bytes = bytes + excluded.bytes",
                        [(sid, m, b) for sid, (m, b) in per_stream.items()],
                    )
        finally:
            if sync:
                conn.execute("PRAGMA synchronous=NORMAL")

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
                    time.time_ns() // 1_000_000,
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

    def drop(self, pl_ids: list[int]) -> dict[int, tuple[int, int]]:
        """Purge these partitionlets in one transaction, returning the (messages, bytes)
        each one freed (0, 0 for one purged already)."""
        if not pl_ids:
            return {}
        now = time.time_ns() // 1_000_000
        with write_transaction(self.conn, self.path, "volume"):
            return {pl_id: self._purge_one(pl_id, now) for pl_id in pl_ids}

    def batch_rows(self, pl_id: int, after_offset: int, limit: int) -> list[tuple]:
        """Batches whose last offset is > `after_offset`, in offset order, as tuples of
        (batch id, base_offset, last_offset, count, payload)."""
        return self._query(
            "SELECT id, base_offset, last_offset, count, payload FROM batches "
            "WHERE partitionlet = ? AND last_offset > ? ORDER BY last_offset LIMIT ?",
            (pl_id, after_offset, limit),
        )

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
        with write_transaction(conn, self.path, "volume"):
            row = conn.execute(
                "SELECT stream_id, state FROM partitionlets WHERE id = ?", (pl_id,)
            ).fetchone()
            if row is None or row[1] == DELETED:
                return applied, 0
            stream_id = row[0]
            for rw in rewrites:
                cur = conn.execute(
                    "SELECT count, bytes FROM batches WHERE id = ? AND partitionlet = ?",
                    (rw.batch_id, pl_id),
                ).fetchone()
                if cur is None or cur[0] != rw.expect_count:
                    continue
                if rw.payload is None:
                    conn.execute("DELETE FROM batches WHERE id = ?", (rw.batch_id,))
                    deleted += 1
                    freed_bytes += cur[1]
                    removed += cur[0]
                else:
                    conn.execute(
                        "UPDATE batches SET payload = ?, count = ?, first_ts = ?, max_ts = ?, "
                        "bytes = ? WHERE id = ?",
                        (
                            rw.payload,
                            rw.count,
                            rw.first_ts,
                            rw.max_ts,
                            len(rw.payload),
                            rw.batch_id,
                        ),
                    )
                    freed_bytes += cur[1] - len(rw.payload)
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

    def read(self, pl_id: int, from_offset: int, max_batches: int) -> list[tuple]:
        """Batches holding offsets >= `from_offset`, in offset order, as tuples of
        (base_offset, last_offset, ts_type, first_ts, max_ts, payload)."""
        return self._query(
            "SELECT base_offset, last_offset, ts_type, first_ts, max_ts, payload FROM batches "
            "WHERE partitionlet = ? AND last_offset >= ? ORDER BY last_offset LIMIT ?",
            (pl_id, from_offset, max_batches),
        )

    def first_batch_at_time(self, pl_id: int, timestamp_ms: int) -> tuple | None:
        """The first batch whose running max timestamp reaches `timestamp_ms`, in the form
        of `read`."""
        rows = self._query(
            "SELECT base_offset, last_offset, ts_type, first_ts, max_ts, payload FROM batches "
            "WHERE partitionlet = ? AND ts_high >= ? ORDER BY ts_high, last_offset LIMIT 1",
            (pl_id, timestamp_ms),
        )
        return rows[0] if rows else None

    def recent_bytes(self, window_s: int = 300) -> tuple[int, int]:
        """(bytes written, bytes read) here in the last `window_s` seconds."""
        since = (time.time_ns() // 1_000_000 - window_s * 1000) // (HEAT_BUCKET_S * 1000)
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
        conn = self.conn
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
                if sync:
                    conn.execute("PRAGMA synchronous=FULL")
                try:
                    with write_transaction(conn, self.path, "volume"):
                        if expect_here is not None:
                            here = conn.execute(
                                f"SELECT {_STATE_COLUMNS} FROM partitionlets WHERE id = ?",
                                (pl_id,),
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
                        cursor = src.execute(
                            "SELECT base_offset, last_offset, count, first_ts, max_ts, ts_high, "
                            "ts_type, append_ms, origin, bytes, payload FROM batches "
                            "WHERE partitionlet = ? ORDER BY last_offset",
                            (pl_id,),
                        )
                        messages = nbytes = 0
                        while True:
                            rows = cursor.fetchmany(chunk)
                            if not rows:
                                break
                            conn.executemany(
                                "INSERT INTO batches (partitionlet, base_offset, last_offset, "
                                "count, first_ts, max_ts, ts_high, ts_type, append_ms, origin, "
                                "bytes, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                [(pl_id, *r) for r in rows],
                            )
                            messages += sum(r[2] for r in rows)
                            nbytes += sum(r[9] for r in rows)
                        if messages or nbytes:
                            conn.execute(
                                "INSERT INTO stream_usage (stream_id, messages, bytes) "
                                "VALUES (?, ?, ?) ON CONFLICT (stream_id) DO UPDATE SET "
                                "messages = messages + excluded.messages, "
                                "bytes = bytes + excluded.bytes",
                                (stream_id, messages, nbytes),
                            )
                finally:
                    if sync:
                        conn.execute("PRAGMA synchronous=NORMAL")
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
            self._purge_one(pl_id, time.time_ns() // 1_000_000)
        return True

    # --- replication (engine.replication) ------------------------------------------------

    def replica_batches(self, pl_id: int, from_offset: int, limit: int) -> list[ReplicaBatch]:
        """Batches holding offsets >= `from_offset`, in offset order, with everything a
        replica needs to store them as they are here (origin included)."""
        try:
            rows = self.conn.execute(
                "SELECT base_offset, last_offset, count, first_ts, max_ts, ts_type, origin, "
                "payload, append_ms FROM batches WHERE partitionlet = ? AND last_offset >= ? "
                "ORDER BY last_offset LIMIT ?",
                (pl_id, from_offset, limit),
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc
        return [ReplicaBatch(*row) for row in rows]

    def batch_at(self, pl_id: int, offset: int) -> tuple[int, int, str] | None:
        """(base_offset, last_offset, origin) of the batch of `pl_id` holding `offset`."""
        try:
            row = self.conn.execute(
                "SELECT base_offset, last_offset, origin FROM batches "
                "WHERE partitionlet = ? AND last_offset >= ? ORDER BY last_offset LIMIT 1",
                (pl_id, offset),
            ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "volume") from exc
        if row is None or row[0] > offset:
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
        conn = self.conn
        now = time.time_ns() // 1_000_000
        result = ReplicaAppend([])
        if sync:
            conn.execute("PRAGMA synchronous=FULL")
        try:
            with write_transaction(conn, self.path, "volume"):
                row = conn.execute(
                    "SELECT next_offset, state, bytes, created_ms, first_ts, max_ts, batches, "
                    "messages FROM partitionlets WHERE id = ?",
                    (target.pl_id,),
                ).fetchone()
                if row is None:
                    conn.execute(
                        "INSERT INTO partitionlets (id, stream_id, topic_id, partition, "
                        "base_offset, next_offset, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (
                            target.pl_id,
                            target.stream_id,
                            target.topic_id,
                            target.partition,
                            target.pl_base_offset,
                            target.pl_base_offset,
                            now,
                        ),
                    )
                    row = (target.pl_base_offset, ACTIVE, 0, now, None, None, 0, 0)
                next_offset, state, nbytes, created_ms, first_ts, max_ts, count_b, count_m = row
                rows = []
                added_m = added_b = 0
                for b in batches:
                    if state != ACTIVE:
                        result.statuses.append("sealed")
                        break
                    if b.base_offset < next_offset:
                        if b.base_offset < target.pl_base_offset:
                            result.statuses.append("behind")
                            break
                        here = conn.execute(
                            "SELECT base_offset, last_offset, origin FROM batches "
                            "WHERE partitionlet = ? AND last_offset >= ? "
                            "ORDER BY last_offset LIMIT 1",
                            (target.pl_id, b.base_offset),
                        ).fetchone()
                        if here is None or here[0] > b.last_offset:
                            # Nothing here holds these offsets (compacted away): settled.
                            result.statuses.append("present")
                        elif (here[0], here[1], here[2]) == (
                            b.base_offset,
                            b.last_offset,
                            b.origin,
                        ):
                            result.statuses.append("present")
                        else:
                            result.statuses.append("conflict")
                            result.conflict_with = (here[0], here[1], here[2])
                            break
                        continue
                    if next_offset > target.pl_base_offset and now - created_ms >= roll_ms:
                        state = SEALED
                        result.statuses.append("sealed")
                        break
                    size = len(b.payload)
                    max_ts = b.max_ts if max_ts is None or b.max_ts > max_ts else max_ts
                    first_ts = b.first_ts if first_ts is None else min(first_ts, b.first_ts)
                    rows.append(
                        (
                            target.pl_id,
                            b.base_offset,
                            b.last_offset,
                            b.count,
                            b.first_ts,
                            b.max_ts,
                            max_ts,
                            b.ts_type,
                            now,
                            b.origin,
                            size,
                            b.payload,
                        )
                    )
                    next_offset = b.last_offset + 1
                    nbytes += size
                    count_b += 1
                    count_m += b.count
                    added_m += b.count
                    added_b += size
                    result.statuses.append("applied")
                    if nbytes >= roll_bytes:
                        state = SEALED
                        result.sealed_at = next_offset
                        break
                if state == SEALED and result.sealed_at is None:
                    result.sealed_at = next_offset
                result.next_offset = next_offset
                conn.executemany(
                    "INSERT INTO batches (partitionlet, base_offset, last_offset, count, "
                    "first_ts, max_ts, ts_high, ts_type, append_ms, origin, bytes, payload) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                conn.execute(
                    "UPDATE partitionlets SET next_offset = ?, state = ?, bytes = ?, "
                    "first_ts = ?, max_ts = ?, batches = ?, messages = ? WHERE id = ?",
                    (next_offset, state, nbytes, first_ts, max_ts, count_b, count_m, target.pl_id),
                )
                if rows:
                    bucket = now // (HEAT_BUCKET_S * 1000)
                    conn.execute(
                        "INSERT INTO heat (bucket, partitionlet, w_messages, w_bytes) "
                        "VALUES (?, ?, ?, ?) ON CONFLICT (bucket, partitionlet) DO UPDATE SET "
                        "w_messages = w_messages + excluded.w_messages, "
                        "w_bytes = w_bytes + excluded.w_bytes",
                        (bucket, target.pl_id, added_m, added_b),
                    )
                    conn.execute(
                        "INSERT INTO stream_usage (stream_id, messages, bytes) VALUES (?, ?, ?) "
                        "ON CONFLICT (stream_id) DO UPDATE SET "
                        "messages = messages + excluded.messages, bytes = bytes + excluded.bytes",
                        (target.stream_id, added_m, added_b),
                    )
        finally:
            if sync:
                conn.execute("PRAGMA synchronous=NORMAL")
        result.messages = added_m
        result.bytes = added_b
        return result


@dataclass(frozen=True)
class ReplicaBatch:
    """A stored batch as replication moves it: offsets, timestamps, origin and payload
    exactly as in the source (`append_ms` is the source's, for lag)."""

    base_offset: int
    last_offset: int
    count: int
    first_ts: int
    max_ts: int
    ts_type: int
    origin: str
    payload: bytes
    append_ms: int


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
