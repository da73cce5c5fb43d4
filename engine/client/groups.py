"""Consumer groups across processes, coordinated through the catalog (no broker).

The catalog holds, per group: the live members with their subscriptions and last
heartbeat (`group_members`), the target assignment of the current generation (`groups`),
and which member owns each partition right now (`group_owners`). Any member may compute
the assignment, inside a catalog write transaction, whenever what it depends on changed
(a member joined, left or died, a subscription or a partition count changed); the
computation is deterministic, so it does not matter who does it.

No partition is ever read by two members at once: a member starts reading a partition
only after it has claimed it in `group_owners`, which succeeds only if nobody else owns
it (or its owner left the group), and it releases a partition (committing its position
in the same transaction when auto-commit is on) before it stops reading it. A killed
member's partitions are freed when its heartbeat is older than its session timeout.

Heartbeats come from a thread per member; the consumer applies assignment changes in
`poll()` (its own thread), where it also calls the rebalance listener, as Kafka does.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.clock import SYSTEM_CLOCK, Clock
from engine.errors import IllegalState
from engine.groups.assignors import STRATEGIES, assign, strategy_name
from engine.records import TopicPartition
from engine.storage.groups import TopicPart

if TYPE_CHECKING:
    from engine.storage.groups import GroupStore

log = logging.getLogger(__name__)

# Kept for one release at this path: the strategies and their names are engine.groups'.
__all__ = ["STRATEGIES", "GroupMember", "assign", "strategy_name", "topic_partition"]


# --- one member -------------------------------------------------------------------------


class GroupMember:
    """This consumer's membership of a group. The consumer's thread calls `sync`, `release`
    and `leave`; the heartbeat thread calls `heartbeat`. Each call is one short catalog
    transaction (engine.storage.groups holds its statements). Time comes from `clock`
    (the cluster's), so a test moves it instead of waiting out a session."""

    def __init__(
        self,
        store: GroupStore,
        group_id: str,
        *,
        client_id: str,
        strategy: str,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        max_poll_interval_ms: int,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._store = store
        self._clock = clock
        self.group_id = group_id
        self.client_id = client_id
        self.member_id = f"{client_id}-{uuid.uuid4()}"
        self.host = f"{socket.gethostname()}:{os.getpid()}"
        self.strategy = strategy
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.generation = -1
        self.topics: list[int] = []
        self.last_poll = clock.monotonic()
        self._changed = threading.Event()  # the heartbeat saw a new generation
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- joining and leaving --------------------------------------------------------------

    def join(self, topic_ids: Iterable[int]) -> None:
        """Enter the group (or change the subscription) and start heartbeating."""
        self.topics = sorted(set(topic_ids))
        with self._store.write():
            self._refuse_wire_group()
            self._register()
            self._rebalance_if_needed()
        self._start_beating()

    def _start_beating(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._beat, name="plet-group-heartbeat", daemon=True
            )
            self._thread.start()

    def leave(self, commits: list[tuple[int, int, int, str]]) -> None:
        """Leave at once: commit `commits`, free the partitions, reassign the rest."""
        self._stop.set()
        with self._store.write():
            self._store.commit(self.group_id, commits, self._clock.now_ms())
            self._store.remove(self.group_id, self.member_id)
            self._rebalance_if_needed()

    def stop(self) -> None:
        self._stop.set()

    def polled(self) -> None:
        """The application polled: its member is alive (max_poll_interval_ms)."""
        self.last_poll = self._clock.monotonic()

    # --- the consumer's thread ------------------------------------------------------------

    def changed(self) -> bool:
        """True when the heartbeat saw a new generation since the last `sync`."""
        return self._changed.is_set()

    def target(self) -> set[TopicPart]:
        """This member's share in the current assignment (rebalancing first if needed)."""
        self._changed.clear()
        with self._store.write():
            self._refuse_wire_group()
            self._touch()
            self._rebalance_if_needed()
            mine = set(self._my_assignment())
        self._start_beating()  # a join that a wire group refused did not start it
        return mine

    def release(self, parts: Iterable[TopicPart], commits: list[tuple[int, int, int, str]]) -> None:
        """Commit `commits` and give up `parts`, in one transaction."""
        parts = list(parts)
        with self._store.write():
            self._store.commit(self.group_id, commits, self._clock.now_ms())
            self._store.release(self.group_id, self.member_id, parts)

    def claim(self, parts: Iterable[TopicPart]) -> set[TopicPart]:
        """Take the partitions of `parts` that nobody (alive) owns; returns those taken."""
        parts = list(parts)
        if not parts:
            return set()
        with self._store.write():
            return self._store.claim(self.group_id, self.member_id, parts)

    # --- heartbeats -----------------------------------------------------------------------

    def _beat(self) -> None:
        interval = self.heartbeat_interval_ms / 1000
        while not self._stop.wait(interval):
            if (self._clock.monotonic() - self.last_poll) * 1000 > self.max_poll_interval_ms:
                # The application stopped polling: stop heartbeating so that the group
                # moves this member's partitions elsewhere after the session timeout.
                continue
            try:
                self.heartbeat()
            except Exception:  # a locked catalog, a closed cluster: try again next beat
                log.debug("heartbeat of %s failed", self.member_id, exc_info=True)

    def heartbeat(self) -> None:
        with self._store.write():
            self._touch()
            generation = self._rebalance_if_needed()
        if generation != self.generation:
            self._changed.set()

    def _touch(self) -> None:
        if not self._store.touch(self.group_id, self.member_id, self._clock.now_ms()):
            self._register()  # expired by the others (a long pause): join again

    def _refuse_wire_group(self) -> None:
        """Kafka clients of a wire listener hold the group (their own assignors decide
        who reads what): joining would assign partitions they never give up."""
        if "wire" in self._store.live_kinds(self.group_id, self._clock.now_ms()):
            raise IllegalState(
                f"group {self.group_id!r} has live Kafka clients (through `plet serve`); "
                "an engine consumer cannot join it until they leave"
            )

    def _register(self) -> None:
        """Insert this member (or update its subscription and heartbeat); in a write
        transaction."""
        self._store.register(
            self.group_id,
            self.member_id,
            client_id=self.client_id,
            host=self.host,
            strategy=self.strategy,
            topics=self.topics,
            session_ms=self.session_timeout_ms,
            now=self._clock.now_ms(),
        )

    # --- the assignment (inside a write transaction) --------------------------------------

    def _rebalance_if_needed(self) -> int:
        """Expire dead members; recompute the assignment if its basis changed. Returns the
        generation."""
        store = self._store
        now = self._clock.now_ms()
        store.expire(self.group_id, now)
        current = store.basis(self.group_id)
        if "wire" in store.live_kinds(self.group_id, now):
            # the assignment is the wire clients' (a member raced them in): leave it alone
            return current[0] if current else -1
        members = store.members(self.group_id)
        strategies = store.strategies(self.group_id)
        # The same choice whoever computes it: members that disagree must not take turns
        # rewriting the assignment. One strategy for all when they agree, else the first
        # by name.
        strategy = min(strategies) if strategies else self.strategy
        topic_ids = sorted({t for topics in members.values() for t in topics})
        partitions = store.partition_counts(topic_ids)
        basis = json.dumps([strategy, sorted(members.items()), sorted(partitions.items())])
        if current is not None and current[1] == basis:
            return current[0]
        generation = (current[0] if current else 0) + 1
        plan = assign(strategy, members, partitions)
        store.set_assignment(self.group_id, generation, strategy, plan, basis, now)
        return generation

    def _my_assignment(self) -> list[TopicPart]:
        found = self._store.assignment(self.group_id)
        if found is None:
            return []
        self.generation, plan = found
        return list(plan.get(self.member_id, []))


def topic_partition(names: dict[int, str], part: TopicPart) -> TopicPartition:
    return TopicPartition(names[part[0]], part[1])
