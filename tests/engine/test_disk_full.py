"""A full disk, for real: a small tmpfs mounted by the test (root only) and filled with one
big file, leaving a measured margin. What the user sees must be the truth: a future that
failed holds no readable message, no acknowledged one is lost, a full disk is Kafka's
KAFKA_STORAGE_ERROR over the wire with one log line per cause, a topic delete frees its
space with little room left, and writes work again once space is freed."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition
from engine.errors import DiskFull, StorageError, UnknownTopic
from tests.timing import scaled

DISK_BYTES = 64 * 1024 * 1024


class Disk:
    """A tmpfs of DISK_BYTES at `path`, and a filler file that takes all its space but
    `leave` bytes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def free(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave: int) -> None:
        """Take all free space but `leave` bytes (tmpfs allocates at once: no writing)."""
        self.release()
        size = self.free() - leave
        assert size > 0, f"only {self.free()} bytes free, asked to leave {leave}"
        fd = os.open(self.filler, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
        assert abs(self.free() - leave) < 1024 * 1024, self.free()

    def release(self) -> None:
        self.filler.unlink(missing_ok=True)


@pytest.fixture
def disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs to fill needs root (mount -t tmpfs)")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount)], check=True
    )
    try:
        yield Disk(mount)
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=True)  # a child still has it


def _keys_readable(cluster: Cluster, topic: str) -> list[bytes]:
    consumer = Consumer(cluster, topic, auto_offset_reset="earliest", consumer_timeout_ms=500)
    try:
        return [r.key for r in consumer]
    finally:
        consumer.close()


def test_the_embedded_producer_reports_written_exactly_what_is_readable(disk, caplog):
    # Small partitionlets: a full disk meets many rolls, whose catalog update follows the
    # volume's append (a batch reported failed there was stored all the same).
    path = disk.path / "c"
    value = os.urandom(1000)
    with Cluster.open(path, partitionlet_bytes=32 * 1024) as cluster:
        cluster.create_stream("/s", default_partitions=4)
        cluster.create_topic("/s:t")
        disk.fill(leave=8 * 1024 * 1024)
        producer = Producer(cluster, default_stream="/s", acks=1, linger_ms=5)
        futures = []
        caplog.set_level(logging.WARNING, logger="engine")
        for i in range(12_000):  # about 12 MB: more than the disk has left
            futures.append((str(i).encode(), producer.send("t", value=value, key=str(i).encode())))
        producer.flush(scaled(60))
        written, failed, errors = set(), set(), set()
        for key, future in futures:
            try:
                future.get(timeout=scaled(30))
                written.add(key)
            except StorageError as exc:
                failed.add(key)
                errors.add(type(exc))
        producer.close()
        assert failed, "the disk never filled: the test wrote too little"
        assert errors == {DiskFull}
        readable = _keys_readable(cluster, "/s:t")
        assert len(readable) == len(set(readable))  # nothing written twice
        assert set(readable) == written  # no failed future's message readable, none lost
        # one line per cause, no traceback per batch
        lines = [r for r in caplog.records if r.name == "engine.client.producer"]
        assert lines and all(r.exc_info is None for r in lines)
        causes = {r.getMessage().split(" (")[0] for r in lines}  # a cause: a full file
        assert len(lines) == len(causes) <= 5  # the catalog and 4 volumes at most

        disk.release()
        producer = Producer(cluster, default_stream="/s", acks=1)
        producer.send("t", value=b"after", key=b"after").get(timeout=scaled(30))
        producer.close()
        assert _keys_readable(cluster, "/s:t")[-len(readable) - 1 :].count(b"after") == 1


def _plet(*args: str) -> list[str]:
    return [sys.executable, "-m", "engine.cli", *args]


