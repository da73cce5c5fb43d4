# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The records of a Kafka record batch v2, walked in C: checked (`walk`) and laid out in
the engine's columns (`columns`), with no Python object per record.

aiokafka's reader (engine.storage.kafka_batch's fallback) makes a record object, with its
key and value copied into bytes, for every record: most of what checking a produced batch
and reading a stored one cost. This walks the same layout (Kafka's DefaultRecord: length,
attributes, timestamp delta, offset delta, key, value, headers; integers zigzag varints)
with the same refusals, and writes the columns `engine.storage.batch.assemble` takes.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef enum:
    RECORDS_AT = 61  # the v2 batch header's size


cdef inline void _put_int32(char* at, int32_t v):
    """A little-endian int32, as the engine's format stores every integer."""
    cdef uint32_t u = <uint32_t>v
    cdef uint8_t* p = <uint8_t*>at
    p[0] = u & 0xFF
    p[1] = (u >> 8) & 0xFF
    p[2] = (u >> 16) & 0xFF
    p[3] = (u >> 24) & 0xFF


cdef inline int64_t _varint(const uint8_t* d, Py_ssize_t end, Py_ssize_t* pos, int bits) except? -1:
    """The zigzag varint at pos[0] (at most `bits` bits), which must end before `end`."""
    cdef uint64_t raw = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if pos[0] >= end:
            raise ValueError("a record is cut short")
        b = d[pos[0]]
        pos[0] += 1
        raw |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            break
        shift += 7
        if shift >= bits:
            raise ValueError(f"a varint longer than {bits} bits")
    return <int64_t>(raw >> 1) ^ -(<int64_t>(raw & 1))


cdef inline int64_t _length(const uint8_t* d, Py_ssize_t end, Py_ssize_t* pos, int64_t low) except? -2:
    """A length varint whose bytes fit before `end`. With `low` -1 any negative length is
    a null, -1 (as Kafka's own reader and aiokafka's take it); with 0 it is refused."""
    cdef int64_t n = _varint(d, end, pos, 35)
    if n < 0:
        if low < 0:
            return -1
        raise ValueError(f"a negative length {n}")
    if n > 0 and n > end - pos[0]:
        raise ValueError("a key, value or header runs past its record")
    return n


cdef class _Walk:
    """Where each record's parts lie, filled by `_walk`."""
    cdef int64_t low, high, first
    cdef Py_ssize_t values_bytes, keys_bytes, headers_bytes
    cdef Py_ssize_t max_headers, max_name
    cdef bint any_key, any_header


cdef _Walk _walk(const uint8_t* d, Py_ssize_t n, Py_ssize_t count, int64_t base_ts,
                 int32_t* key_at, int32_t* key_len, int32_t* value_at, int32_t* value_len,
                 int32_t* headers_at, int32_t* header_count, int64_t* stamps):
    """Check every record of the batch `d` (n bytes, `count` records) and note where its
    parts lie (any of the arrays may be NULL: not noted)."""
    cdef _Walk w = _Walk()
    cdef Py_ssize_t pos = RECORDS_AT, end, i, h, hcount
    cdef int64_t size, ts, klen, vlen
    w.low = 0x7FFFFFFFFFFFFFFF
    w.high = -0x7FFFFFFFFFFFFFFF
    for i in range(count):
        size = _varint(d, n, &pos, 35)
        if size < 0 or size > n - pos:
            raise ValueError(f"a record of length {size} runs past the batch")
        end = pos + size
        if pos >= end:
            raise ValueError("a record is cut short")
        # Attributes: unused in v2, and 0 from every producer. Kafka reads one byte;
        # aiokafka's reader (this module's fallback, and a client) a varint: a record whose
        # byte is not 0 is refused, so no reader reads it another way.
        if d[pos] != 0:
            raise ValueError(f"record {i} has attributes {d[pos]:#x}, not 0")
        pos += 1
        # wrapping as Java's long does (a client reads it so), never C's undefined overflow
        ts = <int64_t>(<uint64_t>base_ts + <uint64_t>_varint(d, end, &pos, 70))
        if i == 0:
            w.first = ts
        if ts < w.low:
            w.low = ts
        if ts > w.high:
            w.high = ts
        if _varint(d, end, &pos, 35) != i:
            raise ValueError("its offset deltas are not 0 to count - 1")
        klen = _length(d, end, &pos, -1)
        if key_at != NULL:
            key_at[i] = <int32_t>pos
            key_len[i] = <int32_t>klen
        if klen >= 0:
            w.any_key = True
            w.keys_bytes += klen
            pos += klen
        vlen = _length(d, end, &pos, -1)
        if value_at != NULL:
            value_at[i] = <int32_t>pos
            value_len[i] = <int32_t>vlen
        if vlen > 0:
            w.values_bytes += vlen
            pos += vlen
        hcount = _varint(d, end, &pos, 35)
        if hcount < 0:
            raise ValueError(f"a negative header count {hcount}")
        if headers_at != NULL:
            headers_at[i] = <int32_t>pos
            header_count[i] = <int32_t>hcount
        if hcount > w.max_headers:
            w.max_headers = hcount
        w.headers_bytes += 2
        for h in range(hcount):
            w.any_header = True
            klen = _length(d, end, &pos, 0)
            PyUnicode_DecodeUTF8(<const char*>d + pos, klen, NULL)  # raises if not UTF-8
            if klen > w.max_name:
                w.max_name = klen
            pos += klen
            vlen = _length(d, end, &pos, -1)
            if vlen > 0:
                pos += vlen
            w.headers_bytes += 6 + klen + (vlen if vlen > 0 else 0)
        if pos != end:
            raise ValueError(f"a record has {end - pos} bytes left over")
        if stamps != NULL:
            stamps[i] = ts
    if pos != n:
        raise ValueError(f"{n - pos} bytes left over after all records")
    return w


