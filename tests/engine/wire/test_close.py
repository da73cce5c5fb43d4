"""Closing a cluster while its listener serves: the listener closes first (its requests
end, its producers flush), so every acknowledged message is kept and nothing crashes."""

from __future__ import annotations

import socket
import threading

from kafka import KafkaProducer
from kafka.errors import KafkaError

from engine import Cluster, Consumer, TopicPartition
from engine.wire import KafkaServer
from tests.timing import scaled


def test_closing_the_cluster_closes_its_listener_and_keeps_what_was_acknowledged(tmp_path):
    cluster = Cluster.open(tmp_path / "c", volumes=1)
    cluster.create_stream("/kafka")
    cluster.create_topic("/kafka:t", partitions=1)
    server = KafkaServer(cluster, listen=("127.0.0.1", 0)).start()
    host, port = server.address
    # short timeouts: the send under way when the listener goes fails soon, and close() ends
    producer = KafkaProducer(
        bootstrap_servers=f"{host}:{port}",
        acks=1,
        linger_ms=0,
        request_timeout_ms=int(scaled(1000)),
        delivery_timeout_ms=int(scaled(1500)),
    )
    acked: list[int] = []
    sending = threading.Event()

    def produce() -> None:
        n = 0
        while True:
            try:
                acked.append(producer.send("t", str(n).encode()).get(timeout=scaled(2)).offset)
            except KafkaError:
                return  # the listener has gone
            n += 1
            if n == 50:
                sending.set()

    thread = threading.Thread(target=produce, name="wire-close-producer")
    thread.start()
    assert sending.wait(30), "the producer never got going"
    cluster.close()  # while the producer sends
    thread.join(30)
    producer.close(timeout=10)

    assert not thread.is_alive()
    try:
        socket.create_connection((host, port), timeout=2).close()
    except ConnectionRefusedError:
        pass
    else:
        raise AssertionError("the listener still accepts connections after its cluster closed")
    with Cluster.open(tmp_path / "c") as reopened:
        consumer = Consumer(reopened, enable_auto_commit=False)
        tp = TopicPartition("/kafka:t", 0)
        end = consumer.end_offsets([tp])[tp]
        consumer.close()
    assert len(acked) >= 50
    assert acked == list(range(len(acked)))
    assert end >= len(acked)  # every acknowledged message is kept
