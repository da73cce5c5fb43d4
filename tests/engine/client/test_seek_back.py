"""A consumer that seeks back after reading ahead reads from where it sought, not from the
batches it had fetched ahead (no message skipped)."""

from __future__ import annotations

from engine import Consumer, Producer, TopicPartition


def test_seek_back_after_a_read_ahead_reads_from_the_sought_offset(cluster):
    cluster.create_stream("/s", ttl=0)
    cluster.create_topic("/s:t", partitions=1)
    producer = Producer(cluster, acks=1)
    for i in range(100):  # one batch per message: flush after each
        producer.send("/s:t", value=str(i).encode())
        producer.flush()
    producer.close()
    tp = TopicPartition("/s:t", 0)
    consumer = Consumer(cluster, enable_auto_commit=False)
    consumer.assign([tp])
    consumer.seek(tp, 50)
    assert [r.offset for r in consumer.poll(0, max_records=5)[tp]] == [50, 51, 52, 53, 54]
    consumer.seek(tp, 10)
    assert [r.offset for r in consumer.poll(0, max_records=5)[tp]] == [10, 11, 12, 13, 14]
    consumer.seek(tp, 12)  # back inside the batch just read
    got = consumer.poll(0, max_records=200)[tp]
    assert [r.offset for r in got] == list(range(12, 100))
    assert [int(r.value) for r in got] == list(range(12, 100))
    consumer.close()
