"""Produce and InitProducerId: record batches in through engine producers (so heat counts
them and durability follows acks), with Kafka's idempotent-producer sequence checks."""

from __future__ import annotations

import dataclasses
import time
from typing import Protocol

from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from engine import errors
from engine.bulk import bulk_records
from engine.records import RecordMetadata
from engine.wire import codec, codes
from engine.wire.broker import Broker
from engine.wire.connection import Session
from engine.wire.park import Deferred
from engine.wire.registry import api

# a produce request waits at most this long for its acks, whatever timeout it asks for
_MAX_WAIT_S = 60.0


# v5 only adds a transaction error (KIP-890); v6 two-phase commit (KIP-939)
@api(InitProducerIdRequest, InitProducerIdResponse, (0, 5))
def init_producer_id(
    session: Session, request: InitProducerIdRequest, version: int
) -> InitProducerIdResponse:
    try:
        if request.transactional_id is not None:
            # the engine's coordinator: fences the older producers of the id and finishes
            # the transaction they left open
            producer_id, epoch = session.broker.init_transactions(
                request.transactional_id, request.transaction_timeout_ms
            )
        else:
            producer_id, epoch = session.broker.new_producer_id()
    except errors.InvalidArgument:
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=codes.INVALID_TRANSACTION_TIMEOUT
            if request.transactional_id
            else codes.INVALID_REQUEST,
            producer_id=-1,
            producer_epoch=-1,
        )
    except errors.AccessDenied:
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
    except errors.PartitionletError as exc:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=codes.of(exc), producer_id=-1, producer_epoch=-1
        )
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=codes.NONE, producer_id=producer_id, producer_epoch=epoch
    )


# from v3 (record batch v2 only; Kafka 4.0 removed v0-2) to v12: v10 adds leader hints as
# tagged fields (KIP-951, none here: node 0 leads all), v11-12 transaction errors (no
# transactions here); v13 names topics by id, which the engine has not
@api(ProduceRequest, ProduceResponse, (3, 12))
def produce(session: Session, request: ProduceRequest, version: int) -> Deferred | None:
    broker = session.broker
    acks = request.acks
    deadline = time.monotonic() + min(max(request.timeout_ms, 0) / 1000, _MAX_WAIT_S)
    R = ProduceResponse.TopicProduceResponse
    P = R.PartitionProduceResponse
    # decompressed bytes, for the whole request (the listener's max_decompressed_bytes)
    budget = codec.Budget(session.limits.max_decompressed_bytes)
    topics: dict[str, tuple[int, str, int]] = {}  # each topic looked up once
    # Every partition's batches are queued before any is waited on, so the producer's
    # sender appends them together: one commit (and one fsync at acks=all) per volume for
    # the request, not one per partition.
    queued = [
        [
            (
                data.index,
                (codes.INVALID_REQUIRED_ACKS, -1)
                if acks not in (0, 1, -1)
                else _queue(
                    broker,
                    topic.name,
                    data.index,
                    codec.decoded_bytes(data.records),
                    acks,
                    budget,
                    topics,
                ),
            )
            for data in topic.partition_data
        ]
        for topic in request.topic_data
    ]
    if acks == 0:
        return None  # Kafka sends no response to acks=0

    def finish() -> ProduceResponse:
        topics = []
        for topic, partitions in zip(request.topic_data, queued, strict=True):
            responses = []
            for index, pending in partitions:
                error, offset = _wait(pending, deadline)
                responses.append(
                    P(
                        index=index,
                        error_code=error,
                        base_offset=offset,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[],
                        error_message=None,
                    )
                )
            topics.append(R(name=topic.name, partition_responses=responses))
        return ProduceResponse(responses=topics, throttle_time_ms=0)

    # answered once written: the connection reads the client's next request meanwhile
    futures = [
        f for partitions in queued for _, pending in partitions if isinstance(pending, list)
        for f in pending
    ]  # fmt: skip
    return Deferred(futures, deadline, finish)


class _Future(Protocol):
    def get(self, timeout: float | None = None) -> RecordMetadata: ...


# A partition's outcome once its batches are queued: an error code and offset already known,
# or the futures of its stored batches in order (the first one's offset is the answer).
_Pending = tuple[int, int] | list[_Future]


def _topic(broker: Broker, name: str) -> tuple[int, str, int]:
    """(error code, full name, partition count) of a topic to produce to, with the produce
    permission checked."""
    cluster = broker.cluster
    try:
        full = broker.full_name(name)
        count = cluster.partition_count(full)
        cluster.authorize(full.rpartition(":")[0], "produce_perm")
    except errors.PartitionletError as exc:
        return codes.of(exc), "", 0
    return codes.NONE, full, count


