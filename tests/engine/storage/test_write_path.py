"""engine.storage.volume: produced and replicated batches go through one write path (issue
13, item 3): the same rows, heat, usage and roll rule (`should_roll`) whichever way in."""

from __future__ import annotations

import time

import pytest

from engine.storage import batch as codec
from engine.storage.volume import (
    ACTIVE,
    SEALED,
    BatchWrite,
    ReplicaBatch,
    ReplicaTarget,
    Volume,
    _Partitionlet,
    should_roll,
)

BIG = 1 << 40


@pytest.fixture
def volumes(tmp_path):
    made = []
    for name in ("a", "b"):
        v = Volume(1, tmp_path / f"{name}.db")
        v.initialize("cluster")
        made.append(v)
    yield made
    for v in made:
        v.close()


def _payload(*values: bytes, ts: int = 5) -> bytes:
    return codec.encode(list(values), [ts] * len(values))


def _write(pl_id: int, payload: bytes, count: int) -> BatchWrite:
    w = BatchWrite(7, 3, 0, payload, count, 5, 5, 0, "origin")
    w.pl_id, w.pl_base_offset = pl_id, 0
    return w


def _rows(v: Volume, pl_id: int) -> list[tuple]:
    return v.conn.execute(
        "SELECT base_offset, last_offset, count, first_ts, max_ts, ts_high, ts_type, origin, "
        "bytes, payload FROM batches WHERE partitionlet = ? ORDER BY last_offset",
        (pl_id,),
    ).fetchall()


def _heat(v: Volume) -> list[tuple]:
    return v.conn.execute("SELECT partitionlet, w_messages, w_bytes FROM heat").fetchall()


def test_should_roll_by_size_and_by_age_of_a_partitionlet_that_took_appends():
    now = int(time.time() * 1000)
    fresh = _Partitionlet(10, ACTIVE, 0, now - 5_000, 10, None, None, 0, 0)
    assert not should_roll(fresh, now, roll_bytes=100, roll_ms=1_000)  # empty: never by age
    used = _Partitionlet(12, ACTIVE, 50, now - 5_000, 10, 1, 1, 1, 2)
    assert should_roll(used, now, roll_bytes=100, roll_ms=1_000)
    assert not should_roll(used, now, roll_bytes=100, roll_ms=10_000)
    used.bytes = 100
    assert should_roll(used, now, roll_bytes=100, roll_ms=10_000)


def test_produced_and_replicated_batches_leave_the_same_rows_heat_and_usage(volumes):
    produced, replicated = volumes
    payloads = [_payload(b"a", b"b"), _payload(b"c"), _payload(b"d", b"e", b"f")]
    writes = [_write(40, p, codec.count_of(p)) for p in payloads]
    produced.append(writes, sync=True, roll_bytes=BIG, roll_ms=BIG)
    assert [w.offset for w in writes] == [0, 2, 3]
    assert all(w.sealed_at is None for w in writes)

    batches = [
        ReplicaBatch(w.offset, w.offset + w.count - 1, w.count, 5, 5, 0, "origin", w.payload, 0)
        for w in writes
    ]
    got = replicated.append_replicated(
        ReplicaTarget(40, 7, 3, 0, 0), batches, sync=False, roll_bytes=BIG, roll_ms=BIG
    )
    assert got.statuses == ["applied"] * 3
    assert (got.next_offset, got.messages, got.bytes) == (6, 6, sum(map(len, payloads)))

    assert _rows(produced, 40) == _rows(replicated, 40)
    assert _heat(produced) == _heat(replicated) == [(40, 6, sum(map(len, payloads)))]
    assert produced.stream_usage(7) == replicated.stream_usage(7) == (6, got.bytes)
    a, b = produced.state(40), replicated.state(40)
    assert (a.next_offset, a.bytes, a.batches, a.messages, a.state) == (
        b.next_offset,
        b.bytes,
        b.batches,
        b.messages,
        b.state,
    )


def test_a_full_partitionlet_is_sealed_before_the_next_batch_on_either_path(volumes):
    produced, replicated = volumes
    first, second = _payload(b"x" * 50), _payload(b"y" * 50)
    produced.append([_write(41, first, 1)], sync=False, roll_bytes=BIG, roll_ms=BIG)
    replicated.append_replicated(
        ReplicaTarget(41, 7, 3, 0, 0),
        [ReplicaBatch(0, 0, 1, 5, 5, 0, "origin", first, 0)],
        sync=False,
        roll_bytes=BIG,
        roll_ms=BIG,
    )
    # The roll size is lowered below what the partitionlet holds: the next batch is refused
    # and goes to the successor, which starts where this one ends.
    small = len(first)
    late = _write(41, second, 1)
    produced.append([late], sync=False, roll_bytes=small, roll_ms=BIG)
    assert (late.offset, late.sealed_at) == (None, 1)
    got = replicated.append_replicated(
        ReplicaTarget(41, 7, 3, 0, 0),
        [ReplicaBatch(1, 1, 1, 5, 5, 0, "origin", second, 0)],
        sync=False,
        roll_bytes=small,
        roll_ms=BIG,
    )
    assert (got.statuses, got.sealed_at) == (["sealed"], 1)
    assert produced.state(41).state == replicated.state(41).state == SEALED
    assert _rows(produced, 41) == _rows(replicated, 41)


def test_a_move_copies_rows_and_usage_without_heat(volumes):
    source, target = volumes
    p = _payload(b"m", b"n")
    w = _write(42, p, 2)
    source.append([w], sync=False, roll_bytes=len(p), roll_ms=BIG)
    assert w.sealed_at == 2  # full after its only batch: sealed with it
    copy = target.copy_partitionlet_from(source, 42)
    assert copy is not None and copy.state == SEALED and copy.messages == 2
    assert _rows(target, 42) == _rows(source, 42)
    assert target.stream_usage(7) == source.stream_usage(7) == (2, len(p))
    assert _heat(target) == []
