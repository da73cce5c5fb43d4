"""Fetch and ListOffsets: reads through the connection's engine `Consumer` (assign and seek,
no group), so the engine checks the consume permission, hides expired messages and counts
the reads as heat. Fetch reads with `poll_arrow`: columns, no Python object per message,
which the codec turns into record batches. A fetch long-polls without holding a thread: it
parks (engine.wire.park) on the cluster's append signal, so an in-process produce (a wire
producer included) wakes it at once, and its wait is capped by the listener's
`max_fetch_wait_ms`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)

from engine import Consumer, KafkaBatch, TopicPartition, errors
from engine.wire import codec, codes
from engine.wire.connection import Session
from engine.wire.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, Cached, FetchSession, Key
from engine.wire.park import Park
from engine.wire.registry import api

if TYPE_CHECKING:
    import pyarrow as pa

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3  # KIP-734: the offset of the message with the largest timestamp
# KIP-405 (v8): the log start on local storage, KIP-1005 (v9): the last offset in tiered
# storage, and KIP-1023 (v11): the first offset not yet copied there. Archived partitionlets
# stay part of the log every reader reads (no offset lives only remotely), so, as a Kafka
# broker without remote storage answers: the log start, -1 (nothing tiered) and -1 (nothing
# pending, UnifiedLog.fetchEarliestPendingUploadOffset), the last two with leader epoch -1.
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
# the first version that carries each negative timestamp (Kafka's
# ReplicaManager.isListOffsetsTimestampUnsupported: another one is UNSUPPORTED_VERSION)
_SPEC_SINCE = {
    LATEST: 0,
    EARLIEST: 0,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}
# a parked fetch polls again after this many milliseconds even without an in-process append
# (appends of other processes wake nobody)
_SLICE_MS = 500
_POLL_RECORDS = 10000
# a connection's list of the fetch sessions it made drops evicted ones past this size
_PRUNE_SESSION_IDS = 16


@dataclass(slots=True)
class _Wanted:
    """One partition of a fetch: what the client asked for, and what is read for it."""

    error: int
    tp: TopicPartition | None  # None when the partition is not known (error says why)
    offset: int
    max_bytes: int
    # read, in offset order: Arrow records, and batches stored as their producer sent them
    records: list[pa.RecordBatch | KafkaBatch] = field(default_factory=list)
    size: int = 0  # bytes of `records` as record batches
    controls: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, batch)


def consumer_of(session: Session, committed: bool = False) -> Consumer:
    """The connection's reader: read_uncommitted, or read_committed (up to the last stable
    offset, without aborted transactions' messages: filtered here, so the answer carries
    no aborted transaction for the client to filter)."""
    if committed:
        if session.committed_consumer is None:
            session.committed_consumer = Consumer(
                session.broker.cluster,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level="read_committed",
            )
        return session.committed_consumer
    if session.consumer is None:
        session.consumer = Consumer(
            session.broker.cluster, enable_auto_commit=False, auto_offset_reset="earliest"
        )
    return session.consumer


def _parts(r: pa.RecordBatch | KafkaBatch) -> list[bytes | bytearray | memoryview]:
    if isinstance(r, KafkaBatch):
        return codec.served(r)  # its bytes as stored: nothing decoded, nothing encoded
    return codec.encode_arrow_parts(r)


def _records(w: _Wanted) -> list[bytes | bytearray | memoryview]:
    """The parts of the partition's record batches, with its control batches in offset
    order."""
    if not w.controls:
        return [part for r in w.records for part in _parts(r)]
    # A record batch read may span a marker's offset (stored batches are merged): cut it
    # there, since a client takes the batch after the last one as its next fetch offset,
    # so a data batch that ended past a control batch placed after it would be fetched
    # again (librdkafka delivered its records twice). A batch stored as its producer sent
    # it is one producer's run of offsets, which no marker lies inside.
    marks = np.array([offset for offset, _ in w.controls], dtype=np.int64)
    parts: list[tuple[int, list[bytes | bytearray | memoryview]]] = []
    for r in w.records:
        if isinstance(r, KafkaBatch):
            parts.append((r.base_offset, codec.served(r)))
            continue
        offsets = r.column("offset").to_numpy()
        cuts = np.searchsorted(offsets, marks).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, r.num_rows], strict=True):
            if hi > lo:
                parts.append((int(offsets[lo]), codec.encode_arrow_parts(r.slice(lo, hi - lo))))
    parts += [(offset, [control]) for offset, control in w.controls]
    parts.sort(key=lambda part: part[0])
    return [piece for _, pieces in parts for piece in pieces]


# from v4 (record batch v2) to v12 (flexible); v13 and later name topics by id
@api(FetchRequest, FetchResponse, (4, 12))
def fetch(
    session: Session, request: FetchRequest, version: int
) -> FetchResponse | codec.Spliced | Park:
    broker = session.broker
    sessions = broker.fetch_sessions
    asked: dict[Key, tuple[int, int]] = {}  # (fetch offset, partition max bytes)
    for topic in request.topics:
        for p in topic.partitions:
            asked[(topic.topic, p.partition)] = (p.fetch_offset, max(p.partition_max_bytes, 1))
    # sessions came with v7 (KIP-227); before, every fetch is a full one without a session
    session_id, epoch = (request.session_id, request.session_epoch) if version >= 7 else (0, -1)
    fetch_session: FetchSession | None = None
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != 0:  # a full fetch closes the session it names, as in Kafka
            sessions.close(broker.principal, session_id)
            session.fetch_session_ids.discard(session_id)
        create = epoch == INITIAL_EPOCH
        sessions.count("full" if create else "sessionless")
    else:
        forgotten = [(t.topic, p) for t in request.forgotten_topics_data for p in t.partitions]
        error, fetch_session = sessions.update(
            broker.principal, session_id, epoch, asked, forgotten
        )
        if error != codes.NONE:
            return FetchResponse(throttle_time_ms=0, error_code=error, session_id=0, responses=[])
        create = False
        if fetch_session is None:  # every partition forgotten: the session is closed
            session.fetch_session_ids.discard(session_id)
            sessions.count("sessionless")
        else:  # the session's partitions, not only those the request names
            asked = {k: (c.fetch_offset, c.max_bytes) for k, c in fetch_session.partitions.items()}
    consumer = consumer_of(session)  # offsets: the log's own ends
    committed = version >= 4 and request.isolation_level == 1
    reader = consumer_of(session, committed) if committed else consumer
    wanted: dict[Key, _Wanted] = {}
    resolved: dict[str, Any] = {}  # each topic described once
    for (name, partition), (offset, max_bytes) in asked.items():
        error, tp = broker.resolve(name, partition, resolved)
        wanted[(name, partition)] = _Wanted(error, tp, offset, max_bytes)
    live = {w.tp: w for w in wanted.values() if w.error == codes.NONE and w.tp is not None}
    begins: dict[TopicPartition, int] = {}
    if live:
        begins = consumer.beginning_offsets(live)
        ends = consumer.end_offsets(live)
        for tp, w in list(live.items()):
            if not begins[tp] <= w.offset <= ends[tp]:
                w.error = codes.OFFSET_OUT_OF_RANGE
                del live[tp]
    reader.assign(list(live))
    for tp, w in live.items():
        reader.seek(tp, w.offset)
    # the wait is capped by the listener (a client may ask for days)
    wait_ms = min(max(request.max_wait_ms, 0), broker.max_fetch_wait_ms)
    return _LongPoll(
        session,
        reader,
        consumer,
        wanted,
        live,
        begins,
        deadline=time.monotonic() + wait_ms / 1000,
        min_bytes=max(request.min_bytes, 0),
        max_bytes=request.max_bytes if version >= 3 and request.max_bytes > 0 else 1 << 31,
        fetch_session=fetch_session,
        create_session=create,
    ).step()


@dataclass(slots=True)
class _LongPoll:
    """One fetch between its polls: `step` reads what is there without waiting, and parks
    on the cluster's append signal while min_bytes is not met and the wait is not over
    (engine.wire.park: no thread waits)."""

    session: Session
    consumer: Consumer  # reads, read_committed or not
    offsets: Consumer  # the log's ends (read_uncommitted)
    wanted: dict[Key, _Wanted]
    live: dict[TopicPartition, _Wanted]
    begins: dict[TopicPartition, int]
    deadline: float
    min_bytes: int
    max_bytes: int
    fetch_session: FetchSession | None  # an incremental fetch's session
    create_session: bool  # a full fetch that asks for a session (epoch 0)
    total: int = 0

    def step(self) -> codec.Spliced | Park:
        consumer, live = self.consumer, self.live
        signal = self.session.broker.appended
        seq = signal.seq  # before the poll: an append after it wakes the park
        while live:
            # min_bytes 0 asks for an answer at once, data or not; once min_bytes is met,
            # only what is already there is added (no more waiting), up to the byte limits,
            # so one response carries as much as the client allows, not one poll's worth
            try:
                got = consumer.poll_arrow_batches(
                    timeout_ms=0, max_records=_POLL_RECORDS, verbatim=True
                )
            except errors.CorruptBatch as exc:
                # a damaged stored batch: its partition answers CORRUPT_MESSAGE (as a
                # Kafka broker does), after what it read before the damage; the others
                # go on
                damaged = live.get(TopicPartition(exc.topic or "", exc.partition or 0))
                if damaged is None or damaged.tp is None:
                    raise
                consumer.pause(damaged.tp)
                if not damaged.records:
                    damaged.error = codes.CORRUPT_MESSAGE
                if consumer.paused() >= set(live):
                    break
                continue
            if not got:
                break
            for tp, batches in got.items():
                w = live.get(tp)
                if w is None:
                    continue
                for batch in batches:
                    if not self._take(w, batch):
                        consumer.pause(tp)  # the rest is read again by the next fetch
                        break
            if self.total >= self.max_bytes or consumer.paused() >= set(live):
                break
        now = time.monotonic()
        if (
            live
            and self.total < self.min_bytes
            and self.total < self.max_bytes
            and not consumer.paused() >= set(live)
            and now < self.deadline
            and not self.session.broker.closing.is_set()
        ):
            # appends of other processes are seen by polling: look again every slice
            return Park(self.step, signal, seq, min(self.deadline, now + _SLICE_MS / 1000))
        ends: dict[TopicPartition, int] = {}
        stable: dict[TopicPartition, int] = {}
        if live:
            paused = consumer.paused()
            consumer.resume(*live)
            ends = self.offsets.end_offsets(live)
            stable = (
                consumer.end_offsets(live)
                if consumer.isolation_level != "read_uncommitted"
                else ends
            )
            self._add_markers(paused)
        return self._response(ends, stable)

    def _take(self, w: _Wanted, batch: Any) -> bool:
        """Add what of `batch` fits the partition's and the response's byte limits to the
        partition's records; False when some of it did not fit."""
        room = min(w.max_bytes - w.size, self.max_bytes - self.total)
        if isinstance(batch, KafkaBatch):  # whole or not at all, as Kafka serves a batch
            size = len(batch.data)
            if size > room and w.records:
                return False
            w.records.append(batch)
            w.size += size
            self.total += size
            return True
        sizes = codec.cumulative_sizes(batch)
        # Kafka's rule: the first record always goes, so a big one cannot block a
        # consumer; after that the partition's and the response's limits hold.
        take = max(int(sizes.searchsorted(room, side="right")), 0 if w.records else 1)
        if take:
            w.records.append(batch.slice(0, take) if take < batch.num_rows else batch)
            w.size += int(sizes[take - 1])
            self.total += int(sizes[take - 1])
        return take == int(batch.num_rows)

    def _add_markers(self, paused: set[TopicPartition]) -> None:
        """Answer the transaction markers among what was read as control batches, in offset
        order among the records: a client moves past them (a marker last would otherwise
        leave it one short of the end forever)."""
        consumer = self.consumer
        for tp, w in self.live.items():
            if w.records and tp in paused:  # cut by the byte limits: up to the last taken
                last = w.records[-1]
                if isinstance(last, KafkaBatch):
                    upto = last.last_offset + 1
                elif last.num_rows:
                    upto = int(last.column("offset")[last.num_rows - 1].as_py()) + 1
                else:
                    upto = w.offset
            else:
                upto = consumer.position(tp)
            if upto <= w.offset:
                continue
            markers = consumer.markers(tp, w.offset, upto)
            if not markers:
                continue
            w.controls = [
                (offset, codec.encode_control(offset, pid, epoch, commit, 0))
                for offset, pid, epoch, commit in markers
            ]

    def _response(
        self, ends: dict[TopicPartition, int], stable: dict[TopicPartition, int]
    ) -> codec.Spliced:
        """The answer: every partition for a full fetch; for an incremental one only those
        with records, an error, or a high watermark or log start that changed since the
        session's last answer (Kafka's IncrementalFetchContext)."""
        session, fetch_session = self.session, self.fetch_session
        sessions = session.broker.fetch_sessions
        incremental = fetch_session is not None
        if self.create_session:
            fetch_session = sessions.create(
                session.broker.principal,
                session,
                session.broker.principal is not None,
                {k: Cached(w.offset, w.max_bytes) for k, w in self.wanted.items()},
            )
            if fetch_session is not None:
                ids = session.fetch_session_ids
                if len(ids) >= _PRUNE_SESSION_IDS:  # a client making session after session
                    ids.intersection_update(sessions.alive(ids))
                ids.add(fetch_session.id)
        R = FetchResponse.FetchableTopicResponse
        P = R.PartitionData
        by_topic: dict[str, list[FetchResponse.FetchableTopicResponse.PartitionData]] = {}
        spliced = codec.Spliced()
        for key, w in self.wanted.items():
            error, tp, records = w.error, w.tp, w.records
            high = ends.get(tp, -1) if tp is not None else -1
            lso = stable.get(tp, high) if tp is not None else -1
            log_start = self.begins.get(tp, -1) if tp is not None else -1
            if fetch_session is not None:
                changed = sessions.sent(fetch_session, key, high, log_start)
                if incremental and not (records or w.controls or error or changed):
                    continue
            by_topic.setdefault(key[0], []).append(
                P(
                    partition_index=key[1],
                    error_code=error,
                    high_watermark=high,
                    last_stable_offset=lso,
                    log_start_offset=log_start,
                    aborted_transactions=[],
                    preferred_read_replica=-1,
                    records=spliced.hold(_records(w)),
                )
            )
        spliced.response = FetchResponse(
            throttle_time_ms=0,
            error_code=codes.NONE,
            session_id=fetch_session.id if fetch_session is not None else 0,
            responses=[R(topic=name, partitions=parts) for name, parts in by_topic.items()],
        )
        return spliced


