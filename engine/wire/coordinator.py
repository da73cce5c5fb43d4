"""The group coordinator of the wire listener: Kafka's classic consumer-group protocol
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup), one state machine per group, in the
listener's process (node 0 coordinates every group).

States, as Kafka's: Empty -> PreparingRebalance -> CompletingRebalance -> Stable. A
rebalance starts when a member joins, leaves, changes its subscription, or misses its
session timeout; it completes when every known member has sent JoinGroup again, or when the
rebalance timeout ends (the members that did not rejoin are removed). The leader gets the
members and their protocol metadata and computes the assignment with its own client-side
assignor (range, roundrobin, sticky, cooperative-sticky: the coordinator never reads the
metadata); SyncGroup hands each member its part.

Each member id belongs to the user that joined with it (with SASL, the logged-in user),
and an id handed out with MEMBER_ID_REQUIRED to the user it was handed to: another user's
JoinGroup, SyncGroup, Heartbeat, LeaveGroup or OffsetCommit with it is answered
UNKNOWN_MEMBER_ID, as for an id that does not exist. The group's own permissions
(engine.groups.perms) are checked by the handlers, before the coordinator is asked.

JoinGroup and SyncGroup are held until the rebalance is done, as Kafka holds the request
open, without a thread: `begin_join` and `begin_sync` answer at once or return a `Waiting`
that the connection parks on the event loop (engine.wire.park), woken by `changed`, and
cancels when its client goes away. A rebalance lasts at most `max_rebalance_timeout_ms`
whatever the clients ask, and session timeouts are bounded as Kafka's
group.min/max.session.timeout.ms bound them. The state machine lives in memory: a
restarted listener answers the old members UNKNOWN_MEMBER_ID and they join again. Committed offsets are the engine's.

The engine sees the members too (`Cluster.publish_group`): every change of a group's
members, generation or assignment (the leader's SyncGroup assignment, decoded with
kafka-python's ConsumerProtocolAssignment) is published into the catalog's group tables
after the request that made it, and the reaper refreshes the published heartbeats every
third of the shortest session timeout (not one catalog write per Heartbeat), so the members
of a killed listener vanish after their session timeout, by the engine's own rule. Closing
the listener withdraws them. A group that live engine consumers hold is refused
(INCONSISTENT_GROUP_PROTOCOL), as engine consumers refuse a group wire members hold.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from engine import errors
from engine.clock import SYSTEM_CLOCK, Clock
from engine.groups.states import COMPLETING, EMPTY, PREPARING, STABLE, session_live
from engine.records import MemberInfo, TopicPartition
from engine.wire import codes, limits
from engine.wire.park import Signal

if TYPE_CHECKING:
    from engine.wire.broker import Broker

log = logging.getLogger(__name__)


# The listener's bounds on sessions and rebalances (why these values: engine.wire.limits)
MIN_SESSION_TIMEOUT_MS = limits.DEFAULT_MIN_SESSION_TIMEOUT_MS
MAX_SESSION_TIMEOUT_MS = limits.DEFAULT_MAX_SESSION_TIMEOUT_MS
MAX_REBALANCE_TIMEOUT_MS = limits.DEFAULT_MAX_REBALANCE_TIMEOUT_MS
# How often waiting requests and the reaper look again: bounds how late an expiry or a
# closing listener is noticed.
_TICK = 0.1
# A failed publication (a busy catalog, engine consumers in the group) is tried again after
_RETRY_S = 1.0


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    last_seen: float  # the coordinator clock's monotonic() of its last request
    principal: str = ""  # the user that joined: its member id is theirs alone
    joined: bool = False  # has sent JoinGroup in the current rebalance
    awaiting: bool = False  # a JoinGroup or SyncGroup of it is waiting (keeps it alive)
    join_result: JoinResult | None = None
    assignment: bytes = b""

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


T = TypeVar("T")


@dataclass
class Waiting(Generic[T]):
    """A JoinGroup or SyncGroup held until its rebalance moves on: `poll()` (any thread)
    is its answer once there is one, None before; `cancel()` gives up (its client went
    away); `changed` fires whenever the answer may have come."""

    poll: Callable[[], T | None]
    cancel: Callable[[], None]
    changed: Signal


@dataclass(frozen=True)
class JoinResult:
    error: int
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    member_id: str = ""
    # (member id, group instance id, metadata) for the leader, empty for the others
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True)
class JoinRequest:
    """A JoinGroup as the coordinator takes it. `rebalance_timeout_ms` < 0: none given
    (JoinGroup v0), the session timeout stands in; `require_known_member_id` (v4+): a new
    member first gets its id with MEMBER_ID_REQUIRED; `principal`: the logged-in user,
    whose member id it becomes."""

    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool
    principal: str = ""


@dataclass(frozen=True)
class SyncRequest:
    """A SyncGroup as the coordinator takes it (`protocol_type`, `protocol`: None before
    SyncGroup v5, which names them); the leader's `assignments` are (member id, bytes)."""

    group_id: str
    generation: int
    member_id: str
    protocol_type: str | None
    protocol: str | None
    assignments: Iterable[tuple[str, bytes]]
    principal: str = ""


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # member ids handed out with MEMBER_ID_REQUIRED, until they join (or expire):
    # id -> (deadline, the principal it was handed to, the only one that may join with it)
    pending: dict[str, tuple[float, str]] = field(default_factory=dict)
    rebalance_deadline: float = 0.0

    def candidates(self) -> set[str]:
        """The protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()


@dataclass(frozen=True)
class _Held:
    """A member whose JoinGroup or SyncGroup waits."""

    group: Group
    member: Member


# SyncGroup's answer: (error, protocol type, protocol name, the member's assignment)
_SyncAnswer = tuple[int, str | None, str | None, bytes]


@dataclass(frozen=True)
class MemberView:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupView:
    """What DescribeGroups and ListGroups show of a group."""

    group_id: str
    state: str
    generation: int
    protocol_type: str
    protocol: str
    members: tuple[MemberView, ...]


@dataclass(frozen=True)
class _Snapshot:
    """What the engine is shown of a group; equal snapshots need no new publication."""

    generation: int = 0
    protocol: str = ""
    consumer: bool = False  # protocol type "consumer": assignments are Kafka's format
    # (member id, client id, client host, session timeout ms, assignment bytes)
    members: tuple[tuple[str, str, str, int, bytes], ...] = ()


@dataclass
class _Published:
    """The last publication of one group; its lock keeps publications in order."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    snapshot: _Snapshot | None = None  # None: nothing published yet
    at: float = 0.0  # monotonic time of the last write (or failed attempt)
    failed: bool = False
    dropped: bool = False  # forgotten by the reaper: a caller holding it takes a new one


