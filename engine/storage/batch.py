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

Compression (the stream policy `compression`): a compressed batch keeps the header, with
its codec in two flag bits (`F_ZSTD` or `F_LZ4`), followed by `uint32` the length of the
plain body (everything after the header above) and the body as one zstd or LZ4 frame.
Only the body is compressed, so `count_of` and the header's fields read the same either
way; a batch written before compression existed has no codec bits and decodes as before
(VERSION is unchanged). `compress` makes such a batch, `plain` undoes it; every reader
goes through `decode` or `plain`, so each reads every batch whatever its codec. A batch
that compression would not make smaller is stored plain.

A batch produced over the wire may be stored as the client sent it (VERSION_KAFKA, see
`engine.storage.kafka_batch`): the same header (its flags 0), then the Kafka record batch
v2, whole. `plain`, `decode` and `compress` turn it into the layout above first, so every
reader reads it as any other batch; a wire fetch serves it as it is (`kafka_data`).

`decode` trusts its input: it reads what this engine wrote. A batch from outside (another
cluster's replicator) goes through `check` first, which walks the layout with bounds and
compares it with the row it comes with (count, offsets, timestamps).

Checksums: every stored batch carries `checksum`, a CRC32C of its payload as stored
(compressed or not) followed by the row fields a reader hands out with it (base and last
offset, timestamp type, first and largest timestamp), so a flipped byte in either is
found. The payload's part is computed first, outside the write lock (`payload_crc`), and
only the 33 bytes of fields inside it; a reader recomputes both, a C call over bytes it
holds already (no copy).
"""

from __future__ import annotations

import struct
import sys
import threading
from array import array
from collections.abc import Callable, Sequence
from itertools import accumulate, pairwise
from types import ModuleType
from typing import NamedTuple

import lz4.frame
import zstandard
from crc32c import crc32c

from engine.errors import InvalidArgument, StorageError
from engine.storage import kafka_batch

# `encode`'s layout written in C (engine/storage/_columns.pyx, built by `pip install -e .`);
# the Python below where it is not built, and for what it does not take.
_compiled: ModuleType | None
try:
    from engine.storage import _columns
except ImportError:  # pragma: no cover - the build is part of every install
    _compiled = None
else:
    _compiled = _columns

VERSION = 1
VERSION_KAFKA = 2  # the header, then a Kafka record batch v2 as a client produced it
F_KEYS = 1
F_HEADERS = 2
F_TS64 = 8
F_DELTAS = 16
# The codec of a compressed body: two bits, so old batches (neither set) are plain.
F_ZSTD = 32
F_LZ4 = 64
F_CODEC = F_ZSTD | F_LZ4

CODECS = ("none", "zstd", "lz4")  # the values of the stream policy `compression`
_CODEC_FLAG = {"zstd": F_ZSTD, "lz4": F_LZ4}
_FLAG_CODEC = {0: "none", F_ZSTD: "zstd", F_LZ4: "lz4"}

_HEADER = struct.Struct("<BBIq")
_RAW_LENGTH = struct.Struct("<I")
_LITTLE = sys.byteorder == "little"
_FLAGS = F_KEYS | F_HEADERS | F_TS64 | F_DELTAS | F_ZSTD | F_LZ4

# Bounds of what a stored batch may hold; `check` enforces them on batches from outside.
#
# Offsets: SQLite's integers are int64, and readers and writers compute `offset + n` (the
# next offset, a page's end, a roll point), so a stored offset needs headroom below 2**63.
# 2**53 - 1 leaves 2**63 - 2**53 of it, and is also the largest integer a JSON client in
# JavaScript reads exactly; a partition written a million messages a second from offset 0
# reaches it after 285 years.
MAX_OFFSET = 2**53 - 1
# Timestamps (epoch ms): 1970 to the last millisecond of the year 9999, the range of
# Python's datetime, with which every console shows them.
MAX_TIMESTAMP_MS = 253_402_300_799_999
# The format counts a record's headers and a header name's UTF-8 bytes in 16 bits.
MAX_FORMAT_HEADERS = 0xFFFF
MAX_HEADER_NAME_BYTES = 0xFFFF
# The largest plain body stored compressed: a larger batch (a producer with a huge
# batch_size) is stored plain. It is also the bound `check` and `plain` put on what a
# compressed body may claim to hold, so a small frame that inflates to gigabytes (a
# decompression bomb) is refused before it is inflated. 128 MiB is twice the largest
# record a stream may allow (policies.MAX_MESSAGE_BYTES, 64 MiB).
MAX_COMPRESSED_BODY = 128 * 1024 * 1024


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


def _read_ints(typecode: str, buf: memoryview, pos: int, count: int) -> tuple[array[int], int]:
    a = array(typecode)
    end = pos + a.itemsize * count
    a.frombytes(buf[pos:end])
    if not _LITTLE:  # pragma: no cover
        a.byteswap()
    return a, end


def _lengths(items: Sequence[bytes | None]) -> tuple[bytes, bytes]:
    """(int32 lengths with -1 for None, the items joined)."""
    try:
        # the fast path, for items without a None: len(None) raises the TypeError below
        return _ints("i", list(map(len, items))), b"".join(items)  # type: ignore[arg-type]  # no None here
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


def all_none(items: Sequence[object]) -> bool:
    """True when every item is None (a batch with no key, or no header, stores none)."""
    if _compiled is not None and items.__class__ is list:
        return bool(_compiled.all_none(items))
    return all(item is None for item in items)


def span(timestamps: Sequence[int]) -> tuple[int, int]:
    """The smallest and largest of a batch's timestamps."""
    if _compiled is not None and timestamps.__class__ is list:
        try:
            low, high = _compiled.span(timestamps)
            return low, high
        except (TypeError, OverflowError):
            pass  # not int64s: the refusal is encode's
    return min(timestamps), max(timestamps)


def encode(
    values: Sequence[bytes | None],
    timestamps: Sequence[int],
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """One batch blob. `keys`/`headers` may be None when no record has any."""
    if (
        _compiled is not None
        and offset_deltas is None
        and values.__class__ is list
        and timestamps.__class__ is list
        and (keys is None or keys.__class__ is list)
        and values
    ):
        try:
            payload: bytes = _compiled.encode_lists(
                values,
                timestamps,
                keys,
                encode_headers(headers) if headers is not None else None,
                VERSION,
                F_KEYS,
                F_HEADERS,
                F_TS64,
            )
            return payload
        except TypeError:
            pass  # an item that is not bytes (a bytearray, a view): joined below
    base_ts = min(timestamps)
    # Absolute int64s rather than int32 deltas: 4 bytes more per message, but both
    # directions are one C call instead of a Python loop over the batch.
    stamps = _ints("q", timestamps) if max(timestamps) != base_ts else None
    value_lengths, value_blob = _lengths(values)
    key_lengths, key_blob = _lengths(keys) if keys is not None else (None, b"")
    return assemble(
        len(values),
        base_ts,
        stamps,
        _ints("I", offset_deltas) if offset_deltas is not None else None,
        value_lengths,
        value_blob,
        key_lengths,
        key_blob,
        encode_headers(headers) if headers is not None else None,
    )


def assemble(
    count: int,
    base_ts: int,
    timestamps: bytes | None,
    deltas: bytes | None,
    value_lengths: bytes,
    values: bytes,
    key_lengths: bytes | None,
    keys: bytes,
    headers: bytes | None,
) -> bytes:
    """A plain batch from its columns already laid out (little-endian): `count` int64
    timestamps (None: all `base_ts`), uint32 offset deltas (None: consecutive), int32
    value lengths (-1: null) and the values joined, key lengths (None: no keys) and the keys
    joined, the headers section (`encode_headers`; None: no headers). `encode` lays them
    out from Python lists; the archive reader from Arrow's buffers, with no loop per record."""
    flags = 0
    parts: list[bytes] = [b""]  # the header's place: the blob is joined once, not copied again
    if timestamps is not None:
        flags |= F_TS64
        parts.append(timestamps)
    if deltas is not None:
        flags |= F_DELTAS
        parts.append(deltas)
    parts.append(value_lengths)
    if key_lengths is not None:
        flags |= F_KEYS
        parts.append(key_lengths)
    if headers is not None:
        flags |= F_HEADERS
        parts.append(struct.pack("<I", len(headers)))
        parts.append(headers)
    parts.append(values)
    parts.append(keys)
    parts[0] = _HEADER.pack(VERSION, flags, count, base_ts)
    return b"".join(parts)


# zstd level 3 (its default): about as fast as the SQLite write it precedes, and most of
# what higher levels save on JSON (docs/BENCHMARKS.md, "Compression").
ZSTD_LEVEL = 3
_local = threading.local()  # zstd contexts are not thread-safe: one of each per thread


def _zstd_compressor() -> zstandard.ZstdCompressor:
    c = getattr(_local, "cctx", None)
    if c is None:
        c = _local.cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return c


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "dctx", None)
    if d is None:
        d = _local.dctx = zstandard.ZstdDecompressor()
    return d


def codec_of(payload: bytes) -> str:
    """The codec of a stored batch's body: "none", "zstd" or "lz4"."""
    return _FLAG_CODEC.get(payload[1] & F_CODEC, "unknown")


def compress(payload: bytes, codec: str) -> bytes:
    """`payload` (a batch from `encode`) with its body compressed by `codec` ("none",
    "zstd", "lz4"). A batch compressed already is returned as it is, and so is one that
    compression would not make smaller or whose body is over MAX_COMPRESSED_BODY."""
    if codec == "none":
        return payload
    if payload[0] == VERSION_KAFKA:  # stored as it came only when plain: laid out anew
        payload = _from_kafka_layout(payload)
    flag = _CODEC_FLAG.get(codec)
    if flag is None:
        raise InvalidArgument(f"unknown compression {codec!r}; known: {', '.join(CODECS)}")
    version, flags, count, base_ts = _HEADER.unpack_from(payload, 0)
    if flags & F_CODEC:
        return payload  # a write retried after a roll: compressed on its first try
    body = memoryview(payload)[_HEADER.size :]
    if len(body) > MAX_COMPRESSED_BODY:
        return payload
    if flag == F_ZSTD:
        frame = _zstd_compressor().compress(body)
    else:
        frame = lz4.frame.compress(body, store_size=True)
    if len(frame) + _RAW_LENGTH.size >= len(body):
        return payload  # incompressible (random bytes): reading it plain costs nothing
    return b"".join(
        (
            _HEADER.pack(version, flags | flag, count, base_ts),
            _RAW_LENGTH.pack(len(body)),
            frame,
        )
    )


def _corrupt(problem: str) -> StorageError:
    return StorageError(f"a stored record batch is corrupt: {problem}")


def _inflate(payload: bytes, bad: Callable[[str], Exception]) -> bytes:
    """The plain form of the compressed batch `payload`; `bad(problem)` makes the error
    raised when it is not a sound one. The body's length is read from the batch and
    bounded (MAX_COMPRESSED_BODY) before anything is inflated, and the frame must inflate
    to exactly that length."""
    version, flags, count, base_ts = _HEADER.unpack_from(payload, 0)
    codec = flags & F_CODEC
    start = _HEADER.size + _RAW_LENGTH.size
    if len(payload) < start:
        raise bad("its compressed body is cut short")
    (raw,) = _RAW_LENGTH.unpack_from(payload, _HEADER.size)
    if raw > MAX_COMPRESSED_BODY:
        raise bad(
            f"its compressed body claims {raw:,} bytes, more than the {MAX_COMPRESSED_BODY:,} "
            "a compressed batch may hold"
        )
    frame = memoryview(payload)[start:]
    name = _FLAG_CODEC.get(codec)
    try:
        if codec == F_ZSTD:
            # The frame states its size; zstd allocates that much, so it is compared first.
            if zstandard.frame_content_size(frame) != raw:
                raise bad(f"its zstd frame does not say it holds {raw:,} bytes")
            body = _zstd_decompressor().decompress(frame, max_output_size=raw)
        elif codec == F_LZ4:
            inflater = lz4.frame.LZ4FrameDecompressor()
            body = inflater.decompress(frame, max_length=raw)
            if not inflater.eof or inflater.unused_data:
                raise bad(f"its lz4 frame does not hold exactly {raw:,} bytes")
        else:
            raise bad(f"unknown codec flags {codec:#x}")
    except (zstandard.ZstdError, RuntimeError) as exc:
        raise bad(f"its {name} body does not decompress ({exc})") from None
    if len(body) != raw:
        raise bad(f"its {name} body inflates to {len(body):,} bytes, not {raw:,}")
    return _HEADER.pack(version, flags & ~F_CODEC, count, base_ts) + body


def plain(payload: bytes) -> bytes:
    """A stored batch in the plain layout (decompressed if it was compressed, laid out in
    columns if it is a Kafka batch); `StorageError` if a compressed one is corrupt."""
    if payload[1] & F_CODEC:
        return _inflate(payload, _corrupt)
    if payload[0] == VERSION_KAFKA:
        return _from_kafka_layout(payload)
    return payload


def from_kafka(data: bytes) -> tuple[bytes, kafka_batch.Summary]:
    """The payload that stores the Kafka record batch v2 `data` as it is, and what its row
    needs to know. Raises what `kafka_batch.inspect` raises: a batch that is not sound, or
    one that cannot be stored as it came (`kafka_batch.NotStorable`)."""
    summary = kafka_batch.inspect(
        data,
        max_timestamp_ms=MAX_TIMESTAMP_MS,
        max_headers=MAX_FORMAT_HEADERS,
        max_header_name_bytes=MAX_HEADER_NAME_BYTES,
    )
    return b"".join(
        (_HEADER.pack(VERSION_KAFKA, 0, summary.count, summary.first_ts), data)
    ), summary


def kafka_data(payload: bytes) -> memoryview | None:
    """The Kafka record batch a payload stores as it came (its base offset and leader epoch
    as the client sent them: a fetch sets them, engine.wire.codec.served), or None for any
    other payload."""
    if payload[0] != VERSION_KAFKA:
        return None
    return memoryview(payload)[_HEADER.size :]


def _from_kafka_layout(payload: bytes) -> bytes:
    """A VERSION_KAFKA payload in the plain columnar layout: by the compiled walk, or where
    it is not built by aiokafka's reader and `encode`."""
    data = memoryview(payload)[_HEADER.size :]
    laid_out = kafka_batch.plain_columns(data)
    if laid_out is not None:
        low, stamps_at, value_lengths, values_joined, key_lengths, keys_joined, head = laid_out
        count = count_of(payload)
        return assemble(
            count,
            low,
            stamps_at,
            None,
            value_lengths,
            values_joined,
            key_lengths,
            keys_joined,
            head,
        )
    values, keys, headers, stamps = kafka_batch.columns(data)
    return encode(
        values,
        stamps,
        None if keys.count(None) == len(keys) else keys,
        headers if any(headers) else None,
    )


class Positions(NamedTuple):
    """Where the columns of a plain batch lie (byte positions; integers little-endian):
    `count` int64 timestamps at `timestamps_at` (None: all `base_timestamp`), `count`
    uint32 offset deltas at `deltas_at` (None: consecutive), `count` int32 value lengths
    (-1: null) at `value_lengths_at`, key lengths likewise at `key_lengths_at` (None: no
    keys), the headers section at `headers_at` (None: no headers), then the values from
    `values_at` and the keys after them."""

    count: int  # type: ignore[assignment]  # a field that shadows tuple.count, as it has always been named
    base_timestamp: int
    timestamps_at: int | None
    deltas_at: int | None
    value_lengths_at: int
    key_lengths_at: int | None
    headers_at: int | None
    values_at: int


def positions(payload: bytes) -> Positions:
    """The `Positions` of a plain batch (pass a stored one through `plain` first)."""
    version, flags, count, base_ts = _HEADER.unpack_from(payload, 0)
    if version != VERSION:
        raise ValueError(f"unsupported record batch version {version}")
    if flags & F_CODEC:
        raise ValueError("a compressed batch has no column positions: call plain() first")
    pos = _HEADER.size
    ts_at = deltas_at = key_at = headers_at = None
    if flags & F_TS64:
        ts_at, pos = pos, pos + 8 * count
    if flags & F_DELTAS:
        deltas_at, pos = pos, pos + 4 * count
    value_at, pos = pos, pos + 4 * count
    if flags & F_KEYS:
        key_at, pos = pos, pos + 4 * count
    if flags & F_HEADERS:
        (length,) = struct.unpack_from("<I", payload, pos)
        headers_at, pos = pos + 4, pos + 4 + length
    return Positions(count, base_ts, ts_at, deltas_at, value_at, key_at, headers_at, pos)


def decode_headers(payload: bytes, at: Positions) -> list[list[tuple[str, bytes | None]]]:
    """The headers of every record of a plain batch that has them (`at.headers_at`)."""
    assert at.headers_at is not None
    return _decode_headers(memoryview(payload), at.headers_at, at.count)


def _slices(blob: bytes, lengths: array[int], pos: int) -> tuple[list[bytes | None], int]:
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
    """Columns of a stored batch, offsets made absolute from the row's `base_offset`;
    a compressed one is inflated first (`StorageError` if it is corrupt)."""
    if payload[0] == VERSION_KAFKA:
        payload = _from_kafka_layout(payload)  # laid out in columns, then read as any other
    version, flags, count, base_ts = _HEADER.unpack_from(payload, 0)
    if version != VERSION:
        raise ValueError(f"unsupported record batch version {version}")
    if flags & F_CODEC:
        payload = _inflate(payload, _corrupt)
    buf = memoryview(payload)
    pos = _HEADER.size
    timestamps: Sequence[int]
    if flags & F_TS64:
        timestamps, pos = _read_ints("q", buf, pos, count)
    else:
        timestamps = [base_ts] * count
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


def _bad(problem: str) -> InvalidArgument:
    return InvalidArgument(f"not a valid record batch: {problem}")


def _check_headers(buf: memoryview, pos: int, end: int, count: int) -> None:
    """The headers section [pos, end) holds exactly `count` records' headers."""
    unpack_h = struct.Struct("<H").unpack_from
    unpack_i = struct.Struct("<i").unpack_from
    for _ in range(count):
        if pos + 2 > end:
            raise _bad("the headers section is cut short")
        (n,) = unpack_h(buf, pos)
        pos += 2
        for _ in range(n):
            if pos + 2 > end:
                raise _bad("the headers section is cut short")
            (klen,) = unpack_h(buf, pos)
            pos += 2
            if pos + klen + 4 > end:
                raise _bad("the headers section is cut short")
            try:
                bytes(buf[pos : pos + klen]).decode()
            except UnicodeDecodeError:
                raise _bad("a header name is not UTF-8") from None
            pos += klen
            (vlen,) = unpack_i(buf, pos)
            pos += 4
            if vlen < -1 or pos + max(vlen, 0) > end:
                raise _bad("a header value has a bad length")
            pos += max(vlen, 0)
    if pos != end:
        raise _bad("the headers section has bytes left over")


def _blob_size(lengths: array[int], what: str) -> int:
    """Bytes the items of `lengths` take (-1 is None: none)."""
    if lengths and min(lengths) < -1:
        raise _bad(f"a {what} has a negative length")
    return sum(lengths) + lengths.count(-1)


def check(
    payload: bytes,
    *,
    base_offset: int,
    last_offset: int,
    count: int,
    first_ts: int,
    max_ts: int,
) -> None:
    """Raise `InvalidArgument` unless `payload` is a batch this engine could have written
    for a row with these columns: the layout complete and nothing left over, `count`
    records, their offsets increasing within `base_offset`..`last_offset` (which lie in
    0..MAX_OFFSET), their timestamps within 0..MAX_TIMESTAMP_MS with `first_ts` the
    smallest and `max_ts` the largest. A compressed body must inflate, within
    MAX_COMPRESSED_BODY, to exactly the length it states, and is checked inflated. Costs a
    few C-level passes over the columns (and an inflate)."""
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise _bad(f"the payload is {type(payload).__name__}, not bytes")
    for name, value in (("base_offset", base_offset), ("last_offset", last_offset)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OFFSET:
            raise _bad(f"{name} must be an integer from 0 to {MAX_OFFSET:,}")
    if last_offset < base_offset:
        raise _bad(f"last_offset {last_offset} is below base_offset {base_offset}")
    for name, value in (("first_ts", first_ts), ("max_ts", max_ts)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(f"{name} must be an integer")
        if not 0 <= value <= MAX_TIMESTAMP_MS:
            raise _bad(f"{name} must be epoch milliseconds from 0 to {MAX_TIMESTAMP_MS:,}")
    if first_ts > max_ts:
        raise _bad(f"first_ts {first_ts} is after max_ts {max_ts}")
    if len(payload) < _HEADER.size:
        raise _bad(f"{len(payload)} bytes, shorter than a batch header")
    version, flags, n, base_ts = _HEADER.unpack_from(payload, 0)
    if version == VERSION_KAFKA:
        _check_kafka(payload, flags, n, base_ts, base_offset, last_offset, count, first_ts, max_ts)
        return
    if version != VERSION:
        raise _bad(f"unsupported version {version}")
    if flags & ~_FLAGS:
        raise _bad(f"unknown flags {flags:#x}")
    if isinstance(count, bool) or not isinstance(count, int) or count != n or n < 1:
        raise _bad(f"the batch holds {n} records, its row says {count!r}")
    if n > last_offset - base_offset + 1:
        raise _bad(f"{n} records do not fit offsets {base_offset}..{last_offset}")
    if flags & F_CODEC:
        # Inflated within a bound (a frame from outside may be a decompression bomb),
        # then checked as the plain batch it holds.
        payload = _inflate(bytes(payload), _bad)
        flags &= ~F_CODEC
    size = len(payload)
    buf = memoryview(payload)
    pos = _HEADER.size

    def column(typecode: str) -> array[int]:
        nonlocal pos
        width = array(typecode).itemsize * n
        if pos + width > size:
            raise _bad("a column is cut short")
        values, pos = _read_ints(typecode, buf, pos, n)
        return values

    if flags & F_TS64:
        stamps = column("q")
        low, high = min(stamps), max(stamps)
    else:
        low = high = base_ts
    if (low, high) != (first_ts, max_ts):
        raise _bad(
            f"its timestamps span {low}..{high}, its row says first_ts {first_ts}, max_ts {max_ts}"
        )
    if flags & F_DELTAS:
        deltas = column("I")
        if any(a >= b for a, b in pairwise(deltas)):
            raise _bad("its offsets do not increase")
        if deltas[-1] > last_offset - base_offset:
            raise _bad(f"an offset lies past last_offset {last_offset}")
    blobs = _blob_size(column("i"), "value")
    if flags & F_KEYS:
        blobs += _blob_size(column("i"), "key")
    if flags & F_HEADERS:
        if pos + 4 > size:
            raise _bad("the headers section is cut short")
        (hlen,) = struct.unpack_from("<I", payload, pos)
        pos += 4
        if pos + hlen > size:
            raise _bad("the headers section is cut short")
        _check_headers(buf, pos, pos + hlen, n)
        pos += hlen
    if pos + blobs != size:
        raise _bad(f"{size} bytes, where its columns account for {pos + blobs}")


def _check_kafka(
    payload: bytes,
    flags: int,
    n: int,
    base_ts: int,
    base_offset: int,
    last_offset: int,
    count: int,
    first_ts: int,
    max_ts: int,
) -> None:
    """`check` for a VERSION_KAFKA payload: its Kafka batch sound and storable, and the
    header and the row agreeing with it (its offsets are consecutive)."""
    if flags:
        raise _bad(f"flags {flags:#x} on a Kafka batch")
    try:
        _, summary = from_kafka(bytes(memoryview(payload)[_HEADER.size :]))
    except Exception as exc:  # the record reader raises several kinds for a damaged batch
        raise _bad(f"its Kafka record batch is not one the engine stores ({exc})") from None
    if not summary.count == n == count or n != last_offset - base_offset + 1:
        raise _bad(
            f"the batch holds {summary.count} records; its header says {n}, its row "
            f"{count!r} at offsets {base_offset}..{last_offset}"
        )
    if (summary.first_ts, summary.max_ts) != (first_ts, max_ts) or base_ts != first_ts:
        raise _bad(
            f"its timestamps span {summary.first_ts}..{summary.max_ts}, its row says "
            f"first_ts {first_ts}, max_ts {max_ts}"
        )


_CRC_FIELDS = struct.Struct("<qqqqB")


def payload_crc(payload: bytes) -> int:
    """The payload's part of `checksum` (CRC32C of the stored payload)."""
    crc: int = crc32c(payload)
    return crc


def checksum(
    base_offset: int,
    last_offset: int,
    ts_type: int,
    first_ts: int,
    max_ts: int,
    payload: bytes,
    crc_of_payload: int | None = None,
) -> int:
    """The CRC32C stored with a batch: of its payload, then of its row's fields (in the
    order of a read row, `engine.storage.reader.StoredBatch`). `crc_of_payload` is
    `payload_crc(payload)` when it is known already. Raises TypeError or struct.error
    when a field is not what a batch row holds (a damaged row)."""
    if crc_of_payload is None:
        crc_of_payload = crc32c(payload)
    crc: int = crc32c(
        _CRC_FIELDS.pack(base_offset, last_offset, first_ts, max_ts, ts_type), crc_of_payload
    )
    return crc


def intact(
    base_offset: int,
    last_offset: int,
    ts_type: int,
    first_ts: int,
    max_ts: int,
    payload: bytes,
    crc: int | None,
) -> bool:
    """Whether a stored batch (a read row, then its stored `crc`) matches its checksum. A
    batch written before checksums (`crc` None) is taken as it is; a field of another type
    than a batch row holds (a damaged row) is not intact."""
    if crc is None:
        return True
    try:
        return checksum(base_offset, last_offset, ts_type, first_ts, max_ts, payload) == crc
    except (TypeError, struct.error):
        return False


def count_of(payload: bytes) -> int:
    count: int = _HEADER.unpack_from(payload, 0)[2]
    return count
