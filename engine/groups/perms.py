"""Who may do what with a consumer group: Kafka's GROUP ACLs, written as ACEs.

A group has five permissions, each an ACE (engine.auth.acl):

- `join_perm`: join it (and, as a member, heartbeat, sync, leave) and fetch its offsets;
- `commit_perm`: commit offsets into it;
- `describe_perm`: see it (list, describe: members, assignment, offsets);
- `reset_perm`: reset its offsets;
- `delete_perm`: delete it.

Each is `u:<creator>` by default: the group's creator, the principal that first joined it
or committed into it. A rule replaces the default of some permissions for one group id or
for every id starting with a prefix (the rule of the group's own id first, else the longest
matching prefix's, else the default); write `u:<creator> | g:etl` to share and keep the
creator. Administrators (`Cluster.is_administrator`) pass every check. On top of these, a
member reads and commits only topics it may consume (their streams' `consume_perm`).

Creating a group (the first join or commit) needs the consume permission of at least one of
its topics, and a principal creates at most `DEFAULT_LIMIT` groups (the catalog setting
`LIMIT_SETTING`; `Cluster.set_group_limit`); administrators are not limited.

A group from before creators were recorded (or copied from another cluster) has no creator:
until someone claims it, its default ACEs let through whoever may consume every topic it
has committed offsets in, and the first of them to join or commit becomes its creator (an
administrator's join, commit or reset does not claim it: it stays its consumers').
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine import names
from engine.auth import acl
from engine.auth.principal import Principal
from engine.errors import (
    AccessDenied,
    GroupAccessDenied,
    InvalidArgument,
    InvalidName,
    InvalidPolicy,
    UnknownGroup,
    UnknownStream,
    UnknownTopic,
)

if TYPE_CHECKING:
    from engine.cluster import Cluster
    from engine.storage.groups import GroupStore

PERMS = ("join_perm", "commit_perm", "describe_perm", "reset_perm", "delete_perm")
DEFAULT_ACE = "u:<creator>"
DEFAULT_LIMIT = 1000
LIMIT_SETTING = "group_limit_per_user"
# What a read-only principal is refused (Cluster.check_may_change): all but describing.
CHANGES = frozenset({"join_perm", "commit_perm", "reset_perm", "delete_perm"})
_VERBS = {
    "join_perm": "join",
    "commit_perm": "commit offsets into",
    "describe_perm": "describe",
    "reset_perm": "reset the offsets of",
    "delete_perm": "delete",
}


@dataclass(frozen=True)
class GroupPermissions:
    """A group's permissions as they apply now: its creator (None: not claimed yet), the
    ACE of each permission and where it comes from ("default", "group" or "prefix P"), and
    the permissions the asking principal passes."""

    group_id: str
    creator: str | None
    aces: Mapping[str, str]
    sources: Mapping[str, str]
    allowed: frozenset[str]
    editable: bool = False  # whether the asking principal may set the group's own rules

    def own(self, perm: str) -> str:
        """The group's own rule for `perm`, "" when it has none (a default or a prefix's
        applies): what a form shows to edit."""
        return self.aces[perm] if self.sources[perm] == "group" else ""


@dataclass(frozen=True)
class GroupRule:
    """The ACEs set for one group id, or for every id starting with `pattern` (`prefix`)."""

    pattern: str
    prefix: bool
    aces: Mapping[str, str]


def check_perm(perm: object) -> str:
    if perm not in PERMS:
        raise InvalidArgument(f"perm must be one of {', '.join(PERMS)}, not {perm!r}")
    return str(perm)


def check_ace(perm: object, ace: object) -> str | None:
    """The ACE of a permission as stored (None or "": back to the default), or
    InvalidArgument / InvalidPolicy (the stream ACEs' parser and messages, with a caret)."""
    check_perm(perm)
    if ace is not None and not isinstance(ace, str):
        raise InvalidArgument(f"{perm} must be an ACE string, not {ace!r}")
    return str(acl.parse(ace, str(perm))) if ace else None


def ace_errors(aces: Mapping[str, object]) -> dict[str, str]:
    """Every bad ACE of `aces` at once, by permission (`set_rules` stops at the first):
    what a form shows next to its fields."""
    found = {}
    for perm, ace in aces.items():
        try:
            check_ace(perm, ace)
        except (InvalidArgument, InvalidPolicy) as exc:
            found[perm] = str(exc)
    return found


class GroupAccess:
    """The group permissions of `principal` (default: the cluster's) on one cluster."""

    def __init__(self, cluster: Cluster, principal: Principal | None = None) -> None:
        self._cluster = cluster
        self.principal = principal or cluster.principal
        self.admin = bool(self.principal.superuser) or (
            self.principal == cluster.principal and cluster.is_administrator
        )

    @property
    def _store(self) -> GroupStore:
        return self._cluster.catalog.groups

    # --- reading --------------------------------------------------------------------------

    def _rules(self, group_id: str) -> dict[str, tuple[str, str]]:
        """perm -> (ACE, source) of the rules that apply to `group_id`."""
        exact: dict[str, tuple[str, str]] = {}
        longest: dict[str, tuple[str, str]] = {}  # perm -> (ACE, prefix)
        for pattern, prefix, perm, ace in self._store.perm_rules(group_id):
            if not prefix:
                exact[perm] = (ace, "group")
            elif perm not in longest or len(pattern) > len(longest[perm][1]):
                longest[perm] = (ace, pattern)
        return {**{p: (ace, f"prefix {x}") for p, (ace, x) in longest.items()}, **exact}

    def permissions(self, group_id: str) -> GroupPermissions:
        rules = self._rules(group_id)
        creator = self._store.creator(group_id)
        aces = {p: rules.get(p, (DEFAULT_ACE, "default"))[0] for p in PERMS}
        sources = {p: rules.get(p, (DEFAULT_ACE, "default"))[1] for p in PERMS}
        allowed = frozenset(
            p for p in PERMS if self._passes(group_id, creator, aces[p], sources[p])
        )
        editable = self.admin or (creator is not None and creator == self.principal.user)
        if self.principal.read_only:
            allowed -= CHANGES
            editable = False
        return GroupPermissions(group_id, creator, aces, sources, allowed, editable)

    def allows(self, group_id: str, perm: str) -> bool:
        if self.principal.read_only and check_perm(perm) in CHANGES:
            return False
        if self.admin:
            return True
        ace, source = self._rules(group_id).get(check_perm(perm), (DEFAULT_ACE, "default"))
        return self._passes(group_id, self._store.creator(group_id), ace, source)

    def _passes(self, group_id: str, creator: str | None, ace: str, source: str) -> bool:
        if self.admin:
            return True
        if creator is None and source == "default":
            return self._may_consume_all(group_id)
        try:
            return acl.check(ace, self.principal, creator)
        except InvalidPolicy:  # a stored rule that does not parse lets nobody but admins in
            return False

    def check(self, group_id: str, perm: str, what: str | None = None) -> None:
        """Raise AccessDenied unless the principal passes `perm` of the group."""
        if self.principal.read_only and check_perm(perm) in CHANGES:
            raise GroupAccessDenied(
                f"user {self.principal.user!r} is read-only: they may not "
                f"{what or _VERBS[perm]} consumer group {group_id!r}"
            )
        if not self.allows(group_id, perm):
            raise GroupAccessDenied(
                f"user {self.principal.user!r} may not {what or _VERBS[perm]} consumer group "
                f"{group_id!r} ({perm}: see `plet group perm show {group_id}`)"
            )

    def may_consume(self, topic_id: int) -> bool:
        catalog = self._cluster.catalog
        row = catalog.topic_by_id(topic_id)
        if row is None:
            return False
        try:
            self._cluster.authorize(
                catalog.stream_by_id(row.stream_id), "consume_perm", self.principal
            )
        except AccessDenied:
            return False
        return True

    def _may_consume_all(self, group_id: str) -> bool:
        """A group nobody claimed: whoever may consume every topic it has offsets in."""
        topics = {t for t, _, _, _ in self._store.committed_offsets(group_id)}
        return all(self.may_consume(t) for t in topics if self._exists(t))

    def _exists(self, topic_id: int) -> bool:
        return self._cluster.catalog.topic_by_id(topic_id) is not None

    def topic_ids(self, topics: Iterable[str]) -> list[int]:
        """The ids of those of these full topic names that exist."""
        ids = []
        for full in topics:
            try:
                ids.append(self._cluster.catalog.topic(*names.split_full_name(full)).id)
            except (UnknownTopic, UnknownStream, InvalidName):
                continue
        return ids

    # --- joining and committing: creating a group -----------------------------------------

    def enter(self, group_id: str, perm: str, topic_ids: Iterable[int], *, claim: bool) -> None:
        """Check `perm` (join_perm or commit_perm) before a join or a commit, and make the
        principal the creator of a group that has none. Creating one needs the consume
        permission of one of `topic_ids` (or of the topics it already has) and a principal
        under its limit; with `claim` false and no topic to show yet (an engine consumer
        subscribed to a pattern nothing matches), the claim waits for its next join."""
        self.check(group_id, perm)
        store = self._store
        if store.creator(group_id) is not None:
            return
        ids = list(topic_ids)
        if self.admin and store.committed_offsets(group_id):
            return  # a group from before creators stays its consumers' to claim
        if not self.admin:
            has = {t for t, _, _, _ in store.committed_offsets(group_id) if self._exists(t)}
            if not has and not any(self.may_consume(t) for t in ids):
                if not ids and not claim:
                    return
                raise GroupAccessDenied(
                    f"user {self.principal.user!r} may not create consumer group "
                    f"{group_id!r}: creating a group needs the consume permission of one "
                    "of its topics"
                )
            limit = self.limit()
            if store.created_by(self.principal.user) >= limit:
                raise GroupAccessDenied(
                    f"user {self.principal.user!r} may not create consumer group "
                    f"{group_id!r}: they created {limit:,} groups, the limit "
                    f"({LIMIT_SETTING}); delete some first"
                )
        with store.write():
            store.set_creator(group_id, self.principal.user, self._cluster.clock.now_ms())
        if store.creator(group_id) != self.principal.user:
            self.check(group_id, perm)  # someone else claimed it first: their ACEs now

    def limit(self) -> int:
        value = self._cluster.catalog.settings().get(LIMIT_SETTING)
        return int(value) if value is not None else DEFAULT_LIMIT

    # --- changing the rules ---------------------------------------------------------------

    def set_rules(self, pattern: str, prefix: bool, aces: Mapping[str, str | None]) -> None:
        """Set the ACEs of `aces` ("": back to the default) for the group `pattern`, or for
        every group id starting with it (`prefix`). A prefix's rules are an administrator's;
        a group's, its creator's or an administrator's."""
        if not isinstance(pattern, str) or not pattern:
            raise InvalidArgument(
                f"a group id or prefix must be a non-empty string, not {pattern!r}"
            )
        if not aces:
            raise InvalidArgument("give at least one permission to set")
        checked = {perm: check_ace(perm, ace) for perm, ace in aces.items()}
        self._cluster.check_may_change("set group permissions", self.principal)
        if not self.admin:
            if prefix:
                raise GroupAccessDenied(
                    f"user {self.principal.user!r} may not set the permissions of group ids "
                    "by prefix: an administrator's"
                )
            creator = self._store.creator(pattern)
            if creator is None and pattern not in self._store.group_ids():
                raise UnknownGroup(f"consumer group {pattern!r} does not exist")
            if creator != self.principal.user:
                raise GroupAccessDenied(
                    f"user {self.principal.user!r} may not set the permissions of consumer "
                    f"group {pattern!r}: its creator's ({creator!r}) or an administrator's"
                )
        self._store.set_perm_rules(pattern, prefix, checked)

    def rules(self) -> list[GroupRule]:
        by_key: dict[tuple[str, bool], dict[str, str]] = {}
        for pattern, prefix, perm, ace in self._store.perm_rules():
            by_key.setdefault((pattern, prefix), {})[perm] = ace
        return [GroupRule(p, x, aces) for (p, x), aces in sorted(by_key.items())]

    def set_limit(self, limit: int) -> None:
        self._cluster.check_may_change(f"change {LIMIT_SETTING}", self.principal)
        if not self.admin:
            raise GroupAccessDenied(
                f"user {self.principal.user!r} may not change {LIMIT_SETTING}: an administrator's"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidArgument(f"the group limit must be an integer >= 0, got {limit!r}")
        self._cluster.catalog.set_setting(LIMIT_SETTING, str(limit))