class GroupCoordinator:
    """Every wire group of one listener. Thread-safe: handlers call it from the worker
    pool; a reaper thread expires members whose session ended and refreshes the members
    published to the engine. `broker` (None: nothing is published, for tests of the
    state machine alone) gives the cluster and the wire's topic names; time comes from
    `clock`, else the cluster's (`cluster.clock`), so tests move it instead of waiting."""

    def __init__(
        self,
        closing: threading.Event,
        broker: Broker | None = None,
        clock: Clock | None = None,
        *,
        min_session_timeout_ms: int = MIN_SESSION_TIMEOUT_MS,
        max_session_timeout_ms: int = MAX_SESSION_TIMEOUT_MS,
        max_rebalance_timeout_ms: int = MAX_REBALANCE_TIMEOUT_MS,
    ) -> None:
        self._closing = closing
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.max_rebalance_timeout_ms = max_rebalance_timeout_ms
        # fired with every notify of `_cond`: parked requests look again
        self.changed = Signal()
        self._broker = broker
        if clock is None:
            clock = broker.cluster.clock if broker is not None else SYSTEM_CLOCK
        self._clock: Clock = clock
        self._cond = threading.Condition()
        self._groups: dict[str, Group] = {}
        self._published: dict[str, _Published] = {}
        self._reaper: threading.Thread | None = None

    # --- JoinGroup ------------------------------------------------------------------------

    def join(self, request: JoinRequest) -> JoinResult:
        """`begin_join`, waiting in this thread (for callers that are threads)."""
        return self._block(self.begin_join(request))

    def _block(self, answer: T | Waiting[T]) -> T:
        if not isinstance(answer, Waiting):
            return answer
        while True:
            seq = self.changed.seq
            result = answer.poll()
            if result is not None:
                return result
            with self._cond:
                if self.changed.seq == seq:
                    self._cond.wait(_TICK)

    def begin_join(self, request: JoinRequest) -> JoinResult | Waiting[JoinResult]:
        """A JoinGroup: its answer, or a `Waiting` while the rebalance goes on.

        `principal`: the logged-in user; a member id works only for the user that got it
        (another user's is UNKNOWN_MEMBER_ID, as one that does not exist)."""
        group_id, member_id = request.group_id, request.member_id
        if group_id and self._broker is not None:
            try:
                kinds = self._broker.cluster.group_kinds(group_id)
            except errors.PartitionletError:
                log.warning("could not read group %r from the catalog", group_id, exc_info=True)
                return JoinResult(codes.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
            if "engine" in kinds:
                # engine consumers hold it with the engine's own assignment, which Kafka
                # clients would never follow
                return JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        result = self._join(request)
        if not isinstance(result, _Held):
            if group_id:
                self._publish(group_id)
            return result
        group, member = result.group, result.member

        def poll() -> JoinResult | None:
            with self._cond:
                answer = self._join_answer(group, member)
            if answer is not None:
                self._publish(group_id)
            return answer

        return Waiting(poll, lambda: self._give_up(member), self.changed)

    def _join(self, r: JoinRequest) -> JoinResult | _Held:
        group_id, member_id, principal = r.group_id, r.member_id, r.principal
        if not group_id:
            return JoinResult(codes.INVALID_GROUP_ID, member_id=member_id)
        if not self.min_session_timeout_ms <= r.session_timeout_ms <= self.max_session_timeout_ms:
            return JoinResult(codes.INVALID_SESSION_TIMEOUT, member_id=member_id)
        rebalance_timeout_ms = r.rebalance_timeout_ms
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has none: the session timeout stands in
            rebalance_timeout_ms = r.session_timeout_ms
        rebalance_timeout_ms = min(rebalance_timeout_ms, self.max_rebalance_timeout_ms)
        self._start_reaper()
        with self._cond:
            group = self._groups.setdefault(group_id, Group(group_id))
            if not r.protocols or (
                group.members
                and (
                    r.protocol_type != group.protocol_type
                    or not group.candidates() & {name for name, _ in r.protocols}
                )
            ):
                return JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            now = self._clock.monotonic()
            if not member_id:
                new_id = f"{r.client_id}-{uuid.uuid4()}"
                if r.instance_id is not None:
                    # a static member that restarted: it replaces its old incarnation
                    for old in list(group.members.values()):
                        if old.instance_id == r.instance_id:
                            if old.principal != principal:  # another user's static member
                                return JoinResult(codes.UNKNOWN_MEMBER_ID, member_id=member_id)
                            self._remove(group, old.member_id)
                elif r.require_known_member_id:
                    # JoinGroup v4+: the client learns its id first, then joins with it,
                    # so a client that dies between the two leaves no member behind
                    group.pending[new_id] = (now + r.session_timeout_ms / 1000, principal)
                    return JoinResult(codes.MEMBER_ID_REQUIRED, member_id=new_id)
                member_id = new_id
            elif member_id in group.pending and group.pending[member_id][1] == principal:
                del group.pending[member_id]
            elif member_id not in group.members or group.members[member_id].principal != principal:
                return JoinResult(codes.UNKNOWN_MEMBER_ID, member_id=member_id)
            member = group.members.get(member_id)
            if member is None:
                member = group.members[member_id] = Member(
                    member_id,
                    r.instance_id,
                    r.client_id,
                    r.client_host,
                    r.session_timeout_ms,
                    rebalance_timeout_ms,
                    r.protocol_type,
                    r.protocols,
                    now,
                    principal,
                )
                group.protocol_type = r.protocol_type
                self._prepare(group)
            else:
                changed = member.protocols != r.protocols
                member.protocols = r.protocols
                member.session_timeout_ms = r.session_timeout_ms
                member.rebalance_timeout_ms = rebalance_timeout_ms
                member.last_seen = now
                if group.state == STABLE and not changed and member_id != group.leader:
                    # a follower that rejoins with nothing new gets the current generation
                    return self._result(group, member)
                if group.state == COMPLETING and not changed:
                    return self._result(group, member)
                if group.state != PREPARING:
                    self._prepare(group)
            member.joined = True
            member.join_result = None
            self._maybe_complete(group)
            member.awaiting = True
            answer = self._join_answer(group, member)
            return answer if answer is not None else _Held(group, member)

    def _join_answer(self, group: Group, member: Member) -> JoinResult | None:
        """The answer of a member's held JoinGroup, None while it waits (under `_cond`)."""
        if member.join_result is None:
            if not member.awaiting:  # given up already
                return JoinResult(codes.UNKNOWN_MEMBER_ID, member_id=member.member_id)
            if group.members.get(member.member_id) is not member:
                result = JoinResult(codes.UNKNOWN_MEMBER_ID, member_id=member.member_id)
            elif self._closing.is_set():
                result = JoinResult(codes.COORDINATOR_NOT_AVAILABLE, member_id=member.member_id)
            else:
                self._maybe_complete(group)
                if member.join_result is None:
                    return None
                result = member.join_result
        else:
            result = member.join_result
        member.join_result = None
        member.awaiting = False
        member.last_seen = self._clock.monotonic()
        return result

    def _give_up(self, member: Member) -> None:
        """A held request's client went away: its member no longer waits, so its session
        timeout runs (Kafka forgets it the same way)."""
        with self._cond:
            member.awaiting = False
            member.last_seen = self._clock.monotonic()
            self._notify()

    def _notify(self) -> None:
        """Wake the threads waiting on `_cond` and the parked requests (under `_cond`)."""
        self._cond.notify_all()
        self.changed.fire()

    def _result(self, group: Group, member: Member) -> JoinResult:
        leader = group.leader or ""
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member.member_id == leader:
            members = tuple(
                (m.member_id, m.instance_id, m.metadata(group.protocol))
                for m in group.members.values()
            )
        return JoinResult(
            codes.NONE,
            group.generation,
            group.protocol_type,
            group.protocol,
            leader,
            member.member_id,
            members,
        )

    def _prepare(self, group: Group) -> None:
        """Start a rebalance (or restart one whose member set changed)."""
        if group.state != PREPARING:
            for m in group.members.values():
                m.joined = False
                m.assignment = b""
            group.state = PREPARING
            timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
            group.rebalance_deadline = self._clock.monotonic() + timeout / 1000
        self._notify()  # SyncGroup waiters of the old generation give up

    def _maybe_complete(self, group: Group) -> None:
        """Complete the rebalance when every member rejoined or its time is up."""
        if group.state != PREPARING:
            return
        if not all(m.joined for m in group.members.values()):
            if self._clock.monotonic() < group.rebalance_deadline:
                return
            for m in [m for m in group.members.values() if not m.joined]:
                self._remove(group, m.member_id, rebalance=False)
        group.generation += 1
        if not group.members:
            group.state, group.protocol, group.protocol_type, group.leader = EMPTY, None, None, None
            self._notify()
            return
        group.protocol = self._choose_protocol(group)
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = COMPLETING
        for m in group.members.values():
            m.join_result = self._result(group, m)
            m.last_seen = self._clock.monotonic()
        self._notify()

    @staticmethod
    def _choose_protocol(group: Group) -> str:
        """Kafka's vote: each member votes for the first protocol of its list that every
        member supports; the most votes win (ties to the first voted)."""
        candidates = group.candidates()
        votes: dict[str, int] = {}
        for m in group.members.values():
            choice = next(name for name, _ in m.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    # --- SyncGroup ------------------------------------------------------------------------

    def sync(self, request: SyncRequest) -> _SyncAnswer:
        """(error, protocol type, protocol name, this member's assignment)."""
        return self._block(self.begin_sync(request))

    def begin_sync(self, request: SyncRequest) -> _SyncAnswer | Waiting[_SyncAnswer]:
        """A SyncGroup: its answer, or a `Waiting` until the leader's assignment comes."""
        result = self._sync(request)
        if not isinstance(result, _Held):
            self._publish(request.group_id)
            return result
        group, member = result.group, result.member

        def poll() -> _SyncAnswer | None:
            with self._cond:
                answer = self._sync_answer(group, member, request.generation)
            if answer is not None:
                self._publish(request.group_id)
            return answer

        return Waiting(poll, lambda: self._give_up(member), self.changed)

    def _sync(self, r: SyncRequest) -> _SyncAnswer | _Held:
        with self._cond:
            group = self._groups.get(r.group_id)
            member = group.members.get(r.member_id) if group is not None else None
            if group is None or member is None or member.principal != r.principal:
                return codes.UNKNOWN_MEMBER_ID, None, None, b""
            if r.generation != group.generation:
                return codes.ILLEGAL_GENERATION, None, None, b""
            if (r.protocol_type is not None and r.protocol_type != group.protocol_type) or (
                r.protocol is not None and r.protocol != group.protocol
            ):
                return codes.INCONSISTENT_GROUP_PROTOCOL, None, None, b""
            member.last_seen = self._clock.monotonic()
            if group.state == PREPARING:
                return codes.REBALANCE_IN_PROGRESS, None, None, b""
            if group.state == COMPLETING and r.member_id == group.leader:
                given = dict(r.assignments)
                for m in group.members.values():
                    m.assignment = given.get(m.member_id, b"")
                group.state = STABLE
                self._notify()
            member.awaiting = True
            answer = self._sync_answer(group, member, r.generation)
            return answer if answer is not None else _Held(group, member)

    def _sync_answer(self, group: Group, member: Member, generation: int) -> _SyncAnswer | None:
        """The answer of a member's held SyncGroup, None while it waits (under `_cond`)."""
        gone = group.members.get(member.member_id) is not member or not member.awaiting
        if (
            not gone
            and group.state == COMPLETING
            and group.generation == generation
            and not self._closing.is_set()
        ):
            return None
        member.awaiting = False
        member.last_seen = self._clock.monotonic()
        if gone:
            return codes.UNKNOWN_MEMBER_ID, None, None, b""
        if group.state != STABLE or group.generation != generation:
            if self._closing.is_set():
                return codes.COORDINATOR_NOT_AVAILABLE, None, None, b""
            return codes.REBALANCE_IN_PROGRESS, None, None, b""
        return codes.NONE, group.protocol_type, group.protocol, member.assignment

    # --- Heartbeat, LeaveGroup, OffsetCommit's check --------------------------------------

    def heartbeat(self, group_id: str, generation: int, member_id: str, principal: str = "") -> int:
        with self._cond:
            error, group = self._check(group_id, generation, member_id, principal)
            if error != codes.NONE or group is None:
                return error
            return codes.REBALANCE_IN_PROGRESS if group.state == PREPARING else codes.NONE

    def check_commit(
        self, group_id: str, generation: int, member_id: str, principal: str = ""
    ) -> int:
        """The error of an OffsetCommit from a group member (it also counts as a
        heartbeat). A simple commit (generation -1, no member id) is refused while the
        group has members, as Kafka refuses it (UNKNOWN_MEMBER_ID): it would move their
        offsets under them."""
        with self._cond:
            if generation < 0 and not member_id:
                group = self._groups.get(group_id)
                return codes.UNKNOWN_MEMBER_ID if group and group.members else codes.NONE
            error, group = self._check(group_id, generation, member_id, principal)
            if error == codes.NONE and group is not None and group.state == COMPLETING:
                return codes.REBALANCE_IN_PROGRESS
            return error

    def _check(
        self, group_id: str, generation: int, member_id: str, principal: str
    ) -> tuple[int, Group | None]:
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.principal != principal:
            return codes.UNKNOWN_MEMBER_ID, None
        member.last_seen = self._clock.monotonic()
        if generation != group.generation:
            return codes.ILLEGAL_GENERATION, None
        return codes.NONE, group

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]], principal: str = ""
    ) -> list[int]:
        """Remove (member id, group instance id) pairs of `principal`'s members; an error
        code for each (UNKNOWN_MEMBER_ID for another user's)."""
        out = []
        with self._cond:
            group = self._groups.get(group_id)
            for member_id, instance_id in members:
                if group is None:
                    out.append(codes.UNKNOWN_MEMBER_ID)
                    continue
                if not member_id and instance_id is not None:
                    member_id = next(
                        (
                            m.member_id
                            for m in group.members.values()
                            if m.instance_id == instance_id
                        ),
                        "",
                    )
                found = group.members.get(member_id)
                if found is not None and found.principal == principal:
                    self._remove(group, member_id)
                    out.append(codes.NONE)
                else:
                    out.append(codes.UNKNOWN_MEMBER_ID)
        self._publish(group_id)  # before the answer: the engine sees them gone at once
        return out

    def _remove(self, group: Group, member_id: str, *, rebalance: bool = True) -> None:
        del group.members[member_id]
        if not rebalance:
            return
        if group.state in (STABLE, COMPLETING):
            self._prepare(group)
        elif group.state == PREPARING:
            self._maybe_complete(group)
        self._notify()

    # --- expiry ---------------------------------------------------------------------------

    def _start_reaper(self) -> None:
        with self._cond:
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap_forever, name="plet-wire-groups", daemon=True
                )
                self._reaper.start()

    def _reap_forever(self) -> None:
        while not self._closing.wait(_TICK):
            self.expire()
            self.publish_all()

    def expire(self) -> None:
        """Remove the members whose session ended, the pending ids nobody used, and
        complete rebalances whose time is up."""
        now = self._clock.monotonic()
        with self._cond:
            for group in list(self._groups.values()):
                for pending, (deadline, _) in list(group.pending.items()):
                    if deadline < now:
                        del group.pending[pending]
                for m in list(group.members.values()):
                    if not m.awaiting and not session_live(
                        m.last_seen * 1000, m.session_timeout_ms, now * 1000
                    ):
                        self._remove(group, m.member_id)
                self._maybe_complete(group)
                if group.state == EMPTY and not group.members and not group.pending:
                    del self._groups[group.group_id]

    # --- what the engine sees (Cluster.publish_group) --------------------------------------

    def publish_all(self) -> None:
        """Publish what changed, refresh heartbeats that are due, retry failures, and forget
        the groups that are gone and withdrawn."""
        with self._cond:
            ids = set(self._groups) | set(self._published)
        for group_id in ids:
            self._publish(group_id)
        with self._cond:
            for group_id, pub in list(self._published.items()):
                if group_id in self._groups or (pub.snapshot is not None and pub.snapshot.members):
                    continue
                if pub.lock.acquire(blocking=False):
                    try:
                        pub.dropped = True
                        del self._published[group_id]
                    finally:
                        pub.lock.release()

    def close(self) -> None:
        """Withdraw every member this listener published (its clients are gone with it).
        After the worker pool has ended: no request publishes after this."""
        self._closing.set()
        reaper = self._reaper
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(timeout=10)
        with self._cond:
            self._groups.clear()
            ids = list(self._published)
            self._notify()
        for group_id in ids:
            self._publish(group_id, force=True)

    def _publish(self, group_id: str, *, force: bool = False) -> None:
        """Show the engine this group as it is now, if that differs from what it was last
        shown or its heartbeats are due. The snapshot is taken under the publication lock,
        so two threads never write an older state over a newer one."""
        broker = self._broker
        if broker is None:
            return
        while True:
            with self._cond:
                pub = self._published.setdefault(group_id, _Published())
            with pub.lock:
                if pub.dropped:
                    continue
                with self._cond:
                    group = self._groups.get(group_id)
                    snap = self._snapshot(group) if group is not None else _Snapshot()
                self._write(broker, group_id, pub, snap, force)
                return

    def _write(
        self, broker: Broker, group_id: str, pub: _Published, snap: _Snapshot, force: bool
    ) -> None:
        now = self._clock.monotonic()
        if force:
            pass
        elif pub.failed:
            if now - pub.at < _RETRY_S:
                return
        elif snap == pub.snapshot or (pub.snapshot is None and not snap.members):
            refresh_s = min((m[3] for m in snap.members), default=0) / 3000
            if not snap.members or now - pub.at < refresh_s:
                return
        heartbeat_ms = self._clock.now_ms()
        members = [
            MemberInfo(member_id, client_id, host, _partitions(broker, snap, raw), heartbeat_ms)
            for member_id, client_id, host, _, raw in snap.members
        ]
        try:
            broker.cluster.publish_group(
                group_id,
                members,
                protocol=snap.protocol,
                generation=snap.generation,
                session_ms=max((m[3] for m in snap.members), default=0),
            )
        except errors.PartitionletError as exc:
            # tried again by the reaper; the Kafka clients are served all the same
            if not pub.failed:
                log.warning("could not publish group %r to the engine: %s", group_id, exc)
            pub.failed, pub.at = True, now
            return
        pub.snapshot, pub.at, pub.failed = snap, now, False

    @staticmethod
    def _snapshot(group: Group) -> _Snapshot:
        return _Snapshot(
            group.generation,
            group.protocol or "",
            group.protocol_type == "consumer",
            tuple(
                (m.member_id, m.client_id, m.client_host, m.session_timeout_ms, m.assignment)
                for m in group.members.values()
            ),
        )

    # --- views ----------------------------------------------------------------------------

    def views(self) -> list[GroupView]:
        with self._cond:
            return [self._view(g) for g in self._groups.values()]

    def view(self, group_id: str) -> GroupView | None:
        with self._cond:
            group = self._groups.get(group_id)
            return self._view(group) if group is not None else None

    @staticmethod
    def _view(group: Group) -> GroupView:
        # between a rebalance and the leader's SyncGroup, members have no assignment yet
        return GroupView(
            group.group_id,
            group.state,
            group.generation,
            group.protocol_type or "",
            group.protocol or "",
            tuple(
                MemberView(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(group.protocol),
                    m.assignment,
                )
                for m in group.members.values()
            ),
        )


def _partitions(broker: Broker, snap: _Snapshot, raw: bytes) -> tuple[TopicPartition, ...]:
    """The engine's partitions of a member's assignment, as the leader's assignor wrote
    it; none when it is not Kafka's consumer format (another protocol type, or bytes
    that do not parse)."""
    if not snap.consumer or not raw:
        return ()
    try:
        decoded = ConsumerProtocolAssignment.decode(raw)
        parts = [(t.topic, p) for t in decoded.assigned_partitions for p in t.partitions]
    except Exception:  # the codec raises struct.error, ValueError, ...
        return ()
    out = []
    for topic, partition in parts:
        try:
            full = broker.full_name(topic)
        except errors.PartitionletError:
            continue
        out.append(TopicPartition(full, partition))
    return tuple(sorted(set(out)))
