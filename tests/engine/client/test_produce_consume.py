"""Producing and consuming through the public API (DESIGN, "Public API of engine")."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from engine import (
    Cluster,
    Consumer,
    ConsumerRecord,
    OffsetAndMetadata,
    Producer,
    RecordMetadata,
    TopicPartition,
    errors,
)
from engine.clock import FakeClock
from tests.timing import scaled, wait_until

T = "/s:t"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def drain(consumer, timeout_ms: int = 100, max_polls: int = 10_000) -> list[ConsumerRecord]:
    """Every record the consumer can read now, in the order poll() returned them."""
    out: list[ConsumerRecord] = []
    for _ in range(max_polls):
        batch = consumer.poll(timeout_ms=timeout_ms)
        got = [r for records in batch.values() for r in records]
        if not got:
            return out
        out.extend(got)
    raise AssertionError("the consumer never caught up")


def by_partition(records) -> dict[int, list[ConsumerRecord]]:
    parts: dict[int, list[ConsumerRecord]] = {}
    for r in records:
        parts.setdefault(r.partition, []).append(r)
    return parts


def produce(cluster, topic, values, *, acks=1, **kwargs) -> list[RecordMetadata]:
    producer = Producer(cluster, acks=acks)
    try:
        futures = [producer.send(topic, value=v, **kwargs) for v in values]
        producer.flush()
        return [f.get(timeout=scaled(10)) for f in futures]
    finally:
        producer.close()


def send_error(producer, *args, **kwargs) -> BaseException:
    """The error of a send: raised at once, or failing its future."""
    try:
        future = producer.send(*args, **kwargs)
    except errors.PartitionletError as exc:
        return exc
    with contextlib.suppress(errors.PartitionletError):
        producer.flush()
    with pytest.raises(errors.PartitionletError) as info:
        future.get(timeout=scaled(10))
    return info.value


def assigned(cluster, topic, partitions=None, **kwargs):
    consumer = Consumer(cluster, **kwargs)
    count = cluster.topic(topic).partition_count
    numbers = range(count) if partitions is None else partitions
    consumer.assign([TopicPartition(topic, p) for p in numbers])
    return consumer


@pytest.fixture
def stream(cluster):
    cluster.create_stream("/s", ttl=0)
    return cluster


# --- order, offsets, content ----------------------------------------------------------


def test_order_and_dense_offsets_per_partition(stream):
    stream.create_topic(T, partitions=3)
    producer = Producer(stream, acks=1, linger_ms=2)
    futures = []
    for i in range(300):
        futures.append((i % 3, i, producer.send(T, value=b"%d" % i, partition=i % 3)))
    producer.flush()
    metas = {}
    for part, i, f in futures:
        meta = f.get(timeout=scaled(10))
        assert meta.topic == T and meta.partition == part
        metas[i] = meta
    producer.close()
    for part in range(3):
        offsets = [metas[i].offset for i in range(300) if i % 3 == part]
        assert offsets == list(range(100))

    consumer = assigned(stream, T, auto_offset_reset="earliest")
    records = drain(consumer)
    consumer.close()
    parts = by_partition(records)
    assert sorted(parts) == [0, 1, 2]
    for part, recs in parts.items():
        assert [r.offset for r in recs] == list(range(100))
        assert [int(r.value) for r in recs] == [i for i in range(300) if i % 3 == part]
        assert all(r.topic == T for r in recs)
    info = stream.topic(T)
    assert [p.log_end_offset for p in info.partitions] == [100, 100, 100]
    assert [p.log_start_offset for p in info.partitions] == [0, 0, 0]
    assert info.messages == 300


def test_keys_values_headers_round_trip(stream):
    stream.create_topic(T, partitions=1)
    sent = [
        (b"k1", b"v1", [("unit", b"C")]),
        (None, b"no key", None),
        (b"k3", None, [("a", b"1"), ("a", b"2"), ("empty", b"")]),
        (b"", b"", []),
        (b"\x00\xff", b"\x00" * 1000, [("unité", b"\xff")]),
    ]
    producer = Producer(stream, acks=1)
    futures = [producer.send(T, value=v, key=k, headers=h) for k, v, h in sent]
    producer.flush()
    assert [f.get(timeout=scaled(10)).offset for f in futures] == [0, 1, 2, 3, 4]
    producer.close()
    consumer = assigned(stream, T, auto_offset_reset="earliest")
    records = drain(consumer)
    consumer.close()
    assert [(r.key, r.value, list(r.headers)) for r in records] == [
        (k, v, list(h or [])) for k, v, h in sent
    ]


def test_create_time_timestamps_round_trip(stream):
    stream.create_topic(T)
    stamps = [1, 1_000_000_000_000, 1_700_000_000_000, 1_600_000_000_000, 2**41]
    producer = Producer(stream, acks=1)
    futures = [producer.send(T, value=b"x", timestamp_ms=ts) for ts in stamps]
    before = now_ms()
    default = producer.send(T, value=b"now")
    producer.flush()
    after = now_ms()
    metas = [f.get(timeout=scaled(10)) for f in futures]
    producer.close()
    assert [m.timestamp for m in metas] == stamps
    assert before <= default.get(timeout=scaled(10)).timestamp <= after
    consumer = assigned(stream, T, auto_offset_reset="earliest")
    records = drain(consumer)
    consumer.close()
    assert [r.timestamp for r in records[:5]] == stamps
    assert before <= records[5].timestamp <= after
    assert {r.timestamp_type for r in records} == {0}


def test_log_append_time_replaces_the_producers_timestamp(cluster):
    cluster.create_stream("/s", ttl=0, timestamp_type="log_append")
    cluster.create_topic(T)
    before = now_ms()
    producer = Producer(cluster, acks=1)
    futures = [producer.send(T, value=b"x", timestamp_ms=1_000) for _ in range(3)]
    producer.flush()
    metas = [f.get(timeout=scaled(10)) for f in futures]
    producer.close()
    after = now_ms()
    for meta in metas:
        assert before <= meta.timestamp <= after
    consumer = assigned(cluster, T, auto_offset_reset="earliest")
    records = drain(consumer)
    consumer.close()
    assert len(records) == 3
    for r in records:
        assert r.timestamp_type == 1
        assert before <= r.timestamp <= after


def test_explicit_partition_and_bad_partition_at_send(stream):
    stream.create_topic(T, partitions=3)
    producer = Producer(stream, acks=1)
    try:
        assert producer.send(T, value=b"a", partition=2).get(timeout=scaled(10)).partition == 2
        for bad in (3, 4, -1, 1000):
            with pytest.raises(errors.InvalidPartition):
                producer.send(T, value=b"b", partition=bad)
        for bad in ("1", 1.0):
            with pytest.raises((errors.InvalidPartition, errors.InvalidArgument)):
                producer.send(T, value=b"b", partition=bad)
        producer.flush()
    finally:
        producer.close()
    assert [p.log_end_offset for p in stream.topic(T).partitions] == [0, 0, 1]


# --- futures and callbacks -----------------------------------------------------------------


def test_future_get_and_callbacks(stream):
    stream.create_topic(T)
    producer = Producer(stream, acks=1, linger_ms=600_000)
    calls = []
    future = producer.send(T, value=b"v", key=b"k")
    future.add_callback(lambda *a: calls.append(("cb", a)), "x", 2)
    future.add_errback(lambda *a: calls.append(("eb", a)), "y")
    producer.flush()
    meta = future.get(timeout=scaled(10))
    assert isinstance(meta, RecordMetadata)
    assert meta == RecordMetadata(T, 0, 0, meta.timestamp)
    assert calls == [("cb", ("x", 2, meta))]
    # a callback added to a resolved future runs at once
    late = []
    future.add_callback(late.append)
    assert late == [meta]
    producer.close()


def test_flush_runs_every_earlier_callback_before_returning(stream):
    stream.create_topic(T, partitions=4)
    producer = Producer(stream, acks=1, linger_ms=50)
    done = []
    lock = threading.Lock()

    def record(i, meta):
        with lock:
            done.append((i, meta.partition, meta.offset))

    for i in range(500):
        producer.send(T, value=b"%d" % i, key=b"%d" % (i % 17)).add_callback(record, i)
    producer.flush()
    with lock:
        assert sorted(i for i, _, _ in done) == list(range(500))
    producer.close()


def test_a_flush_encodes_ahead_while_the_sender_writes_and_keeps_the_order(stream, monkeypatch):
    """A flush that finds the sender writing encodes the waiting batches itself; what
    another thread sends meanwhile is still written after them (fakes hold the sender in
    its write and the flush in its encoding at the moments that matter)."""
    from engine.client import producer as producer_module
    from engine.storage.appender import Appender

    stream.create_topic(T, partitions=1)
    writing, release_write = threading.Event(), threading.Event()
    encoding, release_encode = threading.Event(), threading.Event()
    real_write, real_encode = Appender.write, producer_module.encode_batch
    encoders = []

    def held_write(self, writes, *, sync):
        if not writing.is_set():
            writing.set()
            assert release_write.wait(scaled(10))
        return real_write(self, writes, sync=sync)

    def held_encode(batch, *args):
        encoders.append(threading.current_thread().name)
        if threading.current_thread().name == "flusher":
            encoding.set()
            assert release_encode.wait(scaled(10))
        return real_encode(batch, *args)

    monkeypatch.setattr(Appender, "write", held_write)
    monkeypatch.setattr(producer_module, "encode_batch", held_encode)
    producer = Producer(stream, acks=1, linger_ms=0)
    futures = [producer.send(T, b"x%d" % i, partition=0) for i in range(50)]
    assert writing.wait(scaled(10))  # the sender holds the x batch in its write
    futures += [producer.send(T, b"y%d" % i, partition=0) for i in range(50)]
    flusher = threading.Thread(target=producer.flush, name="flusher")
    flusher.start()
    assert encoding.wait(scaled(10))  # the flush took the y batch and encodes it
    futures += [producer.send(T, b"z%d" % i, partition=0) for i in range(50)]
    release_write.set()  # the sender is free while the y batch is still being encoded
    time.sleep(0.05)  # it must wait for it, not write the z batch first
    release_encode.set()
    flusher.join(scaled(10))
    producer.flush()
    assert "flusher" in encoders
    offsets = [f.get(timeout=scaled(10)).offset for f in futures]
    assert offsets == list(range(150))
    with assigned(stream, T, [0], auto_offset_reset="earliest") as consumer:
        values = [r.value for r in drain(consumer)]
    assert values == [b"%s%d" % (c, i) for c in (b"x", b"y", b"z") for i in range(50)]
    producer.close()


def test_errback_gets_the_error_met_while_writing(cluster):
    cluster.create_stream("/s", ttl=0)
    cluster.create_topic(T)
    producer = Producer(cluster, acks=1, linger_ms=600_000)
    warm = producer.send(T, value=b"warm")  # the producer learns the topic
    producer.flush()
    assert warm.get(timeout=scaled(10)).offset == 0
    # Another process deletes the topic: this producer's cached metadata is stale, so the
    # send is accepted and the error is met while writing.
    with Cluster.open(cluster.path) as other:
        other.edit_stream("/s", auto_create=False)
        other.delete_topic(T)
    failures = []
    successes = []
    future = producer.send(T, value=b"lost")
    future.add_errback(lambda tag, exc: failures.append((tag, exc)), "tag")
    future.add_callback(successes.append)
    with contextlib.suppress(errors.PartitionletError):
        producer.flush()
    producer.close()
    assert successes == []
    assert len(failures) == 1
    assert failures[0][0] == "tag"
    assert isinstance(failures[0][1], errors.UnknownTopic)
    with pytest.raises(errors.UnknownTopic):
        future.get(timeout=scaled(10))


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks_levels_write_and_survive_reopen(cluster_path, acks):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T, partitions=2)
        producer = Producer(cluster, acks=acks)
        futures = [producer.send(T, value=b"%d" % i, partition=i % 2) for i in range(50)]
        producer.flush()
        for f in futures:
            meta = f.get(timeout=scaled(10))
            assert meta.topic == T
        producer.close()
    with Cluster.open(cluster_path) as cluster:
        assert [p.log_end_offset for p in cluster.topic(T).partitions] == [25, 25]
        consumer = assigned(cluster, T, auto_offset_reset="earliest")
        records = drain(consumer)
        consumer.close()
    values = sorted(int(r.value) for r in records)
    assert values == list(range(50))


@pytest.mark.parametrize("acks", [2, -2, "none", None, "al"])
def test_bad_acks_refused(cluster, acks):
    with pytest.raises(ValueError):
        Producer(cluster, acks=acks)


def test_acks_1_and_all_give_offsets(stream):
    stream.create_topic(T)
    for acks in (1, "all"):
        producer = Producer(stream, acks=acks)
        meta = producer.send(T, value=b"x").get(timeout=scaled(10))
        producer.close()
        assert meta.offset >= 0
    assert stream.topic(T).partitions[0].log_end_offset == 2


def test_linger_holds_messages_until_flush(stream):
    stream.create_topic(T)
    producer = Producer(stream, acks=1, linger_ms=600_000)
    futures = [producer.send(T, value=b"%d" % i) for i in range(10)]
    tp = TopicPartition(T, 0)
    consumer = assigned(stream, T, auto_offset_reset="earliest")
    assert consumer.end_offsets([tp]) == {tp: 0}
    producer.flush()
    assert [f.get(timeout=scaled(10)).offset for f in futures] == list(range(10))
    assert consumer.end_offsets([tp]) == {tp: 10}
    assert [r.value for r in drain(consumer)] == [b"%d" % i for i in range(10)]
    consumer.close()
    producer.close()


def test_full_batch_is_sent_without_waiting_for_linger(stream):
    stream.create_topic(T)
    producer = Producer(stream, acks=1, linger_ms=600_000, batch_size=200)
    futures = [producer.send(T, value=b"x" * 100) for _ in range(10)]
    # no flush: the batches filled up, so they are written although linger has not passed
    assert futures[0].get(timeout=scaled(20)).offset == 0
    producer.flush()
    assert [f.get(timeout=scaled(10)).offset for f in futures] == list(range(10))
    producer.close()


def test_close_flushes_pending_messages(cluster_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T)
        producer = Producer(cluster, acks=1, linger_ms=600_000)
        futures = [producer.send(T, value=b"%d" % i) for i in range(5)]
        producer.close()
        assert [f.get(timeout=scaled(10)).offset for f in futures] == list(range(5))
    with Cluster.open(cluster_path) as cluster:
        assert cluster.topic(T).partitions[0].log_end_offset == 5


def test_send_after_close_is_refused(stream):
    producer = Producer(stream, acks=1)
    producer.close()
    with pytest.raises(errors.Closed):
        producer.send(T, value=b"x")


# --- auto-create and size limits --------------------------------------------------------


def test_auto_create_uses_the_streams_default_partitions(cluster):
    cluster.create_stream("/s", default_partitions=3)
    producer = Producer(cluster, acks=1, default_stream="/s")
    meta = producer.send("new-topic", value=b"x").get(timeout=scaled(10))
    producer.close()
    assert meta.topic == "/s:new-topic"
    info = cluster.topic("/s:new-topic")
    assert info.partition_count == 3
    assert sum(p.log_end_offset for p in info.partitions) == 1
    assert cluster.topic_count("/s") == 1


def test_auto_create_false_refuses_unknown_topics(cluster):
    cluster.create_stream("/s", auto_create=False)
    producer = Producer(cluster, acks=1)
    try:
        exc = send_error(producer, "/s:missing", value=b"x")
    finally:
        producer.close()
    assert isinstance(exc, errors.UnknownTopic)
    assert cluster.topic_count("/s") == 0
    with pytest.raises(errors.UnknownTopic):
        cluster.topic("/s:missing")


def test_produce_to_a_missing_stream_fails(cluster):
    producer = Producer(cluster, acks=1)
    try:
        exc = send_error(producer, "/nowhere:t", value=b"x")
    finally:
        producer.close()
    assert isinstance(exc, errors.UnknownStream)
    assert cluster.streams() == []


def test_message_too_large_at_send_and_nothing_written(cluster):
    cluster.create_stream("/s", max_message_bytes=100)
    cluster.create_topic(T)
    producer = Producer(cluster, acks=1)
    try:
        with pytest.raises(errors.MessageTooLarge):
            producer.send(T, value=b"x" * 101)
        with pytest.raises(errors.MessageTooLarge):
            producer.send(T, value=b"x" * 51, key=b"k" * 50)
        with pytest.raises(errors.MessageTooLarge):
            producer.send(T, value=b"x" * 10, key=b"k" * 10, headers=[("h", b"y" * 90)])
        with pytest.raises(errors.MessageTooLarge):
            producer.send(T, value=None, key=b"k" * 101)
        producer.flush()
        assert cluster.topic(T).partitions[0].log_end_offset == 0
        # exactly the limit is allowed
        assert producer.send(T, value=b"x" * 100).get(timeout=scaled(10)).offset == 0
        assert producer.send(T, value=b"x" * 60, key=b"k" * 40).get(timeout=scaled(10)).offset == 1
    finally:
        producer.close()
    consumer = assigned(cluster, T, auto_offset_reset="earliest")
    records = drain(consumer)
    consumer.close()
    assert [(r.key, r.value) for r in records] == [(None, b"x" * 100), (b"k" * 40, b"x" * 60)]


def test_message_too_large_is_a_value_error_and_does_not_auto_create(cluster):
    cluster.create_stream("/s", max_message_bytes=10)
    producer = Producer(cluster, acks=1)
    try:
        with pytest.raises(ValueError):
            producer.send("/s:auto", value=b"x" * 11)
        producer.flush()
    finally:
        producer.close()
    topics = cluster.topics("/s")
    assert sum(t.messages for t in topics) == 0


# --- consumer: positions -------------------------------------------------------------------


def test_assign_seek_position(stream):
    stream.create_topic(T, partitions=2)
    produce(stream, T, [b"%d" % i for i in range(10)], partition=0)
    produce(stream, T, [b"p1-%d" % i for i in range(4)], partition=1)
    tp0, tp1 = TopicPartition(T, 0), TopicPartition(T, 1)
    consumer = Consumer(stream, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([tp0])
    assert consumer.assignment() == {tp0}
    assert consumer.position(tp0) == 0
    consumer.seek(tp0, 7)
    assert consumer.position(tp0) == 7
    assert [r.offset for r in drain(consumer)] == [7, 8, 9]
    assert consumer.position(tp0) == 10
    consumer.seek_to_beginning(tp0)
    assert consumer.position(tp0) == 0
    consumer.seek_to_end(tp0)
    assert consumer.position(tp0) == 10
    assert drain(consumer) == []
    consumer.assign([tp0, tp1])
    assert consumer.assignment() == {tp0, tp1}
    consumer.seek(tp0, 9)
    consumer.seek_to_beginning()  # no argument: every assigned partition
    assert consumer.position(tp0) == 0 and consumer.position(tp1) == 0
    consumer.seek_to_end()
    assert consumer.position(tp0) == 10 and consumer.position(tp1) == 4
    consumer.seek(tp1, 2)
    records = drain(consumer)
    assert [(r.partition, r.offset, r.value) for r in records] == [(1, 2, b"p1-2"), (1, 3, b"p1-3")]
    consumer.close()


def test_latest_consumer_sees_only_new_messages(stream):
    stream.create_topic(T)
    produce(stream, T, [b"old-%d" % i for i in range(5)])
    consumer = assigned(stream, T)  # auto_offset_reset="latest" by default
    tp = TopicPartition(T, 0)
    assert consumer.position(tp) == 5
    assert drain(consumer) == []
    produce(stream, T, [b"new"])
    assert [(r.offset, r.value) for r in drain(consumer)] == [(5, b"new")]
    consumer.close()


def test_pause_and_resume(stream):
    stream.create_topic(T, partitions=2)
    produce(stream, T, [b"a", b"b"], partition=0)
    produce(stream, T, [b"c"], partition=1)
    tp0, tp1 = TopicPartition(T, 0), TopicPartition(T, 1)
    consumer = assigned(stream, T, auto_offset_reset="earliest")
    consumer.pause(tp0)
    assert [(r.partition, r.value) for r in drain(consumer)] == [(1, b"c")]
    assert consumer.position(tp0) == 0
    assert consumer.position(tp1) == 1
    consumer.resume(tp0)
    assert [(r.partition, r.value) for r in drain(consumer)] == [(0, b"a"), (0, b"b")]
    consumer.close()


def test_beginning_end_offsets(stream):
    stream.create_topic(T, partitions=3)
    produce(stream, T, [b"x"] * 4, partition=0)
    produce(stream, T, [b"y"] * 2, partition=2)
    tps = [TopicPartition(T, p) for p in range(3)]
    consumer = Consumer(stream)
    assert consumer.beginning_offsets(tps) == dict.fromkeys(tps, 0)
    assert consumer.end_offsets(tps) == {tps[0]: 4, tps[1]: 0, tps[2]: 2}
    consumer.close()


def test_offsets_for_times(stream):
    stream.create_topic(T, partitions=2)
    stamps = [1000, 2000, 2000, 3000, 5000]
    producer = Producer(stream, acks=1)
    for ts in stamps:
        producer.send(T, value=b"x", partition=0, timestamp_ms=ts)
    producer.flush()
    producer.close()
    tp0, tp1 = TopicPartition(T, 0), TopicPartition(T, 1)
    consumer = Consumer(stream)

    def at(ms):
        found = consumer.offsets_for_times({tp0: ms})[tp0]
        return None if found is None else (found.offset, found.timestamp)

    assert at(0) == (0, 1000)
    assert at(1000) == (0, 1000)
    assert at(1001) == (1, 2000)
    assert at(2000) == (1, 2000)
    assert at(2500) == (3, 3000)
    assert at(5000) == (4, 5000)
    assert at(5001) is None
    assert consumer.offsets_for_times({tp1: 0}) == {tp1: None}
    consumer.close()


def test_iteration_stops_after_consumer_timeout(stream):
    stream.create_topic(T)
    produce(stream, T, [b"%d" % i for i in range(20)])
    consumer = Consumer(
        stream, T, auto_offset_reset="earliest", consumer_timeout_ms=int(scaled(200)), group_id=None
    )
    records = list(consumer)
    consumer.close()
    assert [r.value for r in records] == [b"%d" % i for i in range(20)]
    assert all(isinstance(r, ConsumerRecord) for r in records)


def test_poll_max_records(stream):
    stream.create_topic(T)
    produce(stream, T, [b"%d" % i for i in range(30)])
    consumer = assigned(stream, T, auto_offset_reset="earliest")
    batch = consumer.poll(timeout_ms=1000, max_records=7)
    assert sum(len(v) for v in batch.values()) <= 7
    got = [r.offset for recs in batch.values() for r in recs]
    got += [r.offset for r in drain(consumer)]
    assert got == list(range(30))
    consumer.close()


def test_consumer_sees_messages_of_another_cluster_handle(cluster_path):
    with Cluster.open(cluster_path) as a, Cluster.open(cluster_path) as b:
        a.create_stream("/s", ttl=0)
        a.create_topic(T)
        consumer = assigned(b, T, auto_offset_reset="earliest")
        assert drain(consumer) == []
        produce(a, T, [b"one", b"two"])
        assert [r.value for r in drain(consumer)] == [b"one", b"two"]
        consumer.close()


# --- consumer groups -------------------------------------------------------------------------


def test_group_commit_and_committed(stream):
    stream.create_topic(T, partitions=2)
    produce(stream, T, [b"%d" % i for i in range(6)], partition=0)
    produce(stream, T, [b"%d" % i for i in range(3)], partition=1)
    tp0, tp1 = TopicPartition(T, 0), TopicPartition(T, 1)
    consumer = Consumer(
        stream, T, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False
    )
    assert consumer.committed(tp0) is None
    records = drain(consumer)
    assert len(records) == 9
    assert consumer.committed(tp0) is None
    consumer.commit()
    assert consumer.committed(tp0) == 6
    assert consumer.committed(tp1) == 3
    consumer.commit({tp0: OffsetAndMetadata(2, "meta")})
    assert consumer.committed(tp0) == 2
    assert consumer.committed(tp1) == 3
    consumer.close()

    again = Consumer(
        stream, T, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False
    )
    records = drain(again)
    again.close()
    assert sorted((r.partition, r.offset) for r in records) == [(0, 2), (0, 3), (0, 4), (0, 5)]


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_a_negative_committed_offset_is_stored_and_means_no_offset(stream, reset):
    # Kafka stores any committed offset (kafkajs's resetOffsets commits -2 for earliest);
    # a consumer of the group then applies its auto_offset_reset
    stream.create_topic(T)
    produce(stream, T, [b"a", b"b", b"c"])
    tp = TopicPartition(T, 0)
    setter = Consumer(stream, group_id="neg", enable_auto_commit=False)
    setter.commit({tp: OffsetAndMetadata(-2, "earliest")})
    assert setter.committed(tp, metadata=True) == OffsetAndMetadata(-2, "earliest")
    with pytest.raises(errors.InvalidOffset):
        setter.commit({tp: 2**63})
    setter.close()
    [partition] = stream.group("neg").partitions
    assert (partition.committed, partition.lag) == (-2, 3)
    reader = Consumer(stream, T, group_id="neg", auto_offset_reset=reset, enable_auto_commit=False)
    assert reader.position(tp) == (0 if reset == "earliest" else 3)
    reader.close()


def test_other_group_is_independent(stream):
    stream.create_topic(T)
    produce(stream, T, [b"a", b"b"])
    c1 = Consumer(stream, T, group_id="g1", auto_offset_reset="earliest", enable_auto_commit=False)
    drain(c1)
    c1.commit()
    c1.close()
    c2 = Consumer(stream, T, group_id="g2", auto_offset_reset="earliest", enable_auto_commit=False)
    assert c2.committed(TopicPartition(T, 0)) is None
    assert [r.value for r in drain(c2)] == [b"a", b"b"]
    c2.close()


def test_close_commits_with_auto_commit(stream):
    stream.create_topic(T)
    produce(stream, T, [b"a", b"b", b"c"])
    tp = TopicPartition(T, 0)
    consumer = Consumer(
        stream,
        T,
        group_id="g",
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=600_000,
    )
    assert len(drain(consumer)) == 3
    consumer.close()
    check = Consumer(stream, group_id="g", enable_auto_commit=False)
    assert check.committed(tp) == 3
    check.close()


def test_close_does_not_commit_without_auto_commit(stream):
    stream.create_topic(T)
    produce(stream, T, [b"a", b"b", b"c"])
    tp = TopicPartition(T, 0)
    consumer = Consumer(
        stream, T, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False
    )
    assert len(drain(consumer)) == 3
    consumer.close()
    check = Consumer(stream, group_id="g", enable_auto_commit=False)
    assert check.committed(tp) is None
    check.close()


def test_auto_commit_on_interval(stream):
    stream.create_topic(T)
    produce(stream, T, [b"a", b"b"])
    tp = TopicPartition(T, 0)
    consumer = Consumer(
        stream,
        T,
        group_id="g",
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=1,
    )
    assert len(drain(consumer)) == 2
    check = Consumer(stream, group_id="g", enable_auto_commit=False)

    def committed() -> int | None:  # the interval has passed; a later poll commits
        consumer.poll(timeout_ms=10)
        return check.committed(tp)

    wait_until(lambda: committed() == 2, message=lambda: f"commit of 2, at {committed()}")
    consumer.close()
    check.close()


def test_auto_offset_reset_earliest_latest_none(stream):
    stream.create_topic(T)
    produce(stream, T, [b"a", b"b", b"c"])
    tp = TopicPartition(T, 0)

    earliest = Consumer(stream, group_id="e", auto_offset_reset="earliest")
    earliest.assign([tp])
    assert earliest.position(tp) == 0
    assert [r.value for r in drain(earliest)] == [b"a", b"b", b"c"]
    earliest.close()

    latest = Consumer(stream, group_id="l", auto_offset_reset="latest")
    latest.assign([tp])
    assert latest.position(tp) == 3
    assert drain(latest) == []
    latest.close()

    none = Consumer(stream, group_id="n", auto_offset_reset="none")
    none.assign([tp])
    with pytest.raises(errors.NoOffsetForPartition):
        none.position(tp)
    with pytest.raises(errors.NoOffsetForPartition):
        none.poll(timeout_ms=100)
    none.close()

    # with a committed offset, 'none' starts there
    setter = Consumer(stream, group_id="n", enable_auto_commit=False)
    setter.assign([tp])
    setter.commit({tp: OffsetAndMetadata(1, "")})
    setter.close()
    none = Consumer(stream, group_id="n", auto_offset_reset="none", enable_auto_commit=False)
    none.assign([tp])
    assert none.position(tp) == 1
    assert [r.value for r in drain(none)] == [b"b", b"c"]
    none.close()


def test_bad_auto_offset_reset_refused(stream):
    with pytest.raises(ValueError):
        Consumer(stream, auto_offset_reset="middle")


def test_subscribe_to_several_topics(stream):
    stream.create_topic("/s:a", partitions=2)
    stream.create_topic("/s:b")
    produce(stream, "/s:a", [b"a0"], partition=0)
    produce(stream, "/s:a", [b"a1"], partition=1)
    produce(stream, "/s:b", [b"b0"])
    consumer = Consumer(stream, group_id="g", auto_offset_reset="earliest")
    consumer.subscribe(["/s:a", "/s:b"])
    records = drain(consumer)
    assert sorted(r.value for r in records) == [b"a0", b"a1", b"b0"]
    assert consumer.assignment() == {
        TopicPartition("/s:a", 0),
        TopicPartition("/s:a", 1),
        TopicPartition("/s:b", 0),
    }
    consumer.close()


def test_consumer_default_stream_resolves_short_names(stream):
    stream.create_topic(T)
    produce(stream, T, [b"x"])
    consumer = Consumer(stream, "t", default_stream="/s", auto_offset_reset="earliest")
    records = drain(consumer)
    consumer.close()
    assert [(r.topic, r.value) for r in records] == [(T, b"x")]


# --- partitionlets, rolling, volumes -------------------------------------------------------


def check_chain(info) -> None:
    """A partition's partitionlets are contiguous and only the last may be active."""
    lets = info.partitionlets
    for prev, nxt in zip(lets, lets[1:], strict=False):
        assert nxt.base_offset == prev.last_offset + 1
        assert not prev.active
    if lets:
        assert lets[0].base_offset == info.log_start_offset
        assert lets[-1].last_offset + 1 == info.log_end_offset
        assert sum(p.messages for p in lets) == info.log_end_offset - info.log_start_offset


