"""Making many objects at once without the cyclic garbage collector walking them, and in
memory that is already mapped.

Used by every bulk reader and decoder of the engine: the consumer making records
(engine.storage.log) and the wire listener decoding produced batches (engine.wire.codec).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

# The cache of freed pymalloc arenas (engine/_arena_cache.pyx, built by `pip install -e .`).
# Without it (a checkout not built) every arena freed goes back to the system, as CPython
# does on its own: records are the same, large polls only fault their pages in again.
_arena_cache: ModuleType | None
try:
    from engine import _arena_cache
except ImportError:  # pragma: no cover - the build is part of every install
    _arena_cache = None

# Reads that may make more records than this pause the cyclic garbage collector while
# they make them (fewer set off no collection: the collector's first threshold is 700).
GC_PAUSE_RECORDS = 700
_gc_lock = threading.RLock()  # a finalizer run by gc.collect may read
_gc_pauses = 0  # bulk reads in progress, in every thread (the collector is per process)
_gc_resume = False  # the collector was enabled when the first of them began
_gc_promote = False  # and nothing was frozen by the application (gc.freeze)
# Freed arenas kept mapped once a bulk read has run (engine/_arena_cache.pyx): as many as
# the last bulk read took, at least ARENA_CACHE_BYTES (a poll of 100,000 records of 100 B
# takes some 30 MB of arenas, 50 MB with a header each, all freed when the caller drops
# it), at most ARENA_CACHE_MAX_BYTES.
ARENA_CACHE_BYTES = 64 << 20
ARENA_CACHE_MAX_BYTES = 1 << 30
_arenas_from = 0  # the cache's taken() when the bulk reads in progress began


@contextmanager
def bulk_records(max_records: int) -> Iterator[None]:
    """Make up to `max_records` records without the cyclic garbage collector walking them.

    Records are NamedTuples, which CPython never untracks (it untracks exact tuples only),
    so while a read made 100,000 of them a generation-0 collection ran every 700 and the
    older generations' collections walked every record made so far, again and again: such
    a poll cost twice as much per record as one of 500 (issue 13; `plet bench --poll`).
    Here the collector is paused while the records are made, and when the last bulk read
    ends everything made meanwhile is moved to the oldest generation in O(1)
    (`gc.freeze()` then `gc.unfreeze()`, two list splices), where only a full collection
    looks at it, as at any long-lived data; a generation-1 collection first clears the
    young generations, so no young garbage skips its examination. An application that
    froze objects itself (gc.freeze before forking) keeps them frozen: then the records
    are only made with the collector paused. Pauses nest and overlap across threads; the
    last one to end restores the collector as the first one found it.

    The memory they take is kept for the next ones: CPython unmaps an arena (1 MiB) once
    all its objects are freed, so each large poll, whose records die together, had the
    kernel map and zero tens of megabytes of fresh pages, which made a poll of 100,000
    records cost 1.1x to 1.25x a poll of 500 per record (issue 28). The first bulk read
    installs the cache of freed arenas (engine/_arena_cache.pyx), and the last one to end
    sets how much it keeps: what the bulk reads just ended took, within
    `ARENA_CACHE_BYTES` and `ARENA_CACHE_MAX_BYTES`. So a process holds on to no more freed
    memory than its last large read needed (or 64 MiB), which that read had in use anyway.
    """
    if max_records <= GC_PAUSE_RECORDS:
        yield
        return
    global _gc_pauses, _gc_resume, _gc_promote, _arenas_from
    with _gc_lock:
        if _gc_pauses == 0:
            if _arena_cache is not None:
                if _arena_cache.limit() == 0:  # the first bulk read: installs the cache
                    _arena_cache.install(ARENA_CACHE_BYTES)
                _arenas_from = _arena_cache.taken()
            _gc_resume = gc.isenabled()
            _gc_promote = _gc_resume and gc.get_freeze_count() == 0
            if _gc_promote:
                gc.collect(1)
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0:
                if _arena_cache is not None:
                    took = _arena_cache.taken() - _arenas_from
                    _arena_cache.install(min(ARENA_CACHE_MAX_BYTES, max(ARENA_CACHE_BYTES, took)))
                if _gc_promote:
                    gc.freeze()
                    gc.unfreeze()
                if _gc_resume:
                    gc.enable()
