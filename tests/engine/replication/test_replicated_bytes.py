"""Replicated bytes are checked before they are written (issue 12, finding 4).

A target cluster stores what another cluster's replicator sends it, and every later reader
decodes it. `engine.storage.batch.check` walks a payload's layout with bounds and compares it with
its row; `DirectoryTarget.apply` (the engine's door, which the HTTP service uses too)
checks every batch of a call before the first is written, so a bad one changes nothing.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from engine.replication import DirectoryTarget, check_replica_batch
from engine.storage import batch as codec
from engine.storage.volume import ReplicaBatch
from tests.timing import scaled

ORIGIN = "7d4c1a52-3f0e-4d8b-9a61-2b5e8c0f9d13"
TS = 1_700_000_000_000


def replica(values, *, base=0, timestamps=None, deltas=None, last=None, **fields):
    """A ReplicaBatch as a cluster would send it (fields may be overridden)."""
    timestamps = list(timestamps or [TS] * len(values))
    payload = codec.encode(list(values), timestamps, None, None, deltas)
    span = (deltas[-1] if deltas else len(values) - 1) if values else 0
    row = {
        "base_offset": base,
        "last_offset": base + span if last is None else last,
        "count": len(values),
        "first_ts": min(timestamps),
        "max_ts": max(timestamps),
        "ts_type": 0,
        "origin": ORIGIN,
        "payload": payload,
        "append_ms": TS,
    }
    row.update(fields)
    return ReplicaBatch(**row)


# --- engine.storage.batch.check --------------------------------------------------------------------

MAYBE_BYTES = st.one_of(st.none(), st.binary(max_size=20))
HEADERS = st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=8), MAYBE_BYTES), max_size=3))


@st.composite
def stored_batches(draw):
    """What the engine writes: fresh batches and compacted ones (offset deltas)."""
    n = draw(st.integers(min_value=1, max_value=20))
    values = draw(st.lists(MAYBE_BYTES, min_size=n, max_size=n))
    stamps = draw(
        st.lists(st.integers(min_value=0, max_value=codec.MAX_TIMESTAMP_MS), min_size=n, max_size=n)
    )
    keys = draw(st.one_of(st.none(), st.lists(MAYBE_BYTES, min_size=n, max_size=n)))
    headers = draw(st.one_of(st.none(), st.lists(HEADERS, min_size=n, max_size=n)))
    deltas = None
    if draw(st.booleans()):
        deltas = sorted(draw(st.sets(st.integers(0, 10_000), min_size=n, max_size=n)))
    base = draw(st.integers(min_value=0, max_value=codec.MAX_OFFSET - 20_000))
    span = deltas[-1] if deltas else n - 1
    last = base + span + draw(st.integers(min_value=0, max_value=5))  # compaction keeps ranges
    payload = codec.encode(values, stamps, keys, headers, deltas)
    return payload, {
        "base_offset": base,
        "last_offset": last,
        "count": n,
        "first_ts": min(stamps),
        "max_ts": max(stamps),
    }


@settings(max_examples=300, deadline=None)
@given(stored_batches())
def test_every_batch_the_engine_writes_passes(args):
    payload, row = args
    codec.check(payload, **row)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stored_batches(), st.data())
def test_damaged_bytes_are_refused_cleanly_or_decode(args, data):
    """Any change to a payload is refused with InvalidArgument, or decodes to a batch
    that satisfies its row: never another exception, here or in a later read."""
    payload, row = args
    raw = bytearray(payload)
    how = data.draw(st.sampled_from(["flip", "cut", "extend"]))
    if how == "flip":
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    elif how == "cut":
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    else:
        raw += data.draw(st.binary(min_size=1, max_size=8))
    try:
        codec.check(bytes(raw), **row)
    except errors.InvalidArgument:
        return
    decoded = codec.decode(bytes(raw), row["base_offset"])
    assert len(decoded.values) == row["count"]
    assert all(row["base_offset"] <= o <= row["last_offset"] for o in decoded.offsets)
    assert min(decoded.timestamps) == row["first_ts"]
    assert max(decoded.timestamps) == row["max_ts"]


@pytest.mark.parametrize(
    "payload, row, says",
    [
        (b"garbage", {}, "shorter than a batch header"),
        (codec.encode([b"a"], [TS]) + b"x", {}, "columns account for"),
        (codec.encode([b"a"], [TS])[:-1], {}, "columns account for"),
        (codec.encode([b"a", b"b"], [TS, TS]), {"last_offset": 1}, "holds 2 records"),
        (codec.encode([b"a"], [TS]), {"count": 2}, "holds 1 records"),
        (codec.encode([b"a"], [TS]), {"first_ts": TS + 1, "max_ts": TS + 1}, "timestamps span"),
        (codec.encode([b"a"], [TS]), {"first_ts": TS + 1}, "first_ts"),
        (codec.encode([b"a"], [TS]), {"base_offset": 2**63 - 2, "last_offset": 2**63 - 2}, "0 to"),
        (codec.encode([b"a"], [TS]), {"last_offset": codec.MAX_OFFSET + 1}, "0 to"),
        (codec.encode([b"a"], [-1]), {"first_ts": -1, "max_ts": -1}, "epoch milliseconds"),
        (codec.encode([b"a"], [2**62]), {"first_ts": 2**62, "max_ts": 2**62}, "epoch"),
        (
            codec.encode([b"a", b"b"], [TS, TS], None, None, [3, 3]),
            {"last_offset": 9, "count": 2},
            "increase",
        ),
        (codec.encode([b"a"], [TS], None, None, [5]), {"last_offset": 4}, "past last_offset"),
        (b"\x03" + codec.encode([b"a"], [TS])[1:], {}, "version"),
        (codec.encode([b"a"], [TS])[:1] + b"\x80" + codec.encode([b"a"], [TS])[2:], {}, "flags"),
        (codec.encode([b"a"], [TS], None, [[("h", b"v")]])[:-3] + b"\xff\xff\xff", {}, ""),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_batches_are_refused_with_the_reason(payload, row, says):
    columns = {"base_offset": 0, "last_offset": 0, "count": 1, "first_ts": TS, "max_ts": TS}
    columns.update(row)
    with pytest.raises(errors.InvalidArgument, match="not a valid record batch") as caught:
        codec.check(payload, **columns)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    "fields, says",
    [
        ({"ts_type": 7}, "timestamp type"),
        ({"ts_type": True}, "timestamp type"),
        ({"origin": "another-cluster"}, "origin"),
        ({"origin": ORIGIN.upper()}, "origin"),
        ({"origin": str(uuid.UUID(ORIGIN)) + " "}, "origin"),
        ({"append_ms": -1}, "append_ms"),
        ({"payload": "text"}, "not bytes"),
    ],
)
def test_a_replica_batch_needs_a_known_timestamp_type_and_a_uuid_origin(fields, says):
    with pytest.raises(errors.InvalidArgument, match=says):
        check_replica_batch(replica([b"v"], **fields))


def test_the_largest_offset_is_taken_and_one_more_is_not():
    check_replica_batch(replica([b"v"], base=codec.MAX_OFFSET))
    with pytest.raises(errors.InvalidArgument, match="0 to"):
        check_replica_batch(replica([b"v"], base=codec.MAX_OFFSET + 1))


# --- DirectoryTarget.apply: nothing bad is written ------------------------------------------


@pytest.fixture
def target(tmp_path):
    """A target cluster with /s:t (2 partitions) holding one message in partition 0."""
    path = tmp_path / "target"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic("/s:t", partitions=2)
        producer = Producer(cluster)
        producer.send("/s:t", b"first", partition=0).get(scaled(10))
        producer.close()
    tgt = DirectoryTarget(str(path))
    yield tgt
    tgt.close()


def _read_all(cluster: Cluster) -> list[tuple[int, bytes]]:
    consumer = Consumer(cluster, enable_auto_commit=False)
    tp = TopicPartition("/s:t", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = [(r.offset, r.value) for r in consumer.poll(timeout_ms=200).get(tp, [])]
    consumer.close()
    return got


@pytest.mark.parametrize(
    "bad",
    [
        replica([b"x"], base=1, payload=b"not a batch"),  # every later read would fail
        replica([b"x"], base=2**63 - 2),  # every later produce would fail
        replica([b"x"], base=1, count=3),
        replica([b"x"], base=1, first_ts=TS + 5, max_ts=TS),
        replica([b"x"], base=1, ts_type=9),
        replica([b"x"], base=1, origin="me"),
    ],
    ids=["not-a-batch", "offset-2^63-2", "count", "first-after-max", "ts-type", "origin"],
)
def test_apply_refuses_a_bad_batch_and_changes_nothing(target, bad):
    good = replica([b"ok"], base=1)
    before = target.end_offsets("/s", [("t", 2)])
    with pytest.raises(errors.InvalidArgument, match="refused"):
        target.apply("/s", "t", 0, [good, bad])  # the good one first: it is not kept either
    assert target.end_offsets("/s", [("t", 2)]) == before
    cluster = target.cluster
    assert _read_all(cluster) == [(0, b"first")]
    producer = Producer(cluster)
    assert producer.send("/s:t", b"later", partition=0).get(scaled(10)).offset == 1
    producer.close()
    assert _read_all(cluster) == [(0, b"first"), (1, b"later")]


def test_apply_refuses_a_partition_the_topic_lacks_and_takes_a_good_batch(target):
    with pytest.raises(errors.InvalidPartition, match="partitions 0 to 1"):
        target.apply("/s", "t", 2, [replica([b"x"])])
    with pytest.raises(errors.InvalidPartition):
        target.apply("/s", "t", 2**64, [replica([b"x"])])
    assert target.topic_partitions("/s") == {"t": 2}
    # a good batch to a partition it has is taken
    result = target.apply("/s", "t", 0, [replica([b"a", b"b"], base=1)])
    assert (result.messages, result.done, result.conflict) == (2, 1, None)
    assert _read_all(target.cluster) == [(0, b"first"), (1, b"a"), (2, b"b")]
