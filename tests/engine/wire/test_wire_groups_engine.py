"""Wire groups are the engine's groups: the listener publishes its Kafka groups' members and
their partitions into the catalog, so `cluster.group()`, `plet group describe` (another
process) and `reset_offsets` see them; a killed listener's members vanish after their
session timeout; engine consumers and Kafka clients refuse each other's groups. Real
clients (kafka-python in threads, confluent-kafka in a child process) against real
listeners (in-process, and `plet serve` as a process)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from kafka import KafkaConsumer
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from engine.clock import FakeClock
from engine.records import MemberInfo
from engine.wire import KafkaServer
from engine.wire.broker import Broker
from engine.wire.coordinator import JoinRequest, SyncRequest
from tests.engine.wire.group_client import GroupClient
from tests.timing import scaled


def _plet(*args):
    return [sys.executable, "-m", "engine.cli", *args]


def _produce(cluster, full, per_partition, partitions):
    with Producer(cluster) as producer:
        for p in range(partitions):
            for n in range(per_partition):
                producer.send(full, value=f"p{p}-{n}".encode(), partition=p)


def _wait(condition, timeout, what):
    deadline = time.monotonic() + scaled(timeout)
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _members(cluster, group):
    try:
        return cluster.group(group).members
    except errors.UnknownGroup:
        return []


class _Member(threading.Thread):
    """A kafka-python KafkaConsumer polling in its own thread (it is not thread-safe);
    no commits, so the group's committed offsets stay what the test set."""

    def __init__(self, bootstrap, topic, group, session_timeout_ms=6000):
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id="wg-client",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=300,
        )
        self.consumer.subscribe([topic])
        self.stop = threading.Event()

    def run(self):
        try:
            while not self.stop.is_set():
                self.consumer.poll(timeout_ms=100)
        finally:
            self.consumer.close(autocommit=False)  # LeaveGroup

    def close(self):
        self.stop.set()
        self.join(timeout=30)
        assert not self.is_alive()