def _queue(
    broker: Broker,
    name: str,
    partition: int,
    data: bytes | None,
    acks: int,
    budget: codec.Budget,
    topics: dict[str, tuple[int, str, int]],
) -> _Pending:
    """Queue one partition's records; nothing is written unless every check passed."""
    found = topics.get(name)
    if found is None:  # once a request per topic: a description reads every partition's
        found = topics[name] = _topic(broker, name)
    error, full, count = found
    if error != codes.NONE:
        return error, -1
    if not 0 <= partition < count:
        return codes.UNKNOWN_TOPIC_OR_PARTITION, -1
    plain = codec.plain_batch(data)
    if plain is not None:  # the usual request: stored as it came when its topic allows
        if plain.transactional and not plain.has_producer_id:
            return codes.INVALID_PRODUCER_ID_MAPPING, -1
        return _queue_batch(broker, full, partition, plain, acks)
    try:
        # decoding decompresses and checks every record, before anything is written
        batches = list(codec.batches(data, budget))
    except codec.TooLarge:
        return codes.RECORD_LIST_TOO_LARGE, -1
    except Exception:  # the record reader raises several kinds for a damaged batch
        return codes.CORRUPT_MESSAGE, -1
    if not batches or any(b.control for b in batches):
        return codes.CORRUPT_MESSAGE, -1  # control batches are the coordinator's to write
    if any(b.transactional and not b.has_producer_id for b in batches):
        return codes.INVALID_PRODUCER_ID_MAPPING, -1
    if not any(b.has_producer_id for b in batches):
        # one engine batch for the whole request's records: all or nothing
        return _send(broker, full, partition, _joined(batches), acks)
    futures: list[_Future] = []
    for batch in batches:
        sent = _queue_batch(broker, full, partition, batch, acks)
        if isinstance(sent, tuple):
            # the batches queued before it may still be written; the client resends them
            # and the sequence check answers those with their stored offsets
            return sent
        futures.extend(sent)
    return futures


def _joined(batches: list[codec.ProducedBatch]) -> codec.ProducedBatch:
    if len(batches) == 1:
        return batches[0]
    first = batches[0]
    return dataclasses.replace(
        first,
        values=[v for b in batches for v in b.values],
        keys=[k for b in batches for k in b.keys],
        headers=[h for b in batches for h in b.headers],
        timestamps=[t for b in batches for t in b.timestamps],
    )


def _queue_batch(
    broker: Broker,
    full: str,
    partition: int,
    batch: codec.ProducedBatch | codec.PlainBatch,
    acks: int,
) -> _Pending:
    if not batch.has_producer_id:
        return _send(broker, full, partition, batch, acks)
    error = broker.check_producer(batch.producer_id, batch.producer_epoch)
    if error:
        return error, -1
    # The check against the partition's stored batches happens in the append's own
    # transaction (engine.storage.volume): a resend, also one after a restart of this
    # listener, is answered with the offset it was stored at and not written again. The
    # lock keeps one producer's batches to a partition in its order into the queue, which
    # the producer appends in that order.
    ids = (batch.producer_id, batch.producer_epoch, batch.base_sequence)
    with broker.sequence_lock(batch.producer_id, full, partition):
        return _send(broker, full, partition, batch, acks, ids)


def _send(
    broker: Broker,
    full: str,
    partition: int,
    batch: codec.ProducedBatch | codec.PlainBatch,
    acks: int,
    idempotent: tuple[int, int, int] | None = None,
) -> _Pending:
    """Queue the batch in one engine call; only its first message's future is waited on,
    since the run is written as one stored batch."""
    producer = broker.producer(acks)
    if isinstance(batch, codec.PlainBatch):
        try:
            return [producer.send_record_batch(full, partition, batch.data, idempotent=idempotent)]
        except errors.PartitionletError as exc:
            return codes.of(exc), -1
    try:
        with bulk_records(len(batch.values)):  # a tuple a message, in the producer's batch
            future = producer.send_batch(
                full,
                partition,
                batch.values,
                batch.keys,
                batch.headers,
                batch.timestamps,
                idempotent=idempotent,
            )
    except errors.PartitionletError as exc:
        return codes.of(exc), -1
    return [future]


def _wait(pending: _Pending, deadline: float) -> tuple[int, int]:
    """(error code, base offset) of a queued partition: its first batch's offset, or the
    first error among its batches."""
    if isinstance(pending, tuple):
        return pending
    offset = -1
    try:
        for future in pending:
            metadata = future.get(timeout=max(0.0, deadline - time.monotonic()))
            if offset < 0:
                offset = metadata.offset
    except errors.PartitionletError as exc:
        return codes.of(exc), -1
    return codes.NONE, offset
