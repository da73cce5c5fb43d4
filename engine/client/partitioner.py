# cython: annotation_typing=False
"""Choosing a partition: Kafka's default partitioner, so a key lands where Kafka puts it.

An explicit partition wins; else `murmur2(key) & 0x7fffffff % partitions`, exactly as
Kafka's Java client (and kafka-python) compute it; else the producer's sticky partition,
which changes once per batch so that unkeyed messages still fill large batches.

Cython compiles this file when the package is built (setup.py; partitioner.pxd types
murmur2's words as C integers: 0.15 us a key against 2 us); unbuilt, it runs as Python.
Its type hints are for mypy only, as in engine/client/accumulator.py.
"""

from __future__ import annotations

from functools import lru_cache

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of `data`, as a signed int like Java's `Utils.murmur2`."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def _hash(key: bytes) -> int:
    return murmur2(key) & 0x7FFFFFFF


# Run as Python, murmur2 takes 2 us, and keys repeat (device ids, user ids): a cache keeps
# keyed sends fast. Compiled, it takes less than the cache's own lookup (0.15 us a key, a
# miss of a full cache 0.5 us), so it is called as it is.
_positive_hash = _hash if type(murmur2).__name__ != "function" else lru_cache(65536)(_hash)


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for `key` among `partitions`."""
    return _positive_hash(bytes(key)) % partitions
