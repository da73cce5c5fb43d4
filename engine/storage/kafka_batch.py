"""Kafka record batches (v2) stored as a client produced them.

A batch that comes over the wire is stored as it came, when its topic's policies allow
(`engine.storage.batch`, "VERSION_KAFKA"): no decoding into columns on the way in, and a
wire fetch serves it as it is, with only its base offset and partition leader epoch set
(they lie outside its CRC). This is what Kafka does with every batch.

`inspect` walks every record once, so a batch is stored only when each reader can read
it: its CRC, its layout to the last byte, offset deltas 0..n-1, each record's attributes
byte 0, header names in UTF-8 within the engine's bounds. `plain_columns` lays out what
`inspect` accepted in the engine's columns. Both run in C (engine/storage/_kafka_records.pyx);
where that module is not built, aiokafka's reader does the same. `columns` gives the
records as Python lists (aiokafka's reader), for a batch that goes in through
`Producer.send_batch` after all.

Layout of a v2 batch (big-endian): base offset int64, length int32 (of what follows it),
partition leader epoch int32, magic int8 (2), CRC-32C uint32 of everything after it,
attributes int16, last offset delta int32, base timestamp int64, max timestamp int64,
producer id int64, producer epoch int16, base sequence int32, record count int32, then the
records (varints).
"""

from __future__ import annotations

import itertools
import struct
import sys
from operator import attrgetter, eq
from types import ModuleType
from typing import NamedTuple

from aiokafka.errors import CorruptRecordException
from aiokafka.record.default_records import DefaultRecordBatch
from crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base offset and length: what the length does not count
CRC_FROM = 21  # the CRC covers the attributes up to the batch's end
CODEC_MASK = 0x07
LOG_APPEND_TIME_FLAG = 0x08
CONTROL = 0x20


# The compiled walk (engine/storage/_kafka_records.pyx, built by `pip install -e .`): it
# writes the engine's little-endian columns with the machine's own integers, so it is used
# on little-endian machines only. Without it (a checkout not installed), aiokafka's reader
# does the same, ten times slower.
_compiled: ModuleType | None
try:
    from engine.storage import _kafka_records
except ImportError:  # pragma: no cover - the build is part of every install
    _compiled = None
else:
    _compiled = _kafka_records
if sys.byteorder != "little":  # pragma: no cover
    _compiled = None
_TIMESTAMP = attrgetter("timestamp")
_OFFSET = attrgetter("offset")
_HEADERS = attrgetter("headers")


class NotStorable(ValueError):
    """A sound batch that cannot be stored as it came (compressed, log-append time, a
    header the engine's format cannot hold, a timestamp out of range): its records go the
    way of any other message."""


class Summary(NamedTuple):
    """What a stored batch's row needs, read from its records."""

    count: int  # type: ignore[assignment]  # a field that shadows tuple.count
    first_ts: int  # the smallest timestamp
    max_ts: int
    timestamp: int  # the first record's