def test_partitionlets_roll_by_size_and_span_volumes(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=2000) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T)
        producer = Producer(cluster, acks=1)
        offsets = []
        for i in range(60):
            offsets.append(
                producer.send(T, value=b"%04d" % i + b"x" * 200).get(timeout=scaled(10)).offset
            )
        producer.close()
        assert offsets == list(range(60))
        info = cluster.topic(T).partitions[0]
        check_chain(info)
        lets = info.partitionlets
        assert len(lets) >= 4
        assert len({p.volume for p in lets}) >= 2
        assert [p.active for p in lets].count(True) <= 1
        assert info.log_end_offset == 60
        consumer = assigned(cluster, T, auto_offset_reset="earliest")
        records = drain(consumer)
        consumer.close()
        assert [r.offset for r in records] == list(range(60))
        assert [r.value[:4] for r in records] == [b"%04d" % i for i in range(60)]
        # seeking into the middle of the chain
        consumer = assigned(cluster, T, auto_offset_reset="earliest")
        middle = lets[len(lets) // 2].base_offset + 1
        consumer.seek(TopicPartition(T, 0), middle)
        assert [r.offset for r in drain(consumer)] == list(range(middle, 60))
        consumer.close()
    with Cluster.open(cluster_path) as cluster:  # the chain survives a reopen
        info = cluster.topic(T).partitions[0]
        check_chain(info)
        assert info.log_end_offset == 60
        assert [p.id for p in info.partitionlets] == [p.id for p in lets]


def test_partitionlets_roll_by_age(cluster_path):
    clock = FakeClock()
    with Cluster.open(cluster_path, partitionlet_ms=1, clock=clock) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T)
        producer = Producer(cluster, acks=1)
        for i in range(5):
            assert producer.send(T, value=b"%d" % i).get(timeout=scaled(10)).offset == i
            clock.advance(ms=1)  # each message finds its partitionlet 1 ms old: it rolls
        producer.close()
        info = cluster.topic(T).partitions[0]
        check_chain(info)
        assert [(p.base_offset, p.last_offset) for p in info.partitionlets] == [
            (i, i) for i in range(5)
        ]
        consumer = assigned(cluster, T, auto_offset_reset="earliest")
        assert [r.value for r in drain(consumer)] == [b"%d" % i for i in range(5)]
        consumer.close()


