"""Produce and InitProducerId: record batches in through engine producers (so heat counts
them and durability follows acks), with Kafka's idempotent-producer sequence checks."""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from engine import errors
from engine.wire import codec, codes
from engine.wire.registry import api

# a produce request waits at most this long for its acks, whatever timeout it asks for
_MAX_WAIT_S = 60.0


@api(InitProducerIdRequest, InitProducerIdResponse, (0, 4))
def init_producer_id(session: Any, request: Any, version: int) -> Any:
    if request.transactional_id is not None:
        # transactions are not served yet (docs/WIRE.md)
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
    return InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        producer_id=session.broker.new_producer_id(),
        producer_epoch=0,
    )


# from v3 (record batch v2 only) to v9 (flexible); v10 and later are Kafka 3.7+'s
@api(ProduceRequest, ProduceResponse, (3, 9))
def produce(session: Any, request: Any, version: int) -> Any:
    broker = session.broker
    acks = request.acks
    deadline = time.monotonic() + min(max(request.timeout_ms, 0) / 1000, _MAX_WAIT_S)
    R = ProduceResponse.TopicProduceResponse
    P = R.PartitionProduceResponse
    topics = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            if acks not in (0, 1, -1):
                error, offset = codes.INVALID_REQUIRED_ACKS, -1
            else:
                error, offset = _write(broker, topic.name, data.index, data.records, acks, deadline)
            partitions.append(
                P(
                    index=data.index,
                    error_code=error,
                    base_offset=offset,
                    log_append_time_ms=-1,
                    log_start_offset=-1,
                    record_errors=[],
                    error_message=None,
                )
            )
        topics.append(R(name=topic.name, partition_responses=partitions))
    if acks == 0:
        return None  # Kafka sends no response to acks=0
    return ProduceResponse(responses=topics, throttle_time_ms=0)


def _write(
    broker: Any, name: str, partition: int, data: bytes | None, acks: int, deadline: float
) -> tuple[int, int]:
    """(error code, base offset) of one partition's records; nothing is written unless
    every check passed."""
    cluster = broker.cluster
    try:
        full = broker.full_name(name)
        info = cluster.topic(full)
        if not 0 <= partition < len(info.partitions):
            return codes.UNKNOWN_TOPIC_OR_PARTITION, -1
        stream = cluster.stream(full.rpartition(":")[0])
        cluster.authorize(stream, "produce_perm")
    except errors.PartitionletError as exc:
        return codes.of(exc), -1
    limit = stream.policies.get("max_message_bytes", 1 << 20)
    records = []
    try:
        for batch in codec.batches(data):
            if batch.is_transactional or batch.is_control_batch:
                return codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1
            # iterating decompresses and checks every record
            rows = [(r.value, r.key, list(r.headers) or None, r.timestamp) for r in batch]
            records.append((batch, rows))
    except Exception:  # kafka.record raises several kinds for a damaged batch
        return codes.CORRUPT_MESSAGE, -1
    if not records:
        return codes.CORRUPT_MESSAGE, -1
    for _, rows in records:
        for value, key, headers, _ in rows:
            size = len(value or b"") + len(key or b"")
            size += sum(len(k) + len(v or b"") for k, v in headers or ())
            if size > limit:
                return codes.MESSAGE_TOO_LARGE, -1
    first_offset = -1
    for batch, rows in records:
        error, offset = _write_batch(broker, full, partition, batch, rows, acks, deadline)
        if error:
            return error, -1
        if first_offset < 0:
            first_offset = offset
    return codes.NONE, first_offset


def _write_batch(
    broker: Any,
    full: str,
    partition: int,
    batch: Any,
    rows: list[tuple[Any, Any, Any, int]],
    acks: int,
    deadline: float,
) -> tuple[int, int]:
    if not batch.has_producer_id():  # a method in kafka.record, not a property
        return _send(broker, full, partition, rows, acks, deadline)
    state = broker.sequence(batch.producer_id, batch.producer_epoch, full, partition)
    with state.lock:
        if batch.producer_epoch < state.epoch:
            return codes.INVALID_PRODUCER_EPOCH, -1
        if batch.producer_epoch > state.epoch:
            state.epoch, state.last_seq, state.recent = batch.producer_epoch, -1, []
        base_seq, last_seq = batch.base_sequence, batch.last_sequence
        for seen_base, seen_last, seen_offset in state.recent:
            if (seen_base, seen_last) == (base_seq, last_seq):
                return codes.NONE, seen_offset  # a resend: acknowledged, not written again
        # A sequence the node has not seen yet (a new producer, or one it forgot) starts
        # anywhere; after that each batch must follow the last one exactly.
        if state.last_seq >= 0 and base_seq != (state.last_seq + 1) & 0x7FFFFFFF:
            return codes.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        error, offset = _send(broker, full, partition, rows, acks, deadline)
        if not error:
            broker.remember(state, base_seq, last_seq, offset)
        return error, offset


def _send(
    broker: Any,
    full: str,
    partition: int,
    rows: list[tuple[Any, Any, Any, int]],
    acks: int,
    deadline: float,
) -> tuple[int, int]:
    producer = broker.producer(acks)
    try:
        futures = [
            producer.send(
                full, value=value, key=key, partition=partition, headers=headers, timestamp_ms=ts
            )
            for value, key, headers, ts in rows
        ]
        if acks == 0:
            return codes.NONE, -1
        first = futures[0].get(timeout=max(0.0, deadline - time.monotonic()))
        for future in futures[1:]:
            future.get(timeout=max(0.0, deadline - time.monotonic()))
    except errors.PartitionletError as exc:
        return codes.of(exc), -1
    return codes.NONE, first.offset
