"""Reading a whole topic back in tests (an import against its export, a round trip), and a
partition's stored batches as they lie in its volumes."""

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


def stored(cluster, topic: str, partition: int = 0) -> list[tuple]:
    """(base_offset, last_offset, payload) of every stored batch of a partition, read from
    its volumes as they hold them (compressed, or a Kafka batch as it came)."""
    stream, name = topic.split(":")
    row = cluster.catalog.topic(stream, name)
    out = []
    for pl in cluster.catalog.chain(row.id, partition):
        for base, last, _, _, _, payload in cluster.volume(pl.volume_id).read(pl.id, 0, 10_000):
            out.append((base, last, payload))
    return out
