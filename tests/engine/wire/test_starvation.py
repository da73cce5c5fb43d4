"""Requests that wait cannot starve the listener (issue 23): 64 long-polling fetches or 64
JoinGroups held behind a member that never rejoins hold no worker thread, so a normal
client is still served within 2 s; their waits are capped by the listener; closing the
attacker's sockets frees what they held."""

from __future__ import annotations

import time

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from engine.wire import KafkaServer, codes
from tests.engine.wire.test_bad_input import Raw, _batch, _produce
from tests.timing import scaled

ATTACKERS = 64  # as many as the listener has worker threads
NEVER = 2**31 - 1


def _encode(request, version: int) -> bytes:
    request.API_VERSION = version
    request.with_header(correlation_id=1, client_id="attacker")
    return bytes(request.encode(header=True, framed=True))


def _fetch_request(offset: int, *, max_wait_ms: int, min_bytes: int) -> FetchRequest:
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            T(
                topic="t",
                partitions=[
                    P(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def _join_request(member_id="", rebalance_timeout_ms=NEVER, session_timeout_ms=6000):
    return JoinGroupRequest(
        group_id="g",
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")],
    )


def _attack(server: KafkaServer, frame: bytes) -> list[Raw]:
    attackers = [Raw(server.address) for _ in range(ATTACKERS)]
    for raw in attackers:
        raw.send_bytes(frame)
    # nothing public shows that the listener took the requests in: give it a moment, so
    # that on a listener that holds a thread per request the pool is full before we ask
    time.sleep(0.5)
    return attackers


def _served_within_2s(server: KafkaServer) -> None:
    """A normal client: ApiVersions, a produce and a fetch of what it produced, each
    answered within 2 s."""
    raw = Raw(server.address)
    raw.sock.settimeout(scaled(2))
    try:
        start = time.monotonic()
        versions = raw.call(ApiVersionsRequest(), 0, ApiVersionsResponse)
        assert versions.error_code == 0
        error, offset = _produce(raw, "t", _batch(b"normal"))
        assert error == 0
        response = raw.call(_fetch_request(offset, max_wait_ms=1000, min_bytes=1), 4, FetchResponse)
        assert response.responses[0].partitions[0].records
        assert time.monotonic() - start < scaled(2)
    finally:
        raw.close()


def _join(raw: Raw, version: int, **kwargs):
    return raw.call(_join_request(**kwargs), version, JoinGroupResponse)


def test_64_long_polls_hold_no_thread_and_are_capped(make_server):
    server = make_server()
    attackers = _attack(server, _encode(_fetch_request(0, max_wait_ms=NEVER, min_bytes=NEVER), 4))
    try:
        _served_within_2s(server)
    finally:
        for raw in attackers:
            raw.close()
    # the listener answers a fetch after max_fetch_wait_ms, whatever the client asked
    capped = make_server(max_fetch_wait_ms=500)
    raw = Raw(capped.address)
    try:
        start = time.monotonic()
        response = raw.call(_fetch_request(0, max_wait_ms=NEVER, min_bytes=NEVER), 4, FetchResponse)
        assert response.responses[0].partitions[0].error_code == 0
        assert 0.4 < time.monotonic() - start < 3
    finally:
        raw.close()


def test_64_held_joins_hold_no_thread_and_closing_them_frees_them(make_server):
    server = make_server()
    leader = Raw(server.address)
    try:
        me = _join(leader, 3, session_timeout_ms=60_000)
        assert me.error_code == 0
        synced = leader.call(
            SyncGroupRequest(
                group_id="g",
                generation_id=me.generation_id,
                member_id=me.member_id,
                group_instance_id=None,
                assignments=[
                    SyncGroupRequest.SyncGroupRequestAssignment(
                        member_id=me.member_id, assignment=b""
                    )
                ],
            ),
            3,
            SyncGroupResponse,
        )
        assert synced.error_code == 0
        # 64 joins held until the leader rejoins, which it never does
        frame = _encode(_join_request(session_timeout_ms=1000), 3)
        attackers = _attack(server, frame)
        try:
            _served_within_2s(server)
            assert len(server.broker.groups.view("g").members) == 1 + ATTACKERS
        finally:
            for raw in attackers:
                raw.close()
        # their requests are cancelled: the members' sessions run out (1 s) and they go
        deadline = time.monotonic() + scaled(10)
        while len(server.broker.groups.view("g").members) > 1:
            assert time.monotonic() < deadline, "the closed members were never removed"
            time.sleep(0.05)
        assert [m.member_id for m in server.broker.groups.view("g").members] == [me.member_id]
    finally:
        leader.close()


def test_a_rebalance_waits_at_most_the_listeners_cap(make_server):
    server = make_server(max_rebalance_timeout_ms=1000)
    leader, joiner = Raw(server.address), Raw(server.address)
    try:
        me = _join(leader, 3, session_timeout_ms=60_000)
        assert me.error_code == 0
        # the leader never rejoins; the new member asked for a rebalance of 24 days
        joiner.sock.settimeout(5)
        start = time.monotonic()
        joined = _join(joiner, 3, session_timeout_ms=60_000)
        assert time.monotonic() - start < 4
        assert joined.error_code == codes.NONE
        assert joined.leader == joined.member_id  # the old leader was removed
    finally:
        leader.close()
        joiner.close()
