"""Compaction: the `compact` policy, run by `Cluster.compact()` (engine.ops.retention), on real
files, alone and while readers and writers work."""

from __future__ import annotations

import threading

from engine import Cluster, Consumer, Producer, TopicPartition
from engine.clock import FakeClock, now_ms
from engine.ops.retention import CompactionReport
from tests.timing import scaled

T = "/k:t"
HOUR_MS = 3_600_000


def drain(consumer, timeout_ms: int = 20) -> list:
    out = []
    for _ in range(100_000):
        got = [r for records in consumer.poll(timeout_ms=timeout_ms).values() for r in records]
        if not got:
            return out
        out.extend(got)
    raise AssertionError("the consumer never caught up")


def read_all(cluster, topic=T) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    try:
        return [(r.offset, r.key, r.value) for r in drain(consumer)]
    finally:
        consumer.close()


def send_each(producer, topic, messages, **kwargs) -> list[int]:
    """(key, value) pairs, one batch each; their offsets."""
    return [
        producer.send(topic, key=k, value=v, **kwargs).get(timeout=scaled(10)).offset
        for k, v in messages
    ]


def stored(cluster, topic=T) -> tuple[int, int]:
    """(messages, bytes) as the volumes count them, over the topic's partitionlets."""
    lets = cluster.partitionlets(topic)
    return sum(p.messages for p in lets), sum(p.bytes for p in lets)


def compacted_stream(cluster, **policies):
    cluster.create_stream("/k", ttl=0, compact=True, **policies)
    cluster.create_topic(T, partitions=1)


def test_latest_per_key_offsets_unchanged_in_the_active_partitionlet(cluster):
    compacted_stream(cluster)
    # One batch of many messages (the producer lingers until the flush), rewritten with
    # offset deltas...
    with Producer(cluster, acks=1, linger_ms=60_000) as producer:
        futures = [
            producer.send(T, key=k, value=v, headers=h)
            for k, v, h in [
                (b"a", b"a0", [("n", b"0")]),
                (b"b", b"b1", None),
                (None, b"free2", None),
                (b"a", b"a3", [("n", b"3")]),
                (b"c", b"c4", None),
                (None, None, None),
            ]
        ]
        producer.flush()
        assert [f.get(timeout=scaled(10)).offset for f in futures] == list(range(6))
    # ...then single batches, one of which goes whole.
    with Producer(cluster, acks=1) as producer:
        send_each(
            producer,
            T,
            [(b"b", b"b6"), (b"a", b"a7"), (None, b"free8"), (b"d", b"d9"), (b"d", b"d10")],
        )
    assert len(cluster.partitionlets(T)) == 1  # all of it in the active partitionlet
    before = stored(cluster)
    assert cluster.stream("/k").messages == 11

    report = cluster.compact()
    assert isinstance(report, CompactionReport)
    assert (report.partitions, report.partitionlets_rewritten) == (1, 1)
    assert report.messages_removed == 4 and report.tombstones_removed == 0
    assert report.batches_deleted == 1 and report.batches_rewritten == 1
    assert report.by_topic[T].messages_removed == 4
    expected = [
        (2, None, b"free2"),
        (4, b"c", b"c4"),
        (5, None, None),
        (6, b"b", b"b6"),
        (7, b"a", b"a7"),
        (8, None, b"free8"),
        (10, b"d", b"d10"),
    ]
    assert read_all(cluster) == expected
    after = stored(cluster)
    assert after[0] == 7 and before[1] - after[1] == report.bytes_freed > 0
    usage = cluster.stream("/k")
    assert (usage.messages, usage.bytes) == after
    info = cluster.topic(T).partitions[0]
    assert (info.log_start_offset, info.log_end_offset) == (0, 11)

    # Appends go on at the log end; a second pass finds nothing more, a third removes what
    # the new messages superseded.
    assert cluster.compact().messages_removed == 0
    with Producer(cluster, acks=1) as producer:
        assert send_each(producer, T, [(b"c", b"c11")]) == [11]
    assert cluster.compact().messages_removed == 1
    assert read_all(cluster) == [e for e in expected if e[1] != b"c"] + [(11, b"c", b"c11")]


def test_headers_survive_a_rewrite(cluster):
    compacted_stream(cluster)
    with Producer(cluster, acks=1, linger_ms=60_000) as producer:  # one batch
        for k, h in [(b"x", [("h", b"1")]), (b"y", [("h", b"2"), ("e", None)]), (b"x", None)]:
            producer.send(T, key=k, value=b"v", headers=h)
        producer.flush()
    cluster.compact()
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(T, 0)])
    got = [(r.offset, r.key, list(r.headers)) for r in drain(consumer)]
    consumer.close()
    assert got == [(1, b"y", [("h", b"2"), ("e", None)]), (2, b"x", [])]


