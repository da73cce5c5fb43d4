"""The Kafka facade: the engine behind kafka-python's class names and keyword arguments.

A program written for kafka-python runs on a Partitionlet cluster once its import lines
say `engine.kafka` instead of `kafka`:

    from engine.kafka import KafkaProducer, KafkaConsumer, KafkaAdminClient, TopicPartition
    from engine.kafka.errors import KafkaError        # or: from engine.kafka import errors

- The cluster comes from `bootstrap_servers="file:///path/to/cluster"` (also inside a list
  or a comma-separated string). When `bootstrap_servers` holds broker addresses only
  (`host:port`, kafka-python's default included), the cluster directory comes from the
  `PLET_CLUSTER` environment variable; with neither, `NoBrokersAvailable` is raised. All
  clients of one process share one opened `Cluster` per directory, closed when the last
  of them closes.
- A topic name without a leading '/' lives in the stream named by `default_stream=`, else
  by `PLET_DEFAULT_STREAM`, else in `/kafka`, which is created on first use with default
  policies. Records, metadata and `TopicPartition`s handed back carry topic names the way
  the program wrote them.
- Settings that only mean something to a networked broker (security, SASL/SSL, socket
  sizes, retries, compression, ...) are accepted and ignored; an unknown keyword raises
  `KafkaConfigurationError`, as kafka-python does.
- Engine errors are raised as kafka-python's error classes (`engine.kafka.errors`), with
  the engine error as `__cause__`.

docs/KAFKA.md lists what maps to what and the differences from kafka-python.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

from engine import errors as engine_errors
from engine import names as engine_names
from engine.client.consumer import Consumer
from engine.client.consumer import ConsumerRebalanceListener as _EngineListener
from engine.client.producer import Producer
from engine.cluster import Cluster
from engine.kafka import errors as errors
from engine.kafka.errors import (
    BrokerResponseError,
    IllegalStateError,
    InvalidPartitionsError,
    KafkaConfigurationError,
    KafkaError,
    MessageSizeTooLargeError,
    NoBrokersAvailable,
    NonEmptyGroupError,
    TopicAlreadyExistsError,
    UnsupportedVersionError,
    translate,
)
from engine.policies import MAX_PARTITIONS
from engine.records import OffsetAndMetadata as _EngineOffsetAndMetadata
from engine.records import TopicPartition

log = logging.getLogger(__name__)

__all__ = [
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "FutureRecordMetadata",
    "GroupInformation",
    "KafkaAdminClient",
    "KafkaConsumer",
    "KafkaProducer",
    "MemberInformation",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RangePartitionAssignor",
    "RecordMetadata",
    "RoundRobinPartitionAssignor",
    "StickyPartitionAssignor",
    "TopicPartition",
    "errors",
]

DEFAULT_STREAM = "/kafka"
ENV_CLUSTER = "PLET_CLUSTER"
ENV_DEFAULT_STREAM = "PLET_DEFAULT_STREAM"


# --- value types, with kafka-python's field names -----------------------------------------


class OffsetAndMetadata(NamedTuple):
    """A committed offset. `leader_epoch` (newer kafka-python) is always -1 here."""

    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


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


class ConsumerRecord(NamedTuple):
    """A record as the consumer returns it; sizes are -1 for a missing key, value or
    headers, as in kafka-python."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes]]
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int
    leader_epoch: int = -1


class MemberMetadata(NamedTuple):
    version: int
    subscription: list[str]
    user_data: bytes


class MemberAssignment(NamedTuple):
    version: int
    assignment: list[tuple[str, list[int]]]
    user_data: bytes

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for topic, parts in self.assignment for p in parts]


class MemberInformation(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    member_metadata: MemberMetadata
    member_assignment: MemberAssignment


class GroupInformation(NamedTuple):
    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberInformation]
    authorized_operations: Any


