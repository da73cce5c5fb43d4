"""engine.storage.batch: a record batch decodes to exactly what was encoded."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.storage import batch

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
MAYBE_BYTES = st.one_of(st.none(), st.binary(max_size=40))
HEADER = st.tuples(st.text(max_size=12), MAYBE_BYTES)
RECORD_HEADERS = st.one_of(st.none(), st.lists(HEADER, max_size=4))


def timestamps_of(n: int):
    """Equal, close (int32 deltas) or very far apart (int64) timestamps."""
    return st.one_of(
        INT64.map(lambda t: [t] * n),
        st.integers(min_value=0, max_value=2**41).flatmap(
            lambda base: st.lists(
                st.integers(min_value=base, max_value=base + 2**31 - 1), min_size=n, max_size=n
            )
        ),
        st.lists(st.integers(min_value=-(2**31), max_value=2**40), min_size=n, max_size=n),
        st.lists(INT64, min_size=n, max_size=n),
    )


@st.composite
def batches(draw):
    n = draw(st.integers(min_value=1, max_value=30))
    values = draw(st.lists(MAYBE_BYTES, min_size=n, max_size=n))
    timestamps = draw(timestamps_of(n))
    keys = draw(st.one_of(st.none(), st.lists(MAYBE_BYTES, min_size=n, max_size=n)))
    headers = draw(st.one_of(st.none(), st.lists(RECORD_HEADERS, min_size=n, max_size=n)))
    deltas = None
    if draw(st.booleans()):
        deltas = sorted(
            draw(st.sets(st.integers(min_value=0, max_value=2**32 - 1), min_size=n, max_size=n))
        )
    base_offset = draw(st.integers(min_value=0, max_value=2**62))
    return values, timestamps, keys, headers, deltas, base_offset


@settings(max_examples=200, deadline=None)
@given(batches())
def test_round_trip(args):
    values, timestamps, keys, headers, deltas, base_offset = args
    n = len(values)
    payload = batch.encode(values, timestamps, keys, headers, deltas)
    assert isinstance(payload, bytes)
    assert batch.count_of(payload) == n

    decoded = batch.decode(payload, base_offset)
    if deltas is None:
        assert list(decoded.offsets) == list(range(base_offset, base_offset + n))
    else:
        assert list(decoded.offsets) == [base_offset + d for d in deltas]
    assert list(decoded.timestamps) == list(timestamps)
    assert list(decoded.values) == list(values)
    assert list(decoded.keys) == (list(keys) if keys is not None else [None] * n)
    if headers is None:
        assert decoded.headers is None
    else:
        assert [list(h) for h in decoded.headers] == [list(h or []) for h in headers]
    for v in decoded.values:
        assert v is None or type(v) is bytes


@settings(max_examples=50, deadline=None)
@given(batches())
def test_decode_from_a_database_blob(args):
    """A payload read back from SQLite decodes the same (sqlite returns bytes)."""
    import sqlite3

    values, timestamps, keys, headers, deltas, base_offset = args
    payload = batch.encode(values, timestamps, keys, headers, deltas)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE b (payload BLOB)")
    conn.execute("INSERT INTO b VALUES (?)", (payload,))
    (stored,) = conn.execute("SELECT payload FROM b").fetchone()
    conn.close()
    assert batch.decode(stored, base_offset) == batch.decode(payload, base_offset)


def test_none_and_empty_are_different():
    payload = batch.encode(
        [None, b"", b"x"], [1, 1, 1], [b"", None, b"k"], [None, [], [("h", None)]]
    )
    d = batch.decode(payload, 10)
    assert list(d.offsets) == [10, 11, 12]
    assert d.values == [None, b"", b"x"]
    assert list(d.keys) == [b"", None, b"k"]
    assert d.headers == [[], [], [("h", None)]]


def test_header_keys_keep_unicode_and_order():
    headers = [[("unité", b"C"), ("a", b"1"), ("a", b"2"), ("", b"")]]
    d = batch.decode(batch.encode([b"v"], [5], None, headers), 0)
    assert d.headers == headers
    assert list(d.keys) == [None]


@pytest.mark.parametrize(
    "timestamps",
    [
        [0, 0, 0],
        [1_700_000_000_000, 1_700_000_000_001, 1_699_999_999_999],
        [0, 2**31 - 1],  # the widest int32 delta
        [0, 2**31],  # one more: 64-bit timestamps
        [-(2**63), 2**63 - 1],
        [-1, -5, -(2**40)],
    ],
)
def test_timestamp_extremes(timestamps):
    values = [b"%d" % i for i in range(len(timestamps))]
    d = batch.decode(batch.encode(values, timestamps), 7)
    assert list(d.timestamps) == timestamps
    assert d.values == values


def test_offset_deltas_after_compaction():
    deltas = [0, 3, 4, 2**32 - 1]
    d = batch.decode(
        batch.encode([b"a", b"b", b"c", None], [1, 2, 3, 4], offset_deltas=deltas), 100
    )
    assert list(d.offsets) == [100, 103, 104, 100 + 2**32 - 1]
    assert d.values == [b"a", b"b", b"c", None]


def test_large_values_round_trip():
    values = [b"\x00" * 1_000_000, b"\xff" * 70_000, None]
    keys = [b"k" * 70_000, None, b""]
    d = batch.decode(batch.encode(values, [1, 2, 3], keys), 0)
    assert d.values == values
    assert list(d.keys) == keys


def test_unknown_version_is_refused():
    payload = bytearray(batch.encode([b"v"], [1]))
    payload[0] = 99
    with pytest.raises(ValueError):
        batch.decode(bytes(payload), 0)
