"""The scan plan (engine.storage.scan, docs/SPARK.md): ranges, tasks, reading volume files."""

from __future__ import annotations

import pickle

import pytest

from engine import Cluster, Principal, Producer, TopicPartition, errors
from engine.ops import balance
from engine.storage import batch as batch_codec
from engine.storage import scan

T0 = 1_700_000_000_000
TOPIC = "/s:t"


@pytest.fixture
def cluster(tmp_path):
    # small partitionlets: a partition spans several, on several volumes
    with Cluster.open(tmp_path / "c", partitionlet_bytes=4096) as c:
        me = Principal.current().user
        c.create_stream("/s", consume_perm=f"u:reader | u:{me}", ttl=0)  # T0 is long past
        c.create_topic(TOPIC, partitions=2)
        producer = Producer(c, linger_ms=0)
        for i in range(400):
            producer.send(
                TOPIC,
                value=b"v%05d" % i + b"x" * 40,
                key=None if i % 3 else b"k%d" % i,
                partition=i % 2,
                timestamp_ms=T0 + i,
                headers=[("n", b"%d" % i)] if i % 5 == 0 else None,
            )
            if i % 20 == 19:
                producer.flush()
        producer.close()
        yield c


def _messages(tasks):
    """(topic, partition, offset, key, value, headers) of the tasks' ranges, decoded with
    the documented layout only."""
    out = []
    for task in tasks:
        for b in scan.read(task):
            cols = scan.layout(b.payload, b.base_offset)
            decoded = batch_codec.decode(b.payload, b.base_offset)
            assert cols.count == len(decoded.offsets)
            pos = cols.values_at
            lengths = [
                int.from_bytes(b.payload[at : at + 4], "little", signed=True)
                for at in range(cols.value_lengths_at, cols.value_lengths_at + 4 * cols.count, 4)
            ]
            values = []
            for n in lengths:
                values.append(None if n < 0 else b.payload[pos : pos + max(n, 0)])
                pos += max(n, 0)
            assert values == list(decoded.values)
            headers = cols.headers or [None] * cols.count
            for i, offset in enumerate(decoded.offsets):
                if task.start <= offset < task.end:
                    out.append(
                        (task.topic, task.partition, offset, decoded.keys[i], values[i], headers[i])
                    )
    return out


def test_a_plan_reads_every_message_once_in_order(cluster):
    ranges = cluster.scan_ranges([TOPIC])
    assert ranges == {TopicPartition(TOPIC, 0): (0, 200), TopicPartition(TOPIC, 1): (0, 200)}
    tasks = cluster.scan_plan(ranges)
    assert len(tasks) > 2  # one per partitionlet, and there are several
    assert tasks == sorted(tasks, key=lambda t: (t.topic, t.partition, t.start))
    assert pickle.loads(pickle.dumps(tasks)) == tasks  # sent to Spark's executors
    got = _messages(tasks)
    assert [(p, o) for _, p, o, *_ in got] == [(p, o) for p in (0, 1) for o in range(200)]
    first = got[0]
    assert first[3] == b"k0" and first[4].startswith(b"v00000") and first[5] == [("n", b"0")]


def test_ranges_follow_offsets_and_timestamps(cluster):
    tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    ranges = cluster.scan_ranges(
        [TOPIC], starting={tp0: 10, tp1: "latest"}, ending={tp0: 50}, ending_timestamp=T0 + 60
    )
    # partition 0 holds even timestamps T0 + 2 * offset: T0 + 60 is offset 30
    assert ranges == {tp0: (10, 30), tp1: (200, 200)}
    by_time = cluster.scan_ranges([TOPIC], starting_timestamp=T0 + 101)
    assert by_time[tp0] == (51, 200) and by_time[tp1] == (50, 200)
    got = _messages(cluster.scan_plan(ranges))
    assert [o for _, _, o, *_ in got] == list(range(10, 30))


def test_a_task_follows_a_partitionlet_moved_after_planning(cluster):
    tasks = cluster.scan_plan(cluster.scan_ranges([TOPIC]))
    before = _messages(tasks)
    sealed = next(p for p in cluster.partitionlets(TOPIC) if not p.active)
    task = next(t for t in tasks if t.partitionlet == sealed.id)
    target = sealed.volume % len(cluster.volumes()) + 1
    assert balance.move(cluster, sealed.id, target) is not None
    assert task.volume_path != str(cluster.volume(target).path.absolute())
    assert scan.read(task)  # found on its new volume
    assert _messages(tasks) == before


def test_planning_checks_the_consume_permission(cluster):
    with pytest.raises(errors.AccessDenied):
        cluster.scan_ranges([TOPIC], principal=Principal("mallory", ()))
    with pytest.raises(errors.AccessDenied):
        cluster.scan_plan({TopicPartition(TOPIC, 0): (0, 10)}, principal=Principal("mallory", ()))
    assert cluster.scan_plan({TopicPartition(TOPIC, 0): (0, 10)}, principal=Principal("reader", ()))
    with pytest.raises(errors.InvalidArgument, match="not scanned"):
        cluster.scan_ranges([TOPIC], starting={TopicPartition("/s:other", 0): 1})