class NewTopic:
    """A topic for `KafkaAdminClient.create_topics`. -1 partitions takes the stream's
    `default_partitions`; the replication factor and topic configs are accepted and
    ignored (a stream's policies apply to all its topics)."""

    def __init__(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        replica_assignments: dict[int, list[int]] | None = None,
        topic_configs: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.replica_assignments = replica_assignments or {}
        self.topic_configs = topic_configs or {}

    def __repr__(self) -> str:
        return f"NewTopic(name={self.name!r}, num_partitions={self.num_partitions})"


class NewPartitions:
    """The new total partition count of a topic, for `create_partitions`."""

    def __init__(self, total_count: int, new_assignments: list[list[int]] | None = None):
        self.total_count = total_count
        self.new_assignments = new_assignments

    def __repr__(self) -> str:
        return f"NewPartitions(total_count={self.total_count})"


class CreateTopicsResponse(NamedTuple):
    topic_errors: list[tuple[str, int, str | None]]
    throttle_time_ms: int = 0


class DeleteTopicsResponse(NamedTuple):
    topic_error_codes: list[tuple[str, int]]
    throttle_time_ms: int = 0


class CreatePartitionsResponse(NamedTuple):
    topic_errors: list[tuple[str, int, str | None]]
    throttle_time_ms: int = 0


class ConsumerRebalanceListener(_EngineListener):
    """Subclass it and pass it to `subscribe(listener=...)`; both methods receive a list of
    `TopicPartition`s named as the program wrote them."""


class RangePartitionAssignor:
    name = "range"
    version = 0


class RoundRobinPartitionAssignor:
    name = "roundrobin"
    version = 0


class StickyPartitionAssignor:
    """Accepted in a list of strategies; the engine itself assigns by range or round-robin."""

    name = "sticky"
    version = 0


# --- configuration -----------------------------------------------------------------------

# Settings of every kafka-python client that only a networked broker needs: accepted,
# ignored (docs/KAFKA.md).
_IGNORED_COMMON = frozenset(
    {
        "client_id",
        "request_timeout_ms",
        "connections_max_idle_ms",
        "reconnect_backoff_ms",
        "reconnect_backoff_max_ms",
        "max_in_flight_requests_per_connection",
        "receive_buffer_bytes",
        "send_buffer_bytes",
        "socket_options",
        "sock_chunk_bytes",
        "sock_chunk_buffer_count",
        "retry_backoff_ms",
        "retry_backoff_max_ms",
        "metadata_max_age_ms",
        "security_protocol",
        "ssl_context",
        "ssl_check_hostname",
        "ssl_cafile",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_crlfile",
        "ssl_password",
        "ssl_ciphers",
        "api_version",
        "api_version_auto_timeout_ms",
        "selector",
        "sasl_mechanism",
        "sasl_plain_username",
        "sasl_plain_password",
        "sasl_kerberos_name",
        "sasl_kerberos_service_name",
        "sasl_kerberos_domain_name",
        "sasl_oauth_token_provider",
        "socks5_proxy",
        "metric_reporters",
        "metrics_enabled",
        "metrics_num_samples",
        "metrics_sample_window_ms",
        "kafka_client",
        "bootstrap_topics_filter",
    }
)
_EXTENSIONS = frozenset({"bootstrap_servers", "default_stream"})

_PRODUCER_USED = frozenset(
    {
        "key_serializer",
        "value_serializer",
        "acks",
        "batch_size",
        "linger_ms",
        "partitioner",
        "buffer_memory",
        "max_block_ms",
        "max_request_size",
    }
)
_PRODUCER_IGNORED = frozenset(
    {
        "compression_type",
        "retries",
        "enable_idempotence",
        "transactional_id",
        "transaction_timeout_ms",
        "delivery_timeout_ms",
        "allow_auto_create_topics",
    }
)
_CONSUMER_USED = frozenset(
    {
        "group_id",
        "key_deserializer",
        "value_deserializer",
        "auto_offset_reset",
        "enable_auto_commit",
        "auto_commit_interval_ms",
        "default_offset_commit_callback",
        "max_poll_records",
        "max_poll_interval_ms",
        "consumer_timeout_ms",
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "partition_assignment_strategy",
    }
)
_CONSUMER_IGNORED = frozenset(
    {
        "fetch_min_bytes",
        "fetch_max_wait_ms",
        "fetch_max_bytes",
        "max_partition_fetch_bytes",
        "check_crcs",
        "exclude_internal_topics",
        "metric_group_prefix",
        "legacy_iterator",
        "isolation_level",
        "allow_auto_create_topics",
        "group_instance_id",
        "enable_incremental_fetch_sessions",
        "leave_group_on_close",
    }
)

_client_ids = itertools.count(1)


def _configure(
    kind: str, configs: dict[str, Any], used: frozenset[str], ignored: frozenset[str]
) -> dict[str, Any]:
    unknown = set(configs) - used - ignored - _IGNORED_COMMON - _EXTENSIONS
    if unknown:
        raise KafkaConfigurationError(
            f"Unrecognized configs for {kind}: {', '.join(sorted(unknown))}"
        )
    config = dict(configs)
    config.setdefault("bootstrap_servers", "localhost")
    config.setdefault("client_id", f"partitionlet-{kind.lower()}-{next(_client_ids)}")
    return config


def _int_setting(config: dict[str, Any], name: str) -> int | None:
    value = config.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise KafkaConfigurationError(f"{name} must be an integer, got {value!r}")
    return int(value)


# --- the shared cluster per directory ----------------------------------------------------

_clusters: dict[str, list[Any]] = {}  # real path -> [Cluster, number of clients]
_clusters_lock = threading.Lock()


def _servers(bootstrap_servers: Any) -> list[str]:
    if isinstance(bootstrap_servers, str):
        entries = bootstrap_servers.split(",")
    elif isinstance(bootstrap_servers, list | tuple | set | frozenset):
        entries = []
        for entry in bootstrap_servers:
            if not isinstance(entry, str):
                raise KafkaConfigurationError(
                    f"bootstrap_servers entries must be strings, got {entry!r}"
                )
            entries.extend(entry.split(","))
    else:
        raise KafkaConfigurationError(
            f"bootstrap_servers must be a string or a list of strings, got {bootstrap_servers!r}"
        )
    return [e.strip() for e in entries if e.strip()]


def _file_url_path(url: str) -> str:
    """'file:///abs/dir' -> '/abs/dir'; 'file:rel/dir' -> 'rel/dir'."""
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise KafkaConfigurationError(
            f"bootstrap server {url!r} names host {parsed.netloc!r}: write "
            "'file:///absolute/path/to/cluster' (three slashes) or 'file:relative/path'"
        )
    path = unquote(parsed.path)
    if not path:
        raise KafkaConfigurationError(f"bootstrap server {url!r} names no directory")
    return path


def cluster_path(bootstrap_servers: Any = "localhost") -> str:
    """The cluster directory named by `bootstrap_servers`, else by `PLET_CLUSTER`."""
    servers = _servers(bootstrap_servers)
    paths = {_file_url_path(s) for s in servers if s.lower().startswith("file:")}
    if len(paths) > 1:
        raise KafkaConfigurationError(
            f"bootstrap_servers names several clusters ({', '.join(sorted(paths))}); a client "
            "works on one"
        )
    if paths:
        return paths.pop()
    env = os.environ.get(ENV_CLUSTER, "").strip()
    if env:
        return _file_url_path(env) if env.lower().startswith("file:") else env
    raise NoBrokersAvailable(
        f"bootstrap_servers={bootstrap_servers!r} names no Partitionlet cluster: pass "
        f"bootstrap_servers='file:///path/to/cluster' or set {ENV_CLUSTER}=/path/to/cluster"
    )


def _acquire(bootstrap_servers: Any) -> tuple[str, Cluster]:
    path = cluster_path(bootstrap_servers)
    if not os.path.isdir(path):
        raise NoBrokersAvailable(
            f"no Partitionlet cluster at {path}: the directory does not exist (create it "
            f"with `plet init --cluster {path}` or engine.Cluster.open)"
        )
    key = os.path.realpath(path)
    with _clusters_lock:
        entry = _clusters.get(key)
        if entry is None or entry[0].closed:
            try:
                cluster = Cluster.open(key)
            except engine_errors.PartitionletError as exc:
                raise NoBrokersAvailable(f"cannot open the cluster at {path}: {exc}") from exc
            entry = _clusters[key] = [cluster, 0]
        entry[1] += 1
        return key, entry[0]


def _release(key: str, cluster: Cluster) -> None:
    with _clusters_lock:
        entry = _clusters.get(key)
        if entry is None or entry[0] is not cluster:
            return  # the shared cluster was closed under its clients and opened anew
        entry[1] -= 1
        if entry[1] <= 0:
            del _clusters[key]
            entry[0].close()


@contextlib.contextmanager
def _translated(**overrides: type[KafkaError]) -> Iterator[None]:
    """Raise engine errors as the facade's error classes (the engine error as cause)."""
    try:
        yield
    except engine_errors.PartitionletError as exc:
        raise translate(exc, **overrides) from exc


_CONFIG_ERRORS = {
    "InvalidArgument": KafkaConfigurationError,
    "InvalidName": KafkaConfigurationError,
    "InvalidOffset": KafkaConfigurationError,
}


# --- topic names: the program's spelling <-> full names ----------------------------------


class _Names:
    """Resolves the topic names a program writes and shows full names back its way."""

    def __init__(self, cluster: Cluster, default_stream: str | None) -> None:
        stream = default_stream or os.environ.get(ENV_DEFAULT_STREAM, "").strip() or None
        self.implicit = stream is None  # the stream is /kafka, created on first use
        self.stream = stream or DEFAULT_STREAM
        try:
            engine_names.validate_stream_path(self.stream)
        except engine_errors.InvalidName as exc:
            raise KafkaConfigurationError(f"default_stream: {exc}") from exc
        self._cluster = cluster
        self._ready = not self.implicit
        self.known: dict[str, str] = {}  # the program's name -> full name
        self._shown: dict[str, str] = {}  # full name -> the program's name, where not plain

    def ensure_stream(self) -> None:
        """Create /kafka when it is the default stream and does not exist yet."""
        if self._ready:
            return
        with _translated():
            try:
                self._cluster.stream(self.stream)
            except engine_errors.UnknownStream:
                with contextlib.suppress(engine_errors.StreamExists):
                    self._cluster.create_stream(self.stream)
        self._ready = True

    def full(self, name: Any) -> str:
        """The full name of a topic as the program wrote it; raises the engine's InvalidName."""
        full = self.known.get(name) if isinstance(name, str) else None
        if full is not None:
            return full
        full = engine_names.resolve(name, self.stream)
        if not name.startswith("/"):
            self.ensure_stream()
        elif full.rpartition(":")[0] == self.stream:
            self._shown[full] = name  # a full name in the default stream: keep it so
        if len(self.known) > 100_000:
            self.known.clear()
        self.known[name] = full
        return full

    def show(self, full: str) -> str:
        shown = self._shown.get(full)
        if shown is not None:
            return shown
        stream, _, topic = full.rpartition(":")
        return topic if stream == self.stream else full

    def tp(self, tp: Any) -> TopicPartition:
        if not isinstance(tp, tuple) or len(tp) != 2:
            raise errors.IllegalArgumentError(f"expected a TopicPartition, got {tp!r}")
        with _translated():
            return TopicPartition(self.full(tp[0]), tp[1])

    def show_tp(self, tp: TopicPartition) -> TopicPartition:
        return TopicPartition(self.show(tp.topic), tp.partition)

    def full_names_of_stream(self) -> list[str]:
        """Full names of the topics of the default stream (none if it does not exist)."""
        self.ensure_stream()
        try:
            return [t.name for t in self._cluster.topics(self.stream)]
        except engine_errors.UnknownStream:
            return []


def _call_user(f: Callable[..., Any], *args: Any) -> None:
    try:
        f(*args)
    except Exception:  # as in kafka-python: a failing callback is logged, not raised
        log.exception("callback %r failed", f)


def _serialize(f: Any, topic: str, data: Any) -> Any:
    if f is None or data is None:
        return data
    if hasattr(f, "serialize"):
        return f.serialize(topic, data)
    return f(data)


def _deserialize(f: Any, topic: str, data: Any) -> Any:
    if f is None or data is None:
        return data
    if hasattr(f, "deserialize"):
        return f.deserialize(topic, data)
    return f(data)


def _header_size(headers: Any) -> int:
    if not headers:
        return -1
    total = 0
    for name, value in headers:
        total += len(name.encode()) if isinstance(name, str) else 0
        total += len(value) if isinstance(value, bytes | bytearray) else 0
    return total


_consumer_record = partial(tuple.__new__, ConsumerRecord)


# --- producer ----------------------------------------------------------------------------


class FutureRecordMetadata(tuple):
    """The outcome of one `send()`, like kafka-python's: `get(timeout)` returns a
    `RecordMetadata` or raises; `add_callback(f, *args)` calls `f(*args, metadata)` and
    `add_errback(f, *args)` calls `f(*args, exception)`, in the producer's sender thread
    (at once when the future is already resolved).

    A tuple (engine future or None, topic as written, key size, value size, header size,
    error of a send refused at once): `send` makes one per record, and a tuple is the
    cheapest object to build.
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
        inner, error = self[0], self[5]
        if inner is None:
            return error
        exc = inner.exception
        return None if exc is None else _kafka_error(exc)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        inner = self[0]
        if inner is None:
            raise self[5]
        try:
            md = inner.get(timeout)
        except engine_errors.PartitionletError as exc:
            if isinstance(exc, engine_errors.Timeout) and not inner.is_done:
                raise translate(exc) from exc  # not this record's outcome: no caching
            raise _kafka_error(exc) from exc
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
            _call_user(f, *args, self[5])
        else:
            self[0].add_errback(self._failed, f, args)
        return self

    def add_both(self, f: Callable[..., Any], *args: Any) -> FutureRecordMetadata:
        self.add_callback(f, *args)
        return self.add_errback(f, *args)

    def _succeeded(self, f: Callable[..., Any], args: tuple, md: Any) -> None:
        f(*args, self._metadata(md))

    def _failed(self, f: Callable[..., Any], args: tuple, exc: BaseException) -> None:
        f(*args, _kafka_error(exc))


_future = partial(tuple.__new__, FutureRecordMetadata)


def _kafka_error(exc: BaseException) -> BaseException:
    """The facade error of an engine error that failed a batch, made once per batch, so
    that every future of the batch, its errbacks and `get()` show the same object."""
    error = getattr(exc, "_kafka_error", None)
    if error is None:
        error = translate(exc)
        with contextlib.suppress(AttributeError):
            exc._kafka_error = error  # type: ignore[attr-defined]
    return error


class KafkaProducer:
    """Sends records to topics of a Partitionlet cluster (kafka-python's `KafkaProducer`).

    Used settings: `acks` (0, 1, 'all' or -1; default 1), `linger_ms`, `batch_size`,
    `buffer_memory`, `max_block_ms`, `max_request_size`, `key_serializer`,
    `value_serializer`, `partitioner`, plus `default_stream`; see docs/KAFKA.md.
    """

    def __init__(self, **configs: Any) -> None:
        config = _configure("KafkaProducer", configs, _PRODUCER_USED, _PRODUCER_IGNORED)
        config.setdefault("acks", 1)
        config.setdefault("linger_ms", 0)
        config.setdefault("max_block_ms", 60000)
        config.setdefault("max_request_size", 1048576)
        self.config = config
        self._key_serializer = config.get("key_serializer")
        self._value_serializer = config.get("value_serializer")
        self._serializing = self._key_serializer is not None or self._value_serializer is not None
        self._max_request_size = _int_setting(config, "max_request_size") or sys.maxsize
        kwargs: dict[str, Any] = {
            "acks": config["acks"],
            "linger_ms": _int_setting(config, "linger_ms"),
            "max_block_ms": _int_setting(config, "max_block_ms"),
            "partitioner": config.get("partitioner"),
        }
        for name in ("batch_size", "buffer_memory"):  # else the engine's own defaults
            if config.get(name) is not None:
                kwargs[name] = _int_setting(config, name)
        self._closed = True
        self._key, cluster = _acquire(config["bootstrap_servers"])
        try:
            self._names = _Names(cluster, config.get("default_stream"))
            with _translated(**_CONFIG_ERRORS):
                self._producer = Producer(cluster, **kwargs)
        except BaseException:
            _release(self._key, cluster)
            raise
        self._cluster = cluster
        self._closed = False
        self._sent = 0
        self._refused = 0

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
            key = _serialize(self._key_serializer, topic, key)
            value = _serialize(self._value_serializer, topic, value)
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
        header_size = _header_size(headers) if headers else -1
        full = self._names.known.get(topic)
        try:
            if full is None:
                full = self._names.full(topic)
            size = (
                (value_size if value_size > 0 else 0)
                + (key_size if key_size > 0 else 0)
                + (header_size if header_size > 0 else 0)
            )
            if size > self._max_request_size:
                self._refused += 1
                error = MessageSizeTooLargeError(
                    f"the message is {size} bytes (key, value and headers), larger than "
                    f"max_request_size={self._max_request_size}"
                )
                return _future((None, topic, key_size, value_size, header_size, error))
            inner = self._producer.send(full, value, key, partition, headers, timestamp_ms)
        except engine_errors.PartitionletError as exc:
            error = translate(exc)
            if isinstance(error, BrokerResponseError):
                self._refused += 1
                return _future((None, topic, key_size, value_size, header_size, error))
            raise error from exc
        self._sent += 1
        return _future((inner, topic, key_size, value_size, header_size, None))

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far is written and its callbacks have run."""
        with _translated():
            self._producer.flush(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Write what is buffered (waiting at most `timeout` seconds), then close."""
        if self._closed:
            return
        self._closed = True
        try:
            with _translated():
                self._producer.close(timeout)
        finally:
            sender = getattr(self._producer, "_sender", None)
            if sender is not None and sender.is_alive():
                # Still writing after the timeout: close the shared cluster only after.
                threading.Thread(
                    target=_release_after,
                    args=(sender, self._key, self._cluster),
                    name="plet-kafka-close",
                    daemon=True,
                ).start()
            else:
                _release(self._key, self._cluster)

    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of `topic`, creating it (as its first send would) when
        its stream auto-creates topics."""
        with _translated():
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

    def metrics(self, raw: bool = False) -> dict[str, dict[str, float]]:
        """A few counters of this producer (kafka-python has many more)."""
        return {
            "producer-metrics": {
                "record-send-total": float(self._sent),
                "record-error-total": float(self._refused),
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


def _engine_offsets(
    names: _Names, offsets: dict[TopicPartition, Any]
) -> list[tuple[TopicPartition, _EngineOffsetAndMetadata]]:
    """(full-name tp, the engine's OffsetAndMetadata) per entry of `offsets`, whose values
    are OffsetAndMetadata (ours, the engine's or a plain tuple) or ints."""
    out = []
    for tp, value in offsets.items():
        if isinstance(value, tuple):
            offset, meta = value[0], value[1] if len(value) > 1 else ""
        else:
            offset, meta = value, ""
        out.append((names.tp(tp), _EngineOffsetAndMetadata(offset, meta or "")))
    return out


def _release_after(thread: threading.Thread, key: str, cluster: Cluster) -> None:
    thread.join()
    _release(key, cluster)


# --- consumer ----------------------------------------------------------------------------


def _strategy(value: Any) -> str:
    """The engine's strategy for kafka-python's `partition_assignment_strategy`: the first
    of the list that the engine implements (range or round-robin)."""
    items = value if isinstance(value, list | tuple) else [value]
    for item in items:
        name = getattr(item, "name", None) or getattr(item, "__name__", None) or item
        name = {"RangePartitionAssignor": "range", "RoundRobinPartitionAssignor": "roundrobin"}.get(
            name, name
        )
        if name in ("range", "roundrobin", "round_robin"):
            return "roundrobin" if name == "round_robin" else name
    raise KafkaConfigurationError(
        f"partition_assignment_strategy {value!r} names no strategy this engine implements "
        "(RangePartitionAssignor, RoundRobinPartitionAssignor)"
    )


class _ListenerAdapter:
    """Hands the engine's rebalance events to the program's listener, with its names."""

    def __init__(self, listener: Any, names: _Names) -> None:
        self._listener = listener
        self._names = names

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        self._listener.on_partitions_revoked(sorted(self._names.show_tp(tp) for tp in revoked))

    def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self._listener.on_partitions_assigned(sorted(self._names.show_tp(tp) for tp in assigned))


class _DoneFuture:
    """An already resolved future (`commit_async` commits before it returns)."""

    def __init__(self, value: Any = None, exception: BaseException | None = None) -> None:
        self.value = value
        self.exception = exception
        self.is_done = True

    def succeeded(self) -> bool:
        return self.exception is None

    def failed(self) -> bool:
        return self.exception is not None

    def retriable(self) -> bool:
        return bool(getattr(self.exception, "retriable", False))

    def get(self, timeout: float | None = None) -> Any:
        if self.exception is not None:
            raise self.exception
        return self.value

    def add_callback(self, f: Callable[..., Any], *args: Any) -> _DoneFuture:
        if self.exception is None:
            _call_user(f, *args, self.value)
        return self

    def add_errback(self, f: Callable[..., Any], *args: Any) -> _DoneFuture:
        if self.exception is not None:
            _call_user(f, *args, self.exception)
        return self

    def add_both(self, f: Callable[..., Any], *args: Any) -> _DoneFuture:
        self.add_callback(f, *args)
        return self.add_errback(f, *args)


class KafkaConsumer:
    """Reads records of a Partitionlet cluster (kafka-python's `KafkaConsumer`).

    `KafkaConsumer(*topics, **configs)` subscribes to `topics` at once. Used settings:
    `group_id`, `auto_offset_reset`, `enable_auto_commit`, `auto_commit_interval_ms`,
    `default_offset_commit_callback`, `max_poll_records`, `max_poll_interval_ms`,
    `consumer_timeout_ms` (default: iterate forever), `session_timeout_ms`,
    `heartbeat_interval_ms`, `partition_assignment_strategy`, `client_id`,
    `key_deserializer`, `value_deserializer`, plus `default_stream`; see docs/KAFKA.md.
    """

    def __init__(self, *topics: str, **configs: Any) -> None:
        config = _configure("KafkaConsumer", configs, _CONSUMER_USED, _CONSUMER_IGNORED)
        config.setdefault("group_id", None)
        config.setdefault("auto_offset_reset", "latest")
        config.setdefault("enable_auto_commit", True)
        config.setdefault("auto_commit_interval_ms", 5000)
        config.setdefault("max_poll_records", 500)
        config.setdefault("max_poll_interval_ms", 300000)
        config.setdefault("consumer_timeout_ms", float("inf"))
        config.setdefault("session_timeout_ms", 10000)
        config.setdefault("heartbeat_interval_ms", 3000)
        config.setdefault(
            "partition_assignment_strategy", (RangePartitionAssignor, RoundRobinPartitionAssignor)
        )
        self.config = config
        self._key_deserializer = config.get("key_deserializer")
        self._value_deserializer = config.get("value_deserializer")
        timeout = config["consumer_timeout_ms"]
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0
        ):
            raise KafkaConfigurationError(
                f"consumer_timeout_ms must be a number >= 0, got {timeout!r}"
            )
        kwargs: dict[str, Any] = {
            "group_id": config["group_id"],
            "auto_offset_reset": config["auto_offset_reset"],
            "enable_auto_commit": bool(config["enable_auto_commit"]),
            "consumer_timeout_ms": None if timeout is None or math.isinf(timeout) else timeout,
            "client_id": str(config["client_id"]),
            "partition_assignment_strategy": _strategy(config["partition_assignment_strategy"]),
        }
        for name in (
            "auto_commit_interval_ms",
            "max_poll_records",
            "max_poll_interval_ms",
            "session_timeout_ms",
            "heartbeat_interval_ms",
        ):
            kwargs[name] = _int_setting(config, name)
        self._closed = True
        self._key, cluster = _acquire(config["bootstrap_servers"])
        try:
            self._names = _Names(cluster, config.get("default_stream"))
            with _translated(**_CONFIG_ERRORS):
                self._consumer = Consumer(cluster, default_stream=self._names.stream, **kwargs)
        except BaseException:
            _release(self._key, cluster)
            raise
        self._cluster = cluster
        self._closed = False
        self._pattern: str | None = None
        self._consumed = 0
        if topics:
            try:
                self.subscribe(list(topics))
            except BaseException:
                self.close(autocommit=False)
                raise

    # --- subscriptions and assignment -----------------------------------------------------

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        """Join the group (with a `group_id`) and read its share of `topics`, or of the
        topics whose names match the regular expression `pattern` (matched from the start
        of the name, as kafka-python does; '/stream:regex' looks in another stream)."""
        if isinstance(topics, str):
            topics = [topics]
        with _translated():
            fulls = [self._names.full(t) for t in topics]
            engine_pattern = None
            if pattern is not None:
                if not isinstance(pattern, str):
                    pattern = getattr(pattern, "pattern", pattern)  # a compiled regex
                if pattern.startswith("/") and ":" in pattern:
                    stream, _, regex = pattern.partition(":")
                    engine_pattern = f"{stream}:(?:{regex}).*"
                else:
                    self._names.ensure_stream()
                    engine_pattern = f"(?:{pattern}).*"
            adapter = None if listener is None else _ListenerAdapter(listener, self._names)
            self._consumer.subscribe(fulls, pattern=engine_pattern, listener=adapter)
        self._pattern = pattern

    def unsubscribe(self) -> None:
        with _translated():
            self._consumer.unsubscribe()
        self._pattern = None

    def subscription(self) -> set[str] | None:
        """The subscribed topics (those matched so far for a pattern), or None."""
        subscribed = self._consumer.subscription()
        if subscribed:
            return {self._names.show(t) for t in subscribed}
        if self._pattern is not None:
            return {tp.topic for tp in self.assignment()}
        return None

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        tps = [self._names.tp(tp) for tp in partitions]
        with _translated():
            self._consumer.assign(tps)

    def assignment(self) -> set[TopicPartition]:
        return {self._names.show_tp(tp) for tp in self._consumer.assignment()}

    # --- reading --------------------------------------------------------------------------

    def _records(self, records: list[Any], topic: str) -> list[ConsumerRecord]:
        """The engine's records as kafka-python's, named `topic` (one comprehension: this
        runs once per record read)."""
        out = [
            _consumer_record((
                topic, partition, offset, ts, ts_type, key, value,
                list(headers) if headers else [], None,
                -1 if key is None else len(key),
                -1 if value is None else len(value),
                _header_size(headers) if headers else -1,
                -1,
            ))
            for _, partition, offset, ts, ts_type, key, value, headers in records
        ]  # fmt: skip
        kd, vd = self._key_deserializer, self._value_deserializer
        if kd is not None or vd is not None:
            out = [
                r._replace(key=_deserialize(kd, topic, r.key),
                           value=_deserialize(vd, topic, r.value))
                for r in out
            ]  # fmt: skip
        return out

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records of the assigned partitions, waiting up to `timeout_ms` for some.
        With `update_offsets=False` the positions stay where they were."""
        with _translated():
            batch = self._consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
            if not update_offsets:
                for tp, records in batch.items():
                    self._consumer.seek(tp, records[0].offset)
        out = {}
        for tp, records in batch.items():
            shown = self._names.show(tp.topic)
            out[TopicPartition(shown, tp.partition)] = self._records(records, shown)
            self._consumed += len(records)
        return out

    def __iter__(self) -> KafkaConsumer:
        return self

    def __next__(self) -> ConsumerRecord:
        try:
            r = next(self._consumer)
        except engine_errors.PartitionletError as exc:
            raise translate(exc) from exc
        self._consumed += 1
        return self._records([r], self._names.show(r.topic))[0]

    # --- positions ------------------------------------------------------------------------

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        tp = self._names.tp(partition)
        with _translated():
            return self._consumer.position(tp)

    def highwater(self, partition: TopicPartition) -> int | None:
        return self.end_offsets([partition]).get(partition)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        tp = self._names.tp(partition)
        with _translated():
            self._consumer.seek(tp, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        tps = [self._names.tp(tp) for tp in partitions]
        with _translated():
            self._consumer.seek_to_beginning(*tps)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        tps = [self._names.tp(tp) for tp in partitions]
        with _translated():
            self._consumer.seek_to_end(*tps)

    def pause(self, *partitions: TopicPartition) -> None:
        tps = [self._names.tp(tp) for tp in partitions]
        with _translated():
            self._consumer.pause(*tps)

    def resume(self, *partitions: TopicPartition) -> None:
        tps = [self._names.tp(tp) for tp in partitions]
        with _translated():
            self._consumer.resume(*tps)

    def paused(self) -> set[TopicPartition]:
        return {self._names.show_tp(tp) for tp in self._consumer.paused()}

    def _by_partition(
        self, partitions: Iterable[TopicPartition], ask: Callable[[list[TopicPartition]], dict]
    ) -> dict[TopicPartition, Any]:
        """`ask` the engine with full names; the answer keyed by the program's own tps."""
        given = list(partitions)
        fulls = [self._names.tp(tp) for tp in given]
        with _translated():
            answer = ask(fulls)
        return {tp: answer[full] for tp, full in zip(given, fulls, strict=True)}

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._by_partition(partitions, self._consumer.beginning_offsets)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._by_partition(partitions, self._consumer.end_offsets)

    def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the earliest offset whose timestamp is at or after the given one
        (None when there is none)."""
        given = dict(timestamps)
        found = self._by_partition(
            given,
            lambda fulls: self._consumer.offsets_for_times(
                dict(zip(fulls, given.values(), strict=True))
            ),
        )
        return {
            tp: None if o is None else OffsetAndTimestamp(o.offset, o.timestamp)
            for tp, o in found.items()
        }

    # --- committed offsets ----------------------------------------------------------------

    def committed(
        self, partition: TopicPartition, metadata: bool = False
    ) -> int | OffsetAndMetadata | None:
        """The group's committed offset (an `OffsetAndMetadata` with `metadata=True`)."""
        tp = self._names.tp(partition)
        with _translated():
            offset = self._consumer.committed(tp)
        if offset is None or not metadata:
            return offset
        return OffsetAndMetadata(offset, self._committed_metadata(tp))

    def _committed_metadata(self, tp: TopicPartition) -> str:
        group_id = self.config["group_id"]
        with contextlib.suppress(engine_errors.NotFound):
            for p in self._cluster.group(group_id).partitions:
                if p.topic == tp.topic and p.partition == tp.partition:
                    return p.metadata or ""
        return ""

    def commit(self, offsets: dict[TopicPartition, Any] | None = None) -> None:
        """Commit `offsets` ({TopicPartition: OffsetAndMetadata}), or the positions of all
        assigned partitions. Needs a `group_id`."""
        if self.config["group_id"] is None:
            raise IllegalStateError("commit() needs a group_id")
        converted = None if offsets is None else dict(_engine_offsets(self._names, offsets))
        with _translated():
            self._consumer.commit(converted)

    def commit_async(
        self,
        offsets: dict[TopicPartition, Any] | None = None,
        callback: Callable[[dict, Any], Any] | None = None,
    ) -> _DoneFuture:
        """Commit (synchronously, here), then call `callback(offsets, response_or_error)`
        (`default_offset_commit_callback` when no callback is given); returns a resolved
        future."""
        callback = callback or self.config.get("default_offset_commit_callback")
        try:
            self.commit(offsets)
        except KafkaError as exc:
            if callback is not None:
                _call_user(callback, offsets or {}, exc)
            return _DoneFuture(exception=exc)
        if offsets is None:
            offsets = {}
            for tp in self.assignment():
                offset = self.committed(tp)
                if offset is not None:
                    offsets[tp] = OffsetAndMetadata(offset, "")
        if callback is not None:
            _call_user(callback, offsets, None)
        return _DoneFuture(value=None)

    # --- metadata -------------------------------------------------------------------------

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partition numbers of `topic`, or None when it does not exist."""
        with _translated():
            full = self._names.full(topic)
            try:
                return set(range(self._cluster.topic(full).partition_count))
            except engine_errors.NotFound:
                return None

    def topics(self) -> set[str]:
        """The topics of the default stream (a cluster may hold millions of streams)."""
        with _translated():
            return {self._names.show(full) for full in self._names.full_names_of_stream()}

    def metrics(self, raw: bool = False) -> dict[str, dict[str, float]]:
        return {"consumer-fetch-manager-metrics": {"records-consumed-total": float(self._consumed)}}

    def bootstrap_connected(self) -> bool:
        return not self._closed and not self._cluster.closed

    def close(self, autocommit: bool = True) -> None:
        """Commit (when auto-commit is on and `autocommit`), leave the group, close."""
        if self._closed:
            return
        self._closed = True
        try:
            with _translated():
                self._consumer.close(autocommit=autocommit)
        finally:
            _release(self._key, self._cluster)

    def __enter__(self) -> KafkaConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- admin -------------------------------------------------------------------------------


def _raise_first(errors_seen: list[KafkaError], response: Any) -> None:
    if errors_seen:
        first = errors_seen[0]
        first.response = response  # type: ignore[attr-defined]
        raise first


def _error_entry(error: KafkaError) -> tuple[int, str]:
    return getattr(error, "errno", None) or -1, str(error.args[0]) if error.args else ""


class KafkaAdminClient:
    """Topic and group administration (kafka-python's `KafkaAdminClient`).

    Topic calls work on full names or, for plain names, on the default stream. The calls
    that change several topics try all of them and then raise the error of the first that
    failed (the error's `response` attribute holds the per-topic results), as a broker's
    answer would be turned into an exception by kafka-python.
    """

    def __init__(self, **configs: Any) -> None:
        config = _configure("KafkaAdminClient", configs, frozenset(), frozenset())
        self.config = config
        self._closed = True
        self._key, cluster = _acquire(config["bootstrap_servers"])
        try:
            self._names = _Names(cluster, config.get("default_stream"))
        except BaseException:
            _release(self._key, cluster)
            raise
        self._cluster = cluster
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _release(self._key, self._cluster)

    def __enter__(self) -> KafkaAdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("KafkaAdminClient is closed")

    # --- topics ---------------------------------------------------------------------------

    def create_topics(
        self,
        new_topics: Iterable[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> CreateTopicsResponse:
        """Create the topics (with `validate_only`, only check that they could be)."""
        self._check_open()
        results: list[tuple[str, int, str | None]] = []
        failed: list[KafkaError] = []
        for new in new_topics:
            try:
                self._create_topic(new, validate_only)
            except KafkaError as exc:
                failed.append(exc)
                results.append((new.name, *_error_entry(exc)))
            else:
                results.append((new.name, 0, None))
        response = CreateTopicsResponse(results)
        _raise_first(failed, response)
        return response

    def _create_topic(self, new: NewTopic, validate_only: bool) -> None:
        count = new.num_partitions
        if (count is None or count == -1) and new.replica_assignments:
            count = len(new.replica_assignments)
        if count is None or count == -1:
            count = None  # the stream's default_partitions
        elif (
            isinstance(count, bool)
            or not isinstance(count, int)
            or not (1 <= count <= MAX_PARTITIONS)
        ):
            raise InvalidPartitionsError(
                f"num_partitions of {new.name!r} must be from 1 to {MAX_PARTITIONS} "
                f"(or -1 for the stream's default), got {count!r}"
            )
        if new.topic_configs:
            log.info(
                "topic configs of %s ignored (policies are set per stream): %s",
                new.name,
                new.topic_configs,
            )
        with _translated(InvalidPartition=InvalidPartitionsError):
            full = self._names.full(new.name)
            if not validate_only:
                self._cluster.create_topic(full, count)
                return
            stream = self._cluster.stream(full.rpartition(":")[0])  # UnknownStream
            try:
                self._cluster.topic(full)
            except engine_errors.UnknownTopic:
                return
            raise TopicAlreadyExistsError(f"topic {full} exists already ({stream.path})")

    def delete_topics(
        self, topics: Iterable[str], timeout_ms: int | None = None
    ) -> DeleteTopicsResponse:
        self._check_open()
        results: list[tuple[str, int]] = []
        failed: list[KafkaError] = []
        for name in topics:
            try:
                with _translated():
                    self._cluster.delete_topic(self._names.full(name))
            except KafkaError as exc:
                failed.append(exc)
                results.append((name, _error_entry(exc)[0]))
            else:
                results.append((name, 0))
        response = DeleteTopicsResponse(results)
        _raise_first(failed, response)
        return response

    def list_topics(self) -> list[str]:
        """The topics of the default stream, by name."""
        self._check_open()
        with _translated():
            return [self._names.show(full) for full in self._names.full_names_of_stream()]

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Metadata of the topics (all of the default stream when None), as kafka-python's
        dicts; a topic that does not exist has `error_code` 3 and no partitions. The
        replica fields describe the one local copy (node 0)."""
        self._check_open()
        wanted = self.list_topics() if topics is None else list(topics)
        out = []
        for name in wanted:
            try:
                with _translated():
                    info = self._cluster.topic(self._names.full(name))
            except KafkaError as exc:
                out.append(
                    {
                        "error_code": _error_entry(exc)[0],
                        "topic": name,
                        "is_internal": False,
                        "partitions": [],
                    }
                )
                continue
            out.append(
                {
                    "error_code": 0,
                    "topic": name,
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition": p.partition,
                            "leader": 0,
                            "replicas": [0],
                            "isr": [0],
                            "offline_replicas": [],
                        }
                        for p in info.partitions
                    ],
                }
            )
        return out

    def create_partitions(
        self,
        topic_partitions: dict[str, NewPartitions],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> CreatePartitionsResponse:
        """Grow topics to `NewPartitions.total_count` partitions; as in Kafka, a count that
        is not larger than the current one raises `InvalidPartitionsError`."""
        self._check_open()
        results: list[tuple[str, int, str | None]] = []
        failed: list[KafkaError] = []
        for name, new in topic_partitions.items():
            total = getattr(new, "total_count", new)
            try:
                with _translated(InvalidPartition=InvalidPartitionsError):
                    full = self._names.full(name)
                    current = self._cluster.topic(full).partition_count
                    if isinstance(total, bool) or not isinstance(total, int) or total <= current:
                        raise InvalidPartitionsError(
                            f"topic {name} has {current} partitions; the new total must be "
                            f"larger, got {total!r}"
                        )
                    if not validate_only:
                        self._cluster.add_partitions(full, total)
            except KafkaError as exc:
                failed.append(exc)
                results.append((name, *_error_entry(exc)))
            else:
                results.append((name, 0, None))
        response = CreatePartitionsResponse(results)
        _raise_first(failed, response)
        return response

    def describe_cluster(self) -> dict[str, Any]:
        self._check_open()
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "cluster_id": self._cluster.id,
            "controller_id": 0,
            "brokers": [{"node_id": 0, "host": str(self._cluster.path), "port": 0, "rack": None}],
        }

    # --- consumer groups ------------------------------------------------------------------

    def list_consumer_groups(self, broker_ids: Any = None) -> list[tuple[str, str]]:
        """(group id, protocol type) of every group with members or committed offsets."""
        self._check_open()
        with _translated():
            return [(g.group_id, "consumer") for g in self._cluster.groups()]

    def describe_consumer_groups(
        self,
        group_ids: Iterable[str],
        group_coordinator_id: Any = None,
        include_authorized_operations: bool = False,
    ) -> list[GroupInformation]:
        """A `GroupInformation` per group; a group that does not exist is "Dead", as Kafka
        describes it."""
        self._check_open()
        out = []
        for group_id in group_ids:
            try:
                with _translated():
                    info = self._cluster.group(group_id)
            except errors.GroupIdNotFoundError:
                out.append(GroupInformation(0, group_id, "Dead", "", "", [], None))
                continue
            members = []
            for m in info.members:
                by_topic: dict[str, list[int]] = {}
                for tp in m.assignment:
                    by_topic.setdefault(self._names.show(tp.topic), []).append(tp.partition)
                assignment = [(t, sorted(ps)) for t, ps in sorted(by_topic.items())]
                members.append(
                    MemberInformation(
                        m.member_id,
                        m.client_id,
                        m.host,
                        MemberMetadata(0, sorted(by_topic), b""),
                        MemberAssignment(0, assignment, b""),
                    )
                )
            out.append(
                GroupInformation(
                    0, info.group_id, info.state, "consumer", info.protocol, members, None
                )
            )
        return out

    def list_consumer_group_offsets(
        self,
        group_id: str,
        group_coordinator_id: Any = None,
        partitions: Iterable[TopicPartition] | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets; with `partitions`, those partitions only (offset
        -1 where nothing is committed)."""
        self._check_open()
        try:
            with _translated():
                info = self._cluster.group(group_id)
            committed = {
                (p.topic, p.partition): OffsetAndMetadata(p.committed, p.metadata or "")
                for p in info.partitions
                if p.committed is not None
            }
        except errors.GroupIdNotFoundError:
            committed = {}
        if partitions is None:
            return {TopicPartition(self._names.show(t), p): o for (t, p), o in committed.items()}
        out = {}
        for tp in partitions:
            full = self._names.tp(tp)
            out[tp] = committed.get((full.topic, full.partition), OffsetAndMetadata(-1, ""))
        return out

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: dict[TopicPartition, Any], group_coordinator_id: Any = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Set the group's committed offsets; as in Kafka, only while the group has no
        live member (`NonEmptyGroupError` otherwise). Returns the offsets now committed."""
        self._check_open()
        with contextlib.suppress(errors.GroupIdNotFoundError), _translated():
            live = self._cluster.group(group_id).members
            if live:
                raise NonEmptyGroupError(
                    f"group {group_id!r} has {len(live)} live member(s); stop its consumers "
                    "before changing its offsets"
                )
        rows = _engine_offsets(self._names, offsets)
        with _translated():
            consumer = Consumer(self._cluster, group_id=group_id, enable_auto_commit=False)
            try:
                consumer.commit(dict(rows))
            finally:
                consumer.close(autocommit=False)
        return {
            tp: OffsetAndMetadata(row.offset, row.metadata)
            for tp, (_, row) in zip(offsets, rows, strict=True)
        }

    def _unsupported(self, what: str, instead: str) -> UnsupportedVersionError:
        return UnsupportedVersionError(f"{what} is not supported by Partitionlet: {instead}")

    def describe_configs(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported(
            "describe_configs", "settings are stream policies (Cluster.stream(path).policies)"
        )

    def alter_configs(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported(
            "alter_configs", "change stream policies with Cluster.edit_stream or plet"
        )

    def delete_consumer_groups(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported(
            "delete_consumer_groups", "the engine has no way to delete a group yet"
        )


# --- kafka-python's module names ---------------------------------------------------------
# `from engine.kafka.errors import KafkaError` (and .admin, .structs, .consumer, .producer)
# work like their kafka-python counterparts: engine.kafka is a module, not a package, so
# the import system finds these through sys.modules once engine.kafka is imported.


def _alias(name: str, doc: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(f"{__name__}.{name}", doc)
    module.__dict__.update(attrs)
    sys.modules[module.__name__] = module
    return module


sys.modules[f"{__name__}.errors"] = errors
admin = _alias(
    "admin",
    "kafka-python's kafka.admin names.",
    KafkaAdminClient=KafkaAdminClient,
    NewTopic=NewTopic,
    NewPartitions=NewPartitions,
)
structs = _alias(
    "structs",
    "kafka-python's kafka.structs names.",
    TopicPartition=TopicPartition,
    OffsetAndMetadata=OffsetAndMetadata,
    OffsetAndTimestamp=OffsetAndTimestamp,
    GroupInformation=GroupInformation,
    MemberInformation=MemberInformation,
)
consumer = _alias(
    "consumer",
    "kafka-python's kafka.consumer names.",
    KafkaConsumer=KafkaConsumer,
    ConsumerRebalanceListener=ConsumerRebalanceListener,
)
producer = _alias("producer", "kafka-python's kafka.producer names.", KafkaProducer=KafkaProducer)

# The error classes are also importable from engine.kafka itself.
_ERROR_CLASSES = {
    name: value
    for name, value in vars(errors).items()
    if isinstance(value, type) and issubclass(value, KafkaError)
}
globals().update(_ERROR_CLASSES)
__all__ += sorted(_ERROR_CLASSES)
