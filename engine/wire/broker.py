"""What the listener's connections share: the cluster, topic names, the engine producers
(one per durability), producer ids and the idempotence table."""

from __future__ import annotations

import contextlib
import copy
import itertools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from engine import Cluster, Principal, Producer, TopicPartition, errors, names
from engine.records import TopicInfo
from engine.wire import codes
from engine.wire.coordinator import GroupCoordinator
from engine.wire.limits import DEFAULT_MAX_FETCH_WAIT_MS, DEFAULT_MAX_LISTED_TOPICS
from engine.wire.names import DEFAULT_SEPARATOR, WireNames
from engine.wire.park import Signal

NODE_ID = 0
# The last few batches per producer and partition, as Kafka keeps (a producer has at most
# five requests in flight): a resend of any of them is answered from here.
_REMEMBERED_BATCHES = 5
# Bounds of the idempotence state, per principal (a SASL user, or the listener's own for
# every client without SASL), so one user's producers never push out another's: the least
# recently used go first. A producer id that went is refused (UNKNOWN_PRODUCER_ID: the
# client asks for a new one); a (producer, partition) sequence that went starts anew.
_MAX_PRODUCER_IDS = 10_000
_MAX_SEQUENCES = 100_000


@dataclass
class _Owned:
    """The idempotence state of one principal: the producer ids the listener issued to it
    (with their epoch) and its sequences by (producer id, topic, partition)."""

    ids: OrderedDict[int, int] = field(default_factory=OrderedDict)
    sequences: OrderedDict[tuple[int, str, int], _Sequence] = field(default_factory=OrderedDict)


