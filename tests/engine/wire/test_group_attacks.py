"""Attacks on another user's consumer group over a live SASL listener (issue 23, finding 1):
raw frames built with kafka-python's protocol classes over real sockets, each logged in as
a user. alice owns /alice and the group `victim` (a live, Stable member); mallory may read
nothing of /alice (she has /mallory); eve may consume /alice but the group is not hers.
Then a normal owner's group works end to end with kafka-python's consumer and admin client.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KTP
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

from engine import Cluster, Producer
from engine.wire import KafkaServer
from tests.timing import scaled, wait_until

USERS = {
    "alice": "alice's long secret",
    "mallory": "mallory's long secret",
    "eve": "eve's long secret",
    "nobody": "nobody's long secret",
}
GROUP_AUTHORIZATION_FAILED, UNKNOWN_MEMBER_ID = 30, 25


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("gattack") / "cluster"
    with Cluster.open(path, name="gattack") as cluster:
        for name, password in USERS.items():
            cluster.add_user(name, password)
        cluster.create_stream(
            "/alice",
            produce_perm="u:<creator> | u:alice",
            consume_perm="u:alice | u:eve",
            auto_create=False,
        )
        cluster.create_stream("/mallory", produce_perm="u:mallory", consume_perm="u:mallory")
        cluster.create_topic("/alice:t", 2)
        cluster.create_topic("/alice:e2e", 1)
        cluster.create_topic("/mallory:m", 2)
        producer = Producer(cluster)
        for i in range(1000):
            producer.send("/alice:t", value=b"%d" % i, partition=i % 2)
        for i in range(10):
            producer.send("/alice:e2e", value=b"%d" % i, partition=0)
        producer.flush()
        producer.close()
        listener = KafkaServer(
            cluster, listen=("127.0.0.1", 0), sasl=True, default_stream="/alice"
        ).start()
        try:
            yield cluster, listener
        finally:
            listener.close()


class Client:
    """One connection logged in as `user`, sending kafka-python's request classes."""

    def __init__(self, address, user):
        self.sock = socket.create_connection(address, timeout=scaled(30))
        self.correlation = 0
        self.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse, 1)
        token = b"\0" + user.encode() + b"\0" + USERS[user].encode()
        answer = self.call(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse, 1)
        assert answer.error_code == 0, answer

    def call(self, request, response_class, version):
        self.correlation += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation, client_id=f"raw-{id(self)}")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", self._exactly(4))
        return response_class.decode(self._exactly(size), version=version, header=True)

    def _exactly(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    def close(self):
        self.sock.close()

    # --- the group APIs ---------------------------------------------------------------

    def join(self, group, topics, member_id=""):
        meta = ConsumerProtocolSubscription(version=0, topics=topics, user_data=b"").encode()
        request = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=30000,
            rebalance_timeout_ms=5000,
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=meta)],
        )
        return self.call(request, JoinGroupResponse, 5)

    def sync(self, group, generation, member_id, assignments=()):
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

    def heartbeat(self, group, generation, member_id):
        request = HeartbeatRequest(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None
        )
        return self.call(request, HeartbeatResponse, 3).error_code

    def leave(self, group, member_id):
        M = LeaveGroupRequest.MemberIdentity
        request = LeaveGroupRequest(
            group_id=group, members=[M(member_id=member_id, group_instance_id=None)]
        )
        return self.call(request, LeaveGroupResponse, 3).members[0].error_code

    def commit(self, group, topic, offsets, generation=-1, member_id=""):
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

    def fetch(self, group):
        request = OffsetFetchRequest(group_id=group, topics=None, require_stable=False)
        return self.call(request, OffsetFetchResponse, 7)

    def describe(self, group):
        request = DescribeGroupsRequest(groups=[group], include_authorized_operations=False)
        return self.call(request, DescribeGroupsResponse, 5).groups[0]

    def list(self):
        request = ListGroupsRequest(states_filter=[], types_filter=[])
        return {g.group_id for g in self.call(request, ListGroupsResponse, 4).groups}

    def delete(self, group):
        request = DeleteGroupsRequest(groups_names=[group])
        return self.call(request, DeleteGroupsResponse, 1).results[0].error_code


