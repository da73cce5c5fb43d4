"""Transactions over the wire (issue 25): unchanged librdkafka (confluent-kafka) and
kafka-python 3 clients run transactional producers against the listener; read_committed
consumers see committed messages only and reach the end of a partition whose last offset
is a marker; a consume-transform-produce loop that aborts a batch midway ends with every
input processed exactly once; a newer producer of a transactional id fences the older."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTP

from tests.timing import scaled


def _topic(wire, partitions: int = 1) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    wire.cluster.create_topic(f"/kafka:{name}", partitions=partitions)
    return name


def _producer(wire, tid: str) -> CKProducer:
    producer = CKProducer(
        {
            "bootstrap.servers": wire.bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": 60000,
        }
    )
    producer.init_transactions(scaled(30))
    return producer


def _consume(wire, topic: str, isolation: str, group: str | None = None) -> list[bytes]:
    """Every value of the topic's partition 0, read until the end of the partition."""
    consumer = CKConsumer(
        {
            "bootstrap.servers": wire.bootstrap,
            "group.id": group or f"g-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([CKTP(topic, 0, 0)])
    values: list[bytes] = []
    try:
        while True:
            msg = consumer.poll(scaled(10))
            assert msg is not None, f"no end of partition after {values}"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return values
            values.append(msg.value())
    finally:
        consumer.close()


def test_librdkafka_commits_and_aborts_and_read_committed_sees_only_commits(wire):
    topic = _topic(wire)
    producer = _producer(wire, f"tx-{topic}")
    producer.begin_transaction()
    for v in (b"c1", b"c2", b"c3"):
        producer.produce(topic, v, partition=0)
    producer.commit_transaction(scaled(30))
    producer.begin_transaction()
    for v in (b"a1", b"a2"):
        producer.produce(topic, v, partition=0)
    producer.flush(scaled(30))
    producer.abort_transaction(scaled(30))
    assert _consume(wire, topic, "read_committed") == [b"c1", b"c2", b"c3"]
    assert _consume(wire, topic, "read_uncommitted") == [b"c1", b"c2", b"c3", b"a1", b"a2"]
    # the markers took offsets 3 and 6: the log ends at 7
    ends = wire.cluster.topic(f"/kafka:{topic}").partitions[0].log_end_offset
    assert ends == 7


def test_an_open_transaction_holds_read_committed_readers_at_its_first_offset(wire):
    topic = _topic(wire)
    producer = _producer(wire, f"tx-{topic}")
    producer.begin_transaction()
    producer.produce(topic, b"pending", partition=0)
    producer.flush(scaled(30))
    assert _consume(wire, topic, "read_committed") == []
    consumer = CKConsumer(
        {
            "bootstrap.servers": wire.bootstrap,
            "group.id": "lso",
            "isolation.level": "read_committed",
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(CKTP(topic, 0), timeout=scaled(10))
        assert (low, high) == (0, 0)  # read_committed: the high watermark is the LSO
    finally:
        consumer.close()
    producer.commit_transaction(scaled(30))
    assert _consume(wire, topic, "read_committed") == [b"pending"]


def test_a_consume_transform_produce_loop_with_an_abort_processes_each_input_once(wire):
    source, sink = _topic(wire), _topic(wire)
    feeder = CKProducer({"bootstrap.servers": wire.bootstrap})
    for i in range(30):
        feeder.produce(source, str(i).encode(), partition=0)
    feeder.flush(scaled(30))
    group = f"app-{source}"
    consumer = CKConsumer(
        {
            "bootstrap.servers": wire.bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([CKTP(source, 0)])
    producer = _producer(wire, f"tx-{source}")
    batches = 0
    done = 0
    try:
        while done < 30:
            msgs = consumer.consume(num_messages=10, timeout=scaled(10))
            assert msgs, f"stuck after {done}"
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, b"out-" + m.value(), partition=0)
            batches += 1
            if batches == 2:  # written, then aborted: this batch is read again
                producer.flush(scaled(30))
                producer.abort_transaction(scaled(30))
                committed = consumer.committed([CKTP(source, 0)], timeout=scaled(10))[0].offset
                consumer.seek(CKTP(source, 0, committed if committed >= 0 else 0))
                continue
            position = msgs[-1].offset() + 1
            producer.send_offsets_to_transaction(
                [CKTP(source, 0, position)], consumer.consumer_group_metadata(), scaled(30)
            )
            producer.commit_transaction(scaled(30))
            done = position
    finally:
        consumer.close()
    out = _consume(wire, sink, "read_committed")
    assert out == [b"out-%d" % i for i in range(30)]
    assert len(_consume(wire, sink, "read_uncommitted")) == 40  # the aborted 10 are there
    assert [p.committed for p in wire.cluster.group(group).partitions] == [30]


def test_a_newer_producer_with_the_same_transactional_id_fences_the_zombie(wire):
    topic = _topic(wire)
    tid = f"tx-{topic}"
    zombie = _producer(wire, tid)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(scaled(30))
    newer = _producer(wire, tid)  # aborts the zombie's transaction
    newer.begin_transaction()
    newer.produce(topic, b"newer", partition=0)
    newer.commit_transaction(scaled(30))
    zombie.produce(topic, b"late", partition=0)
    with pytest.raises(KafkaException) as failed:
        zombie.commit_transaction(scaled(30))
    error = failed.value.args[0]
    assert error.fatal() or error.txn_requires_abort(), error
    assert _consume(wire, topic, "read_committed") == [b"newer"]


def test_kafka_python_transactions_and_read_committed(wire):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = _topic(wire)
    producer = KafkaProducer(bootstrap_servers=wire.bootstrap, transactional_id=f"kp-{topic}")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"kept", partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, b"dropped", partition=0)
    producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=wire.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(scaled(3000)),
    )
    tp = KTP(topic, 0)
    consumer.assign([tp])
    values = [m.value for m in consumer]
    assert values == [b"kept"]
    assert consumer.position(tp) == consumer.end_offsets([tp])[tp]
    consumer.close()


def test_aiokafka_transactions_and_read_committed(wire):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    from tests.engine.wire.conftest import run_async

    topic = _topic(wire)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(
            bootstrap_servers=wire.bootstrap, transactional_id=f"ai-{topic}"
        )
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"kept", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"dropped", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=wire.bootstrap,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            tp = ATP(topic, 0)
            consumer.assign([tp])
            got = await consumer.getmany(timeout_ms=int(scaled(3000)))
            values = [m.value for ms in got.values() for m in ms]
            more = await consumer.getmany(timeout_ms=int(scaled(1000)))
            values += [m.value for ms in more.values() for m in ms]
            return values
        finally:
            await consumer.stop()

    assert run_async(run()) == [b"kept"]


def test_list_and_describe_transactions_over_the_wire(wire):
    from kafka.protocol.admin import (
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
    )

    from tests.engine.wire.test_bad_input import Raw

    topic = _topic(wire)
    tid = f"tx-{topic}"
    producer = _producer(wire, tid)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    producer.flush(scaled(30))
    raw = Raw(wire.server.address)
    try:
        listed = raw.call(
            ListTransactionsRequest(
                state_filters=["Ongoing"], producer_id_filters=[], duration_filter=-1
            ),
            1,
            ListTransactionsResponse,
        )
        assert tid in [s.transactional_id for s in listed.transaction_states]
        described = raw.call(
            DescribeTransactionsRequest(transactional_ids=[tid, "nope"]),
            0,
            DescribeTransactionsResponse,
        )
        ours, nope = described.transaction_states
        assert (ours.error_code, ours.transaction_state) == (0, "Ongoing")
        assert [(t.topic, t.partitions) for t in ours.topics] == [(topic, [0])]
        assert nope.error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND
    finally:
        raw.close()
    producer.abort_transaction(scaled(30))


def test_describe_producers_shows_idempotent_and_transactional_producers(wire):
    from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

    from tests.engine.wire.test_bad_input import Raw

    topic = _topic(wire)
    plain = CKProducer({"bootstrap.servers": wire.bootstrap, "enable.idempotence": True})
    for value in (b"a", b"b", b"c"):
        plain.produce(topic, value, partition=0)
    assert plain.flush(scaled(30)) == 0
    txn = _producer(wire, f"tx-{topic}")
    txn.begin_transaction()
    txn.produce(topic, b"open", partition=0)
    assert txn.flush(scaled(30)) == 0
    Topic = DescribeProducersRequest.TopicRequest
    raw = Raw(wire.server.address)
    try:
        answer = raw.call(
            DescribeProducersRequest(
                topics=[
                    Topic(name=topic, partition_indexes=[0, 7]),
                    Topic(name="no-such-topic", partition_indexes=[0]),
                ]
            ),
            0,
            DescribeProducersResponse,
        )
    finally:
        raw.close()
    ours, unknown = answer.topics
    first, missing = ours.partitions
    assert (first.partition_index, first.error_code) == (0, 0)
    assert (missing.partition_index, missing.error_code) == (7, 3)  # UNKNOWN_TOPIC_OR_PARTITION
    assert unknown.partitions[0].error_code == 3
    states = sorted(
        (p.last_sequence, p.current_txn_start_offset, p.coordinator_epoch)
        for p in first.active_producers
    )
    # the idempotent producer's three messages end at sequence 2; the transactional one's
    # open transaction starts where the partition ended when it joined (offset 3)
    assert states == [(0, 3, -1), (2, -1, -1)]
    assert all(p.producer_id >= 0 and p.last_timestamp > 0 for p in first.active_producers)
    txn.abort_transaction(scaled(30))
