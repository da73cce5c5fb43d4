"""Replication between cluster directories (DESIGN, "Replication"), on real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import engine
from engine import Cluster, Consumer, Principal, Producer, Replicator, TopicPartition, errors
from engine.cli import cli
from engine.replication import DirectoryTarget, ReplicaBatch
from engine.replication.reading import batch_at
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[3]


def contents(cluster: Cluster, stream: str = "/s") -> dict[tuple[str, int, int], tuple]:
    """Every message of the stream: (topic, partition, offset) -> its fields."""
    tps = [
        TopicPartition(info.name, p.partition)
        for info in cluster.topics(stream)
        for p in info.partitions
    ]
    if not tps:
        return {}
    consumer = Consumer(cluster, enable_auto_commit=False)
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    got = {}
    deadline = time.monotonic() + scaled(10)
    while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=50, max_records=10_000).values():
            for r in records:
                got[(r.topic, r.partition, r.offset)] = (
                    r.timestamp,
                    r.timestamp_type,
                    r.key,
                    r.value,
                    tuple(r.headers),
                )
    consumer.close()
    return got


def produce(cluster: Cluster, topic: str, count: int, tag: str, **options) -> None:
    producer = Producer(cluster, default_stream="/s", **options)
    for i in range(count):
        producer.send(
            topic,
            value=f"{tag}-{i}".encode(),
            key=f"k{i % 7}".encode(),
            headers=[("from", tag.encode())],
            timestamp_ms=1_700_000_000_000 + i,
        )
        if i % 25 == 24:
            producer.flush()
    producer.flush()
    producer.close()


def settle(*clusters: Cluster, rounds: int = 20) -> int:
    """Run every cluster's replicator until a whole round moves nothing; copies applied."""
    total = 0
    replicators = [Replicator(c) for c in clusters]
    try:
        for _ in range(rounds):
            moved = sum(r.run_once() for r in replicators)
            total += moved
            if not moved:
                return total
    finally:
        for r in replicators:
            r.close()
    raise AssertionError("replication did not settle")


@pytest.fixture
def dirs(tmp_path):
    return tmp_path / "a", tmp_path / "b", tmp_path / "c"


def test_public_api_exports_replicator():
    from engine.replication import Replicator as direct

    assert engine.Replicator is direct


def test_ring_plus_two_way_link_converges_without_duplicates(dirs):
    a_dir, b_dir, c_dir = dirs
    # Small partitionlets, so that targets roll while they receive.
    with (
        Cluster.open(a_dir, name="a", partitionlet_bytes=1000) as a,
        Cluster.open(b_dir, name="b", partitionlet_bytes=1000) as b,
        Cluster.open(c_dir, name="c", partitionlet_bytes=1000) as c,
    ):
        a.create_stream("/s", ttl=0, default_partitions=2)
        # ring a -> b -> c -> a, plus b -> a (so a <-> b is two-way)
        assert a.add_replica("/s", b_dir).state == "in_sync"
        b.add_replica("/s", c_dir)
        c.add_replica("/s", a_dir)
        b.add_replica("/s", a_dir)
        assert c.stream("/s").policies == a.stream("/s").policies
        # one writer per topic, in every cluster
        produce(a, "from-a", 120, "a")
        produce(b, "from-b", 90, "b")
        produce(c, "from-c", 60, "c")
        c.create_topic("/s:wide", partitions=3)
        produce(c, "wide", 30, "w")
        written = 120 + 90 + 60 + 30

        copies = settle(a, b, c)
        # every message moved into each of the two other clusters exactly once
        assert copies == written * 2 <= written * (3 - 1)
        everything = contents(a)
        assert len(everything) == written
        assert contents(b) == everything
        assert contents(c) == everything
        assert b.topic("/s:wide").partitions[2].log_end_offset > 0
        assert len(b.topic("/s:wide").partitions) == 3
        # nothing more to do, anywhere
        assert settle(a, b, c) == 0
        for cl in (a, b, c):
            for info in cl.replicas("/s"):
                assert info.state == "in_sync", info
                assert info.lag_messages == 0
        assert [u.source_id for u in a.upstreams("/s")] in ([b.id, c.id], [c.id, b.id])
        # origins are kept: a message written in c is stored with c's uuid in a and b
        for cl in (a, b):
            row = cl.catalog.topic("/s", "from-c")
            assert batch_at(cl, row.id, 0, 0)[2] == c.id
        assert len(b.partitionlets("/s:from-a")) > 2  # the target rolled while receiving


