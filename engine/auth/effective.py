"""Effective permissions: for one console user, what each stream's ACE policies let them
do (`Cluster.effective_permissions`; docs/API.md, "Effective permissions").

A user is evaluated as the web console acts for them: their name, the groups the user
store gives them, and their administrator flag. An administrator passes every ACE (a
super user, Kafka's `super.users`), so every policy of every stream is allowed to them
with the reason `ADMINISTRATOR`; anyone else is allowed what the ACE text says (reason
`ACE`), `u:<creator>` matching when they created the stream. A stored ACE that does not
parse (an old catalog) lets nobody but an administrator through, as `Cluster.authorize`
does (reason `INVALID`). A read-only user (`UserInfo.read_only`) is allowed `READS` alone
(consume_perm, unmask_perm): every other policy guards a change, which the engine refuses
them (reason `READ_ONLY`, whatever the ACE or the admin flag says;
`Cluster.check_may_change`).

Who may ask: a cluster administrator (`Cluster.is_administrator`) about anyone, a user
about themselves; anyone else gets `AccessDenied`, before the name is even looked up, so
the answer tells nothing about which users exist.

Speed: one page of streams is read (the catalog's path index, as `Cluster.streams`) and
counted; an ACE's result depends only on its text and on whether the user is the stream's
creator, so each distinct pair is parsed (through `acl.cached_parse`) and evaluated once
per call, whatever the number of streams sharing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine import policies
from engine.auth import acl
from engine.auth import users as user_store
from engine.errors import AccessDenied, InvalidArgument, InvalidPolicy

if TYPE_CHECKING:
    from engine.auth.principal import Principal
    from engine.cluster import Cluster
    from engine.storage.catalog import StreamRow

__all__ = [
    "ACE",
    "ADMINISTRATOR",
    "INVALID",
    "MAX_LIMIT",
    "READ_ONLY",
    "PERMISSION_POLICIES",
    "EffectivePermissions",
    "StreamPermissions",
    "effective_permissions",
    "stream_permissions",
]

PERMISSION_POLICIES: tuple[str, ...] = policies.ACE_POLICIES
"""The ACE policies, in the policy table's order (produce, consume, unmask, topic, copy,
admin)."""

ADMINISTRATOR = "administrator"
"""Reason: the user is an administrator, who passes every ACE."""
ACE = "ace"
"""Reason: the ACE text decided (allowed or not)."""
INVALID = "invalid ACE"
"""Reason: the stored ACE does not parse; only an administrator passes it."""
READ_ONLY = "read-only user"
"""Reason: the user is read-only; only `READS`, which change nothing, can allow them."""
READS = frozenset({"consume_perm", "unmask_perm"})
"""The ACE policies that guard no change, only reading (a read-only user may pass them)."""

MAX_LIMIT = 1000
"""Most streams one page may hold."""


@dataclass(frozen=True)
class StreamPermissions:
    """What one stream lets the user do. `allowed`, `aces` and `reasons` are keyed by
    policy name in `PERMISSION_POLICIES` order: allowed or not, the ACE text as stored,
    and why (`ADMINISTRATOR`, `ACE` or `INVALID`)."""

    stream: str
    creator: str
    allowed: dict[str, bool]
    aces: dict[str, str]
    reasons: dict[str, str]

    @property
    def everything(self) -> bool:
        """Every policy allows the user."""
        return all(self.allowed.values())


@dataclass(frozen=True)
class EffectivePermissions:
    """One page of a user's effective permissions: streams by path, from `offset`, at
    most `limit`, of the `total` whose path starts with `prefix` (every stream if None; a
    prefix without its leading "/" is given one)."""

    user: str
    groups: tuple[str, ...]
    admin: bool
    policies: tuple[str, ...]
    streams: tuple[StreamPermissions, ...]
    total: int
    limit: int
    offset: int
    prefix: str | None = None
    read_only: bool = False


def _check_page(prefix: object, limit: object, offset: object) -> None:
    if prefix is not None and not isinstance(prefix, str):
        raise InvalidArgument(f"prefix must be a string or None, got {prefix!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be a whole number from 1 to {MAX_LIMIT}, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidArgument(f"offset must be a non-negative whole number, got {offset!r}")


def _check_asker(cluster: Cluster, name: str) -> None:
    asker = cluster.principal
    if cluster.is_administrator or asker.user == name:
        return
    raise AccessDenied(
        f"user {asker.user!r} may not see the permissions of user {name!r}: only a cluster "
        "administrator may see another user's"
    )


def effective_permissions(
    cluster: Cluster,
    user: str,
    *,
    prefix: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> EffectivePermissions:
    """A page of what console user `user` may do on each stream (see the module's doc).

    Raises `InvalidName` for a name no user can have, `InvalidArgument` for a bad page,
    `AccessDenied` when the cluster's principal is neither an administrator nor `user`,
    and `UnknownUser` when there is no such user."""
    user_store.check_user_name(user)
    _check_page(prefix, limit, offset)
    _check_asker(cluster, user)
    info = user_store.user(cluster, user)
    principal = info.principal
    prefix = prefix.strip() if prefix else None
    if prefix and not prefix.startswith("/"):
        prefix = "/" + prefix  # stream paths start with "/": "apps" means "/apps"
    prefix = prefix or None
    rows = cluster.catalog.streams(prefix, limit, offset)
    total = cluster.catalog.stream_count(prefix)
    judge = _Judge(principal, info.admin)
    items = [judge.stream(row) for row in rows]
    return EffectivePermissions(
        info.name,
        info.groups,
        info.admin,
        PERMISSION_POLICIES,
        tuple(items),
        total,
        limit,
        offset,
        prefix,
        info.read_only,
    )


def stream_permissions(cluster: Cluster, path: str) -> StreamPermissions:
    """What the cluster's principal (a console's user, or the library's own) may do on
    the stream `path`, decided as `effective_permissions` decides for a user and as
    `Cluster.authorize` checks (a `superuser` passes every ACE): what the consoles show
    their user (engine.auth.actions). `errors.UnknownStream` when there is none."""
    row = cluster.catalog.stream(path)
    return _Judge(cluster.principal, cluster.principal.superuser).stream(row)


class _Judge:
    """Evaluates the ACE policies of streams for one principal. An ACE's result depends
    only on its text and on whether the principal created the stream, so each distinct
    pair is evaluated once, however many streams share it."""

    def __init__(self, principal: Principal, admin: bool) -> None:
        self.principal = principal
        self.admin = admin
        self._decided: dict[tuple[object, bool], tuple[bool, str]] = {}

    def _decide(self, text: object, is_creator: bool) -> tuple[bool, str]:
        key = (text, is_creator)
        found = self._decided.get(key)
        if found is None:
            try:
                if not isinstance(text, str):
                    raise InvalidPolicy(f"not an ACE: {text!r}")
                ace = acl.cached_parse(text)
            except InvalidPolicy:
                found = (False, INVALID)
            else:
                # `creator` stands for the user or for nobody: all `u:<creator>` asks
                user = self.principal.user
                found = (ace.allows(self.principal, user if is_creator else None), ACE)
            self._decided[key] = found
        return found

    def stream(self, row: StreamRow) -> StreamPermissions:
        aces = {name: row.policies.get(name) for name in PERMISSION_POLICIES}
        if self.admin:
            results = dict.fromkeys(PERMISSION_POLICIES, (True, ADMINISTRATOR))
        else:
            is_creator = row.creator == self.principal.user
            results = {name: self._decide(aces[name], is_creator) for name in PERMISSION_POLICIES}
        if self.principal.read_only:
            results = {
                name: result if name in READS else (False, READ_ONLY)
                for name, result in results.items()
            }
        return StreamPermissions(
            row.path,
            row.creator,
            {name: result[0] for name, result in results.items()},
            {name: text if isinstance(text, str) else "" for name, text in aces.items()},
            {name: result[1] for name, result in results.items()},
        )
