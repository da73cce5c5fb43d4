"""What the listener's connections share: the cluster, topic names, the engine producers
(one per durability), producer ids and the idempotence table."""

from __future__ import annotations

import contextlib
import copy
import itertools
import threading
import time
from dataclasses import dataclass, field

from engine import Cluster, Principal, Producer, TopicPartition, errors, names
from engine.records import TopicInfo
from engine.wire import codes
from engine.wire.coordinator import GroupCoordinator
from engine.wire.park import Signal

NODE_ID = 0
# The last few batches per producer and partition, as Kafka keeps (a producer has at most
# five requests in flight): a resend of any of them is answered from here.
_REMEMBERED_BATCHES = 5
# Bound on the idempotence table: the oldest (producer, partition) entries go first; a
# producer that comes back after that starts a new sequence as an unknown producer would.
_MAX_SEQUENCES = 100_000
# Kafka's fetch.max.wait.ms is the client's; a listener caps it so a parked fetch ends
DEFAULT_MAX_FETCH_WAIT_MS = 30_000


@dataclass
class _Sequence:
    epoch: int
    last_seq: int = -1
    # (base sequence, last sequence, base offset) of the last batches written
    recent: list[tuple[int, int, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Broker:
    """Node 0 of a one-node Kafka cluster backed by an engine cluster."""

    def __init__(self, cluster: Cluster, default_stream: str, host: str, port: int) -> None:
        names.validate_stream_path(default_stream)
        self.cluster = cluster
        self.default_stream = default_stream
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
        self._sequences: dict[tuple[int, str, int], _Sequence] = {}
        self.groups = GroupCoordinator(self.closing, self)  # Join/Sync/Heartbeat/Leave

    # --- names ----------------------------------------------------------------------------

    def full_name(self, name: str) -> str:
        """The engine's full name of a wire topic name (engine.kafka's rules); raises
        errors.InvalidName."""
        if not isinstance(name, str):
            raise errors.InvalidName(f"topic name must be a string, got {name!r}")
        full = names.resolve(name, self.default_stream)
        if not name.startswith("/"):
            self.ensure_default_stream()
        return full

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

    def default_topics(self) -> list[str]:
        self.ensure_default_stream()
        return [t.name for t in self.cluster.topics(self.default_stream)]

    def shown(self, full: str) -> str:
        """A full name as a wire client sees it when it asks for all topics."""
        stream, _, topic = full.rpartition(":")
        return topic if stream == self.default_stream else full

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

    def new_producer_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def sequence(self, producer_id: int, epoch: int, full: str, partition: int) -> _Sequence:
        key = (producer_id, full, partition)
        with self._lock:
            state = self._sequences.get(key)
            if state is None:
                if len(self._sequences) >= _MAX_SEQUENCES:
                    del self._sequences[next(iter(self._sequences))]
                state = self._sequences[key] = _Sequence(epoch)
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