def test_committed_offsets_follow_so_a_consumer_can_switch(dirs):
    a_dir, b_dir, _ = dirs
    with Cluster.open(a_dir) as a, Cluster.open(b_dir) as b:
        a.create_stream("/s", ttl=0)
        a.create_topic("/s:t", partitions=1)
        produce(a, "t", 10, "a")
        a.add_replica("/s", b_dir)
        consumer = Consumer(
            a, "/s:t", group_id="g", auto_offset_reset="earliest", enable_auto_commit=False
        )
        seen = []
        while len(seen) < 4:
            for records in consumer.poll(timeout_ms=200, max_records=4 - len(seen)).values():
                seen.extend(records)
        consumer.commit()
        consumer.close()
        assert Replicator(a).run_once() == 0  # no messages, only the offsets moved
        assert b.group("g").partitions[0].committed == 4
        replica = Consumer(b, "/s:t", group_id="g", auto_offset_reset="earliest")
        got = []
        deadline = time.monotonic() + scaled(5)
        while not got and time.monotonic() < deadline:
            for records in replica.poll(timeout_ms=200).values():
                got.extend(records)
        replica.close()
        assert got[0].offset == 4 and got[0].value == b"a-4"


def test_a_killed_replicator_resumes_without_duplicates(dirs, tmp_path):
    a_dir, b_dir, _ = dirs
    count = 3000
    with Cluster.open(a_dir) as a, Cluster.open(b_dir) as b:
        a.create_stream("/s", ttl=0)
        a.create_topic("/s:t", partitions=1)
        produce(a, "t", count, "a", batch_size=1)  # one message per batch
        a.add_replica("/s", b_dir, paused=True)
        a.resume_replica("/s", b_dir)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "engine.cli",
                "replicate",
                "--cluster",
                str(a_dir),
                "--max-batches",
                "1",
            ],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + scaled(20)
            while time.monotonic() < deadline:
                try:
                    if b.topic("/s:t").partitions[0].log_end_offset >= 100:
                        break
                except errors.NotFound:
                    pass
                time.sleep(0.005)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait(10)
        at_kill = b.topic("/s:t").partitions[0].log_end_offset
        assert 100 <= at_kill < count, at_kill
        with Replicator(a) as again:
            assert again.run_once() == count - at_kill
            assert again.run_once() == 0
        assert contents(b) == contents(a)
        assert len(contents(b)) == count


def test_a_batch_retried_is_applied_once_and_a_different_one_is_a_conflict(dirs):
    a_dir, b_dir, _ = dirs
    with Cluster.open(a_dir) as a, Cluster.open(b_dir) as b:
        b.create_stream("/s", ttl=0)
        b.create_topic("/s:t", partitions=1)
        target = DirectoryTarget(str(b_dir))
        try:
            # batches as a cluster writes them (a target checks that they are)
            one = ReplicaBatch(0, 0, 1, 5, 5, 0, a.id, _payload(b"x"), 0)
            two = ReplicaBatch(1, 2, 2, 6, 7, 0, a.id, _payload(b"y", b"z", ts=(6, 7)), 0)
            assert target.apply("/s", "t", 0, [one]).messages == 1
            again = target.apply("/s", "t", 0, [one, two])  # a retry after a crash
            assert (again.messages, again.done, again.conflict) == (2, 2, None)
            assert target.apply("/s", "t", 0, [one, two]).messages == 0
            another = "0b1f2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"  # another cluster's id
            other = ReplicaBatch(1, 2, 2, 6, 7, 0, another, _payload(b"q", b"r", ts=(6, 7)), 0)
            clash = target.apply("/s", "t", 0, [other])
            assert clash.messages == 0
            assert clash.conflict["offset"] == 1
            assert clash.conflict["target_origin"] == a.id
        finally:
            target.close()
        assert [v[3] for v in contents(b).values()] == [b"x", b"y", b"z"]


def _payload(*values: bytes, ts: tuple[int, ...] | None = None) -> bytes:
    from engine.storage import batch

    return batch.encode(list(values), list(ts) if ts else [5] * len(values))