# from v1 to v7 (flexible from v6); v8, v9 and v11 add tiered storage lookups, v10 a
# timeout for remote lookups (KIP-1075): every answer here is at once
@api(ListOffsetsRequest, ListOffsetsResponse, (1, 11))
def list_offsets(
    session: Session, request: ListOffsetsRequest, version: int
) -> ListOffsetsResponse:
    consumer = consumer_of(session)
    R = ListOffsetsResponse.ListOffsetsTopicResponse
    P = R.ListOffsetsPartitionResponse
    topics = []
    resolved: dict[str, Any] = {}  # each topic described once
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            error, tp = session.broker.resolve(topic.name, p.partition_index, resolved)
            offset, timestamp, epoch = -1, -1, 0
            if tp is not None and not _supported(p.timestamp, version):
                error, tp = codes.UNSUPPORTED_VERSION, None
            if tp is not None:
                try:
                    if p.timestamp == LATEST:
                        # read_committed (isolation level 1, v2+): the last stable offset
                        latest = consumer_of(session, version >= 2 and request.isolation_level == 1)
                        offset = latest.end_offsets([tp])[tp]
                    elif p.timestamp in (EARLIEST, EARLIEST_LOCAL):
                        offset = consumer.beginning_offsets([tp])[tp]
                    elif p.timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
                        consumer.beginning_offsets([tp])  # the checks of a read
                        epoch = -1
                    elif p.timestamp == MAX_TIMESTAMP:
                        offset, timestamp = _max_timestamp(session, consumer, tp)
                    else:
                        found = consumer.offsets_for_times({tp: p.timestamp})[tp]
                        if found is not None:
                            offset, timestamp = found.offset, found.timestamp
                except errors.PartitionletError as exc:
                    error = codes.of(exc)
            parts.append(
                P(
                    partition_index=p.partition_index,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics.append(R(name=topic.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _supported(timestamp: int, version: int) -> bool:
    """Whether ListOffsets `version` carries `timestamp`: any time, and the negative specs
    from their version on (Kafka's ReplicaManager.isListOffsetsTimestampUnsupported)."""
    return timestamp >= 0 or version >= _SPEC_SINCE.get(timestamp, version + 1)


def _max_timestamp(session: Session, consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    """(offset, timestamp) of the first message with the partition's largest timestamp, or
    (-1, -1) for a partition with none, as Kafka answers."""
    info = session.broker.cluster.topic(tp.topic).partitions[tp.partition]
    if info.last_timestamp is None or info.log_end_offset == info.log_start_offset:
        return -1, -1
    found = consumer.offsets_for_times({tp: info.last_timestamp})[tp]
    if found is None:  # the newest messages expired since the partition was described
        return -1, -1
    return found.offset, found.timestamp