def test_roll_settings_change_on_reopen(cluster_path):
    with Cluster.open(cluster_path) as cluster:
        assert cluster.partitionlet_bytes > 1000
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T)
        produce(cluster, T, [b"x" * 300] * 5)
        assert len(cluster.topic(T).partitions[0].partitionlets) == 1
    with Cluster.open(cluster_path, partitionlet_bytes=500) as cluster:
        for _ in range(6):
            produce(cluster, T, [b"y" * 300])
        info = cluster.topic(T).partitions[0]
        check_chain(info)
        assert info.log_end_offset == 11
        assert len(info.partitionlets) >= 3
    with Cluster.open(cluster_path) as cluster:
        assert cluster.partitionlet_bytes == 500


@pytest.mark.parametrize("kwargs", [{"partitionlet_bytes": 0}, {"partitionlet_ms": -1}])
def test_bad_roll_settings(cluster_path, kwargs):
    with pytest.raises(ValueError):
        Cluster.open(cluster_path, **kwargs)


def test_cluster_partitionlets_and_volumes(cluster):
    cluster.create_stream("/s", ttl=0)
    cluster.create_topic("/s:a", partitions=3)
    cluster.create_topic("/s:b", partitions=1)
    produce(cluster, "/s:a", [b"x" * 10] * 9, key=None)
    produce(cluster, "/s:b", [b"y" * 10] * 4)
    volumes = cluster.volumes()
    assert [v.id for v in volumes] == [1, 2, 3, 4]
    assert all(v.path and v.bytes > 0 for v in volumes)
    everything = cluster.partitionlets()
    of_a = cluster.partitionlets("/s:a")
    of_b = cluster.partitionlets("/s:b")
    assert {p.topic for p in of_a} == {"/s:a"} and {p.topic for p in of_b} == {"/s:b"}
    assert sorted(p.id for p in everything) == sorted(p.id for p in of_a + of_b)
    assert sum(p.messages for p in of_a) == 9
    assert sum(p.messages for p in of_b) == 4
    assert {p.volume for p in everything} <= {1, 2, 3, 4}
    assert sum(v.partitionlets for v in volumes) == len(everything)
    assert sum(v.active_partitionlets for v in volumes) == sum(p.active for p in everything)
    assert sum(v.data_bytes for v in volumes) == sum(p.bytes for p in everything)
    per_volume = {}
    for p in everything:
        per_volume[p.volume] = per_volume.get(p.volume, 0) + 1
    assert {v.id: v.partitionlets for v in volumes if v.partitionlets} == per_volume


