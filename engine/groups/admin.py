"""Group administration: list and describe groups, publish a wire listener's members,
plan and apply offset resets, delete a group. `Cluster`'s group methods call it; the
rules live here, the SQL in engine.storage.groups (`catalog.groups`).

A group's live members block a reset or a delete (as Kafka's): whoever they are, engine
consumers or Kafka clients of a wire listener, they would commit over it. Every operation
checks the group's permissions (engine.groups.perms) as the cluster's principal: a caller
sees only the groups it may describe, and in them only the topics it may consume.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine import names, policies
from engine.errors import (
    IllegalState,
    InvalidArgument,
    InvalidName,
    InvalidOffset,
    UnknownGroup,
    UnknownStream,
    UnknownTopic,
)
from engine.groups.grammar import ResetTo, check_partitions, reset_target
from engine.groups.perms import GroupAccess, GroupPermissions, check_perm
from engine.groups.states import EMPTY, PREPARING, STABLE
from engine.records import (
    GroupInfo,
    GroupPartitionInfo,
    MemberInfo,
    OffsetResetPlan,
    TopicPartition,
)
from engine.storage.log import PartitionLog

if TYPE_CHECKING:
    from engine.cluster import Cluster
    from engine.storage.catalog import TopicRow
    from engine.storage.groups import GroupStore


def _check_group_id(group_id: object) -> None:
    if not isinstance(group_id, str) or not group_id:
        raise InvalidArgument(f"group_id must be a non-empty string, got {group_id!r}")


class GroupAdmin:
    """The group operations of one cluster (or a view of it as a principal). Holds no state
    of its own: any thread may use it, as it may the cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    @property
    def _store(self) -> GroupStore:
        return self._cluster.catalog.groups

    @property
    def access(self) -> GroupAccess:
        return GroupAccess(self._cluster)

    def _now(self) -> int:
        return self._cluster.clock.now_ms()

    def _topic_row(self, name: str) -> TopicRow:
        return self._cluster.catalog.topic(*names.split_full_name(name))

    def _log(self, row: TopicRow, partition: int) -> PartitionLog:
        return self._cluster.partition_log(row.id, partition, row.full_name)

    # --- reading --------------------------------------------------------------------------

    def groups(self) -> list[GroupInfo]:
        self._cluster.check_open()
        access = self.access
        out = []
        for group_id in self._store.group_ids():
            if access.allows(group_id, "describe_perm"):
                try:
                    out.append(self._info(group_id, access))
                except UnknownGroup:  # deleted since it was listed
                    continue
        return out

    def group(self, group_id: str) -> GroupInfo:
        self._cluster.check_open()
        access = self.access
        self._exists(group_id)
        access.check(group_id, "describe_perm")
        return self._info(group_id, access)

    def _exists(self, group_id: str) -> None:
        store = self._store
        if (
            store.state(group_id) is None
            and not store.committed_offsets(group_id)
            and not store.live_members(group_id, self._now())
            and store.creator(group_id) is None
        ):
            raise UnknownGroup(f"consumer group {group_id!r} does not exist")

    def _info(self, group_id: str, access: GroupAccess) -> GroupInfo:
        catalog, store = self._cluster.catalog, self._store
        state = store.state(group_id)
        committed = store.committed_offsets(group_id)
        members = store.live_members(group_id, self._now())
        if state is None and not committed and not members and store.creator(group_id) is None:
            raise UnknownGroup(f"consumer group {group_id!r} does not exist")
        generation, protocol, plan = state if state is not None else (0, "", {})
        names_by_id: dict[int, str | None] = {}

        def name_of(topic_id: int) -> str | None:
            # only the topics the caller may consume: their offsets and owners are theirs
            if topic_id not in names_by_id:
                row = catalog.topic_by_id(topic_id)
                shown = row is not None and (access.admin or access.may_consume(topic_id))
                names_by_id[topic_id] = row.full_name if row and shown else None
            return names_by_id[topic_id]

        owners = store.owners(group_id)
        infos = []
        for member_id, client_id, host, heartbeat in members:
            owned = sorted(
                TopicPartition(name, p)
                for (t, p), m in owners.items()
                if m == member_id and (name := name_of(t)) is not None
            )
            infos.append(MemberInfo(member_id, client_id, host, tuple(owned), heartbeat))
        offsets = {(t, p): (o, meta) for t, p, o, meta in committed}
        keys = set(offsets) | {k for parts in plan.values() for k in parts}
        partitions = []
        for topic_id, partition in sorted(keys):
            name = name_of(topic_id)
            if name is None:
                continue
            end = self._cluster.partition_log(topic_id, partition, name).end_offset()
            offset, meta = offsets.get((topic_id, partition), (None, ""))
            partitions.append(GroupPartitionInfo(name, partition, offset, end, meta))
        live = {m[0] for m in members}
        settled = all(owners.get(k) == m for m, parts in plan.items() if m in live for k in parts)
        status = EMPTY if not members else (STABLE if settled else PREPARING)
        return GroupInfo(group_id, status, generation, protocol, infos, partitions)

    def kinds(self, group_id: str) -> frozenset[str]:
        self._cluster.check_open()
        _check_group_id(group_id)
        return frozenset(self._store.live_kinds(group_id, self._now()))

    # --- a wire listener's members --------------------------------------------------------

    def publish(
        self,
        group_id: str,
        members: Sequence[MemberInfo],
        protocol: str,
        generation: int,
        session_ms: int,
    ) -> None:
        self._cluster.check_open()
        _check_group_id(group_id)
        if not isinstance(protocol, str):
            raise InvalidArgument(f"protocol must be a string, got {protocol!r}")
        for value, what in ((generation, "generation"), (session_ms, "session_ms")):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidArgument(f"{what} must be an integer >= 0, got {value!r}")
        rows: list[tuple[str, str, str, int, list[tuple[int, int]]]] = []
        topics: dict[str, TopicRow | None] = {}
        for m in members:
            if not isinstance(m, MemberInfo) or not isinstance(m.member_id, str) or not m.member_id:
                raise InvalidArgument(f"members must be MemberInfo with a member_id, got {m!r}")
            parts = []
            for tp in m.assignment:
                if tp.topic not in topics:
                    try:
                        topics[tp.topic] = self._topic_row(tp.topic)
                    except (UnknownTopic, UnknownStream, InvalidName):
                        topics[tp.topic] = None
                row = topics[tp.topic]
                if row is not None and 0 <= tp.partition < row.partitions:
                    parts.append((row.id, tp.partition))
            rows.append((m.member_id, m.client_id, m.host, m.last_heartbeat_ms, parts))
        if len({r[0] for r in rows}) != len(rows):
            raise InvalidArgument("members must have distinct member ids")
        store = self._store
        now = self._now()
        with store.write():
            if rows and "engine" in store.live_kinds(group_id, now):
                raise IllegalState(
                    f"group {group_id!r} has live engine consumers: Kafka clients cannot join"
                )
            store.replace_wire(
                group_id,
                rows,
                protocol=protocol,
                generation=generation,
                session_ms=session_ms,
                now=now,
            )

    # --- resetting offsets ----------------------------------------------------------------

    def plan_reset(
        self, group_id: str, topic: str, to: ResetTo, partitions: object
    ) -> list[OffsetResetPlan]:
        cluster = self._cluster
        cluster.check_open()
        _check_group_id(group_id)
        row = self._topic_row(topic)
        stream = cluster.catalog.stream_by_id(row.stream_id)
        self._check_reset(group_id, row)
        target = reset_target(to)
        chosen = check_partitions(partitions, row.partitions, row.full_name)
        now = self._now()
        self._refuse_live_members(group_id, now, "resetting its offsets")
        cutoff = None
        if target.kind == "time":
            ttl = policies.check_stored(stream.path, stream.policies)["ttl"]  # an old catalog's
            cutoff = now - ttl * 1000 if ttl else None
        current = {
            (t, p): o for t, p, o, _ in self._store.committed_offsets(group_id) if t == row.id
        }
        plans = []
        for partition in chosen:
            log = self._log(row, partition)
            start, end = log.start_offset(), log.end_offset()
            committed = current.get((row.id, partition))
            if target.kind == "earliest":
                offset = start
            elif target.kind == "latest":
                offset = end
            elif target.kind == "time":
                found = log.offset_for_time(target.value, cutoff)
                offset = end if found is None else found.offset
            elif target.kind == "shift":
                if committed is None:
                    raise InvalidOffset(
                        f"cannot shift the offset of {row.full_name}[{partition}]: group "
                        f"{group_id!r} has no committed offset there"
                    )
                offset = min(max(committed + target.value, start), end)  # as Kafka's --shift-by
            else:
                offset = min(max(target.value, start), end)
            plans.append(OffsetResetPlan(row.full_name, partition, committed, offset, start, end))
        return plans

    def apply_reset(
        self, group_id: str, plans: Sequence[OffsetResetPlan]
    ) -> dict[TopicPartition, int]:
        cluster = self._cluster
        cluster.check_open()
        _check_group_id(group_id)
        if not plans or not all(isinstance(p, OffsetResetPlan) for p in plans):
            raise InvalidArgument("plans must be a non-empty list of OffsetResetPlan")
        rows: dict[str, TopicRow] = {}
        commits = []
        for plan in plans:
            if plan.topic not in rows:
                rows[plan.topic] = row = self._topic_row(plan.topic)
                self._check_reset(group_id, row)
            row = rows[plan.topic]
            check_partitions([plan.partition], row.partitions, row.full_name)
            log = self._log(row, plan.partition)
            if not log.start_offset() <= plan.new <= log.end_offset():
                raise InvalidOffset(
                    f"offset {plan.new:,} is no longer in {plan.topic}[{plan.partition}] "
                    f"({log.start_offset():,} to {log.end_offset():,}): plan the reset again"
                )
            commits.append((row.id, plan.partition, plan.new, ""))
        store = self._store
        if store.creator(group_id) is None:  # a new group (or one nobody claimed): the caller's
            self.access.enter(group_id, "reset_perm", [r.id for r in rows.values()], claim=True)
        now = self._now()
        with store.write():
            self._refuse_live_members(group_id, now, "resetting its offsets")
            current = store.offsets(group_id)
            for plan, (topic_id, partition, _, _) in zip(plans, commits, strict=True):
                if current.get((topic_id, partition)) != plan.current:
                    raise IllegalState(
                        f"the committed offset of group {group_id!r} in "
                        f"{plan.topic}[{partition}] changed since the plan: plan the reset again"
                    )
            store.commit(group_id, commits, now)
        return {TopicPartition(p.topic, p.partition): p.new for p in plans}

    # --- permissions (engine.groups.perms) ------------------------------------------------

    def permissions(self, group_id: str) -> GroupPermissions:
        self._cluster.check_open()
        _check_group_id(group_id)
        return self.access.permissions(group_id)

    def authorize(
        self, group_id: str, perm: str, topics: Sequence[str], *, claim: bool = True
    ) -> None:
        self._cluster.check_open()
        _check_group_id(group_id)
        access = self.access
        if claim and perm in ("join_perm", "commit_perm"):
            access.enter(group_id, perm, access.topic_ids(topics), claim=True)
        else:
            access.check(group_id, check_perm(perm))

    def _check_reset(self, group_id: str, row: TopicRow) -> None:
        """A reset needs the group's reset_perm and the consume permission of the topic,
        and touches only a topic the group already has (a new group's are the caller's)."""
        access = self.access
        access.check(group_id, "reset_perm")
        if not access.admin:
            self._cluster.authorize(
                self._cluster.catalog.stream_by_id(row.stream_id),
                "consume_perm",
                what="reset group offsets on",
            )
        store = self._store
        state = store.state(group_id)
        has = {t for t, _, _, _ in store.committed_offsets(group_id)}
        has |= {t for parts in (state[2] if state else {}).values() for t, _ in parts}
        if row.id not in has and (has or store.creator(group_id) is not None):
            raise InvalidArgument(
                f"consumer group {group_id!r} has no offsets in {row.full_name}: a reset "
                "changes only the topics a group already reads"
            )

    # --- deleting -------------------------------------------------------------------------

    def delete(self, group_id: str) -> None:
        cluster = self._cluster
        cluster.check_open()
        _check_group_id(group_id)
        store = self._store
        now = self._now()
        self._exists(group_id)
        self.access.check(group_id, "delete_perm")
        self._refuse_live_members(group_id, now, "deleting it")
        with store.write():
            self._refuse_live_members(group_id, now, "deleting it")
            store.delete_group(group_id)

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, bool]:
        """Kafka's OffsetDelete: remove the group's committed offsets of `partitions`,
        except in topics its live members read (False for those, Kafka's
        GROUP_SUBSCRIBED_TO_TOPIC); needs the group's delete_perm."""
        cluster = self._cluster
        cluster.check_open()
        _check_group_id(group_id)
        rows = {}
        for tp in partitions:
            if not isinstance(tp, TopicPartition):
                raise InvalidArgument(f"partitions must be TopicPartitions, got {tp!r}")
            row = self._topic_row(tp.topic)
            check_partitions([tp.partition], row.partitions, row.full_name)
            rows[tp] = row
        self._exists(group_id)
        self.access.check(group_id, "delete_perm")
        store = self._store
        with store.write():
            busy = store.live_topics(group_id, self._now())
            free = [tp for tp, row in rows.items() if row.id not in busy]
            store.delete_offsets(group_id, [(rows[tp].id, tp.partition) for tp in free])
        return {tp: tp in free for tp in rows}

    def _refuse_live_members(self, group_id: str, now: int, doing: str) -> None:
        if self._store.live_kinds(group_id, now):
            count = len(self._store.live_members(group_id, now))
            raise IllegalState(
                f"group {group_id!r} has {count} live member(s); stop its consumers before {doing}"
            )
