"""A raw-frame client of the group APIs, shared by the wire's group tests: one real socket
sending kafka-python's request classes, logged in with SASL/PLAIN when given a user."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
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
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from tests.timing import scaled

MEMBER_ID_REQUIRED = 79


class GroupClient:
    """One connection (logged in as `user` with `password` when given), with a method per
    group API; `call` sends any other request."""

    def __init__(
        self,
        address: tuple[str, int],
        user: str | None = None,
        password: str | None = None,
        client_id: str = "raw",
    ) -> None:
        self.sock = socket.create_connection(address, timeout=scaled(30))
        self.correlation = 0
        self.client_id = client_id
        if user is not None:
            self.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse, 1)
            token = b"\0" + user.encode() + b"\0" + (password or "").encode()
            answer = self.call(
                SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse, 1
            )
            assert answer.error_code == 0, answer

    def call(self, request: Any, response_class: Any, version: int) -> Any:
        self.correlation += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation, client_id=self.client_id)
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", self._exactly(4))
        return response_class.decode(self._exactly(size), version=version, header=True)

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()

    # --- the group APIs -------------------------------------------------------------------

    def join(
        self,
        group: str,
        topics: Iterable[str] = (),
        member_id: str = "",
        *,
        version: int = 5,
        session_timeout_ms: int = 30_000,
    ) -> Any:
        """A consumer's JoinGroup subscribing to `topics` (protocol "range")."""
        meta = subscription(topics)
        request = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=5000,
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=meta)],
        )
        return self.call(request, JoinGroupResponse, version)

    def join_new(self, group: str, topics: Iterable[str] = (), **kwargs: Any) -> Any:
        """KIP-394's two JoinGroups: learn a member id (MEMBER_ID_REQUIRED), join with it."""
        first = self.join(group, topics, **kwargs)
        assert first.error_code == MEMBER_ID_REQUIRED, first
        return self.join(group, topics, member_id=first.member_id, **kwargs)

    def sync(self, group: str, generation: int, member_id: str, assignments: Iterable = ()) -> Any:
        request = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=None,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in assignments
            ],
        )
        return self.call(request, SyncGroupResponse, 3)

    def heartbeat(self, group: str, generation: int, member_id: str) -> int:
        request = HeartbeatRequest(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None
        )
        return int(self.call(request, HeartbeatResponse, 3).error_code)

    def leave(self, group: str, member_id: str) -> int:
        M = LeaveGroupRequest.MemberIdentity
        request = LeaveGroupRequest(
            group_id=group, members=[M(member_id=member_id, group_instance_id=None)]
        )
        return int(self.call(request, LeaveGroupResponse, 3).members[0].error_code)

    def commit(
        self,
        group: str,
        topic: str,
        offsets: Mapping[int, int],
        generation: int = -1,
        member_id: str = "",
    ) -> dict[int, int]:
        """OffsetCommit of {partition: offset}: {partition: error code}."""
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        request = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[
                T(
                    name=topic,
                    partitions=[
                        T.OffsetCommitRequestPartition(
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for p, o in offsets.items()
                    ],
                )
            ],
        )
        response = self.call(request, OffsetCommitResponse, 7)
        return {p.partition_index: p.error_code for p in response.topics[0].partitions}

    def fetch(self, group: str) -> Any:
        request = OffsetFetchRequest(group_id=group, topics=None, require_stable=False)
        return self.call(request, OffsetFetchResponse, 7)

    def describe(self, group: str) -> Any:
        request = DescribeGroupsRequest(groups=[group], include_authorized_operations=False)
        return self.call(request, DescribeGroupsResponse, 5).groups[0]

    def list(self) -> set[str]:
        request = ListGroupsRequest(states_filter=[], types_filter=[])
        return {g.group_id for g in self.call(request, ListGroupsResponse, 4).groups}

    def delete(self, group: str) -> int:
        request = DeleteGroupsRequest(groups_names=[group])
        return int(self.call(request, DeleteGroupsResponse, 1).results[0].error_code)


def subscription(topics: Iterable[str]) -> bytes:
    """A consumer's JoinGroup metadata subscribing to `topics`."""
    return bytes(
        ConsumerProtocolSubscription(version=0, topics=list(topics), user_data=b"").encode()
    )


def assignment(topic: str, partitions: list[int]) -> bytes:
    """A leader's SyncGroup assignment of `partitions` of `topic`."""
    return bytes(
        ConsumerProtocolAssignment(
            version=0,
            assigned_partitions=[
                ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=partitions)
            ],
            user_data=b"",
        ).encode()
    )
