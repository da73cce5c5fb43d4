"""Consumer groups' one owner: administration (`admin`), the reset and partition grammar
(`grammar`), the JSON of a group (`as_json`) and the assignment strategies with their
names (`assignors`). Every frontend (CLI, web form, JSON API, terminal console, facade,
wire listener) calls these; the SQL lives in engine.storage.groups."""

from engine.groups.admin import GroupAdmin
from engine.groups.as_json import group_json, group_summary, permissions_json, plan_json
from engine.groups.assignors import STRATEGIES, assign, strategy_name
from engine.groups.grammar import (
    TARGETS,
    ResetTarget,
    check_partitions,
    form_target,
    parse_partitions,
    parse_target,
    reset_target,
)
from engine.groups.perms import GroupAccess, GroupPermissions, GroupRule

__all__ = [
    "STRATEGIES",
    "TARGETS",
    "GroupAccess",
    "GroupAdmin",
    "GroupPermissions",
    "GroupRule",
    "ResetTarget",
    "assign",
    "check_partitions",
    "form_target",
    "group_json",
    "group_summary",
    "parse_partitions",
    "parse_target",
    "permissions_json",
    "plan_json",
    "reset_target",
    "strategy_name",
]
