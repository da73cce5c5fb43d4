"""The one JSON shape of a consumer group and of an offset-reset plan, for every frontend
that prints or serves them (`plet group ... --json`, the JSON API; docs/API.md documents
it): a member's assignment is a list of `{"topic", "partition"}` objects."""

from __future__ import annotations

from typing import Any

from engine.groups.perms import GroupPermissions
from engine.records import GroupInfo, OffsetResetPlan


def _head(info: GroupInfo) -> dict[str, Any]:
    return {
        "group_id": info.group_id,
        "state": info.state,
        "generation": info.generation,
        "protocol": info.protocol,
    }


def group_summary(info: GroupInfo) -> dict[str, Any]:
    """A group in a list: its state, generation, strategy, counts and total lag."""
    return {
        **_head(info),
        "members": len(info.members),
        "partitions": len(info.partitions),
        "lag": info.lag,
    }


def group_json(info: GroupInfo) -> dict[str, Any]:
    """A group with its members (and their assignment) and, per partition, the committed
    offset, log end and lag."""
    return {
        **_head(info),
        "lag": info.lag,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "last_heartbeat_ms": m.last_heartbeat_ms,
                "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
            }
            for m in info.members
        ],
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "committed": p.committed,
                "log_end_offset": p.log_end_offset,
                "lag": p.lag,
                "metadata": p.metadata,
            }
            for p in info.partitions
        ],
    }


def plan_json(plan: OffsetResetPlan) -> dict[str, Any]:
    """One partition of an offset-reset plan: the offset now and after, the log bounds and
    the lag before and after."""
    return {
        "partition": plan.partition,
        "current": plan.current,
        "new": plan.new,
        "log_start_offset": plan.log_start_offset,
        "log_end_offset": plan.log_end_offset,
        "lag_before": plan.lag_before,
        "lag_after": plan.lag_after,
    }


def permissions_json(perms: GroupPermissions) -> dict[str, Any]:
    """A group's permissions: its creator, each ACE with where it comes from, the
    permissions the asking user has, and whether they may change the group's rules."""
    return {
        "creator": perms.creator,
        "aces": dict(perms.aces),
        "sources": dict(perms.sources),
        "allowed": sorted(perms.allowed),
        "editable": perms.editable,
    }
