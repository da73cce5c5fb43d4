"""A replication token's holder sends integers past every bound to the other operations of
the replication API (end_offsets, ensure_topics, batch_at, merge_offsets): each is a quick
400 that changes nothing, never a 500 or a server looping over 2^64 partitions. Performed
against a live console over a real socket."""

from __future__ import annotations

import time

import pytest

from engine import Producer
from tests.timing import scaled

HUGE = 2**64


@pytest.fixture
def token_api(live_web):
    cluster = live_web.cluster
    cluster.create_stream("/s", ttl=0)
    cluster.create_topic("/s:t", partitions=2)
    producer = Producer(cluster)
    producer.send("/s:t", b"v", partition=0).get(scaled(10))
    producer.close()
    return live_web.api(cluster.create_replication_token("/s"))


@pytest.mark.parametrize(
    "op, body",
    [
        ("end_offsets", {"topics": [["t", HUGE]]}),
        ("end_offsets", {"topics": [["t", 10_000]]}),  # more partitions than the topic has
        ("ensure_topics", {"topics": [["t", HUGE]]}),
        ("ensure_topics", {"topics": [["t", 10_001]]}),
        ("batch_at", {"topic": "t", "partition": HUGE, "offset": 0}),
        ("batch_at", {"topic": "t", "partition": 2, "offset": 0}),
        ("batch_at", {"topic": "t", "partition": 0, "offset": HUGE}),
        ("merge_offsets", {"rows": [["g", "t", 0, HUGE, "", 0]]}),
        ("merge_offsets", {"rows": [["g", "t", HUGE, 1, "", 0]]}),
        ("merge_offsets", {"rows": [["g", "t", 0, 1, "", HUGE]]}),
        ("merge_offsets", {"rows": [["g", "t", 0, 1, "m" * 5000, 0]]}),
    ],
)
def test_out_of_range_integers_are_a_quick_400(live_web, token_api, op, body):
    started = time.monotonic()
    answer = token_api.post(f"/api/v1/replication/{op}", json={"stream": "/s", **body})
    assert answer.status_code == 400, answer.text[:300]
    assert time.monotonic() - started < scaled(5)
    cluster = live_web.cluster
    assert cluster.topic("/s:t").partitions[0].log_end_offset == 1
    assert len(cluster.topic("/s:t").partitions) == 2
    assert cluster.groups() == []


def test_in_range_requests_still_work(token_api):
    answer = token_api.post(
        "/api/v1/replication/end_offsets", json={"stream": "/s", "topics": [["t", 2], ["t", 2]]}
    )
    assert answer.status_code == 200, answer.text[:300]
    assert sorted(map(tuple, answer.json()["ends"])) == [("t", 0, 1), ("t", 1, 0)]
