"""Property tests: whatever the interleaving of sends, flushes and reopens, every partition
holds dense offsets 0..n-1 in send order, and consumers read back exactly what was
acknowledged."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from engine import Cluster, Consumer, Producer, TopicPartition
from tests.timing import scaled

TOPICS = {"/s:a": 3, "/s:b": 1}
KEYS = st.one_of(st.none(), st.sampled_from([b"k0", b"k1", b"k2", b"k3", b"", b"\xff" * 3]))
HEADERS = st.one_of(
    st.none(), st.lists(st.tuples(st.sampled_from(["h", "x-id"]), st.binary(max_size=5)))
)


class Log(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="plet-prop-"))
        self.path = self.dir / "cluster"
        self.cluster = Cluster.open(self.path, partitionlet_bytes=400)
        self.cluster.create_stream("/s", ttl=0)
        for topic, partitions in TOPICS.items():
            self.cluster.create_topic(topic, partitions=partitions)
        self.producers: list[Producer] = []
        self._new_producers()
        self.counter = 0
        # sends whose futures have not been checked: (producer index, expected record, future)
        self.pending: list[tuple[int, tuple, object]] = []
        # acknowledged records per (topic, partition): offset -> (producer, seq, key, value, ...)
        self.acked: dict[tuple[str, int], dict[int, tuple]] = {}

    def _new_producers(self) -> None:
        self.producers = [
            Producer(self.cluster, acks=1, linger_ms=0),
            Producer(self.cluster, acks="all", linger_ms=2, batch_size=64),
        ]

    # --- rules ----------------------------------------------------------------------------

    @rule(
        which=st.integers(0, 1),
        topic=st.sampled_from(sorted(TOPICS)),
        key=KEYS,
        partition=st.one_of(st.none(), st.integers(0, 2)),
        headers=HEADERS,
        timestamp=st.one_of(st.none(), st.integers(0, 2**42)),
        size=st.integers(0, 60),
    )
    def send(self, which, topic, key, partition, headers, timestamp, size):
        if partition is not None:
            partition %= TOPICS[topic]
        self.counter += 1
        value = b"%d:" % self.counter + b"v" * size
        future = self.producers[which].send(
            topic,
            value=value,
            key=key,
            partition=partition,
            headers=headers,
            timestamp_ms=timestamp,
        )
        self.pending.append(
            (which, (topic, partition, self.counter, key, value, headers or [], timestamp), future)
        )

    @rule(which=st.integers(0, 1))
    def flush_one(self, which):
        self.producers[which].flush()
        self._collect(only=which)

    @rule()
    def flush_all(self):
        for p in self.producers:
            p.flush()
        self._collect()

    @rule(roll=st.sampled_from([None, 300, 5000]))
    def reopen(self, roll):
        for p in self.producers:
            p.close()
        self._collect()
        self.cluster.close()
        self.cluster = Cluster.open(self.path, partitionlet_bytes=roll)
        self._new_producers()

    @precondition(lambda self: not self.pending)
    @rule(max_records=st.sampled_from([None, 1, 7]))
    def consume_everything(self, max_records):
        consumer = Consumer(self.cluster, auto_offset_reset="earliest", enable_auto_commit=False)
        consumer.assign([TopicPartition(t, p) for t, n in TOPICS.items() for p in range(n)])
        got: dict[tuple[str, int], list] = {}
        while True:
            batch = consumer.poll(timeout_ms=50, max_records=max_records)
            if not batch:
                break
            empty = True
            for tp, records in batch.items():
                if records:
                    empty = False
                got.setdefault((tp.topic, tp.partition), []).extend(records)
            if empty:
                break
        consumer.close()
        for tp in [(t, p) for t, n in TOPICS.items() for p in range(n)]:
            expected = self.acked.get(tp, {})
            records = got.get(tp, [])
            assert [r.offset for r in records] == sorted(expected)
            for r in records:
                _, seq, key, value, headers, timestamp = expected[r.offset]
                assert r.topic == tp[0] and r.partition == tp[1]
                assert (r.key, r.value, list(r.headers)) == (key, value, list(headers))
                if timestamp is not None:
                    assert r.timestamp == timestamp

    # --- checking ---------------------------------------------------------------------------

    def _collect(self, only: int | None = None) -> None:
        keep = []
        for which, expected, future in self.pending:
            if only is not None and which != only:
                keep.append((which, expected, future))
                continue
            topic, partition, seq, key, value, headers, timestamp = expected
            meta = future.get(timeout=scaled(30))
            assert meta.topic == topic
            if partition is not None:
                assert meta.partition == partition
            assert 0 <= meta.partition < TOPICS[topic]
            slot = self.acked.setdefault((topic, meta.partition), {})
            assert meta.offset not in slot, "two messages got one offset"
            slot[meta.offset] = (which, seq, key, value, headers, timestamp)
        self.pending = keep

    @invariant()
    def offsets_are_dense_and_in_send_order(self):
        for offsets in self.acked.values():
            ordered = sorted(offsets)
            if not self.pending:
                assert ordered == list(range(len(ordered)))
            for which in (0, 1):
                seqs = [offsets[o][1] for o in ordered if offsets[o][0] == which]
                assert seqs == sorted(seqs), "a producer's order was not kept"

    @invariant()
    def cluster_agrees(self):
        if self.pending:
            return
        for topic, n in TOPICS.items():
            info = self.cluster.topic(topic)
            for p in range(n):
                part = info.partitions[p]
                assert part.log_end_offset == len(self.acked.get((topic, p), {}))
                lets = part.partitionlets
                for prev, nxt in zip(lets, lets[1:], strict=False):
                    assert nxt.base_offset == prev.last_offset + 1

    def teardown(self):
        try:
            for p in self.producers:
                p.close()
            self.cluster.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


Log.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLog = Log.TestCase
