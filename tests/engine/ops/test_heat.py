"""Heat: write and read counts per partitionlet, partition, topic and volume match a known
load, and new partitionlets go to the coolest volume."""

from __future__ import annotations

import pytest

from engine import Consumer, Producer, TopicPartition, errors


def load(cluster, topic, n, size, partitions):
    producer = Producer(cluster, acks=1)
    for i in range(n):
        producer.send(topic, value=b"x" * size, partition=i % partitions)
    producer.flush()
    producer.close()


def read_all(cluster, topic, partitions, n):
    consumer = Consumer(cluster, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    got = 0
    while got < n:
        got += sum(len(r) for r in consumer.poll(timeout_ms=200).values())
    consumer.close()  # adds its read counts to the volumes
    return got


def test_heat_matches_a_known_load(cluster):
    cluster.create_stream("/h", ttl=0)
    cluster.create_topic("/h:a", partitions=2)
    cluster.create_topic("/h:b", partitions=1)
    load(cluster, "/h:a", 300, 100, 2)
    load(cluster, "/h:b", 50, 1000, 1)
    assert read_all(cluster, "/h:a", 2, 300) == 300
    heat = cluster.heat(window_s=60)
    assert heat.topics["/h:a"].write_messages == 300
    assert heat.topics["/h:b"].write_messages == 50
    assert heat.topics["/h:a"].read_messages == 300
    assert heat.topics["/h:b"].read_messages == 0
    for p in (0, 1):
        assert heat.partitions[TopicPartition("/h:a", p)].write_messages == 150
    # stored bytes include the batch framing: at least the values, not wildly more
    assert 50_000 <= heat.topics["/h:b"].write_bytes <= 60_000
    assert 30_000 <= heat.topics["/h:a"].read_bytes <= 40_000
    assert heat.total.write_messages == 350
    assert sum(v.write_messages for v in heat.volumes.values()) == 350
    assert sum(v.write_messages for v in heat.partitionlets.values()) == 350
    # per bucket: the series add up to the totals, one Load per bucket
    for series in heat.volume_series.values():
        assert len(series) == len(heat.buckets) == 6
    assert sum(s.write_messages for ss in heat.volume_series.values() for s in ss) == 350
    assert heat.topics["/h:a"].write_messages_per_s == pytest.approx(300 / 60)
    assert heat.hottest_partitions(1)[0][0] in (
        TopicPartition("/h:a", 0),
        TopicPartition("/h:a", 1),
    )


def test_heat_window_is_checked(cluster):
    with pytest.raises(errors.InvalidArgument):
        cluster.heat(window_s=1)
    with pytest.raises(errors.InvalidArgument):
        cluster.heat(window_s="300")


def test_new_partitionlets_avoid_the_hot_volume(cluster):
    cluster.create_stream("/h", ttl=0)
    cluster.create_topic("/h:hot", partitions=1)
    load(cluster, "/h:hot", 200, 1000, 1)
    hot_volume = cluster.topic("/h:hot").partitions[0].partitionlets[0].volume
    cluster.placement._read_at = 0  # forget the cached heat figures
    cluster.create_topic("/h:new", partitions=3)
    load(cluster, "/h:new", 3, 10, 3)
    volumes = [p.partitionlets[0].volume for p in cluster.topic("/h:new").partitions]
    assert hot_volume not in volumes
    assert len(set(volumes)) == 3  # spread over the three cool volumes


def test_top_lists_the_hottest_partitions_with_the_same_figures(cluster):
    cluster.create_stream("/h", ttl=0)
    for i, n in enumerate((5, 40, 20, 1, 30)):
        cluster.create_topic(f"/h:t{i}", partitions=1)
        load(cluster, f"/h:t{i}", n, 10, 1)
    full = cluster.heat(window_s=60)
    top = cluster.heat(window_s=60, top=3)
    ranked = [tp.topic for tp, _ in top.hottest_partitions(10)]
    assert ranked == ["/h:t1", "/h:t4", "/h:t2"]
    for tp, load_ in top.partitions.items():
        assert load_ == full.partitions[tp]
        assert top.partition_series[tp] == full.partition_series[tp]
    assert top.volumes == full.volumes
    assert sum(x.write_messages for x in full.partitionlets.values()) == 96
    assert top.partitionlets == {}
    # ranked by bytes instead, and a cold partition asked for by name comes along
    load(cluster, "/h:t3", 1, 5000, 1)
    by_bytes = cluster.heat(window_s=60, top=1, by="bytes", include=[TopicPartition("/h:t0", 0)])
    assert list(by_bytes.partitions) == [TopicPartition("/h:t3", 0), TopicPartition("/h:t0", 0)]
    assert by_bytes.partitions[TopicPartition("/h:t0", 0)].write_messages == 5
    with pytest.raises(errors.InvalidArgument):
        cluster.heat(window_s=60, top=-1)
    with pytest.raises(errors.InvalidArgument):
        cluster.heat(window_s=60, top=3, by="heat")
