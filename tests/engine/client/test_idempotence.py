"""Idempotent batches (issue 25, item 2): producer ids are issued by the cluster and known to
every process that opens it; a batch's producer id, epoch and base sequence are stored with
it, and the append's own transaction compares a batch with its producer's last ones in the
partition. So a resend is stored once whichever process (or which restart) receives it,
across a roll to a new partitionlet too; a gap in the sequence and an older epoch are
refused. The engine's own `Producer.send_batch(idempotent=...)` is what the wire listener
uses."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import pytest

from engine import Cluster, Consumer, Principal, Producer, TopicPartition, errors
from engine.clock import FakeClock
from engine.cluster import PRODUCER_ID_EXPIRY_MS
from tests.timing import scaled

TOPIC = "/s:t"


@pytest.fixture
def cluster(tmp_path):
    with Cluster.open(tmp_path / "c", name="idem") as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(TOPIC, partitions=1)
        yield cluster


def _send(cluster, ids, *values: bytes) -> int:
    producer = Producer(cluster, acks="all")
    try:
        return (
            producer.send_batch(TOPIC, 0, list(values), idempotent=ids)
            .get(timeout=scaled(30))
            .offset
        )
    finally:
        producer.close()


def _values(cluster) -> list[bytes]:
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        got: list[bytes] = []
        while batch := consumer.poll(timeout_ms=500):
            got += [r.value for rs in batch.values() for r in rs]
        return got
    finally:
        consumer.close()


def test_a_resend_is_stored_once_and_answered_with_its_offset(cluster):
    pid, epoch = cluster.init_producer_id()
    assert _send(cluster, (pid, epoch, 0), b"a", b"b") == 0
    assert _send(cluster, (pid, epoch, 2), b"c") == 2
    assert _send(cluster, (pid, epoch, 0), b"a", b"b") == 0  # a resend of the first
    assert _send(cluster, (pid, epoch, 2), b"c") == 2
    assert _values(cluster) == [b"a", b"b", b"c"]


def test_a_gap_and_an_older_epoch_are_refused_and_nothing_is_written(cluster):
    pid, epoch = cluster.init_producer_id()
    assert _send(cluster, (pid, epoch, 0), b"a") == 0
    with pytest.raises(errors.OutOfOrderSequence, match="sequence 5 where 1 was expected"):
        _send(cluster, (pid, epoch, 5), b"lost one before")
    assert _send(cluster, (pid, epoch + 1, 0), b"new epoch") == 1
    with pytest.raises(errors.InvalidProducerEpoch, match="fenced"):
        _send(cluster, (pid, epoch, 1), b"zombie")
    assert _values(cluster) == [b"a", b"new epoch"]


def test_producers_without_ids_and_other_producers_do_not_interfere(cluster):
    one, _ = cluster.init_producer_id()
    two, _ = cluster.init_producer_id()
    assert one != two
    assert _send(cluster, (one, 0, 0), b"1a") == 0
    assert _send(cluster, None, b"plain") == 1
    assert _send(cluster, (two, 0, 0), b"2a") == 2  # its own sequence starts anywhere
    assert _send(cluster, (one, 0, 1), b"1b") == 3
    assert _send(cluster, (one, 0, 0), b"1a") == 0
    assert _values(cluster) == [b"1a", b"plain", b"2a", b"1b"]


def test_a_resend_after_the_partitionlet_rolled_is_found_in_the_one_before(tmp_path):
    # one batch fills a partitionlet: the resend reaches its successor
    with Cluster.open(tmp_path / "c", partitionlet_bytes=1024) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(TOPIC, partitions=1)
        pid, epoch = cluster.init_producer_id()
        big = b"x" * 2000
        assert _send(cluster, (pid, epoch, 0), big) == 0
        assert _send(cluster, None, b"other") == 1
        assert len(cluster.partitionlets(TOPIC)) >= 2
        assert _send(cluster, (pid, epoch, 0), big) == 0
        assert _send(cluster, (pid, epoch, 1), b"next") == 2
        assert _values(cluster) == [big, b"other", b"next"]


def test_a_resend_from_another_process_is_stored_once(cluster, tmp_path):
    # The producer id and its batches are the cluster's, not one process's memory: a
    # second process (a restarted listener) recognises the resend.
    pid, epoch = cluster.init_producer_id()
    assert _send(cluster, (pid, epoch, 0), b"once") == 0
    script = textwrap.dedent(
        f"""
        from engine import Cluster, Producer
        with Cluster.open({str(cluster.path)!r}) as c:
            p = Producer(c, acks="all")
            print(p.send_batch({TOPIC!r}, 0, [b"once"], idempotent=({pid}, {epoch}, 0))
                  .get(timeout=30).offset)
            print(c.producer_epoch({pid}))
            p.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=scaled(60)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", str(epoch)]
    assert _values(cluster) == [b"once"]


