"""JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ListGroups and DescribeGroups: Kafka's
classic consumer groups, coordinated by `engine.wire.coordinator` (node 0 coordinates every
group). Assignments are computed by the clients' own assignors; committed offsets are the
engine's (handlers/offsets.py), and the coordinator publishes the members with their
partitions into the engine (`Cluster.publish_group`), so `cluster.groups()` sees a wire
group with its members and lag, in any process.

Each request checks the group's permissions (engine.groups.perms, docs/WIRE.md "Group
permissions") as the connection's user: JoinGroup join_perm (creating the group for the
user when it has none), SyncGroup and Heartbeat join_perm again (a revoked member is
removed: `member_allowed`), DescribeGroups describe_perm, DeleteGroups delete_perm, each
refused with GROUP_AUTHORIZATION_FAILED; ListGroups lists what the user may describe.

Version ranges: what kafka-python 3.0.12 (JoinGroup 7, SyncGroup 5, Heartbeat 4, LeaveGroup
5, ListGroups 5, DescribeGroups 5), confluent-kafka 2.16.1 and aiokafka 0.14 negotiate;
flexible versions (JoinGroup 6+, SyncGroup 4+, Heartbeat 4, LeaveGroup 4+, ListGroups 3+,
DescribeGroups 5) are the codec's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from engine import errors
from engine.groups.states import DEAD
from engine.wire import codes
from engine.wire.coordinator import JoinRequest, JoinResult, SyncRequest, Waiting
from engine.wire.park import Park
from engine.wire.registry import api

T = TypeVar("T")
# a held JoinGroup or SyncGroup looks again this often even when nothing woke it
_RECHECK_S = 1.0

_CLASSIC = "classic"  # KIP-848's name for this protocol, in ListGroups v5


def _client_id(request: Any) -> str:
    header = getattr(request, "header", None)
    return (getattr(header, "client_id", None) or "") if header is not None else ""


def _client_host(session: Any) -> str:
    peer = session.peer
    return f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""  # as Kafka shows it


def _bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return bytes(value.encode())  # an ApiData the codec decoded into a structure


def _parked(answer: T | Waiting[T], respond: Callable[[T], Any]) -> Any:
    """The response of a coordinator answer, or a Park while it is held (no thread waits:
    engine.wire.park), cancelled when the client goes away."""
    if not isinstance(answer, Waiting):
        return respond(answer)
    waiting = answer

    def resume() -> Any:
        seq = waiting.changed.seq
        result = waiting.poll()
        if result is not None:
            return respond(result)
        return Park(resume, waiting.changed, seq, time.monotonic() + _RECHECK_S, waiting.cancel)

    return resume()


def _principal(session: Any) -> str:
    """The logged-in user (without SASL, the listener's): its member ids are its own."""
    return str(session.broker.cluster.principal.user)


def _may(session: Any, group_id: str, perm: str) -> bool:
    try:
        session.broker.cluster.authorize_group(group_id, perm)
    except errors.PartitionletError:
        return False
    return True


def member_allowed(session: Any, group_id: str, member_id: str) -> int:
    """The error of a member's SyncGroup, Heartbeat or OffsetCommit by its join_perm, as
    the user holds it now: a user whose permission was revoked gets
    GROUP_AUTHORIZATION_FAILED, and their member is removed (the others rebalance at
    once), so it is gone within a heartbeat, not at its next JoinGroup."""
    if not group_id:
        return codes.NONE  # the coordinator's answer: no such member
    try:
        session.broker.cluster.authorize_group(group_id, "join_perm", claim=False)
    except errors.AccessDenied:
        if member_id:  # only the user's own member: another's id stays untouched
            session.broker.groups.leave(group_id, [(member_id, None)], _principal(session))
        return codes.GROUP_AUTHORIZATION_FAILED
    except errors.PartitionletError as exc:
        return codes.of(exc)
    return codes.NONE


def _subscribed(session: Any, protocol_type: str, protocols: list[tuple[str, bytes]]) -> list[str]:
    """The full names of the topics a consumer's JoinGroup subscribes to (in any of its
    protocols' metadata); none for another protocol type or metadata that does not parse."""
    if protocol_type != "consumer":
        return []
    out = set()
    for _, meta in protocols:
        try:
            topics = ConsumerProtocolSubscription.decode(meta).topics or []
        except Exception:  # the codec raises struct.error, ValueError, ...
            continue
        for topic in topics:
            try:
                out.add(session.broker.full_name(topic))
            except errors.PartitionletError:
                continue
    return sorted(out)


# from v2 (Kafka 4.0 removed v0-1, KIP-896) to v9: v8 adds a reason (logged by Kafka, not
# here), v9 skip_assignment (KIP-814, for server-side assignors: always false here)
@api(JoinGroupRequest, JoinGroupResponse, (2, 9))
def join_group(session: Any, request: Any, version: int) -> Any:
    protocols = [(p.name, _bytes(p.metadata)) for p in request.protocols]
    denied = None
    if request.group_id:
        # join_perm; a new group becomes the caller's if it may consume a topic it names
        try:
            session.broker.cluster.authorize_group(
                request.group_id,
                "join_perm",
                topics=_subscribed(session, request.protocol_type, protocols),
            )
        except errors.AccessDenied:
            denied = codes.GROUP_AUTHORIZATION_FAILED
        except errors.PartitionletError as exc:
            denied = codes.of(exc)
    if denied is not None:
        return JoinGroupResponse(
            throttle_time_ms=0,
            error_code=denied,
            generation_id=-1,
            protocol_type=None,
            protocol_name=None if version >= 7 else "",
            leader="",
            skip_assignment=False,
            member_id=request.member_id or "",
            members=[],
        )
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id or "",
        instance_id=request.group_instance_id if version >= 5 else None,
        client_id=_client_id(request),
        client_host=_client_host(session),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else -1,
        protocol_type=request.protocol_type,
        protocols=protocols,
        require_known_member_id=version >= 4,
        principal=_principal(session),
    )
    answer = session.broker.groups.begin_join(join)
    return _parked(answer, lambda result: _join_response(result, version))


