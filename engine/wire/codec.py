"""The wire codec: kafka-python 3.0's protocol module for requests and responses,
aiokafka's Cython record module for record batches, used server-side.

Why kafka-python's `kafka.protocol` rather than `kio` or a hand-written codec: its classes
are generated from Kafka's own JSON message schemas (every version, flexible versions and
tagged fields included) and decode requests as well as they encode them, and the project
already follows kafka-python 3.0 in `engine.kafka`. Why aiokafka's `aiokafka.record` for
record batch v2: the same format, read and built in C (see below for the numbers);
kafka-python's reader and builder are pure Python and cost more than the rest of the
listener together. The four compressions come from zlib, python-snappy, lz4 and zstandard.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from typing import cast

import lz4.frame
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import snappy
import zstandard
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from crc32c import crc32c
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_message import ApiMessage

from engine.bulk import bulk_records
from engine.records import LOG_APPEND_TIME, KafkaBatch
from engine.wire.limits import DEFAULT_MAX_DECOMPRESSED_BYTES

_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id: the same in every version
_BASE_OFFSET = struct.Struct(">q")


class FramingError(Exception):
    """The bytes on a connection are not a request Kafka would parse: close it."""


@dataclass(frozen=True)
class Head:
    api_key: int
    api_version: int
    correlation_id: int


def peek_head(frame: bytes | bytearray) -> Head:
    """The api key, version and correlation id, read before the rest is decoded."""
    if len(frame) < _HEAD.size:
        raise FramingError(f"a request of {len(frame)} bytes has no header")
    return Head(*_HEAD.unpack_from(frame))


def decode_request(
    request_class: type[ApiMessage], frame: bytes | bytearray, version: int
) -> ApiMessage:
    """The request of `frame` (header included), or FramingError when it does not parse."""
    try:
        request = request_class.decode(frame, version=version, header=True)
    except Exception as exc:  # the codec raises struct.error, ValueError, IndexError...
        raise FramingError(f"malformed {request_class.__name__} v{version}: {exc}") from exc
    if not isinstance(request, request_class):  # what decode promises (its stub does not)
        raise FramingError(f"malformed {request_class.__name__} v{version}")
    return request


def decoded_bytes(value: bytes | ApiData | None) -> bytes | None:
    """A bytes field of a decoded request. The codec decodes one as bytes; the stubs also
    allow an ApiData, which only a message being built holds (its encode calls .encode())."""
    if value is None or isinstance(value, bytes):
        return value
    raise FramingError(f"a bytes field decoded as {type(value).__name__}")


def encode_response(response: ApiMessage, version: int, correlation_id: int) -> bytes | bytearray:
    """The framed response (size, header, body), as the codec makes it: a bytearray is
    written to the socket as it is (bytes() of it would copy a fetch's records again)."""
    response.API_VERSION = version  # before the header: the setter would touch the header
    response.with_header(correlation_id=correlation_id)
    encoded: bytes | bytearray = response.encode(header=True, framed=True)
    return encoded


class Spliced:
    """A response whose record fields hold placeholders (`hold`), and the parts of the
    records each one stands for: `encode_spliced` encodes the response (`response`, set
    once it is built around the placeholders), small without its records, and joins the
    records in once. Through the protocol codec, a fetch's records were copied three times
    more (joined, copied into its growing buffer, copied out), most of a 1-KiB fetch's time
    in the listener."""

    __slots__ = ("response", "pieces")

    def __init__(self) -> None:
        self.response: ApiMessage | None = None
        self.pieces: dict[bytes, list[bytes | bytearray | memoryview]] = {}

    def hold(self, parts: list[bytes | bytearray | memoryview]) -> bytes:
        """The placeholder to put in a records field for `parts` (b"" for none)."""
        if not parts:
            return b""
        tag = _SPLICE_TAG + len(self.pieces).to_bytes(4, "big")
        self.pieces[tag] = parts
        return tag


# random per process: no topic name or other field of a response holds it by chance
_SPLICE_TAG = os.urandom(12)


# Parts of a framed response smaller than this are joined before they are written: one
# write each would cost more than the copy. Bigger ones (stored batches) are written as
# they are.
_SMALL_PART = 64 * 1024


class Parts(list[bytes | bytearray | memoryview]):
    """A framed response as the buffers it is made of, in order, for the connection to
    write one after the other. A fetch's records are not joined into one buffer: a response
    of tens of megabytes was a fresh allocation every time (mapped and zeroed by the kernel
    page by page: about 3 pages faulted in per page served), then copied again into the
    socket's write buffer."""


def encode_spliced(spliced: Spliced, version: int, correlation_id: int) -> Parts:
    """The framed response of `spliced`, its records in place of their placeholders (a
    field's length before each: an unsigned varint of length + 1 in flexible versions,
    an int32 in the others), as `Parts`."""
    response = spliced.response
    assert response is not None  # set by whoever held the placeholders
    encoded = encode_response(response, version, correlation_id)
    if not spliced.pieces:
        return Parts([bytes(encoded)])
    flexible = response.flexible_version_q(version)
    found = sorted((encoded.find(tag), tag) for tag in spliced.pieces)
    view = memoryview(encoded)
    out: list[bytes | bytearray | memoryview] = []
    pos = 0
    for at, tag in found:
        if at < 0:
            raise RuntimeError("a records placeholder is missing from the encoded response")
        out.append(view[pos : at - (1 if flexible else 4)])
        parts = spliced.pieces[tag]
        size = sum(map(len, parts))
        out.append(_uvarint(size + 1) if flexible else struct.pack(">i", size))
        out += parts
        pos = at + len(tag)
    out.append(view[pos:])
    struct.pack_into(">i", encoded, 0, sum(map(len, out)) - 4)  # the frame's size
    framed = Parts()
    small: list[bytes | bytearray | memoryview] = []
    for part in out:
        if len(part) < _SMALL_PART:
            small.append(part)
            continue
        if small:
            framed.append(b"".join(small))
            small = []
        framed.append(part)
    if small:
        framed.append(b"".join(small))
    return framed


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# --- record batches -------------------------------------------------------------------------
#
# Record batches go through aiokafka's Cython reader and builder (`aiokafka.record`), not
# kafka-python's pure-Python ones: measured on 100-B records, 0.3 us a record to read and
# 0.25 us to build against 4-5 us and 2.5-3 us (bench/wire.py; docs/BENCHMARKS.md). The
# listener decompresses itself, so that a decompressed batch is bounded (a zstd or gzip
# bomb is refused before it fills memory), then hands the reader an uncompressed batch.

# the header of a v2 batch, up to its records (Kafka's DefaultRecordBatch layout)
_V2 = struct.Struct(">qiibIhiqqqhii")
_V2_SIZE = _V2.size  # 61
_ATTRIBUTES_AT = 21
_CRC_FROM = 21  # CRC-32C covers the attributes up to the end of the batch
_LOG_OVERHEAD = 12  # base offset and length precede what `length` counts
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
# The default of what the batches of one produce request may decompress to together (a
# listener's `max_decompressed_bytes`, engine.wire.limits).
MAX_DECOMPRESSED_BYTES = DEFAULT_MAX_DECOMPRESSED_BYTES


class TooLarge(ValueError):
    """A request whose batches decompress to more than its budget."""


class Budget:
    """The bytes of records one produce request may still decompress, of `limit`."""

    def __init__(self, limit: int = MAX_DECOMPRESSED_BYTES) -> None:
        self.limit = limit
        self.left = limit


@dataclass(frozen=True)
class ProducedBatch:
    """One v2 batch of a produce request, checked and decoded into columns."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_offset_delta: int
    transactional: bool
    control: bool
    values: list[bytes | None]
    keys: list[bytes | None]
    headers: list[list[tuple[str, bytes | None]]]
    timestamps: list[int]

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


@dataclass(frozen=True)
class PlainBatch:
    """The one v2 batch of a produce request's partition, not compressed and not a control
    batch, its records not read: the engine checks and stores it as it came
    (`Producer.send_record_batch`)."""

    data: bytes
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def plain_batch(data: bytes | None) -> PlainBatch | None:
    """`data` as a `PlainBatch` when it is one whole uncompressed v2 batch and nothing
    more; None otherwise (several batches, a compressed or control one, anything not
    sound: `batches` reads those, and says what is wrong)."""
    if not data or len(data) < _V2_SIZE:
        return None
    (_, length, _, magic, _, attributes, _, _, _, pid, epoch, base_seq, _) = _V2.unpack_from(
        data, 0
    )
    if (
        magic != 2
        or length != len(data) - _LOG_OVERHEAD
        or attributes & (CODEC_MASK | CONTROL_MASK)
    ):
        return None
    return PlainBatch(data, pid, epoch, base_seq, bool(attributes & TRANSACTIONAL_MASK))


_COLUMNS = tuple(attrgetter(name) for name in ("value", "key", "headers", "timestamp"))


def batches(data: bytes | None, budget: Budget | None = None) -> Iterator[ProducedBatch]:
    """The v2 batches of a produce request's records; ValueError for anything else (an old
    message format, a bad CRC, a truncated or inconsistent batch), TooLarge for a bomb:
    more decompressed bytes than `budget` (shared by the request's partitions) has left."""
    if not data:
        return
    if budget is None:
        budget = Budget()
    view = memoryview(data)
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < _V2_SIZE:
            raise ValueError("truncated record batch")
        (_, length, _, magic, crc, attributes, last_delta, _, _, pid, epoch, base_seq, count) = (
            _V2.unpack_from(view, pos)
        )
        stop = pos + _LOG_OVERHEAD + length
        if magic != 2:
            raise ValueError("only record batch v2 (magic 2) is accepted")
        if length < _V2_SIZE - _LOG_OVERHEAD or stop > end:
            raise ValueError("truncated record batch")
        if count < 0 or last_delta != count - 1:
            raise ValueError(f"a batch of {count} records with a last offset delta {last_delta}")
        batch: memoryview | bytes = view[pos:stop]
        if crc32c(batch[_CRC_FROM:]) != crc:
            raise ValueError("record batch CRC mismatch")
        codec = attributes & CODEC_MASK
        if codec:
            batch = _decompressed(view[pos:stop], codec, budget)
        # a record object each, dropped at once: the collector need not walk them
        with bulk_records(count):
            records = list(DefaultRecordBatch(bytes(batch)))
            columns = [list(map(get, records)) for get in _COLUMNS]
        if len(records) != count:
            raise ValueError(f"a batch says {count} records and holds {len(records)}")
        yield ProducedBatch(
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=base_seq,
            last_offset_delta=last_delta,
            transactional=bool(attributes & TRANSACTIONAL_MASK),
            control=bool(attributes & CONTROL_MASK),
            values=columns[0],
            keys=columns[1],
            headers=columns[2],
            timestamps=columns[3],
        )
        pos = stop


def _decompressed(batch: memoryview, codec: int, budget: Budget) -> bytes:
    """The batch with its records decompressed (and its codec bits cleared), at most
    what `budget` has left, which it then spends."""
    head = bytearray(batch[:_V2_SIZE])
    try:
        records = _decompress(codec, bytes(batch[_V2_SIZE:]), budget.left)
    except TooLarge:
        raise TooLarge(
            f"a produce request decompresses to more than {budget.limit:,} bytes"
            " (max_decompressed_bytes)"
        ) from None
    budget.left -= len(records)
    attributes = int.from_bytes(head[_ATTRIBUTES_AT : _ATTRIBUTES_AT + 2], "big", signed=True)
    head[_ATTRIBUTES_AT : _ATTRIBUTES_AT + 2] = (attributes & ~CODEC_MASK).to_bytes(
        2, "big", signed=True
    )
    # the reader trusts the length field, not the CRC (checked above on the original)
    struct.pack_into(">i", head, 8, _V2_SIZE - _LOG_OVERHEAD + len(records))
    return bytes(head) + records


def _decompress(codec: int, data: bytes, limit: int) -> bytes:
    if codec == 1:  # gzip
        d = zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib headers
        out = d.decompress(data, limit + 1)
    elif codec == 2:  # snappy: Java's xerial framing or a raw block, as kafka-python reads
        out = _snappy(data, limit)
    elif codec == 3:  # lz4 frame
        d = lz4.frame.LZ4FrameDecompressor()
        out = d.decompress(data, max_length=limit + 1)
    elif codec == 4:  # zstd
        # a stream reader bounds what it returns; decompress() would make it all first
        with zstandard.ZstdDecompressor().stream_reader(data) as reader:
            out = b""
            while len(out) <= limit and (chunk := reader.read(limit + 1 - len(out))):
                out += chunk
    else:
        raise ValueError(f"unknown compression codec {codec}")
    if len(out) > limit:
        raise TooLarge
    return out


def _snappy(data: bytes, limit: int) -> bytes:
    """Snappy, whose block header states its uncompressed length, so the bound is checked
    before anything is decompressed."""
    if data[:8] == _XERIAL_MAGIC:
        out = bytearray()
        pos = 16  # magic, version and compatible version
        while pos < len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            block = data[pos + 4 : pos + 4 + size]
            if size < 0 or len(block) != size:
                raise ValueError("truncated snappy block")
            if len(out) + _snappy_length(block) > limit:
                raise TooLarge
            out += snappy.decompress(block)
            pos += 4 + size
        return bytes(out)
    if _snappy_length(data) > limit:
        raise TooLarge
    return snappy.decompress(data)


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy_length(block: bytes) -> int:
    """The uncompressed length a raw snappy block starts with (a little-endian varint)."""
    length = shift = 0
    for byte in block[:5]:
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            return length
        shift += 7
    raise ValueError("a snappy block without its length")


_RECORD_OVERHEAD = 24  # bytes a v2 record adds to its key, value and headers, about


def cumulative_sizes(batch: pa.RecordBatch) -> npt.NDArray[np.int64]:
    """The running total of the records' sizes in a v2 batch (about: key, value and headers
    plus overhead), as a numpy array, to find where a byte limit falls."""
    sizes = pc.add(
        pc.fill_null(pc.binary_length(batch.column("value")), 0),
        pc.fill_null(pc.binary_length(batch.column("key")), 0),
    ).to_numpy(zero_copy_only=False)
    sizes = sizes.astype(np.int64) + _RECORD_OVERHEAD
    if batch.column("headers").null_count < batch.num_rows:
        for i, headers in enumerate(batch.column("headers").to_pylist()):
            for header in headers or ():
                sizes[i] += len(header["key"]) + len(header["value"] or b"")
    return np.cumsum(sizes)


def encode_arrow(batch: pa.RecordBatch) -> bytes:
    """Records of one partition in offset order, as `Consumer.poll_arrow` returns them, as
    v2 batches: one for a run of CreateTime records, one per LogAppendTime timestamp (such
    a batch carries one time for all its records). Large records without headers are laid
    out by column operations, no Python object per record (`_records_section`); others by
    aiokafka's builder, fed by `map` over column lists."""
    return b"".join(encode_arrow_parts(batch))


def encode_arrow_parts(batch: pa.RecordBatch) -> list[bytes | bytearray | memoryview]:
    """`encode_arrow` in pieces, for a caller that joins the pieces of several batches
    once (a fetch's records), rather than each batch's and then all of them."""
    n = batch.num_rows
    if not n:
        return []
    stamps = pc.divide(pc.cast(batch.column("timestamp"), pa.int64()), 1000)
    if pc.max(batch.column("timestampType")).as_py() == LOG_APPEND_TIME:
        types = batch.column("timestampType").to_pylist()
        runs = [
            (la != -1, len(list(group)))
            for la, group in groupby(
                s if t == LOG_APPEND_TIME else -1
                for t, s in zip(types, stamps.to_pylist(), strict=True)
            )
        ]
    else:
        runs = [(False, n)]
    # Laid out by columns when records are large enough that copying them twice through
    # Python bytes costs more than numpy's fixed work (about 300 B each, measured)
    by_columns = batch.column("headers").null_count == n and (
        (pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0) >= _BY_COLUMNS_FROM * n
    )
    out: list[bytes | bytearray | memoryview] = []
    start = 0
    for log_append, length in runs:
        part = batch if length == n else batch.slice(start, length)
        run_stamps = stamps if length == n else stamps.slice(start, length)
        if by_columns:
            out += _encode_run(part, run_stamps, log_append)
        else:
            out.append(_encode_run_with_builder(part, run_stamps, log_append))
        start += length
    return out


def _encode_run(
    batch: pa.RecordBatch, stamps: pa.Array, log_append: bool
) -> list[bytes | bytearray | memoryview]:
    """One v2 batch of records without headers, laid out by numpy and Arrow: its header
    and its records."""
    offsets = batch.column("offset").to_numpy().astype(np.int64)
    times = stamps.to_numpy(zero_copy_only=False).astype(np.int64)
    base, first_ts = int(offsets[0]), int(times[0])
    records = _records_section(
        offsets - base, times - first_ts, batch.column("key"), batch.column("value")
    )
    attributes = TIMESTAMP_TYPE_MASK if log_append else 0
    head = bytearray(
        _V2.pack(
            base, _V2_SIZE - _LOG_OVERHEAD + len(records), -1, 2, 0, attributes,
            int(offsets[-1]) - base, first_ts, int(times.max()), -1, -1, -1, len(offsets),
        )
    )  # fmt: skip
    crc = crc32c(records, crc32c(memoryview(head)[_CRC_FROM:]))
    struct.pack_into(">I", head, 17, crc)
    return [head, records]


# zigzag varints of up to 64 bits take at most 10 bytes, byte j holding bits 7j to 7j+6
_VARINT_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)
_VARINT_LIMITS = np.uint64(1) << _VARINT_SHIFTS[1:]  # 2**7 ... 2**63: a byte more past each