def test_cluster_identity(cluster_path):
    with Cluster.open(cluster_path, name="dc1", volumes=2) as cluster:
        ident = cluster.id
        assert cluster.name == "dc1"
        assert str(cluster.path) == str(cluster_path)
        assert len(cluster.volumes()) == 2
    with Cluster.open(cluster_path, volumes=7) as cluster:  # ignored for an existing one
        assert cluster.id == ident
        assert cluster.name == "dc1"
        assert len(cluster.volumes()) == 2


# --- streams and topics administration --------------------------------------------------


def test_stream_info_and_policies(cluster):
    info = cluster.create_stream("/apps/sensors", ttl=3600, default_partitions=3)
    assert info.path == "/apps/sensors"
    assert info.policies["ttl"] == 3600
    assert info.policies["default_partitions"] == 3
    assert info.policies["timestamp_type"] == "create"
    assert info.policies["max_message_bytes"] == 1048576
    assert info.topic_count == 0
    cluster.edit_stream("/apps/sensors", ttl=0)
    again = cluster.stream("/apps/sensors")
    assert again.policies["ttl"] == 0 and again.policies["default_partitions"] == 3
    with pytest.raises(errors.StreamExists):
        cluster.create_stream("/apps/sensors")


def test_streams_paging(cluster):
    paths = [f"/p/s{i:02d}" for i in range(25)] + ["/q/x", "/q/y"]
    for path in reversed(paths):
        cluster.create_stream(path)
    everything = [s.path for s in cluster.streams()]
    assert everything == sorted(paths)
    pages = [[s.path for s in cluster.streams(limit=10, offset=o)] for o in range(0, 30, 10)]
    assert [len(p) for p in pages] == [10, 10, 7]
    assert sum(pages, []) == sorted(paths)
    assert [s.path for s in cluster.streams(prefix="/q/")] == ["/q/x", "/q/y"]
    assert [s.path for s in cluster.streams(prefix="/p/s1", limit=3, offset=2)] == [
        "/p/s12",
        "/p/s13",
        "/p/s14",
    ]
    assert cluster.streams(offset=100) == []
    assert cluster.streams(limit=0) == []


