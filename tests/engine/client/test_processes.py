"""Several real processes on one cluster directory (DESIGN, "Durability").

Children are separate interpreters (subprocess), started together through a "go" file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine import Cluster, Consumer, TopicPartition
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[3]
T = "/s:t"


def spawn(tmp_path: Path, name: str, code: str, *args: str) -> subprocess.Popen:
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


WAIT_FOR_GO = """
import sys, time
from pathlib import Path

def wait_for_go(go):
    print("ready", flush=True)
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            sys.exit("no go signal")
        time.sleep(0.001)
"""


def start_together(procs: list[subprocess.Popen], go: Path) -> None:
    for p in procs:
        line = p.stdout.readline()
        assert line.strip() == "ready", (line, p.stderr.read() if p.poll() is not None else "")
    go.touch()


def finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out


def read_partition(cluster, topic: str, partition: int) -> list:
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, partition)])
    records = []
    while True:
        batch = consumer.poll(timeout_ms=100)
        got = [r for recs in batch.values() for r in recs]
        if not got:
            break
        records += got
    consumer.close()
    return records


# --- concurrent producers ---------------------------------------------------------------

PRODUCER = (
    WAIT_FOR_GO
    + """
from engine import Cluster, Producer

path, go, tag, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with Cluster.open(path) as cluster:
    producer = Producer(cluster, acks=1)
    wait_for_go(go)
    futures = []
    for i in range(count):
        futures.append(producer.send("/s:t", value=f"{tag}:{i}".encode(), partition=0))
        if i % 7 == 6:
            producer.flush()  # many small transactions, interleaved with the others'
    producer.flush()
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
assert offsets == sorted(offsets), "own order"
print(" ".join(map(str, offsets)), flush=True)
"""
)


def test_three_producer_processes_one_partition(tmp_path, cluster_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T, partitions=1)
    go = tmp_path / "go"
    count = 300
    tags = ["a", "b", "c"]
    procs = [
        spawn(tmp_path, f"producer-{t}", PRODUCER, str(cluster_path), str(go), t, str(count))
        for t in tags
    ]
    start_together(procs, go)
    acknowledged = {}
    for tag, proc in zip(tags, procs, strict=True):
        offsets = [int(x) for x in finish(proc).split()]
        assert len(offsets) == count
        acknowledged[tag] = offsets

    with Cluster.open(cluster_path) as cluster:
        records = read_partition(cluster, T, 0)
        assert cluster.topic(T).partitions[0].log_end_offset == 3 * count
    assert [r.offset for r in records] == list(range(3 * count))
    values = [r.value.decode() for r in records]
    assert len(set(values)) == len(values) == 3 * count
    by_offset = {r.offset: r.value.decode() for r in records}
    for tag in tags:
        mine = [v for v in values if v.startswith(tag + ":")]
        assert mine == [f"{tag}:{i}" for i in range(count)]  # each producer's order kept
        # every acknowledged offset holds that producer's message
        assert [by_offset[o] for o in acknowledged[tag]] == mine
    # offsets from all three processes are disjoint
    every = sum(acknowledged.values(), [])
    assert sorted(every) == list(range(3 * count))


# --- kill -9 ------------------------------------------------------------------------------

KILLED = """
import itertools, sys, threading
from engine import Cluster, Producer

path, acks = sys.argv[1], sys.argv[2]
acks = "all" if acks == "all" else int(acks)
lock = threading.Lock()

def ack(i, meta):
    with lock:
        sys.stdout.write(f"ACK {meta.partition} {meta.offset} {i}\\n")
        sys.stdout.flush()

cluster = Cluster.open(path)
producer = Producer(cluster, acks=acks, linger_ms=1)
print("started", flush=True)
for i in itertools.count():
    producer.send("/s:t", value=b"m%d" % i + b"." * (i % 50), partition=i % 2).add_callback(ack, i)
    if i % 100 == 99:
        producer.flush()  # keeps the sender busy without letting the buffer grow huge
