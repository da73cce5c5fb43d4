"""A volume's -wal file is fsynced and checkpointed by a thread of its own after commits
that did not fsync it (acks=1), so that the committing writer neither waits for the log's
fsync nor checkpoints (engine/storage/wal_writeback.py; docs/BENCHMARKS.md, "Latency
across processes"; the checkpoint itself: test_wal_size.py)."""

from __future__ import annotations

import threading
import time

import pytest

from engine import Cluster, Producer
from engine.storage import wal_writeback


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def written(monkeypatch):
    """A fresh writeback thread for the test, whose fsyncs (real ones) are listed."""
    done: list[str] = []
    real = wal_writeback.write_back

    def write_back(path: str) -> None:
        real(path)
        done.append(path)

    monkeypatch.setattr(wal_writeback, "WRITEBACK", wal_writeback.Writeback())
    monkeypatch.setattr(wal_writeback, "write_back", write_back)
    return done


def _wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_an_acks_1_write_has_its_volumes_log_written_back(tmp_path, written):
    with Cluster.open(tmp_path / "c", volumes=1) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic("/s:t", partitions=1)
        (volume,) = cluster.volumes()
        with Producer(cluster, acks=1) as producer:
            producer.send("/s:t", b"v", partition=0).get(timeout=10)
        assert _wait_for(lambda: volume.path in written), written
        assert set(written) == {volume.path}  # the volume's, not the catalog's


class _Asks(wal_writeback.Writeback):
    """The writeback thread, with the files asked for listed as they are asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def after_commit(self, path: str, checkpoint=None) -> None:
        self.asked.append(path)
        super().after_commit(path, checkpoint)


def test_an_fsynced_write_asks_for_nothing(tmp_path, monkeypatch):
    asks = _Asks()
    monkeypatch.setattr(wal_writeback, "WRITEBACK", asks)
    with Cluster.open(tmp_path / "c", volumes=1) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic("/s:t", partitions=2)
        (volume,) = cluster.volumes()
        with Producer(cluster, acks="all") as producer:
            for _ in range(20):
                producer.send("/s:t", b"v", partition=0).get(timeout=10)
        assert asks.asked == []  # asked at the commit itself: nothing to wait for
        with Producer(cluster, acks=1) as producer:  # the same spy sees a write that asks
            producer.send("/s:t", b"v", partition=1).get(timeout=10)
        assert set(asks.asked) == {volume.path}


def test_asks_are_taken_at_most_every_interval_per_file(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(wal_writeback, "time", clock)
    writeback = wal_writeback.Writeback()
    gate = threading.Event()
    monkeypatch.setattr(wal_writeback, "write_back", lambda path: gate.wait(10))
    writeback.after_commit("/a")  # taken by the thread, which waits at the gate
    assert _wait_for(lambda: writeback._busy == "/a")
    writeback.after_commit("/a")  # asked for a moment ago: nothing more
    writeback.after_commit("/b")  # another file: queued
    assert list(writeback._pending) == ["/b"]
    clock.now += 2 * wal_writeback.INTERVAL_S
    writeback.after_commit("/a")  # an interval later: queued again behind /b
    assert list(writeback._pending) == ["/b", "/a"]
    gate.set()
    assert _wait_for(lambda: not writeback._pending and writeback._busy is None)


def test_closing_a_volume_waits_for_its_writeback(tmp_path, monkeypatch):
    with Cluster.open(tmp_path / "c", volumes=1) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic("/s:t", partitions=1)
        (volume,) = cluster.volumes()
        gate, entered = threading.Event(), threading.Event()

        def slow(path: str) -> None:
            entered.set()
            gate.wait(10)

        monkeypatch.setattr(wal_writeback, "WRITEBACK", wal_writeback.Writeback())
        monkeypatch.setattr(wal_writeback, "write_back", slow)
        with Producer(cluster, acks=1) as producer:
            producer.send("/s:t", b"v", partition=0).get(timeout=10)
        assert entered.wait(10)
        closed = threading.Event()
        closer = threading.Thread(target=lambda: (cluster.close(), closed.set()))
        closer.start()
        assert not closed.wait(0.3)  # held by the writeback of its volume
        gate.set()
        closer.join(10)
        assert closed.is_set()
    assert volume.path.endswith(".db")


def test_a_log_that_is_gone_is_left_alone(tmp_path):
    wal_writeback.write_back(str(tmp_path / "never.db"))  # no -wal file: no error
    assert not (tmp_path / "never.db-wal").exists()


def test_a_file_is_checkpointed_at_most_every_checkpoint_interval(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(wal_writeback, "time", clock)
    monkeypatch.setattr(wal_writeback, "write_back", lambda path: None)
    writeback = wal_writeback.Writeback()
    calls: list[bool] = []

    def ask_and_wait() -> None:
        writeback.after_commit("/a", calls.append)
        assert _wait_for(lambda: not writeback._pending and writeback._busy is None)

    ask_and_wait()
    assert calls == [False]  # written back, then checkpointed
    clock.now += 2 * wal_writeback.INTERVAL_S  # written back again, not checkpointed yet
    ask_and_wait()
    assert calls == [False]
    clock.now += wal_writeback.CHECKPOINT_S
    ask_and_wait()
    assert calls == [False, False]