def test_topics_paging_prefix_count(cluster):
    cluster.create_stream("/s", default_partitions=2)
    topic_names = [f"car-{i:03d}" for i in range(30)] + ["bus-1", "bus-2"]
    for name in topic_names:
        cluster.create_topic(f"/s:{name}")
    assert cluster.topic_count("/s") == 32
    assert cluster.stream("/s").topic_count == 32
    assert [t.name for t in cluster.topics("/s")] == [f"/s:{n}" for n in sorted(topic_names)]
    assert [t.topic for t in cluster.topics("/s", prefix="bus")] == ["bus-1", "bus-2"]
    page = cluster.topics("/s", prefix="car-", limit=5, offset=10)
    assert [t.topic for t in page] == [f"car-{i:03d}" for i in range(10, 15)]
    assert all(t.partition_count == 2 and t.stream == "/s" for t in page)
    assert cluster.topic_count("/s", prefix="car-01") == 10
    with pytest.raises(errors.TopicExists):
        cluster.create_topic("/s:bus-1")
    with pytest.raises(errors.UnknownStream):
        cluster.topics("/nope")


def test_add_partitions_never_fewer(stream):
    stream.create_topic(T, partitions=3)
    with pytest.raises(errors.InvalidPartition):
        stream.add_partitions(T, 2)
    assert stream.topic(T).partition_count == 3
    assert stream.add_partitions(T, 3).partition_count == 3
    info = stream.add_partitions(T, 5)
    assert info.partition_count == 5
    assert [p.partition for p in stream.topic(T).partitions] == [0, 1, 2, 3, 4]
    meta = produce(stream, T, [b"new"], partition=4)[0]
    assert (meta.partition, meta.offset) == (4, 0)