def _assignment(topic, partitions):
    return ConsumerProtocolAssignment(
        version=0,
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=partitions)
        ],
        user_data=b"",
    ).encode()


def committed(cluster, group):
    return {p.partition: p.committed for p in cluster.group(group).partitions}


@pytest.fixture
def victim(server):
    """alice's group `victim`: one live, Stable member (alice's) that committed 498/502."""
    cluster, listener = server
    alice = Client(listener.address, "alice")
    first = alice.join("victim", ["t"])
    assert first.error_code == 79  # MEMBER_ID_REQUIRED
    joined = alice.join("victim", ["t"], member_id=first.member_id)
    assert joined.error_code == 0 and joined.leader == first.member_id
    me, generation = first.member_id, joined.generation_id
    synced = alice.sync("victim", generation, me, [(me, _assignment("t", [0, 1]))])
    assert synced.error_code == 0
    assert alice.commit("victim", "t", {0: 498, 1: 502}, generation, me) == {0: 0, 1: 0}
    try:
        yield cluster, listener, alice, me, generation
    finally:
        alice.leave("victim", me)
        alice.close()
        cluster.delete_group("victim")


def test_another_user_can_neither_see_nor_touch_a_live_group(victim):
    cluster, listener, alice, me, generation = victim
    mallory = Client(listener.address, "mallory")
    try:
        # DescribeGroups: refused, no member ids, hosts or assignment
        described = mallory.describe("victim")
        assert described.error_code == GROUP_AUTHORIZATION_FAILED
        assert described.members == []
        assert "victim" not in mallory.list()
        assert "victim" in alice.list()
        assert [m.member_id for m in alice.describe("victim").members] == [me]
        # her member id is hers alone: LeaveGroup, Heartbeat, SyncGroup, OffsetCommit
        assert mallory.leave("victim", me) == UNKNOWN_MEMBER_ID
        assert mallory.heartbeat("victim", generation, me) == UNKNOWN_MEMBER_ID
        assert mallory.sync("victim", generation, me).error_code == UNKNOWN_MEMBER_ID
        # (she may not commit into the group at all: the permission is checked first)
        assert mallory.commit("victim", "t", {0: 0}, generation, me) == {
            0: GROUP_AUTHORIZATION_FAILED
        }
        # JoinGroup with her own topic, to lead and assign herself everything: refused
        assert mallory.join("victim", ["/mallory:m"]).error_code == GROUP_AUTHORIZATION_FAILED
        # a simple commit, OffsetFetch and DeleteGroups: refused
        assert mallory.commit("victim", "t", {0: 0, 1: 0}) == dict.fromkeys(
            (0, 1), GROUP_AUTHORIZATION_FAILED
        )
        assert mallory.fetch("victim").error_code == GROUP_AUTHORIZATION_FAILED
        assert mallory.delete("victim") == GROUP_AUTHORIZATION_FAILED
        # alice's member is still there, Stable, with her offsets
        assert alice.heartbeat("victim", generation, me) == 0
        assert alice.describe("victim").group_state == "Stable"
        assert committed(cluster, "victim") == {0: 498, 1: 502}
    finally:
        mallory.close()