def test_plet_serve_answers_a_full_disk_with_kafka_storage_error_and_logs_it_once(disk):
    from confluent_kafka import KafkaError
    from confluent_kafka import Producer as KafkaProducer

    path = disk.path / "c"
    with Cluster.open(path, partitionlet_bytes=32 * 1024) as cluster:
        cluster.create_stream("/kafka", default_partitions=1)
        cluster.create_topic("/kafka:full")
    proc = subprocess.Popen(
        _plet("serve", "--cluster", str(path), "--listen", "127.0.0.1:0"),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        match = re.search(r"on 127\.0\.0\.1:(\d+) ", line)
        assert match, line
        producer = KafkaProducer(
            {
                "bootstrap.servers": f"127.0.0.1:{match.group(1)}",
                "retries": 0,  # each failure is reported, not retried until a timeout
                "linger.ms": 1,
                "enable.idempotence": False,
            }
        )
        results: list[tuple[bytes, int | None]] = []

        def report(err, msg):
            results.append((msg.key(), None if err is None else err.code()))

        disk.fill(leave=2 * 1024 * 1024)
        value = os.urandom(1000)
        sent = 0
        while sent < 8_000 and not any(code is not None for _, code in results):
            for _ in range(200):  # 200 KB a round, until one is refused
                producer.produce("full", key=str(sent).encode(), value=value, on_delivery=report)
                sent += 1
            producer.flush(scaled(30))
        for i in range(sent, sent + 200):  # more failures: the log says them once
            producer.produce("full", key=str(i).encode(), value=value, on_delivery=report)
        producer.flush(scaled(30))
        codes = {code for _, code in results}
        assert KafkaError.KAFKA_STORAGE_ERROR in codes, codes
        assert codes <= {None, KafkaError.KAFKA_STORAGE_ERROR}

        disk.release()
        ok_before = sum(1 for _, code in results if code is None)
        producer.produce("full", key=b"after", value=b"room again", on_delivery=report)
        producer.flush(scaled(30))
        assert results[-1] == (b"after", None)
        del producer
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=scaled(30))
    # one line per cause (a full file: the partition's volume, the catalog when rolling),
    # though hundreds of produces failed
    storage_lines = [s for s in stderr.splitlines() if "KAFKA_STORAGE_ERROR" in s]
    assert 1 <= len(storage_lines) == len(set(storage_lines)) <= 2, stderr[-3000:]
    assert all("the disk is full" in line for line in storage_lines)
    assert len([s for s in stderr.splitlines() if "disk is full" in s]) <= 4
    assert "Traceback" not in stderr
    with Cluster.open(path) as cluster:
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("/kafka:full", 0)])
        keys = []
        while True:
            got = consumer.poll(timeout_ms=500)
            if not got:
                break
            keys += [r.key for rs in got.values() for r in rs]
        consumer.close()
    # acknowledged ones and only those are stored
    assert sorted(keys) == sorted(k for k, code in results if code is None)
    assert len(keys) == ok_before + 1


def _stored_partitionlets(cluster: Cluster) -> int:
    return sum(len(volume.live_partitionlets()) for volume in cluster.open_volumes().values())