@pytest.mark.parametrize("count", [0, -1, True, "3"])
def test_create_topic_with_bad_partition_count(stream, count):
    with pytest.raises(ValueError):
        stream.create_topic(T, partitions=count)
    assert stream.topic_count("/s") == 0


def test_delete_topic(stream):
    stream.create_topic(T, partitions=2)
    stream.create_topic("/s:other")
    produce(stream, T, [b"x"] * 5, partition=0)
    produce(stream, "/s:other", [b"kept"])
    consumer = Consumer(stream, T, group_id="g", auto_offset_reset="earliest")
    drain(consumer)
    consumer.commit()
    consumer.close()
    stream.delete_topic(T)
    with pytest.raises(errors.UnknownTopic):
        stream.topic(T)
    with pytest.raises(errors.UnknownTopic):
        stream.delete_topic(T)
    assert stream.topic_count("/s") == 1
    assert [p.topic for p in stream.partitionlets()] == ["/s:other"]
    assert stream.stream("/s").messages == 1
    # a topic of the same name starts empty, with no committed offsets
    stream.create_topic(T, partitions=2)
    info = stream.topic(T)
    assert [p.log_end_offset for p in info.partitions] == [0, 0]
    check = Consumer(stream, group_id="g", enable_auto_commit=False)
    assert check.committed(TopicPartition(T, 0)) is None
    check.close()
    consumer = assigned(stream, "/s:other", auto_offset_reset="earliest")
    assert [r.value for r in drain(consumer)] == [b"kept"]
    consumer.close()


