"""An idempotent librdkafka producer across kill -9 restarts of `plet serve` (issue 25): the
producer id is the cluster's and each partition's producer state is its stored batches, so
a batch resent after a restart (its answer died with the listener) is recognised and not
written again. Before, the state lived in the listener's memory: five restarts under such a
producer wrote 29 duplicates."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading

from confluent_kafka import Producer as CKProducer

from engine import Cluster, Consumer, TopicPartition
from tests.timing import scaled, wait_until

TOPIC = "/kafka:idem"
PARTITIONS = 2
RESTARTS = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "serve",
            "--cluster",
            str(path),
            "--listen",
            f"127.0.0.1:{port}",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline()
    if not re.search(rf"on 127\.0\.0\.1:{port} ", line):
        proc.kill()
        proc.wait()
        raise AssertionError(f"plet serve did not start: {line}{proc.stderr.read()}")
    return proc


def _stored(path) -> list[bytes]:
    with Cluster.open(path) as cluster:
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        try:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            values: list[bytes] = []
            while batch := consumer.poll(timeout_ms=1000, max_records=10_000):
                values += [r.value for rs in batch.values() for r in rs]
            return values
        finally:
            consumer.close()


def test_an_idempotent_producer_across_five_kill_9_restarts_stores_no_duplicate(tmp_path):
    path = tmp_path / "c"
    with Cluster.open(path, name="idem") as cluster:
        cluster.create_stream("/kafka")
        cluster.create_topic(TOPIC, partitions=PARTITIONS)
    port = _free_port()
    proc = _serve(path, port)
    delivered: list[bytes] = []
    failed: list[str] = []  # failed deliveries and fatal producer errors
    producer = CKProducer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": int(scaled(180) * 1000),
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "retry.backoff.ms": 50,
            "error_cb": lambda err: err.fatal() and failed.append(str(err)),
        }
    )

    def on_delivery(err, msg):
        if err is None:
            delivered.append(msg.value())
        else:
            failed.append(str(err))

    stop = threading.Event()
    sent = [0]

    def send() -> None:
        while not stop.is_set():
            producer.produce(
                TOPIC.split(":")[1], f"m-{sent[0]:07d}".encode(), on_delivery=on_delivery
            )
            sent[0] += 1
            producer.poll(0.001)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        for _ in range(RESTARTS):
            # kill mid-stream: acknowledged messages behind it, requests in flight
            target = len(delivered) + 500
            wait_until(lambda t=target: failed or len(delivered) >= t, timeout=scaled(120))
            assert failed == []
            proc.kill()
            proc.wait()
            proc = _serve(path, port)
        target = len(delivered) + 500
        wait_until(lambda: failed or len(delivered) >= target, timeout=scaled(120))
        assert failed == []
        stop.set()
        sender.join(scaled(30))
        assert producer.flush(scaled(180)) == 0
    finally:
        stop.set()
        proc.terminate()
        proc.wait(timeout=scaled(30))
    assert failed == []
    stored = _stored(path)
    duplicates = len(stored) - len(set(stored))
    assert duplicates == 0, f"{duplicates} duplicates"
    assert set(delivered) <= set(stored)  # nothing acknowledged was lost
    assert len(delivered) == sent[0] == len(stored)
