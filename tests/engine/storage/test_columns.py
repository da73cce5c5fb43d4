"""The compiled layout of a stored batch (engine/storage/_columns.pyx): built by every
install, byte for byte what engine.storage.batch's Python `encode` makes, and left to that
Python for what it does not take."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from engine.storage import batch


def test_the_compiled_layout_is_built():
    from engine.storage import _columns  # built by `pip install -e .` (setup.py)

    assert batch._compiled is _columns


def _python_encode(monkeypatch: pytest.MonkeyPatch, *args: Any) -> bytes:
    with monkeypatch.context() as m:
        m.setattr(batch, "_compiled", None)
        return batch.encode(*args)


def test_the_compiled_layout_is_the_python_one_byte_for_byte(monkeypatch):
    """Random batches: values and keys with None, empty and long ones; timestamps all the
    same or not, below the first one too; headers or none; keys or none. Each decodes to
    what was encoded."""
    rng = random.Random(25)
    for _ in range(2000):
        n = rng.randrange(1, 60)
        values = [
            None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 1, 30, 3000]))
            for _ in range(n)
        ]
        t0 = rng.randrange(0, batch.MAX_TIMESTAMP_MS)
        same = rng.random() < 0.5
        stamps = [t0 if same else max(0, t0 + rng.randrange(-10_000, 10_000)) for _ in range(n)]
        keys = (
            None
            if rng.random() < 0.4
            else [
                None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 12))
                for _ in range(n)
            ]
        )
        headers = (
            None
            if rng.random() < 0.6
            else [
                None if rng.random() < 0.3 else [("trace-id", b"x"), ("ü", None)] for _ in range(n)
            ]
        )
        compiled = batch.encode(values, stamps, keys, headers)
        assert compiled == _python_encode(monkeypatch, values, stamps, keys, headers)
        decoded = batch.decode(compiled, 100)
        assert decoded.values == values
        assert list(decoded.timestamps) == stamps
        assert list(decoded.keys) == (keys if keys is not None else [None] * n)


def test_what_the_compiled_layout_does_not_take_goes_the_python_way(monkeypatch):
    """Values that are not bytes (a bytearray, a memoryview), tuples rather than lists, and
    offset deltas (compaction's batches) are laid out by the Python `encode`, alike."""
    stamps = [1_700_000_000_000, 1_700_000_000_001]
    for values, ts, keys, deltas in [
        ([bytearray(b"ab"), b"c"], stamps, None, None),
        ([b"ab", memoryview(b"c")], stamps, None, None),
        ((b"ab", b"c"), tuple(stamps), None, None),
        ([b"ab", b"c"], stamps, [b"k", bytearray(b"l")], None),
        ([b"ab", b"c"], stamps, None, [0, 5]),
    ]:
        got = batch.encode(values, ts, keys, None, deltas)
        with monkeypatch.context() as m:
            m.setattr(batch, "_compiled", None)
            assert got == batch.encode(values, ts, keys, None, deltas)
        assert [bytes(v) for v in batch.decode(got, 0).values] == [bytes(v) for v in values]


def test_the_compiled_layout_refuses_what_the_python_one_refuses(monkeypatch):
    """No records, a timestamp past int64, columns of different lengths: an error either
    way, never a batch."""
    for values, stamps in [([], []), ([b"a"], [2**63])]:
        with pytest.raises((ValueError, OverflowError)):
            batch.encode(values, stamps)
        with pytest.raises((ValueError, struct.error)):
            _python_encode(monkeypatch, values, stamps)
    from engine.storage import _columns

    with pytest.raises(ValueError):
        _columns.encode_lists([b"a", b"b"], [1], None, None, 1, 1, 2, 8)
    with pytest.raises(ValueError):
        _columns.encode_lists([b"a"], [1], [b"k", b"l"], None, 1, 1, 2, 8)


def test_all_none_and_span_answer_as_python_does(monkeypatch):
    """The producer's batch summary (engine.client.accumulator.encode_batch): whether a
    column holds anything, and the timestamps' range, compiled and in Python alike."""
    rng = random.Random(28)
    for _ in range(500):
        n = rng.randrange(1, 40)
        column = [None if rng.random() < 0.9 else b"" for _ in range(n)]
        stamps = [rng.randrange(0, batch.MAX_TIMESTAMP_MS) for _ in range(n)]
        with monkeypatch.context() as m:
            m.setattr(batch, "_compiled", None)
            expected = batch.all_none(column), batch.span(stamps)
        assert (batch.all_none(column), batch.span(stamps)) == expected
        assert expected == (column.count(None) == n, (min(stamps), max(stamps)))
    assert batch.all_none([]) and not batch.all_none([None, b"k", None])
    assert batch.span([-(2**63), 2**63 - 1, 0]) == (-(2**63), 2**63 - 1)
    # what is not a list of int64s is Python's to answer (or refuse)
    assert batch.span((3, 1, 2)) == (1, 3)
    assert batch.span([2**64, 1]) == (1, 2**64)
    with pytest.raises(ValueError):
        batch.span([])
