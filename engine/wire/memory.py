"""The C allocator's settings of a `plet serve` process (glibc's `mallopt`).

A listener moves megabytes a request: stored batches of up to a megabyte read from SQLite
into bytes, requests of as much, and the buffers of each. glibc's defaults hand such memory
back to the system soon after it is freed (blocks over a moving threshold are mapped and
unmapped one by one, and a thread's heap is trimmed once 2 MiB at its top are free), so
the next request's memory is mapped afresh and the kernel faults it in and zeroes it page
by page: a fifth of the listener's time serving 1-KiB fetches, measured
(docs/BENCHMARKS.md, issue 28). The listener keeps freed memory instead, up to
`TRIM_THRESHOLD` at the top of each heap, and maps apart only blocks over
`MMAP_THRESHOLD` (glibc's largest); the engine embedded in an application leaves that
application's allocator alone. Settings given in the environment (`MALLOC_*_`,
`GLIBC_TUNABLES`) win: nothing is set then.

All threads share one heap (`ARENA_MAX`). glibc gives each new thread a heap of its own (up
to eight a core), and the listener's workers take requests in turn: each grew its own heap
to a large fetch's size before any memory was used again, so a listener's first reads
faulted in their bytes several times over. The workers run Python under one lock, so a
shared heap costs them little waiting.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1  # glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
ARENA_MAX = 1
MMAP_THRESHOLD = 32 << 20  # glibc's maximum on 64-bit machines
TRIM_THRESHOLD = 64 << 20  # a large fetch's records (librdkafka asks for up to 64 MiB)
_ENVIRONMENT = (
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_ARENA_MAX",
    "GLIBC_TUNABLES",
)


def keep_freed_memory() -> bool:
    """Set this process's allocator for serving; True when it was set (glibc, and no
    setting of the user's in the environment)."""
    if not sys.platform.startswith("linux") or any(os.environ.get(n) for n in _ENVIRONMENT):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - a libc without mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; musl's stub returns 0 and changes nothing. Called before
    # the listener's threads start: a thread takes its heap at its first allocation.
    return all(
        mallopt(option, value)
        for option, value in (
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
            (_M_ARENA_MAX, ARENA_MAX),
        )
    )