def test_producer_ids_belong_to_their_user_and_expire(tmp_path):
    clock = FakeClock()
    with Cluster.open(tmp_path / "c", clock=clock) as cluster:
        alice = cluster.as_principal(Principal("alice"))
        bob = cluster.as_principal(Principal("bob"))
        pid, epoch = alice.init_producer_id()
        assert alice.producer_epoch(pid) == epoch == 0
        assert bob.producer_epoch(pid) is None  # another user's id is unknown to bob
        assert alice.producer_epoch(pid + 1000) is None
        clock.advance(ms=PRODUCER_ID_EXPIRY_MS // 2)
        assert alice.producer_epoch(pid) == 0  # a use: its expiry starts again
        clock.advance(ms=PRODUCER_ID_EXPIRY_MS - 1)
        assert cluster.expire_producer_ids() == 0
        clock.advance(ms=2)
        assert cluster.expire_producer_ids() == 1
        assert alice.producer_epoch(pid) is None
        assert alice.init_producer_id()[0] > pid  # ids are never reused


def test_a_volume_written_before_producer_fields_gets_them_and_keeps_its_batches(tmp_path):
    path = tmp_path / "c"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(TOPIC, partitions=1)
        assert _send(cluster, None, b"old") == 0
        volumes = sorted((path / "volumes").glob("vol-*.db"))
    for volume in volumes:  # as an older engine wrote it
        conn = sqlite3.connect(volume)
        conn.execute("DROP INDEX batches_by_producer")
        for column in ("producer_id", "producer_epoch", "base_seq"):
            conn.execute(f"ALTER TABLE batches DROP COLUMN {column}")
        conn.commit()
        conn.close()
    with Cluster.open(path) as cluster:
        pid, epoch = cluster.init_producer_id()
        assert _send(cluster, (pid, epoch, 0), b"new") == 1
        assert _send(cluster, (pid, epoch, 0), b"new") == 1
        assert _values(cluster) == [b"old", b"new"]


def _fail_first_roll(monkeypatch) -> list[int]:
    """Make the first roll of a partitionlet fail after the volume committed the append
    that filled it (the catalog's disk full): the write's outcome is unknown to its
    producer although the batch is stored."""
    from engine.storage.appender import Appender

    real = Appender._roll
    failures = [1]

    def roll(self, sealed):
        if failures[0]:
            failures[0] -= 1
            raise errors.StorageError("catalog: database or disk is full")
        return real(self, sealed)

    monkeypatch.setattr(Appender, "_roll", roll)
    return failures


def test_an_idempotent_producer_retries_a_write_that_stored_its_batch_and_stores_it_once(
    tmp_path, monkeypatch
):
    with Cluster.open(tmp_path / "c", partitionlet_bytes=1024) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(TOPIC, partitions=1)
        failures = _fail_first_roll(monkeypatch)
        producer = Producer(cluster, acks="all", enable_idempotence=True, retry_backoff_ms=1)
        try:
            first = producer.send(TOPIC, b"x" * 2000, partition=0).get(timeout=scaled(30))
            second = producer.send(TOPIC, b"after", partition=0).get(timeout=scaled(30))
        finally:
            producer.close()
        assert failures == [0]  # the failure happened, after the append
        assert (first.offset, second.offset) == (0, 1)
        assert _values(cluster) == [b"x" * 2000, b"after"]


def test_without_idempotence_a_roll_that_fails_after_the_append_reports_the_batch_written(
    tmp_path, monkeypatch
):
    # issue 26: the future failed although the batch was stored, so a retrying application
    # without idempotence wrote it twice; the batch is readable, so it is reported written,
    # and the next append rolls the partitionlet the failed roll left sealed
    with Cluster.open(tmp_path / "c", partitionlet_bytes=1024) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(TOPIC, partitions=1)
        failures = _fail_first_roll(monkeypatch)
        producer = Producer(cluster, acks="all")
        try:
            first = producer.send(TOPIC, b"x" * 2000, partition=0).get(timeout=scaled(30))
            second = producer.send(TOPIC, b"after", partition=0).get(timeout=scaled(30))
        finally:
            producer.close()
        assert failures == [0]
        assert (first.offset, second.offset) == (0, 1)
        assert _values(cluster) == [b"x" * 2000, b"after"]


def test_idempotence_needs_acks_all_in_the_engine_and_the_facade(cluster):
    from engine.kafka import KafkaProducer
    from engine.kafka.errors import KafkaConfigurationError

    with pytest.raises(errors.InvalidArgument, match="needs acks='all'"):
        Producer(cluster, acks=1, enable_idempotence=True)
    with pytest.raises(KafkaConfigurationError, match="needs acks='all'"):
        KafkaProducer(bootstrap_servers=f"file://{cluster.path}", acks=1, enable_idempotence=True)
    producer = KafkaProducer(
        bootstrap_servers=f"file://{cluster.path}",
        default_stream="/s",
        enable_idempotence=True,  # acks="all" then, as in kafka-python 3
        retries=2,
    )
    try:
        assert producer.config["acks"] == "all"
        assert producer.send("t", b"v", partition=0).get(timeout=scaled(30)).offset == 0
    finally:
        producer.close()
    assert _values(cluster) == [b"v"]


def test_a_partition_lists_its_producers_until_their_ids_expire(tmp_path):
    clock = FakeClock()
    with Cluster.open(tmp_path / "c", clock=clock) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(TOPIC, partitions=1)
        first, _ = cluster.init_producer_id()
        _send(cluster, (first, 0, 0), b"a", b"b")
        _send(cluster, (first, 0, 2), b"c")
        clock.advance(ms=PRODUCER_ID_EXPIRY_MS // 2)
        second, _ = cluster.init_producer_id()
        _send(cluster, (second, 0, 0), b"d")
        _send(cluster, None, b"plain")  # no producer id: not listed
        consumer = Consumer(cluster, enable_auto_commit=False)
        try:
            tp = TopicPartition(TOPIC, 0)
            states = consumer.producers(tp)
            assert [
                (s.producer_id, s.epoch, s.last_sequence, s.txn_start_offset) for s in states
            ] == [
                (first, 0, 2, -1),
                (second, 0, 0, -1),
            ]
            clock.advance(ms=PRODUCER_ID_EXPIRY_MS // 2 + 1)
            assert cluster.expire_producer_ids() == 1
            assert [s.producer_id for s in consumer.producers(tp)] == [second]
        finally:
            consumer.close()
