"""`Producer`: buffers messages per partition and writes them as record batches.

`send()` only checks its arguments, picks a partition and appends to that partition's open
batch; a sender thread drains the batches, encodes them (engine.storage.batch), appends them to
their partitionlets with one transaction per volume (engine.storage.appender) and resolves the
futures. That split is what lets one Python process send hundreds of thousands of messages
a second: the per-message work is a few list appends.

Durability (DESIGN, "Durability"): acks=0 resolves at once; acks=1 after the batch's commit
to the volume's WAL; acks="all" after a commit with synchronous=FULL (fsynced).

Idempotence (`enable_idempotence=True`, Kafka's): the producer gets a producer id from the
cluster at its first write and gives every batch its next sequence per partition; a write
that failed in a way that may have stored it (a full disk, a lock held too long) is tried
again up to `retries` times, and the volume recognises a batch it already holds
(engine.storage.volume), so a retry never writes a message twice. A batch that still fails
ends that producer id: the next batch gets a new one, as Kafka's producer bumps its epoch.

Thread-safety: `send`, `flush` and `close` may be called from any thread.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine import names
from engine import policies as policies_module
from engine.auth.principal import Principal
from engine.client.accumulator import MAX_HEADERS as MAX_HEADERS  # where importers find it
from engine.client.accumulator import (
    Accumulator,
    Batch,
    DoneFuture,
    FutureRecordMetadata,
    TopicState,
    as_bytes,
    call_back,
    check_headers,
    done,
    encode_batch,
    future,
)
from engine.client.partitioner import partition_for_key
from engine.clock import SystemClock
from engine.errors import (
    AccessDenied,
    IllegalState,
    InvalidArgument,
    InvalidPartition,
    InvalidRecordBatch,
    MessageTooLarge,
    PartitionletError,
    StorageError,
    Timeout,
    TryLater,
    UnknownStream,
    UnknownTopic,
)
from engine.log_once import LogOnce
from engine.records import CREATE_TIME, LOG_APPEND_TIME, RecordMetadata
from engine.storage import batch as batch_codec
from engine.storage import kafka_batch
from engine.storage.appender import Appender
from engine.storage.catalog import EnsuredTopic, StreamRow
from engine.storage.volume import BatchWrite

if TYPE_CHECKING:  # annotations only: the cluster module needs none of this one
    from engine.cluster import Cluster

log = logging.getLogger(__name__)
# Failed writes are the futures' to report; the log gets one line a minute per cause (a
# full disk fails every batch), not a line or a traceback per batch.
FAILURE_LOG_INTERVAL_S = 60.0
_failure_log = LogOnce(log, FAILURE_LOG_INTERVAL_S)

DEFAULT_BATCH_SIZE = 1024 * 1024  # bytes of values per partition batch
DEFAULT_BUFFER_MEMORY = 64 * 1024 * 1024
DEFAULT_MAX_BLOCK_MS = 60_000
DEFAULT_RETRIES = 5  # an idempotent producer's tries after a failed write
DEFAULT_RETRY_BACKOFF_MS = 100
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
_ACKS: dict[Any, int | str] = {0: 0, 1: 1, "all": "all", -1: "all", "0": 0, "1": 1, "-1": "all"}


def _ts_type(policies: dict[str, Any]) -> int:
    return LOG_APPEND_TIME if policies["timestamp_type"] == "log_append" else CREATE_TIME


def _log_failure(exc: BaseException) -> None:
    """Log a failed write once a minute per cause: an engine error (a full disk) in one
    line, anything else (a bug) with its traceback."""
    cause = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, PartitionletError):
        _failure_log(logging.ERROR, cause, "producer could not write batches: %s", cause)
    else:
        _failure_log(logging.ERROR, cause, "producer sender failed to write batches", exc_info=exc)


class Producer(Accumulator):
    """Sends messages to topics of one cluster (DESIGN, "Public API of engine")."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        acks: int | str = "all",
        linger_ms: int = 0,
        batch_size: int = DEFAULT_BATCH_SIZE,
        default_stream: str | None = None,
        partitioner: Callable[..., int] | None = None,
        key_serializer: Callable[[Any], bytes] | None = None,
        value_serializer: Callable[[Any], bytes] | None = None,
        principal: Principal | None = None,
        buffer_memory: int = DEFAULT_BUFFER_MEMORY,
        max_block_ms: int = DEFAULT_MAX_BLOCK_MS,
        enable_idempotence: bool = False,
        retries: int = DEFAULT_RETRIES,
        retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
    ) -> None:
        if acks not in _ACKS:
            raise InvalidArgument(f"acks must be 0, 1 or 'all', got {acks!r}")
        if transactional_id is not None:
            enable_idempotence = True  # as in Kafka: a transactional producer is idempotent
        if not isinstance(enable_idempotence, bool):
            raise InvalidArgument(
                f"enable_idempotence must be True or False, not {enable_idempotence!r}"
            )
        if enable_idempotence and _ACKS[acks] != "all":
            # Kafka's rule: a retry is only safe when the first try's outcome was durable
            raise InvalidArgument("enable_idempotence needs acks='all'")
        for name, value, low in (
            ("linger_ms", linger_ms, 0),
            ("batch_size", batch_size, 1),
            ("buffer_memory", buffer_memory, 1),
            ("max_block_ms", max_block_ms, 0),
            ("retries", retries, 0),
            ("retry_backoff_ms", retry_backoff_ms, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidArgument(f"{name} must be an integer >= {low}, got {value!r}")
        if default_stream is not None:
            names.validate_stream_path(default_stream)
        self._cluster = cluster
        # Message timestamps and LogAppendTime come from the cluster's clock. Waits on the
        # sender (linger, a full buffer) stay on real time: they end on a condition
        # variable, which a fake clock cannot wake.
        self._now_ms = cluster.clock.now_ms
        self._system_clock = type(cluster.clock) is SystemClock
        self.acks = _ACKS[acks]
        self.linger_ms = linger_ms
        # a C integer when compiled (engine.client.accumulator): more than any buffer holds
        self.batch_size = min(batch_size, sys.maxsize)
        self.default_stream = default_stream
        self.principal = principal or cluster.principal
        self._partitioner = partitioner
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._serializing = key_serializer is not None or value_serializer is not None
        self._buffer_memory = min(buffer_memory, sys.maxsize)
        self._max_block_s = max_block_ms / 1000
        self.enable_idempotence = enable_idempotence
        self.retries = retries if enable_idempotence else 0
        self.retry_backoff_ms = retry_backoff_ms
        # the sender's: (producer id, epoch) once issued, the next sequence per partition
        self._producer_id: tuple[int, int] | None = None
        self._sequences: dict[tuple[int, int], int] = {}
        # transactions (engine.client.transactions): None, or the id and its state
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._txn_ready = False  # init_transactions() done
        self._in_txn = False
        self._txn_partitions: set[tuple[int, int]] = set()  # joined the open transaction
        self._txn_error: BaseException | None = None  # a batch of it failed: abort only
        if transactional_id is not None:
            from engine.client.transactions import Transactions, check_settings

            check_settings(transactional_id, transaction_timeout_ms)
            self._coordinator: Transactions | None = Transactions(cluster)
        else:
            self._coordinator = None

        self._lock = threading.Lock()
        self._lock_held = self._lock.locked
        self._wake = threading.Condition(self._lock)  # the sender waits on it
        self._space = threading.Condition(self._lock)  # send() waits on it when full
        self._finished = threading.Condition()  # futures and flush wait on it
        self._topics: dict[str, TopicState] = {}
        self._streams: dict[str, StreamRow] = {}
        self._allowed: set[tuple[str, str]] = set()  # (stream path, ACE) passed
        self._simple: dict[int, bool] = {}  # stream id -> _may_defer
        self._batches: list[Batch] = []  # not yet taken by the sender, in creation order
        self._in_flight: list[Batch] = []
        self._encoding: list[Batch] = []  # taken by a flush to encode; the sender waits
        self._buffered = 0
        self._urgent = False  # a full batch, a flush or a close: skip the linger
        self._closing = False
        self._closed = False
        self._topology = cluster.catalog.topology_version()
        cluster.watch_metadata(self)  # tells us when it changes topics or policies
        self._sender = threading.Thread(target=self._run, name="plet-producer-sender", daemon=True)
        self._sender.start()
        # Like kafka-python: buffered messages are written when the interpreter exits.
        ref = weakref.ref(self)

        def close_at_exit() -> None:
            producer = ref()
            if producer is not None:
                producer.close(timeout=10)

        self._atexit = close_at_exit
        atexit.register(self._atexit)

    # --- sending --------------------------------------------------------------------------

    def send_batch(
        self,
        topic: str,
        partition: int,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
        timestamps_ms: Sequence[int] | None = None,
        *,
        idempotent: tuple[int, int, int] | None = None,
    ) -> FutureRecordMetadata | DoneFuture:
        """Queue a run of messages for one partition; returns the future of the first one's
        `RecordMetadata` (the others follow at consecutive offsets).

        The run is written in one stored batch, so it is all or nothing, as a produced
        Kafka record batch is: every message is checked before any is queued. `keys`,
        `headers` and `timestamps_ms`, when given, are parallel to `values`. This is how
        the wire listener appends a client's batch without a `send()` and a future per
        message.

        `idempotent` makes it an idempotent producer's batch, (producer id from
        `Cluster.init_producer_id`, epoch, base sequence): it is stored alone with those
        fields, and a resend of a batch the partition holds is not written again (the
        future gives the stored batch's offset). A sequence that does not follow the last
        one fails with `OutOfOrderSequence`, an older epoch with `InvalidProducerEpoch`.
        """
        if self._coordinator is not None and not self._in_txn:
            self._not_in_transaction()
        count = len(values)
        if not count:
            raise InvalidArgument("send_batch needs at least one message")
        for what, column in (
            ("keys", keys),
            ("headers", headers),
            ("timestamps_ms", timestamps_ms),
        ):
            if column is not None and len(column) != count:
                raise InvalidArgument(f"{what} has {len(column)} entries for {count} values")
        if self._serializing:
            pairs = [
                self._serialize(v, k) for v, k in zip(values, keys or [None] * count, strict=True)
            ]
            values = [v for v, _ in pairs]
            keys = [k for _, k in pairs] if keys is not None else None
        values = [v if v is None or v.__class__ is bytes else as_bytes(v, "value") for v in values]
        sizes = [0 if v is None else len(v) for v in values]
        if keys is None:
            keys = [None] * count
        else:
            keys = [k if k is None or k.__class__ is bytes else as_bytes(k, "key") for k in keys]
            sizes = [s if k is None else s + len(k) for s, k in zip(sizes, keys, strict=True)]
        checked: list[list[tuple[str, bytes | None]] | None]
        if headers is None or not any(headers):
            checked = [None] * count
        else:
            checked = [check_headers(h) if h else None for h in headers]
            sizes = [
                s + sum(len(k) + (len(v) if v else 0) for k, v in h) if h else s
                for s, h in zip(sizes, checked, strict=True)
            ]
        if timestamps_ms is None:
            stamps = [self._now_ms()] * count
        else:
            stamps = list(timestamps_ms)
            if not all(t.__class__ is int for t in stamps) or not (
                0 <= min(stamps) and max(stamps) <= batch_codec.MAX_TIMESTAMP_MS
            ):
                raise InvalidArgument(
                    "timestamps_ms must be ints of epoch milliseconds from 0 to "
                    f"{batch_codec.MAX_TIMESTAMP_MS} (the year 9999)"
                )
        size = max(sizes)
        with self._lock:
            ts = self._known_state(topic)
            if size > ts.max_bytes:
                raise MessageTooLarge(
                    f"message {sizes.index(size)} of the batch has {size:,} bytes (key, value "
                    f"and headers), more than max_message_bytes={ts.max_bytes:,} of the "
                    f"topic {ts.full}"
                )
            if partition.__class__ is not int or not 0 <= partition < ts.partitions:
                raise InvalidPartition(
                    f"topic {ts.full} has partitions 0 to {ts.partitions - 1}, not {partition!r}"
                )
            if idempotent is not None:
                # its own stored batch: what is merged with it must be its producer's
                before = ts.open[partition]
                if before is not None:
                    self._close_full(before)
                b = self._new_batch(ts, partition)
                b.ids = idempotent
            else:
                b = ts.open[partition] or self._new_batch(ts, partition)
            first = len(b.values)
            b.values.extend(values)
            b.keys.extend(keys)
            b.headers.extend(checked)
            b.stamps.extend(stamps)
            b.nbytes += sum(sizes)
            if b.nbytes >= self.batch_size or idempotent is not None:
                self._close_full(b)
            if self.acks == 0:
                return done(ts.full, partition, -1 if ts.ts_type == LOG_APPEND_TIME else stamps[0])
            return future(b, first)

    def send_record_batch(
        self,
        topic: str,
        partition: int,
        data: bytes,
        *,
        idempotent: tuple[int, int, int] | None = None,
    ) -> FutureRecordMetadata | DoneFuture:
        """Queue a Kafka record batch v2 (exactly `data`, as a Kafka client produced it)
        for one partition; returns the future of its first message's `RecordMetadata`.

        The batch is stored as it came, and a wire fetch serves it so, when it can be: not
        compressed, create time (the batch's and the topic's), no bigger than the topic's
        max_message_bytes, and headers and timestamps the engine's format holds
        (engine.storage.kafka_batch). Otherwise its records are queued as `send_batch`
        queues them. Either way it is all or nothing, one stored batch, and its records
        are read like any others. A batch that is not sound (its CRC, its layout, a control
        batch) raises `InvalidRecordBatch`. Records are bytes already: a producer with
        serializers refuses (`InvalidArgument`). `idempotent` is as for `send_batch`."""
        if self._coordinator is not None and not self._in_txn:
            self._not_in_transaction()
        if self._serializing:
            raise InvalidArgument("send_record_batch takes bytes: this producer has serializers")
        try:
            payload, summary = batch_codec.from_kafka(data)
        except Exception as exc:  # the record reader raises several kinds for a bad batch
            if kafka_batch.is_corrupt(exc):
                raise InvalidRecordBatch(f"not a valid record batch: {exc}") from None
            if not isinstance(exc, kafka_batch.NotStorable):
                raise
            return self._send_columns(topic, partition, data, idempotent)
        with self._lock:
            ts = self._known_state(topic)
            if ts.ts_type != LOG_APPEND_TIME and len(data) <= ts.max_bytes:
                return self._queue_encoded(ts, partition, payload, summary, idempotent)
        return self._send_columns(topic, partition, data, idempotent)

    def _queue_encoded(
        self,
        ts: TopicState,
        partition: int,
        payload: bytes,
        summary: kafka_batch.Summary,
        idempotent: tuple[int, int, int] | None,
    ) -> FutureRecordMetadata | DoneFuture:
        """Queue a stored batch's payload as a batch of its own (lock held)."""
        if partition.__class__ is not int or not 0 <= partition < ts.partitions:
            raise InvalidPartition(
                f"topic {ts.full} has partitions 0 to {ts.partitions - 1}, not {partition!r}"
            )
        before = ts.open[partition]  # what the partition collected goes first
        if before is not None:
            self._close_full(before)
        b = self._new_batch(ts, partition)
        b.ids = idempotent
        b.add(None, None, None, summary.timestamp)  # what its future reports
        b.encoded = (payload, summary.count, summary.first_ts, summary.max_ts)
        b.nbytes = len(payload)
        self._close_full(b)
        if self.acks == 0:
            return done(ts.full, partition, summary.timestamp)
        return future(b, 0)

    def _send_columns(
        self,
        topic: str,
        partition: int,
        data: bytes,
        idempotent: tuple[int, int, int] | None,
    ) -> FutureRecordMetadata | DoneFuture:
        """`send_record_batch` of a batch not stored as it came: its records, decoded."""
        values, keys, headers, stamps = kafka_batch.columns(data)
        return self.send_batch(
            topic, partition, values, keys, headers, stamps, idempotent=idempotent
        )

    def _topic_state(self, topic: str, defer: bool = False) -> TopicState:
        """Resolve `topic` (lock held). A topic to be auto-created is created later by the
        sender, many at a time, so a producer can create topics at a high rate. With
        `defer`, a name of a stream that auto-creates topics, which this producer may
        create, is not even looked up here: the sender looks up (or creates) all of a
        cycle's new names at once, which is what makes a topic cost about a row."""
        if topic.__class__ is str and topic.startswith("/"):
            full = topic
            stream_path, sep, name = full.rpartition(":")
            if sep and stream_path in self._streams:  # its path was checked: the name only
                names.validate_topic_name(name)
            else:
                stream_path, name = names.split_full_name(full)  # checks it, as resolve does
        else:
            full = names.resolve(topic, self.default_stream)
            stream_path, name = names.split_full_name(full)
        catalog = self._cluster.catalog
        stream = self._streams.get(stream_path)
        if stream is None:
            stream = catalog.stream(stream_path)
            # A catalog written before policies were checked may hold anything: a clear
            # error here rather than a TypeError in the middle of a send.
            checked = policies_module.check_stored(stream.path, stream.policies)
            stream = self._streams[stream_path] = dataclasses.replace(stream, policies=checked)
        self._check_access(stream, "produce_perm")
        policies = stream.policies
        if defer and policies["auto_create"] and self._may_defer(stream):
            state = TopicState(
                full, stream.id, None, 0, policies["max_message_bytes"], _ts_type(policies),
                stream=stream,
            )  # fmt: skip
            self._topics[topic] = state
            return state
        row = catalog.topic_or_none(stream.id, name)
        codec = None
        if row is not None and row.overrides:
            # the topic's own policies over its stream's (max_message_bytes, timestamp_type,
            # compression)
            policies = policies_module.check_stored(stream.path, policies, row.overrides, row.name)
            codec = policies["compression"]
        ts_type = _ts_type(policies)
        if row is None and policies["auto_create"]:
            self._cluster.authorize(
                stream,
                "topic_perm",
                self.principal,
                what="create topics (auto-create on produce) in",
            )
        if row is not None:
            state = TopicState(
                full,
                stream.id,
                row.id,
                row.partitions,
                policies["max_message_bytes"],
                ts_type,
                codec,
            )
        elif policies["auto_create"]:
            state = TopicState(
                full,
                stream.id,
                None,
                policies["default_partitions"],
                policies["max_message_bytes"],
                ts_type,
            )
        else:
            raise UnknownTopic(
                f"topic {full} does not exist and stream {stream_path} does not create "
                "topics on first produce (auto_create is off)"
            )
        self._topics[topic] = state
        return state

    def _known_state(self, topic: str) -> TopicState:
        """The state of `topic` with its partitions known (lock held)."""
        ts = self._topics.get(topic)
        return ts if ts is not None and ts.resolved else self._topic_state(topic)

    def _check_access(self, stream: StreamRow, perm: str) -> None:
        """`Cluster.authorize` for this producer's principal, remembered per stream until
        the metadata changes (`forget_metadata`), as the stream's row is."""
        if (stream.path, perm) not in self._allowed:
            self._cluster.authorize(stream, perm, self.principal)
            self._allowed.add((stream.path, perm))

    def _may_defer(self, stream: StreamRow) -> bool:
        """Whether a new name of `stream` may wait for the sender's lookup: when this
        producer may create topics there (its topic_perm) and no topic there has policies
        of its own, so what `send` checks now (max_message_bytes) is the stream's."""
        simple = self._simple.get(stream.id)
        if simple is None:
            try:
                self._check_access(stream, "topic_perm")
            except AccessDenied:
                simple = False  # the lookup at send says so, for a topic that does not exist
            else:
                simple = not self._cluster.catalog.has_overrides(stream.id)
            self._simple[stream.id] = simple
        return simple

    def _resolve_topics(self, appender: Appender, taken: list[Batch]) -> list[Batch]:
        """Look up or create the topics of these batches not known yet, one catalog
        transaction per stream for all of them, and place the messages of their pending
        batches in partitions. Returns the batches to write, in order (the appender learns
        the first partitionlets of the topics it creates: their first appends look nothing
        up)."""
        # name -> its states: one name may have two (a state dropped by forget_metadata
        # with a batch still pending, and the one made for the name since)
        pending: dict[int, dict[str, list[TopicState]]] = {}
        for b in taken:
            ts = b.topic
            if ts.topic_id is None:
                same = pending.setdefault(ts.stream_id, {}).setdefault(ts.name, [])
                if ts not in same:
                    same.append(ts)
        for stream_id, states in pending.items():
            first = next(iter(states.values()))[0]
            count = (
                first.partitions
                if first.stream is None
                else first.stream.policies["default_partitions"]
            )
            found = appender.ensure_topics(stream_id, sorted(states), count)
            with self._lock:
                for name, same in states.items():
                    row = found.get(name)
                    if row is None:
                        continue  # the stream was deleted: its batches fail below
                    for ts in same:
                        try:
                            self._learn(ts, row)
                        except PartitionletError as exc:  # its stored overrides are unreadable
                            for b in taken:
                                if b.topic is ts:
                                    b.error = exc
                            for cached in [n for n, t in self._topics.items() if t is ts]:
                                del self._topics[cached]  # the next send looks it up again
        for b in taken:
            if b.error is not None:
                continue
            if b.topic.topic_id is None:
                b.error = UnknownStream(f"the stream of {b.topic.full} was deleted")
            elif b.partition >= b.topic.partitions:
                b.error = InvalidPartition(
                    f"topic {b.topic.full} was created elsewhere with {b.topic.partitions} "
                    f"partitions, not the {b.partition + 1} or more this message assumed"
                )
        if not any(b.partition < 0 and b.error is None for b in taken):
            return taken
        placed: list[Batch] = []
        with self._lock:
            for b in taken:
                if b.partition < 0 and b.error is None:
                    placed += self._place_pending(b)
                placed.append(b)
        return placed

    def _learn(self, ts: TopicState, row: EnsuredTopic) -> None:
        """What the catalog says of a topic this producer did not know (lock held)."""
        if ts.stream is not None:  # not looked up yet: its own policies over its stream's
            stream = ts.stream
            policies = stream.policies
            if row.policies_json:
                policies = policies_module.check_stored(
                    stream.path, policies, row.overrides, ts.name
                )
                ts.codec = policies["compression"]
            ts.max_bytes = policies["max_message_bytes"]
            ts.ts_type = _ts_type(policies)
            ts.stream = None
            ts.resolved = True
        ts.topic_id = row.id
        if row.partitions > ts.partitions:  # made by someone else meanwhile
            ts.open.extend([None] * (row.partitions - ts.partitions))
        ts.partitions = row.partitions

    def _place_pending(self, b: Batch) -> list[Batch]:
        """Choose the partitions of a pending batch's messages, as `send` would have (key
        hash, else the sticky partition), now that its topic is known (lock held).
        Messages over the topic's own max_message_bytes fail alone. A batch whose messages
        all go to one partition is written as it is; else it is split into one batch per
        partition, returned, written before it (in its place in the cycle's order), and
        its futures follow their messages (`Batch.moved`)."""
        ts = b.topic
        count = ts.partitions
        sticky = ts.sticky if ts.sticky_batch is not None else (ts.sticky + 1) % count
        if ts.sticky_batch is None:
            ts.sticky = sticky  # the next unkeyed batch moves on, as after a closed batch
        targets: list[int] = []
        limit = ts.max_bytes
        for value, key, headers, _ in b.records():
            size = (0 if value is None else len(value)) + (0 if key is None else len(key))
            if headers:
                size += sum(len(k) + (len(v) if v else 0) for k, v in headers)
            if size > limit:
                targets.append(-1)
            elif key is None:
                targets.append(sticky)
            else:
                targets.append(partition_for_key(key, count))
        if -1 not in targets and targets.count(targets[0]) == len(targets):
            b.partition = targets[0]
            return []
        parts: dict[int, Batch] = {}
        moved: list[tuple[Batch, int]] = []
        for record, target in zip(b.records(), targets, strict=True):
            child = parts.get(target)
            if child is None:
                child = parts[target] = Batch(self, ts, max(target, 0))
                child.created = b.created
                if target < 0:
                    child.error = MessageTooLarge(
                        f"a message of this batch is larger than max_message_bytes="
                        f"{limit:,} of {ts.full}"
                    )
            moved.append((child, child.add(*record)))
        b.moved = moved
        for index, f, args, errback in b.callbacks:
            child, at = moved[index]
            child.callbacks.append((at, f, args, errback))
        b.callbacks = []
        return list(parts.values())

    def _txn(self) -> Any:
        if self._coordinator is None:
            raise IllegalState("this producer has no transactional_id")
        return self._coordinator

    def init_transactions(self) -> None:
        """Get this transactional id's producer id and next epoch: every older producer of
        it is fenced, and the transaction it left open is finished (committed if it was
        committing, else aborted)."""
        coordinator = self._txn()
        assert self.transactional_id is not None
        self.flush()
        self._producer_id = coordinator.init(self.transactional_id, self.transaction_timeout_ms)
        self._sequences.clear()
        self._txn_ready, self._in_txn = True, False

    def begin_transaction(self) -> None:
        self._txn()
        if not self._txn_ready:
            raise IllegalState("call init_transactions() before begin_transaction()")
        if self._in_txn:
            raise IllegalState("a transaction is open already")
        self._txn_partitions = set()
        self._txn_error = None
        self._in_txn = True

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any) -> None:
        """Commit these offsets (TopicPartition -> offset or OffsetAndMetadata) of the group
        (its id, or a consumer's `group_metadata()`) with the transaction: visible when it
        commits, gone when it aborts."""
        coordinator = self._txn()
        if not self._in_txn:
            self._not_in_transaction()
        group_id = getattr(group_metadata, "group_id", group_metadata)
        if not isinstance(group_id, str) or not group_id:
            raise InvalidArgument(f"a group id is a non-empty string, not {group_id!r}")
        rows = []
        for tp, value in offsets.items():
            offset = getattr(value, "offset", value)
            metadata = getattr(value, "metadata", "") or ""
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise InvalidArgument(f"the offset of {tp} must be an int, not {offset!r}")
            with self._lock:
                ts = self._known_state(tp.topic)
            if ts.topic_id is None:
                raise UnknownTopic(f"topic {ts.full} does not exist")
            rows.append((ts.topic_id, tp.partition, offset, metadata))
        assert self._producer_id is not None and self.transactional_id is not None
        coordinator.add_offsets(self.transactional_id, *self._producer_id, group_id, rows)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Write what was sent, then commit: its messages and offsets become visible to
        read_committed readers together. If a message failed, nothing is committed: the
        error is raised and the transaction must be aborted."""
        self._end(commit=True, timeout=timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """End the transaction without its messages and offsets: read_committed readers
        never see them."""
        self._end(commit=False, timeout=timeout)

    def _end(self, *, commit: bool, timeout: float | None) -> None:
        coordinator = self._txn()
        if not self._in_txn:
            raise IllegalState("no transaction is open")
        self.flush(timeout)
        if commit and self._txn_error is not None:
            raise self._txn_error
        assert self._producer_id is not None and self.transactional_id is not None
        coordinator.end(self.transactional_id, *self._producer_id, commit=commit)
        self._in_txn = False

    def _join_transaction(self, writes: list[BatchWrite]) -> None:
        """Sender thread: put the partitions written for the first time in this
        transaction into it, each at its log end offset now."""
        new = {w.key for w in writes} - self._txn_partitions
        if not new:
            return
        joined = []
        for topic_id, partition in sorted(new):
            name = f"#{topic_id}"
            end = self._cluster.partition_log(topic_id, partition, name).end_offset()
            joined.append((topic_id, partition, end))
        assert self._producer_id is not None and self.transactional_id is not None
        self._txn().add_partitions(self.transactional_id, *self._producer_id, joined)
        self._txn_partitions |= new

    # --- flushing and closing -------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Write everything sent so far; return after its callbacks have run."""
        with self._lock:
            waiting = self._in_flight + self._encoding + self._batches
            self._urgent = True
            self._wake.notify()
            # The sender is busy writing (its SQLite append lets go of the GIL): this thread
            # encodes what it will write next meanwhile, rather than wait idle. It pays most
            # where a flush ends each unit of work, as a transaction's commit does.
            ahead = self._take() if self._in_flight and not self._encoding else []
            self._encoding = ahead
        if ahead:
            try:
                for b in ahead:
                    # log-append time is stamped when written; a record batch came encoded
                    if b.topic.ts_type != LOG_APPEND_TIME and b.encoded is None:
                        b.encoded = encode_batch(b)
            finally:
                with self._lock:
                    self._batches[:0] = ahead  # before any sent since: each partition's order
                    self._encoding = []
                    self._wake.notify()
        if not self._wait_finished(waiting, timeout):
            raise Timeout(f"flush did not finish within {timeout} s")

    def close(self, timeout: float | None = None) -> None:
        """Flush, then stop the sender. Further sends raise `errors.Closed`."""
        if self._closed:
            return
        with self._lock:
            self._closing = True
            self._urgent = True
            self._wake.notify()
            self._space.notify_all()
        self._sender.join(timeout)
        self._closed = True
        atexit.unregister(self._atexit)

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until a closed producer has written (or failed) everything it held: True
        once it has, False when `timeout` seconds pass first. A `close(timeout)` that timed
        out leaves that writing going on; whoever owns the cluster must wait for it before
        closing the cluster. False at once for a producer not closed."""
        if not self._closed:
            return False
        self._sender.join(timeout)
        return not self._sender.is_alive()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the sender thread ----------------------------------------------------------------

    def _run(self) -> None:
        appender = self._cluster.appender()
        while True:
            with self._lock:
                while self._encoding or (not self._batches and not self._closing):
                    # idle: wake when the offsets reached are due to be saved
                    if not self._wake.wait(appender.marks_due_in()) and not self._encoding:
                        break
                if self._batches and self.linger_ms and not self._urgent and not self._closing:
                    deadline = self._batches[0].created + self.linger_ms / 1000
                    while not self._urgent and not self._closing:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._wake.wait(left)
                taken = self._take()
                self._urgent = False
                self._in_flight = taken
                closing = self._closing
            if taken:
                self._write(appender, taken)
            appender.save_marks(now=closing)
            if closing:
                with self._lock:
                    if not self._batches:
                        return

    def _take(self) -> list[Batch]:
        """Take every batch not yet taken (lock held): closed, none takes more messages."""
        taken, self._batches = self._batches, []
        for b in taken:
            ts = b.topic
            if b.partition < 0:
                if ts.pending is b:
                    ts.pending = None
                    self._buffered += b.nbytes  # counted by _close_full otherwise
            elif ts.open[b.partition] is b:
                ts.open[b.partition] = None
                self._buffered += b.nbytes  # counted by _close_full otherwise
            if ts.sticky_batch is b:
                ts.sticky_batch = None
        return taken

    def _write(self, appender: Appender, taken: list[Batch]) -> None:
        try:
            self._refresh_metadata(appender)
            taken = self._resolve_topics(appender, taken)
            now = self._now_ms()
            writes = []
            ready = [b for b in taken if b.error is None and b.moved is None]
            for b in ready:
                assert b.topic.topic_id is not None  # _resolve_topics gave it one
                if b.topic.ts_type == LOG_APPEND_TIME:
                    b.append_ts = now
                    encoded = encode_batch(b, now)
                else:
                    encoded = b.encoded or encode_batch(b)
                payload, count, first_ts, last_ts = encoded
                writes.append(
                    BatchWrite(
                        b.topic.stream_id,
                        b.topic.topic_id,
                        b.partition,
                        payload,
                        count,
                        first_ts,
                        last_ts,
                        b.topic.ts_type,
                        self._cluster.id,
                        compression=b.topic.codec,
                        producer=b.ids,
                    )
                )
            if self.enable_idempotence:
                self._number(ready, writes)
            self._append(appender, writes)
            for b, w in zip(ready, writes, strict=True):
                if w.error is not None:
                    b.error = w.error
                    if isinstance(w.error, StorageError):
                        _log_failure(w.error)
                    if isinstance(w.error, UnknownTopic):
                        self._forget_topic(b.topic)
                    if self._coordinator is not None:
                        self._txn_error = w.error  # the transaction can only abort now
                    elif self.enable_idempotence:
                        self._producer_id = None  # its sequence has a hole: a new id
                else:
                    assert w.offset is not None  # written: Volume.append set it
                    b.offset = w.offset
        except BaseException as exc:  # a bug or a dead disk: fail these, keep the sender
            if self._coordinator is not None:
                self._txn_error = exc if isinstance(exc, PartitionletError) else _wrap(exc)
            else:
                self._producer_id = None
            _log_failure(exc)
            for b in taken:
                if not b.resolved and b.error is None and b.offset < 0:
                    b.error = exc if isinstance(exc, PartitionletError) else _wrap(exc)
        if any(b.error is None for b in taken):
            self._cluster.appends.notify()
        self._resolve(taken)

    def _number(self, ready: list[Batch], writes: list[BatchWrite]) -> None:
        """Give each batch its producer id, epoch and next sequence in its partition."""
        if self._coordinator is not None:
            self._join_transaction(writes)
        elif self._producer_id is None:
            self._producer_id = self._cluster.init_producer_id()
            self._sequences.clear()
        assert self._producer_id is not None  # init_transactions() or just now
        producer_id, epoch = self._producer_id
        sequences = self._sequences
        for b, w in zip(ready, writes, strict=True):
            if b.ids is None:
                key = w.key
                seq = sequences.get(key, 0)
                sequences[key] = (seq + w.count) & 0x7FFFFFFF
                b.ids = (producer_id, epoch, seq)
            w.producer = b.ids

    def _append(self, appender: Appender, writes: list[BatchWrite]) -> None:
        """Append the writes; an idempotent producer tries again after a failure that may
        have stored some of them (the volume answers those with their stored offsets)."""
        for attempt in range(self.retries + 1):
            try:
                appender.write(writes, sync=self.acks == "all")
                return
            except (StorageError, TryLater, OSError) as exc:
                if attempt == self.retries:
                    raise
                log.warning(
                    "producer write failed (%s); trying again (%d of %d)",
                    exc,
                    attempt + 1,
                    self.retries,
                )
                time.sleep(self.retry_backoff_ms / 1000 * (attempt + 1))
                appender.forget()  # where the partitions' active partitionlets are may be stale
                for w in writes:
                    w.offset = w.sealed_at = w.error = None
                    w.duplicate = w.needs_history = False

    def _resolve(self, taken: list[Batch]) -> None:
        freed = 0
        with self._lock:
            callbacks = []
            for b in taken:
                b.resolved = True
                freed += b.nbytes
                if b.callbacks:
                    callbacks.append(b)
            self._buffered -= freed
            self._in_flight = []
            self._space.notify_all()
        for b in callbacks:
            for index, f, args, errback in b.callbacks:
                call_back(future(b, index), f, args, errback)
            b.callbacks = []
        with self._finished:
            for b in taken:
                b.finished = True
            self._finished.notify_all()

    def _refresh_metadata(self, appender: Appender) -> None:
        """Drop cached metadata when topics, partitions or policies changed anywhere."""
        version = self._cluster.catalog.topology_version()
        if version == self._topology:
            return
        self._topology = version
        appender.forget()
        self.forget_metadata()

    def forget_metadata(self) -> None:
        """Drop cached topics and streams: re-resolved at their next send. The cluster
        calls it when it changes topics or policies (`Cluster.watch_metadata`)."""
        with self._lock:
            self._topics.clear()  # batches already open keep their (older) metadata
            self._streams.clear()
            self._allowed.clear()
            self._simple.clear()

    def _forget_topic(self, ts: TopicState) -> None:
        with self._lock:
            for name, cached in list(self._topics.items()):
                if cached is ts:
                    del self._topics[name]


def _wrap(exc: BaseException) -> PartitionletError:
    error = PartitionletError(f"write failed: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


# --- one message from a console ---------------------------------------------------------------

# A console's produce form is a person's click, not a stream: it deserves the durable write
# (acks="all", fsynced before the form says "written"), the same in every console, since
# waiting a few milliseconds for the fsync costs nobody anything.
ONE_MESSAGE_ACKS = "all"
ONE_MESSAGE_TIMEOUT_S = 10.0  # how long a console waits for that write


def produce_one(
    cluster: Cluster,
    topic: str,
    *,
    value: bytes | None,
    key: bytes | None = None,
    headers: Sequence[tuple[str, bytes]] | None = None,
    partition: int | None = None,
    timestamp_ms: int | None = None,
    timeout: float = ONE_MESSAGE_TIMEOUT_S,
) -> RecordMetadata:
    """Write one message to `topic` (a full name) and wait for its durable commit: what the
    web form, the JSON API and the terminal's produce dialog do. `cluster` may be a
    principal's view (`Cluster.as_principal`), whose ACEs then decide.

    Raises what `Producer.send` and its future raise (`InvalidArgument`, `InvalidPartition`,
    `MessageTooLarge`, `AccessDenied`, `UnknownTopic`, `Timeout`, ...), for each console to
    show in its own way."""
    producer = Producer(cluster, acks=ONE_MESSAGE_ACKS)
    try:
        future = producer.send(
            topic,
            value=value,
            key=key,
            partition=partition,
            headers=headers or None,
            timestamp_ms=timestamp_ms,
        )
        return future.get(timeout=timeout)
    finally:
        producer.close(timeout=timeout)
