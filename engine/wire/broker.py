"""What the listener's connections share: the cluster, topic names, the engine producers
(one per durability) and the producer ids it has checked (the sequences are the stored
batches', engine.storage.volume)."""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections import OrderedDict

from engine import Cluster, Principal, Producer, TopicPartition, errors, names
from engine.records import TopicInfo
from engine.wire import codes
from engine.wire.coordinator import GroupCoordinator
from engine.wire.fetch_sessions import FetchSessions
from engine.wire.limits import DEFAULT_MAX_FETCH_WAIT_MS, DEFAULT_MAX_LISTED_TOPICS
from engine.wire.names import DEFAULT_SEPARATOR, WireNames
from engine.wire.park import Signal

NODE_ID = 0
# Producer ids this listener has checked, per principal, the least recently used going
# first; one is looked up in the catalog again after a minute (it may have expired).
_MAX_PRODUCER_IDS = 10_000
_PRODUCER_ID_TTL_S = 60.0
# Batches of one producer to one partition are appended one at a time, in the order their
# requests arrive (each waits for its append): a lock per (producer, partition), striped.
_SEQUENCE_LOCKS = 256
# a topic's (error, full name, partition count, consume permission's error)
_Resolved = tuple[int, str, int, int]


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
        # Kafka's listeners and advertised.listeners configs (DescribeConfigs of the broker);
        # the server sets them once it is bound
        self.listeners = f"PLAINTEXT://{host}:{port}"
        self.advertised_listeners = self.listeners
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
        # (principal, producer id) -> (its epoch, when looked up): the catalog issues them
        self._producer_ids: OrderedDict[tuple[Principal | None, int], tuple[int, float]] = (
            OrderedDict()
        )
        self._sequence_locks = [threading.Lock() for _ in range(_SEQUENCE_LOCKS)]
        self.groups = GroupCoordinator(self.closing, self)  # Join/Sync/Heartbeat/Leave
        self.fetch_sessions = FetchSessions()  # KIP-227 (handlers/fetch.py)

    @property
    def principal(self) -> Principal | None:
        """The principal this view acts as (None: the listener's own, without SASL)."""
        return self._principal

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

    def resolve(
        self, name: str, partition: int, cache: dict[str, _Resolved] | None = None
    ) -> tuple[int, TopicPartition | None]:
        """(Kafka error code, the engine's TopicPartition) of a wire topic name and
        partition to read or commit, with the consume permission checked. `cache` (one
        request's) keeps each topic's answer: a catalog row and a permission check, once
        per request instead of once per partition."""
        found = cache.get(name) if cache is not None else None
        if found is None:
            found = self._resolve_topic(name)
            if cache is not None:
                cache[name] = found
        error, full, count, denied = found
        if error != codes.NONE:
            return error, None
        if not 0 <= partition < count:
            return codes.UNKNOWN_TOPIC_OR_PARTITION, None
        if denied != codes.NONE:
            return denied, None
        return codes.NONE, TopicPartition(full, partition)

    def _resolve_topic(self, name: str) -> _Resolved:
        try:
            full = self.full_name(name)
            count = self.cluster.partition_count(full)
        except errors.PartitionletError as exc:
            return codes.of(exc), "", 0, codes.NONE
        try:
            self.cluster.authorize(full.rpartition(":")[0], "consume_perm")
        except errors.PartitionletError as exc:
            return codes.NONE, full, count, codes.of(exc)
        return codes.NONE, full, count, codes.NONE

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

    def new_producer_id(self) -> tuple[int, int]:
        """(producer id, epoch) for InitProducerId, issued by the cluster to this view's
        principal, so that every listener of the cluster, and this one after a restart,
        knows it."""
        producer_id, epoch = self.cluster.init_producer_id()
        with self._lock:
            self._remember_producer(producer_id, epoch)
        return producer_id, epoch

    def init_transactions(self, transactional_id: str, timeout_ms: int) -> tuple[int, int]:
        """(producer id, epoch) of a transactional id from the engine's coordinator
        (engine.client.transactions): older producers of it are fenced."""
        from engine.client.transactions import Transactions

        producer_id, epoch = Transactions(self.cluster).init(transactional_id, timeout_ms)
        with self._lock:
            self._remember_producer(producer_id, epoch)
        return producer_id, epoch

    def check_producer(self, producer_id: int, epoch: int) -> int:
        """The error of an idempotent batch's producer id and epoch: Kafka's
        UNKNOWN_PRODUCER_ID for an id the cluster did not issue to this principal (made
        up, another user's, or expired), INVALID_PRODUCER_EPOCH for another epoch."""
        key = (self._principal, producer_id)
        now = time.monotonic()
        with self._lock:
            known = self._producer_ids.get(key)
            if known is not None and now - known[1] < _PRODUCER_ID_TTL_S:
                self._producer_ids.move_to_end(key)
                issued: int | None = known[0]
            else:
                issued = None
        if issued is None:
            issued = self.cluster.producer_epoch(producer_id)
            if issued is None:
                return codes.UNKNOWN_PRODUCER_ID
            with self._lock:
                self._remember_producer(producer_id, issued)
        return codes.NONE if epoch == issued else codes.INVALID_PRODUCER_EPOCH

    def _remember_producer(self, producer_id: int, epoch: int) -> None:
        ids = self._producer_ids
        ids[(self._principal, producer_id)] = (epoch, time.monotonic())
        ids.move_to_end((self._principal, producer_id))
        if len(ids) > _MAX_PRODUCER_IDS:
            ids.popitem(last=False)

    def sequence_lock(self, producer_id: int, full: str, partition: int) -> threading.Lock:
        """The lock that orders one producer's batches to one partition."""
        return self._sequence_locks[hash((producer_id, full, partition)) % _SEQUENCE_LOCKS]

    def close(self) -> None:
        self.closing.set()
        self.cluster.appends.unlisten(self.appended.fire)
        self.groups.close()  # withdraws the members it showed the engine
        with self._lock:
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            producer.close()