def test_a_consume_only_user_cannot_commit_into_a_live_group(victim):
    cluster, listener, alice, me, generation = victim
    eve = Client(listener.address, "eve")
    try:
        assert eve.commit("victim", "t", {0: 0, 1: 0}) == dict.fromkeys(
            (0, 1), GROUP_AUTHORIZATION_FAILED
        )
        # even one allowed to commit may not commit from outside while members are live
        cluster.set_group_permissions("victim", commit_perm="u:<creator> | u:eve")
        assert eve.commit("victim", "t", {0: 0, 1: 0}) == dict.fromkeys((0, 1), UNKNOWN_MEMBER_ID)
        # nor with alice's member id, which is alice's alone
        assert eve.commit("victim", "t", {0: 0}, generation, me) == {0: UNKNOWN_MEMBER_ID}
        assert alice.commit("victim", "t", {0: 0}) == {0: UNKNOWN_MEMBER_ID}
        assert committed(cluster, "victim") == {0: 498, 1: 502}
        assert alice.describe("victim").group_state == "Stable"
    finally:
        cluster.set_group_permissions("victim", commit_perm="")
        eve.close()


def test_a_user_without_rights_cannot_create_groups(server):
    cluster, listener = server
    nobody = Client(listener.address, "nobody")
    mallory = Client(listener.address, "mallory")
    try:
        before = {g.group_id for g in cluster.groups()}
        for n in range(20):
            assert nobody.join(f"flood-{n}", ["t"]).error_code == GROUP_AUTHORIZATION_FAILED
            assert nobody.commit(f"flood-c{n}", "t", {0: 1}) == {0: GROUP_AUTHORIZATION_FAILED}
        # mallory may create groups on her own topic, up to the limit
        cluster.set_group_limit(3)
        for n in range(3):
            assert mallory.commit(f"mine-{n}", "/mallory:m", {0: 1}) == {0: 0}
        assert mallory.commit("mine-3", "/mallory:m", {0: 1}) == {0: GROUP_AUTHORIZATION_FAILED}
        assert mallory.join("mine-4", ["/mallory:m"]).error_code == GROUP_AUTHORIZATION_FAILED
        created = {g.group_id for g in cluster.groups()} - before
        assert created == {"mine-0", "mine-1", "mine-2"}
        for n in range(3):
            assert mallory.delete(f"mine-{n}") == 0
    finally:
        cluster.set_group_limit(1000)
        nobody.close()
        mallory.close()


def test_an_owners_group_works_end_to_end(server):
    cluster, listener = server
    bootstrap = "{}:{}".format(*listener.address)
    sasl = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": USERS["alice"],
    }
    consumer = KafkaConsumer(
        "e2e",
        group_id="alice-e2e",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **sasl,
    )
    got = []
    deadline = time.monotonic() + scaled(30)
    while len(got) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    assert sorted(got, key=int) == [b"%d" % i for i in range(10)]
    consumer.commit()
    admin = KafkaAdminClient(**sasl)
    try:
        described = admin.describe_groups(["alice-e2e"])["alice-e2e"]
        assert described["error"] is None and described["group_state"] == "Stable"
        assert len(described["members"]) == 1
        assert consumer.committed(KTP("e2e", 0)) == 10  # OffsetFetch
        consumer.close()
        wait_until(lambda: not cluster.group_kinds("alice-e2e"), message="alice's member to leave")
        assert cluster.group_permissions("alice-e2e").creator == "alice"
        assert admin.delete_groups(["alice-e2e"]) == {"alice-e2e": "OK"}
        assert "alice-e2e" not in {g.group_id for g in cluster.groups()}
    finally:
        admin.close()


def test_a_confluent_consumer_creates_and_commits_its_own_group(server):
    """librdkafka's subscription metadata names its topics too: the group becomes its
    user's on the first JoinGroup."""
    from confluent_kafka import Consumer as CKConsumer

    cluster, listener = server
    consumer = CKConsumer(
        {
            "bootstrap.servers": "{}:{}".format(*listener.address),
            "group.id": "alice-ck",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": USERS["alice"],
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["e2e"])
        got = 0
        deadline = time.monotonic() + scaled(30)
        while got < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        assert got == 10
        consumer.commit(asynchronous=False)
        assert cluster.group_permissions("alice-ck").creator == "alice"
        assert committed(cluster, "alice-ck") == {0: 10}
    finally:
        consumer.close()