def inspect(
    data: bytes,
    *,
    max_timestamp_ms: int,
    max_headers: int,
    max_header_name_bytes: int,
) -> Summary:
    """Check one v2 batch (exactly `data`) and read its `Summary`. Raises ValueError (or
    aiokafka's CorruptRecordException, a subclass of neither: see `is_corrupt`) for a
    batch that is not sound, `NotStorable` for a sound one this module does not store."""
    if len(data) < HEADER_SIZE:
        raise ValueError(f"{len(data)} bytes, shorter than a record batch header")
    (base, length, _, magic, crc, attributes, last_delta, base_ts, _, _, _, _, count) = (
        HEADER.unpack_from(data, 0)
    )
    if magic != 2:
        raise ValueError("only record batch v2 (magic 2) is accepted")
    if length != len(data) - LOG_OVERHEAD:
        raise ValueError(f"a batch of {len(data)} bytes says its length is {length}")
    if count < 1 or last_delta != count - 1:
        raise ValueError(f"a batch of {count} records with a last offset delta {last_delta}")
    if crc32c(memoryview(data)[CRC_FROM:]) != crc:
        raise ValueError("record batch CRC mismatch")
    if attributes & CONTROL:
        raise ValueError("a control batch is the coordinator's to write")
    if attributes & CODEC_MASK:
        raise NotStorable("a compressed batch")
    if attributes & LOG_APPEND_TIME_FLAG:
        raise NotStorable("a batch that asks for log-append time")
    if _compiled is not None:
        low, high, first, most_headers, longest_name = _compiled.walk(data, count, base_ts)
        if most_headers > max_headers or longest_name > max_header_name_bytes:
            raise NotStorable("headers the engine's format cannot hold")
    else:
        low, high, first = _walk(data, count, base, max_headers, max_header_name_bytes)
    if low < 0 or high > max_timestamp_ms:
        raise NotStorable("a timestamp out of range")
    return Summary(count, low, high, first)


def _walk(
    data: bytes, count: int, base: int, max_headers: int, max_header_name_bytes: int
) -> tuple[int, int, int]:
    """`_kafka_records.walk` by aiokafka's reader, where the compiled module is not built:
    (smallest timestamp, largest, the first record's). Passes of C calls over records freed
    at once (keeping them all costs twice as much); the first reads every varint, to the
    last byte: aiokafka's reader refuses a batch with bytes left over or cut short."""
    stamps = list(map(_TIMESTAMP, DefaultRecordBatch(data)))
    if len(stamps) != count:
        raise ValueError(f"a batch says {count} records and holds {len(stamps)}")
    if not all(map(eq, map(_OFFSET, DefaultRecordBatch(data)), itertools.count(base))):
        raise ValueError("its offset deltas are not 0 to count - 1")
    # A batch smaller than either bound cannot hold a header past it (a header takes two
    # bytes at least): most batches need no pass over their headers.
    if len(data) > min(max_headers, max_header_name_bytes) and any(
        map(_HEADERS, DefaultRecordBatch(data))
    ):
        for headers in map(_HEADERS, DefaultRecordBatch(data)):
            if len(headers) > max_headers:
                raise NotStorable("more headers than a record may have")
            if any(len(key.encode()) > max_header_name_bytes for key, _ in headers):
                raise NotStorable("a header name longer than the engine stores")
    return min(stamps), max(stamps), stamps[0]


def compiled() -> bool:
    """Whether the compiled walk is in use (see `_compiled`)."""
    return _compiled is not None


def plain_columns(
    data: bytes | memoryview,
) -> tuple[int, bytes | None, bytes, bytes, bytes | None, bytes, bytes | None] | None:
    """The engine's columns of a batch `inspect` accepted, as `batch.assemble` takes them
    (`_kafka_records.columns`), or None where the compiled module is not built."""
    if _compiled is None:
        return None
    header = HEADER.unpack_from(data, 0)
    count, base_ts = header[12], header[7]
    laid_out: tuple[int, bytes | None, bytes, bytes, bytes | None, bytes, bytes | None] = (
        _compiled.columns(data, count, base_ts)
    )
    return laid_out


def is_corrupt(exc: BaseException) -> bool:
    """Whether `exc`, raised by `inspect` or `columns`, says the batch is not sound."""
    return isinstance(exc, ValueError | CorruptRecordException) and not isinstance(exc, NotStorable)


def columns(
    data: bytes | memoryview,
) -> tuple[list[bytes | None], list[bytes | None], list[list[tuple[str, bytes | None]]], list[int]]:
    """The values, keys, headers and timestamps of a batch `inspect` accepted."""
    records = list(DefaultRecordBatch(bytes(data)))
    return (
        [r.value for r in records],
        [r.key for r in records],
        [r.headers for r in records],
        [r.timestamp for r in records],
    )
