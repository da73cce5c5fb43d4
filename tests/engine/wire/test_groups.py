"""Kafka consumer groups over the wire: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
ListGroups, DescribeGroups, with the clients' own assignors, and commits checked against
the generation. Real clients (kafka-python, confluent-kafka in other processes, aiokafka)
against a real listener on a real cluster."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time

from aiokafka import AIOKafkaConsumer
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka.admin import KafkaAdminClient
from kafka.protocol.consumer.group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
)
from kafka.structs import OffsetAndMetadata as KOffsetAndMetadata

from engine import Producer
from engine.clock import FakeClock
from engine.wire import codes
from engine.wire.coordinator import GroupCoordinator, JoinRequest, SyncRequest
from tests.engine.wire.conftest import run_async
from tests.engine.wire.group_client import GroupClient, subscription
from tests.timing import scaled


def _topic(wire, full, partitions):
    wire.server.broker.ensure_default_stream()  # /kafka is made on first use
    wire.cluster.create_topic(full, partitions=partitions)


def _produce(cluster, full, per_partition, partitions, start=0):
    """`per_partition` messages in each partition, values "p<partition>-<n>"."""
    with Producer(cluster) as producer:
        for p in range(partitions):
            for n in range(start, start + per_partition):
                producer.send(full, value=f"p{p}-{n}".encode(), partition=p)


def _wait(condition, timeout, what):
    deadline = time.monotonic() + scaled(timeout)
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class _Member(threading.Thread):
    """A kafka-python KafkaConsumer subscribed in its own thread (it is not thread-safe),
    recording what it reads and what it is assigned."""

    def __init__(self, bootstrap, topic, group, **config):
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            # A member that joined before its metadata knew the topic (a busy machine) is
            # assigned nothing; fresh metadata makes it join again, within a second.
            metadata_max_age_ms=1000,
            **config,
        )
        # ... but kafka-python 3.0 did not always take the assignment of that second join
        # (seen beside CPU hogs: its SyncGroup answered, no partition assigned for the rest
        # of the test), so the member learns the topic before it joins
        assert self.consumer.partitions_for_topic(topic)
        self.consumer.subscribe([topic])
        self.read: list[tuple[int, int, bytes]] = []
        self.assigned: set[int] = set()
        self.stop = threading.Event()

    def run(self):
        try:
            while not self.stop.is_set():
                for tp, records in self.consumer.poll(timeout_ms=100).items():
                    self.read.extend((tp.partition, r.offset, r.value) for r in records)
                self.assigned = {tp.partition for tp in self.consumer.assignment()}
        finally:
            self.consumer.close()

    def close(self):
        self.stop.set()
        self.join(timeout=30)
        assert not self.is_alive()


def test_kafka_python_members_share_partitions_and_take_over_on_close(wire):
    full = "/kafka:grp-share"
    _topic(wire, full, 4)
    a = _Member(wire.bootstrap, "grp-share", "kp-share")
    a.start()
    _wait(lambda: a.assigned == {0, 1, 2, 3}, 60, "the first member to own everything")
    b = _Member(wire.bootstrap, "grp-share", "kp-share")
    b.start()
    _wait(lambda: len(a.assigned) == 2 and len(b.assigned) == 2, 30, "a 2 + 2 assignment")
    assert a.assigned | b.assigned == {0, 1, 2, 3}
    _produce(wire.cluster, full, 10, 4)
    _wait(lambda: len(a.read) + len(b.read) >= 40, 20, "40 messages")
    time.sleep(0.5)  # a duplicate would show up here
    both = a.read + b.read
    assert sorted((p, o) for p, o, _ in both) == [(p, o) for p in range(4) for o in range(10)]
    assert {p for p, _, _ in a.read} == a.assigned
    assert {p for p, _, _ in b.read} == b.assigned

    b.close()  # LeaveGroup, after committing its positions (auto-commit on)
    _wait(lambda: a.assigned == {0, 1, 2, 3}, 20, "the survivor to take every partition")
    _produce(wire.cluster, full, 5, 4, start=10)
    _wait(lambda: len(a.read) >= 20 + 20, 20, "the second batch")
    time.sleep(0.5)
    later = sorted((p, o) for p, o, _ in a.read[len(a.read) - 20 :])
    # b's partitions resumed from b's commits: nothing read twice, nothing lost
    assert later == [(p, o) for p in range(4) for o in range(10, 15)]
    assert len(a.read) == 40
    a.close()
    info = wire.cluster.group("kp-share")
    assert {(gp.partition, gp.committed, gp.lag) for gp in info.partitions} == {
        (p, 15, 0) for p in range(4)
    }


_CHILD = r"""
import json, sys
from confluent_kafka import Consumer
from tests.timing import scaled
bootstrap, topic, group = sys.argv[1:4]
out = lambda **kw: (sys.stdout.write(json.dumps(kw) + "\n"), sys.stdout.flush())
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
              "partition.assignment.strategy": "cooperative-sticky"})
