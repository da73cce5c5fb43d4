"""The API version ranges the listener advertises: Kafka 4.x's where the engine honours
them (KIP-896's floors), so clients that infer the broker from them see a 4.x broker."""

from __future__ import annotations

import socket
import struct

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka.admin import NewTopic
from kafka.net.compat import KafkaNetClient
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tests.timing import scaled

KAFKA_4_0 = BROKER_API_VERSIONS[(4, 0)]
KAFKA_4_2 = BROKER_API_VERSIONS[(4, 2)]
NEWEST = BROKER_API_VERSIONS[max(BROKER_API_VERSIONS)]


def _call(address, request, version, response_class):
    with socket.create_connection(address, timeout=20) as sock:
        request.API_VERSION = version
        request.with_header(correlation_id=1, client_id="raw")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        frame = sock.recv(size, socket.MSG_WAITALL)
    return response_class.decode(frame, version=version, header=True)


@pytest.fixture(scope="module")
def advertised(wire):
    response = _call(wire.server.address, ApiVersionsRequest(), 4, ApiVersionsResponse)
    assert response.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_every_range_lies_within_kafkas(advertised):
    """Nothing below Kafka 4.0's floors (KIP-896 removed the old versions), nothing above
    the newest Kafka's maximum."""
    for key, (low, high) in advertised.items():
        assert low >= KAFKA_4_0[key][0], (key, low)
        assert high <= NEWEST[key][1], (key, high)


def test_kip_896_floors_and_the_4_x_maxima(advertised):
    assert advertised[0] == (3, 12)  # Produce: 13 names topics by id
    assert advertised[1] == (4, 12)  # Fetch: 13 names topics by id
    assert advertised[2] == KAFKA_4_2[2] == (1, 11)  # ListOffsets
    assert advertised[3] == (0, 9)  # Metadata: 10 gives topic ids
    assert advertised[11] == KAFKA_4_0[11] == (2, 9)  # JoinGroup
    assert advertised[18] == KAFKA_4_0[18] == (0, 4)  # ApiVersions
    assert advertised[22] == KAFKA_4_0[22] == (0, 5)  # InitProducerId


def test_kafka_python_infers_a_4_2_broker(wire):
    """From ListOffsets v11 (kafka-python's test for 4.2; 4.3's is DescribeLogDirs v5)."""
    client = KafkaNetClient(bootstrap_servers=wire.bootstrap)
    try:
        assert client.check_version() == (4, 2)
    finally:
        client.close()
    admin = KafkaAdminClient(bootstrap_servers=wire.bootstrap)
    try:  # admin calls pick their versions from the 4.x ranges
        admin.create_topics([NewTopic("made-by-admin", 2, 1)])
        assert "made-by-admin" in admin.list_topics()
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=wire.bootstrap)
    assert consumer.config["api_version"] == (4, 2)
    consumer.close()


def test_kafka_python_as_a_4_x_client_produces_and_lists_offsets(wire):
    producer = KafkaProducer(bootstrap_servers=wire.bootstrap)
    assert producer.config["api_version"] >= (4, 0)
    sent = [producer.send("versions", value=b"v%d" % i).get(timeout=scaled(30)) for i in range(3)]
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=wire.bootstrap, consumer_timeout_ms=2000)
    tp = KTP("versions", 0)
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 3}
    found = consumer.offsets_for_times({tp: sent[1].timestamp})[tp]
    assert found.offset <= 1
    consumer.close()


def test_list_offsets_v10_earliest_local_and_latest_tiered(wire):
    """-4 (KIP-405) is the log start and -5 (KIP-1005) -1, as a Kafka broker without remote
    storage answers: archived partitionlets stay in the log every reader reads."""
    wire.cluster.create_topic("/kafka:tiers", 1)
    producer = KafkaProducer(bootstrap_servers=wire.bootstrap)
    for i in range(4):
        producer.send("tiers", value=b"%d" % i).get(timeout=scaled(30))
    producer.close()
    request = _list_offsets("tiers", -1, -2, -4, -5)
    response = _call(wire.server.address, request, 10, ListOffsetsResponse)
    got = [(p.error_code, p.offset) for p in response.topics[0].partitions]
    assert got == [(0, 4), (0, 0), (0, 0), (0, -1)]


def _list_offsets(topic: str, *timestamps: int) -> ListOffsetsRequest:
    P = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    P(partition_index=0, current_leader_epoch=-1, timestamp=ts) for ts in timestamps
                ],
            )
        ],
        timeout_ms=1000,
    )


def test_list_offsets_v11_earliest_pending_upload(wire):
    """-6 (KIP-1023) is -1 with leader epoch -1, as a Kafka broker without remote storage
    answers (nothing waits for an upload: archived partitionlets stay in the log); a version
    before a spec's (v11 for -6, v9 for -5), or a negative timestamp that is no spec, is
    UNSUPPORTED_VERSION, as Kafka answers."""
    wire.cluster.create_topic("/kafka:pending", 1)
    producer = KafkaProducer(bootstrap_servers=wire.bootstrap)
    for i in range(3):
        producer.send("pending", value=b"%d" % i).get(timeout=scaled(30))
    producer.close()
    address = wire.server.address
    v11 = _call(address, _list_offsets("pending", -6, -5, -2, -1), 11, ListOffsetsResponse)
    got = [(p.error_code, p.offset, p.timestamp, p.leader_epoch) for p in v11.topics[0].partitions]
    assert got == [(0, -1, -1, -1), (0, -1, -1, -1), (0, 0, -1, 0), (0, 3, -1, 0)]
    v10 = _call(address, _list_offsets("pending", -6, -7, -1), 10, ListOffsetsResponse)
    assert [(p.error_code, p.offset) for p in v10.topics[0].partitions] == [
        (35, -1),
        (35, -1),
        (0, 3),
    ]
    v8 = _call(address, _list_offsets("pending", -5, -4), 8, ListOffsetsResponse)
    assert [(p.error_code, p.offset) for p in v8.topics[0].partitions] == [(35, -1), (0, 0)]