def _varints(
    values: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """Kafka's zigzag varints of `values`: a byte matrix as wide as the longest, the mask
    of the bytes each one uses (its first 1 to 10), and their lengths."""
    zigzag = (values.astype(np.uint64) << np.uint64(1)) ^ (values >> 63).astype(np.uint64)
    lengths = 1 + np.searchsorted(_VARINT_LIMITS, zigzag, side="right").astype(np.int64)
    width = int(lengths.max())
    column = np.arange(width)[None, :]
    groups = (zigzag[:, None] >> _VARINT_SHIFTS[None, :width]) & np.uint64(0x7F)
    more = column < (lengths - 1)[:, None]  # every byte but the last: continuation bit
    matrix = (groups | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
    return matrix, column < lengths[:, None], lengths


def _binary(data: npt.NDArray[np.uint8], lengths: npt.NDArray[np.int64]) -> pa.Array:
    """A binary array whose elements are `data` cut at `lengths`."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


_ZERO = np.zeros((1, 1), dtype=np.uint8)
_BY_COLUMNS_FROM = 384  # bytes of value per record, on average
_NO_SEPARATOR = pa.scalar(b"", pa.binary())


def _records_section(
    offset_deltas: npt.NDArray[np.int64],
    ts_deltas: npt.NDArray[np.int64],
    keys: pa.Array,
    values: pa.Array,
) -> memoryview:
    """The records of a v2 batch without headers, each: length, attributes (0), timestamp
    delta, offset delta, key length and key, value length and value, header count (0);
    lengths of null keys and values are -1, all integers zigzag varints. The bytes around
    keys and values are made as matrices, then joined with them by Arrow."""
    n = len(offset_deltas)
    keys, values = pc.cast(keys, pa.binary()), pc.cast(values, pa.binary())
    key_lengths = pc.fill_null(pc.binary_length(keys), -1).to_numpy().astype(np.int64)
    value_lengths = pc.fill_null(pc.binary_length(values), -1).to_numpy().astype(np.int64)
    parts = [_varints(ts_deltas), _varints(offset_deltas), _varints(key_lengths)]
    value_varint, value_used, value_bytes = _varints(value_lengths)
    body = (
        2  # attributes, header count
        + sum(lengths for _, _, lengths in parts)
        + value_bytes
        + np.maximum(key_lengths, 0)
        + np.maximum(value_lengths, 0)
    )
    length_varint, length_used, length_bytes = _varints(body)
    zero = np.broadcast_to(_ZERO, (n, 1))
    yes = np.ones((n, 1), dtype=np.bool_)
    before_key = np.hstack([length_varint, zero, *(m for m, _, _ in parts)])
    before_key_used = np.hstack([length_used, yes, *(u for _, u, _ in parts)])
    before_key_bytes = length_bytes + 1 + sum(lengths for _, _, lengths in parts)
    joined = pc.binary_join_element_wise(
        _binary(before_key[before_key_used], before_key_bytes),
        keys,
        _binary(value_varint[value_used], value_bytes),
        values,
        _binary(np.zeros(n, dtype=np.uint8), np.ones(n, dtype=np.int64)),
        _NO_SEPARATOR,
        null_handling="replace",
        null_replacement="",
    )
    _, offsets, data = joined.buffers()
    ends = np.frombuffer(offsets, dtype=np.int32, count=n + 1, offset=joined.offset * 4)
    return memoryview(data.slice(int(ends[0]), int(ends[-1] - ends[0])))


def _encode_run_with_builder(batch: pa.RecordBatch, stamps: pa.Array, log_append: bool) -> bytes:
    """One v2 batch by aiokafka's builder."""
    offsets = cast(list[int], batch.column("offset").to_pylist())  # the column has no nulls
    base = offsets[0]
    headers = [
        [(h["key"], h["value"]) for h in hs] if hs else _NO_HEADERS
        for hs in batch.column("headers").to_pylist()
    ]
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 30)
    deque(
        map(
            builder.append,
            [o - base for o in offsets],
            stamps.to_pylist(),
            batch.column("key").to_pylist(),
            batch.column("value").to_pylist(),
            headers,
        ),
        maxlen=0,
    )
    return bytes(_finish(builder, base, log_append))


_FRONT = struct.Struct(">qii")  # base offset, length, partition leader epoch: before the magic


def served(batch: KafkaBatch) -> list[bytes | bytearray | memoryview]:
    """A batch stored as its producer sent it, as a fetch serves it: the bytes as stored,
    with the log's base offset and leader epoch -1 (as every batch this listener encodes;
    the producer's own epoch means nothing here). Both lie before the CRC."""
    data = batch.data
    (length,) = struct.unpack_from(">i", data, 8)
    return [_FRONT.pack(batch.base_offset, length, -1), data[_FRONT.size :]]


_CONTROL = 0x20  # the attribute bit of a control batch
_CONTROL_VALUE = struct.pack(">hi", 0, 0)  # version 0, coordinator epoch 0


def encode_control(offset: int, producer_id: int, epoch: int, commit: bool, ts_ms: int) -> bytes:
    """A transaction marker as Kafka's control batch: transactional, with the control bit,
    one record whose key is (version 0, type 1 COMMIT or 0 ABORT). Clients skip it and
    move past its offset; a read_committed one ends the producer's transaction there."""
    builder = DefaultRecordBatchBuilder(2, 0, 1, producer_id, epoch, -1, 1 << 20)
    builder.append(0, ts_ms, struct.pack(">hh", 0, 1 if commit else 0), _CONTROL_VALUE, [])
    buf: bytearray = builder.build()
    _BASE_OFFSET.pack_into(buf, 0, offset)
    (attributes,) = struct.unpack_from(">h", buf, _ATTRIBUTES_AT)
    struct.pack_into(">h", buf, _ATTRIBUTES_AT, attributes | _CONTROL)
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[_CRC_FROM:]))
    return bytes(buf)


_Headers = list[tuple[str, bytes | None]]
_NO_HEADERS: _Headers = []


def _finish(builder: DefaultRecordBatchBuilder, base: int, log_append: bool) -> bytearray:
    buf: bytearray = builder.build()
    _BASE_OFFSET.pack_into(buf, 0, base)  # outside the CRC, which starts at the attributes
    if log_append:
        # The builder writes CreateTime; a LogAppendTime batch sets the attribute bit, which
        # the CRC covers, so the CRC is written again.
        (attributes,) = struct.unpack_from(">h", buf, _ATTRIBUTES_AT)
        struct.pack_into(">h", buf, _ATTRIBUTES_AT, attributes | TIMESTAMP_TYPE_MASK)
        struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[_CRC_FROM:]))
    return buf
