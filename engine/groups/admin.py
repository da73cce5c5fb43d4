"""Group administration: list and describe groups, publish a wire listener's members,
plan and apply offset resets, delete a group. `Cluster`'s group methods call it; the
rules live here, the SQL in engine.storage.groups (`catalog.groups`).

A group's live members block a reset or a delete (as Kafka's): whoever they are, engine
consumers or Kafka clients of a wire listener, they would commit over it.
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

    def _now(self) -> int:
        return self._cluster.clock.now_ms()

    def _topic_row(self, name: str) -> TopicRow:
        return self._cluster.catalog.topic(*names.split_full_name(name))

    def _log(self, row: TopicRow, partition: int) -> PartitionLog:
        return self._cluster.partition_log(row.id, partition, row.full_name)

    # --- reading --------------------------------------------------------------------------

    def groups(self) -> list[GroupInfo]:
        self._cluster.check_open()
        return [self.group(group_id) for group_id in self._store.group_ids()]

    def group(self, group_id: str) -> GroupInfo:
        self._cluster.check_open()
        catalog, store = self._cluster.catalog, self._store
        state = store.state(group_id)
        committed = store.committed_offsets(group_id)
        members = store.live_members(group_id, self._now())
        if state is None and not committed and not members:
            raise UnknownGroup(f"consumer group {group_id!r} does not exist")
        generation, protocol, plan = state if state is not None else (0, "", {})
        names_by_id: dict[int, str | None] = {}

        def name_of(topic_id: int) -> str | None:
            if topic_id not in names_by_id:
                row = catalog.topic_by_id(topic_id)
                names_by_id[topic_id] = row.full_name if row else None
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
        cluster.authorize(stream, "admin_perm", what="reset group offsets on")
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
                cluster.authorize(
                    cluster.catalog.stream_by_id(row.stream_id),
                    "admin_perm",
                    what="reset group offsets on",
                )
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

    # --- deleting -------------------------------------------------------------------------

    def delete(self, group_id: str) -> None:
        cluster = self._cluster
        cluster.check_open()
        _check_group_id(group_id)
        catalog, store = cluster.catalog, self._store
        now = self._now()
        committed = store.committed_offsets(group_id)
        if (
            store.state(group_id) is None
            and not committed
            and not store.live_members(group_id, now)
        ):
            raise UnknownGroup(f"consumer group {group_id!r} does not exist")
        self._refuse_live_members(group_id, now, "deleting it")
        streams = set()
        for topic_id, _, _, _ in committed:
            row = catalog.topic_by_id(topic_id)
            if row is not None:  # offsets of a deleted topic need nobody's permission
                streams.add(row.stream_id)
        for stream_id in sorted(streams):
            cluster.authorize(
                catalog.stream_by_id(stream_id), "admin_perm", what="delete groups of"
            )
        with store.write():
            self._refuse_live_members(group_id, now, "deleting it")
            store.delete_group(group_id)

    def _refuse_live_members(self, group_id: str, now: int, doing: str) -> None:
        if self._store.live_kinds(group_id, now):
            count = len(self._store.live_members(group_id, now))
            raise IllegalState(
                f"group {group_id!r} has {count} live member(s); stop its consumers before {doing}"
            )