def test_conflicting_writes_are_detected_and_both_sides_kept(dirs):
    a_dir, b_dir, _ = dirs
    with Cluster.open(a_dir) as a, Cluster.open(b_dir) as b:
        a.create_stream("/s", ttl=0)
        a.add_replica("/s", b_dir)
        produce(a, "t", 3, "a")
        produce(b, "t", 2, "b")  # the same partition, written in both before they synced
        assert Replicator(a).run_once() == 0
        [info] = a.replicas("/s")
        assert info.state == "conflict"
        assert info.conflict[0]["topic"] == "/s:t"
        assert info.conflict[0]["partition"] == 0
        assert info.conflict[0]["offset"] == 0
        assert info.conflict[0]["source_origin"] == a.id
        assert info.conflict[0]["target_origin"] == b.id
        # nothing was merged, on either side; more writes do not change that
        produce(a, "t", 2, "a2")
        assert Replicator(a).run_once() == 0
        assert [v[3] for v in contents(b).values()] == [b"b-0", b"b-1"]
        assert [v[3] for v in contents(a).values()] == [b"a-0", b"a-1", b"a-2", b"a2-0", b"a2-1"]
        assert a.replicas("/s")[0].state == "conflict"
        result = CliRunner().invoke(cli, ["replica", "list", "--cluster", str(a_dir), "/s"])
        assert "conflict" in result.output and "/s:t partition 0 offset 0" in result.output
        # resolved as docs/REPLICATION.md says: drop the losing copy, resume, recopy
        b.delete_topic("/s:t")
        a.resume_replica("/s", b_dir)
        assert Replicator(a).run_once() == 5
        assert a.replicas("/s")[0].state == "in_sync"
        assert contents(b) == contents(a)


def test_pause_resume_and_remove(dirs):
    a_dir, b_dir, _ = dirs
    with Cluster.open(a_dir) as a, Cluster.open(b_dir) as b:
        a.create_stream("/s", ttl=0)
        a.add_replica("/s", b_dir, paused=True)
        assert a.replicas("/s")[0].state == "paused"
        produce(a, "t", 20, "a")
        replicator = Replicator(a)
        assert replicator.run_once() == 0
        [info] = a.replicas("/s")
        assert (info.state, info.lag_messages) == ("paused", 20)
        a.resume_replica("/s", str(b_dir) + "/")  # a target is named the same way every time
        assert a.replicas("/s")[0].state == "pending"
        assert a.replicas("/s")[0].lag_seconds >= 0
        assert replicator.run_once() == 20
        a.pause_replica("/s", b_dir)
        produce(a, "t", 5, "more")
        assert replicator.run_once() == 0
        a.resume_replica("/s", b_dir)
        assert replicator.run_once() == 5  # where it stopped
        [info] = a.replicas("/s")
        assert info.state == "in_sync" and info.copied_messages == 25
        assert info.throughput_messages > 0
        a.remove_replica("/s", b_dir)
        assert a.replicas("/s") == [] and b.upstreams("/s") == []
        produce(a, "t", 5, "after")
        assert replicator.run_once() == 0
        assert len(contents(b)) == 25  # the replica keeps what it received
        with pytest.raises(errors.InvalidArgument):
            a.remove_replica("/s", b_dir)
        replicator.close()


def test_new_topics_and_partitions_follow(dirs):
    a_dir, b_dir, _ = dirs
    with Cluster.open(a_dir) as a, Cluster.open(b_dir) as b:
        a.create_stream("/s", ttl=0)
        a.add_replica("/s", b_dir)
        a.create_topic("/s:later", partitions=3)
        produce(a, "later", 30, "l")
        with Replicator(a) as r:
            assert r.run_once() == 30
            a.add_partitions("/s:later", 5)
            produce(a, "later", 30, "m")
            assert r.run_once() == 30
        assert len(b.topic("/s:later").partitions) == 5
        assert contents(b) == contents(a)


def test_a_target_that_cannot_be_opened_breaks_the_link_until_it_is_back(dirs):
    a_dir, b_dir, _ = dirs
    with Cluster.open(a_dir) as a:
        a.create_stream("/s", ttl=0)
        with Cluster.open(b_dir):
            pass
        a.add_replica("/s", b_dir)
        produce(a, "t", 10, "a")
        away = b_dir.with_name("b-away")
        b_dir.rename(away)
        with Replicator(a) as r:
            assert r.run_once() == 0
            [info] = a.replicas("/s")
            assert info.state == "broken" and "no cluster" in info.error
            away.rename(b_dir)
            assert r.run_once() == 10
        assert a.replicas("/s")[0].state == "in_sync"


