"""Produce requests sent one after another without waiting (a client's requests in flight)
are queued together, answered in request order, and a request of another kind after them
waits for them (engine/wire/connection.py: MAX_PIPELINED)."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceResponse

from engine.wire import connection
from tests.engine.wire.test_bad_input import Raw, _batch, produce_request


@pytest.fixture
def raw(wire):
    conn = Raw(wire.server.address)
    yield conn
    conn.close()


def test_requests_in_flight_are_answered_in_order_and_a_fetch_after_them_sees_them(wire, raw):
    wire.cluster.create_topic("/kafka:pipe", partitions=1)
    count = 3 * connection.MAX_PIPELINED  # past the bound: the reader waits, then goes on
    sent = [
        raw.send(produce_request("pipe", _batch(b"%d-a" % i, b"%d-b" % i)), 7) for i in range(count)
    ]
    fetch = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 24,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic="pipe",
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )  # fmt: skip
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    fetched = raw.send(fetch, 12)  # sent before any answer was read
    offsets = []
    for correlation in sent:
        answer = ProduceResponse.decode(raw.read_frame(), version=7, header=True)
        assert answer.header.correlation_id == correlation
        [topic] = answer.responses
        [partition] = topic.partition_responses
        assert partition.error_code == 0
        offsets.append(partition.base_offset)
    assert offsets == [2 * i for i in range(count)]  # each request's two, in order
    answer = FetchResponse.decode(raw.read_frame(), version=12, header=True)
    assert answer.header.correlation_id == fetched
    [topic] = answer.responses
    [partition] = topic.partitions
    assert partition.high_watermark == 2 * count  # every request before it was written
    # the connection goes on as before
    metadata = raw.call(MetadataRequest(topics=[]), 1, MetadataResponse)
    assert metadata.brokers[0].node_id == 0
