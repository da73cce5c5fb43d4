"""Effective permissions: for one console user, what each stream's ACE policies let them
do (`Cluster.effective_permissions`; docs/API.md, "Effective permissions").

A user is evaluated as the web console acts for them: their name, the groups the user
store gives them, and their administrator flag. An administrator passes every ACE (a
super user, Kafka's `super.users`), so every policy of every stream is allowed to them
with the reason `ADMINISTRATOR`; anyone else is allowed what the ACE text says (reason
`ACE`), `u:<creator>` matching when they created the stream. A stored ACE that does not
parse (an old catalog) lets nobody but an administrator through, as `Cluster.authorize`
does (reason `INVALID`).

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
    from engine.cluster import Cluster

__all__ = [
    "ACE",
    "ADMINISTRATOR",
    "INVALID",
    "MAX_LIMIT",
    "PERMISSION_POLICIES",
    "EffectivePermissions",
    "StreamPermissions",
    "effective_permissions",
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
    # (ACE text, the user is the creator) -> (allowed, reason): the only inputs a result
    # depends on, so thousands of streams with the default ACE cost one evaluation.
    decided: dict[tuple[object, bool], tuple[bool, str]] = {}

    def decide(text: object, is_creator: bool) -> tuple[bool, str]:
        key = (text, is_creator)
        found = decided.get(key)
        if found is None:
            try:
                if not isinstance(text, str):
                    raise InvalidPolicy(f"not an ACE: {text!r}")
                ace = acl.cached_parse(text)
            except InvalidPolicy:
                found = (False, INVALID)
            else:
                # `creator` stands for the user or for nobody: all `u:<creator>` asks
                found = (ace.allows(principal, principal.user if is_creator else None), ACE)
            decided[key] = found
        return found

    items = []
    for row in rows:
        aces = {name: row.policies.get(name) for name in PERMISSION_POLICIES}
        if info.admin:
            allowed = dict.fromkeys(PERMISSION_POLICIES, True)
            reasons = dict.fromkeys(PERMISSION_POLICIES, ADMINISTRATOR)
        else:
            is_creator = row.creator == info.name
            results = {name: decide(aces[name], is_creator) for name in PERMISSION_POLICIES}
            allowed = {name: result[0] for name, result in results.items()}
            reasons = {name: result[1] for name, result in results.items()}
        items.append(
            StreamPermissions(
                row.path,
                row.creator,
                allowed,
                {name: text if isinstance(text, str) else "" for name, text in aces.items()},
                reasons,
            )
        )
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
    )