def test_wire_members_show_in_the_engine_with_partitions_and_lag(wire):
    cluster, full, group = wire.cluster, "/kafka:wg-show", "wg-show"
    wire.server.broker.ensure_default_stream()
    cluster.create_topic(full, partitions=4)
    _produce(cluster, full, 10, 4)
    cluster.reset_offsets(group, full, 4)  # committed 4 everywhere, before anyone joins
    a = _Member(wire.bootstrap, "wg-show", group)
    b = _Member(wire.bootstrap, "wg-show", group)
    a.start()
    b.start()
    try:

        def settled():
            members = _members(cluster, group)
            return len(members) == 2 and all(len(m.assignment) == 2 for m in members)

        _wait(settled, 30, "two members with two partitions each in cluster.group()")
        info = cluster.group(group)
        assert info.state == "Stable"
        assert info.protocol == wire.server.broker.groups.view(group).protocol == "range"
        assert {m.client_id for m in info.members} == {"wg-client"}
        assert {m.host for m in info.members} == {"/127.0.0.1"}
        assert sorted(tp for m in info.members for tp in m.assignment) == [
            TopicPartition(full, p) for p in range(4)
        ]
        assert info.generation == wire.server.broker.groups.view(group).generation
        assert [(p.partition, p.committed, p.lag) for p in info.partitions] == [
            (p, 4, 6) for p in range(4)
        ]
        assert info.lag == 24
        assert group in {g.group_id for g in cluster.groups()}

        # another process sees them too
        done = subprocess.run(
            _plet("group", "describe", group, "--cluster", str(cluster.path), "--json"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        shown = json.loads(done.stdout)
        assert shown["state"] == "Stable" and shown["lag"] == 24
        assert sorted(m["member_id"] for m in shown["members"]) == sorted(
            m.member_id for m in info.members
        )
        assert sorted(
            (tp["topic"], tp["partition"]) for m in shown["members"] for tp in m["assignment"]
        ) == [(full, p) for p in range(4)]

        # live members: no reset (as Kafka); the engine's consumers would be refused too
        with pytest.raises(errors.IllegalState, match="2 live member"):
            cluster.reset_offsets(group, full, "earliest")
        assert cluster.group_kinds(group) == frozenset({"wire"})
    finally:
        a.close()  # LeaveGroup: withdrawn from the catalog before the answer
        b.close()
    assert cluster.group(group).members == []
    assert cluster.group_kinds(group) == frozenset()
    assert cluster.reset_offsets(group, full, "earliest") == {
        TopicPartition(full, p): 0 for p in range(4)
    }


_CHILD = r"""
import json, sys
from confluent_kafka import Consumer
from tests.timing import scaled
bootstrap, topic, group = sys.argv[1:4]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "wg-child",
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "session.timeout.ms": 3000, "heartbeat.interval.ms": 300})
def on_assign(consumer, parts):
    sys.stdout.write(json.dumps(sorted(p.partition for p in parts)) + "\n")
    sys.stdout.flush()
c.subscribe([topic], on_assign=on_assign)
while True:
    c.poll(0.1)
"""


def test_a_killed_listener_leaves_members_that_expire_after_their_session(tmp_path):
    path = tmp_path / "c"
    full, group = "/kafka:wg-kill", "wg-kill"
    with Cluster.open(path, name="kill") as cluster:
        cluster.create_stream("/kafka")
        cluster.create_topic(full, partitions=2)
    server = subprocess.Popen(
        _plet("serve", "--cluster", str(path), "--listen", "127.0.0.1:0"),
        stderr=subprocess.PIPE,
        text=True,
    )
    child = None
    try:
        match = re.search(r"on 127\.0\.0\.1:(\d+) ", server.stderr.readline())
        assert match
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, f"127.0.0.1:{match.group(1)}", "wg-kill", group],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert json.loads(child.stdout.readline()) == [0, 1]
        with Cluster.open(path) as cluster:
            _wait(lambda: len(_members(cluster, group)) == 1, 30, "the member in the catalog")
            (member,) = _members(cluster, group)
            assert member.client_id == "wg-child"
            assert member.assignment == (TopicPartition(full, 0), TopicPartition(full, 1))
            # longer than the session timeout (3 s): the listener refreshes what it published
            time.sleep(4.5)
            assert [m.member_id for m in _members(cluster, group)] == [member.member_id]
            assert cluster.group(group).members[0].last_heartbeat_ms > member.last_heartbeat_ms
            # no commit into the group from outside while the other process's member lives
            outsider = Consumer(cluster, group_id=group, enable_auto_commit=False)
            with pytest.raises(errors.CommitFailed, match="plet serve"):
                outsider.commit({TopicPartition(full, 0): 1})
            server.send_signal(signal.SIGKILL)  # no LeaveGroup, no withdrawal
            assert server.wait(timeout=30) == -signal.SIGKILL
            with pytest.raises(errors.IllegalState, match="live member"):
                cluster.reset_offsets(group, full, "earliest")
            with pytest.raises(errors.CommitFailed, match="plet serve"):
                outsider.commit({TopicPartition(full, 0): 1})
            _wait(lambda: _members(cluster, group) == [], 30, "the session timeout")
            outsider.commit({TopicPartition(full, 0): 1})  # the killed listener's expired
            outsider.close()
            assert cluster.group(group).state == "Empty"
            assert cluster.reset_offsets(group, full, "latest") == {
                TopicPartition(full, 0): 0,
                TopicPartition(full, 1): 0,
            }
    finally:
        for proc in (child, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def test_published_members_are_refreshed_then_expire_by_the_engine_rule(tmp_path):
    """What the test above shows with real processes and real time, as a unit test on a
    FakeClock: the listener refreshes what it published, and once it stops (killed), the
    engine drops its members after their session by its own rule."""
    clock = FakeClock()
    with Cluster.open(tmp_path / "c", clock=clock) as cluster:
        cluster.create_stream("/kafka")
        cluster.create_topic("/kafka:t", partitions=2)
        broker = Broker(cluster, "/kafka", "127.0.0.1", 0)
        # closing from the start: no reaper thread, so the test runs the reaper's steps
        # (expire, publish_all) itself, when it chooses
        broker.closing.set()
        coordinator = broker.groups

        def join(member_id):
            return coordinator.join(
                JoinRequest(
                    "g", member_id, None, "c", "/h", 3000, 5000, "consumer", [("range", b"")],
                    member_id == "",
                )
            )  # fmt: skip

        me = join("").member_id
        assert join(me).error == 0
        given = ConsumerProtocolAssignment(0, [("t", [0, 1])], b"").encode()
        assert coordinator.sync(SyncRequest("g", 1, me, "consumer", "range", [(me, given)]))[0] == 0
        (member,) = cluster.group("g").members
        assert member.assignment == (TopicPartition("/kafka:t", 0), TopicPartition("/kafka:t", 1))
        for _ in range(3):  # 4.5 s, longer than the session, in steps of the listener's
            clock.advance(1.5)
            assert coordinator.heartbeat("g", 1, me) == 0
            coordinator.expire()
            coordinator.publish_all()
        (later,) = cluster.group("g").members
        assert later.last_heartbeat_ms == member.last_heartbeat_ms + 4500
        # the listener is killed: nothing refreshes or withdraws its members any more
        clock.advance(3.0)
        assert [m.member_id for m in cluster.group("g").members] == [me]  # 3 s: not past
        with pytest.raises(errors.IllegalState, match="live member"):
            cluster.reset_offsets("g", "/kafka:t", "earliest")
        clock.advance(0.001)
        assert cluster.group("g").members == []
        assert cluster.group("g").state == "Empty"
        assert cluster.reset_offsets("g", "/kafka:t", "latest") == {
            TopicPartition("/kafka:t", 0): 0,
            TopicPartition("/kafka:t", 1): 0,
        }


def test_a_kafka_client_cannot_join_a_group_engine_consumers_hold(wire):
    cluster, full, group = wire.cluster, "/kafka:wg-mixed-a", "wg-mixed-a"
    wire.server.broker.ensure_default_stream()
    cluster.create_topic(full, partitions=2)
    consumer = Consumer(cluster, group_id=group, auto_offset_reset="earliest")
    consumer.subscribe([full])
    consumer.poll(timeout_ms=100)
    raw = GroupClient(wire.server.address)
    try:
        assert raw.join(group).error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
        assert cluster.group_kinds(group) == frozenset({"engine"})
        consumer.close()  # leaves at once
        first = raw.join(group)
        assert first.error_code == 79  # MEMBER_ID_REQUIRED: now it may join
        assert raw.join(group, member_id=first.member_id).error_code == 0
    finally:
        raw.close()


def test_an_engine_consumer_cannot_join_a_group_kafka_clients_hold(wire):
    cluster, full, group = wire.cluster, "/kafka:wg-mixed-b", "wg-mixed-b"
    wire.server.broker.ensure_default_stream()
    cluster.create_topic(full, partitions=2)
    member = _Member(wire.bootstrap, "wg-mixed-b", group)
    member.start()
    consumer = Consumer(cluster, group_id=group, auto_offset_reset="earliest")
    try:
        _wait(
            lambda: [len(m.assignment) for m in _members(cluster, group)] == [2],
            30,
            "the Kafka client as a member with both partitions",
        )
        with pytest.raises(errors.IllegalState, match="live Kafka clients"):
            consumer.subscribe([full])
            consumer.poll(timeout_ms=100)
        with pytest.raises(errors.IllegalState, match="live Kafka clients"):
            consumer.poll(timeout_ms=100)
        (wire_member,) = cluster.group(group).members
        assert len(wire_member.assignment) == 2  # the engine assigned nothing over it
        member.close()
        # the group is free: the same consumer joins and gets every partition
        _wait(
            lambda: consumer.poll(timeout_ms=100) is not None and len(consumer.assignment()) == 2,
            30,
            "the engine consumer to own both partitions",
        )
        assert cluster.group_kinds(group) == frozenset({"engine"})
    finally:
        if member.is_alive():
            member.close()
        consumer.close()


def test_publish_group_checks_its_arguments_and_withdraws(wire):
    cluster, full, group = wire.cluster, "/kafka:wg-api", "wg-api"
    wire.server.broker.ensure_default_stream()
    cluster.create_topic(full, partitions=2)
    now = time.time_ns() // 1_000_000
    m = MemberInfo("m-1", "c", "/h", (TopicPartition(full, 1), TopicPartition(full, 9)), now)
    for kwargs in (
        {"protocol": "range", "generation": -1, "session_ms": 1000},
        {"protocol": None, "generation": 1, "session_ms": 1000},
        {"protocol": "range", "generation": 1, "session_ms": "1000"},
    ):
        with pytest.raises(errors.InvalidArgument):
            cluster.publish_group(group, [m], **kwargs)
    with pytest.raises(errors.InvalidArgument, match="distinct"):
        cluster.publish_group(group, [m, m], protocol="range", generation=1, session_ms=1000)
    with pytest.raises(errors.InvalidArgument):
        cluster.publish_group("", [m], protocol="range", generation=1, session_ms=1000)
    assert cluster.group_kinds(group) == frozenset()  # nothing half-written

    cluster.publish_group(group, [m], protocol="range", generation=3, session_ms=60_000)
    info = cluster.group(group)
    # partition 9 does not exist: left out
    assert [(x.member_id, x.assignment) for x in info.members] == [
        ("m-1", (TopicPartition(full, 1),))
    ]
    assert (info.state, info.generation, info.protocol) == ("Stable", 3, "range")
    cluster.publish_group(group, [], protocol="range", generation=3, session_ms=60_000)
    assert cluster.group(group).members == []


def test_a_closed_listener_withdraws_its_members(wire):
    cluster, full, group = wire.cluster, "/kafka:wg-close", "wg-close"
    wire.server.broker.ensure_default_stream()
    cluster.create_topic(full, partitions=3)
    server = KafkaServer(cluster, listen=("127.0.0.1", 0)).start()
    raw = GroupClient(server.address)
    try:
        me = raw.join(group).member_id
        assert raw.join(group, member_id=me).error_code == 0
        TP = ConsumerProtocolAssignment.TopicPartition
        mine = ConsumerProtocolAssignment(
            assigned_partitions=[TP(topic="wg-close", partitions=[0, 2])], user_data=b""
        ).encode(version=0)
        assert raw.sync(group, 1, me, [(me, bytes(mine))]).error_code == 0
        # published before the SyncGroup answer
        (member,) = cluster.group(group).members
        assert (member.member_id, member.client_id) == (me, "raw")
        assert member.assignment == (TopicPartition(full, 0), TopicPartition(full, 2))
    finally:
        raw.close()
        server.close()
    assert cluster.group(group).members == []
    assert cluster.group(group).state == "Empty"
