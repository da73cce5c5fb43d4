"""Record batches: how a run of messages of one partition is stored as one blob.

Storing batches, as Kafka does, rather than a row per message is what makes the engine
fast: one SQLite row carries hundreds or thousands of messages. The layout is columnar so
that encoding and decoding are a handful of C-level operations (`bytes.join`, `array`),
not a Python loop per message.

Layout (all integers little-endian):

    header   '<BBIq'  version, flags, count, base_timestamp
    [TS64]   count x int64  timestamp          (when timestamps differ; else all are base)
    [DELTAS] count x uint32 offset - batch base_offset         (only after compaction)
             count x int32  value lengths, -1 for None
    [KEYS]   count x int32  key lengths, -1 for None
    [HEADERS] uint32 length, then per record: uint16 n, n x (uint16 klen, key, int32 vlen, value)
             values, concatenated
    [KEYS]   keys, concatenated

A batch is immutable once written; compaction writes a new one with offset deltas.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

VERSION = 1
F_KEYS = 1
F_HEADERS = 2
F_TS64 = 8
F_DELTAS = 16

_HEADER = struct.Struct("<BBIq")
_LITTLE = sys.byteorder == "little"


class DecodedBatch(NamedTuple):
    """Columns of one batch; `offsets` are absolute."""

    offsets: Sequence[int]
    timestamps: Sequence[int]
    keys: Sequence[bytes | None]
    values: list[bytes | None]
    headers: list[list[tuple[str, bytes | None]]] | None


def _ints(typecode: str, values: Sequence[int]) -> bytes:
    a = array(typecode, values)
    if not _LITTLE:  # pragma: no cover - the stored format is little-endian everywhere
        a.byteswap()
    return a.tobytes()


def _read_ints(typecode: str, buf: memoryview, pos: int, count: int) -> tuple[array, int]:
    a = array(typecode)
    end = pos + a.itemsize * count
    a.frombytes(buf[pos:end])
    if not _LITTLE:  # pragma: no cover
        a.byteswap()
    return a, end


def _lengths(items: Sequence[bytes | None]) -> tuple[bytes, bytes]:
    """(int32 lengths with -1 for None, the items joined)."""
    try:
        return _ints("i", list(map(len, items))), b"".join(items)  # fast path: no None
    except TypeError:
        lengths = [-1 if x is None else len(x) for x in items]
        return _ints("i", lengths), b"".join(x for x in items if x is not None)


def encode_headers(headers: Sequence[Sequence[tuple[str, bytes | None]] | None]) -> bytes:
    out = bytearray()
    pack_h = struct.Struct("<H").pack
    pack_i = struct.Struct("<i").pack
    for record_headers in headers:
        record_headers = record_headers or ()
        out += pack_h(len(record_headers))
        for key, value in record_headers:
            k = key.encode()
            out += pack_h(len(k))
            out += k
            if value is None:
                out += pack_i(-1)
            else:
                out += pack_i(len(value))
                out += value
    return bytes(out)


def _decode_headers(buf: memoryview, pos: int, count: int) -> list[list[tuple[str, bytes | None]]]:
    unpack_h = struct.Struct("<H").unpack_from
    unpack_i = struct.Struct("<i").unpack_from
    result = []
    for _ in range(count):
        (n,) = unpack_h(buf, pos)
        pos += 2
        record = []
        for _ in range(n):
            (klen,) = unpack_h(buf, pos)
            pos += 2
            key = bytes(buf[pos : pos + klen]).decode()
            pos += klen
            (vlen,) = unpack_i(buf, pos)
            pos += 4
            if vlen < 0:
                value = None
            else:
                value = bytes(buf[pos : pos + vlen])
                pos += vlen
            record.append((key, value))
        result.append(record)
    return result


def encode(
    values: Sequence[bytes | None],
    timestamps: Sequence[int],
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """One batch blob. `keys`/`headers` may be None when no record has any."""
    count = len(values)
    flags = 0
    parts: list[bytes] = []
    base_ts = min(timestamps)
    if max(timestamps) != base_ts:
        # Absolute int64s rather than int32 deltas: 4 bytes more per message, but both
        # directions are one C call instead of a Python loop over the batch.
        flags |= F_TS64
        parts.append(_ints("q", timestamps))
    if offset_deltas is not None:
        flags |= F_DELTAS
        parts.append(_ints("I", offset_deltas))
    value_lengths, value_blob = _lengths(values)
    parts.append(value_lengths)
    key_blob = b""
    if keys is not None:
        flags |= F_KEYS
        key_lengths, key_blob = _lengths(keys)
        parts.append(key_lengths)
    if headers is not None:
        flags |= F_HEADERS
        encoded = encode_headers(headers)
        parts.append(struct.pack("<I", len(encoded)))
        parts.append(encoded)
    parts.append(value_blob)
    parts.append(key_blob)
    return _HEADER.pack(VERSION, flags, count, base_ts) + b"".join(parts)


def _slices(blob: bytes, lengths: array, pos: int) -> tuple[list, int]:
    """Cut `blob` from `pos` into pieces of `lengths` (-1 gives None)."""
    if not lengths:
        return [], pos
    shortest = min(lengths)
    if shortest >= 0 and shortest == max(lengths):
        # Values of one size (readings, fixed records): one struct call cuts them all,
        # about three times faster than a slice per value.
        count = len(lengths)
        return list(struct.unpack_from(f"{shortest}s" * count, blob, pos)), pos + shortest * count
    if shortest >= 0:
        ends = list(accumulate(lengths, initial=pos))
        return list(map(blob.__getitem__, map(slice, ends[:-1], ends[1:]))), ends[-1]
    out: list[bytes | None] = []
    for n in lengths:
        if n < 0:
            out.append(None)
        else:
            out.append(blob[pos : pos + n])
            pos += n
    return out, pos


def decode(payload: bytes, base_offset: int) -> DecodedBatch:
    """Columns of a stored batch, offsets made absolute from the row's `base_offset`."""
    version, flags, count, base_ts = _HEADER.unpack_from(payload, 0)
    if version != VERSION:
        raise ValueError(f"unsupported record batch version {version}")
    buf = memoryview(payload)
    pos = _HEADER.size
    if flags & F_TS64:
        timestamps, pos = _read_ints("q", buf, pos, count)
    else:
        timestamps: Sequence[int] = [base_ts] * count
    if flags & F_DELTAS:
        deltas, pos = _read_ints("I", buf, pos, count)
        offsets: Sequence[int] = [base_offset + d for d in deltas]
    else:
        offsets = range(base_offset, base_offset + count)
    value_lengths, pos = _read_ints("i", buf, pos, count)
    key_lengths = None
    if flags & F_KEYS:
        key_lengths, pos = _read_ints("i", buf, pos, count)
    headers = None
    if flags & F_HEADERS:
        (hlen,) = struct.unpack_from("<I", payload, pos)
        pos += 4
        headers = _decode_headers(buf, pos, count)
        pos += hlen
    values, pos = _slices(payload, value_lengths, pos)
    if key_lengths is not None:
        keys, pos = _slices(payload, key_lengths, pos)
    else:
        keys = [None] * count
    return DecodedBatch(offsets, timestamps, keys, values, headers)


def count_of(payload: bytes) -> int:
    return _HEADER.unpack_from(payload, 0)[2]