def test_tombstones_go_only_after_delete_retention_ms(cluster_path):
    clock = FakeClock(now_ms=now_ms())
    with Cluster.open(cluster_path, clock=clock) as cluster:
        compacted_stream(cluster, delete_retention_ms=HOUR_MS)
        old = clock.now_ms() - 2 * HOUR_MS
        with Producer(cluster, acks=1) as producer:
            send_each(producer, T, [(b"a", b"a0"), (b"b", b"b1"), (b"c", b"c2")], timestamp_ms=old)
            send_each(producer, T, [(b"a", None)], timestamp_ms=old)  # 3: old tombstone
            send_each(producer, T, [(b"b", None)])  # 4: fresh tombstone
            send_each(producer, T, [(b"c", None)], timestamp_ms=old)  # 5: superseded tombstone
            send_each(producer, T, [(b"c", b"c6")], timestamp_ms=old)

        report = cluster.compact()
        # a: gone entirely (its tombstone is old); b: only its fresh tombstone is left;
        # c: its tombstone was superseded.
        assert read_all(cluster) == [(4, b"b", None), (6, b"c", b"c6")]
        assert report.messages_removed == 5 and report.tombstones_removed == 2

        cluster.edit_stream("/k", delete_retention_ms=0)
        clock.advance(ms=1)  # the tombstone's timestamp must be in the past
        report = cluster.compact()
        assert (report.messages_removed, report.tombstones_removed) == (1, 1)
        assert read_all(cluster) == [(6, b"c", b"c6")]
        assert cluster.topic(T).partitions[0].log_end_offset == 7


def test_min_compaction_lag_is_respected(cluster):
    compacted_stream(cluster, min_compaction_lag_ms=HOUR_MS, delete_retention_ms=0)
    old, new = now_ms() - 2 * HOUR_MS, now_ms()
    messages = [
        (b"a", b"a0", old),
        (b"a", b"a1", old),
        (b"a", b"a2", new),  # 0, 1 go: 2 is latest
        (b"b", b"b3", new),
        (b"b", b"b4", new),  # both within the lag: kept
        (b"c", b"c5", new),
        (b"c", b"c6", old),  # 5 within the lag, 6 the latest: kept
        (b"d", b"d7", old),
        (b"d", b"d8", old),  # 7 goes
        (b"e", b"e9", old),
        (b"e", None, new),  # 9 goes; the fresh tombstone stays
    ]
    with Producer(cluster, acks=1) as producer:
        for k, v, ts in messages:
            producer.send(T, key=k, value=v, timestamp_ms=ts).get(timeout=scaled(10))
    report = cluster.compact()
    assert report.messages_removed == 4
    kept = [2, 3, 4, 5, 6, 8, 10]
    assert read_all(cluster) == [(i, messages[i][0], messages[i][1]) for i in kept]


def test_a_key_written_again_in_a_later_partitionlet(cluster_path):
    # partitionlet_bytes=1: every batch fills its partitionlet.
    with Cluster.open(cluster_path, partitionlet_bytes=1) as cluster:
        compacted_stream(cluster)
        with Producer(cluster, acks=1) as producer:
            send_each(
                producer,
                T,
                [(b"a", b"a0"), (b"b", b"b1"), (b"a", b"a2"), (b"b", b"b3"), (b"c", b"c4")],
            )
        lets = cluster.partitionlets(T)
        assert [p.base_offset for p in lets] == [0, 1, 2, 3, 4, 5]
        report = cluster.compact()
        assert (report.messages_removed, report.partitionlets_rewritten) == (2, 2)
        assert read_all(cluster) == [(2, b"a", b"a2"), (3, b"b", b"b3"), (4, b"c", b"c4")]
        lets = cluster.partitionlets(T)
        assert [p.messages for p in lets] == [0, 0, 1, 1, 1, 0]
        assert [p.base_offset for p in lets] == [0, 1, 2, 3, 4, 5]  # offsets stay put
        info = cluster.topic(T).partitions[0]
        assert (info.log_start_offset, info.log_end_offset) == (0, 5)
        with Producer(cluster, acks=1) as producer:
            assert send_each(producer, T, [(b"c", b"c5")]) == [5]
        cluster.compact()
        assert read_all(cluster) == [(2, b"a", b"a2"), (3, b"b", b"b3"), (5, b"c", b"c5")]


def test_time_lookup_after_compaction(cluster):
    """Compaction keeps the batches' running time index true, so `offsets_for_times` finds
    a message that comes after one that was removed."""
    compacted_stream(cluster)
    t0 = now_ms() - HOUR_MS
    with Producer(cluster, acks=1) as producer:
        for k, dt in [(b"a", 100), (b"x", 50), (b"y", 90), (b"a", 10)]:
            producer.send(T, key=k, value=b"v", timestamp_ms=t0 + dt).get(timeout=scaled(10))
    assert cluster.compact().messages_removed == 1
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    tp = TopicPartition(T, 0)
    consumer.assign([tp])
    found = consumer.offsets_for_times({tp: t0 + 80})[tp]
    assert (found.offset, found.timestamp) == (2, t0 + 90)
    with Producer(cluster, acks=1) as producer:  # appends extend the index from there
        producer.send(T, key=b"z", value=b"v", timestamp_ms=t0 + 95).get(timeout=scaled(10))
    found = consumer.offsets_for_times({tp: t0 + 93})[tp]
    assert (found.offset, found.timestamp) == (4, t0 + 95)
    consumer.close()


