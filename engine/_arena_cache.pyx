# cython: language_level=3
"""Freed pymalloc arenas kept mapped, up to a limit, for the next ones asked for.

CPython's small-object allocator takes memory from the system in arenas (1 MiB on 64-bit
CPython 3.11) and hands an arena back (munmap) as soon as every object in it is freed.
A poll of 100,000 records fills some 30 to 50 arenas with records that all die together
when the caller drops the poll, so every large poll maps its memory afresh and the kernel
faults in and zeroes each page again: 60 to 120 page faults per 1,000 records, about 0.1
to 0.2 us per record of kernel time that a poll of 500 records (which reuses the same few
hot pools) never pays (docs/BENCHMARKS.md, issue 28). Kept here instead, a freed arena is
handed out again as it is, its pages still resident.

`install(limit)` puts this cache in front of the interpreter's arena allocator
(PyObject_SetArenaAllocator), once per process; every later call only sets the limit,
releasing what lies above it (0: keep nothing, CPython's own behaviour). `taken()` counts
the bytes of arenas handed out, so a caller can tell how much a piece of work needed
(engine.bulk sets the limit to what the last bulk read took). The cache calls the
allocator it was installed over for the arenas it does not hold, so arenas made before
it was installed are freed as they were made. Its state is guarded by a lock of its own:
in CPython 3.11 the GIL already serializes arena calls, but sub-interpreters with their
own GIL (3.12+) share the arena allocator.
"""

from cpython.pythread cimport (
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_release_lock,
    PyThread_type_lock,
    WAIT_LOCK,
)


cdef extern from "Python.h":
    ctypedef struct PyObjectArenaAllocator:
        void* ctx
        void* (*alloc)(void* ctx, size_t size) noexcept nogil
        void (*free)(void* ctx, void* ptr, size_t size) noexcept nogil

    void PyObject_GetArenaAllocator(PyObjectArenaAllocator* allocator)
    void PyObject_SetArenaAllocator(PyObjectArenaAllocator* allocator)


cdef enum:
    SLOTS = 1024  # arenas held at most, whatever the limit (1 GiB of 1 MiB arenas)


cdef PyObjectArenaAllocator _inner  # the allocator this cache was installed over
cdef PyThread_type_lock _lock = NULL
cdef void* _ptrs[SLOTS]
cdef size_t _sizes[SLOTS]
cdef Py_ssize_t _count = 0
cdef size_t _held = 0  # bytes of the arenas held
cdef size_t _limit = 0
cdef unsigned long long _taken = 0  # bytes of arenas handed out since installed, held or new
cdef unsigned long long _mapped = 0  # of which new, from the allocator beneath


cdef void* _alloc(void* ctx, size_t size) noexcept nogil:
    global _count, _held, _taken, _mapped
    cdef void* ptr = NULL
    PyThread_acquire_lock(_lock, WAIT_LOCK)
    # the last freed first: its pages are the likeliest to be in the CPU's caches
    if _count > 0 and _sizes[_count - 1] == size:
        _count -= 1
        ptr = _ptrs[_count]
        _held -= size
        _taken += size
    PyThread_release_lock(_lock)
    if ptr == NULL:
        ptr = _inner.alloc(_inner.ctx, size)
        if ptr != NULL:
            PyThread_acquire_lock(_lock, WAIT_LOCK)
            _taken += size
            _mapped += size
            PyThread_release_lock(_lock)
    return ptr


cdef void _free(void* ctx, void* ptr, size_t size) noexcept nogil:
    global _count, _held
    cdef bint kept = False
    PyThread_acquire_lock(_lock, WAIT_LOCK)
    # one size only (CPython's arenas all have one): a held arena always fits the next ask
    if _count < SLOTS and _held + size <= _limit and (_count == 0 or _sizes[0] == size):
        _ptrs[_count] = ptr
        _sizes[_count] = size
        _count += 1
        _held += size
        kept = True
    PyThread_release_lock(_lock)
    if not kept:
        _inner.free(_inner.ctx, ptr, size)


def install(size_t limit):
    """Keep up to `limit` bytes of freed arenas from now on (installing the cache on the
    first call); arenas held beyond a lowered limit are released at once."""
    global _lock, _count, _held, _limit
    cdef PyObjectArenaAllocator mine
    if _lock == NULL:
        _lock = PyThread_allocate_lock()
        if _lock == NULL:
            raise MemoryError("no lock for the arena cache")
        PyObject_GetArenaAllocator(&_inner)
        mine.ctx = NULL
        mine.alloc = _alloc
        mine.free = _free
        PyObject_SetArenaAllocator(&mine)
    with nogil:
        PyThread_acquire_lock(_lock, WAIT_LOCK)
        _limit = limit
        while _held > _limit:
            _count -= 1
            _held -= _sizes[_count]
            _inner.free(_inner.ctx, _ptrs[_count], _sizes[_count])
        PyThread_release_lock(_lock)


def held():
    """Bytes of freed arenas the cache holds now."""
    return _held


def taken():
    """Bytes of arenas handed out since the cache was installed, held ones or new: what
    the objects made between two calls needed beyond the free room of the arenas in use."""
    return _taken


def mapped():
    """Bytes of arenas handed out since the cache was installed that were new: asked of
    the allocator beneath it (mapped and faulted in afresh), not held."""
    return _mapped


def limit():
    """The limit last set by `install` (0 before it)."""
    return _limit
