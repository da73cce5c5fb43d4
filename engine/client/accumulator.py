# cython: annotation_typing=False
"""What `Producer.send` does for each message: the batches it fills and the futures it
hands out (engine.client.producer is the rest: topics, the sender thread, transactions).

This module is compiled by Cython when the package is built (setup.py): accumulator.pxd
gives its classes C fields, so a `send` reads its producer's, topic's and batch's state
without a dictionary lookup, and its body runs without the interpreter's loop. Where it is
not built, the same file runs as Python: one source either way, and the tests run both.
Type hints here are for mypy only (`annotation_typing=False` above): compiled, Cython
would enforce `partition: int | None` itself, with a TypeError where `send` raises the
engine's own errors.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from time import time_ns
from typing import Any

from engine import policies as policies_module
from engine.client.partitioner import partition_for_key
from engine.errors import (
    Closed,
    IllegalState,
    InvalidArgument,
    InvalidPartition,
    MessageTooLarge,
    Timeout,
)
from engine.records import LOG_APPEND_TIME, RecordMetadata
from engine.storage import batch as batch_codec
from engine.storage.catalog import StreamRow

log = logging.getLogger("engine.client.producer")  # its messages are the producer's

# Headers per message. Their bytes count in max_message_bytes, but a header costs more than
# its bytes (an empty one still makes an entry to store and show), so the count is bounded
# too; no real use comes near it (Kafka's own clients add a handful).
MAX_HEADERS = 1000


def compiled() -> bool:
    """Whether this module runs compiled (the package was built): a compiled function is
    not a Python function."""
    return type(compiled).__name__ != "function"


_COMPILED = compiled()


class TopicState:
    """What `send` needs to know of a topic, cached per name as the caller wrote it.

    A name not looked up yet (`resolved` False: an auto-created stream's topic, new to this
    producer) has no partitions yet: its messages wait in `pending`, one batch whose
    partitions the sender chooses once it has looked up (or created) the topic together
    with the other new names of its cycle (`Producer._resolve_topics`). Until then
    `max_bytes`, `ts_type` are its stream's and `stream` is that stream's row."""

    __slots__ = (
        "full",
        "resolved",
        "pending",
        "stream",
        "name",
        "stream_id",
        "topic_id",
        "partitions",
        "max_bytes",
        "ts_type",
        "codec",
        "open",
        "sticky",
        "sticky_batch",
    )

    def __init__(
        self,
        full: str,
        stream_id: int,
        topic_id: int | None,
        partitions: int,
        max_bytes: int,
        ts_type: int,
        codec: str | None = None,
        stream: StreamRow | None = None,
    ) -> None:
        self.full = full
        self.resolved = stream is None
        self.pending: Batch | None = None  # open batch of an unresolved name
        self.stream = stream
        self.name = full.rpartition(":")[2]
        self.stream_id = stream_id
        self.topic_id = topic_id  # None until the sender has created the topic
        self.partitions = partitions
        self.max_bytes = max_bytes
        self.ts_type = ts_type
        self.codec = codec  # the topic's own `compression`; None: its stream's
        self.open: list[Batch | None] = [None] * partitions  # open batch per partition
        self.sticky = -1  # partition of unkeyed messages, moves on when its batch closes
        self.sticky_batch: Batch | None = None


class Batch:
    """Messages of one partition collected by `send`, written by the sender as one blob.

    They are kept in columns, as the stored batch holds them (`encode_batch`): a value,
    key, headers and timestamp appended per `send`, and no object made per message.
    """

    __slots__ = (
        "producer",
        "topic",
        "partition",
        "values",
        "keys",
        "headers",
        "stamps",
        "nbytes",
        "created",
        "resolved",
        "offset",
        "error",
        "callbacks",
        "finished",
        "append_ts",
        "ids",
        "moved",
        "encoded",
    )

    def __init__(self, producer: Accumulator, topic: TopicState, partition: int) -> None:
        self.producer = producer
        self.topic = topic
        self.partition = partition
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []
        self.stamps: list[int] = []
        self.nbytes = 0
        self.created = time.monotonic()
        self.resolved = False
        self.offset = -1
        self.error: BaseException | None = None
        self.callbacks: list[tuple[int, Callable[..., Any], tuple[Any, ...], bool]] = []
        self.finished = False  # resolved and its callbacks have run (Producer._finished)
        self.append_ts = 0
        # an idempotent producer's batch, written alone: (producer id, epoch, base sequence)
        self.ids: tuple[int, int, int] | None = None
        # A batch of an unresolved topic whose messages the sender spread over several
        # partitions: where each message went, (batch, index); its futures follow it.
        self.moved: list[tuple[Batch, int]] | None = None
        # (payload, count, first and last timestamp): encoded by a flush ahead of the sender
        self.encoded: tuple[bytes, int, int, int] | None = None

    def add(
        self,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        timestamp_ms: int,
    ) -> int:
        """Append a message (its size is the caller's to count); returns its index."""
        index = len(self.values)
        self.values.append(value)
        self.keys.append(key)
        self.headers.append(headers)
        self.stamps.append(timestamp_ms)
        return index

    def records(self) -> Iterator[tuple[bytes | None, bytes | None, Any, int]]:
        """(value, key, headers, timestamp) of each message, in order."""
        return zip(self.values, self.keys, self.headers, self.stamps, strict=True)


class FutureRecordMetadata:
    """The outcome of one `send`: `get(timeout)` returns its `RecordMetadata` or raises.

    Callbacks follow kafka-python: `add_callback(f, *args)` calls `f(*args, metadata)`,
    `add_errback(f, *args)` calls `f(*args, exception)`; both run in the sender thread,
    before `flush()` returns.

    `send` makes one per message, so it is two fields and nothing else (`future`): the
    batch the message was queued in and its index there.
    """

    __slots__ = ("_queued_in", "_queued_at")

    _queued_in: Batch
    _queued_at: int

    @property
    def _batch(self) -> Batch:
        b = self._queued_in
        return b if b.moved is None else b.moved[self._queued_at][0]

    @property
    def _index(self) -> int:
        b = self._queued_in
        index: int = self._queued_at if b.moved is None else b.moved[self._queued_at][1]
        return index

    def _metadata(self) -> RecordMetadata:
        b = self._batch
        ts = b.append_ts if b.topic.ts_type == LOG_APPEND_TIME else b.stamps[self._index]
        offset = -1 if b.offset < 0 else b.offset + self._index
        return RecordMetadata(b.topic.full, b.partition, offset, ts)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        b = self._batch
        if not b.finished and not b.producer._wait_finished([b], timeout):
            raise Timeout(f"no answer for this message within {timeout} s")
        if self._batch.error is not None:
            raise self._batch.error
        return self._metadata()

    @property
    def is_done(self) -> bool:  # an attribute in kafka-python, not a method
        return self._batch.resolved

    def succeeded(self) -> bool:
        return self._batch.resolved and self._batch.error is None

    def failed(self) -> bool:
        return self._batch.resolved and self._batch.error is not None

    @property
    def exception(self) -> BaseException | None:
        return self._batch.error

    @property
    def value(self) -> RecordMetadata | None:
        return self._metadata() if self.succeeded() else None

    def add_callback(self, f: Callable[..., Any], *args: Any) -> FutureRecordMetadata:
        self._add(f, args, errback=False)
        return self

    def add_errback(self, f: Callable[..., Any], *args: Any) -> FutureRecordMetadata:
        self._add(f, args, errback=True)
        return self

    def add_both(self, f: Callable[..., Any], *args: Any) -> FutureRecordMetadata:
        self.add_callback(f, *args)
        self.add_errback(f, *args)
        return self

    def _add(self, f: Callable[..., Any], args: tuple[Any, ...], errback: bool) -> None:
        b = self._batch
        with b.producer._lock:
            if not b.resolved:
                b.callbacks.append((self._index, f, args, errback))
                return
        call_back(self, f, args, errback)


def future(b: Batch, index: int) -> FutureRecordMetadata:
    """The future of message `index` of batch `b`: made without `__init__`, which would cost
    a call with arguments to parse."""
    f = FutureRecordMetadata.__new__(FutureRecordMetadata)
    f._queued_in = b
    f._queued_at = index
    return f


def call_back(
    future: FutureRecordMetadata, f: Callable[..., Any], args: tuple[Any, ...], errback: bool
) -> None:
    b = future._batch
    try:
        if errback:
            if b.error is not None:
                f(*args, b.error)
        elif b.error is None:
            f(*args, future._metadata())
    except Exception:  # a failing callback must not stop the sender or other callbacks
        log.exception("producer callback %r failed", f)


class DoneFuture:
    """The future of an acks=0 send: resolved at once, offset -1 (as in kafka-python).

    Three fields made without `__init__` (`done`), for the same reason as
    FutureRecordMetadata: acks=0 is chosen for speed, so its future must cost no more than
    the other one."""

    __slots__ = ("_topic", "_partition", "_timestamp")

    _topic: str
    _partition: int
    _timestamp: int

    def get(self, timeout: float | None = None) -> RecordMetadata:
        return RecordMetadata(self._topic, self._partition, -1, self._timestamp)

    is_done = True
    exception = None

    def succeeded(self) -> bool:
        return True

    def failed(self) -> bool:
        return False

    @property
    def value(self) -> RecordMetadata:
        return self.get()

    def add_callback(self, f: Callable[..., Any], *args: Any) -> DoneFuture:
        try:
            f(*args, self.get())
        except Exception:
            log.exception("producer callback %r failed", f)
        return self

    def add_errback(self, f: Callable[..., Any], *args: Any) -> DoneFuture:
        return self

    def add_both(self, f: Callable[..., Any], *args: Any) -> DoneFuture:
        return self.add_callback(f, *args)


def done(topic: str, partition: int, timestamp_ms: int) -> DoneFuture:
    """The future of an acks=0 send to `partition` of `topic` (`timestamp_ms` -1 for
    log-append time, not known yet: as kafka-python reports it)."""
    f = DoneFuture.__new__(DoneFuture)
    f._topic = topic
    f._partition = partition
    f._timestamp = timestamp_ms
    return f


def encode_batch(b: Batch, log_append_ms: int | None = None) -> tuple[bytes, int, int, int]:
    """A batch's stored payload, its count and its first and last timestamp (all of them
    `log_append_ms` on a log-append-time topic)."""
    count = len(b.values)
    keys = None if batch_codec.all_none(b.keys) else b.keys
    headers = None if batch_codec.all_none(b.headers) else b.headers
    stamps = b.stamps if log_append_ms is None else [log_append_ms] * count
    payload = batch_codec.encode(b.values, stamps, keys, headers)
    first, last = batch_codec.span(stamps)
    return payload, count, first, last


class Accumulator:
    """The half of `Producer` that `send` runs: the state it reads and the batches it
    opens and closes, under `_lock`, which the sender thread takes to collect them (or,
    compiled, without it while no thread holds it: `_queue_at_once`). `Producer.__init__`
    sets every field."""

    _lock: threading.Lock
    _wake: threading.Condition  # the sender waits on it
    _space: threading.Condition  # send() waits on it when the buffer is full
    _finished: threading.Condition  # futures and flush wait on it
    _topics: dict[str, TopicState]
    _batches: list[Batch]  # not yet taken by the sender, in creation order
    _buffered: int
    _buffer_memory: int
    _max_block_s: float
    _urgent: bool  # a full batch, a flush or a close: skip the linger
    _closing: bool
    _serializing: bool
    _key_serializer: Callable[[Any], bytes] | None
    _value_serializer: Callable[[Any], bytes] | None
    _partitioner: Callable[..., int] | None
    _coordinator: Any  # engine.client.transactions.Transactions of a transactional producer
    _txn_ready: bool  # init_transactions() done
    _in_txn: bool
    _now_ms: Callable[[], int]
    _system_clock: bool  # _now_ms is engine.clock.SystemClock's
    _lock_held: Callable[[], bool]  # _lock.locked
    acks: int | str
    batch_size: int

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata | DoneFuture:
        """Queue one message; returns a future of its `RecordMetadata`.

        This is the hot path: keep it to argument checks and a few list operations.
        """
        if self._coordinator is not None and not self._in_txn:
            self._not_in_transaction()
        if self._serializing:
            value, key = self._serialize(value, key)
        if value.__class__ is not bytes and value is not None:
            value = as_bytes(value, "value")
        size = 0 if value is None else len(value)
        if key is not None:
            if key.__class__ is not bytes:
                key = as_bytes(key, "key")
            size += len(key)
        if headers:
            headers = check_headers(headers)
            size += headers_size(headers)
        else:
            headers = None
        if timestamp_ms is None:
            timestamp_ms = self._timestamp()
        elif (
            timestamp_ms.__class__ is not int
            or not 0 <= timestamp_ms <= batch_codec.MAX_TIMESTAMP_MS
        ):
            raise InvalidArgument(
                "timestamp_ms must be an int of epoch milliseconds from 0 to "
                f"{batch_codec.MAX_TIMESTAMP_MS} (the year 9999), got {policies_module.shown(timestamp_ms)}"
            )
        if _COMPILED and not self._lock_held():
            sent = self._queue_at_once(topic, value, key, partition, headers, timestamp_ms, size)
            if sent is not None:
                return sent
        # acquire/release: measured at about half the cost of `with` on this path
        lock = self._lock
        lock.acquire()
        try:
            ts: TopicState = self._topics.get(topic) or self._topic_state(topic, defer=True)
            if not ts.resolved:
                if partition is None and self._partitioner is None and self.acks != 0:
                    if size <= ts.max_bytes:  # the topic's own limit is checked at its lookup
                        return self._send_pending(ts, value, key, headers, timestamp_ms, size)
                # a partition, a partitioner or acks=0 need the topic now: look it up
                ts = self._topic_state(topic)
            if size > ts.max_bytes:
                raise MessageTooLarge(
                    f"message of {size:,} bytes (key, value and headers) is larger than "
                    f"max_message_bytes={ts.max_bytes:,} of {ts.full}"
                )
            b: Batch
            if partition is None:
                if key is None and self._partitioner is None:
                    b = ts.sticky_batch or self._next_sticky(ts)
                else:
                    partition = self._choose(ts, key)
                    b = ts.open[partition] or self._new_batch(ts, partition)
            elif partition.__class__ is int and 0 <= partition < ts.partitions:
                b = ts.open[partition] or self._new_batch(ts, partition)
            else:
                raise InvalidPartition(
                    f"topic {ts.full} has partitions 0 to {ts.partitions - 1}, not {partition!r}"
                )
            index = b.add(value, key, headers, timestamp_ms)
            b.nbytes += size
            if b.nbytes >= self.batch_size:
                self._close_full(b)
            return self._future(ts, b, index, timestamp_ms)
        finally:
            lock.release()

    def _queue_at_once(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: list[tuple[str, bytes | None]] | None,
        timestamp_ms: int,
        size: int,
    ) -> FutureRecordMetadata | DoneFuture | None:
        """Queue a message in a batch already open for it, without taking the lock: None
        when it needs more (a lookup, a new batch, a full one, a partitioner), which `send`
        then does under the lock.

        Only compiled, and only called while no thread holds the lock: from the lookup to
        the append, this runs no Python code, so no other thread can run (the GIL is not
        let go) and none can be inside the lock's sections, half-way through taking
        batches. Without it the lock costs a third of a send."""
        if topic.__class__ is not str:  # a str subclass may compare in Python
            return None
        ts: TopicState | None = self._topics.get(topic)
        if ts is None or not ts.resolved or size > ts.max_bytes:
            return None
        b: Batch | None
        if partition is None:
            if self._partitioner is not None:
                return None
            if key is None:
                b = ts.sticky_batch
            else:
                partition = partition_for_key(key, ts.partitions)
                if self._lock_held():  # the hash is a call: another thread may have run
                    return None
                b = ts.open[partition]
        elif partition.__class__ is int and 0 <= partition < ts.partitions:
            b = ts.open[partition]
        else:
            return None
        if b is None or b.nbytes + size >= self.batch_size:
            return None  # the full batch is closed under the lock
        index = b.add(value, key, headers, timestamp_ms)
        b.nbytes += size
        return self._future(ts, b, index, timestamp_ms)

    def _future(
        self, ts: TopicState, b: Batch, index: int, timestamp_ms: int
    ) -> FutureRecordMetadata | DoneFuture:
        """What `send` returns for message `index` of `b`."""
        if self.acks == 0:
            return done(ts.full, b.partition, -1 if ts.ts_type == LOG_APPEND_TIME else timestamp_ms)
        return future(b, index)

    def _timestamp(self) -> int:
        """Now, from the cluster's clock: the system clock's without a call into Python (it
        was a fifth of a send)."""
        if self._system_clock:
            ns = time_ns()
            return ns // 1_000_000
        return self._now_ms()

    def _topic_state(self, topic: str, defer: bool = False) -> TopicState:
        """The producer looks topics up (lock held): `Producer._topic_state`."""
        raise NotImplementedError

    def _not_in_transaction(self) -> None:
        raise IllegalState(
            "a transactional producer sends inside a transaction: call "
            + ("begin_transaction()" if self._txn_ready else "init_transactions() first")
        )

    def _send_pending(
        self,
        ts: TopicState,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        timestamp_ms: int,
        size: int,
    ) -> FutureRecordMetadata:
        """Queue a message of a topic not looked up yet (lock held): its partition is
        chosen by the sender (`Producer._place_pending`)."""
        b = ts.pending or self._new_batch(ts, -1)
        index = b.add(value, key, headers, timestamp_ms)
        b.nbytes += size
        if b.nbytes >= self.batch_size:
            self._close_full(b)
        return future(b, index)

    def _serialize(self, value: Any, key: Any) -> tuple[Any, Any]:
        if self._value_serializer is not None and value is not None:
            value = self._value_serializer(value)
        if self._key_serializer is not None and key is not None:
            key = self._key_serializer(key)
        return value, key

    def _choose(self, ts: TopicState, key: bytes | None) -> int:
        if self._partitioner is None:
            assert key is not None  # send takes the sticky batch for a None key
            return partition_for_key(key, ts.partitions)
        every = list(range(ts.partitions))
        partition = self._partitioner(key, every, every)
        if type(partition) is not int or not 0 <= partition < ts.partitions:
            raise InvalidPartition(f"the partitioner chose {partition!r} for {ts.full}")
        return partition

    def _next_sticky(self, ts: TopicState) -> Batch:
        """Unkeyed messages stick to one partition per batch, then move on (lock held)."""
        ts.sticky = (ts.sticky + 1) % ts.partitions
        b = ts.sticky_batch = ts.open[ts.sticky] or self._new_batch(ts, ts.sticky)
        return b

    def _new_batch(self, ts: TopicState, partition: int) -> Batch:
        """Open a batch for a partition, or (-1) the pending batch of a topic not looked
        up yet (lock held); blocks while the buffer is full."""
        if self._closing:
            raise Closed("this producer is closed")
        if self._buffered > self._buffer_memory:
            self._wait_for_space()
        b = Batch(self, ts, partition)
        if partition < 0:
            ts.pending = b
        else:
            ts.open[partition] = b
        if not self._batches:
            self._wake.notify()
        self._batches.append(b)
        return b

    def _close_full(self, b: Batch) -> None:
        """A full batch takes no more messages; the sender writes it without lingering."""
        ts = b.topic
        if b.partition < 0:
            ts.pending = None
        else:
            ts.open[b.partition] = None
        if ts.sticky_batch is b:
            ts.sticky_batch = None
        self._buffered += b.nbytes
        self._urgent = True
        self._wake.notify()

    def _wait_for_space(self) -> None:
        deadline = time.monotonic() + self._max_block_s
        self._urgent = True
        self._wake.notify()
        while self._buffered > self._buffer_memory:
            left = deadline - time.monotonic()
            if left <= 0 or self._closing:
                raise Timeout(
                    f"the producer's buffer ({self._buffer_memory:,} bytes) stayed full for "
                    f"max_block_ms={int(self._max_block_s * 1000)}"
                )
            self._space.wait(left)

    def _wait_finished(self, batches: list[Batch], timeout: float | None) -> bool:
        """Wait until every batch of `batches` is finished; False on timeout.

        One condition for the whole producer rather than an Event per batch: a batch is
        made per partition and cycle, and an Event costs more than the messages in a
        small batch."""
        with self._finished:
            return self._finished.wait_for(lambda: all(b.finished for b in batches), timeout)


def as_bytes(data: Any, what: str) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise InvalidArgument(
        f"{what} must be bytes (or None), not {type(data).__name__}; give the producer a "
        f"{what}_serializer to send other types"
    )


def headers_size(headers: list[tuple[str, bytes | None]]) -> int:
    """What a message's headers count in max_message_bytes: names and values, in bytes."""
    return sum(len(k) + (len(v) if v else 0) for k, v in headers)


def check_headers(
    headers: Sequence[tuple[str, bytes | None]],
) -> list[tuple[str, bytes | None]]:
    checked: list[tuple[str, bytes | None]] = []
    try:
        for name, value in headers:
            if len(checked) >= MAX_HEADERS:  # refused as soon as one too many is seen
                raise InvalidArgument(
                    f"a message may carry at most {MAX_HEADERS:,} headers; this one has more"
                )
            if not isinstance(name, str):
                raise InvalidArgument(f"a header name must be a str, not {type(name).__name__}")
            try:
                encoded = len(name.encode())
            except UnicodeEncodeError:
                raise InvalidArgument(
                    f"header name {policies_module.shown(name)} is not valid Unicode text"
                ) from None
            if encoded > batch_codec.MAX_HEADER_NAME_BYTES:
                raise InvalidArgument(
                    f"a header name may be at most {batch_codec.MAX_HEADER_NAME_BYTES:,} bytes "
                    f"(UTF-8), not {encoded:,}"
                )
            if value is not None and type(value) is not bytes:
                value = as_bytes(value, f"header {name!r}")
            checked.append((name, value))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, InvalidArgument):
            raise
        raise InvalidArgument(f"headers must be a list of (str, bytes) pairs: {exc}") from exc
    return checked
