"""Making many objects at once without the cyclic garbage collector walking them.

Used by every bulk reader and decoder of the engine: the consumer making records
(engine.storage.log) and the wire listener decoding produced batches (engine.wire.codec).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Reads that may make more records than this pause the cyclic garbage collector while
# they make them (fewer set off no collection: the collector's first threshold is 700).
GC_PAUSE_RECORDS = 700
_gc_lock = threading.RLock()  # a finalizer run by gc.collect may read
_gc_pauses = 0  # bulk reads in progress, in every thread (the collector is per process)
_gc_resume = False  # the collector was enabled when the first of them began
_gc_promote = False  # and nothing was frozen by the application (gc.freeze)


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
    """
    if max_records <= GC_PAUSE_RECORDS:
        yield
        return
    global _gc_pauses, _gc_resume, _gc_promote
    with _gc_lock:
        if _gc_pauses == 0:
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
                if _gc_promote:
                    gc.freeze()
                    gc.unfreeze()
                if _gc_resume:
                    gc.enable()
