"""`KafkaProducer`: kafka-python's producer (`kafka.producer.kafka`) on the engine's
`Producer`.

The engine's producer does the batching, partitioning and writing; this class turns
kafka-python's settings into its arguments, topic names into full names, and its futures
and errors into kafka-python's.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any

from engine import errors as engine_errors
from engine.client.producer import Producer
from engine.kafka import bootstrap
from engine.kafka.config import (
    CONFIG_ERRORS,
    PRODUCER_IGNORED,
    PRODUCER_USED,
    configure,
    int_setting,
)
from engine.kafka.errors import (
    BrokerResponseError,
    IllegalStateError,
    KafkaConfigurationError,
    MessageSizeTooLargeError,
    translate,
    translated,
)
from engine.kafka.names import TopicNames
from engine.kafka.producer.future import FutureRecordMetadata, future
from engine.kafka.serializer import close_codec, codec, header_size
from engine.records import TopicPartition

__all__ = ["KafkaProducer"]


class KafkaProducer:
    """Sends records to topics of a Partitionlet cluster (kafka-python's `KafkaProducer`).

    Used settings: `acks` (0, 1, 'all' or -1; default 1), `linger_ms`, `batch_size`,
    `buffer_memory`, `max_block_ms`, `max_request_size`, `key_serializer`,
    `value_serializer`, `partitioner`, `transactional_id` and `transaction_timeout_ms`
    (a transactional producer: `init_transactions()` ... `commit_transaction()`),
    `enable_idempotence` (off unless given; it makes
    acks='all' unless acks is given, which must then be 'all'), `retries` (an idempotent producer's), plus
    `default_stream`; see docs/KAFKA.md.
    """

    def __init__(self, **configs: Any) -> None:
        config = configure("KafkaProducer", configs, PRODUCER_USED, PRODUCER_IGNORED)
        if config.get("transactional_id") is not None and config.get("enable_idempotence") is False:
            raise KafkaConfigurationError("Cannot set transactional_id without enable_idempotence.")
        if (config.get("enable_idempotence") or config.get("transactional_id")) and (
            "acks" not in config
        ):
            config["acks"] = "all"  # as kafka-python 3: idempotence asked for, acks left alone
        config.setdefault("acks", 1)
        config.setdefault("linger_ms", 0)
        config.setdefault("max_block_ms", 60000)
        config.setdefault("max_request_size", 1048576)
        self.config = config
        self._key_serializer = codec(config.get("key_serializer"), "serialize")
        self._value_serializer = codec(config.get("value_serializer"), "serialize")
        self._serializing = self._key_serializer is not None or self._value_serializer is not None
        self._max_request_size = int_setting(config, "max_request_size") or sys.maxsize
        kwargs: dict[str, Any] = {
            "acks": config["acks"],
            "linger_ms": int_setting(config, "linger_ms"),
            "max_block_ms": int_setting(config, "max_block_ms"),
            "partitioner": config.get("partitioner"),
        }
        for name in ("batch_size", "buffer_memory"):  # else the engine's own defaults
            if config.get(name) is not None:
                kwargs[name] = int_setting(config, name)
        if config.get("enable_idempotence") is not None:
            kwargs["enable_idempotence"] = bool(config["enable_idempotence"])
        if config.get("transactional_id") is not None:
            kwargs["transactional_id"] = config["transactional_id"]
            if config.get("transaction_timeout_ms") is not None:
                kwargs["transaction_timeout_ms"] = int_setting(config, "transaction_timeout_ms")
        retries = config.get("retries")
        if retries is not None and retries != float("inf"):  # kafka-python 3's default: inf
            kwargs["retries"] = int_setting(config, "retries")
        self._closed = True
        self._key, cluster = bootstrap.acquire(config["bootstrap_servers"])
        try:
            self._names = TopicNames(cluster, config.get("default_stream"))
            with translated(**CONFIG_ERRORS):
                self._producer = Producer(cluster, **kwargs)
        except BaseException:
            bootstrap.release(self._key, cluster)
            raise
        self._cluster = cluster
        self._closed = False
        # What metrics() reports, counted as records are accepted or refused.
        self._started = time.monotonic()
        self._sent = 0
        self._refused = 0
        self._bytes = 0
        self._largest = 0

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; returns a `FutureRecordMetadata`.

        As in kafka-python, what a broker would refuse (an unknown topic or partition, a
        message too large, an invalid topic name, a denied produce) fails the returned
        future; a closed producer, a buffer that stays full (`KafkaTimeoutError`) or a
        value that is not bytes without a serializer raise at once.
        """
        if self._closed:
            raise IllegalStateError("KafkaProducer already closed")
        if self._serializing:
            ks, vs = self._key_serializer, self._value_serializer
            if ks is not None and key is not None:
                key = ks(topic, headers, key)
            if vs is not None and value is not None:
                value = vs(topic, headers, value)
        # the hot path: no function call where a class check does
        if value is None:
            value_size = -1
        elif value.__class__ is bytes:
            value_size = len(value)
        else:
            value_size = _size_of(value, "value")
        if key is None:
            key_size = -1
        elif key.__class__ is bytes:
            key_size = len(key)
        else:
            key_size = _size_of(key, "key")
        headers_size = header_size(headers) if headers else -1
        full = self._names.known.get(topic)
        try:
            if full is None:
                full = self._names.full(topic)
            size = (
                (value_size if value_size > 0 else 0)
                + (key_size if key_size > 0 else 0)
                + (headers_size if headers_size > 0 else 0)
            )
            if size > self._max_request_size:
                self._refused += 1
                error: BaseException = MessageSizeTooLargeError(
                    f"the message is {size} bytes (key, value and headers), larger than "
                    f"max_request_size={self._max_request_size}"
                )
                return future((None, topic, key_size, value_size, headers_size, error))
            inner = self._producer.send(full, value, key, partition, headers, timestamp_ms)
        except engine_errors.PartitionletError as exc:
            error = translate(exc)
            if isinstance(error, BrokerResponseError):
                self._refused += 1
                return future((None, topic, key_size, value_size, headers_size, error))
            raise error from exc
        self._sent += 1
        self._bytes += size
        if size > self._largest:
            self._largest = size
        return future((inner, topic, key_size, value_size, headers_size, None))

    # --- transactions (kafka-python 3's names; engine.client.transactions) -------------------

    def init_transactions(self) -> None:
        """Fence every older producer of this transactional id and finish what it left."""
        with translated():
            self._producer.init_transactions()

    def begin_transaction(self) -> None:
        with translated():
            self._producer.begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict[Any, Any], consumer_group_id: Any) -> None:
        """Commit these offsets of the group with the transaction (`consumer_group_id`: the
        group id, or a consumer's `group_metadata()`)."""
        full = {
            TopicPartition(self._names.full(tp.topic), tp.partition): value
            for tp, value in offsets.items()
        }
        with translated():
            self._producer.send_offsets_to_transaction(full, consumer_group_id)

    def commit_transaction(self, timeout_ms: float | None = None) -> None:
        with translated():
            self._producer.commit_transaction(None if timeout_ms is None else timeout_ms / 1000)

    def abort_transaction(self, timeout_ms: float | None = None) -> None:
        with translated():
            self._producer.abort_transaction(None if timeout_ms is None else timeout_ms / 1000)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far is written and its callbacks have run."""
        with translated():
            self._producer.flush(timeout)

    def close(self, timeout: float | None = None, timeout_ms: float | None = None) -> None:
        """Write what is buffered (waiting at most `timeout` seconds, or `timeout_ms`
        milliseconds), then close."""
        if self._closed:
            return
        if timeout is None and timeout_ms is not None:
            timeout = timeout_ms / 1000
        if timeout is not None and not (isinstance(timeout, int | float) and timeout >= 0):
            raise ValueError(f"Invalid timeout: {timeout!r}")
        self._closed = True
        for f in (self.config.get("key_serializer"), self.config.get("value_serializer")):
            close_codec(f)
        try:
            with translated():
                self._producer.close(timeout)
        finally:
            if self._producer.wait_closed(0):
                bootstrap.release(self._key, self._cluster)
            else:
                # Still writing after the timeout: the shared cluster must stay open
                # until that is done, without holding up the program.
                threading.Thread(
                    target=self._release_when_written, name="plet-kafka-close", daemon=True
                ).start()

    def _release_when_written(self) -> None:
        self._producer.wait_closed()
        bootstrap.release(self._key, self._cluster)

    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of `topic`, creating it (as its first send would) when
        its stream auto-creates topics."""
        with translated():
            full = self._names.full(topic)
            try:
                return set(range(self._cluster.topic(full).partition_count))
            except engine_errors.UnknownTopic:
                stream = self._cluster.stream(full.rpartition(":")[0])
                if not stream.policies.get("auto_create", True):
                    raise
            with contextlib.suppress(engine_errors.TopicExists):
                self._cluster.create_topic(full)
            return set(range(self._cluster.topic(full).partition_count))

    def metrics(self, raw: bool = False) -> dict[str, dict[str, float]] | None:
        """kafka-python's `{group: {name: value}}` with the standard producer names, from
        what this producer counted; rates are per second since it was made (None when
        `metrics_enabled=False`, as in kafka-python)."""
        if self.config.get("metrics_enabled") is False:
            return None
        elapsed = max(time.monotonic() - self._started, 1e-9)
        sent, refused, nbytes = self._sent, self._refused, self._bytes
        return {
            "producer-metrics": {
                "record-send-total": float(sent),
                "record-send-rate": sent / elapsed,
                "record-error-total": float(refused),
                "record-error-rate": refused / elapsed,
                "record-retry-total": 0.0,
                "record-retry-rate": 0.0,
                "byte-total": float(nbytes),
                "byte-rate": nbytes / elapsed,
                "outgoing-byte-total": float(nbytes),
                "outgoing-byte-rate": nbytes / elapsed,
                "record-size-avg": nbytes / sent if sent else 0.0,
                "record-size-max": float(self._largest),
                "requests-in-flight": 0.0,
            }
        }

    def bootstrap_connected(self) -> bool:
        return not self._closed and not self._cluster.closed

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _size_of(data: Any, what: str) -> int:
    if isinstance(data, bytes | bytearray):
        return len(data)
    if isinstance(data, memoryview):
        return data.nbytes
    raise TypeError(
        f"the {what} must be bytes after serialization, not {type(data).__name__}; give the "
        f"producer a {what}_serializer"
    )
