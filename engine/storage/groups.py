"""Consumer groups in the catalog: every SQL statement on the group tables.

Tables: `group_members` (live members, their subscription as a JSON list of topic ids,
their last heartbeat), `groups` (the current generation's assignment and the basis it was
computed from), `group_owners` (who reads each partition right now) and `group_offsets`
(committed offsets), `group_creators` and `group_perms` (who may do what: the rules are
engine.groups.perms'). Engine consumers (engine.client.groups) and a Kafka wire listener
(engine.wire.coordinator, through `Cluster.publish_group`) write the same tables, the
wire's members marked by their strategy (`WIRE_PREFIX`); the rules (who computes the
assignment, when a member may read a partition, what a reset may do) live in
engine.client.groups and engine.groups, not here.

The methods that take `now` run inside a transaction the caller opens with `write()`, so a
member's steps (expire the dead, register, recompute, claim) or a reset's compare-and-set
commit together; the read methods (`group_ids`, `state`, `live_members`, ...) and
`commit_offsets`, `merge_offsets` run on their own.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.storage.catalog import Catalog

TopicPart = tuple[int, int]  # (topic_id, partition)
# (topic id, partition, offset, metadata) of a commit
Commit = tuple[int, int, int, str]
# (group id, topic id, partition, offset, metadata, commit ms) of a copied offset
OffsetRow = tuple[str, int, int, int, str, int]

# The `strategy` of the members a Kafka wire listener publishes ("wire:" + the protocol its
# clients chose): how engine consumers and the listener tell each other's members apart.
WIRE_PREFIX = "wire:"

# The group tables, part of the catalog's schema (engine.storage.catalog.SCHEMA).
GROUP_SCHEMA = """
CREATE TABLE IF NOT EXISTS group_offsets (
    group_id   TEXT NOT NULL,
    topic_id   INTEGER NOT NULL,
    partition  INTEGER NOT NULL,
    "offset"   INTEGER NOT NULL,
    metadata   TEXT NOT NULL DEFAULT '',
    commit_ms  INTEGER NOT NULL,
    PRIMARY KEY (group_id, topic_id, partition)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS group_offsets_topic ON group_offsets (topic_id);
-- Consumer groups (engine.client.groups, engine.wire): the target assignment of the current
-- generation, the live members, and which member owns (reads) each partition right now.
CREATE TABLE IF NOT EXISTS groups (
    group_id   TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    protocol   TEXT NOT NULL,
    assignment TEXT NOT NULL,          -- JSON {member_id: [[topic_id, partition], ...]}
    basis      TEXT NOT NULL,          -- JSON of what it was computed from
    updated_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS group_members (
    group_id     TEXT NOT NULL,
    member_id    TEXT NOT NULL,
    client_id    TEXT NOT NULL,
    host         TEXT NOT NULL,
    strategy     TEXT NOT NULL,
    topics       TEXT NOT NULL,        -- JSON list of subscribed topic ids
    session_ms   INTEGER NOT NULL,
    heartbeat_ms INTEGER NOT NULL,
    PRIMARY KEY (group_id, member_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_owners (
    group_id  TEXT NOT NULL,
    topic_id  INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    member_id TEXT NOT NULL,
    PRIMARY KEY (group_id, topic_id, partition)
) WITHOUT ROWID;
-- Who created each group (the principal that first joined it or committed into it): the
-- `u:<creator>` of its permissions (engine.groups.perms). A group from before this table
-- has no row until someone who may consume all its topics joins or commits (docs/WIRE.md).
CREATE TABLE IF NOT EXISTS group_creators (
    group_id   TEXT PRIMARY KEY,
    creator    TEXT NOT NULL,
    created_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS group_creators_by_creator ON group_creators (creator);
-- The groups' permission rules: an ACE for one permission (join_perm, ...) of one group id
-- or of every group id starting with a prefix.
CREATE TABLE IF NOT EXISTS group_perms (
    pattern TEXT NOT NULL,
    prefix  INTEGER NOT NULL,          -- 1: `pattern` is a prefix of group ids
    perm    TEXT NOT NULL,
    ace     TEXT NOT NULL,
    PRIMARY KEY (pattern, prefix, perm)
) WITHOUT ROWID;
"""

# The one upsert of a committed offset. `merge_offsets` adds the WHERE that keeps a later
# commit (copies going round a replication cycle settle); every other writer replaces.
_UPSERT_OFFSET = (
    'INSERT INTO group_offsets (group_id, topic_id, partition, "offset", metadata, commit_ms) '
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (group_id, topic_id, partition) DO UPDATE SET "
    '"offset" = excluded."offset", metadata = excluded.metadata, commit_ms = excluded.commit_ms'
)
_ONLY_LATER = " WHERE excluded.commit_ms > group_offsets.commit_ms"
_UPSERT_OWNER = (
    "INSERT INTO group_owners (group_id, topic_id, partition, member_id) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (group_id, topic_id, partition) DO UPDATE SET member_id = excluded.member_id"
)
_LIVE = "heartbeat_ms + session_ms >= ?"  # a member is live until its session ends


def _chunks(items: list[int], size: int = 500) -> list[list[int]]:
    """Pieces small enough for one statement's host parameters."""
    return [items[i : i + size] for i in range(0, len(items), size)]


class GroupStore:
    """The group tables of one catalog (`catalog.groups`): a member is live while
    `heartbeat_ms + session_ms >= now`, a partition has at most one owner, and a committed
    offset is written by one statement (`_UPSERT_OFFSET`); any thread may call it (each uses
    its own connection), and the methods that take `now` only inside `write()`."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._catalog.conn

    def write(self) -> AbstractContextManager[None]:
        """A write transaction (BEGIN IMMEDIATE); the methods that take `now` run in one."""
        return self._catalog.write()

    # --- members --------------------------------------------------------------------------

    def register(
        self,
        group_id: str,
        member_id: str,
        *,
        client_id: str,
        host: str,
        strategy: str,
        topics: list[int],
        session_ms: int,
        now: int,
    ) -> None:
        """Insert the member, or update its subscription and heartbeat."""
        self._conn.execute(
            "INSERT INTO group_members (group_id, member_id, client_id, host, strategy, "
            "topics, session_ms, heartbeat_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (group_id, member_id) DO UPDATE SET topics = excluded.topics, "
            "heartbeat_ms = excluded.heartbeat_ms",
            (group_id, member_id, client_id, host, strategy, json.dumps(topics), session_ms, now),
        )

    def touch(self, group_id: str, member_id: str, now: int) -> bool:
        """Record a heartbeat; False when the member is gone (expired by the others)."""
        cur = self._conn.execute(
            "UPDATE group_members SET heartbeat_ms = ? WHERE group_id = ? AND member_id = ?",
            (now, group_id, member_id),
        )
        return cur.rowcount > 0

    def remove(self, group_id: str, member_id: str) -> None:
        """Remove a member and free its partitions."""
        conn = self._conn
        conn.execute(
            "DELETE FROM group_owners WHERE group_id = ? AND member_id = ?", (group_id, member_id)
        )
        conn.execute(
            "DELETE FROM group_members WHERE group_id = ? AND member_id = ?",
            (group_id, member_id),
        )

    def expire(self, group_id: str, now: int) -> list[str]:
        """Remove the members whose session timed out by `now`; returns their ids."""
        dead = [
            m
            for (m,) in self._conn.execute(
                "SELECT member_id FROM group_members WHERE group_id = ? AND heartbeat_ms + "
                "session_ms < ?",
                (group_id, now),
            )
        ]
        for member in dead:
            self.remove(group_id, member)
        return dead

    def members(self, group_id: str) -> dict[str, list[int]]:
        """Every member with the topic ids it subscribes to."""
        return {
            m: json.loads(t)
            for m, t in self._conn.execute(
                "SELECT member_id, topics FROM group_members WHERE group_id = ?", (group_id,)
            )
        }

    def strategies(self, group_id: str) -> set[str]:
        """The assignment strategies the members ask for."""
        return {
            s
            for (s,) in self._conn.execute(
                "SELECT DISTINCT strategy FROM group_members WHERE group_id = ?", (group_id,)
            )
        }

    def partition_counts(self, topic_ids: Iterable[int]) -> dict[int, int]:
        """{topic id: partition count} of those of `topic_ids` that exist."""
        conn = self._conn
        counts = {}
        for topic_id in topic_ids:
            row = conn.execute("SELECT partitions FROM topics WHERE id = ?", (topic_id,)).fetchone()
            if row is not None:
                counts[topic_id] = row[0]
        return counts

    def live_members(self, group_id: str, now: int) -> list[tuple[str, str, str, int]]:
        """Live members: (member_id, client_id, host, heartbeat_ms), by member id."""
        return self._catalog.query(
            "SELECT member_id, client_id, host, heartbeat_ms FROM group_members "
            f"WHERE group_id = ? AND {_LIVE} ORDER BY member_id",
            (group_id, now),
        )

    def live_topics(self, group_id: str, now: int) -> set[int]:
        """The topic ids the group's live members read (subscribed, or assigned for a
        wire listener's members)."""
        return {
            t
            for (topics,) in self._conn.execute(
                f"SELECT topics FROM group_members WHERE group_id = ? AND {_LIVE}",
                (group_id, now),
            )
            for t in json.loads(topics)
        }

    def live_kinds(self, group_id: str, now: int) -> set[str]:
        """The kinds ("engine", "wire") of the group's live members."""
        return {
            "wire" if wire else "engine"
            for (wire,) in self._conn.execute(
                "SELECT DISTINCT substr(strategy, 1, ?) = ? FROM group_members "
                f"WHERE group_id = ? AND {_LIVE}",
                (len(WIRE_PREFIX), WIRE_PREFIX, group_id, now),
            )
        }

    # --- the assignment -------------------------------------------------------------------

    def basis(self, group_id: str) -> tuple[int, str] | None:
        """(generation, basis) of the current assignment, or None before the first."""
        row = self._conn.execute(
            "SELECT generation, basis FROM groups WHERE group_id = ?", (group_id,)
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def set_assignment(
        self,
        group_id: str,
        generation: int,
        protocol: str,
        plan: dict[str, list[TopicPart]],
        basis: str,
        now: int,
    ) -> None:
        self._conn.execute(
            "INSERT INTO groups (group_id, generation, protocol, assignment, basis, updated_ms) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (group_id) DO UPDATE SET "
            "generation = excluded.generation, protocol = excluded.protocol, "
            "assignment = excluded.assignment, basis = excluded.basis, "
            "updated_ms = excluded.updated_ms",
            (group_id, generation, protocol, json.dumps(plan), basis, now),
        )

    def assignment(self, group_id: str) -> tuple[int, dict[str, list[TopicPart]]] | None:
        """(generation, {member id: [(topic id, partition)]}), or None before the first."""
        found = self.state(group_id)
        if found is None:
            return None
        return found[0], found[2]

    def state(self, group_id: str) -> tuple[int, str, dict[str, list[TopicPart]]] | None:
        """(generation, protocol, {member id: [(topic id, partition)]}) of a group that has
        had members, else None."""
        rows = self._catalog.query(
            "SELECT generation, protocol, assignment FROM groups WHERE group_id = ?", (group_id,)
        )
        if not rows:
            return None
        plan = {m: [(t, p) for t, p in parts] for m, parts in json.loads(rows[0][2]).items()}
        return rows[0][0], rows[0][1], plan

    def generation(self, group_id: str) -> int:
        """The group's current assignment generation; -1 before its first."""
        rows = self._catalog.query("SELECT generation FROM groups WHERE group_id = ?", (group_id,))
        return rows[0][0] if rows else -1

    # --- owners ---------------------------------------------------------------------------

    def owners(self, group_id: str) -> dict[TopicPart, str]:
        """{(topic id, partition): the member reading it now}."""
        return {
            (t, p): m
            for t, p, m in self._catalog.query(
                "SELECT topic_id, partition, member_id FROM group_owners WHERE group_id = ?",
                (group_id,),
            )
        }

    def release(self, group_id: str, member_id: str, parts: list[TopicPart]) -> None:
        """Give up these partitions (those the member owns)."""
        self._conn.executemany(
            "DELETE FROM group_owners WHERE group_id = ? AND topic_id = ? AND partition = ? "
            "AND member_id = ?",
            [(group_id, t, p, member_id) for t, p in parts],
        )

    def claim(self, group_id: str, member_id: str, parts: list[TopicPart]) -> set[TopicPart]:
        """Take the partitions of `parts` that no live member owns; returns those taken."""
        conn = self._conn
        live = {
            m
            for (m,) in conn.execute(
                "SELECT member_id FROM group_members WHERE group_id = ?", (group_id,)
            )
        }
        taken: set[TopicPart] = set()
        for topic_id, partition in parts:
            row = conn.execute(
                "SELECT member_id FROM group_owners WHERE group_id = ? AND topic_id = ? "
                "AND partition = ?",
                (group_id, topic_id, partition),
            ).fetchone()
            if row is not None and row[0] != member_id and row[0] in live:
                continue  # its owner has not released it yet
            conn.execute(_UPSERT_OWNER, (group_id, topic_id, partition, member_id))
            taken.add((topic_id, partition))
        return taken

    # --- members published by a Kafka wire listener (engine.wire) -------------------------

    def replace_wire(
        self,
        group_id: str,
        members: list[tuple[str, str, str, int, list[TopicPart]]],
        *,
        protocol: str,
        generation: int,
        session_ms: int,
        now: int,
    ) -> None:
        """Replace the group's wire members (member id, client id, host, heartbeat,
        assigned partitions) with `members`: their rows, the partitions they own, and the
        group's assignment. An empty `members` withdraws them (the assignment becomes
        empty if there were any)."""
        conn = self._conn
        old = [
            m
            for (m,) in conn.execute(
                "SELECT member_id FROM group_members WHERE group_id = ? "
                "AND substr(strategy, 1, ?) = ?",
                (group_id, len(WIRE_PREFIX), WIRE_PREFIX),
            )
        ]
        for member_id in old:
            self.remove(group_id, member_id)
        if not members and not old:
            return  # nothing was published: leave the group as it is
        strategy = WIRE_PREFIX + protocol
        for member_id, client_id, host, heartbeat_ms, parts in members:
            conn.execute(
                "INSERT INTO group_members (group_id, member_id, client_id, host, strategy, "
                "topics, session_ms, heartbeat_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (group_id, member_id) DO UPDATE SET client_id = excluded.client_id, "
                "host = excluded.host, strategy = excluded.strategy, topics = excluded.topics, "
                "session_ms = excluded.session_ms, heartbeat_ms = excluded.heartbeat_ms",
                (
                    group_id,
                    member_id,
                    client_id,
                    host,
                    strategy,
                    json.dumps(sorted({t for t, _ in parts})),
                    session_ms,
                    heartbeat_ms,
                ),
            )
            conn.executemany(_UPSERT_OWNER, [(group_id, t, p, member_id) for t, p in parts])
        plan = {m[0]: sorted(m[4]) for m in members}
        # a basis no engine member computes: the engine recomputes once the group is its own
        self.set_assignment(group_id, generation, protocol, plan, '"wire"', now)

    # --- committed offsets ----------------------------------------------------------------

    def commit(self, group_id: str, commits: Sequence[Commit], now: int) -> None:
        """Store committed offsets (topic id, partition, offset, metadata), in the caller's
        transaction."""
        if commits:
            self._conn.executemany(
                _UPSERT_OFFSET, [(group_id, t, p, o, m, now) for t, p, o, m in commits]
            )

    def commit_offsets(self, group_id: str, commits: Sequence[Commit], now: int) -> None:
        """`commit` in a transaction of its own."""
        with self.write():
            self.commit(group_id, commits, now)

    def committed(self, group_id: str, topic_id: int, partition: int) -> tuple[int, str] | None:
        """(offset, metadata) the group committed in one partition, or None."""
        rows = self._catalog.query(
            'SELECT "offset", metadata FROM group_offsets '
            "WHERE group_id = ? AND topic_id = ? AND partition = ?",
            (group_id, topic_id, partition),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def committed_offsets(self, group_id: str) -> list[Commit]:
        """(topic_id, partition, offset, metadata) committed by the group, in order."""
        return self._catalog.query(
            'SELECT topic_id, partition, "offset", metadata FROM group_offsets '
            "WHERE group_id = ? ORDER BY topic_id, partition",
            (group_id,),
        )

    def offsets(self, group_id: str) -> dict[TopicPart, int]:
        """{(topic id, partition): committed offset} of the group, read in the caller's
        transaction (so a reset compares and writes what nobody changed in between)."""
        return {
            (t, p): o
            for t, p, o in self._conn.execute(
                'SELECT topic_id, partition, "offset" FROM group_offsets WHERE group_id = ?',
                (group_id,),
            )
        }

    def all_offsets(self, topic_ids: list[int]) -> list[OffsetRow]:
        """(group_id, topic_id, partition, offset, metadata, commit_ms) of these topics."""
        rows: list[OffsetRow] = []
        for chunk in _chunks(topic_ids):
            marks = ",".join("?" * len(chunk))
            rows += self._catalog.query(
                'SELECT group_id, topic_id, partition, "offset", metadata, commit_ms '
                f"FROM group_offsets WHERE topic_id IN ({marks})",  # noqa: S608
                tuple(chunk),
            )
        return rows

    def merge_offsets(self, rows: Sequence[OffsetRow], now: int) -> int:
        """Committed offsets copied from another cluster: (group_id, topic_id, partition,
        offset, metadata, commit_ms). A row replaces the one here only if it was committed
        later (so copies going round a cycle settle), and never for a group with live
        members here (they commit their own). Returns the rows changed."""
        changed = 0
        with self.write():
            conn = self._conn
            live = {
                g
                for (g,) in conn.execute(
                    f"SELECT DISTINCT group_id FROM group_members WHERE {_LIVE}", (now,)
                )
            }
            for row in rows:
                if row[0] not in live:
                    changed += conn.execute(_UPSERT_OFFSET + _ONLY_LATER, row).rowcount
        return changed

    # --- creators and permission rules (engine.groups.perms) -----------------------------

    def creator(self, group_id: str) -> str | None:
        """The user who created the group, or None (new, or from before creators)."""
        rows = self._catalog.query(
            "SELECT creator FROM group_creators WHERE group_id = ?", (group_id,)
        )
        return rows[0][0] if rows else None

    def created_by(self, user: str) -> int:
        """How many groups `user` created (and that still exist)."""
        rows = self._catalog.query("SELECT count(*) FROM group_creators WHERE creator = ?", (user,))
        return int(rows[0][0])

    def set_creator(self, group_id: str, user: str, now: int) -> None:
        """Record the group's creator unless it has one, in the caller's transaction."""
        self._conn.execute(
            "INSERT INTO group_creators (group_id, creator, created_ms) VALUES (?, ?, ?) "
            "ON CONFLICT (group_id) DO NOTHING",
            (group_id, user, now),
        )

    def perm_rules(self, group_id: str | None = None) -> list[tuple[str, bool, str, str]]:
        """(pattern, prefix, perm, ace) of the rules that apply to `group_id` (None: every
        rule), by pattern."""
        if group_id is None:
            rows = self._catalog.query(
                "SELECT pattern, prefix, perm, ace FROM group_perms ORDER BY pattern, prefix, perm"
            )
        else:
            rows = self._catalog.query(
                "SELECT pattern, prefix, perm, ace FROM group_perms WHERE (prefix = 0 AND "
                "pattern = ?1) OR (prefix = 1 AND substr(?1, 1, length(pattern)) = pattern) "
                "ORDER BY pattern, prefix, perm",
                (group_id,),
            )
        return [(p, bool(x), perm, ace) for p, x, perm, ace in rows]

    def set_perm_rules(self, pattern: str, prefix: bool, aces: dict[str, str | None]) -> None:
        """Set (an ACE) or remove (None) the rules of `pattern` for each perm of `aces`."""
        with self.write():
            for perm, ace in aces.items():
                if ace is None:
                    self._conn.execute(
                        "DELETE FROM group_perms WHERE pattern = ? AND prefix = ? AND perm = ?",
                        (pattern, int(prefix), perm),
                    )
                else:
                    self._conn.execute(
                        "INSERT INTO group_perms (pattern, prefix, perm, ace) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (pattern, prefix, perm) DO UPDATE SET ace = excluded.ace",
                        (pattern, int(prefix), perm, ace),
                    )

    # --- whole groups ---------------------------------------------------------------------

    def group_ids(self) -> list[str]:
        """Every group with members, an assignment, committed offsets or a creator, by id."""
        return [
            g
            for (g,) in self._catalog.query(
                "SELECT group_id FROM group_members UNION SELECT group_id FROM groups "
                "UNION SELECT group_id FROM group_offsets "
                "UNION SELECT group_id FROM group_creators ORDER BY 1"
            )
        ]

    def delete_offsets(self, group_id: str, parts: Sequence[TopicPart]) -> int:
        """Remove the group's committed offsets of these partitions, in the caller's
        transaction; returns how many there were."""
        return sum(
            self._conn.execute(
                "DELETE FROM group_offsets WHERE group_id = ? AND topic_id = ? AND partition = ?",
                (group_id, topic_id, partition),
            ).rowcount
            for topic_id, partition in parts
        )

    def delete_group(self, group_id: str) -> int:
        """Remove every row of the group (offsets, assignment, owners, expired members), in
        the caller's transaction; returns how many committed offsets went."""
        conn = self._conn
        gone = conn.execute("DELETE FROM group_offsets WHERE group_id = ?", (group_id,)).rowcount
        # its creator goes too (the id may be created again); rules by id or prefix stay,
        # as Kafka's ACLs outlive a group
        for table in ("group_owners", "group_members", "groups", "group_creators"):
            conn.execute(f"DELETE FROM {table} WHERE group_id = ?", (group_id,))  # noqa: S608
        return gone

    def forget_topics(self, where: str, args: tuple[Any, ...]) -> None:
        """Drop the committed offsets and owners of the topics whose id matches `where`
        (an SQL condition on `topic_id` from the catalog, e.g. a deleted topic's or a
        deleted stream's), in the caller's transaction."""
        for table in ("group_offsets", "group_owners"):
            self._conn.execute(f"DELETE FROM {table} WHERE {where}", args)  # noqa: S608