def _join_response(result: JoinResult, version: int) -> Any:
    M = JoinGroupResponse.JoinGroupResponseMember
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        # non-nullable before v7: an empty name where there is none
        protocol_name=result.protocol if result.protocol is not None or version >= 7 else "",
        leader=result.leader,
        skip_assignment=False,
        member_id=result.member_id,
        members=[
            M(member_id=m, group_instance_id=instance, metadata=meta)
            for m, instance, meta in result.members
        ],
    )


@api(SyncGroupRequest, SyncGroupResponse, (0, 5))
def sync_group(session: Any, request: Any, version: int) -> Any:
    denied = member_allowed(session, request.group_id, request.member_id)
    if denied != codes.NONE:
        return SyncGroupResponse(
            throttle_time_ms=0,
            error_code=denied,
            protocol_type=None,
            protocol_name=None,
            assignment=b"",
        )
    sync = SyncRequest(
        group_id=request.group_id,
        generation=request.generation_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol=request.protocol_name if version >= 5 else None,
        assignments=[(a.member_id, _bytes(a.assignment)) for a in request.assignments or ()],
        principal=_principal(session),
    )
    answer = session.broker.groups.begin_sync(sync)
    return _parked(
        answer,
        lambda a: SyncGroupResponse(
            throttle_time_ms=0,
            error_code=a[0],
            protocol_type=a[1],
            protocol_name=a[2],
            assignment=a[3],
        ),
    )


@api(HeartbeatRequest, HeartbeatResponse, (0, 4))
def heartbeat(session: Any, request: Any, version: int) -> Any:
    error = member_allowed(session, request.group_id, request.member_id)
    if error == codes.NONE:
        error = session.broker.groups.heartbeat(
            request.group_id, request.generation_id, request.member_id, _principal(session)
        )
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


@api(LeaveGroupRequest, LeaveGroupResponse, (0, 5))
def leave_group(session: Any, request: Any, version: int) -> Any:
    if version < 3:
        (error,) = session.broker.groups.leave(
            request.group_id, [(request.member_id, None)], _principal(session)
        )
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
    who = [(m.member_id, m.group_instance_id) for m in request.members]
    errors_ = session.broker.groups.leave(request.group_id, who, _principal(session))
    R = LeaveGroupResponse.MemberResponse
    return LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        members=[
            R(member_id=m, group_instance_id=instance, error_code=e)
            for (m, instance), e in zip(who, errors_, strict=True)
        ],
    )


