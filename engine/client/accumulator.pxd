# The C types Cython gives accumulator.py when it compiles it (setup.py): what send() reads
# per message is then a struct member or a C integer, not a dictionary lookup or a Python
# int. Every field is public, so engine.client.producer (plain Python) reads and sets them
# as attributes; the methods are cpdef, so it calls them too.

cimport cython


@cython.final
cdef class TopicState:
    cdef public object full
    cdef public bint resolved
    cdef public Batch pending
    cdef public object stream
    cdef public object name
    cdef public object stream_id
    cdef public object topic_id
    cdef public Py_ssize_t partitions
    cdef public Py_ssize_t max_bytes
    cdef public int ts_type
    cdef public object codec
    cdef public list open
    cdef public Py_ssize_t sticky
    cdef public Batch sticky_batch


@cython.final
cdef class Batch:
    cdef public Accumulator producer
    cdef public TopicState topic
    cdef public Py_ssize_t partition
    cdef public list values
    cdef public list keys
    cdef public list headers
    cdef public list stamps
    cdef public Py_ssize_t nbytes
    cdef public double created
    cdef public bint resolved
    cdef public object offset
    cdef public object error
    cdef public list callbacks
    cdef public bint finished
    cdef public object append_ts
    cdef public object ids
    cdef public object moved
    cdef public object encoded

    @cython.locals(index=Py_ssize_t)
    cpdef Py_ssize_t add(self, value, key, headers, timestamp_ms) except -1


@cython.final
@cython.freelist(1024)
cdef class FutureRecordMetadata:
    cdef readonly Batch _queued_in
    cdef readonly Py_ssize_t _queued_at


@cython.locals(f=FutureRecordMetadata)
cpdef FutureRecordMetadata future(Batch b, Py_ssize_t index)


@cython.final
@cython.freelist(1024)
cdef class DoneFuture:
    cdef readonly object _topic
    cdef readonly Py_ssize_t _partition
    cdef readonly object _timestamp


@cython.locals(f=DoneFuture)
cpdef DoneFuture done(topic, Py_ssize_t partition, timestamp_ms)


cdef class Accumulator:
    cdef public object _lock
    cdef public object _wake
    cdef public object _space
    cdef public object _finished
    cdef public dict _topics
    cdef public list _batches
    cdef public Py_ssize_t _buffered
    cdef public Py_ssize_t _buffer_memory
    cdef public double _max_block_s
    cdef public bint _urgent
    cdef public bint _closing
    cdef public bint _serializing
    cdef public object _key_serializer
    cdef public object _value_serializer
    cdef public object _partitioner
    cdef public object _coordinator
    cdef public bint _txn_ready
    cdef public bint _in_txn
    cdef public object _now_ms
    cdef public bint _system_clock
    cdef public object _lock_held
    cdef public object acks
    cdef public Py_ssize_t batch_size

    @cython.locals(ts=TopicState, b=Batch, size=Py_ssize_t, index=Py_ssize_t)
    cpdef send(self, topic, value=*, key=*, partition=*, headers=*, timestamp_ms=*)
    @cython.locals(ts=TopicState, b=Batch, index=Py_ssize_t)
    cdef _queue_at_once(
        self, topic, value, key, partition, headers, timestamp_ms, Py_ssize_t size
    )
    cdef _future(self, TopicState ts, Batch b, Py_ssize_t index, timestamp_ms)
    @cython.locals(ns="long long")
    cdef _timestamp(self)
    @cython.locals(b=Batch, index=Py_ssize_t)
    cpdef FutureRecordMetadata _send_pending(
        self, TopicState ts, value, key, headers, timestamp_ms, Py_ssize_t size
    )
    cpdef Batch _next_sticky(self, TopicState ts)
    @cython.locals(b=Batch)
    cpdef Batch _new_batch(self, TopicState ts, Py_ssize_t partition)
    @cython.locals(ts=TopicState)
    cpdef _close_full(self, Batch b)
