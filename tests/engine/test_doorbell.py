"""Wake-ups across processes (engine.doorbell): another process's append wakes a waiting
consumer at once, through its doorbell, rather than at its next look at the files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from engine import Cluster, Consumer, TopicPartition
from engine.client import consumer as consumer_module
from engine.doorbell import WAKE_DIR, Doorbells
from tests.timing import scaled, wait_until

ROOT = Path(__file__).resolve().parents[2]
T = "/s:t"


def test_a_ring_wakes_the_other_doorbells_of_the_directory_not_its_own(tmp_path):
    rung = {"a": threading.Event(), "b": threading.Event()}
    a = Doorbells(tmp_path, rung["a"].set)
    b = Doorbells(tmp_path, rung["b"].set)
    try:
        a.listen()
        b.listen()
        assert a.listening and b.listening
        assert len(list((tmp_path / WAKE_DIR).iterdir())) == 2
        b.ring()
        assert rung["a"].wait(scaled(10))
        assert not rung["b"].is_set()  # its own append woke its waiters directly
    finally:
        a.close()
        b.close()
    assert list((tmp_path / WAKE_DIR).iterdir()) == []  # each removed its FIFO


def test_the_doorbell_of_a_dead_process_is_removed_by_the_next_ring(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    wake = tmp_path / WAKE_DIR
    wake.mkdir()
    left = wake / f"{int(dead.stdout)}-abcdef"
    os.mkfifo(left)  # no reader: its process is gone
    ringer = Doorbells(tmp_path, lambda: None)
    try:
        ringer.ring()
    finally:
        ringer.close()
    assert not left.exists()


def test_a_cluster_without_doorbells_still_serves(tmp_path, monkeypatch):
    """A directory where no FIFO can be made: waiters look at the files, as before."""

    def refused(*args: object, **kwargs: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "mkfifo", refused)
    with Cluster.open(tmp_path / "c") as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T, partitions=1)
        consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
        consumer.assign([TopicPartition(T, 0)])
        assert consumer.poll(timeout_ms=50) == {}
        assert not cluster.appends.hears_others
        consumer.close()


PRODUCE = textwrap.dedent(
    """
    import sys
    from engine import Cluster, Producer
    with Cluster.open(sys.argv[1]) as cluster:
        producer = Producer(cluster, acks=1)
        producer.send("/s:t", b"from another process", partition=0).get(timeout=30)
        producer.close()
    """
)


def test_another_process_append_wakes_a_waiting_consumer(tmp_path, monkeypatch):
    """The consumer looks at the files only once a minute here: the record comes before
    that only because the producer's process rang this one's doorbell."""
    monkeypatch.setattr(consumer_module, "_IDLE_WAIT_S", 60.0)
    monkeypatch.setattr(consumer_module, "_IDLE_WAIT_RUNG_S", 60.0)
    path = tmp_path / "c"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T, partitions=1)
        consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
        consumer.assign([TopicPartition(T, 0)])
        got: list[bytes] = []
        seq = cluster.appends.seq

        def poll() -> None:
            polled = consumer.poll(timeout_ms=int(scaled(120_000)))
            got.extend(r.value for rs in polled.values() for r in rs)

        poller = threading.Thread(target=poll)
        poller.start()
        wait_until(lambda: cluster.appends.hears_others)  # the poll is waiting
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-c", PRODUCE, str(path)], env=env, check=True,
                       timeout=scaled(60))  # fmt: skip
        wait_until(lambda: cluster.appends.seq > seq)  # rung: nobody here appended
        poller.join(scaled(30))
        assert not poller.is_alive(), "the poll still waits for its look at the files"
        assert got == [b"from another process"]
        consumer.close()


def test_the_wire_listener_hears_other_processes(tmp_path):
    """`listen` (the wire listener's parked fetches) brings the doorbell up too."""
    with Cluster.open(tmp_path / "c") as cluster:
        heard = threading.Event()
        cluster.appends.listen(heard.set)
        assert cluster.appends.hears_others
        with Cluster.open(tmp_path / "c") as other:  # another open of it rings this one
            other.appends.notify()
        assert heard.wait(scaled(10))


def test_a_forked_child_leaves_its_parent_doorbell_alone(tmp_path):
    """A child made by fork() that closes its copy of the cluster neither stops the
    parent's doorbell thread nor removes its FIFO; its own rings reach the parent."""
    rung = threading.Event()
    parent = Doorbells(tmp_path, rung.set)
    parent.listen()
    try:
        pid = os.fork()
        if pid == 0:  # the child: ring the parent, then close its copy
            code = 0
            try:
                parent.ring()
                parent.close()
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert rung.wait(scaled(10))
        assert parent.listening
        assert len(list((tmp_path / WAKE_DIR).iterdir())) == 1
    finally:
        parent.close()
