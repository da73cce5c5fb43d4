"""Transactions in the catalog: every SQL statement on their tables.

- `transactions`: one row per transactional id: its producer id and epoch (the epoch grows
  at every `init_transactions`, which fences the producers before), its state and timeout.
- `txn_partitions`: the partitions an open transaction has written to (or will), each with
  the log end offset when it joined: no message of the transaction lies below it, so the
  smallest of them is the partition's last stable offset (LSO) while it is open.
- `txn_offsets`: group offsets sent to an open transaction; they become the group's
  committed offsets in the transaction that completes a commit, and go on an abort.
- `aborted_txns`: per partition, the aborted transactions' ranges (producer id, first
  offset, marker offset): what `read_committed` readers leave out (Kafka's aborted
  transaction index).

The rules (who may, in which state, in which order markers and rows are written) are
engine.client.transactions'; this module only reads and writes rows. Each method is one
short transaction; any thread and any process may call it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from engine.storage.catalog import Catalog

# Part of the catalog's schema (engine.storage.catalog.SCHEMA).
TRANSACTION_SCHEMA = """
CREATE TABLE IF NOT EXISTS transactions (
    transactional_id TEXT PRIMARY KEY,
    producer_id      INTEGER NOT NULL,
    epoch            INTEGER NOT NULL,
    state            TEXT NOT NULL,     -- engine.client.transactions.STATES
    timeout_ms       INTEGER NOT NULL,
    started_ms       INTEGER,           -- when the open transaction began
    updated_ms       INTEGER NOT NULL,
    principal        TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS txn_partitions (
    transactional_id TEXT NOT NULL,
    topic_id         INTEGER NOT NULL,
    partition        INTEGER NOT NULL,
    first_offset     INTEGER NOT NULL,  -- the log end offset when it joined
    PRIMARY KEY (transactional_id, topic_id, partition)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS txn_partitions_by_partition ON txn_partitions (topic_id, partition);
CREATE TABLE IF NOT EXISTS txn_offsets (
    transactional_id TEXT NOT NULL,
    group_id         TEXT NOT NULL,
    topic_id         INTEGER NOT NULL,
    partition        INTEGER NOT NULL,
    "offset"         INTEGER NOT NULL,
    metadata         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (transactional_id, group_id, topic_id, partition)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS aborted_txns (
    topic_id      INTEGER NOT NULL,
    partition     INTEGER NOT NULL,
    marker_offset INTEGER NOT NULL,
    producer_id   INTEGER NOT NULL,
    first_offset  INTEGER NOT NULL,
    PRIMARY KEY (topic_id, partition, marker_offset)
) WITHOUT ROWID;
"""


class TxnRow(NamedTuple):
    transactional_id: str
    producer_id: int
    epoch: int
    state: str
    timeout_ms: int
    started_ms: int | None
    updated_ms: int
    principal: str


_COLUMNS = ", ".join(TxnRow._fields)


class TransactionTables:
    """The transaction tables of one catalog (`catalog.transactions`); times come from the
    caller."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def init(
        self, transactional_id: str, principal: str, timeout_ms: int, now_ms: int
    ) -> tuple[TxnRow, str]:
        """`init_transactions` in one catalog transaction: the transactional id's producer
        id gets its next epoch (fencing every older one), and a transaction left open is to
        be finished by the new epoch: one that was committing is committed, any other
        aborted. Returns the row and the state before (`empty`, `ongoing`, ...). Fsynced:
        the new epoch is written into batches that are (acks=all), and an epoch lost to a
        machine crash would be issued again, its batches taken for the old ones' resends."""
        with self._catalog.write_durably():
            producer = self._catalog.producers.bump(transactional_id, principal, now_ms)
            before = self._catalog.conn.execute(
                "SELECT state FROM transactions WHERE transactional_id = ?", (transactional_id,)
            ).fetchone()
            previous = before[0] if before else "empty"
            state = {
                "ongoing": "prepare_abort",
                "prepare_abort": "prepare_abort",
                "prepare_commit": "prepare_commit",
            }.get(previous, "empty")
            row = TxnRow(
                transactional_id,
                producer.id,
                producer.epoch,
                state,
                timeout_ms,
                None,
                now_ms,
                producer.principal,
            )
            self._catalog.conn.execute(
                f"INSERT OR REPLACE INTO transactions ({_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, coalesce((SELECT started_ms FROM transactions "
                "WHERE transactional_id = ?), ?), ?, ?)",
                (*row[:5], transactional_id, None, *row[6:]),
            )
            return row, previous

    def get(self, transactional_id: str) -> TxnRow | None:
        rows = self._catalog.query(
            f"SELECT {_COLUMNS} FROM transactions WHERE transactional_id = ?",
            (transactional_id,),
        )
        return TxnRow(*rows[0]) if rows else None

    def all(self) -> list[TxnRow]:
        return [
            TxnRow(*r)
            for r in self._catalog.query(
                f"SELECT {_COLUMNS} FROM transactions ORDER BY transactional_id"
            )
        ]

    def set_state(
        self,
        transactional_id: str,
        epoch: int,
        state: str,
        now_ms: int,
        *,
        started: bool = False,
        sync: bool = False,
    ) -> bool:
        """Move the transaction of `epoch` to `state` (and start its clock); False when the
        stored epoch is another (fenced). With `sync` the commit is fsynced, and with it
        every catalog commit before it (the transaction's partitions and offsets)."""
        catalog = self._catalog
        with catalog.write_durably() if sync else catalog.write():
            cur = catalog.conn.execute(
                "UPDATE transactions SET state = ?, updated_ms = ?, "
                "started_ms = CASE WHEN ? THEN ? ELSE started_ms END "
                "WHERE transactional_id = ? AND epoch = ?",
                (state, now_ms, started, now_ms, transactional_id, epoch),
            )
            return cur.rowcount == 1

    def _open(self, transactional_id: str, epoch: int, now_ms: int) -> bool:
        """Inside a write transaction: mark the transaction of `epoch` open (its clock
        starts at the first call); False when the epoch is another or its end is decided."""
        cur = self._catalog.conn.execute(
            "UPDATE transactions SET state = 'ongoing', updated_ms = ?, "
            "started_ms = coalesce(started_ms, ?) "
            "WHERE transactional_id = ? AND epoch = ? AND state NOT LIKE 'prepare%'",
            (now_ms, now_ms, transactional_id, epoch),
        )
        return cur.rowcount == 1

    def add_partitions(
        self,
        transactional_id: str,
        epoch: int,
        partitions: Iterable[tuple[int, int, int]],
        now_ms: int,
    ) -> bool:
        """Add (topic id, partition, log end offset now) to the open transaction of `epoch`
        (a partition there already keeps its first offset), and mark it open; False when
        the stored epoch is another (fenced). Fsynced: the transaction's batches are
        written after it, fsynced, and a machine crash that kept them but lost this
        would leave them outside any open transaction, read as committed."""
        with self._catalog.write_durably():
            if not self._open(transactional_id, epoch, now_ms):
                return False
            self._catalog.conn.executemany(
                "INSERT OR IGNORE INTO txn_partitions VALUES (?, ?, ?, ?)",
                [(transactional_id, t, p, first) for t, p, first in partitions],
            )
            return True

    def add_offsets(
        self,
        transactional_id: str,
        epoch: int,
        group_id: str,
        offsets: Sequence[tuple[int, int, int, str]],
        now_ms: int,
    ) -> bool:
        """Put (topic id, partition, offset, metadata) of `group_id` into the open
        transaction of `epoch`; False when fenced."""
        with self._catalog.write():
            if not self._open(transactional_id, epoch, now_ms):
                return False
            self._catalog.conn.executemany(
                "INSERT OR REPLACE INTO txn_offsets VALUES (?, ?, ?, ?, ?, ?)",
                [(transactional_id, group_id, t, p, o, m) for t, p, o, m in offsets],
            )
            return True

    def partitions(self, transactional_id: str) -> list[tuple[int, int, int]]:
        """(topic id, partition, first offset) of the transaction, in order."""
        return [
            (r[0], r[1], r[2])
            for r in self._catalog.query(
                "SELECT topic_id, partition, first_offset FROM txn_partitions "
                "WHERE transactional_id = ? ORDER BY topic_id, partition",
                (transactional_id,),
            )
        ]

    def offsets(self, transactional_id: str) -> list[tuple[str, int, int, int, str]]:
        """(group id, topic id, partition, offset, metadata) sent to the transaction."""
        return [
            (r[0], r[1], r[2], r[3], r[4])
            for r in self._catalog.query(
                'SELECT group_id, topic_id, partition, "offset", metadata FROM txn_offsets '
                "WHERE transactional_id = ? ORDER BY group_id, topic_id, partition",
                (transactional_id,),
            )
        ]

    def complete(
        self,
        transactional_id: str,
        epoch: int,
        commit: bool,
        aborted: Sequence[tuple[int, int, int, int, int]],
        now_ms: int,
    ) -> bool:
        """End the transaction of `epoch`, in one catalog transaction: on a commit its
        offsets become its groups' committed offsets; on an abort the `aborted` ranges
        (topic id, partition, marker offset, producer id, first offset) are indexed. Its
        partitions and offsets are forgotten. False when the stored epoch is another."""
        with self._catalog.write():
            conn = self._catalog.conn
            cur = conn.execute(
                "UPDATE transactions SET state = ?, started_ms = NULL, updated_ms = ? "
                "WHERE transactional_id = ? AND epoch = ?",
                (
                    "complete_commit" if commit else "complete_abort",
                    now_ms,
                    transactional_id,
                    epoch,
                ),
            )
            if cur.rowcount != 1:
                return False
            if commit:
                rows = conn.execute(
                    'SELECT group_id, topic_id, partition, "offset", metadata FROM txn_offsets '
                    "WHERE transactional_id = ?",
                    (transactional_id,),
                ).fetchall()
                by_group: dict[str, list[tuple[int, int, int, str]]] = {}
                for g, t, p, o, m in rows:
                    by_group.setdefault(g, []).append((t, p, o, m))
                groups = self._catalog.groups
                for group_id, commits in by_group.items():
                    groups.commit(group_id, commits, now_ms)  # in this transaction
            else:
                conn.executemany(
                    "INSERT OR IGNORE INTO aborted_txns VALUES (?, ?, ?, ?, ?)", aborted
                )
            conn.execute(
                "DELETE FROM txn_partitions WHERE transactional_id = ?", (transactional_id,)
            )
            conn.execute("DELETE FROM txn_offsets WHERE transactional_id = ?", (transactional_id,))
            return True

    def add_aborted(
        self, topic_id: int, partition: int, ranges: Sequence[tuple[int, int, int]]
    ) -> None:
        """Index aborted ranges (producer id, first offset, marker offset) of a partition
        that another cluster aborted (replication brings them with its batches)."""
        with self._catalog.write():
            self._catalog.conn.executemany(
                "INSERT OR IGNORE INTO aborted_txns VALUES (?, ?, ?, ?, ?)",
                [(topic_id, partition, m, pid, first) for pid, first, m in ranges],
            )

    # --- what readers ask --------------------------------------------------------------------

    def first_open_offsets(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], int]:
        """The smallest first offset of an open transaction in each (topic id, partition)
        that has one: its last stable offset."""
        found: dict[tuple[int, int], int] = {}
        wanted = sorted(set(keys))
        # by the index on (topic_id, partition): a read_committed reader asks at every read,
        # so its cost must not grow with the open transactions of other partitions
        for start in range(0, len(wanted), 400):  # within SQLite's bound on variables
            chunk = wanted[start : start + 400]
            rows = ", ".join("(?, ?)" for _ in chunk)
            for t, p, first in self._catalog.query(
                "SELECT topic_id, partition, min(first_offset) FROM txn_partitions "
                f"WHERE (topic_id, partition) IN (VALUES {rows}) GROUP BY topic_id, partition",
                tuple(v for key in chunk for v in key),
            ):
                found[(t, p)] = first
        return found

    def prune_aborted(self, below: Iterable[tuple[int, int, int]]) -> int:
        """Forget the aborted ranges whose marker lies below an offset, per (topic id,
        partition, offset): their batches are gone with the partitionlets retention dropped.
        Returns how many."""
        with self._catalog.write():
            conn = self._catalog.conn
            return sum(
                conn.execute(
                    "DELETE FROM aborted_txns WHERE topic_id = ? AND partition = ? "
                    "AND marker_offset < ?",
                    key,
                ).rowcount
                for key in below
            )

    def open_in_partition(self, topic_id: int, partition: int) -> dict[int, tuple[int, int]]:
        """Producer id -> (its epoch, the first offset of its open transaction in this
        partition)."""
        return {
            r[0]: (r[1], r[2])
            for r in self._catalog.query(
                "SELECT t.producer_id, t.epoch, p.first_offset FROM txn_partitions p "
                "JOIN transactions t ON t.transactional_id = p.transactional_id "
                "WHERE p.topic_id = ? AND p.partition = ?",
                (topic_id, partition),
            )
        }

    def aborted(
        self, topic_id: int, partition: int, from_offset: int, to_offset: int
    ) -> list[tuple[int, int, int]]:
        """(producer id, first offset, marker offset) of the aborted transactions of a
        partition whose range meets from_offset..to_offset."""
        return [
            (r[0], r[1], r[2])
            for r in self._catalog.query(
                "SELECT producer_id, first_offset, marker_offset FROM aborted_txns "
                "WHERE topic_id = ? AND partition = ? AND marker_offset >= ? "
                "AND first_offset <= ? ORDER BY marker_offset",
                (topic_id, partition, from_offset, to_offset),
            )
        ]
