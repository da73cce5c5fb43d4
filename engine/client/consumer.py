"""`Consumer`: reads partitions by offset, alone or as a member of a consumer group.

Each assigned partition has a position (the next offset to read) and a `PartitionLog`
that reads its batches straight from the volume files. `poll()` reads round-robin over
the assigned partitions, so one busy partition does not starve the others. Committed
offsets live in the catalog (`group_offsets`).

Thread-safety: like kafka-python's, a consumer is used by one thread at a time.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

from engine import names, regex
from engine.auth.principal import Principal
from engine.bulk import bulk_records
from engine.client import groups
from engine.errors import (
    AccessDenied,
    Closed,
    CommitFailed,
    CorruptBatch,
    IllegalState,
    InvalidArgument,
    InvalidOffset,
    InvalidPartition,
    NoOffsetForPartition,
    UnknownStream,
    UnknownTopic,
)
from engine.groups.perms import GroupAccess
from engine.ops.heat import ReadCounter
from engine.policies import check_stored
from engine.records import (
    ConsumerRecord,
    KafkaBatch,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from engine.storage.log import PartitionLog, ProducerState

if TYPE_CHECKING:  # annotations only: the cluster module needs none of this one
    from engine.cluster import Cluster

log = logging.getLogger(__name__)

# who a group's live members are (`Cluster.group_kinds`), in a refused commit's message
_KINDS = {"engine": "engine consumers", "wire": "Kafka clients of a `plet serve` listener"}

_RESETS = {
    "earliest": "earliest",
    "smallest": "earliest",
    "latest": "latest",
    "largest": "latest",
    "none": "none",
}
# How often a group member checks for a new generation or a freed partition it waits for.
_GROUP_CHECK_S = 0.1
# Longest sleep between two looks at the volumes while waiting for messages written by
# another process that cannot ring this one (engine.doorbell: no FIFOs here, another user's
# process); writers that can wake the consumer at once.
_IDLE_WAIT_S = 0.02
# The same once this process's doorbell is up: only a ring missed waits this long (a
# doorbell made just after a writer listed the directory, for up to doorbell.RELIST_S),
# and an idle consumer wakes 4 times a second instead of 50.
_IDLE_WAIT_RUNG_S = 0.25
_INT64 = range(-(2**63), 2**63)  # what a committed offset may be (Kafka's int64)


class ConsumerRebalanceListener:
    """Called when the partitions of a subscription change (kafka-python's interface)."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass


@dataclass
class _TopicMeta:
    topic_id: int
    stream_id: int
    partitions: int
    ttl_s: int


class _Assigned:
    """One assigned partition: where the consumer stands in it."""

    __slots__ = ("log", "meta", "position", "paused")

    def __init__(self, log: PartitionLog, meta: _TopicMeta) -> None:
        self.log = log
        self.meta = meta
        self.position: int | None = None
        self.paused = False


class Consumer:
    """Reads messages of one cluster (DESIGN, "Public API of engine")."""

    def __init__(
        self,
        cluster: Cluster,
        *topics: str,
        group_id: str | None = None,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        max_poll_records: int = 500,
        consumer_timeout_ms: float | None = None,
        session_timeout_ms: int = 10000,
        default_stream: str | None = None,
        key_deserializer: Callable[[bytes], Any] | None = None,
        value_deserializer: Callable[[bytes], Any] | None = None,
        principal: Principal | None = None,
        client_id: str = "plet-consumer",
        partition_assignment_strategy: Any = "range",
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        isolation_level: str = "read_uncommitted",
    ) -> None:
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise InvalidArgument(
                "isolation_level must be 'read_uncommitted' or 'read_committed', got "
                f"{isolation_level!r}"
            )
        if auto_offset_reset not in _RESETS:
            raise InvalidOffset(
                f"auto_offset_reset must be 'earliest', 'latest' or 'none', "
                f"got {auto_offset_reset!r}"
            )
        if group_id is not None and (not isinstance(group_id, str) or not group_id):
            raise InvalidArgument(f"group_id must be a non-empty string, got {group_id!r}")
        if not isinstance(max_poll_records, int) or max_poll_records < 1:
            raise InvalidArgument(f"max_poll_records must be >= 1, got {max_poll_records!r}")
        if default_stream is not None:
            names.validate_stream_path(default_stream)
        self._cluster = cluster
        # read_committed: up to each partition's last stable offset, without the messages
        # of aborted transactions (engine.storage.log)
        self.isolation_level = isolation_level
        self._committed = isolation_level == "read_committed"
        # TTL cutoffs, auto-commit and group checks read the cluster's clock. The waits of
        # poll() and iteration stay on real time: they end on the append signal (a
        # condition variable), which a fake clock cannot wake.
        self._clock = cluster.clock
        self.group_id = group_id
        self.auto_offset_reset = _RESETS[auto_offset_reset]
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.max_poll_records = max_poll_records
        self.consumer_timeout_ms = consumer_timeout_ms
        for name, value in (
            ("session_timeout_ms", session_timeout_ms),
            ("heartbeat_interval_ms", heartbeat_interval_ms),
            ("max_poll_interval_ms", max_poll_interval_ms),
            ("auto_commit_interval_ms", auto_commit_interval_ms),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{name} must be a positive int, got {value!r}")
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = min(heartbeat_interval_ms, session_timeout_ms)
        self.max_poll_interval_ms = max_poll_interval_ms
        self.client_id = client_id
        self.partition_assignment_strategy = groups.strategy_name(partition_assignment_strategy)
        self.default_stream = default_stream
        self.principal = principal or cluster.principal
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer

        self._assigned: dict[TopicPartition, _Assigned] = {}
        self._manual = False
        self._subscription: set[str] = set()
        self._pattern: tuple[str, Any] | None = None
        self._listener: Any = None
        self._meta: dict[str, _TopicMeta] = {}
        self._topic_names: dict[int, str] = {}
        self._versions = (-1, -1)
        self._next_commit = self._clock.monotonic() + auto_commit_interval_ms / 1000
        self._iter_buffer: deque[ConsumerRecord] = deque()
        self._reads = ReadCounter(cluster)
        self._member: groups.GroupMember | None = None  # with a group_id and subscribe()
        self._pending: set[tuple[int, int]] = set()  # assigned to us, not yet released
        self._next_group_check = 0.0
        self._group_checked: set[str] = set()  # the group's permissions passed, once each
        self._rotate = 0
        # a damaged batch met by a poll that returned other partitions' records: the next
        # poll raises it (unless that partition is seeked first)
        self._damaged: tuple[TopicPartition, CorruptBatch] | None = None
        self._closed = False
        self.polls = 0  # the polls made, iteration's too (the facade's fetch metrics)
        if topics:
            self.subscribe(list(topics))

    # --- topics and partitions ------------------------------------------------------------

    def _full(self, topic: str) -> str:
        return names.resolve(topic, self.default_stream)

    def _topic_meta(self, full: str) -> _TopicMeta:
        """What the consumer needs of a topic; checks the consume permission first."""
        meta = self._meta.get(full)
        if meta is None:
            stream_path, name = names.split_full_name(full)
            catalog = self._cluster.catalog
            row = catalog.topic(stream_path, name)
            stream = catalog.stream_by_id(row.stream_id)
            self._cluster.authorize(stream, "consume_perm", self.principal)
            # check_stored: a catalog written before policies were checked may hold anything
            ttl = check_stored(stream.path, stream.policies, row.overrides, row.name)["ttl"]
            meta = self._meta[full] = _TopicMeta(row.id, row.stream_id, row.partitions, ttl)
        return meta

    def _check_tp(self, tp: Any) -> TopicPartition:
        if not isinstance(tp, tuple) or len(tp) != 2:
            raise InvalidArgument(f"expected a TopicPartition, got {tp!r}")
        topic, partition = tp
        full = self._full(topic)
        meta = self._topic_meta(full)
        if type(partition) is int and partition >= meta.partitions:
            del self._meta[full]  # partitions may have been added since it was cached
            meta = self._topic_meta(full)
        if type(partition) is not int or not 0 <= partition < meta.partitions:
            raise InvalidPartition(
                f"topic {full} has partitions 0 to {meta.partitions - 1}, not {partition!r}"
            )
        return TopicPartition(full, partition)

    def _refresh_metadata(self) -> None:
        """Follow topology changes: new partitions, deleted topics, changed policies, and
        for a subscription, topics created since."""
        versions = self._cluster.catalog.versions()
        if versions == self._versions:
            return
        topology_changed = versions[0] != self._versions[0]
        self._versions = versions
        if not topology_changed:
            if not self._manual and (self._subscription or self._pattern):
                self._update_subscription()
            return
        self._meta.clear()
        for tp, state in list(self._assigned.items()):
            try:
                state.meta = self._topic_meta(tp.topic)
            except (UnknownTopic, UnknownStream):
                if self._manual:
                    continue  # kept: reading a deleted topic just finds nothing
                del self._assigned[tp]
                continue
            state.log.refresh()
        if not self._manual and (self._subscription or self._pattern):
            self._update_subscription()

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        """Read every partition of these topics (or of the topics whose names match
        `pattern`) as a member of the consumer's group."""
        self._check_open()
        if self._manual and self._assigned:
            raise IllegalState("subscribe() after assign(): call unsubscribe() first")
        if isinstance(topics, str):
            topics = [topics]
        topics = list(topics)
        if bool(topics) == bool(pattern):
            raise IllegalState("subscribe() takes either topics or a pattern, exactly one")
        self._manual = False
        subscription = {self._full(t) for t in topics}
        for full in subscription:  # an explicit topic that exists must be readable
            try:
                self._topic_meta(full)
            except (UnknownTopic, UnknownStream):
                pass  # assigned once it is created
        self._subscription = subscription
        self._pattern = self._compile_pattern(pattern) if pattern else None
        self._listener = listener
        self._update_subscription()

    def _compile_pattern(self, pattern: str) -> tuple[str, Any]:
        """(stream path, regex over its topic names) from '/stream:regex' or 'regex'."""
        if pattern.startswith("/") and ":" in pattern:
            stream, _, topic_re = pattern.partition(":")
            names.validate_stream_path(stream)
        elif self.default_stream is not None:
            stream, topic_re = self.default_stream, pattern
        else:
            raise InvalidArgument(
                f"pattern {pattern!r} names no stream: write '/stream/path:regex' or set "
                "default_stream"
            )
        # RE2: a pattern runs over every topic name of the stream, each poll
        return stream, regex.compile_pattern(topic_re, "topic pattern")

    def _subscribed_topics(self) -> set[str]:
        wanted = set(self._subscription)
        if self._pattern is not None:
            stream, topic_regex = self._pattern
            catalog = self._cluster.catalog
            try:
                stream_row = catalog.stream(stream)
            except UnknownStream:
                return wanted
            try:
                self._cluster.authorize(stream_row, "consume_perm", self.principal)
            except AccessDenied:
                return wanted  # a pattern matches only what the principal may read
            for row in catalog.topics(stream_row.id, None, None, 0):
                if topic_regex.fullmatch(row.name):
                    wanted.add(row.full_name)
        return wanted

    def _update_subscription(self) -> None:
        """Follow the subscription: the partitions of the subscribed topics that exist
        now, all of them without a group, this member's share with one."""
        metas: dict[str, _TopicMeta] = {}
        for full in self._subscribed_topics():
            try:
                metas[full] = self._topic_meta(full)
            except (UnknownTopic, UnknownStream):
                continue  # assigned once it is created
        if self.group_id is not None:
            self._topic_names = {meta.topic_id: full for full, meta in metas.items()}
            topic_ids = sorted(self._topic_names)
            if self._member is None or topic_ids != self._member.topics:
                self._enter_group("join_perm", topic_ids)
            if self._member is None:
                self._member = groups.GroupMember(
                    self._cluster.catalog.groups,
                    self.group_id,
                    client_id=self.client_id,
                    strategy=self.partition_assignment_strategy,
                    session_timeout_ms=self.session_timeout_ms,
                    heartbeat_interval_ms=self.heartbeat_interval_ms,
                    max_poll_interval_ms=self.max_poll_interval_ms,
                    clock=self._cluster.clock,
                )
                self._member.join(topic_ids)
            elif topic_ids != self._member.topics:
                self._member.join(topic_ids)
            self._sync_group()
            return
        target = {
            TopicPartition(full, p) for full, meta in metas.items() for p in range(meta.partitions)
        }
        self._change_assignment(set(self._assigned) - target, target - set(self._assigned))

    def _change_assignment(self, revoked: set[TopicPartition], added: set[TopicPartition]) -> None:
        if revoked:
            if self._listener is not None:
                self._listener.on_partitions_revoked(revoked)
            if self.enable_auto_commit:
                self._commit_positions(revoked)
            for tp in revoked:
                self._assigned.pop(tp, None)
            self._drop_buffered(revoked)
        for tp in sorted(added):
            self._assigned[tp] = self._new_assigned(tp)
        if added and self._listener is not None:
            self._listener.on_partitions_assigned(added)

    def _sync_group(self) -> None:
        """Apply the group's current assignment: release what went to others (committing
        first), claim what came to us and is free."""
        member = self._member
        assert member is not None
        member.polled()
        target = member.target()
        owned = {(state.meta.topic_id, tp.partition): tp for tp, state in self._assigned.items()}
        revoked = {tp for key, tp in owned.items() if key not in target}
        if revoked:
            if self._listener is not None:
                self._listener.on_partitions_revoked(revoked)
            commits = self._position_rows(revoked) if self.enable_auto_commit else []
            member.release([k for k, tp in owned.items() if tp in revoked], commits)
            for tp in revoked:
                self._assigned.pop(tp, None)
            self._drop_buffered(revoked)
        wanted = {k for k in target if k not in owned and k[0] in self._topic_names}
        claimed = member.claim(wanted)
        self._pending = wanted - claimed
        added = {TopicPartition(self._topic_names[t], p) for t, p in claimed}
        for tp in sorted(added):
            self._assigned[tp] = self._new_assigned(tp)
        if added and self._listener is not None:
            self._listener.on_partitions_assigned(added)
        self._next_group_check = self._clock.monotonic() + _GROUP_CHECK_S

    def _maybe_sync_group(self) -> None:
        member = self._member
        if member is None:
            return
        member.polled()
        if member.changed() or (
            self._clock.monotonic() >= self._next_group_check
            and (self._pending or member.generation != self._generation_now())
        ):
            self._sync_group()

    def _generation_now(self) -> int:
        assert self.group_id is not None  # only members ask
        generation = self._cluster.catalog.groups.generation(self.group_id)
        self._next_group_check = self._clock.monotonic() + _GROUP_CHECK_S
        return generation

    def _new_assigned(self, tp: TopicPartition) -> _Assigned:
        meta = self._topic_meta(tp.topic)
        log = self._cluster.partition_log(
            meta.topic_id, tp.partition, tp.topic, self._reads, committed=self._committed
        )
        return _Assigned(log, meta)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions, outside any group rebalancing."""
        self._check_open()
        if self._subscription or self._pattern:
            raise IllegalState("assign() after subscribe(): call unsubscribe() first")
        tps = [self._check_tp(tp) for tp in partitions]
        self._manual = True
        old = self._assigned
        self._assigned = {tp: old.get(tp) or self._new_assigned(tp) for tp in tps}
        self._drop_buffered(set(old) - set(self._assigned))

    def unsubscribe(self) -> None:
        self._check_open()
        member = self._member is not None
        self._leave_group()  # a member's positions are committed as it leaves
        if not member and self.enable_auto_commit and self._assigned:
            self._commit_positions(set(self._assigned))
        self._assigned = {}
        self._subscription = set()
        self._pattern = None
        self._manual = False
        self._iter_buffer.clear()

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    def subscription(self) -> set[str] | None:
        return set(self._subscription) or None

    def _state(self, tp: Any) -> _Assigned:
        state = self._assigned.get(tp)
        if state is None and isinstance(tp, tuple) and len(tp) == 2:
            state = self._assigned.get(TopicPartition(self._full(tp[0]), tp[1]))
        if state is None:
            raise IllegalState(f"{tp!r} is not assigned to this consumer")
        return state

    # --- positions ------------------------------------------------------------------------

    def _check_fetch(self) -> None:
        """Reading the group's committed offsets is a member's right: join_perm (checked
        once per consumer)."""
        if self.group_id is not None and "fetch" not in self._group_checked:
            GroupAccess(self._cluster, self.principal).check(self.group_id, "join_perm")
            self._group_checked.add("fetch")

    def _end(self, log: PartitionLog) -> int:
        """Where "latest" is: the end offset, or read_committed's last stable offset."""
        return log.stable_offset() if self._committed else log.end_offset()

    def _reset_position(self, tp: TopicPartition, state: _Assigned) -> int:
        if self.group_id is not None:
            self._check_fetch()
            committed = self._cluster.catalog.groups.committed(
                self.group_id, state.meta.topic_id, tp.partition
            )
            # a negative committed offset (Kafka stores any: kafkajs's resetOffsets commits
            # -2 for earliest, -1 for latest) is no position: the reset policy applies
            if committed is not None and committed[0] >= 0:
                return committed[0]
        if self.auto_offset_reset == "earliest":
            return state.log.start_offset()
        if self.auto_offset_reset == "latest":
            return self._end(state.log)
        raise NoOffsetForPartition(
            f"group {self.group_id!r} has no committed offset for {tp.topic} partition "
            f"{tp.partition} and auto_offset_reset is 'none'"
        )

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record this consumer returns for `tp`."""
        self._check_open()
        state = self._state(tp)
        tp = self._canonical(tp)
        for record in self._iter_buffer:
            if record.topic == tp.topic and record.partition == tp.partition:
                return record.offset
        if state.position is None:
            state.position = self._reset_position(tp, state)
        return state.position

    def _canonical(self, tp: Any) -> TopicPartition:
        return TopicPartition(self._full(tp[0]), tp[1])

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._check_open()
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidOffset(f"offset must be a non-negative int, got {offset!r}")
        state = self._state(partition)
        state.position = offset
        self._drop_buffered({self._canonical(partition)})

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._check_open()
        for tp in partitions or tuple(self._assigned):
            state = self._state(tp)
            state.position = state.log.start_offset()
            self._drop_buffered({self._canonical(tp)})

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._check_open()
        for tp in partitions or tuple(self._assigned):
            state = self._state(tp)
            state.position = self._end(state.log)
            self._drop_buffered({self._canonical(tp)})

    def _drop_buffered(self, tps: set[TopicPartition]) -> None:
        if self._damaged is not None and self._damaged[0] in tps:
            self._damaged = None  # seeked: its position is the caller's choice now
        if self._iter_buffer and tps:
            self._iter_buffer = deque(
                r for r in self._iter_buffer if (r.topic, r.partition) not in tps
            )

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, state in self._assigned.items() if state.paused}

    def _log_for(self, tp: Any) -> tuple[TopicPartition, PartitionLog, _TopicMeta]:
        tp = self._check_tp(tp)
        state = self._assigned.get(tp)
        if state is not None:
            return tp, state.log, state.meta
        meta = self._topic_meta(tp.topic)
        log = self._cluster.partition_log(
            meta.topic_id, tp.partition, tp.topic, committed=self._committed
        )
        return tp, log, meta

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        self._check_open()
        self._refresh_metadata()  # a log start moved (retention, DeleteRecords) shows now
        result = {}
        for tp in partitions:
            full, log, _ = self._log_for(tp)
            result[tp] = log.start_offset()
        return result

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        self._check_open()
        result = {}
        logs = [self._log_for(tp) for tp in partitions]
        for tp, log, _ in logs:
            result[tp] = log.end_offset()
        if self._committed and logs:
            # read_committed: the last stable offset, as Kafka's consumer answers; the open
            # transactions of every partition in one catalog query
            keys = [(log.topic_id, log.partition) for _, log, _ in logs]
            opens = self._cluster.catalog.transactions.first_open_offsets(keys)
            for tp, log, _ in logs:
                first = opens.get((log.topic_id, log.partition))
                if first is not None:
                    result[tp] = min(result[tp], first)
        return result

    def markers(self, tp: TopicPartition, start: int, end: int) -> list[tuple[int, int, int, bool]]:
        """The transaction markers (Kafka's control records) of a partition at offsets
        start..end-1: (offset, producer id, epoch, True for COMMIT). They hold no message;
        the wire listener answers them as control batches."""
        self._check_open()
        _, log, _ = self._log_for(tp)
        return log.markers(start, end)

    def aborted_ranges(self, tp: TopicPartition, start: int, end: int) -> list[tuple[int, int]]:
        """Where the records of aborted transactions lie in a partition's offsets
        start..end-1: (first, last) offset ranges, in offset order; a record whose offset
        falls in one was aborted (a read_committed reader never sees it). For showing what
        a read_uncommitted reader reads (the consoles' message browsers)."""
        self._check_open()
        _, log, _ = self._log_for(tp)
        return log.aborted_batches(start, end)

    def producers(self, tp: TopicPartition) -> list[ProducerState]:
        """The idempotent and transactional producers active in a partition (Kafka's
        DescribeProducers): id, epoch, last sequence and timestamp, and the first offset of
        its open transaction there (-1: none or not known)."""
        self._check_open()
        _, log, _ = self._log_for(tp)
        return log.producers()

    def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose timestamp is >= the given one."""
        self._check_open()
        result = {}
        for tp, ms in timestamps.items():
            if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
                raise InvalidArgument(f"timestamp for {tp!r} must be a non-negative int ms")
            full, log, meta = self._log_for(tp)
            result[tp] = log.offset_for_time(ms, self._cutoff(meta))
        return result

    # --- committed offsets ----------------------------------------------------------------

    @overload
    def committed(
        self, partition: TopicPartition, metadata: Literal[False] = False
    ) -> int | None: ...
    @overload
    def committed(
        self, partition: TopicPartition, metadata: Literal[True]
    ) -> OffsetAndMetadata | None: ...
    @overload
    def committed(
        self, partition: TopicPartition, metadata: bool
    ) -> int | OffsetAndMetadata | None: ...
    def committed(
        self, partition: TopicPartition, metadata: bool = False
    ) -> int | OffsetAndMetadata | None:
        """The group's committed offset for `partition` (with its metadata string, as an
        `OffsetAndMetadata`, when `metadata` is true), or None."""
        self._check_open()
        if self.group_id is None:
            return None
        tp = self._check_tp(partition)
        self._check_fetch()
        row = self._cluster.catalog.groups.committed(
            self.group_id, self._topic_meta(tp.topic).topic_id, tp.partition
        )
        if row is None:
            return None
        return OffsetAndMetadata(row[0], row[1]) if metadata else row[0]

    def _enter_group(self, perm: str, topic_ids: list[int], *, claim: bool = False) -> None:
        """Check the group's `perm` as this consumer's principal and claim a group nobody
        created (engine.groups.perms); once it has a creator, each permission is checked
        once per consumer. A member that auto-commits needs commit_perm too."""
        assert self.group_id is not None  # only a group's consumers ask
        access = GroupAccess(self._cluster, self.principal)
        wanted = [perm]
        if perm == "join_perm" and self.enable_auto_commit:
            wanted.append("commit_perm")
        for p in wanted:
            if p in self._group_checked:
                continue
            access.enter(self.group_id, p, topic_ids, claim=claim)
            if self._cluster.catalog.groups.creator(self.group_id) is not None:
                self._group_checked.add(p)

    def commit(
        self, offsets: dict[TopicPartition, Any] | None = None, *, member_id: str | None = None
    ) -> None:
        """Commit `offsets` ({tp: OffsetAndMetadata or int}), or every current position.

        A consumer outside the group (assigned partitions, or none) may not commit while
        the group has live members (CommitFailed), unless `member_id` names one of them: a
        `plet serve` listener commits for its Kafka clients so, their generation checked."""
        self._check_open()
        if self.group_id is None:
            raise IllegalState("commit() needs a group_id")
        if offsets is None:
            if self._member is not None:
                self._commit_positions(set(self._assigned))
                return
            offsets = self._positions()
        rows = []
        for tp, value in offsets.items():
            full = self._check_tp(tp)
            if self._member is not None and full not in self._assigned:
                raise CommitFailed(
                    f"{full.topic} partition {full.partition} is not assigned to this member "
                    f"of group {self.group_id!r} (any more): another member may be reading it"
                )
            if isinstance(value, OffsetAndMetadata):
                offset, metadata = value.offset, value.metadata or ""
            else:
                offset, metadata = value, ""
            # any int64, as Kafka stores it (negative ones too: a client resolves them)
            if isinstance(offset, bool) or not isinstance(offset, int) or offset not in _INT64:
                raise InvalidOffset(f"offset for {tp!r} must be a 64-bit int, got {offset!r}")
            rows.append((self._topic_meta(full.topic).topic_id, full.partition, offset, metadata))
        if rows:
            self._enter_group("commit_perm", [r[0] for r in rows], claim=True)
            if self._member is None:
                self._refuse_live_group(member_id)
        self._cluster.catalog.groups.commit_offsets(
            self.group_id, rows, self._cluster.clock.now_ms()
        )

    def _positions(self) -> dict[TopicPartition, int]:
        return {
            tp: self.position(tp)
            for tp, state in self._assigned.items()
            if state.position is not None
        }

    def _refuse_live_group(self, member_id: str | None = None) -> None:
        """A commit from outside the group (Kafka's simple commit) would move its live
        members' offsets under them: Kafka refuses it too (UNKNOWN_MEMBER_ID). Its members
        are engine consumers or Kafka clients of a `plet serve` listener, which publishes
        them in the catalog while they live (`Cluster.publish_group`), so a listener in
        another process counts, and a killed one's stop counting after their session."""
        assert self.group_id is not None  # only a group's consumers commit
        kinds = self._cluster.group_kinds(self.group_id)
        if not kinds:
            return
        if member_id is not None:
            store, now = self._cluster.catalog.groups, self._cluster.clock.now_ms()
            if member_id in {m[0] for m in store.live_members(self.group_id, now)}:
                return
        who = " and ".join(_KINDS[k] for k in sorted(kinds))
        raise CommitFailed(
            f"group {self.group_id!r} has live members ({who}): only they commit its "
            "offsets; stop them first, or join the group"
        )

    def _position_rows(self, tps: set[TopicPartition]) -> list[tuple[int, int, int, str]]:
        """(topic_id, partition, position, "") of the partitions that have a position."""
        rows = []
        for tp in sorted(tps):
            state = self._assigned.get(tp)
            if state is None or state.position is None:
                continue
            rows.append((state.meta.topic_id, tp.partition, self.position(tp), ""))
        return rows

    def _commit_positions(self, tps: set[TopicPartition]) -> None:
        """Commit the positions of `tps`: a member's own partitions, or (auto-commit of a
        consumer outside the group) checked as `commit` checks them; a refused auto-commit
        is logged, as Kafka's clients log it, not raised from poll or close."""
        rows = self._position_rows(tps)
        if rows and self.group_id is not None and self._member is None:
            try:
                self._enter_group("commit_perm", [r[0] for r in rows], claim=True)
                self._refuse_live_group()
            except (CommitFailed, AccessDenied) as exc:
                log.warning("auto-commit of consumer %r skipped: %s", self.client_id, exc)
                rows = []
        if rows and self.group_id is not None:
            self._cluster.catalog.groups.commit_offsets(
                self.group_id, rows, self._cluster.clock.now_ms()
            )
        self._next_commit = self._clock.monotonic() + self.auto_commit_interval_ms / 1000

    def _maybe_auto_commit(self) -> None:
        if self.enable_auto_commit and self._clock.monotonic() >= self._next_commit:
            self._commit_positions(set(self._assigned))

    # --- reading --------------------------------------------------------------------------

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records of the assigned, unpaused partitions; waits up to `timeout_ms` for some.

        With `update_offsets=False` the positions stay where they were (a peek)."""
        if not update_offsets:
            before = {tp: state.position for tp, state in self._assigned.items()}
            try:
                return self.poll(timeout_ms, max_records)
            finally:
                for tp, position in before.items():
                    state = self._assigned.get(tp)
                    if state is not None and position is not None:
                        state.position = position
        self.polls += 1
        return self._poll(timeout_ms, max_records, "poll", self._read_records)

    def poll_arrow(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, Any]:
        """What `poll` reads, as one `pyarrow.RecordBatch` per partition, with the columns
        of Spark's Kafka source (engine.client.arrow: key, value, topic, partition, offset,
        timestamp, timestampType, headers), built from the stored batches' columns with no
        Python object per message. Positions advance, paused partitions are skipped,
        expired messages are hidden and permissions are checked as in `poll`; the key and
        value deserializers are not applied (the columns are bytes). Needs pyarrow and
        numpy, imported here; `max_records` defaults to `max_poll_records`."""
        from engine.client import arrow

        arrow.modules()  # a clear ImportError before anything is read
        return self._poll(timeout_ms, max_records, "poll_arrow", self._read_arrow)

    def poll_arrow_batches(
        self, timeout_ms: int = 0, max_records: int | None = None, *, verbatim: bool = False
    ) -> dict[TopicPartition, list[Any]]:
        """`poll_arrow`, with each partition's records as a list of `pyarrow.RecordBatch`es
        in offset order, one per stored batch read, rather than one joined RecordBatch: no
        key or value is copied (their buffers are the stored batches'). For readers that
        go through the records batch by batch, as the wire listener's fetch does.

        With `verbatim`, a Kafka record batch stored as a client produced it
        (`Producer.send_record_batch`) comes as a `KafkaBatch`, its bytes as stored, whole
        (it may start before the position: Kafka's readers skip those records), unless
        some of its records have expired. It counts as all its records against
        `max_records`."""
        from engine.client import arrow

        arrow.modules()
        read = self._read_verbatim if verbatim else self._read_arrow_batches
        return self._poll(timeout_ms, max_records, "poll_arrow", read)

    def _poll(
        self,
        timeout_ms: int,
        max_records: int | None,
        what: str,
        read: Callable[[TopicPartition, Any, int, int | None], tuple[Any, int]],
    ) -> dict[TopicPartition, Any]:
        """The loop of `poll` and `poll_arrow`: keep the group and commits going, read with
        `read`, wait for appends until `timeout_ms` when there is nothing."""
        self._check_open()
        if not self._assigned and not self._subscription and not self._pattern:
            raise IllegalState(f"{what}() needs subscribe() or assign() first")
        limit = self.max_poll_records if max_records is None else max_records
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument(f"max_records must be >= 1, got {max_records!r}")
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        cluster = self._cluster
        if self._damaged is not None:
            damaged, self._damaged = self._damaged[1], None
            raise damaged
        while True:
            self._refresh_metadata()
            self._maybe_sync_group()
            self._maybe_auto_commit()
            self._reads.maybe_flush()
            seq = cluster.appends.seq
            # records (and deserializers) are made with the collector paused; Arrow makes
            # a few objects a partition (engine.bulk.bulk_records)
            with bulk_records(limit if what == "poll" else 0):
                got = self._fetch(limit, read)
            if got:
                return got
            left = deadline - time.monotonic()
            if left <= 0:
                return {}
            appends = cluster.appends
            idle = _IDLE_WAIT_RUNG_S if appends.hears_others else _IDLE_WAIT_S
            appends.wait(seq, min(left, idle))

    def _fetch(
        self, limit: int, read: Callable[[TopicPartition, Any, int, int | None], tuple[Any, int]]
    ) -> dict[TopicPartition, Any]:
        """Up to `limit` messages of the unpaused partitions, starting at the next partition
        in turn, each partition's as `read` gives them. A damaged batch (`CorruptBatch`)
        stops only its partition, whose position stays before it: the records of the
        others are returned and the error raised by the next poll, or now if there are
        none."""
        out: dict[TopicPartition, Any] = {}
        items = list(self._assigned.items())
        if not items:
            return out
        start = self._rotate % len(items)
        self._rotate += 1
        room = limit
        now_ms = self._clock.now_ms()
        damaged: tuple[TopicPartition, CorruptBatch] | None = None
        for tp, state in items[start:] + items[:start]:
            if state.paused:
                continue
            if state.position is None:
                state.position = self._reset_position(tp, state)
            ttl = state.meta.ttl_s
            cutoff = now_ms - ttl * 1000 if ttl else None
            try:
                got, count = read(tp, state, room, cutoff)
            except CorruptBatch as exc:
                # named as this consumer names it (the wire listener answers by these)
                exc.topic, exc.partition = tp.topic, tp.partition
                damaged = damaged or (tp, exc)
                continue
            if count:
                out[tp] = got
                room -= count
                if room <= 0:
                    break
        if damaged is not None:
            if not out:
                raise damaged[1]
            self._damaged = damaged
        return out

    def _read_records(
        self, tp: TopicPartition, state: Any, room: int, cutoff: int | None
    ) -> tuple[list[ConsumerRecord], int]:
        records, state.position = state.log.read(state.position, room, cutoff)
        if records and (self._key_deserializer or self._value_deserializer):
            records = [self._deserialize(r) for r in records]
        return records, len(records)

    def _read_arrow(
        self, tp: TopicPartition, state: Any, room: int, cutoff: int | None
    ) -> tuple[Any, int]:
        from engine.client import arrow

        chunks, state.position = state.log.read_columns(state.position, room, cutoff)
        if not chunks:
            return None, 0
        batch = arrow.record_batch(tp.topic, tp.partition, chunks, cutoff)
        return batch, batch.num_rows

    def _read_arrow_batches(
        self, tp: TopicPartition, state: Any, room: int, cutoff: int | None
    ) -> tuple[Any, int]:
        from engine.client import arrow

        chunks, state.position = state.log.read_columns(state.position, room, cutoff)
        batches = arrow.record_batches(tp.topic, tp.partition, chunks, cutoff)
        return batches, sum(b.num_rows for b in batches)

    def _read_verbatim(
        self, tp: TopicPartition, state: Any, room: int, cutoff: int | None
    ) -> tuple[Any, int]:
        from engine.client import arrow

        start = state.position
        chunks, state.position = state.log.read_verbatim(start, room, cutoff)
        out: list[Any] = []
        count = 0
        for chunk in chunks:
            if isinstance(chunk, KafkaBatch):
                out.append(chunk)
                count += chunk.last_offset - max(chunk.base_offset, start) + 1
            else:
                for batch in arrow.record_batches(tp.topic, tp.partition, [chunk], cutoff):
                    out.append(batch)
                    count += batch.num_rows
        return out, count

    def _deserialize(self, r: ConsumerRecord) -> ConsumerRecord:
        key = r.key
        if self._key_deserializer is not None and key is not None:
            key = self._key_deserializer(key)
        value = r.value
        if self._value_deserializer is not None and value is not None:
            value = self._value_deserializer(value)
        return r._replace(key=key, value=value)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        if self._iter_buffer:
            return self._iter_buffer.popleft()
        timeout = self.consumer_timeout_ms
        deadline = None if timeout is None else time.monotonic() + timeout / 1000
        while True:
            wait_ms = 1000 if deadline is None else max(0, (deadline - time.monotonic()) * 1000)
            for records in self.poll(timeout_ms=int(min(wait_ms, 1000))).values():
                self._iter_buffer.extend(records)
            if self._iter_buffer:
                return self._iter_buffer.popleft()
            if deadline is not None and time.monotonic() >= deadline:
                raise StopIteration

    def _cutoff(self, meta: _TopicMeta) -> int | None:
        """The expiry cutoff of the topic's ttl now (None: its messages never expire)."""
        if not meta.ttl_s:
            return None
        return self._clock.now_ms() - meta.ttl_s * 1000

    # --- closing --------------------------------------------------------------------------

    def close(self, autocommit: bool = True) -> None:
        """Commit (when auto-commit is on), then leave the group."""
        if self._closed:
            return
        try:
            if self._member is not None:
                self._leave_group(autocommit)
            elif autocommit and self.enable_auto_commit and self._assigned:
                self._commit_positions(set(self._assigned))
            self._reads.flush()
        finally:
            self._closed = True
            self._assigned = {}
            self._iter_buffer.clear()
            if self._member is not None:
                self._member.stop()

    def _leave_group(self, autocommit: bool = True) -> None:
        """Leave at once (committing when auto-commit is on): the others rebalance now."""
        member, self._member = self._member, None
        if member is None:
            return
        commits = (
            self._position_rows(set(self._assigned))
            if autocommit and self.enable_auto_commit
            else []
        )
        if self._listener is not None and self._assigned:
            self._listener.on_partitions_revoked(set(self._assigned))
        member.leave(commits)
        self._pending = set()

    def _check_open(self) -> None:
        if self._closed:
            raise Closed("this consumer is closed")
        if self._cluster.closed:
            raise Closed(f"the cluster {self._cluster.path} of this consumer is closed")

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