def test_streams_without_compact_are_left_alone(cluster):
    cluster.create_stream("/plain", ttl=0)
    with Producer(cluster, acks=1) as producer:
        send_each(producer, "/plain:t", [(b"a", b"1"), (b"a", b"2")])
    assert cluster.compact() == CompactionReport()
    assert [r[0] for r in read_all(cluster, "/plain:t")] == [0, 1]


def test_a_reader_during_compaction_sees_a_consistent_log(cluster_path):
    """Every record a reader gets while compaction runs (and rewrites, pass after pass, what
    a writer keeps adding) is an original message at its own offset, in order, never twice;
    and no key's latest message is ever missing."""
    keys = 7
    with Cluster.open(cluster_path, partitionlet_bytes=4000) as cluster:
        compacted_stream(cluster)
        lock = threading.Lock()
        original: dict[int, tuple[bytes, bytes]] = {}
        latest: dict[bytes, int] = {}
        counter = iter(range(10**9))

        def produce(producer, count):
            futures = []
            for _ in range(count):
                n = next(counter)
                key, value = b"k%d" % (n % keys), b"%d" % n
                futures.append((key, value, producer.send(T, key=key, value=value)))
            producer.flush()
            for key, value, f in futures:
                offset = f.get(timeout=scaled(10)).offset
                with lock:
                    original[offset] = (key, value)
                    latest[key] = max(latest.get(key, -1), offset)

        with Producer(cluster, acks=1) as producer:
            for _ in range(30):
                produce(producer, 40)
        assert len(cluster.partitionlets(T)) > 3

        stop = threading.Event()
        passes = []
        errors = []

        def compacting():
            try:
                with Cluster.open(cluster_path) as other, Producer(other, acks=1) as producer:
                    while not stop.is_set():
                        passes.append(other.compact())
                        produce(producer, 20)  # more for the next pass to remove
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        thread = threading.Thread(target=compacting)
        thread.start()
        reads = []
        try:
            while len(reads) < 20 or len(passes) < 3:
                with lock:
                    expected_latest = dict(latest)
                consumer = Consumer(cluster, auto_offset_reset="earliest", max_poll_records=37)
                consumer.assign([TopicPartition(T, 0)])
                reads.append((expected_latest, drain(consumer, timeout_ms=0)))
                consumer.close()
        finally:
            stop.set()
            thread.join()
        assert not errors
        assert sum(p.messages_removed for p in passes) > 1200 - keys
        for expected_latest, got in reads:
            offsets = [r.offset for r in got]
            assert offsets == sorted(set(offsets))  # in order, never twice
            for r in got:
                assert original[r.offset] == (r.key, r.value)  # the message of that offset
            # A key's latest message may only go once a later one exists, which the reader
            # then finds further on.
            seen: dict[bytes, int] = {}
            for r in got:
                seen[r.key] = r.offset
            for key, offset in expected_latest.items():
                assert seen[key] >= offset
        cluster.compact()
        with lock:
            assert [r[0] for r in read_all(cluster)] == sorted(latest.values())


def test_a_producer_appending_during_compaction_loses_nothing(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=6000) as cluster:
        compacted_stream(cluster)
        sent: dict[int, tuple[bytes, bytes]] = {}
        errors = []
        done = threading.Event()

        def producing():
            try:
                with Producer(cluster, acks=1, linger_ms=1) as producer:
                    for round_ in range(40):
                        futures = []
                        for i in range(25):
                            n = round_ * 25 + i
                            # Unique keys (never superseded) and a few hot ones.
                            key = b"u%d" % n if n % 2 else b"hot%d" % (n % 3)
                            value = b"%d" % n
                            futures.append((key, value, producer.send(T, key=key, value=value)))
                        producer.flush()
                        for key, value, f in futures:
                            sent[f.get(timeout=scaled(10)).offset] = (key, value)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                done.set()

        thread = threading.Thread(target=producing)
        thread.start()
        passes = 0
        try:
            with Cluster.open(cluster_path) as other:
                while not done.is_set() or passes < 2:
                    other.compact()
                    passes += 1
        finally:
            thread.join()
        assert not errors and len(sent) == 1000
        assert sorted(sent) == list(range(1000))
        cluster.compact()
        latest = {key: offset for offset, (key, _) in sorted(sent.items())}
        expected = [(o, *sent[o]) for o in sorted(latest.values())]
        assert read_all(cluster) == expected
        assert len(expected) == 500 + 3
        assert stored(cluster)[0] == len(expected)
        assert cluster.stream("/k").messages == len(expected)
        with Producer(cluster, acks=1) as producer:
            assert send_each(producer, T, [(b"last", b"x")]) == [1000]
