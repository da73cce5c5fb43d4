"""`KafkaConsumer`: kafka-python's consumer (`kafka.consumer.group`) on the engine's
`Consumer`.

The engine's consumer does the group membership, fetching, positions and commits; this
class turns kafka-python's settings into its arguments, the program's topic names into
full names and back, and its records and errors into kafka-python's.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal, overload

from engine import errors as engine_errors
from engine.client.consumer import Consumer
from engine.kafka import bootstrap
from engine.kafka.config import (
    CONFIG_ERRORS,
    CONSUMER_IGNORED,
    CONSUMER_USED,
    configure,
    int_setting,
)
from engine.kafka.consumer.fetcher import ConsumerRecord, consumer_records
from engine.kafka.consumer.subscription_state import ListenerAdapter
from engine.kafka.coordinator.assignors import engine_strategy
from engine.kafka.coordinator.assignors.range import RangePartitionAssignor
from engine.kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from engine.kafka.errors import (
    IllegalStateError,
    KafkaConfigurationError,
    KafkaError,
    translate,
    translated,
)
from engine.kafka.future import DoneFuture, call_user
from engine.kafka.names import TopicNames
from engine.kafka.serializer import close_codec, codec
from engine.kafka.structs import ConsumerGroupMetadata, OffsetAndMetadata, OffsetAndTimestamp
from engine.records import TopicPartition

__all__ = ["KafkaConsumer"]


class KafkaConsumer:
    """Reads records of a Partitionlet cluster (kafka-python's `KafkaConsumer`).

    `KafkaConsumer(*topics, **configs)` subscribes to `topics` at once. Used settings:
    `group_id`, `auto_offset_reset`, `enable_auto_commit`, `auto_commit_interval_ms`,
    `default_offset_commit_callback`, `max_poll_records`, `max_poll_interval_ms`,
    `consumer_timeout_ms` (default: iterate forever), `session_timeout_ms`,
    `heartbeat_interval_ms`, `partition_assignment_strategy`, `client_id`,
    `isolation_level` ('read_uncommitted', the default, or 'read_committed'),
    `key_deserializer`, `value_deserializer`, plus `default_stream`; see docs/KAFKA.md.
    """

    def __init__(self, *topics: str, **configs: Any) -> None:
        config = configure("KafkaConsumer", configs, CONSUMER_USED, CONSUMER_IGNORED)
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
        self._key_deserializer = codec(config.get("key_deserializer"), "deserialize")
        self._value_deserializer = codec(config.get("value_deserializer"), "deserialize")
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
            "partition_assignment_strategy": engine_strategy(
                config["partition_assignment_strategy"]
            ),
        }
        if config.get("isolation_level") is not None:
            # a name, or kafka-python 3's IsolationLevel (0 uncommitted, 1 committed)
            level = config["isolation_level"]
            level = getattr(level, "value", level)
            kwargs["isolation_level"] = {0: "read_uncommitted", 1: "read_committed"}.get(
                level, level
            )
        for name in (
            "auto_commit_interval_ms",
            "max_poll_records",
            "max_poll_interval_ms",
            "session_timeout_ms",
            "heartbeat_interval_ms",
        ):
            kwargs[name] = int_setting(config, name)
        self._closed = True
        self._key, cluster = bootstrap.acquire(config["bootstrap_servers"])
        try:
            self._names = TopicNames(cluster, config.get("default_stream"))
            with translated(**CONFIG_ERRORS):
                self._consumer = Consumer(cluster, default_stream=self._names.stream, **kwargs)
        except BaseException:
            bootstrap.release(self._key, cluster)
            raise
        self._cluster = cluster
        self._closed = False
        self._pattern: str | None = None
        # What metrics() reports, counted as records are handed to the program.
        self._started = time.monotonic()
        self._consumed = 0
        self._consumed_bytes = 0
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
        with translated():
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
            adapter = None if listener is None else ListenerAdapter(listener, self._names)
            self._consumer.subscribe(fulls, pattern=engine_pattern, listener=adapter)
        self._pattern = pattern

    def unsubscribe(self) -> None:
        with translated():
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
        with translated():
            self._consumer.assign(tps)

    def assignment(self) -> set[TopicPartition]:
        return {self._names.show_tp(tp) for tp in self._consumer.assignment()}

    # --- reading --------------------------------------------------------------------------

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records of the assigned partitions, waiting up to `timeout_ms` for some.
        With `update_offsets=False` the positions stay where they were."""
        with translated():
            batch = self._consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
            if not update_offsets:
                for tp, records in batch.items():
                    self._consumer.seek(tp, records[0].offset)
        kd, vd = self._key_deserializer, self._value_deserializer
        out = {}
        nbytes = 0
        for tp, records in batch.items():
            shown = self._names.show(tp.topic)
            out[TopicPartition(shown, tp.partition)] = consumer_records(records, shown, kd, vd)
            self._consumed += len(records)
            nbytes += sum(
                [(len(r[5]) if r[5] else 0) + (len(r[6]) if r[6] else 0) for r in records]
            )
        self._consumed_bytes += nbytes
        return out

    def __iter__(self) -> KafkaConsumer:
        return self

    def __next__(self) -> ConsumerRecord:
        try:
            r = next(self._consumer)
        except engine_errors.PartitionletError as exc:
            raise translate(exc) from exc
        self._consumed += 1
        self._consumed_bytes += (len(r.key) if r.key else 0) + (len(r.value) if r.value else 0)
        shown = self._names.show(r.topic)
        return consumer_records([r], shown, self._key_deserializer, self._value_deserializer)[0]

    # --- positions ------------------------------------------------------------------------

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        tp = self._names.tp(partition)
        with translated():
            return self._consumer.position(tp)

    def highwater(self, partition: TopicPartition) -> int | None:
        return self.end_offsets([partition]).get(partition)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        tp = self._names.tp(partition)
        with translated():
            self._consumer.seek(tp, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        tps = [self._names.tp(tp) for tp in partitions]
        with translated():
            self._consumer.seek_to_beginning(*tps)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        tps = [self._names.tp(tp) for tp in partitions]
        with translated():
            self._consumer.seek_to_end(*tps)

    def pause(self, *partitions: TopicPartition) -> None:
        tps = [self._names.tp(tp) for tp in partitions]
        with translated():
            self._consumer.pause(*tps)

    def resume(self, *partitions: TopicPartition) -> None:
        tps = [self._names.tp(tp) for tp in partitions]
        with translated():
            self._consumer.resume(*tps)

    def paused(self) -> set[TopicPartition]:
        return {self._names.show_tp(tp) for tp in self._consumer.paused()}

    def _by_partition(
        self,
        partitions: Iterable[TopicPartition],
        ask: Callable[[list[TopicPartition]], dict[TopicPartition, Any]],
    ) -> dict[TopicPartition, Any]:
        """`ask` the engine with full names; the answer keyed by the program's own tps."""
        given = list(partitions)
        fulls = [self._names.tp(tp) for tp in given]
        with translated():
            answer = ask(fulls)
        return {tp: answer[full] for tp, full in zip(given, fulls, strict=True)}

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        return self._by_partition(partitions, self._consumer.beginning_offsets)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        return self._by_partition(partitions, self._consumer.end_offsets)

    def offsets_for_times(
        self, timestamps: dict[TopicPartition, int], timeout_ms: int | None = None
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

    @overload
    def committed(
        self,
        partition: TopicPartition,
        metadata: Literal[False] = False,
        timeout_ms: int | None = None,
    ) -> int | None: ...
    @overload
    def committed(
        self, partition: TopicPartition, metadata: Literal[True], timeout_ms: int | None = None
    ) -> OffsetAndMetadata | None: ...
    @overload
    def committed(
        self, partition: TopicPartition, metadata: bool, timeout_ms: int | None = None
    ) -> int | OffsetAndMetadata | None: ...
    def committed(
        self, partition: TopicPartition, metadata: bool = False, timeout_ms: int | None = None
    ) -> int | OffsetAndMetadata | None:
        """The group's committed offset (an `OffsetAndMetadata` with `metadata=True`)."""
        tp = self._names.tp(partition)
        with translated():
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

    def commit(
        self, offsets: dict[TopicPartition, Any] | None = None, timeout_ms: int | None = None
    ) -> None:
        """Commit `offsets` ({TopicPartition: OffsetAndMetadata}), or the positions of all
        assigned partitions. Needs a `group_id`."""
        if self.config["group_id"] is None:
            raise IllegalStateError("commit() needs a group_id")
        converted = None if offsets is None else dict(self._names.engine_offsets(offsets))
        with translated():
            self._consumer.commit(converted)

    def commit_async(
        self,
        offsets: dict[TopicPartition, Any] | None = None,
        callback: Callable[[dict[TopicPartition, Any], Any], Any] | None = None,
    ) -> DoneFuture:
        """Commit (synchronously, here), then call `callback(offsets, response_or_error)`
        (`default_offset_commit_callback` when no callback is given); returns a resolved
        future."""
        callback = callback or self.config.get("default_offset_commit_callback")
        try:
            self.commit(offsets)
        except KafkaError as exc:
            if callback is not None:
                call_user(callback, offsets or {}, exc)
            return DoneFuture(exception=exc)
        if offsets is None:
            offsets = {}
            for tp in self.assignment():
                offset = self.committed(tp)
                if offset is not None:
                    offsets[tp] = OffsetAndMetadata(offset, "")
        if callback is not None:
            call_user(callback, offsets, None)
        return DoneFuture(value=None)

    # --- metadata -------------------------------------------------------------------------

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partition numbers of `topic`, or None when it does not exist."""
        with translated():
            full = self._names.full(topic)
            try:
                return set(range(self._cluster.topic(full).partition_count))
            except engine_errors.NotFound:
                return None

    def topics(self) -> set[str]:
        """The topics of the default stream (a cluster may hold millions of streams)."""
        with translated():
            return {self._names.show(full) for full in self._names.full_names_of_stream()}

    def metrics(self, raw: bool = False) -> dict[str, dict[str, float]] | None:
        """kafka-python's `{group: {name: value}}` with the standard consumer names, from
        what this consumer handed to the program (each poll, its own or iteration's, counts
        as one fetch); rates are per second since it was made (None when
        `metrics_enabled=False`, as in kafka-python)."""
        if self.config.get("metrics_enabled") is False:
            return None
        elapsed = max(time.monotonic() - self._started, 1e-9)
        records, nbytes, fetches = self._consumed, self._consumed_bytes, self._consumer.polls
        prefix = self.config.get("metric_group_prefix") or "consumer"
        return {
            f"{prefix}-fetch-manager-metrics": {
                "records-consumed-total": float(records),
                "records-consumed-rate": records / elapsed,
                "bytes-consumed-total": float(nbytes),
                "bytes-consumed-rate": nbytes / elapsed,
                "fetch-total": float(fetches),
                "fetch-rate": fetches / elapsed,
                "records-per-request-avg": records / fetches if fetches else 0.0,
                "fetch-size-avg": nbytes / fetches if fetches else 0.0,
            }
        }

    def group_metadata(self) -> ConsumerGroupMetadata | None:
        """The group this consumer is in (None without a `group_id`), as kafka-python 3.0
        gives it."""
        group_id = self.config["group_id"]
        if group_id is None:
            return None
        return ConsumerGroupMetadata(group_id, -1, "", self.config.get("group_instance_id"))

    def bootstrap_connected(self) -> bool:
        return not self._closed and not self._cluster.closed

    def bootstrap(self, timeout_ms: int | None = None, refresh: bool = False) -> None:
        """kafka-python 3.0 waits here for the first broker metadata; the cluster was
        opened with the consumer, so this only checks that it is still open."""
        if self._closed or self._cluster.closed:
            raise IllegalStateError("KafkaConsumer is closed")

    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        """Commit (when auto-commit is on and `autocommit`), leave the group, close.
        `timeout_ms` (kafka-python 3.0) bounds a network round trip there; a commit here
        is a local transaction."""
        if self._closed:
            return
        self._closed = True
        for f in (self.config.get("key_deserializer"), self.config.get("value_deserializer")):
            close_codec(f)
        try:
            with translated():
                self._consumer.close(autocommit=autocommit)
        finally:
            bootstrap.release(self._key, self._cluster)

    def __enter__(self) -> KafkaConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
