"""Producer ids in the catalog (table `producer_ids`): every SQL statement on it.

An idempotent or transactional producer writes its batches with an id the cluster issued
(Kafka's InitProducerId), so that every process that serves the cluster (a restarted `plet
serve`, a second listener, the engine's own producers) knows the id and whom it belongs
to. The sequences themselves are not here: they live in the stored batch rows
(engine.storage.volume), the log being the producer state, as in Kafka. Ids are never
reused (AUTOINCREMENT, and issued by a commit that is fsynced, so a machine crash cannot
take one back); one idle for longer than the expiry is deleted, and a batch that names it
is refused (the client asks for a new one).

Each call is one short transaction; any thread and any process may call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from engine.storage.catalog import Catalog

# Part of the catalog's schema (engine.storage.catalog.SCHEMA).
PRODUCER_SCHEMA = """
CREATE TABLE IF NOT EXISTS producer_ids (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused
    epoch            INTEGER NOT NULL DEFAULT 0,
    transactional_id TEXT UNIQUE,        -- NULL: an idempotent producer without one
    principal        TEXT NOT NULL,      -- the user it was issued to
    created_ms       INTEGER NOT NULL,
    last_used_ms     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS producer_ids_by_use ON producer_ids (last_used_ms);
"""


class ProducerRow(NamedTuple):
    id: int
    epoch: int
    transactional_id: str | None
    principal: str
    created_ms: int
    last_used_ms: int


_COLUMNS = ", ".join(ProducerRow._fields)


class ProducerIds:
    """The `producer_ids` table of one catalog (`catalog.producers`); times come from the
    caller."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def issue(self, principal: str, now_ms: int) -> ProducerRow:
        """A new producer id (epoch 0) for `principal`. Fsynced: the id goes into batches
        that are (acks=all), and an id lost to a machine crash would be issued again, its
        new owner's first batches taken for resends of the old one's and dropped."""
        with self._catalog.write_durably():
            cur = self._catalog.conn.execute(
                "INSERT INTO producer_ids (principal, created_ms, last_used_ms) VALUES (?, ?, ?)",
                (principal, now_ms, now_ms),
            )
            assert cur.lastrowid is not None
            return ProducerRow(cur.lastrowid, 0, None, principal, now_ms, now_ms)

    def bump(self, transactional_id: str, principal: str, now_ms: int) -> ProducerRow:
        """Inside the caller's write transaction: the producer id of a transactional id,
        made (epoch 0) for `principal` or with its epoch one higher."""
        conn = self._catalog.conn
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM producer_ids WHERE transactional_id = ?",
            (transactional_id,),
        ).fetchone()
        if row is None:
            cur = conn.execute(
                "INSERT INTO producer_ids (transactional_id, principal, created_ms, "
                "last_used_ms) VALUES (?, ?, ?, ?)",
                (transactional_id, principal, now_ms, now_ms),
            )
            assert cur.lastrowid is not None
            return ProducerRow(cur.lastrowid, 0, transactional_id, principal, now_ms, now_ms)
        found = ProducerRow(*row)
        conn.execute(
            "UPDATE producer_ids SET epoch = epoch + 1, last_used_ms = ? WHERE id = ?",
            (now_ms, found.id),
        )
        return found._replace(epoch=found.epoch + 1, last_used_ms=now_ms)

    def get(self, producer_id: int) -> ProducerRow | None:
        rows = self._catalog.query(
            f"SELECT {_COLUMNS} FROM producer_ids WHERE id = ?", (producer_id,)
        )
        return ProducerRow(*rows[0]) if rows else None

    def alive(self, producer_ids: list[int]) -> set[int]:
        """Those of `producer_ids` the cluster knows (issued here, not expired)."""
        found: set[int] = set()
        for start in range(0, len(producer_ids), 500):  # within SQLite's bound on variables
            chunk = producer_ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            found.update(
                r[0]
                for r in self._catalog.query(
                    f"SELECT id FROM producer_ids WHERE id IN ({marks})", tuple(chunk)
                )
            )
        return found

    def touch(self, producer_id: int, now_ms: int) -> None:
        """Record that the producer was used (its expiry starts again)."""
        with self._catalog.write():
            self._catalog.conn.execute(
                "UPDATE producer_ids SET last_used_ms = ? WHERE id = ? AND last_used_ms < ?",
                (now_ms, producer_id, now_ms),
            )

    def expire(self, idle_before_ms: int) -> int:
        """Delete the ids last used before `idle_before_ms`; returns how many."""
        with self._catalog.write():
            cur = self._catalog.conn.execute(
                "DELETE FROM producer_ids WHERE last_used_ms < ?", (idle_before_ms,)
            )
            return cur.rowcount

    def count(self) -> int:
        return int(self._catalog.query("SELECT count(*) FROM producer_ids")[0][0])
