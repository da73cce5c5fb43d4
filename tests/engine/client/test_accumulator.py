"""What `Producer.send` does per message (engine/client/accumulator.py, with the
partitioner): compiled by every install, the same as its Python source, and safe when it
queues a message without the lock (threads sending while the sender takes batches)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

from engine import Consumer, Producer, TopicPartition
from engine.client import accumulator, partitioner
from engine.client.partitioner import partition_for_key
from engine.errors import InvalidPartition, MessageTooLarge
from tests.test_layout import ROOT

# the producer's own tests, run again with the compiled modules as Python
PRODUCER_TESTS = [
    "tests/engine/client/test_partitioner.py",
    "tests/engine/client/test_produce_consume.py",
    "tests/engine/client/test_new_names.py",
    "tests/engine/client/test_send_batch.py",
    "tests/engine/client/test_idempotence.py",
    "tests/engine/client/test_transactions.py",
    "tests/engine/client/test_accumulator.py",
]


def test_the_accumulator_and_the_partitioner_are_compiled_from_their_sources():
    """`pip install -e .` (make test's set-up) builds them (setup.py, the .pxd files),
    and again when their sources change (the Makefile's stamps): a module older than its
    source would run code that is no longer there."""
    assert accumulator.compiled()
    for module in (accumulator, partitioner):
        built = Path(module.__file__)
        assert built.suffix == ".so", built
        source = built.parent / (module.__name__.rpartition(".")[2] + ".py")
        for part in (source, source.with_suffix(".pxd")):
            assert built.stat().st_mtime >= part.stat().st_mtime, f"{built} is older than {part}"


def test_the_producer_tests_pass_with_the_compiled_modules_as_python():
    """A checkout that was never built runs the same files as Python: every producer test
    passes that way too (tests/pure_python.py swaps the modules in)."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.pure_python", "-p", "no:cacheprovider"]
        + ["-x", "-k", "not as_python and not are_compiled"]
        + PRODUCER_TESTS,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # the plugin's header: the run did use the Python file
    assert "compiled modules: their Python sources, not compiled" in run.stdout, (
        run.stdout[-3000:] + run.stderr[-3000:]
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " passed" in run.stdout.splitlines()[-1]


def _read_all(cluster, topic, partitions):
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got = defaultdict(list)
    try:
        while True:
            batch = consumer.poll(timeout_ms=200, max_records=100_000)
            if not batch:
                return got
            for tp, records in batch.items():
                got[tp.partition] += [r.value for r in records]
    finally:
        consumer.close()


def test_threads_sending_while_the_sender_takes_batches_lose_and_repeat_nothing(cluster):
    """Four threads send to one topic, unkeyed, keyed and to chosen partitions, into small batches
    (so the sender takes batches all the time, and batches close while others append):
    every message is stored once, each thread's messages in its order in each partition,
    every future names the offset the message has, and the buffer's count comes back to
    zero. The interpreter switches threads
    as often as it can, so that a thread holding the lock is often stopped half-way."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    cluster.create_stream("/acc", ttl=0)
    cluster.create_topic("/acc:t", partitions=3)
    producer = Producer(cluster, acks=1, linger_ms=0, batch_size=100)
    per_thread = 6_000
    futures: dict[int, list] = {}

    def send(thread: int) -> None:
        mine = futures[thread] = []
        for i in range(per_thread):
            value = b"%d:%d" % (thread, i)
            # sticky, chosen partitions and keys (hashed before the batch is looked at)
            partition = i % 2 if i % 3 == 0 else None
            key = b"k%d" % (i % 7) if i % 3 == 1 else None
            sent = producer.send("/acc:t", value, key=key, partition=partition)
            mine.append((value, key, sent))

    threads = [threading.Thread(target=send, args=(t,)) for t in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        producer.flush()
    finally:
        sys.setswitchinterval(switch)
    # every byte counted into the buffer when its batch closed was counted out when written:
    # no message joined a batch after it was closed or taken
    assert producer._buffered == 0
    producer.close()

    stored = _read_all(cluster, "/acc:t", 3)
    assert sum(len(v) for v in stored.values()) == 4 * per_thread
    where = {}
    for partition, values in stored.items():
        for offset, value in enumerate(values):
            assert value not in where, f"{value!r} stored twice"
            where[value] = (partition, offset)
    keyed = []
    for sent in futures.values():
        last_seen: dict[int, int] = {}
        for value, key, future in sent:
            md = future.get(timeout=10)
            assert (md.partition, md.offset) == where[value]
            assert md.offset > last_seen.get(md.partition, -1)  # the thread's order
            last_seen[md.partition] = md.offset
            keyed += [(key, md.partition)] if key is not None else []
    # the keyed ones where Kafka's partitioner puts them
    assert len(keyed) == 4 * (per_thread // 3)
    assert all(partition == partition_for_key(key, 3) for key, partition in keyed)


def test_sends_the_unlocked_path_leaves_to_the_lock_still_get_their_answers(cluster):
    """What the path without the lock hands back to `send` (a str subclass as the topic,
    a full batch, a new partition's first message, a key, a bad partition, too big a
    message, acks=0) is done under the lock with the same outcome."""

    class Name(str):
        pass

    cluster.create_stream("/acc", ttl=0, max_message_bytes=1_000)
    cluster.create_topic("/acc:t", partitions=2)
    producer = Producer(cluster, acks=1, linger_ms=60_000, batch_size=350)
    values = [bytes([c]) * 100 for c in b"abcdefg"]
    sent = [
        producer.send("/acc:t", values[0]),  # looks the topic up, opens a batch
        producer.send("/acc:t", values[1]),  # the open batch
        producer.send(Name("/acc:t"), values[2]),  # a str subclass
        producer.send("/acc:t", values[3]),  # fills the batch: closed under the lock
        producer.send("/acc:t", values[4]),  # the next sticky batch
        producer.send("/acc:t", values[5], partition=1),  # a chosen partition
        producer.send("/acc:t", values[6], key=b"k"),  # a key
    ]
    try:
        producer.send("/acc:t", b"x", partition=2)
        raise AssertionError("partition 2 of a 2-partition topic was taken")
    except InvalidPartition as exc:
        assert "partitions 0 to 1" in str(exc)
    try:
        producer.send("/acc:t", b"x" * 1_001)
        raise AssertionError("a message over max_message_bytes was taken")
    except MessageTooLarge:
        pass
    producer.flush()
    got = [f.get(timeout=10) for f in sent]
    stored = _read_all(cluster, "/acc:t", 2)
    assert [stored[md.partition][md.offset] for md in got] == values
    assert sum(len(v) for v in stored.values()) == len(values)
    assert got[5].partition == 1
    assert got[0].partition == got[1].partition == got[2].partition == got[3].partition
    assert got[4].partition != got[3].partition  # unkeyed messages moved on with the batch
    producer.close()

    quick = Producer(cluster, acks=0, linger_ms=0)
    first = quick.send("/acc:t", b"h", partition=0, timestamp_ms=1_000)
    second = quick.send("/acc:t", b"i", partition=0, timestamp_ms=2_000)
    assert first.get().offset == -1 and first.get().timestamp == 1_000
    assert (second.get().topic, second.get().partition, second.get().timestamp) == (
        "/acc:t",
        0,
        2_000,
    )
    assert second.is_done and second.succeeded() and second.exception is None
    quick.close()
