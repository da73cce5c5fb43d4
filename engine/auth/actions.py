"""What a console may offer its user: every action the consoles show (a button, a form, a
key), whether the user may do it here, and why not, written once for the web console and
the terminal console (docs/WEB.md, "Actions only where allowed").

An action is allowed when the console serves changes (not `plet web --read-only` or
`plet tui --read-only`: reason `READ_ONLY_CONSOLE`), the user is not read-only (their flag:
`effective.READ_ONLY`), and they pass what the engine checks when the action is done: an
ACE policy of the stream (from `effective.stream_permissions`, the evaluation of
`Cluster.effective_permissions`: "needs admin_perm on /apps"), a permission of the
consumer group (`Cluster.group_permissions`), or being a cluster administrator. The engine
checks again when the action is done: this only decides what a console shows.

`Allowed(cluster, read_only=...)` decides for one view of a cluster (`Cluster.as_principal`
for a console's user) and remembers each stream's and group's answer for its life (a web
request, a terminal screen's refresh): `allowed("delete_stream", "/apps")` is a `Verdict`,
true or false, with its `reason`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine import names
from engine.auth import effective
from engine.errors import InvalidArgument, InvalidName, PartitionletError

if TYPE_CHECKING:
    from engine.cluster import Cluster
    from engine.groups.perms import GroupPermissions

__all__ = [
    "ACTIONS",
    "ADMINISTRATORS",
    "READ_ONLY_CONSOLE",
    "Action",
    "Allowed",
    "Verdict",
]

READ_ONLY_CONSOLE = "read-only console"
"""Reason: the console was started with --read-only; it serves no change to anyone."""
ADMINISTRATORS = "needs a cluster administrator"
"""Reason: only a cluster administrator may do it."""

STREAM, GROUP, CLUSTER = "stream", "group", "cluster"


@dataclass(frozen=True)
class Action:
    """One thing a console lets its user do. `scope` says what it is done on: a stream
    (`perm`: the ACE policy the engine checks), a consumer group (`perm`: the group
    permission, or "rules" for its own permission rules) or the cluster (`perm`: "admin"
    for a cluster administrator's, None for whoever may change anything)."""

    name: str
    label: str
    scope: str
    perm: str | None


ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        Action("create_stream", "Create stream", CLUSTER, None),
        Action("edit_stream", "Save policies", STREAM, "admin_perm"),
        Action("delete_stream", "Delete stream", STREAM, "admin_perm"),
        Action("create_topic", "Create topic", STREAM, "topic_perm"),
        Action("edit_topic", "Save topic policies", STREAM, "topic_perm"),
        Action("delete_topic", "Delete topic", STREAM, "topic_perm"),
        Action("delete_records", "Delete records", STREAM, "topic_perm"),
        Action("produce", "Produce", STREAM, "produce_perm"),
        Action("import_messages", "Import messages", STREAM, "produce_perm"),
        Action("register_schema", "Register schema", STREAM, "produce_perm"),
        Action("add_replica", "Add replica", STREAM, "copy_perm"),
        Action("manage_replicas", "Pause, resume or remove replicas", STREAM, "admin_perm"),
        Action("reset_offsets", "Reset offsets", GROUP, "reset_perm"),
        Action("delete_group", "Delete group", GROUP, "delete_perm"),
        Action("edit_group_permissions", "Save permissions", GROUP, "rules"),
        Action("abort_transaction", "Abort transaction", CLUSTER, None),
        Action("start_replay", "Start replay", CLUSTER, None),
        Action("cancel_replay", "Cancel replay", CLUSTER, None),
        Action("add_link", "Add replication link", CLUSTER, None),
        Action("manage_users", "Add, edit or delete users", CLUSTER, "admin"),
        Action("own_account", "Change your password or API tokens", CLUSTER, "self"),
    )
}


@dataclass(frozen=True)
class Verdict:
    """Whether an action is allowed; `reason` says why not ("" when it is)."""

    allowed: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.allowed


_YES = Verdict(True)


class Allowed:
    """What the principal of `cluster` may do, as a console shows it (see the module's
    doc); `read_only` is the console's --read-only. Not thread-safe: one per request or
    per screen refresh."""

    def __init__(self, cluster: Cluster, *, read_only: bool = False) -> None:
        self.cluster = cluster
        self.read_only = bool(read_only)
        self._streams: dict[str, effective.StreamPermissions | None] = {}
        self._groups: dict[str, GroupPermissions | None] = {}

    @property
    def changes(self) -> Verdict:
        """Whether this console and user may change anything at all (the "read-only"
        badge shows when not)."""
        if self.read_only:
            return Verdict(False, READ_ONLY_CONSOLE)
        if self.cluster.principal.read_only:
            return Verdict(False, effective.READ_ONLY)
        return _YES

    def __call__(self, action: str, where: str | None = None) -> Verdict:
        """May the user do `action` (a name of `ACTIONS`) on `where`: a stream path or a
        topic's full name (its stream's ACEs decide) for a stream's action, a group id for
        a group's, nothing for the cluster's."""
        found = ACTIONS.get(action)
        if found is None:
            raise InvalidArgument(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
        if found.perm == "self" and not self.read_only:
            return _YES  # a read-only user keeps their own account (Cluster.set_password)
        changes = self.changes
        if not changes:
            return changes
        if found.scope == STREAM:
            return self._stream(found, where)
        if found.scope == GROUP:
            return self._group(found, where)
        if found.perm == "admin" and not self.cluster.is_administrator:
            return Verdict(False, ADMINISTRATORS)
        return _YES

    def _stream(self, action: Action, where: str | None) -> Verdict:
        if not where:
            raise InvalidArgument(f"{action.name} needs a stream or topic")
        path = where
        if ":" in where:
            try:
                path = names.split_full_name(where)[0]
            except InvalidName:
                return Verdict(False, f"no topic {where}")
        if path not in self._streams:
            try:
                self._streams[path] = effective.stream_permissions(self.cluster, path)
            except PartitionletError:  # gone, or a name no stream has
                self._streams[path] = None
        perms = self._streams[path]
        if perms is None:
            return Verdict(False, f"no stream {path}")
        assert action.perm is not None
        if perms.allowed.get(action.perm, False):
            return _YES
        return Verdict(False, f"needs {action.perm} on {path}")

    def _group(self, action: Action, group_id: str | None) -> Verdict:
        if not group_id:
            raise InvalidArgument(f"{action.name} needs a consumer group")
        if group_id not in self._groups:
            try:
                self._groups[group_id] = self.cluster.group_permissions(group_id)
            except PartitionletError:
                self._groups[group_id] = None
        perms = self._groups[group_id]
        if perms is None:
            return Verdict(False, f"no consumer group {group_id}")
        if action.perm == "rules":
            if perms.editable:
                return _YES
            return Verdict(False, "needs the group's creator or a cluster administrator")
        assert action.perm is not None
        if action.perm in perms.allowed:
            return _YES
        return Verdict(False, f"needs {action.perm} on group {group_id}")