"""


@pytest.mark.parametrize("acks", ["1", "all"])
def test_kill_9_loses_no_acknowledged_message(tmp_path, cluster_path, acks):
    with Cluster.open(cluster_path, partitionlet_bytes=20_000) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T, partitions=2)
    proc = spawn(tmp_path, "killed", KILLED, str(cluster_path), acks)
    assert proc.stdout.readline().strip() == "started", proc.stderr.read()
    lines = []
    while len(lines) < 3000:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        lines.append(line)
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate(timeout=scaled(30))
    assert proc.returncode == -signal.SIGKILL
    lines += rest.splitlines(keepends=True)
    acked = {}
    for line in lines:
        if not line.endswith("\n"):
            continue  # cut by the kill
        _, partition, offset, i = line.split()
        acked[int(i)] = (int(partition), int(offset))
    assert len(acked) >= 3000

    with Cluster.open(cluster_path) as cluster:
        for partition in (0, 1):
            records = read_partition(cluster, T, partition)
            offsets = [r.offset for r in records]
            assert offsets == list(range(len(records)))  # dense, no duplicates
            end = cluster.topic(T).partitions[partition].log_end_offset
            assert end == len(records)
            by_offset = {r.offset: r.value for r in records}
            for i, (p, offset) in acked.items():
                if p == partition:
                    assert offset in by_offset, (i, offset)
                    assert by_offset[offset] == b"m%d" % i + b"." * (i % 50)
            # the partition takes writes again after the crash, right after its end
            from engine import Producer

            producer = Producer(cluster, acks=1)
            meta = producer.send(T, value=b"after", partition=partition).get(timeout=scaled(10))
            producer.close()
            assert meta.offset == end
            info = cluster.topic(T).partitions[partition]
            lets = info.partitionlets
            for prev, nxt in zip(lets, lets[1:], strict=False):
                assert nxt.base_offset == prev.last_offset + 1


# --- opening a new directory at once --------------------------------------------------------

OPENER = (
    WAIT_FOR_GO
    + """
from engine import Cluster, Producer

path, go, tag = sys.argv[1], sys.argv[2], sys.argv[3]
wait_for_go(go)
with Cluster.open(path) as cluster:
    cluster.create_stream(f"/p{tag}", ttl=0)
    producer = Producer(cluster, acks=1)
    for i in range(10):
        producer.send(f"/p{tag}:t", value=b"%d" % i)
    producer.flush()
    producer.close()
    print(cluster.id, len(cluster.volumes()), flush=True)
"""
)


@pytest.mark.parametrize("round_", range(4))
def test_processes_open_a_new_directory_at_once(tmp_path, round_):
    path = tmp_path / "new" / "cluster"
    go = tmp_path / "go"
    tags = ["1", "2", "3", "4"]
    procs = [spawn(tmp_path, f"opener-{t}", OPENER, str(path), str(go), t) for t in tags]
    start_together(procs, go)
    outputs = [finish(p).split() for p in procs]
    ids = {o[0] for o in outputs}
    assert len(ids) == 1, outputs
    assert {o[1] for o in outputs} == {"4"}
    with Cluster.open(path) as cluster:
        assert cluster.id == ids.pop()
        assert [s.path for s in cluster.streams()] == [f"/p{t}" for t in tags]
        for t in tags:
            assert cluster.topic(f"/p{t}:t").partitions[0].log_end_offset == 10
        assert len(cluster.volumes()) == 4
    assert sorted(p.name for p in (path / "volumes").glob("*.db")) == [
        f"vol-{i}.db" for i in range(1, 5)
    ]


def test_reader_process_sees_writer_process(tmp_path, cluster_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T)
    go = tmp_path / "go"
    proc = spawn(tmp_path, "writer", PRODUCER, str(cluster_path), str(go), "w", "50")
    start_together([proc], go)
    finish(proc)
    with Cluster.open(cluster_path) as cluster:
        records = read_partition(cluster, T, 0)
    assert [r.value for r in records] == [b"w:%d" % i for i in range(50)]