def walk(const uint8_t[::1] data, Py_ssize_t count, int64_t base_ts):
    """Check every record of the v2 batch `data` (whose header says `count` records and
    `base_ts`): its layout to the last byte, offset deltas 0..count-1, header names in
    UTF-8. ValueError if one is not sound; else (smallest timestamp, largest, the first
    record's, most headers of a record, longest header name in bytes)."""
    if data.shape[0] < RECORDS_AT or count < 1:
        raise ValueError("not a record batch with records")
    cdef _Walk w = _walk(&data[0], data.shape[0], count, base_ts,
                         NULL, NULL, NULL, NULL, NULL, NULL, NULL)
    return w.low, w.high, w.first, w.max_headers, w.max_name


def columns(const uint8_t[::1] data, Py_ssize_t count, int64_t base_ts):
    """The engine's columns of a batch `walk` accepted, as `batch.assemble` takes them:
    (smallest timestamp, int64 timestamps or None when all are that one, int32 value
    lengths, the values joined, int32 key lengths or None when no record has a key, the
    keys joined, the headers section or None when no record has a header)."""
    if data.shape[0] < RECORDS_AT or count < 1:
        raise ValueError("not a record batch with records")
    cdef const uint8_t* d = &data[0]
    cdef bytes key_at_b = PyBytes_FromStringAndSize(NULL, 4 * count)
    cdef bytes value_at_b = PyBytes_FromStringAndSize(NULL, 4 * count)
    cdef bytes headers_at_b = PyBytes_FromStringAndSize(NULL, 4 * count)
    cdef bytes header_count_b = PyBytes_FromStringAndSize(NULL, 4 * count)
    cdef bytes key_lengths = PyBytes_FromStringAndSize(NULL, 4 * count)
    cdef bytes value_lengths = PyBytes_FromStringAndSize(NULL, 4 * count)
    cdef bytes stamps = PyBytes_FromStringAndSize(NULL, 8 * count)
    cdef int32_t* key_at = <int32_t*>PyBytes_AS_STRING(key_at_b)
    cdef int32_t* value_at = <int32_t*>PyBytes_AS_STRING(value_at_b)
    cdef int32_t* headers_at = <int32_t*>PyBytes_AS_STRING(headers_at_b)
    cdef int32_t* header_count = <int32_t*>PyBytes_AS_STRING(header_count_b)
    cdef int32_t* klens = <int32_t*>PyBytes_AS_STRING(key_lengths)
    cdef int32_t* vlens = <int32_t*>PyBytes_AS_STRING(value_lengths)
    cdef int64_t* ts = <int64_t*>PyBytes_AS_STRING(stamps)
    cdef _Walk w = _walk(d, data.shape[0], count, base_ts,
                         key_at, klens, value_at, vlens, headers_at, header_count, ts)
    cdef bytes values = PyBytes_FromStringAndSize(NULL, w.values_bytes)
    cdef bytes keys = PyBytes_FromStringAndSize(NULL, w.keys_bytes)
    cdef char* out = PyBytes_AS_STRING(values)
    cdef Py_ssize_t i, h, at = 0, pos
    cdef int64_t klen, vlen
    for i in range(count):
        if vlens[i] > 0:
            memcpy(out + at, d + value_at[i], vlens[i])
            at += vlens[i]
    out = PyBytes_AS_STRING(keys)
    at = 0
    for i in range(count):
        if klens[i] > 0:
            memcpy(out + at, d + key_at[i], klens[i])
            at += klens[i]
    cdef object headers = None
    cdef char* hout
    if w.any_header:
        headers = PyBytes_FromStringAndSize(NULL, w.headers_bytes)
        hout = PyBytes_AS_STRING(headers)
        at = 0
        for i in range(count):
            (<uint8_t*>hout)[at] = header_count[i] & 0xFF
            (<uint8_t*>hout)[at + 1] = (header_count[i] >> 8) & 0xFF
            at += 2
            pos = headers_at[i]
            for h in range(header_count[i]):
                klen = _varint(d, data.shape[0], &pos, 35)
                (<uint8_t*>hout)[at] = klen & 0xFF
                (<uint8_t*>hout)[at + 1] = (klen >> 8) & 0xFF
                at += 2
                memcpy(hout + at, d + pos, klen)
                at += klen
                pos += klen
                vlen = _varint(d, data.shape[0], &pos, 35)
                if vlen < 0:
                    vlen = -1  # any negative length is a null (`_length`)
                _put_int32(hout + at, <int32_t>vlen)
                at += 4
                if vlen > 0:
                    memcpy(hout + at, d + pos, vlen)
                    at += vlen
                    pos += vlen
    return (
        w.low,
        None if w.low == w.high else stamps,
        value_lengths,
        values,
        key_lengths if w.any_key else None,
        keys,
        headers,
    )