def _engine_groups(session: Any) -> dict[str, str]:
    """Group id -> state of the groups the engine knows (committed offsets, or members of
    engine consumers) that the caller may describe: wire clients list them too."""
    try:
        return {g.group_id: g.state for g in session.broker.cluster.groups()}
    except errors.PartitionletError:
        return {}


@api(DeleteGroupsRequest, DeleteGroupsResponse, (0, 2))
def delete_groups(session: Any, request: Any, version: int) -> Any:
    """The engine's `delete_group`: a group's committed offsets and state go; refused while
    it has live members (engine consumers or Kafka clients), as Kafka refuses a group that
    is not empty."""
    R = DeleteGroupsResponse.DeletableGroupResult
    results = []
    for group_id in request.groups_names:
        try:
            session.broker.cluster.delete_group(group_id)
            error = codes.NONE
        except errors.UnknownGroup:
            error = codes.GROUP_ID_NOT_FOUND
        except errors.IllegalState:
            error = codes.NON_EMPTY_GROUP
        except errors.AccessDenied:
            error = codes.GROUP_AUTHORIZATION_FAILED
        except errors.InvalidArgument:
            error = codes.INVALID_GROUP_ID
        except errors.PartitionletError as exc:
            error = codes.of(exc)
        results.append(R(group_id=group_id, error_code=error))
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)


@api(ListGroupsRequest, ListGroupsResponse, (0, 5))
def list_groups(session: Any, request: Any, version: int) -> Any:
    listed = _engine_groups(session)
    for view in session.broker.groups.views():
        if view.group_id in listed or _may(session, view.group_id, "describe_perm"):
            listed[view.group_id] = view.state
    states = set(request.states_filter or ()) if version >= 4 else set()
    types = {t.lower() for t in request.types_filter or ()} if version >= 5 else set()
    if types and _CLASSIC not in types:
        listed = {}
    G = ListGroupsResponse.ListedGroup
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        groups=[
            G(group_id=g, protocol_type="consumer", group_state=state, group_type=_CLASSIC)
            for g, state in sorted(listed.items())
            if not states or state in states
        ],
    )


@api(DescribeGroupsRequest, DescribeGroupsResponse, (0, 5))
def describe_groups(session: Any, request: Any, version: int) -> Any:
    G = DescribeGroupsResponse.DescribedGroup
    M = G.DescribedGroupMember
    engine_groups: dict[str, str] | None = None
    out = []
    for group_id in request.groups:
        if not _may(session, group_id, "describe_perm"):
            out.append(
                G(
                    error_code=codes.GROUP_AUTHORIZATION_FAILED,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                    authorized_operations=None,  # type: ignore[arg-type]  # the stub wants set[int], the codec takes None too
                )
            )
            continue
        view = session.broker.groups.view(group_id)
        if view is not None and view.members:
            out.append(
                G(
                    error_code=codes.NONE,
                    group_id=group_id,
                    group_state=view.state,
                    protocol_type=view.protocol_type,
                    protocol_data=view.protocol,
                    members=[
                        M(
                            member_id=m.member_id,
                            group_instance_id=m.instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in view.members
                    ],
                    authorized_operations=None,  # type: ignore[arg-type]  # the stub wants set[int], the codec takes None too
                )
            )
            continue
        if engine_groups is None:
            engine_groups = _engine_groups(session)
        # a group with committed offsets only is Empty; one nobody knows is Dead (Kafka's
        # answer, with no error, before DescribeGroups v6)
        state = engine_groups.get(group_id, DEAD)
        out.append(
            G(
                error_code=codes.NONE,
                group_id=group_id,
                group_state=state,
                protocol_type="consumer" if state != DEAD else "",
                protocol_data="",
                members=[],  # engine consumers' members have no Kafka protocol metadata
                authorized_operations=None,  # type: ignore[arg-type]  # the stub wants set[int], the codec takes None too
            )
        )
    return DescribeGroupsResponse(throttle_time_ms=0, groups=out)