def test_copy_and_admin_permissions(dirs):
    a_dir, b_dir, _ = dirs
    # Adding a link is a cluster administrator's act (tests/engine/
    # test_replication_security.py): the library's own principal (opened without
    # principal=) is one, and still needs copy_perm here and admin_perm on the target.
    me = Principal.current().user
    with Cluster.open(a_dir) as a, Cluster.open(b_dir) as b:
        a.create_stream("/s", copy_perm="u:bob")
        with pytest.raises(errors.AccessDenied):
            a.add_replica("/s", b_dir)
        assert a.replicas("/s") == []
        a.edit_stream("/s", copy_perm=f"u:{me}")
        b.create_stream("/s", admin_perm="u:carol")
        with pytest.raises(errors.AccessDenied):
            a.add_replica("/s", b_dir)
        assert a.replicas("/s") == []
        with pytest.raises(errors.InvalidArgument):
            a.add_replica("/s", a_dir)  # a replica lives in another cluster


def test_cli_replica_commands(dirs):
    a_dir, b_dir, _ = dirs
    with Cluster.open(a_dir) as a, Cluster.open(b_dir):
        a.create_stream("/s", ttl=0)
        produce(a, "t", 7, "a")

    def run(*args):
        result = CliRunner().invoke(cli, [*args])
        assert result.exit_code == 0, result.output
        return result.output

    assert "in_sync" in run("replica", "add", "--cluster", str(a_dir), "/s", str(b_dir))
    listed = json.loads(run("replica", "list", "--cluster", str(a_dir), "/s", "--json"))
    assert listed["replicas"][0]["state"] == "in_sync"
    assert listed["replicas"][0]["copied_messages"] == 7
    upstream = json.loads(run("replica", "list", "--cluster", str(b_dir), "/s", "--json"))
    assert upstream["upstreams"][0]["source"] == str(a_dir.resolve())
    run("replica", "pause", "--cluster", str(a_dir), "/s", str(b_dir))
    assert "paused" in run("replica", "list", "--cluster", str(a_dir), "/s")
    run("replica", "resume", "--cluster", str(a_dir), "/s", str(b_dir))
    assert "replicated 0 messages" in run("replicate", "--cluster", str(a_dir), "--once")
    run("replica", "remove", "--cluster", str(a_dir), "/s", str(b_dir))
    assert json.loads(run("replica", "list", "--cluster", str(a_dir), "/s", "--json")) == {
        "replicas": [],
        "upstreams": [],
    }


def test_replicators_running_while_producers_write_still_copy_once(dirs):
    import threading

    a_dir, b_dir, c_dir = dirs
    with Cluster.open(a_dir) as a, Cluster.open(b_dir) as b, Cluster.open(c_dir) as c:
        a.create_stream("/s", ttl=0, default_partitions=2)
        a.add_replica("/s", b_dir)
        b.add_replica("/s", c_dir)
        c.add_replica("/s", a_dir)
        b.add_replica("/s", a_dir)
        stop = threading.Event()
        copies = []

        def loop(cluster):
            with Replicator(cluster) as r:
                while not stop.is_set():
                    copies.append(r.run_once())

        # two replicators per cluster, all at once
        threads = [threading.Thread(target=loop, args=(cl,)) for cl in (a, b, c, a, b, c)]
        for t in threads:
            t.start()
        try:
            produce(a, "from-a", 200, "a")
            produce(b, "from-b", 150, "b")
            produce(c, "from-c", 100, "c")
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        total = sum(copies) + settle(a, b, c)
        assert total == 450 * 2
        assert contents(a) == contents(b) == contents(c)
        assert len(contents(a)) == 450


