"""A stream of 100,000 topics, made by producing one message to each: topics are rows, so
counting, paging and reopening stay cheap (speed is measured by `plet bench`, not here)."""

from __future__ import annotations

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition
from tests.timing import scaled

N = 100_000


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    path = tmp_path_factory.mktemp("many") / "cluster"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/fleet", ttl=0, default_partitions=1)
        producer = Producer(cluster, acks=1)
        futures = [producer.send(f"/fleet:car-{i:06d}", value=str(i).encode()) for i in range(N)]
        producer.flush()
        producer.close()
        assert {f.get(timeout=scaled(30)).offset for f in futures} == {0}
    return path


def test_every_topic_exists_once_with_its_message(many):
    with Cluster.open(many) as cluster:
        assert cluster.topic_count("/fleet") == N
        assert cluster.stream("/fleet").topic_count == N
        assert cluster.stream("/fleet").messages == N
        info = cluster.topic("/fleet:car-054321")
        assert [(p.log_start_offset, p.log_end_offset) for p in info.partitions] == [(0, 1)]
        consumer = Consumer(cluster, enable_auto_commit=False)
        consumer.assign([TopicPartition("/fleet:car-054321", 0)])
        consumer.seek_to_beginning()
        records = consumer.poll(timeout_ms=1000)[TopicPartition("/fleet:car-054321", 0)]
        assert [r.value for r in records] == [b"54321"]
        consumer.close()


def test_pages_are_ordered_and_complete(many):
    with Cluster.open(many) as cluster:
        page = cluster.topics("/fleet", limit=50, offset=70_000)
        assert [t.topic for t in page] == [f"car-{i:06d}" for i in range(70_000, 70_050)]
        assert all(t.messages == 1 for t in page)
        after = cluster.topics("/fleet", limit=50, after="car-069999")
        assert [t.topic for t in after] == [t.topic for t in page]
        assert cluster.topic_names("/fleet", limit=2, after="car-099998") == ["/fleet:car-099999"]
        last = cluster.topics("/fleet", limit=50, offset=N - 10)
        assert len(last) == 10
        assert cluster.topic_count("/fleet", prefix="car-0999") == 100
        assert [t.topic for t in cluster.topics("/fleet", prefix="car-09999")] == [
            f"car-{i:06d}" for i in range(99_990, 100_000)
        ]


def test_partitionlets_spread_over_the_volumes(many):
    with Cluster.open(many) as cluster:
        per_volume = [v.partitionlets for v in cluster.volumes()]
        assert sum(per_volume) == N
        assert min(per_volume) > N / len(per_volume) / 2
