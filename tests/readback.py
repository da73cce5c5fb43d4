"""Reading a whole topic back in tests (an import against its export, a round trip)."""

from __future__ import annotations

from engine import Consumer, TopicPartition


def every_message(cluster, topic: str) -> list[tuple]:
    """Every message of `topic` as (partition, offset, timestamp, key, value, headers),
    sorted."""
    consumer = Consumer(cluster)
    try:
        count = cluster.topic(topic).partition_count
        consumer.assign([TopicPartition(topic, p) for p in range(count)])
        consumer.seek_to_beginning()
        found = []
        while batch := consumer.poll(timeout_ms=0, max_records=10_000):
            for records in batch.values():
                found += [
                    (r.partition, r.offset, r.timestamp, r.key, r.value, list(r.headers or ()))
                    for r in records
                ]
        return sorted(found)
    finally:
        consumer.close(autocommit=False)
