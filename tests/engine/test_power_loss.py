"""A machine crash (a power loss: only what was fsynced survives) after acks="all" writes
and transaction commits (DESIGN, Durability: acks="all" survives a crash of the machine).

The catalog's commits are not fsynced in general (a crash of the process keeps them), so
what a fsynced volume write depends on must be: the producer id written into its batches,
and a transaction's decision to commit (with the offsets sent to it) before its markers.
tests/power_loss.py keeps what each file's last sync made durable."""

from __future__ import annotations

import textwrap
import time

from engine import Cluster, Consumer, Producer, TopicPartition
from engine.client.transactions import Transactions
from engine.clock import SYSTEM_CLOCK, FakeClock
from tests.kafka_batches import kafka_batch
from tests.power_loss import run_then_lose_power

IN, OUT = "/s:in", "/s:out"


def _cluster(path):
    with Cluster.open(path) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(IN, partitions=1)
        cluster.create_topic(OUT, partitions=1)


def _values(cluster: Cluster, tp: TopicPartition, isolation: str) -> list[bytes]:
    consumer = Consumer(
        cluster, enable_auto_commit=False, auto_offset_reset="earliest", isolation_level=isolation
    )
    consumer.assign([tp])
    values: list[bytes] = []
    while batch := consumer.poll(timeout_ms=300):
        values += [r.value for rs in batch.values() for r in rs]
    consumer.close()
    return values


def test_a_committed_transaction_keeps_its_output_and_its_offsets_through_a_power_loss(
    tmp_path,
):
    """A consume-transform-produce step committed its output and its input offset, the
    application was told so, then the power went. Both must be there after: output
    without the offset would be produced again by the restarted application (its input
    read again), twice in the output topic."""
    path = tmp_path / "c"
    _cluster(path)
    script = textwrap.dedent(
        f"""
        import os
        from engine import Cluster, Producer, TopicPartition
        c = Cluster.open({str(path)!r})
        p = Producer(c, acks="all", transactional_id="step")
        p.init_transactions()
        for first, end in ((0, 3), (3, 7)):  # the second step's partitions are known
            p.begin_transaction()
            p.send({OUT!r}, f"output of {{first}}..{{end - 1}}".encode(), partition=0)
            p.send_offsets_to_transaction({{TopicPartition({IN!r}, 0): end}}, "app")
            p.commit_transaction()
        print("committed", flush=True)
        os._exit(0)  # the power goes: nothing more reaches the disk
        """
    )
    done = run_then_lose_power(script, path, tmp_path)
    assert done.stdout.strip() == "committed", done.stderr
    with Cluster.open(path) as cluster:
        Transactions(cluster).recover()  # what maintenance does after a restart
        out = TopicPartition(OUT, 0)
        assert _values(cluster, out, "read_committed") == [b"output of 0..2", b"output of 3..6"]
        group = Consumer(cluster, group_id="app", enable_auto_commit=False)
        try:
            assert group.committed(TopicPartition(IN, 0)) == 7
        finally:
            group.close()


def test_an_open_transaction_stays_invisible_to_read_committed_through_a_power_loss(
    tmp_path,
):
    """A transaction's batches were written (and fsynced, acks="all") but it was never
    committed when the power went. read_committed readers must not see them after:
    the catalog must still know the transaction they belong to, and recovery aborts it."""
    path = tmp_path / "c"
    _cluster(path)
    script = textwrap.dedent(
        f"""
        import os
        from engine import Cluster, Producer
        c = Cluster.open({str(path)!r})
        p = Producer(c, acks="all", transactional_id="step", transaction_timeout_ms=1000)
        p.init_transactions()
        p.begin_transaction()
        p.send({OUT!r}, b"committed", partition=0)
        p.commit_transaction()
        p.begin_transaction()  # its partition is known now: nothing new to learn
        p.send({OUT!r}, b"never committed", partition=0).get(timeout=60)
        print("written", flush=True)
        os._exit(0)
        """
    )
    done = run_then_lose_power(script, path, tmp_path)
    assert done.stdout.strip() == "written", done.stderr
    out = TopicPartition(OUT, 0)
    clock = FakeClock(now_ms=SYSTEM_CLOCK.now_ms())  # the child wrote real times
    with Cluster.open(path, clock=clock) as cluster:
        assert _values(cluster, out, "read_uncommitted") == [b"committed", b"never committed"]
        assert _values(cluster, out, "read_committed") == [b"committed"]
        clock.advance(ms=2_000)  # past its timeout
        assert Transactions(cluster).recover() == 1
        assert _values(cluster, out, "read_committed") == [b"committed"]


