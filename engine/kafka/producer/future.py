"""What `KafkaProducer.send` returns (kafka-python's `kafka.producer.future`): a
`FutureRecordMetadata` that resolves to a `RecordMetadata`."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from engine import errors as engine_errors
from engine.kafka.errors import translate
from engine.kafka.future import call_user
from engine.records import TopicPartition

__all__ = ["FutureRecordMetadata", "RecordMetadata"]


class RecordMetadata(NamedTuple):
    """What `send()`'s future resolves to. `offset` is -1 with acks=0."""

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int
    log_start_offset: int
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


class FutureRecordMetadata(tuple[Any, ...]):
    """The outcome of one `send()`, like kafka-python's: `get(timeout)` returns a
    `RecordMetadata` or raises; `add_callback(f, *args)` calls `f(*args, metadata)` and
    `add_errback(f, *args)` calls `f(*args, exception)`, in the producer's sender thread
    (at once when the future is already resolved).

    A tuple (engine future or None, topic as written, key size, value size, header size,
    error of a send refused at once): `send` makes one per record, and a tuple is the
    cheapest object to build (`future(...)` builds one without `__init__`).
    """

    __slots__ = ()

    def _metadata(self, md: Any) -> RecordMetadata:
        _, topic, key_size, value_size, header_size, _ = self
        return RecordMetadata(
            topic,
            md.partition,
            TopicPartition(topic, md.partition),
            md.offset,
            md.timestamp,
            -1,
            None,
            key_size,
            value_size,
            header_size,
        )

    def _failure(self) -> BaseException | None:
        inner = self[0]
        if inner is None:
            error: BaseException | None = self[5]
            return error
        exc = inner.exception
        return None if exc is None else kafka_error(exc)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        inner = self[0]
        if inner is None:
            raise self[5]
        try:
            md = inner.get(timeout)
        except engine_errors.PartitionletError as exc:
            if isinstance(exc, engine_errors.Timeout) and not inner.is_done:
                raise translate(exc) from exc  # not this record's outcome: no caching
            raise kafka_error(exc) from exc
        return self._metadata(md)

    @property
    def is_done(self) -> bool:
        return self[0] is None or bool(self[0].is_done)

    @property
    def exception(self) -> BaseException | None:
        return self._failure() if self.is_done else None

    @property
    def value(self) -> RecordMetadata | None:
        inner = self[0]
        if inner is None or not inner.succeeded():
            return None
        return self._metadata(inner.value)

    def succeeded(self) -> bool:
        return self[0] is not None and self[0].succeeded()

    def failed(self) -> bool:
        return self[0] is None or self[0].failed()

    def retriable(self) -> bool:
        return bool(getattr(self.exception, "retriable", False))

    def add_callback(self, f: Callable[..., Any], *args: Any) -> FutureRecordMetadata:
        if self[0] is not None:
            self[0].add_callback(self._succeeded, f, args)
        return self

    def add_errback(self, f: Callable[..., Any], *args: Any) -> FutureRecordMetadata:
        if self[0] is None:
            call_user(f, *args, self[5])
        else:
            self[0].add_errback(self._failed, f, args)
        return self

    def add_both(self, f: Callable[..., Any], *args: Any) -> FutureRecordMetadata:
        self.add_callback(f, *args)
        return self.add_errback(f, *args)

    def _succeeded(self, f: Callable[..., Any], args: tuple[Any, ...], md: Any) -> None:
        f(*args, self._metadata(md))

    def _failed(self, f: Callable[..., Any], args: tuple[Any, ...], exc: BaseException) -> None:
        f(*args, kafka_error(exc))


# future((engine future, topic, key size, value size, header size, error))
future = partial(tuple.__new__, FutureRecordMetadata)

# The facade error made for each engine error that failed a batch, kept as long as the
# engine error lives; a lock because errbacks run in the sender thread and `get()` in the
# program's.
_translations: weakref.WeakKeyDictionary[BaseException, BaseException] = weakref.WeakKeyDictionary()
_translations_lock = threading.Lock()


def kafka_error(exc: BaseException) -> BaseException:
    """The facade error of an engine error that failed a batch, made once per batch, so
    that every future of the batch, its errbacks and `get()` show the same object."""
    if not isinstance(exc, engine_errors.PartitionletError):
        return exc  # not the engine's (translate keeps it as it is)
    with _translations_lock:
        error = _translations.get(exc)
        if error is None:
            error = _translations[exc] = translate(exc)
        return error
