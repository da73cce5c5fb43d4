"""A consumer group's states, Kafka's names, shared by both coordinators: the wire
listener's state machine (engine.wire.coordinator) moves through all of them; an engine
group (engine.client.groups, described by engine.groups.admin) is Empty, PreparingRebalance
(an assignment not yet taken up by every member) or Stable."""

from __future__ import annotations

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"


def session_live(last_seen_ms: float, session_ms: float, now_ms: float) -> bool:
    """A member is live until `session_ms` have passed since it was last seen (the rule of
    both coordinators, and of the catalog's `heartbeat_ms + session_ms >= now`)."""
    return last_seen_ms + session_ms >= now_ms
