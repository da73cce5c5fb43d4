"""Fetch and ListOffsets: reads through the connection's engine `Consumer` (assign and seek,
no group), so the engine checks the consume permission, hides expired messages and counts
the reads as heat. Fetch reads with `poll_arrow`: columns, no Python object per message,
which the codec turns into record batches. A fetch long-polls: the consumer's poll waits on the cluster's append
signal, so an in-process produce (a wire producer included) wakes it at once."""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)

from engine import Consumer, TopicPartition, errors
from engine.wire import codec, codes
from engine.wire.registry import api

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3  # KIP-734: the offset of the message with the largest timestamp
# a poll waits in slices of this many milliseconds, so a closing server ends a long poll soon
_SLICE_MS = 500
_POLL_RECORDS = 10000


def consumer_of(session: Any) -> Consumer:
    if session.consumer is None:
        session.consumer = Consumer(
            session.broker.cluster, enable_auto_commit=False, auto_offset_reset="earliest"
        )
    return session.consumer


# from v4 (record batch v2) to v12 (flexible); v13 and later name topics by id
@api(FetchRequest, FetchResponse, (4, 12))
def fetch(session: Any, request: Any, version: int) -> Any:
    consumer = consumer_of(session)
    closing = session.broker.closing
    # (topic name, partition) -> [error, tp, fetch offset, max bytes, records, bytes]
    wanted: dict[tuple[str, int], list[Any]] = {}
    for topic in request.topics:
        for p in topic.partitions:
            error, tp = session.broker.resolve(topic.topic, p.partition)
            wanted[(topic.topic, p.partition)] = [
                error,
                tp,
                p.fetch_offset,
                max(p.partition_max_bytes, 1),
                [],
                0,
            ]
    live = {w[1]: w for w in wanted.values() if w[0] == codes.NONE}
    begins: dict[TopicPartition, int] = {}
    ends: dict[TopicPartition, int] = {}
    if live:
        begins = consumer.beginning_offsets(live)
        ends = consumer.end_offsets(live)
        for tp, w in list(live.items()):
            if not begins[tp] <= w[2] <= ends[tp]:
                w[0] = codes.OFFSET_OUT_OF_RANGE
                del live[tp]
    consumer.assign(list(live))
    for tp, w in live.items():
        consumer.seek(tp, w[2])
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    min_bytes = max(request.min_bytes, 0)
    max_bytes = request.max_bytes if version >= 3 and request.max_bytes > 0 else 1 << 31
    total = 0
    while live:
        # min_bytes 0 asks for an answer at once, data or not; once min_bytes is met, only
        # what is already there is added (no more waiting), up to the byte limits, so one
        # response carries as much as the client allows instead of one poll's worth
        satisfied = total >= min_bytes
        left_ms = 0 if satisfied else int((deadline - time.monotonic()) * 1000)
        got = consumer.poll_arrow(
            timeout_ms=max(0, min(left_ms, _SLICE_MS)), max_records=_POLL_RECORDS
        )
        if satisfied and not got:
            break
        for tp, batch in got.items():
            w = live.get(tp)
            if w is None:
                continue
            sizes = codec.cumulative_sizes(batch)
            room = min(w[3] - w[5], max_bytes - total)
            # Kafka's rule: the first record always goes, so a big one cannot block a
            # consumer; after that the partition's and the response's limits hold.
            take = max(int(sizes.searchsorted(room, side="right")), 0 if w[4] else 1)
            w[4].append(batch.slice(0, take) if take < batch.num_rows else batch)
            if take:
                w[5] += int(sizes[take - 1])
                total += int(sizes[take - 1])
            if take < batch.num_rows:
                consumer.pause(tp)  # the rest is read again by the next fetch
        if total >= max_bytes or consumer.paused() >= set(live):
            break
        if time.monotonic() >= deadline or closing.is_set():
            break
    if live:
        consumer.resume(*live)
        ends = consumer.end_offsets(live)
    return _fetch_response(wanted, begins, ends, version)


def _fetch_response(
    wanted: dict[tuple[str, int], list[Any]],
    begins: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
    version: int,
) -> Any:
    R = FetchResponse.FetchableTopicResponse
    P = R.PartitionData
    by_topic: dict[str, list[Any]] = {}
    for (name, partition), (error, tp, _, _, records, _) in wanted.items():
        high = ends.get(tp, -1) if tp is not None else -1
        by_topic.setdefault(name, []).append(
            P(
                partition_index=partition,
                error_code=error,
                high_watermark=high,
                last_stable_offset=high,
                log_start_offset=begins.get(tp, -1) if tp is not None else -1,
                aborted_transactions=[],
                preferred_read_replica=-1,
                records=b"".join(map(codec.encode_arrow, records)) if records else b"",
            )
        )
    return FetchResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        session_id=0,  # no fetch sessions: every fetch names its partitions in full
        responses=[R(topic=name, partitions=parts) for name, parts in by_topic.items()],
    )


# from v1 to v7 (flexible from v6); v8 and later add tiered storage lookups
@api(ListOffsetsRequest, ListOffsetsResponse, (1, 7))
def list_offsets(session: Any, request: Any, version: int) -> Any:
    consumer = consumer_of(session)
    R = ListOffsetsResponse.ListOffsetsTopicResponse
    P = R.ListOffsetsPartitionResponse
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            error, tp = session.broker.resolve(topic.name, p.partition_index)
            offset, timestamp = -1, -1
            if tp is not None:
                try:
                    if p.timestamp == LATEST:
                        offset = consumer.end_offsets([tp])[tp]
                    elif p.timestamp == EARLIEST:
                        offset = consumer.beginning_offsets([tp])[tp]
                    elif p.timestamp >= 0:
                        found = consumer.offsets_for_times({tp: p.timestamp})[tp]
                        if found is not None:
                            offset, timestamp = found.offset, found.timestamp
                    elif p.timestamp == MAX_TIMESTAMP:
                        offset, timestamp = _max_timestamp(session, consumer, tp)
                    else:
                        error = codes.INVALID_REQUEST
                except errors.PartitionletError as exc:
                    error = codes.of(exc)
            parts.append(
                P(
                    partition_index=p.partition_index,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=0,
                )
            )
        topics.append(R(name=topic.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _max_timestamp(session: Any, consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    """(offset, timestamp) of the first message with the partition's largest timestamp, or
    (-1, -1) for a partition with none, as Kafka answers."""
    info = session.broker.cluster.topic(tp.topic).partitions[tp.partition]
    if info.last_timestamp is None or info.log_end_offset == info.log_start_offset:
        return -1, -1
    found = consumer.offsets_for_times({tp: info.last_timestamp})[tp]
    if found is None:  # the newest messages expired since the partition was described
        return -1, -1
    return found.offset, found.timestamp