def test_delete_stream(cluster):
    cluster.create_stream("/s", ttl=0)
    cluster.create_stream("/keep", ttl=0)
    produce(cluster, "/s:a", [b"x"] * 3)
    produce(cluster, "/keep:a", [b"y"])
    cluster.delete_stream("/s")
    with pytest.raises(errors.UnknownStream):
        cluster.stream("/s")
    with pytest.raises(errors.NotFound):
        cluster.topic("/s:a")
    with pytest.raises(errors.UnknownStream):
        cluster.delete_stream("/s")
    assert [s.path for s in cluster.streams()] == ["/keep"]
    assert {p.topic for p in cluster.partitionlets()} == {"/keep:a"}
    assert sum(v.data_bytes for v in cluster.volumes()) == sum(
        p.bytes for p in cluster.partitionlets()
    )
    cluster.create_stream("/s")
    assert cluster.stream("/s").topic_count == 0
    assert cluster.stream("/s").messages == 0
    assert cluster.stream("/keep").messages == 1


def test_stream_counts_messages_and_bytes(cluster):
    cluster.create_stream("/s", ttl=0)
    produce(cluster, "/s:a", [b"x" * 100] * 4)
    produce(cluster, "/s:b", [b"y" * 100] * 2)
    info = cluster.stream("/s")
    assert info.topic_count == 2
    assert info.messages == 6
    assert info.bytes >= 600


def test_closed_cluster_refuses_calls(cluster_path):
    cluster = Cluster.open(cluster_path)
    cluster.close()
    with pytest.raises(errors.Closed):
        cluster.create_stream("/s")
    with pytest.raises(errors.Closed):
        cluster.streams()


# --- one truth: a long-lived producer follows changes made elsewhere ------------------------


def test_producer_sees_added_partitions(stream):
    stream.create_topic(T, partitions=2)
    producer = Producer(stream, acks=1)
    try:
        assert producer.send(T, value=b"a", partition=1).get(timeout=scaled(10)).partition == 1
        stream.add_partitions(T, 4)
        meta = producer.send(T, value=b"b", partition=3).get(timeout=scaled(10))
        assert (meta.partition, meta.offset) == (3, 0)
    finally:
        producer.close()


def test_producer_keys_follow_the_new_partition_count(stream):
    from engine.client.partitioner import partition_for_key

    stream.create_topic(T, partitions=1)
    producer = Producer(stream, acks=1)
    try:
        producer.send(T, value=b"a", key=b"k").get(timeout=scaled(10))
        stream.add_partitions(T, 12)
        keys = [b"key-%d" % i for i in range(20)]
        futures = {k: producer.send(T, value=b"b", key=k) for k in keys}
        producer.flush()
        got = {k: f.get(timeout=scaled(10)).partition for k, f in futures.items()}
    finally:
        producer.close()
    assert got == {k: partition_for_key(k, 12) for k in keys}


def test_producer_follows_a_recreated_topic(stream):
    stream.create_topic(T, partitions=1)
    producer = Producer(stream, acks=1)
    try:
        assert producer.send(T, value=b"old").get(timeout=scaled(10)).offset == 0
        assert producer.send(T, value=b"old").get(timeout=scaled(10)).offset == 1
        stream.delete_topic(T)
        stream.create_topic(T, partitions=1)
        meta = producer.send(T, value=b"new").get(timeout=scaled(10))
    finally:
        producer.close()
    assert meta.offset == 0
    consumer = assigned(stream, T, auto_offset_reset="earliest")
    assert [r.value for r in drain(consumer)] == [b"new"]
    consumer.close()


def test_producer_follows_a_lower_max_message_bytes(stream):
    stream.create_topic(T)
    producer = Producer(stream, acks=1)
    try:
        assert producer.send(T, value=b"x" * 50).get(timeout=scaled(10)).offset == 0
        stream.edit_stream("/s", max_message_bytes=10)
        with pytest.raises(errors.MessageTooLarge):
            producer.send(T, value=b"x" * 50)
        producer.flush()
    finally:
        producer.close()
    assert stream.topic(T).partitions[0].log_end_offset == 1


def test_producer_follows_a_timestamp_type_change(stream):
    stream.create_topic(T)
    producer = Producer(stream, acks=1)
    try:
        producer.send(T, value=b"create", timestamp_ms=1_000).get(timeout=scaled(10))
        stream.edit_stream("/s", timestamp_type="log_append")
        before = now_ms()
        producer.send(T, value=b"append", timestamp_ms=1_000).get(timeout=scaled(10))
        after = now_ms()
    finally:
        producer.close()
    consumer = assigned(stream, T, auto_offset_reset="earliest")
    records = drain(consumer)
    consumer.close()
    assert [(r.value, r.timestamp_type) for r in records] == [(b"create", 0), (b"append", 1)]
    assert records[0].timestamp == 1_000
    assert before <= records[1].timestamp <= after


def test_default_max_message_bytes_is_one_mebibyte(cluster):
    cluster.create_stream("/s")
    cluster.create_topic(T)
    producer = Producer(cluster, acks=1)
    try:
        with pytest.raises(errors.MessageTooLarge):
            producer.send(T, value=b"x" * (1048576 + 1))
        assert producer.send(T, value=b"x" * 1048576).get(timeout=scaled(10)).offset == 0
    finally:
        producer.close()