def on_assign(consumer, parts):
    out(event="assign", partitions=[p.partition for p in parts])
def on_revoke(consumer, parts):
    out(event="revoke", partitions=[p.partition for p in parts])
c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
while True:
    m = c.poll(0.1)
    if m is None:
        continue
    if m.error():
        out(event="error", error=str(m.error()))
        continue
    c.commit(message=m, asynchronous=False)
    out(event="read", partition=m.partition(), offset=m.offset())
"""


class _Child:
    """A confluent-kafka consumer in another process, reporting on its stdout."""

    def __init__(self, bootstrap, topic, group):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, bootstrap, topic, group],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.owned: set[int] = set()
        self.read: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self.assigned_at = 0.0
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self):
        for line in self.proc.stdout:
            event = json.loads(line)
            if event["event"] == "assign":  # incremental (cooperative): added partitions
                self.owned |= set(event["partitions"])
                self.assigned_at = time.monotonic()
            elif event["event"] == "revoke":
                self.owned -= set(event["partitions"])
            elif event["event"] == "read":
                self.read.append((event["partition"], event["offset"]))
            else:
                self.errors.append(event["error"])

    def kill(self):
        self.proc.kill()  # SIGKILL: no LeaveGroup, no last commit
        self.proc.wait(timeout=10)


def test_confluent_members_in_two_processes_survive_a_kill_9(wire):
    full = "/kafka:grp-kill"
    _topic(wire, full, 4)
    a = _Child(wire.bootstrap, "grp-kill", "ck-kill")
    b = _Child(wire.bootstrap, "grp-kill", "ck-kill")
    try:
        _wait(lambda: len(a.owned) == 2 and len(b.owned) == 2, 30, "a 2 + 2 assignment")
        assert a.owned | b.owned == {0, 1, 2, 3}
        _produce(wire.cluster, full, 10, 4)
        _wait(lambda: len(a.read) + len(b.read) == 40, 20, "40 messages")
        b_parts = set(b.owned)
        b.kill()
        killed = time.monotonic()
        # every read was committed (synchronously): the group is at 10 everywhere
        committed = {gp.partition: gp.committed for gp in wire.cluster.group("ck-kill").partitions}
        assert committed == {p: 10 for p in range(4)}
        _produce(wire.cluster, full, 5, 4, start=10)
        _wait(lambda: a.owned == {0, 1, 2, 3}, 30, "the survivor to take every partition")
        # no LeaveGroup came: only the session timeout (6 s) frees b's partitions
        assert a.assigned_at - killed > 4.0
        _wait(lambda: len(a.read) >= 20 + 20, 20, "the second batch")
        time.sleep(0.5)
        first_read = sorted(a.read[:20] + b.read)
        assert first_read == [(p, o) for p in range(4) for o in range(10)]
        later = sorted(a.read[20:])
        # b's partitions are read on from its commits: nothing lost, nothing read twice
        assert later == [(p, o) for p in range(4) for o in range(10, 15)]
        assert {p for p, o in b.read} == b_parts
        assert a.errors == [] and b.errors == []
    finally:
        for child in (a, b):
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGKILL)
                child.proc.wait(timeout=10)


def test_commit_and_resume_shows_in_cluster_group(wire):
    full = "/kafka:grp-resume"
    _topic(wire, full, 1)
    _produce(wire.cluster, full, 20, 1)
    first = KafkaConsumer(
        bootstrap_servers=wire.bootstrap,
        group_id="kp-resume",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    first.subscribe(["grp-resume"])
    got = []
    deadline = time.monotonic() + scaled(20)
    while len(got) < 12 and time.monotonic() < deadline:
        for records in first.poll(timeout_ms=2000, max_records=12 - len(got)).values():
            got.extend(records)
    assert [r.offset for r in got] == list(range(12))
    first.commit({KTP("grp-resume", 0): KOffsetAndMetadata(12, "half", -1)})
    first.close(autocommit=False)

    info = wire.cluster.group("kp-resume")
    (part,) = info.partitions
    assert (part.topic, part.partition, part.committed, part.lag) == (full, 0, 12, 8)
    assert part.metadata == "half"
    assert "kp-resume" in {g.group_id for g in wire.cluster.groups()}

    second = KafkaConsumer(
        bootstrap_servers=wire.bootstrap,
        group_id="kp-resume",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    second.subscribe(["grp-resume"])
    rest = []
    deadline = time.monotonic() + scaled(20)
    while len(rest) < 8 and time.monotonic() < deadline:
        # a long poll: kafka-python 3.0.12 can lose a SyncGroup answer that arrives after a
        # poll gave up waiting for the rejoin it started (the member then never fetches)
        for records in second.poll(timeout_ms=2000).values():
            rest.extend(records)
    second.close(autocommit=False)
    assert [r.offset for r in rest] == list(range(12, 20))
    assert [r.value for r in rest] == [f"p0-{n}".encode() for n in range(12, 20)]


def test_aiokafka_consumer_in_a_group(wire):
    full = "/kafka:grp-aio"
    _topic(wire, full, 2)
    _produce(wire.cluster, full, 6, 2)

    async def consume():
        consumer = AIOKafkaConsumer(
            "grp-aio",
            bootstrap_servers=wire.bootstrap,
            group_id="aio-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        await consumer.start()
        try:
            got = []
            while len(got) < 12:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                for records in batch.values():
                    got.extend(records)
            assignment = {tp.partition for tp in consumer.assignment()}
            await consumer.commit()
            return got, assignment
        finally:
            await consumer.stop()

    got, assignment = run_async(consume())
    assert assignment == {0, 1}
    assert sorted((r.partition, r.offset) for r in got) == [
        (p, o) for p in range(2) for o in range(6)
    ]
    info = wire.cluster.group("aio-group")
    assert {(gp.partition, gp.committed, gp.lag) for gp in info.partitions} == {
        (0, 6, 0),
        (1, 6, 0),
    }


def test_admin_lists_and_describes_groups(wire):
    full = "/kafka:grp-admin"
    _topic(wire, full, 3)
    member = _Member(wire.bootstrap, "grp-admin", "kp-admin", client_id="admin-probe")
    member.start()
    admin = KafkaAdminClient(bootstrap_servers=wire.bootstrap)
    try:
        _wait(lambda: member.assigned == {0, 1, 2}, 20, "the member's assignment")
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed["kp-admin"]["protocol_type"] == "consumer"
        assert listed["kp-admin"]["group_state"] == "Stable"
        described = admin.describe_groups(["kp-admin", "no-such-group"])
        group = described["kp-admin"]
        assert group["error"] is None
        assert group["group_state"] == "Stable"
        assert group["protocol_type"] == "consumer"
        (m,) = group["members"]
        assert m["client_id"] == "admin-probe"
        assert m["member_id"].startswith("admin-probe-")
        assert m["client_host"] == "/127.0.0.1"
        # the leader's assignment and the member's subscription, as the client sent them
        assert m["member_assignment"]["assigned_partitions"] == [
            {"topic": "grp-admin", "partitions": [0, 1, 2]}
        ]
        assert m["member_metadata"]["topics"] == ["grp-admin"]
        assert described["no-such-group"]["group_state"] == "Dead"
    finally:
        member.close()
        admin.close()
    # committed offsets only (no live member): Empty, still listed
    _wait(
        lambda: (
            {g["group_id"]: g["group_state"] for g in admin_list(wire)}.get("kp-admin") == "Empty"
        ),
        20,
        "the group to be empty",
    )


def admin_list(wire):
    admin = KafkaAdminClient(bootstrap_servers=wire.bootstrap)
    try:
        return admin.list_groups()
    finally:
        admin.close()


# --- the protocol itself, request by request -----------------------------------------------


def test_protocol_errors_of_join_sync_heartbeat_and_commit(wire):
    full = "/kafka:grp-raw"
    _topic(wire, full, 1)
    raw, other = GroupClient(wire.server.address), GroupClient(wire.server.address)
    try:
        # v4+: a member first learns its id (MEMBER_ID_REQUIRED, 79), then joins with it
        first = raw.join("raw-group")
        assert first.error_code == 79
        assert first.member_id.startswith("raw-")
        assert raw.join("raw-group", member_id="raw-not-handed-out").error_code == 25
        joined = raw.join("raw-group", member_id=first.member_id)
        assert (joined.error_code, joined.generation_id) == (0, 1)
        assert joined.leader == first.member_id
        assert [(m.member_id, m.metadata) for m in joined.members] == [
            (first.member_id, subscription([]))
        ]
        me = first.member_id
        synced = raw.sync("raw-group", 1, me, [(me, b"assignment-bytes")])
        assert (synced.error_code, synced.assignment) == (0, b"assignment-bytes")
        assert raw.heartbeat("raw-group", 1, me) == 0
        assert raw.heartbeat("raw-group", 0, me) == 22  # ILLEGAL_GENERATION
        assert raw.heartbeat("raw-group", 1, "raw-stranger") == 25  # UNKNOWN_MEMBER_ID
        # commits: a member's are checked; a simple one (generation -1, no member id) is
        # refused while the group has members, as Kafka refuses it
        assert raw.commit("raw-group", "grp-raw", {0: 3}, 1, me) == {0: 0}
        assert raw.commit("raw-group", "grp-raw", {0: 4}, 0, me) == {0: 22}
        assert raw.commit("raw-group", "grp-raw", {0: 4}, 1, "raw-stranger") == {0: 25}
        assert raw.commit("raw-group", "grp-raw", {0: 5}, -1, "") == {0: 25}
        assert wire.cluster.group("raw-group").partitions[0].committed == 3
    finally:
        raw.close()
        other.close()


def test_a_second_member_rebalances_the_first(wire):
    raw, other = GroupClient(wire.server.address), GroupClient(wire.server.address)
    try:
        me = raw.join("raw-two").member_id
        assert raw.join("raw-two", member_id=me).generation_id == 1
        assert raw.sync("raw-two", 1, me, [(me, b"all")]).error_code == 0
        result: dict[str, object] = {}
        # JoinGroup v3 hands out the member id at once; it waits for the first member
        joiner = threading.Thread(
            target=lambda: result.setdefault("join", other.join("raw-two", version=3))
        )
        joiner.start()
        _wait(lambda: raw.heartbeat("raw-two", 1, me) == 27, 5, "REBALANCE_IN_PROGRESS (27)")
        assert "join" not in result  # held open until every known member rejoined
        again = raw.join("raw-two", member_id=me)
        joiner.join(timeout=10)
        theirs = result["join"]
        assert (again.error_code, again.generation_id) == (0, 2)
        assert (theirs.error_code, theirs.generation_id) == (0, 2)
        assert again.leader == me and theirs.leader == me
        assert len(again.members) == 2 and theirs.members == []
        # the old generation is over for everyone
        assert raw.heartbeat("raw-two", 1, me) == 22
        assert raw.heartbeat("raw-two", 2, me) == 0
        # LeaveGroup v3+ removes the member and rebalances the rest
        leave = LeaveGroupRequest(
            group_id="raw-two",
            members=[LeaveGroupRequest.MemberIdentity(member_id=theirs.member_id)],
        )
        left = other.call(leave, LeaveGroupResponse, 3)
        assert [m.error_code for m in left.members] == [0]
        assert raw.heartbeat("raw-two", 2, me) == 27
    finally:
        raw.close()
        other.close()


# --- the coordinator's clock: session and rebalance timeouts on a clock the test moves ------
# (unit tests of the state machine; test_confluent_members_in_two_processes_survive_a_kill_9
# is the same session rule with real processes and real time)


def _coordinator_join(coordinator, group, member_id="", session_timeout_ms=1000):
    return coordinator.join(
        JoinRequest(
            group, member_id, None, "c", "host", session_timeout_ms, 5000, "consumer",
            [("range", b"meta")], require_known_member_id=member_id == "",
        )
    )  # fmt: skip


def test_a_member_that_stops_heartbeating_is_removed():
    clock, closing = FakeClock(), threading.Event()
    coordinator = GroupCoordinator(closing, clock=clock)
    try:
        me = _coordinator_join(coordinator, "g").member_id
        joined = _coordinator_join(coordinator, "g", me)
        assert (joined.error, joined.generation) == (codes.NONE, 1)
        assert (
            coordinator.sync(SyncRequest("g", 1, me, "consumer", "range", [(me, b"x")]))[0]
            == codes.NONE
        )
        clock.advance(0.9)
        coordinator.expire()
        assert coordinator.heartbeat("g", 1, me) == codes.NONE  # in time: it stays
        clock.advance(1.1)
        coordinator.expire()
        assert coordinator.heartbeat("g", 1, me) == codes.UNKNOWN_MEMBER_ID
        assert coordinator.view("g") is None  # its group went with it
    finally:
        coordinator.close()


def test_a_member_that_does_not_rejoin_in_the_rebalance_timeout_is_removed():
    clock, closing = FakeClock(), threading.Event()
    coordinator = GroupCoordinator(closing, clock=clock)
    try:
        me = _coordinator_join(coordinator, "g", session_timeout_ms=60_000).member_id
        _coordinator_join(coordinator, "g", me, session_timeout_ms=60_000)
        assert (
            coordinator.sync(SyncRequest("g", 1, me, "consumer", "range", [(me, b"x")]))[0]
            == codes.NONE
        )
        result = {}
        joiner = threading.Thread(  # a second member: the first must rejoin within 5 s
            target=lambda: result.setdefault(
                "join",
                coordinator.join(
                    JoinRequest(
                        "g",
                        "",
                        None,
                        "c2",
                        "host",
                        60_000,
                        5000,
                        "consumer",
                        [("range", b"meta")],
                        require_known_member_id=False,
                    )
                ),  # fmt: skip
            )
        )
        joiner.start()
        _wait(lambda: coordinator.heartbeat("g", 1, me) == 27, 10, "REBALANCE_IN_PROGRESS")
        assert "join" not in result  # held open while the first may still rejoin
        clock.advance(5.1)  # the rebalance timeout ends: the first is dropped
        joiner.join(timeout=10)
        theirs = result["join"]
        assert (theirs.error, theirs.generation, theirs.leader) == (
            codes.NONE, 2, theirs.member_id,
        )  # fmt: skip
        assert coordinator.heartbeat("g", 2, me) == codes.UNKNOWN_MEMBER_ID
    finally:
        coordinator.close()