def test_run_forever_follows_into_another_stream_name(dirs):
    import threading

    a_dir, b_dir, _ = dirs
    with Cluster.open(a_dir) as a, Cluster.open(b_dir) as b:
        a.create_stream("/s", ttl=0)
        a.add_replica("/s", b_dir, target_stream="/copy/of-s")
        assert b.upstreams("/copy/of-s")[0].source_stream == "/s"
        replicator = Replicator(a)
        thread = threading.Thread(target=replicator.run_forever, kwargs={"interval_s": 0.02})
        thread.start()
        try:
            produce(a, "t", 40, "a")
            deadline = time.monotonic() + scaled(10)
            while a.replicas("/s")[0].state != "in_sync" and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            replicator.stop()
            thread.join(10)
        assert not thread.is_alive()
        mine = {k[1:]: v for k, v in contents(a).items()}
        theirs = {k[1:]: v for k, v in contents(b, "/copy/of-s").items()}
        assert len(mine) == 40 and mine == theirs


def test_offsets_dropped_by_retention_stay_a_gap_in_the_replica(dirs):
    a_dir, b_dir, _ = dirs
    with Cluster.open(a_dir, partitionlet_bytes=300) as a, Cluster.open(b_dir) as b:
        a.create_stream("/s", ttl=3600)
        a.create_topic("/s:t", partitions=1)
        old = int(time.time() * 1000) - 7200_000
        producer = Producer(a, default_stream="/s")
        for i in range(30):
            producer.send("t", value=b"old-%d" % i, timestamp_ms=old)
            producer.flush()
        for i in range(5):
            producer.send("t", value=b"new-%d" % i)
            producer.flush()
        producer.close()
        assert a.enforce_retention().partitionlets_dropped > 0
        start = a.topic("/s:t").partitions[0].log_start_offset
        assert start > 0
        a.add_replica("/s", b_dir)
        mine, theirs = contents(a), contents(b)
        assert mine == theirs and [v[3] for v in theirs.values()][-5:] == [
            b"new-%d" % i for i in range(5)
        ]
        assert min(k[2] for k in theirs) >= start
        assert b.topic("/s:t").partitions[0].log_end_offset == 35
        assert a.replicas("/s")[0].state == "in_sync"


def test_an_http_target_needs_a_token(dirs):
    a_dir, _, _ = dirs
    with Cluster.open(a_dir) as a:
        a.create_stream("/s")
        # no TOKEN@ in the address: refused before anything is recorded or contacted
        with pytest.raises(errors.InvalidArgument, match="HTTP"):
            a.add_replica("/s", "https://dc2.example:5000/")
        assert a.replicas("/s") == []


def test_closing_the_cluster_waits_for_a_replication_pass(tmp_path):
    # Closing an SQLite connection while another thread is inside a statement on it
    # crashes the interpreter: close() halts the replicator (its pass ends) first. In a
    # child process, so that a crash fails this test rather than ending the run.
    script = f"""
import sys, threading, time
sys.path.insert(0, {str(ROOT)!r})
from engine import Cluster, Producer, Replicator
base = {str(tmp_path)!r}
for i in range(30):
    source = Cluster.open(f"{{base}}/src{{i % 3}}", volumes=1)
    if i < 3:
        source.create_stream("/s")
        Cluster.open(f"{{base}}/dst{{i}}", volumes=1).close()
        source.add_replica("/s", f"{{base}}/dst{{i}}")
    producer = Producer(source)
    for n in range(300):
        producer.send(f"/s:t{{n % 3}}", b"v" * 100)
    producer.close()
    replicator = Replicator(source, max_batches=1)
    thread = threading.Thread(target=replicator.run_forever, args=(0.001,))
    thread.start()
    time.sleep(0.01 * (i % 5))  # on purpose: the close lands at another point of each run
    source.close()
    thread.join(10)
    assert not thread.is_alive(), "the replicator outlived its cluster"
    assert replicator.last_error is None, repr(replicator.last_error)
print("closed 30 times")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-3000:]}"
    assert "closed 30 times" in done.stdout
    with Cluster.open(tmp_path / "src0") as source, Cluster.open(tmp_path / "dst0") as target:
        with Replicator(source) as replicator:
            replicator.run_once()  # what the last pass left, copied now
        assert contents(target) == contents(source)
        assert len(contents(source)) == 10 * 300


def test_replicators_that_are_gone_leave_the_close_hooks(cluster):
    # the web console makes a Replicator per "add a link": they must not pile up
    for _ in range(200):
        Replicator(cluster)
    kept = Replicator(cluster)
    assert len(cluster._close_hooks) <= 2
    cluster.close()
    assert kept._stop.is_set()  # close() halted the one still alive