def test_expired_messages_are_hidden_at_once(cluster):
    cluster.create_stream("/s", ttl=3600)
    cluster.create_topic(T)
    old = now_ms() - 2 * 3600 * 1000
    producer = Producer(cluster, acks=1)
    try:
        producer.send(T, value=b"expired", timestamp_ms=old).get(timeout=scaled(10))
        producer.send(T, value=b"fresh").get(timeout=scaled(10))
    finally:
        producer.close()
    consumer = assigned(cluster, T, auto_offset_reset="earliest")
    records = drain(consumer)
    consumer.close()
    assert [r.value for r in records] == [b"fresh"]


def test_consumer_sees_added_partitions(stream):
    stream.create_topic(T, partitions=1)
    consumer = assigned(stream, T, auto_offset_reset="earliest")
    assert drain(consumer) == []
    stream.add_partitions(T, 3)
    tp2 = TopicPartition(T, 2)
    assert consumer.end_offsets([tp2]) == {tp2: 0}
    consumer.assign([TopicPartition(T, 0), tp2])
    produce(stream, T, [b"x"], partition=2)
    assert [(r.partition, r.value) for r in drain(consumer)] == [(2, b"x")]
    consumer.close()


def test_subscriber_gets_new_partitions_and_new_topics(stream):
    stream.create_topic(T, partitions=1)
    consumer = Consumer(stream, T, "/s:later", group_id="g", auto_offset_reset="earliest")
    assert drain(consumer) == []
    stream.add_partitions(T, 2)
    produce(stream, T, [b"p1"], partition=1)
    produce(stream, "/s:later", [b"created later"])
    assert sorted(r.value for r in drain(consumer)) == [b"created later", b"p1"]
    assert consumer.assignment() == {
        TopicPartition(T, 0),
        TopicPartition(T, 1),
        TopicPartition("/s:later", 0),
    }
    consumer.close()


def test_tailing_consumer_follows_rolls_made_by_another_handle(cluster_path):
    with (
        Cluster.open(cluster_path, partitionlet_bytes=300) as writer,
        Cluster.open(cluster_path) as reader,
    ):
        writer.create_stream("/s", ttl=0)
        writer.create_topic(T)
        consumer = assigned(reader, T, auto_offset_reset="earliest")
        producer = Producer(writer, acks=1)
        seen = []
        for round_ in range(10):
            for i in range(5):
                producer.send(T, value=b"%02d-%d" % (round_, i) + b"." * 40).get(timeout=scaled(10))
            seen += drain(consumer)
        producer.close()
        consumer.close()
        assert [r.offset for r in seen] == list(range(50))
        assert [r.value[:4] for r in seen] == [
            b"%02d-%d" % (r, i) for r in range(10) for i in range(5)
        ]
        assert len(reader.topic(T).partitions[0].partitionlets) >= 5


# --- options ---------------------------------------------------------------------------------


def test_serializers_and_deserializers(stream):
    import json

    from engine.client.partitioner import partition_for_key

    stream.create_topic(T, partitions=5)
    producer = Producer(
        stream,
        acks=1,
        key_serializer=str.encode,
        value_serializer=lambda v: json.dumps(v).encode(),
    )
    metas = [
        producer.send(T, value={"n": i}, key=f"user-{i}").get(timeout=scaled(10)) for i in range(10)
    ]
    producer.close()
    for i, meta in enumerate(metas):
        assert meta.partition == partition_for_key(f"user-{i}".encode(), 5)  # serialized key
    consumer = Consumer(
        stream,
        auto_offset_reset="earliest",
        key_deserializer=bytes.decode,
        value_deserializer=json.loads,
    )
    consumer.assign([TopicPartition(T, p) for p in range(5)])
    records = drain(consumer)
    consumer.close()
    assert sorted((r.key, r.value["n"]) for r in records) == sorted(
        (f"user-{i}", i) for i in range(10)
    )


def test_custom_partitioner(stream):
    stream.create_topic(T, partitions=4)
    seen = []

    def last(key, all_partitions, available):
        seen.append(key)
        return all_partitions[-1]

    producer = Producer(stream, acks=1, partitioner=last)
    metas = [
        producer.send(T, value=b"v", key=k).get(timeout=scaled(10)) for k in (b"a", b"b", None)
    ]
    producer.close()
    assert [m.partition for m in metas] == [3, 3, 3]
    assert seen[:2] == [b"a", b"b"]


def test_poll_without_topics_is_illegal(stream):
    consumer = Consumer(stream)
    with pytest.raises(errors.IllegalState):
        consumer.poll(timeout_ms=0)
    consumer.close()


def test_volumes_at_chosen_paths(tmp_path):
    disk_a, disk_b = tmp_path / "disk-a", tmp_path / "disk-b"
    paths = [str(disk_a / "v1.db"), str(disk_b / "v2.db"), "local/v3.db"]
    with Cluster.open(tmp_path / "c", volumes=paths) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T, partitions=6)
        produce(cluster, T, [b"%d" % i for i in range(60)], key=None)
        volumes = cluster.volumes()
        assert len(volumes) == 3
    assert (disk_a / "v1.db").exists() and (disk_b / "v2.db").exists()
    assert (tmp_path / "c" / "local" / "v3.db").exists()
    with Cluster.open(tmp_path / "c") as cluster:
        assert len(cluster.volumes()) == 3
        consumer = assigned(cluster, T, auto_offset_reset="earliest")
        assert sorted(int(r.value) for r in drain(consumer)) == list(range(60))
        consumer.close()


# --- one message from a console (produce_one) ----------------------------------------------


def test_produce_one_writes_durably_and_answers_its_metadata(stream, monkeypatch):
    from engine.client import producer as producer_module

    made: list[Producer] = []

    class Recording(Producer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(producer_module, "Producer", Recording)
    stream.create_topic(T, partitions=2)
    meta = producer_module.produce_one(
        stream, T, value=b"v", key=b"k", headers=[("unit", b"C")], partition=1, timestamp_ms=5
    )
    assert (meta.topic, meta.partition, meta.offset, meta.timestamp) == (T, 1, 0, 5)
    # a console's click deserves the durable write, and the producer is closed after it
    assert [p.acks for p in made] == ["all"]
    assert made[0].wait_closed(0)
    consumer = assigned(stream, T, [1], auto_offset_reset="earliest")
    [record] = drain(consumer)
    consumer.close()
    assert (record.key, record.value, record.headers) == (b"k", b"v", [("unit", b"C")])


def test_produce_one_raises_the_engines_errors_for_a_console_to_show(stream):
    from engine import Principal
    from engine.client.producer import produce_one

    stream.create_topic(T, partitions=2)
    with pytest.raises(errors.InvalidPartition):
        produce_one(stream, T, value=b"v", partition=2)
    stream.edit_stream("/s", produce_perm="u:alice")
    with pytest.raises(errors.AccessDenied):
        produce_one(stream.as_principal(Principal("mallory")), T, value=b"v")
    assert stream.topic(T).messages == 0
