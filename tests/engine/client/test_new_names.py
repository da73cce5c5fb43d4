"""Names a producer has not looked up yet: `send` queues their messages and the sender looks
the names up (or creates the topics) together, then places the messages in partitions as
`send` would have. Whatever the topic turns out to be, every message lands where the
partitioner says, in order, and its future and callbacks tell where."""

from __future__ import annotations

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from engine.client.partitioner import partition_for_key
from tests.timing import scaled

S = "/s"


@pytest.fixture
def cluster(cluster_path):
    with Cluster.open(cluster_path) as c:
        c.create_stream(S, ttl=0, default_partitions=1)
        yield c


def values_in(cluster: Cluster, topic: str, partition: int) -> list[bytes | None]:
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if consumer.end_offsets([tp])[tp] == 0:
            return []
        return [r.value for r in consumer.poll(timeout_ms=scaled(2000), max_records=10_000)[tp]]
    finally:
        consumer.close()


def test_keyed_messages_to_a_topic_it_did_not_know_go_where_their_keys_say(cluster):
    cluster.create_topic(f"{S}:t", partitions=4)  # the stream would make one partition
    producer = Producer(cluster, acks=1, linger_ms=100)
    keys = [f"k{i % 7}".encode() for i in range(40)]
    called = []
    futures = [
        producer.send(f"{S}:t", value=str(i).encode(), key=k).add_callback(called.append)
        for i, k in enumerate(keys)
    ]
    producer.flush()
    metas = [f.get(timeout=scaled(10)) for f in futures]
    assert [m.partition for m in metas] == [partition_for_key(k, 4) for k in keys]
    assert sorted(called, key=lambda m: (m.partition, m.offset)) == sorted(
        metas, key=lambda m: (m.partition, m.offset)
    )
    for partition in range(4):
        sent = [str(i).encode() for i, m in enumerate(metas) if m.partition == partition]
        assert [m.offset for m in metas if m.partition == partition] == list(range(len(sent)))
        assert values_in(cluster, f"{S}:t", partition) == sent
    producer.close()


def test_unkeyed_messages_of_a_topic_it_did_not_know_stick_to_one_partition(cluster):
    cluster.create_topic(f"{S}:t", partitions=3)
    with Producer(cluster, acks=1, linger_ms=100) as producer:
        futures = [producer.send(f"{S}:t", value=bytes([i])) for i in range(10)]
        producer.flush()
        metas = [f.get(timeout=scaled(10)) for f in futures]
    assert {m.partition for m in metas} == {0}
    assert [m.offset for m in metas] == list(range(10))


def test_a_new_topic_gets_its_streams_partitions_and_keeps_the_order_of_sends(cluster):
    cluster.edit_stream(S, default_partitions=2)
    with Producer(cluster, acks=1) as producer:
        sent = []
        for i in range(300):  # before, during and after the sender's lookup
            key = None if i % 3 else f"k{i % 5}".encode()
            sent.append((producer.send(f"{S}:new", value=str(i).encode(), key=key), i))
        producer.flush()
        placed = [(f.get(timeout=scaled(10)), i) for f, i in sent]
    assert cluster.topic(f"{S}:new").partition_count == 2
    for partition in range(2):
        mine = [(m.offset, str(i).encode()) for m, i in placed if m.partition == partition]
        assert [o for o, _ in mine] == list(range(len(mine)))
        assert values_in(cluster, f"{S}:new", partition) == [v for _, v in mine]


def test_a_message_over_a_topics_own_limit_fails_alone(cluster, cluster_path):
    with Producer(cluster, acks=1) as producer:
        producer.send(f"{S}:first", value=b"x").get(timeout=scaled(10))  # the stream is known
        # another process makes a topic with a lower limit of its own meanwhile
        with Cluster.open(cluster_path) as elsewhere:
            elsewhere.create_topic(f"{S}:small", policies={"max_message_bytes": 50})
        big = producer.send(f"{S}:small", value=b"b" * 60)
        small = producer.send(f"{S}:small", value=b"s" * 10)
        failed = []
        big.add_errback(failed.append)
        producer.flush()
        with pytest.raises(errors.MessageTooLarge, match="max_message_bytes=50"):
            big.get(timeout=scaled(10))
        assert small.get(timeout=scaled(10)).offset == 0
        assert [type(e) for e in failed] == [errors.MessageTooLarge]
        # now known: refused at send, as for any topic
        with pytest.raises(errors.MessageTooLarge):
            producer.send(f"{S}:small", value=b"b" * 60)
    assert values_in(cluster, f"{S}:small", 0) == [b"s" * 10]


def test_what_send_must_refuse_at_once_it_still_does(cluster):
    cluster.create_stream("/closed", ttl=0, auto_create=False)
    cluster.create_topic(f"{S}:two", partitions=2)
    with Producer(cluster, acks=1) as producer:
        with pytest.raises(errors.UnknownTopic):
            producer.send("/closed:t", value=b"x")
        with pytest.raises(errors.InvalidPartition):
            producer.send(f"{S}:two", value=b"x", partition=2)
        with pytest.raises(errors.InvalidName):
            producer.send(f"{S}:bad name", value=b"x")
        assert (
            producer.send(f"{S}:two", value=b"x", partition=1).get(timeout=scaled(10)).offset == 0
        )


def test_flushes_while_the_sender_writes_keep_every_new_topics_messages(cluster):
    """A flush encodes the next batches while the sender writes (engine.client.producer):
    pending batches of new names among them are placed all the same."""
    cluster.edit_stream(S, default_partitions=2)
    names = [f"{S}:r{r}-{t}" for r in range(10) for t in range(3)]
    with Producer(cluster, acks=1) as producer:
        sent = []
        for r in range(10):
            for i in range(30):  # new names each round, while the last round is written
                key = None if i % 2 else f"k{i}".encode()
                name, value = f"{S}:r{r}-{i % 3}", f"{r}-{i}".encode()
                sent.append((producer.send(name, value=value, key=key), name, value))
            producer.flush()
        placed = [(f.get(timeout=scaled(10)), name, value) for f, name, value in sent]
    for name in names:
        for partition in range(2):
            mine = [(m.offset, v) for m, n, v in placed if n == name and m.partition == partition]
            assert [o for o, _ in mine] == list(range(len(mine)))
            assert values_in(cluster, name, partition) == [v for _, v in mine]


def test_one_new_name_known_twice_in_a_cycle_is_made_once_for_both(cluster):
    """A name whose pending batch outlives its cached state (dropped when the metadata
    changed, or replaced by a lookup for an explicit partition) and the state made since
    both get the topic the sender creates."""
    with Producer(cluster, acks=1, linger_ms=300) as producer:
        first = producer.send(f"{S}:twice", value=b"a")
        producer.forget_metadata()  # as when topics or policies change elsewhere
        second = producer.send(f"{S}:twice", value=b"b")
        third = producer.send(f"{S}:twice", value=b"c", partition=0)  # looked up at send
        producer.flush()
        offsets = [f.get(timeout=scaled(10)).offset for f in (first, second, third)]
    assert offsets == [0, 1, 2]
    assert cluster.topic_count(S) == 1
    assert values_in(cluster, f"{S}:twice", 0) == [b"a", b"b", b"c"]
