"""Consumer group membership in the catalog: members, partition owners and assignments.

The SQL of engine.client.groups lives here; the protocol (who computes the assignment,
when a member may read a partition) stays there. The statements below run inside a
transaction the caller opens with `write()`, so that a member's steps (expire the dead,
register, recompute, claim) commit together.

Tables: `group_members` (live members, their subscription as a JSON list of topic ids,
their last heartbeat), `groups` (the current generation's assignment and the basis it was
computed from), `group_owners` (who reads each partition right now) and `group_offsets`.
A Kafka wire listener writes the same tables for its groups (`replace_wire`), its members
marked by their strategy (`WIRE_PREFIX`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.storage.catalog import Catalog

TopicPart = tuple[int, int]  # (topic_id, partition)
# The `strategy` of the members a Kafka wire listener publishes ("wire:" + the protocol its
# clients chose): how engine consumers and the listener tell each other's members apart.
WIRE_PREFIX = "wire:"


class Memberships:
    """The group tables of one catalog (`catalog.memberships`)."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def write(self) -> AbstractContextManager[None]:
        """A write transaction (BEGIN IMMEDIATE); the methods below run inside one."""
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
        self._catalog.conn.execute(
            "INSERT INTO group_members (group_id, member_id, client_id, host, strategy, "
            "topics, session_ms, heartbeat_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (group_id, member_id) DO UPDATE SET topics = excluded.topics, "
            "heartbeat_ms = excluded.heartbeat_ms",
            (group_id, member_id, client_id, host, strategy, json.dumps(topics), session_ms, now),
        )

    def touch(self, group_id: str, member_id: str, now: int) -> bool:
        """Record a heartbeat; False when the member is gone (expired by the others)."""
        cur = self._catalog.conn.execute(
            "UPDATE group_members SET heartbeat_ms = ? WHERE group_id = ? AND member_id = ?",
            (now, group_id, member_id),
        )
        return cur.rowcount > 0

    def remove(self, group_id: str, member_id: str) -> None:
        """Remove a member and free its partitions."""
        conn = self._catalog.conn
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
            for (m,) in self._catalog.conn.execute(
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
            for m, t in self._catalog.conn.execute(
                "SELECT member_id, topics FROM group_members WHERE group_id = ?", (group_id,)
            )
        }

    def strategies(self, group_id: str) -> set[str]:
        """The assignment strategies the members ask for."""
        return {
            s
            for (s,) in self._catalog.conn.execute(
                "SELECT DISTINCT strategy FROM group_members WHERE group_id = ?", (group_id,)
            )
        }

    def partition_counts(self, topic_ids: Iterable[int]) -> dict[int, int]:
        """{topic id: partition count} of those of `topic_ids` that exist."""
        conn = self._catalog.conn
        counts = {}
        for topic_id in topic_ids:
            row = conn.execute("SELECT partitions FROM topics WHERE id = ?", (topic_id,)).fetchone()
            if row is not None:
                counts[topic_id] = row[0]
        return counts

    # --- the assignment -------------------------------------------------------------------

    def basis(self, group_id: str) -> tuple[int, str] | None:
        """(generation, basis) of the current assignment, or None before the first."""
        return self._catalog.conn.execute(
            "SELECT generation, basis FROM groups WHERE group_id = ?", (group_id,)
        ).fetchone()

    def set_assignment(
        self,
        group_id: str,
        generation: int,
        protocol: str,
        plan: dict[str, list[TopicPart]],
        basis: str,
        now: int,
    ) -> None:
        self._catalog.conn.execute(
            "INSERT INTO groups (group_id, generation, protocol, assignment, basis, updated_ms) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (group_id) DO UPDATE SET "
            "generation = excluded.generation, protocol = excluded.protocol, "
            "assignment = excluded.assignment, basis = excluded.basis, "
            "updated_ms = excluded.updated_ms",
            (group_id, generation, protocol, json.dumps(plan), basis, now),
        )

    def assignment(self, group_id: str) -> tuple[int, dict[str, list[TopicPart]]] | None:
        """(generation, {member id: [(topic id, partition)]}), or None before the first."""
        row = self._catalog.conn.execute(
            "SELECT generation, assignment FROM groups WHERE group_id = ?", (group_id,)
        ).fetchone()
        if row is None:
            return None
        plan = {m: [(t, p) for t, p in parts] for m, parts in json.loads(row[1]).items()}
        return row[0], plan

    # --- owners and offsets ---------------------------------------------------------------

    def commit(self, group_id: str, commits: list[tuple[int, int, int, str]], now: int) -> None:
        """Store committed offsets: (topic id, partition, offset, metadata)."""
        if commits:
            self._catalog.conn.executemany(
                'INSERT INTO group_offsets (group_id, topic_id, partition, "offset", metadata, '
                "commit_ms) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (group_id, topic_id, partition) "
                'DO UPDATE SET "offset" = excluded."offset", metadata = excluded.metadata, '
                "commit_ms = excluded.commit_ms",
                [(group_id, t, p, o, m, now) for t, p, o, m in commits],
            )

    def release(self, group_id: str, member_id: str, parts: list[TopicPart]) -> None:
        """Give up these partitions (those the member owns)."""
        self._catalog.conn.executemany(
            "DELETE FROM group_owners WHERE group_id = ? AND topic_id = ? AND partition = ? "
            "AND member_id = ?",
            [(group_id, t, p, member_id) for t, p in parts],
        )

    def claim(self, group_id: str, member_id: str, parts: list[TopicPart]) -> set[TopicPart]:
        """Take the partitions of `parts` that no live member owns; returns those taken."""
        conn = self._catalog.conn
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
            conn.execute(
                "INSERT INTO group_owners (group_id, topic_id, partition, member_id) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (group_id, topic_id, partition) "
                "DO UPDATE SET member_id = excluded.member_id",
                (group_id, topic_id, partition, member_id),
            )
            taken.add((topic_id, partition))
        return taken

    # --- members published by a Kafka wire listener (engine.wire) -------------------------

    def live_kinds(self, group_id: str, now: int) -> set[str]:
        """The kinds ("engine", "wire") of the group's live members."""
        return {
            "wire" if wire else "engine"
            for (wire,) in self._catalog.conn.execute(
                "SELECT DISTINCT substr(strategy, 1, ?) = ? FROM group_members "
                "WHERE group_id = ? AND heartbeat_ms + session_ms >= ?",
                (len(WIRE_PREFIX), WIRE_PREFIX, group_id, now),
            )
        }

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
        conn = self._catalog.conn
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
            conn.executemany(
                "INSERT INTO group_owners (group_id, topic_id, partition, member_id) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (group_id, topic_id, partition) "
                "DO UPDATE SET member_id = excluded.member_id",
                [(group_id, t, p, member_id) for t, p in parts],
            )
        plan = {m[0]: sorted(m[4]) for m in members}
        # a basis no engine member computes: the engine recomputes once the group is its own
        self.set_assignment(group_id, generation, protocol, plan, '"wire"', now)

    # --- resetting and deleting a group (Cluster.apply_offset_reset, delete_group) --------

    def offsets(self, group_id: str) -> dict[TopicPart, int]:
        """{(topic id, partition): committed offset} of the group, read in the caller's
        transaction (so a reset compares and writes what nobody changed in between)."""
        return {
            (t, p): o
            for t, p, o in self._catalog.conn.execute(
                'SELECT topic_id, partition, "offset" FROM group_offsets WHERE group_id = ?',
                (group_id,),
            )
        }

    def delete_group(self, group_id: str) -> int:
        """Remove every row of the group (offsets, assignment, owners, expired members);
        returns how many committed offsets went."""
        conn = self._catalog.conn
        gone = conn.execute("DELETE FROM group_offsets WHERE group_id = ?", (group_id,)).rowcount
        for table in ("group_owners", "group_members", "groups"):
            conn.execute(f"DELETE FROM {table} WHERE group_id = ?", (group_id,))  # noqa: S608
        return gone