def test_a_partitions_first_write_at_acks_all_survives_a_power_loss(tmp_path):
    """The first write to a partition makes its first partitionlet in the catalog, then
    fsyncs the batch into it. After the power loss the catalog must still say where that
    batch is: otherwise the message is gone and the next one takes its offset."""
    path = tmp_path / "c"
    _cluster(path)
    script = textwrap.dedent(
        f"""
        import os
        from engine import Cluster, Producer
        c = Cluster.open({str(path)!r})
        p = Producer(c, acks="all", enable_idempotence=True)
        p.send({OUT!r}, b"before", partition=0).get(timeout=60)
        print("acknowledged", flush=True)
        os._exit(0)
        """
    )
    done = run_then_lose_power(script, path, tmp_path)
    assert done.stdout.strip() == "acknowledged", done.stderr
    with Cluster.open(path) as cluster:
        producer = Producer(cluster, acks="all", enable_idempotence=True)
        try:
            meta = producer.send(OUT, b"after", partition=0).get(timeout=60)
        finally:
            producer.close()
        assert meta.offset == 1
        assert _values(cluster, TopicPartition(OUT, 0), "read_uncommitted") == [
            b"before",
            b"after",
        ]


def test_a_producer_id_is_never_issued_twice_even_across_a_power_loss(tmp_path):
    """As the wire listener does: a producer id issued (InitProducerId), then a batch of
    it written at acks="all" through a producer that already knew the partition. After
    the power loss the next id must be another, or the volume would take its first batch
    for a resend of the old one's, answer it with the old offset and store nothing."""
    path = tmp_path / "c"
    _cluster(path)
    script = textwrap.dedent(
        f"""
        import os, time
        from engine import Cluster, Producer
        from tests.kafka_batches import kafka_batch
        c = Cluster.open({str(path)!r})
        p = Producer(c, acks="all")
        p.send({OUT!r}, b"warm", partition=0).get(timeout=60)
        pid, epoch = c.init_producer_id()
        now = int(time.time() * 1000)
        batch = kafka_batch([(None, b"first of its id", now, [])], ids=(pid, epoch, 0))
        p.send_record_batch({OUT!r}, 0, batch, idempotent=(pid, epoch, 0)).get(timeout=60)
        print(pid, flush=True)
        os._exit(0)
        """
    )
    done = run_then_lose_power(script, path, tmp_path)
    assert done.returncode == 0, done.stderr
    issued = int(done.stdout)
    with Cluster.open(path) as cluster:
        pid, epoch = cluster.init_producer_id()
        assert pid != issued
        producer = Producer(cluster, acks="all")
        try:
            batch = kafka_batch(
                [(None, b"first of the next id", int(time.time() * 1000), [])], ids=(pid, epoch, 0)
            )
            meta = producer.send_record_batch(OUT, 0, batch, idempotent=(pid, epoch, 0)).get(
                timeout=60
            )
        finally:
            producer.close()
        assert meta.offset == 2
        assert _values(cluster, TopicPartition(OUT, 0), "read_uncommitted") == [
            b"warm",
            b"first of its id",
            b"first of the next id",
        ]


def test_a_transactional_ids_epoch_is_never_issued_twice_even_across_a_power_loss(tmp_path):
    """init_transactions() bumps the epoch that fences the id's older producers, and that
    every batch of the new one carries. After a power loss the next init must bump past
    it, not hand the same epoch out again."""
    path = tmp_path / "c"
    _cluster(path)
    with Cluster.open(path) as cluster:
        first = Producer(cluster, acks="all", transactional_id="t")
        first.init_transactions()  # epoch 0
        first.close()
    script = textwrap.dedent(
        f"""
        import os
        from engine import Cluster, Producer
        c = Cluster.open({str(path)!r})
        p = Producer(c, acks="all", transactional_id="t")
        p.init_transactions()
        print(*p._producer_id, flush=True)
        os._exit(0)
        """
    )
    done = run_then_lose_power(script, path, tmp_path)
    assert done.returncode == 0, done.stderr
    pid, epoch = map(int, done.stdout.split())
    with Cluster.open(path) as cluster:
        producer = Producer(cluster, acks="all", transactional_id="t")
        try:
            producer.init_transactions()
            assert producer._producer_id == (pid, epoch + 1)
        finally:
            producer.close()
