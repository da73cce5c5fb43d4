"""Cluster.totals(): streams, topics, messages and bytes, from per-stream figures."""

from __future__ import annotations

from engine import Producer


def test_totals_follow_produce_and_delete(cluster):
    assert cluster.totals().streams == 0 and cluster.totals().messages == 0
    cluster.create_stream("/a", ttl=0)
    cluster.create_stream("/b", ttl=0)
    producer = Producer(cluster, acks=1)
    for i in range(30):
        producer.send(f"/a:t{i % 3}", value=b"x" * 10)
    producer.send("/b:z", value=b"y")
    producer.flush()
    producer.close()
    totals = cluster.totals()
    assert (totals.streams, totals.topics, totals.messages) == (2, 4, 31)
    a, b = cluster.stream("/a"), cluster.stream("/b")
    assert totals.bytes == a.bytes + b.bytes > 0
    cluster.delete_stream("/a")
    totals = cluster.totals()
    assert (totals.streams, totals.topics, totals.messages) == (1, 1, 1)
    assert totals.bytes == b.bytes