def test_plet_topic_delete_frees_its_space_with_a_few_mb_free(disk):
    path = disk.path / "c"
    with Cluster.open(path, partitionlet_bytes=256 * 1024) as cluster:
        cluster.create_stream("/s", default_partitions=4)
        producer = Producer(cluster, default_stream="/s", acks=1)
        value = os.urandom(1000)
        for i in range(24_000):  # 24 MB in 96 partitionlets
            producer.send("big", value=value, key=str(i).encode())
        producer.send("small", value=b"kept", key=b"k")
        producer.flush(scaled(60))
        producer.close()
        value = os.urandom(1000)
    disk.fill(leave=4 * 1024 * 1024)
    done = subprocess.run(
        _plet("topic", "delete", "/s:big", "--cluster", str(path)),
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stderr
    assert "deleted topic /s:big" in done.stdout
    assert done.stderr == ""  # its space is freed: nothing left to say
    with Cluster.open(path) as cluster:
        with pytest.raises(UnknownTopic):
            cluster.topic("/s:big")
        assert cluster.pending_purges() == 0
        assert cluster.rebalance(dry_run=True).orphans == ()
        assert _stored_partitionlets(cluster) == 1  # the small topic's, only
        # The freed pages stay in the volume files, for new batches (SQLite files do not
        # shrink); the -wal files need room of their own to take the writes.
        disk.release()
        producer = Producer(cluster, default_stream="/s", acks=1)
        futures = [producer.send("small", value=value, key=str(i).encode()) for i in range(8_000)]
        producer.flush(scaled(60))
        for future in futures:
            future.get(timeout=scaled(30))
        producer.close()
        assert len(_records(cluster, "/s:small")) == 8_001


def _records(cluster: Cluster, topic: str):
    consumer = Consumer(cluster, topic, auto_offset_reset="earliest", consumer_timeout_ms=500)
    try:
        return list(consumer)
    finally:
        consumer.close()


def test_a_delete_the_disk_interrupts_is_done_at_once_and_freed_by_the_next_open(disk, tmp_path):
    """The catalog on another disk, the volumes on the full one: the delete is done for
    every reader at once; what it could not free is freed by the next open with room."""
    path = tmp_path / "c"
    volumes = [str(disk.path / f"vol-{i}.db") for i in range(2)]
    with Cluster.open(path, volumes=volumes, partitionlet_bytes=256 * 1024) as cluster:
        cluster.create_stream("/s", default_partitions=2)
        producer = Producer(cluster, default_stream="/s", acks=1)
        for i in range(4_000):
            producer.send("t", value=os.urandom(1000), key=str(i).encode())
        producer.flush(scaled(60))
        producer.close()
    # closed: the volumes' -wal files are gone, so any write to them needs new space
    with Cluster.open(path) as cluster:
        disk.fill(leave=0)
        cluster.delete_topic("/s:t")
        with pytest.raises(UnknownTopic):
            cluster.topic("/s:t")
        # every stored partitionlet of it is pending (with the successors not written yet)
        stored = _stored_partitionlets(cluster)
        assert stored > 0
        assert cluster.pending_purges() >= stored
    disk.release()
    with Cluster.open(path) as cluster:
        assert cluster.pending_purges() == 0
        assert _stored_partitionlets(cluster) == 0
        assert cluster.rebalance(dry_run=True).orphans == ()
    assert disk.free() > 50 * 1024 * 1024


def test_plet_retention_drops_expired_partitionlets_with_a_few_mb_free(disk):
    path = disk.path / "c"
    with Cluster.open(path, partitionlet_bytes=256 * 1024) as cluster:
        cluster.create_stream("/old", default_partitions=4, ttl=3600)
        producer = Producer(cluster, default_stream="/old", acks=1)
        value = os.urandom(1000)
        two_hours_ago = cluster.clock.now_ms() - 2 * 3600 * 1000
        for i in range(16_000):  # 16 MB, expired an hour ago
            producer.send("t", value=value, key=str(i).encode(), timestamp_ms=two_hours_ago)
        producer.flush(scaled(60))
        producer.close()
        stored_before = _stored_partitionlets(cluster)
    disk.fill(leave=4 * 1024 * 1024)
    done = subprocess.run(
        _plet("retention", "--cluster", str(path)),
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stderr
    dropped = int(re.match(r"dropped (\d+) partitionlets", done.stdout).group(1))
    assert dropped >= stored_before > 0
    with Cluster.open(path) as cluster:
        assert _stored_partitionlets(cluster) == 0
        assert cluster.rebalance(dry_run=True).orphans == ()
        disk.release()
        producer = Producer(cluster, default_stream="/old", acks=1)
        producer.send("t", value=b"new", key=b"new").get(timeout=scaled(30))
        producer.close()
        assert [r.value for r in _records(cluster, "/old:t")] == [b"new"]
