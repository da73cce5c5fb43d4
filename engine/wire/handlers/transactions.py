"""AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn, ListTransactions,
DescribeTransactions and DescribeProducers (InitProducerId with a
transactional id is in handlers/produce.py): Kafka's transaction coordinator, answered by
the engine's (engine.client.transactions), so its state is the cluster's: another listener
of the cluster, or this one after a restart, knows every open transaction."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from engine import errors
from engine.client.transactions import KAFKA_STATES, TransactionInfo, Transactions
from engine.wire import codes
from engine.wire.connection import Session
from engine.wire.handlers.fetch import consumer_of
from engine.wire.registry import api


def txn_code(exc: errors.PartitionletError) -> int:
    """The Kafka error of a coordinator refusal."""
    if isinstance(exc, errors.InvalidProducerEpoch):
        return codes.INVALID_PRODUCER_EPOCH  # what v0-4 clients expect for a fenced epoch
    if isinstance(exc, errors.IllegalState):
        return codes.INVALID_TXN_STATE
    if isinstance(exc, errors.AccessDenied):
        return codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return codes.of(exc)


# v0-3 (flexible from v3); v4 and later batch transactions for brokers (KIP-890)
@api(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, (0, 3))
def add_partitions_to_txn(
    session: Session, request: AddPartitionsToTxnRequest, version: int
) -> AddPartitionsToTxnResponse:
    broker = session.broker
    cluster = broker.cluster
    R = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    P = R.AddPartitionsToTxnPartitionResult
    errors_by: dict[tuple[str, int], int] = {}
    joined: list[tuple[str, int]] = []
    for topic in request.v3_and_below_topics:
        for partition in topic.partitions:
            error, tp = broker.resolve(topic.name, partition)
            if error == codes.NONE and tp is not None:
                try:
                    cluster.authorize(cluster.stream(tp.topic.rpartition(":")[0]), "produce_perm")
                    joined.append((tp.topic, partition))
                except errors.PartitionletError as exc:
                    error = codes.of(exc)
            errors_by[(topic.name, partition)] = error
    failed = any(errors_by.values())
    if not failed and joined:
        try:
            Transactions(cluster).add_topic_partitions(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                joined,
            )
        except errors.PartitionletError as exc:
            code = txn_code(exc)
            errors_by = dict.fromkeys(errors_by, code)
    elif failed:  # Kafka adds none when one fails: the others are told to retry the lot
        errors_by = {k: v or codes.OPERATION_NOT_ATTEMPTED for k, v in errors_by.items()}
    by_topic: dict[
        str,
        list[
            AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult
        ],
    ] = {}
    for (name, partition), error in errors_by.items():
        by_topic.setdefault(name, []).append(
            P(partition_index=partition, partition_error_code=error)
        )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        results_by_transaction=[],
        results_by_topic_v3_and_below=[
            R(name=name, results_by_partition=parts) for name, parts in by_topic.items()
        ],
    )


# v0-3 (flexible from v3); v4 is KIP-890's
@api(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, (0, 3))
def add_offsets_to_txn(
    session: Session, request: AddOffsetsToTxnRequest, version: int
) -> AddOffsetsToTxnResponse:
    cluster = session.broker.cluster
    try:
        cluster.authorize_group(request.group_id, "commit_perm")
        Transactions(cluster).add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.group_id, [],
        )  # fmt: skip
        error = codes.NONE
    except errors.GroupAccessDenied:
        error = codes.GROUP_AUTHORIZATION_FAILED
    except errors.PartitionletError as exc:
        error = txn_code(exc)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)


# v0-3 (flexible from v3); v4 and v5 are KIP-890's
@api(TxnOffsetCommitRequest, TxnOffsetCommitResponse, (0, 3))
def txn_offset_commit(
    session: Session, request: TxnOffsetCommitRequest, version: int
) -> TxnOffsetCommitResponse:
    broker = session.broker
    cluster = broker.cluster
    R = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    P = R.TxnOffsetCommitResponsePartition
    group_error = codes.NONE
    try:
        cluster.authorize_group(request.group_id, "commit_perm")
    except errors.GroupAccessDenied:
        group_error = codes.GROUP_AUTHORIZATION_FAILED
    except errors.PartitionletError as exc:
        group_error = codes.of(exc)
    rows: list[tuple[str, int, int, str]] = []
    answers: list[tuple[str, int, int]] = []
    for topic in request.topics:
        for p in topic.partitions:
            error, tp = broker.resolve(topic.name, p.partition_index)
            if group_error:
                error = group_error
            elif error == codes.NONE and tp is not None:
                rows.append(
                    (tp.topic, p.partition_index, p.committed_offset, p.committed_metadata or "")
                )
            answers.append((topic.name, p.partition_index, error))
    if rows and not any(e for _, _, e in answers):
        try:
            Transactions(cluster).add_topic_offsets(
                request.transactional_id, request.producer_id, request.producer_epoch,
                request.group_id, rows,
            )  # fmt: skip
        except errors.PartitionletError as exc:
            code = txn_code(exc)
            answers = [(n, i, code) for n, i, _ in answers]
    by_topic: dict[
        str,
        list[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition],
    ] = {}
    for name, index, error in answers:
        by_topic.setdefault(name, []).append(P(partition_index=index, error_code=error))
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[R(name=name, partitions=parts) for name, parts in by_topic.items()],
    )


# v0-4 (flexible from v3); v5 ends with a new epoch (KIP-890 part 2), which clients use
# only when the broker advertises transaction.version 2
@api(EndTxnRequest, EndTxnResponse, (0, 4))
def end_txn(session: Session, request: EndTxnRequest, version: int) -> EndTxnResponse:
    try:
        Transactions(session.broker.cluster).end(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            commit=request.committed,
        )
        error = codes.NONE
    except errors.PartitionletError as exc:
        error = txn_code(exc)
    return EndTxnResponse(throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1)


def _visible_infos(session: Session) -> list[TransactionInfo]:
    return Transactions(session.broker.cluster).list()


# v0-1 (v1 filters by how long a transaction has been open); v2's regular expression is not
# served (a pattern from a client would run in the listener)
@api(ListTransactionsRequest, ListTransactionsResponse, (0, 1))
def list_transactions(
    session: Session, request: ListTransactionsRequest, version: int
) -> ListTransactionsResponse:
    S = ListTransactionsResponse.TransactionState
    wanted_states = set(request.state_filters or ())
    known = set(KAFKA_STATES.values())
    pids = set(request.producer_id_filters or ())
    longer = request.duration_filter if version >= 1 else -1
    now = session.broker.cluster.clock.now_ms()
    states = []
    for info in _visible_infos(session):
        if wanted_states and info.kafka_state not in wanted_states:
            continue
        if pids and info.producer_id not in pids:
            continue
        if longer >= 0 and (info.started_ms is None or now - info.started_ms <= longer):
            continue
        states.append(
            S(
                transactional_id=info.transactional_id,
                producer_id=info.producer_id,
                transaction_state=info.kafka_state,
            )
        )
    return ListTransactionsResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        unknown_state_filters=sorted(wanted_states - known),
        transaction_states=states,
    )


@api(DescribeTransactionsRequest, DescribeTransactionsResponse, (0, 0))
def describe_transactions(
    session: Session, request: DescribeTransactionsRequest, version: int
) -> DescribeTransactionsResponse:
    S = DescribeTransactionsResponse.TransactionState
    T = S.TopicData
    coordinator = Transactions(session.broker.cluster)
    states = []
    for tid in request.transactional_ids:
        try:
            info = coordinator.describe(tid)
        except errors.NotFound:
            states.append(
                S(error_code=codes.TRANSACTIONAL_ID_NOT_FOUND, transactional_id=tid,
                  transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                  producer_id=-1, producer_epoch=-1, topics=[])
            )  # fmt: skip
            continue
        by_topic: dict[str, list[int]] = {}
        for full, partition in info.partitions:
            by_topic.setdefault(session.broker.naming.shown(full), []).append(partition)
        states.append(
            S(
                error_code=codes.NONE,
                transactional_id=tid,
                transaction_state=info.kafka_state,
                transaction_timeout_ms=info.timeout_ms,
                transaction_start_time_ms=info.started_ms if info.started_ms is not None else -1,
                producer_id=info.producer_id,
                producer_epoch=info.epoch,
                topics=[T(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
        )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


@api(DescribeProducersRequest, DescribeProducersResponse, (0, 0))
def describe_producers(
    session: Session, request: DescribeProducersRequest, version: int
) -> DescribeProducersResponse:
    """The producers active in each partition (`PartitionLog.producers`), to a user who may
    read the topic (Kafka asks for READ). The coordinator epoch is -1: one coordinator,
    the cluster, has no epochs of its own."""
    broker = session.broker
    R = DescribeProducersResponse.TopicResponse
    P = R.PartitionResponse
    S = P.ProducerState
    resolved: dict[str, Any] = {}
    topics = []
    for topic in request.topics:
        parts = []
        for index in topic.partition_indexes:
            error, tp = broker.resolve(topic.name, index, resolved)
            states: list[
                DescribeProducersResponse.TopicResponse.PartitionResponse.ProducerState
            ] = []
            message = None
            if error == codes.NONE and tp is not None:
                try:
                    states = [
                        S(producer_id=p.producer_id, producer_epoch=p.epoch,
                          last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                          coordinator_epoch=-1, current_txn_start_offset=p.txn_start_offset)
                        for p in consumer_of(session).producers(tp)
                    ]  # fmt: skip
                except errors.PartitionletError as exc:
                    error, message = codes.of(exc), str(exc)
            parts.append(
                P(partition_index=index, error_code=error, error_message=message,
                  active_producers=states)
            )  # fmt: skip
        topics.append(R(name=topic.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