@dataclass
class _Sequence:
    epoch: int
    last_seq: int = -1
    # (base sequence, last sequence, base offset) of the last batches written
    recent: list[tuple[int, int, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Broker:
    """Node 0 of a one-node Kafka cluster backed by an engine cluster."""

    def __init__(
        self,
        cluster: Cluster,
        default_stream: str,
        host: str,
        port: int,
        *,
        stream_separator: str | None = DEFAULT_SEPARATOR,
        max_listed_topics: int = DEFAULT_MAX_LISTED_TOPICS,
    ) -> None:
        self.naming = WireNames(default_stream, stream_separator)
        self.cluster = cluster
        self.default_stream = default_stream
        self.max_listed_topics = max_listed_topics
        self.host = host
        self.port = port
        self._stream_ready = False
        self.closing = threading.Event()  # long polls end early when set
        self.max_fetch_wait_ms = DEFAULT_MAX_FETCH_WAIT_MS
        # fired after every in-process append: parked fetches poll again (handlers/fetch.py)
        self.appended = Signal()
        cluster.appends.listen(self.appended.fire)
        self._lock = threading.Lock()
        # engine producers by (principal, durability): a SASL user's are theirs (ACEs)
        self._producers: dict[tuple[Principal | None, object], Producer] = {}
        self._principal: Principal | None = None  # None: the cluster's own
        # producer ids: unique across restarts of the listener (epoch milliseconds, shifted)
        self._ids = itertools.count(int(time.time() * 1000) << 12)
        self._owned: dict[Principal | None, _Owned] = {}
        self.groups = GroupCoordinator(self.closing, self)  # Join/Sync/Heartbeat/Leave

    # --- names ----------------------------------------------------------------------------

    def full_name(self, name: str) -> str:
        """The engine's full name of a wire topic name (engine.wire.names); raises
        errors.InvalidName."""
        stream, topic = self.naming.split(name)
        if stream == self.default_stream and not name.startswith("/"):
            self.ensure_default_stream()
        return names.full_name(stream, topic)

    def ensure_default_stream(self) -> None:
        """The default stream is created on first use with default policies, as the
        facade does."""
        if self._stream_ready:
            return
        try:
            self.cluster.stream(self.default_stream)
        except errors.UnknownStream:
            with contextlib.suppress(errors.StreamExists):
                self.cluster.create_stream(self.default_stream)
        self._stream_ready = True

    def topic(self, name: str) -> TopicInfo:
        """The topic of a wire name; raises InvalidName, UnknownTopic, UnknownStream."""
        return self.cluster.topic(self.full_name(name))

    def resolve(self, name: str, partition: int) -> tuple[int, TopicPartition | None]:
        """(Kafka error code, the engine's TopicPartition) of a wire topic name and
        partition to read or commit, with the consume permission checked."""
        try:
            full = self.full_name(name)
            info = self.cluster.topic(full)
            if not 0 <= partition < len(info.partitions):
                return codes.UNKNOWN_TOPIC_OR_PARTITION, None
            self.cluster.authorize(full.rpartition(":")[0], "consume_perm")
        except errors.PartitionletError as exc:
            return codes.of(exc), None
        return codes.NONE, TopicPartition(full, partition)

    def listing(
        self, after: str | None = None, limit: int | None = None
    ) -> list[tuple[str, str, int]]:
        """(wire name, full name, partition count) of the topics Metadata for all topics
        lists, after the full name `after`, at most `limit` (default and cap:
        `max_listed_topics`; engine.wire.names.WireNames.listing). Names are not secret
        (as in the consoles): every stream's topics are listed to every user."""
        self.ensure_default_stream()
        bound = self.max_listed_topics if limit is None else min(limit, self.max_listed_topics)
        return list(self.naming.listing(self.cluster, bound, after))

    def shown(self, full: str) -> str:
        """A full name as the listener names it to a client that did not name it: its
        Kafka-legal name where it has one, else the full name."""
        return self.naming.shown(full)

    # --- producing ------------------------------------------------------------------------

    def producer(self, acks: int) -> Producer:
        """The engine producer of a wire acks value: -1 -> "all" (fsync), 1 -> 1, 0 -> 0,
        acting as this broker's principal."""
        modes: dict[int, int | str] = {0: 0, 1: 1, -1: "all"}
        mode = modes[acks]
        key = (self._principal, mode)
        with self._lock:
            producer = self._producers.get(key)
            if producer is None:
                producer = self._producers[key] = Producer(self.cluster, acks=mode)
            return producer

    def as_principal(self, principal: Principal) -> Broker:
        """A view of this broker whose cluster acts as `principal` (a SASL user), so ACEs
        apply to everything its connection does. It is a shallow copy: it shares the
        producers, ids, sequences and every other mutable state made in `__init__`."""
        # the default stream is made by the listener's principal, never by the first user
        self.ensure_default_stream()
        view = copy.copy(self)
        view.cluster = self.cluster.as_principal(principal)
        view._principal = principal
        return view

    def _owned_state(self) -> _Owned:
        """This view's principal's idempotence state (under `_lock`)."""
        owned = self._owned.get(self._principal)
        if owned is None:
            owned = self._owned[self._principal] = _Owned()
        return owned

    def new_producer_id(self) -> int:
        """A producer id for InitProducerId, issued to this view's principal (epoch 0)."""
        with self._lock:
            producer_id = next(self._ids)
            ids = self._owned_state().ids
            ids[producer_id] = 0
            if len(ids) > _MAX_PRODUCER_IDS:
                ids.popitem(last=False)
            return producer_id

    def check_producer(self, producer_id: int, epoch: int) -> int:
        """The error of an idempotent batch's producer id and epoch: Kafka's
        UNKNOWN_PRODUCER_ID for an id this listener did not issue to this principal (made
        up, another user's, or from before a restart), INVALID_PRODUCER_EPOCH for another
        epoch than it issued."""
        with self._lock:
            ids = self._owned_state().ids
            issued = ids.get(producer_id)
            if issued is None:
                return codes.UNKNOWN_PRODUCER_ID
            ids.move_to_end(producer_id)
        return codes.NONE if epoch == issued else codes.INVALID_PRODUCER_EPOCH

    def sequence(self, producer_id: int, epoch: int, full: str, partition: int) -> _Sequence:
        key = (producer_id, full, partition)
        with self._lock:
            sequences = self._owned_state().sequences
            state = sequences.get(key)
            if state is None:
                if len(sequences) >= _MAX_SEQUENCES:
                    sequences.popitem(last=False)
                state = sequences[key] = _Sequence(epoch)
            else:
                sequences.move_to_end(key)
            return state

    @staticmethod
    def remember(state: _Sequence, base_seq: int, last_seq: int, base_offset: int) -> None:
        state.last_seq = last_seq
        state.recent.append((base_seq, last_seq, base_offset))
        del state.recent[:-_REMEMBERED_BATCHES]

    def close(self) -> None:
        self.closing.set()
        self.cluster.appends.unlisten(self.appended.fire)
        self.groups.close()  # withdraws the members it showed the engine
        with self._lock:
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            producer.close()
