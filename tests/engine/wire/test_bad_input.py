"""Bad input over a raw socket, as Kafka answers it: a framing error (a frame over the
size limit, a request that does not parse, an unknown api key) closes that connection only;
a request that parses but is wrong gets its error code and the connection stays."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from crc32c import crc32c
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from engine import Cluster, Consumer, Principal, TopicPartition, errors
from engine.wire import KafkaServer
from tests.timing import scaled

UNKNOWN_TOPIC_OR_PARTITION = 3
CORRUPT_MESSAGE = 2
INVALID_TOPIC_EXCEPTION = 17
TOPIC_AUTHORIZATION_FAILED = 29
UNSUPPORTED_VERSION = 35
RECORD_LIST_TOO_LARGE = 18
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
GZIP, ZSTD = 1, 4


class Raw:
    def __init__(self, address):
        self.sock = socket.create_connection(address, timeout=20)
        self.correlation = 0

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        head = self._exactly(4)
        (size,) = struct.unpack(">i", head)
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the server")
            out += chunk
        return out

    def closed_by_server(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def send(self, request, version) -> int:
        """Send a request without reading its answer; returns its correlation id."""
        self.correlation += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation, client_id="raw")
        self.send_bytes(bytes(request.encode(header=True, framed=True)))
        return self.correlation

    def call(self, request, version, response_class):
        self.send(request, version)
        return response_class.decode(self.read_frame(), version=version, header=True)

    def close(self):
        self.sock.close()


@pytest.fixture
def raw(wire):
    conn = Raw(wire.server.address)
    yield conn
    conn.close()


def _batch(
    *values: bytes, producer_id=-1, epoch=-1, sequence=-1, corrupt=False, compression=0
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        2, compression, False, producer_id, epoch, sequence, 1 << 30
    )
    for i, value in enumerate(values):
        builder.append(i, None, None, value, [])
    data = bytearray(builder.build())
    if corrupt:
        data[-1] ^= 0xFF  # inside the CRC'd part
    return bytes(data)


def produce_request(topic, records) -> ProduceRequest:
    """acks=all, `records` to partition 0 of `topic`."""
    P = ProduceRequest.TopicProduceData
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            P(name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])
        ],
    )


def _produce(raw, topic, records, version=7):
    response = raw.call(produce_request(topic, records), version, ProduceResponse)
    [topic_response] = response.responses
    [partition] = topic_response.partition_responses
    return partition.error_code, partition.base_offset


def _still_answers(raw) -> None:
    response = raw.call(MetadataRequest(topics=[]), 1, MetadataResponse)
    assert response.brokers[0].node_id == 0


def test_a_frame_over_the_size_limit_closes_that_connection_only(wire, raw):
    other = Raw(wire.server.address)
    raw.send_bytes(struct.pack(">i", 200 * 1024 * 1024) + b"\0" * 64)
    assert raw.closed_by_server()
    _still_answers(other)
    other.close()


def test_a_request_that_does_not_parse_closes_the_connection(raw):
    # Metadata v1: a header, then a topic array claiming 1000 names and no bytes for them
    body = struct.pack(">hhih", 3, 1, 7, 3) + b"raw" + struct.pack(">i", 1000)
    raw.send_bytes(struct.pack(">i", len(body)) + body)
    assert raw.closed_by_server()


def test_an_unknown_api_key_closes_the_connection_as_kafka_does(raw):
    body = struct.pack(">hhih", 999, 0, 7, 3) + b"raw"
    raw.send_bytes(struct.pack(">i", len(body)) + body)
    assert raw.closed_by_server()


def test_api_versions_too_new_gets_error_35_and_a_v0_list(raw):
    body = struct.pack(">hhih", 18, 99, 42, 3) + b"raw" + b"\0" * 8
    raw.send_bytes(struct.pack(">i", len(body)) + body)
    frame = raw.read_frame()
    (correlation,) = struct.unpack_from(">i", frame)
    assert correlation == 42
    response = ApiVersionsResponse.decode(frame[4:], version=0)
    assert response.error_code == UNSUPPORTED_VERSION
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert versions[18] == (0, 4)
    assert versions[0] == (3, 12) and versions[1] == (4, 12)
    _still_answers(raw)


def test_produce_to_a_missing_topic_without_auto_create_creates_nothing(wire, raw):
    wire.cluster.create_stream("/strict", auto_create=False)
    assert _produce(raw, "/strict:nope", _batch(b"x"))[0] == UNKNOWN_TOPIC_OR_PARTITION
    response = raw.call(
        MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="/strict:nope")],
            allow_auto_topic_creation=True,
        ),
        4,
        MetadataResponse,
    )
    assert response.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(errors.UnknownTopic):
        wire.cluster.topic("/strict:nope")
    assert wire.cluster.topic_count("/strict") == 0


def test_metadata_auto_creates_where_the_stream_allows_it(wire, raw):
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="made-on-ask")],
        allow_auto_topic_creation=True,
    )
    response = raw.call(request, 9, MetadataResponse)
    assert response.topics[0].error_code == 0
    assert wire.cluster.topic("/kafka:made-on-ask").name == "/kafka:made-on-ask"


def test_metadata_creates_many_topics_together_and_answers_each(wire, raw):
    wire.cluster.create_stream("/md-fleet", default_partitions=3)
    wire.cluster.create_stream("/md-strict", auto_create=False)
    wire.cluster.create_topic("/md-fleet:old", 1)
    named = [f"/md-fleet:car-{i}" for i in range(200)] + [
        "/md-fleet:old",
        "/md-strict:nope",
        "bad name!",
    ]
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in named],
        allow_auto_topic_creation=True,
    )
    topics_version = wire.cluster.catalog.versions()[1]
    response = raw.call(request, 9, MetadataResponse)
    answers = {t.name: (t.error_code, len(t.partitions)) for t in response.topics}
    assert answers == {
        **{f"/md-fleet:car-{i}": (0, 3) for i in range(200)},
        "/md-fleet:old": (0, 1),
        "/md-strict:nope": (UNKNOWN_TOPIC_OR_PARTITION, 0),
        "bad name!": (INVALID_TOPIC_EXCEPTION, 0),
    }
    assert wire.cluster.topic_count("/md-fleet") == 201
    # the 200 were made in one catalog transaction, which moves the topics version once
    assert wire.cluster.catalog.versions()[1] == topics_version + 1


def test_invalid_names_and_bad_crc_get_error_codes_and_the_connection_stays(wire, raw):
    assert _produce(raw, "/no-colon", _batch(b"x"))[0] == INVALID_TOPIC_EXCEPTION
    assert _produce(raw, "bad name!", _batch(b"x"))[0] == INVALID_TOPIC_EXCEPTION
    wire.cluster.create_topic("/kafka:crc")
    assert _produce(raw, "crc", _batch(b"x", corrupt=True))[0] == CORRUPT_MESSAGE
    assert wire.cluster.topic("/kafka:crc").partitions[0].log_end_offset == 0
    _still_answers(raw)


@pytest.mark.parametrize("codec", [GZIP, ZSTD])
def test_a_decompression_bomb_is_refused_before_it_fills_memory(wire, raw, codec):
    """A few kilobytes that inflate to 80 MB: refused with RECORD_LIST_TOO_LARGE (the
    listener stops inflating at its 64 MiB bound), nothing written, the connection stays."""
    topic = f"bomb-{codec}"
    _default_stream(wire.cluster)
    wire.cluster.create_topic(f"/kafka:{topic}")
    bomb = _batch(bytes(80 << 20), compression=codec)
    assert len(bomb) < 200_000
    assert _produce(raw, topic, bomb)[0] == RECORD_LIST_TOO_LARGE
    assert wire.cluster.topic(f"/kafka:{topic}").partitions[0].log_end_offset == 0
    _still_answers(raw)


def test_many_small_bombs_in_one_request_are_refused_together(wire, raw):
    """Issue 23: the 64 MiB bound is per request, not per batch. Two zstd batches of a few
    kilobytes that inflate to 40 MiB each (32 such took the listener to 2.1 GiB), in one
    partition or in two: refused with RECORD_LIST_TOO_LARGE, nothing of that partition
    written, and a normal client is answered within 2 s."""
    _default_stream(wire.cluster)
    wire.cluster.create_topic("/kafka:bombs", partitions=2)
    bomb = _batch(*[bytes(1 << 20)] * 40, compression=ZSTD)  # 40 records of 1 MiB
    assert len(bomb) < 20_000
    assert _produce(raw, "bombs", bomb + bomb)[0] == RECORD_LIST_TOO_LARGE
    assert wire.cluster.topic("/kafka:bombs").partitions[0].log_end_offset == 0

    P = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=10_000,
        topic_data=[
            P(
                name="bombs",
                partition_data=[P.PartitionProduceData(index=i, records=bomb) for i in (0, 1)],
            )
        ],
    )
    [answer] = raw.call(request, 7, ProduceResponse).responses
    assert [p.error_code for p in answer.partition_responses] == [0, RECORD_LIST_TOO_LARGE]
    assert wire.cluster.topic("/kafka:bombs").partitions[1].log_end_offset == 0

    other = Raw(wire.server.address)
    started = time.monotonic()
    _still_answers(other)
    assert time.monotonic() - started < scaled(2)
    other.close()


def test_a_batch_whose_count_lies_is_corrupt(wire, raw):
    _default_stream(wire.cluster)
    wire.cluster.create_topic("/kafka:liar")
    data = bytearray(_batch(b"a", b"b", b"c"))
    struct.pack_into(">i", data, 57, 2)  # record count 2, last offset delta still 2
    assert _produce(raw, "liar", bytes(data))[0] == CORRUPT_MESSAGE
    struct.pack_into(">i", data, 23, 1)  # both say 2 now, the batch holds 3 (CRC fixed up)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    assert _produce(raw, "liar", bytes(data))[0] == CORRUPT_MESSAGE
    assert wire.cluster.topic("/kafka:liar").partitions[0].log_end_offset == 0
    _still_answers(raw)


def _default_stream(cluster) -> None:
    if not any(s.path == "/kafka" for s in cluster.streams()):
        cluster.create_stream("/kafka")


def test_produce_denied_by_an_ace_writes_nothing(wire):
    wire.cluster.create_stream("/guarded", produce_perm="u:alice")
    wire.cluster.create_topic("/guarded:t")
    with Cluster.open(wire.cluster.path, principal=Principal("mallory")) as as_mallory:
        with KafkaServer(as_mallory, listen=("127.0.0.1", 0)) as server:
            conn = Raw(server.address)
            try:
                assert _produce(conn, "/guarded:t", _batch(b"x"))[0] == TOPIC_AUTHORIZATION_FAILED
            finally:
                conn.close()
    assert wire.cluster.topic("/guarded:t").partitions[0].log_end_offset == 0


def test_an_idempotent_resend_is_acknowledged_once_and_stored_once(wire, raw):
    wire.cluster.create_topic("/kafka:idem")
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
    pid = raw.call(request, 1, InitProducerIdResponse).producer_id  # only issued ids count
    first = _batch(b"a", b"b", producer_id=pid, epoch=0, sequence=0)
    assert _produce(raw, "idem", first) == (0, 0)
    assert _produce(raw, "idem", first) == (0, 0)  # the same batch again: same answer
    nxt = _batch(b"c", producer_id=pid, epoch=0, sequence=2)
    assert _produce(raw, "idem", nxt) == (0, 2)
    gap = _batch(b"z", producer_id=pid, epoch=0, sequence=7)
    assert _produce(raw, "idem", gap)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    consumer = Consumer(wire.cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("/kafka:idem", 0)])
    records = consumer.poll(timeout_ms=2000)
    consumer.close()
    assert [r.value for rs in records.values() for r in rs] == [b"a", b"b", b"c"]


def test_an_unsupported_version_of_another_api_closes_the_connection(raw):
    # Produce v2 (the old message format): below the listener's range, as Kafka 4 refuses it
    body = struct.pack(">hhih", 0, 2, 7, 3) + b"raw" + struct.pack(">hii", -1, 1000, 0)
    raw.send_bytes(struct.pack(">i", len(body)) + body)
    assert raw.closed_by_server()
