# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A plain stored batch laid out from the producer's lists in C (engine.storage.batch's
`encode`, where this module is built).

`encode` in Python turns each column into an `array` from a list (a Python int looked at
per record), takes the lengths with `map(len, ...)` and joins the columns: about 0.17 us a
record, a third of what a transaction's commit waited for (docs/BENCHMARKS.md, issue 25).
Here the lists are read once to size the blob and once to fill it, with no object made
per record. The layout is `engine.storage.batch`'s; the flags and the version come from
there as arguments.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef enum:
    HEADER_SIZE = 14  # '<BBIq': version, flags, count, base timestamp


cdef inline void _put_uint32(char* at, uint32_t u):
    cdef uint8_t* p = <uint8_t*>at
    p[0] = u & 0xFF
    p[1] = (u >> 8) & 0xFF
    p[2] = (u >> 16) & 0xFF
    p[3] = (u >> 24) & 0xFF


cdef inline void _put_int64(char* at, int64_t v):
    cdef uint64_t u = <uint64_t>v
    cdef uint8_t* p = <uint8_t*>at
    cdef int i
    for i in range(8):
        p[i] = (u >> (8 * i)) & 0xFF


cdef Py_ssize_t _joined_size(list items) except -1:
    """The bytes of `items` joined (None counts nothing); TypeError for anything but bytes
    or None (the caller's general path takes those)."""
    cdef Py_ssize_t i, total = 0
    cdef object item
    for i in range(PyList_GET_SIZE(items)):
        item = <object>PyList_GET_ITEM(items, i)
        if item is None:
            continue
        if type(item) is not bytes:
            raise TypeError("not bytes")
        total += PyBytes_GET_SIZE(item)
    if total > 0x7FFFFFFF:
        raise OverflowError("a batch's column larger than 2 GiB")
    return total


cdef char* _put_lengths(char* at, list items):
    cdef Py_ssize_t i
    cdef object item
    for i in range(PyList_GET_SIZE(items)):
        item = <object>PyList_GET_ITEM(items, i)
        _put_uint32(at, 0xFFFFFFFF if item is None else <uint32_t>PyBytes_GET_SIZE(item))
        at += 4
    return at


cdef char* _put_joined(char* at, list items):
    cdef Py_ssize_t i, n
    cdef object item
    for i in range(PyList_GET_SIZE(items)):
        item = <object>PyList_GET_ITEM(items, i)
        if item is not None:
            n = PyBytes_GET_SIZE(item)
            memcpy(at, PyBytes_AS_STRING(item), n)
            at += n
    return at


def encode_lists(
    list values,
    list timestamps,
    list keys,
    bytes headers,
    int version,
    int f_keys,
    int f_headers,
    int f_ts64,
):
    """The payload `engine.storage.batch.encode(values, timestamps, keys, headers)` makes,
    byte for byte: `keys` None when no record has a key, `headers` the encoded headers
    section or None. Raises TypeError for an item that is not bytes or None, ValueError for
    no records or columns of different lengths, OverflowError for a timestamp out of int64."""
    cdef Py_ssize_t count = PyList_GET_SIZE(values), i
    if count == 0:
        raise ValueError("a batch holds at least one record")
    if PyList_GET_SIZE(timestamps) != count or (
        keys is not None and PyList_GET_SIZE(keys) != count
    ):
        raise ValueError("columns of different lengths")
    cdef int64_t first = <int64_t>(<object>PyList_GET_ITEM(timestamps, 0))
    cdef int64_t base = first, t
    cdef bint differ = False
    for i in range(1, count):
        t = <int64_t>(<object>PyList_GET_ITEM(timestamps, i))
        if t != first:
            differ = True
        if t < base:
            base = t
    cdef Py_ssize_t value_bytes = _joined_size(values)
    cdef Py_ssize_t key_bytes = _joined_size(keys) if keys is not None else 0
    cdef int flags = 0
    cdef Py_ssize_t size = HEADER_SIZE + 4 * count + value_bytes
    if differ:
        flags |= f_ts64
        size += 8 * count
    if keys is not None:
        flags |= f_keys
        size += 4 * count + key_bytes
    if headers is not None:
        flags |= f_headers
        size += 4 + PyBytes_GET_SIZE(headers)
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* start = PyBytes_AS_STRING(out)
    cdef char* at = start
    (<uint8_t*>at)[0] = <uint8_t>version
    (<uint8_t*>at)[1] = <uint8_t>flags
    _put_uint32(at + 2, <uint32_t>count)
    _put_int64(at + 6, base)
    at += HEADER_SIZE
    if differ:
        for i in range(count):
            _put_int64(at, <int64_t>(<object>PyList_GET_ITEM(timestamps, i)))
            at += 8
    at = _put_lengths(at, values)
    if keys is not None:
        at = _put_lengths(at, keys)
    if headers is not None:
        _put_uint32(at, <uint32_t>PyBytes_GET_SIZE(headers))
        memcpy(at + 4, PyBytes_AS_STRING(headers), PyBytes_GET_SIZE(headers))
        at += 4 + PyBytes_GET_SIZE(headers)
    at = _put_joined(at, values)
    if keys is not None:
        at = _put_joined(at, keys)
    assert at - start == size
    return out


def all_none(list items):
    """True when every item is None: `items.count(None) == len(items)` without a
    comparison per item (0.17 ms for a batch of 10,000, in a transaction's commit path)."""
    cdef Py_ssize_t i
    for i in range(PyList_GET_SIZE(items)):
        if <object>PyList_GET_ITEM(items, i) is not None:
            return False
    return True


def span(list stamps):
    """(min, max) of a non-empty list of int64 timestamps, in one pass of C."""
    cdef Py_ssize_t count = PyList_GET_SIZE(stamps), i
    if count == 0:
        raise ValueError("no timestamps")
    cdef int64_t low = <int64_t>(<object>PyList_GET_ITEM(stamps, 0))
    cdef int64_t high = low, t
    for i in range(1, count):
        t = <int64_t>(<object>PyList_GET_ITEM(stamps, i))
        if t < low:
            low = t
        elif t > high:
            high = t
    return low, high
