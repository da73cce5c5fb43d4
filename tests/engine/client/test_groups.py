"""Consumer groups: assignment strategies, rebalancing in one process and across real
processes (kill -9 included), pattern subscriptions, and the cluster's group views."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from engine.client.groups import GroupMember, assign, strategy_name
from engine.clock import FakeClock
from tests.timing import scaled

WORKER = Path(__file__).with_name("group_worker.py")
FAST = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 200}


def produce(cluster, topic, n, start=0, partitions=None):
    producer = Producer(cluster, acks=1)
    for i in range(start, start + n):
        producer.send(
            topic, value=f"m{i}".encode(), partition=None if partitions is None else i % partitions
        )
    producer.flush()
    producer.close()


# --- the strategies, as pure functions -----------------------------------------------------


def test_range_splits_each_topic_into_contiguous_runs():
    plan = assign("range", {"a": [1, 2], "b": [1, 2]}, {1: 5, 2: 2})
    assert plan == {"a": [(1, 0), (1, 1), (1, 2), (2, 0)], "b": [(1, 3), (1, 4), (2, 1)]}


def test_roundrobin_deals_partitions_in_turn():
    plan = assign("roundrobin", {"a": [1, 2], "b": [1, 2]}, {1: 3, 2: 2})
    assert plan == {"a": [(1, 0), (1, 2), (2, 1)], "b": [(1, 1), (2, 0)]}


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_strategies_cover_every_partition_once_and_respect_subscriptions(strategy):
    members = {"a": [1], "b": [1, 2], "c": [2, 3]}
    partitions = {1: 4, 2: 3, 3: 5}
    plan = assign(strategy, members, partitions)
    given = [tp for parts in plan.values() for tp in parts]
    assert sorted(given) == sorted((t, p) for t, n in partitions.items() for p in range(n))
    for member, parts in plan.items():
        assert {t for t, _ in parts} <= set(members[member])


def test_strategy_names():
    assert strategy_name("range") == "range"
    assert strategy_name("round_robin") == "roundrobin"
    assert strategy_name(["roundrobin"]) == "roundrobin"
    with pytest.raises(errors.InvalidArgument):
        strategy_name("sticky-ish")


# --- in one process ------------------------------------------------------------------------


@pytest.fixture
def topic(cluster):
    cluster.create_stream("/s", ttl=0)
    cluster.create_topic("/s:t", partitions=4)
    return "/s:t"


class Recorder:
    def __init__(self):
        self.events = []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", sorted(revoked)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", sorted(assigned)))


def poll_until(consumers, condition, timeout=15):
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(timeout_ms=20)
        if condition():
            return
    raise AssertionError("condition not reached in time")


def test_two_members_split_then_one_leaves(cluster, topic):
    listener = Recorder()
    a = Consumer(cluster, topic, group_id="g", auto_offset_reset="earliest", **FAST)
    a.subscribe([topic], listener=listener)
    poll_until([a], lambda: len(a.assignment()) == 4)
    b = Consumer(cluster, topic, group_id="g", auto_offset_reset="earliest", **FAST)
    poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
    assert not a.assignment() & b.assignment()
    assert any(kind == "revoked" for kind, _ in listener.events)
    b.close()  # leaves at once: no need to wait for the session timeout
    started = time.monotonic()
    poll_until([a], lambda: len(a.assignment()) == 4)
    assert time.monotonic() - started < FAST["session_timeout_ms"] / 1000
    a.close()


def test_group_view_members_lag_and_state(cluster, topic):
    produce(cluster, topic, 40, partitions=4)
    consumer = Consumer(
        cluster,
        topic,
        group_id="view",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **FAST,
    )
    got = 0
    deadline = time.monotonic() + scaled(10)
    while got < 20 and time.monotonic() < deadline:
        got += sum(len(r) for r in consumer.poll(timeout_ms=100, max_records=5).values())
    consumer.commit()
    info = cluster.group("view")
    assert info.state == "Stable"
    assert info.protocol == "range"
    assert len(info.members) == 1
    assert sorted(info.members[0].assignment) == [TopicPartition(topic, p) for p in range(4)]
    assert sum(p.log_end_offset for p in info.partitions) == 40
    assert info.lag == 40 - got
    assert [g.group_id for g in cluster.groups()] == ["view"]
    consumer.close()
    assert cluster.group("view").state == "Empty"
    with pytest.raises(errors.UnknownGroup):
        cluster.group("nobody")


def test_reset_offsets(cluster, topic):
    produce(cluster, topic, 8, partitions=4)  # two per partition
    assert set(cluster.reset_offsets("r", topic, "latest").values()) == {2}
    assert set(cluster.reset_offsets("r", topic, "earliest").values()) == {0}
    assert set(cluster.reset_offsets("r", topic, 1).values()) == {1}
    assert set(cluster.reset_offsets("r", topic, 99).values()) == {2}  # clamped to the end
    future = datetime.now(UTC) + timedelta(hours=1)
    assert set(cluster.reset_offsets("r", topic, future).values()) == {2}
    past = datetime.now(UTC) - timedelta(hours=1)
    assert set(cluster.reset_offsets("r", topic, past).values()) == {0}
    with pytest.raises(errors.InvalidOffset):
        cluster.reset_offsets("r", topic, "yesterday")
    member = Consumer(cluster, topic, group_id="r", **FAST)
    member.poll(timeout_ms=10)
    with pytest.raises(errors.IllegalState):
        cluster.reset_offsets("r", topic, "earliest")
    member.close()
    consumer = Consumer(cluster, group_id="r", enable_auto_commit=False)
    assert consumer.committed(TopicPartition(topic, 0)) == 2


def test_pattern_subscription_picks_up_new_topics(cluster):
    cluster.create_stream("/p", ttl=0)
    cluster.create_topic("/p:orders-eu", partitions=1)
    cluster.create_topic("/p:audit", partitions=1)
    consumer = Consumer(cluster, group_id="pat", auto_offset_reset="earliest", **FAST)
    consumer.subscribe(pattern="/p:orders-.*")
    poll_until([consumer], lambda: consumer.assignment() == {TopicPartition("/p:orders-eu", 0)})
    cluster.create_topic("/p:orders-us", partitions=2)
    poll_until([consumer], lambda: len(consumer.assignment()) == 3)
    produce(cluster, "/p:orders-us", 4)
    produce(cluster, "/p:audit", 4)
    seen = []
    deadline = time.monotonic() + scaled(10)
    while len(seen) < 4 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=100).values():
            seen += [(r.topic, r.value) for r in records]
    assert sorted(v for _, v in seen) == [b"m0", b"m1", b"m2", b"m3"]
    assert {t for t, _ in seen} == {"/p:orders-us"}
    consumer.close()


# --- across processes ----------------------------------------------------------------------


class Worker:
    def __init__(self, cluster_path, group, topic, stop_file, pattern=False):
        args = [sys.executable, str(WORKER), str(cluster_path), group, topic, str(stop_file)]
        if pattern:
            args.append("--pattern")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.lines = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    def records(self):
        return [x for x in list(self.lines) if "o" in x]

    def assignment(self):
        got = [x["assigned"] for x in list(self.lines) if "assigned" in x]
        return got[-1] if got else []


def wait_for(condition, timeout=30, what="condition"):
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("members", [2, 3])
def test_members_in_separate_processes_split_without_overlap(cluster_path, tmp_path, members):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic("/s:t", partitions=6)
        produce(cluster, "/s:t", 600, partitions=6)
    stop = tmp_path / "stop"
    workers = [Worker(cluster_path, "proc", "/s:t", stop) for _ in range(members)]
    try:

        def settled():
            parts = [tuple(map(tuple, w.assignment())) for w in workers]
            flat = [p for ps in parts for p in ps]
            return all(parts) and len(flat) == 6 and len(set(flat)) == 6

        wait_for(settled, what="a settled assignment")
        with Cluster.open(cluster_path) as cluster:
            produce(cluster, "/s:t", 600, start=600, partitions=6)
        wait_for(lambda: sum(len(w.records()) for w in workers) >= 1200, what="all messages")
        time.sleep(0.3)
    finally:
        stop.touch()
        for w in workers:
            w.proc.wait(timeout=30)
    seen = [(r["p"], r["o"]) for w in workers for r in w.records()]
    assert len(seen) == len(set(seen)) == 1200  # every message once, none twice
    owners = {}
    for i, w in enumerate(workers):
        for r in w.records():
            owners.setdefault(r["p"], set()).add(i)
    # each member read only its own partitions once the assignment settled
    assert all(len(o) >= 1 for o in owners.values())
    values = sorted(int(r["v"][1:]) for w in workers for r in w.records())
    assert values == list(range(1200))


def test_kill_9_of_a_member_hands_its_partitions_over(cluster_path, tmp_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic("/s:t", partitions=4)
    stop = tmp_path / "stop"
    a = Worker(cluster_path, "kill", "/s:t", stop)
    b = Worker(cluster_path, "kill", "/s:t", stop)
    try:
        wait_for(
            lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2,
            what="two members with two partitions each",
        )
        os.kill(b.proc.pid, signal.SIGKILL)
        b.proc.wait(timeout=10)
        killed_at = time.monotonic()
        with Cluster.open(cluster_path) as cluster:
            produce(cluster, "/s:t", 40, partitions=4)
        wait_for(lambda: len(a.records()) >= 40, timeout=30, what="the survivor to read all")
        took = time.monotonic() - killed_at
        assert sorted(r["p"] for r in a.records()).count(3) == 10
        assert len(a.assignment()) == 4
        # within the session timeout (2 s) plus a heartbeat and some scheduling slack
        assert took < 15
    finally:
        stop.touch()
        a.proc.wait(timeout=30)
        if b.proc.poll() is None:
            b.proc.kill()


def test_members_asking_for_different_strategies_agree_on_one(cluster, topic):
    a = Consumer(cluster, topic, group_id="mixed", partition_assignment_strategy="range", **FAST)
    b = Consumer(
        cluster, topic, group_id="mixed", partition_assignment_strategy="roundrobin", **FAST
    )
    poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
    assert not a.assignment() & b.assignment()
    before = cluster.group("mixed")
    generation, since = before.generation, max(m.last_heartbeat_ms for m in before.members)
    # several heartbeats of each member (every 200 ms): nobody rewrites the assignment
    wait_for(
        lambda: min(m.last_heartbeat_ms for m in cluster.group("mixed").members) > since + 400,
        what="two more heartbeats of each member",
    )
    for c in (a, b):
        c.poll(timeout_ms=10)
    info = cluster.group("mixed")
    assert info.generation == generation
    assert info.state == "Stable"
    assert info.protocol == "range"  # the same choice whoever computes it
    a.close()
    b.close()


# --- session timeouts, on a clock the test moves ---------------------------------------------


def test_a_member_whose_session_ends_is_expired_by_the_others(tmp_path):
    """Unit test of the session rule on a FakeClock (test_kill_9_of_a_member_hands_its_
    partitions_over is the same behaviour with real processes and real time)."""
    clock = FakeClock()
    with Cluster.open(tmp_path / "c", clock=clock) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic("/s:t", partitions=2)
        topic_id = cluster.catalog.topic("/s", "t").id

        def member(name: str) -> GroupMember:
            # heartbeats only when the test calls heartbeat(): its thread waits an hour
            return GroupMember(
                cluster.catalog.groups,
                "g",
                client_id=name,
                strategy="range",
                session_timeout_ms=10_000,
                heartbeat_interval_ms=3_600_000,
                max_poll_interval_ms=300_000,
                clock=clock,
            )

        a, b = member("a"), member("b")
        try:
            a.join([topic_id])
            b.join([topic_id])
            assert len(a.target()) == 1 and len(b.target()) == 1
            b.stop()  # b hangs: it heartbeats no more
            clock.advance(9.9)
            a.heartbeat()
            assert len(a.target()) == 1  # b's session has not ended yet
            assert len(cluster.group("g").members) == 2
            clock.advance(0.2)
            a.heartbeat()
            assert a.target() == {(topic_id, 0), (topic_id, 1)}
            assert [m.member_id for m in cluster.group("g").members] == [a.member_id]
        finally:
            a.stop()
            b.stop()
