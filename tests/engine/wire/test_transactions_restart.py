"""kill -9 of `plet serve` inside a librdkafka transaction (issue 25): the coordinator's state
is the cluster's, so after the restart the transaction is either committed whole (the
client retries its EndTxn against the new process) or aborted, never half visible, and no
batch is stored twice."""

from __future__ import annotations

from confluent_kafka import Producer as CKProducer

from engine import Cluster, Consumer, TopicPartition
from tests.engine.wire.test_idempotence_restart import _free_port, _serve
from tests.timing import scaled

TOPIC = "/kafka:txk"


def _read(path, isolation: str) -> list[bytes]:
    with Cluster.open(path) as cluster:
        consumer = Consumer(
            cluster,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level=isolation,
        )
        try:
            consumer.assign([TopicPartition(TOPIC, 0)])
            values: list[bytes] = []
            while batch := consumer.poll(timeout_ms=500):
                values += [r.value for rs in batch.values() for r in rs]
            return values
        finally:
            consumer.close()


def test_kill_9_between_produce_and_commit_then_the_commit_completes_once(tmp_path):
    path = tmp_path / "c"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/kafka")
        cluster.create_topic(TOPIC, partitions=1)
    port = _free_port()
    proc = _serve(path, port)
    producer = CKProducer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "transactional.id": "restarts",
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
        }
    )
    try:
        producer.init_transactions(scaled(30))
        producer.begin_transaction()
        for i in range(100):
            producer.produce("txk", b"m-%03d" % i, partition=0)
        producer.flush(scaled(30))  # written and acknowledged, not committed
        proc.kill()
        proc.wait()
        assert _read(path, "read_committed") == []  # an open transaction shows nothing
        proc = _serve(path, port)
        producer.commit_transaction(scaled(60))  # retried against the new process
        producer.begin_transaction()
        producer.produce("txk", b"second", partition=0)
        producer.commit_transaction(scaled(60))
    finally:
        proc.terminate()
        proc.wait(timeout=scaled(30))
    committed = _read(path, "read_committed")
    assert committed == [b"m-%03d" % i for i in range(100)] + [b"second"]
    assert _read(path, "read_uncommitted") == committed  # nothing stored twice


def test_kill_9_inside_a_transaction_aborts_it_at_the_next_init(tmp_path):
    path = tmp_path / "c"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/kafka")
        cluster.create_topic(TOPIC, partitions=1)
    port = _free_port()
    proc = _serve(path, port)
    first = CKProducer({"bootstrap.servers": f"127.0.0.1:{port}", "transactional.id": "crashy"})
    first.init_transactions(scaled(30))
    first.begin_transaction()
    first.produce("txk", b"lost", partition=0)
    first.flush(scaled(30))
    proc.kill()  # the listener dies, and the application with it
    proc.wait()
    del first
    proc = _serve(path, port)
    try:
        # the application restarts: its init fences the old epoch and aborts what it left
        second = CKProducer(
            {"bootstrap.servers": f"127.0.0.1:{port}", "transactional.id": "crashy"}
        )
        second.init_transactions(scaled(30))
        second.begin_transaction()
        second.produce("txk", b"kept", partition=0)
        second.commit_transaction(scaled(30))
    finally:
        proc.terminate()
        proc.wait(timeout=scaled(30))
    assert _read(path, "read_committed") == [b"kept"]
    assert _read(path, "read_uncommitted") == [b"lost", b"kept"]
