"""Batches stored as the client sent them (a produce request's one uncompressed record batch
v2 per partition, `batch.VERSION_KAFKA`) and served so: real clients against a real
listener, the volume files read to see how each batch was stored, raw requests where a
client would hide what the listener did, and `codec.encode_spliced` on its own."""

from __future__ import annotations

import sqlite3
import struct
import time
from typing import Any

import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTP
from crc32c import crc32c
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceResponse

from engine import Cluster, Consumer, TopicPartition
from engine.records import CREATE_TIME
from engine.storage import batch as batch_codec
from engine.wire import codec
from tests.engine.wire.test_bad_input import Raw, produce_request
from tests.timing import scaled

# recent times: the default stream's ttl (7 days) hides older messages at once
BASE_MS = (int(time.time()) - 3600) * 1000
VERBATIM = batch_codec.VERSION_KAFKA  # 2: the engine's header, then the Kafka batch
DECODED = batch_codec.VERSION  # 1: laid out in columns
CORRUPT_MESSAGE = 2
CK_CREATE_TIME = 1  # confluent-kafka's TIMESTAMP_CREATE_TIME

Headers = list[tuple[str, bytes | None]]
Message = tuple[bytes | None, bytes | None, Headers, int]  # key, value, headers, timestamp


# --- helpers --------------------------------------------------------------------------------


def _stored(cluster: Cluster, full: str) -> list[tuple[int, int, bytes]]:
    """(base offset, last offset, payload) of every stored batch of partition 0 of `full`,
    read from the volume files themselves (opened read-only)."""
    stream, name = full.split(":")
    row = cluster.catalog.topic(stream, name)
    rows: list[tuple[int, int, bytes]] = []
    for pl in cluster.catalog.chain(row.id, 0):
        path = cluster.volume(pl.volume_id).path
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows += conn.execute(
                "SELECT base_offset, last_offset, payload FROM batches "
                "WHERE partitionlet = ? ORDER BY last_offset",
                (pl.id,),
            ).fetchall()
        finally:
            conn.close()
    return rows


def _layout(cluster: Cluster, full: str) -> list[tuple[int, int, int]]:
    """(base offset, last offset, payload version) of every stored batch."""
    return [(base, last, payload[0]) for base, last, payload in _stored(cluster, full)]


def _ck_produce(bootstrap: str, topic: str, runs: list[list[Message]], **config) -> None:
    """Each run of messages produced within one linger and flushed: one batch a run."""
    producer = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 1000, **config})
    failures = []
    for run in runs:
        for key, value, headers, ts in run:
            ck_headers: list[tuple[str, str | bytes | None]] = list(headers)
            producer.produce(
                topic,
                value=value,
                key=key,
                headers=ck_headers,
                timestamp=ts,
                partition=0,
                on_delivery=lambda err, msg: failures.append(err) if err else None,
            )
        assert producer.flush(scaled(30)) == 0
    assert failures == []


def _ck_consume(bootstrap: str, topic: str, offset: int, count: int, **config) -> list:
    """`count` messages from `offset` of partition 0, then whatever else comes in a short
    while (nothing should: a duplicate would show there)."""
    consumer = CKConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verbatim",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            **config,
        }
    )
    consumer.assign([CKTP(topic, 0, offset)])
    got: list[Any] = []
    deadline = time.monotonic() + scaled(20)
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append(msg)
    extra_until = time.monotonic() + 0.3
    while time.monotonic() < extra_until:
        msg = consumer.poll(0.05)
        if msg is not None:
            got.append(msg)
    consumer.close()
    return got


def _kp_consume(bootstrap: str, topic: str, offset: int, count: int, **config) -> list:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
        **config,
    )
    tp = KTP(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    got: list[Any] = []
    deadline = time.monotonic() + scaled(20)
    while len(got) < count and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=200).values():
            got.extend(messages)
    for messages in consumer.poll(timeout_ms=300).values():
        got.extend(messages)
    consumer.close()
    return got


def _engine_poll(cluster: Cluster, full: str, count: int) -> list:
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(full, 0)])
    got: list = []
    deadline = time.monotonic() + scaled(20)
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(records)
    consumer.close()
    return got


def _engine_arrow(cluster: Cluster, full: str) -> pa.Table:
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(full, 0)])
    parts = []
    while got := consumer.poll_arrow(timeout_ms=0, max_records=100_000):
        parts += list(got.values())
    consumer.close()
    return pa.Table.from_batches(parts)


def _values(n: int, size: int = 0, tag: bytes = b"") -> list[Message]:
    return [(b"k%d" % i, tag + b"value %d " % i + b"x" * size, [], BASE_MS + i) for i in range(n)]


def _builder_batch(values: list[bytes], *, ts: int = BASE_MS) -> bytes:
    """An uncompressed v2 batch from aiokafka's builder, as a client sends it (no producer
    id), each record with a key and a header."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i, value in enumerate(values):
        builder.append(i, ts + i, b"key%d" % i, value, [("h", b"%d" % i)])
    return bytes(builder.build())


def _with_crc(data: bytearray) -> bytes:
    """`data` with its CRC-32C recomputed over the attributes to the end."""
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def _raw_produce(raw: Raw, topic: str, records: bytes) -> tuple[int, int]:
    response = raw.call(produce_request(topic, records), 7, ProduceResponse)
    [topic_response] = response.responses
    [partition] = topic_response.partition_responses
    return partition.error_code, partition.base_offset


def _raw_fetch(raw: Raw, topic: str, offset: int, max_bytes: int, version: int = 4) -> bytes:
    """The records bytes of one Fetch of partition 0 of `topic` from `offset`, answered at
    once, `max_bytes` the partition's and the response's limit."""
    T = FetchRequest.FetchTopic
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            T(
                topic=topic,
                partitions=[
                    T.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=max_bytes,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    response = raw.call(request, version, FetchResponse)
    [topic_response] = response.responses
    [partition] = topic_response.partitions
    assert partition.error_code == 0
    return bytes(partition.records or b"")


def _raw_fetch_on(wire, topic: str, offset: int, max_bytes: int, version: int = 4) -> bytes:
    conn = Raw(wire.server.address)
    try:
        return _raw_fetch(conn, topic, offset, max_bytes, version)
    finally:
        conn.close()


def _batches_of(records: bytes) -> list[bytes]:
    """The v2 batches one after the other in a records field."""
    out = []
    pos = 0
    while pos < len(records):
        (length,) = struct.unpack_from(">i", records, pos + 8)
        out.append(records[pos : pos + 12 + length])
        pos += 12 + length
    assert pos == len(records)
    return out


@pytest.fixture
def raw(wire):
    conn = Raw(wire.server.address)
    yield conn
    conn.close()


# --- tests ----------------------------------------------------------------------------------


def test_a_confluent_batch_is_stored_as_sent_and_read_back_alike_by_every_reader(wire):
    topic, full = "vb-roundtrip", "/kafka:vb-roundtrip"
    sent: list[Message] = []
    for i in range(12):
        key = None if i % 4 == 1 else b"key-%d" % i
        value = None if i == 7 else b"value %d" % i
        headers: Headers = [("n", b"%d" % i), ("nil", None), ("empty", b"")] if i % 3 else []
        sent.append((key, value, headers, BASE_MS + 10 * i + (5 if i == 3 else 0)))
    _ck_produce(wire.bootstrap, topic, [sent], **{"enable.idempotence": True})

    # one batch, stored as the client sent it: the engine's header, then the Kafka batch
    [(base, last, payload)] = _stored(wire.cluster, full)
    assert (base, last, payload[0]) == (0, 11, VERBATIM)
    kafka = batch_codec.kafka_data(payload)
    assert kafka is not None
    stored = DefaultRecordBatch(bytes(kafka))
    assert stored.validate_crc()
    assert stored.producer_id >= 0  # the idempotent producer's own batch
    assert [(r.key, r.value, r.timestamp) for r in stored] == [(k, v, ts) for k, v, _, ts in sent]

    # confluent-kafka
    got = _ck_consume(wire.bootstrap, topic, 0, len(sent))
    assert [m.offset() for m in got] == list(range(12))
    assert [(m.key(), m.value(), m.headers() or [], m.timestamp()) for m in got] == [
        (k, v, h, (CK_CREATE_TIME, ts)) for k, v, h, ts in sent
    ]

    # the embedded engine: poll
    records = _engine_poll(wire.cluster, full, len(sent))
    assert [r.offset for r in records] == list(range(12))
    assert [(r.key, r.value, r.headers, r.timestamp, r.timestamp_type) for r in records] == [
        (k, v, h, ts, CREATE_TIME) for k, v, h, ts in sent
    ]

    # and poll_arrow
    table = _engine_arrow(wire.cluster, full)
    assert table.column("offset").to_pylist() == list(range(12))
    assert table.column("key").to_pylist() == [k for k, _, _, _ in sent]
    assert table.column("value").to_pylist() == [v for _, v, _, _ in sent]
    assert table.column("headers").to_pylist() == [  # null for none, as Spark's source
        [{"key": k, "value": v} for k, v in h] or None for _, _, h, _ in sent
    ]
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert [us // 1000 for us in micros] == [ts for _, _, _, ts in sent]
    assert set(table.column("timestampType").to_pylist()) == {CREATE_TIME}


def test_a_fetch_from_the_middle_of_a_stored_batch_delivers_from_there_on(wire):
    topic, full = "vb-middle", "/kafka:vb-middle"
    runs = [_values(10, tag=b"a"), _values(10, tag=b"b")]
    _ck_produce(wire.bootstrap, topic, runs)
    assert _layout(wire.cluster, full) == [(0, 9, VERBATIM), (10, 19, VERBATIM)]
    sent = [value for run in runs for _, value, _, _ in run]

    got = _ck_consume(wire.bootstrap, topic, 4, 16)
    assert [(m.offset(), m.value()) for m in got] == [(o, sent[o]) for o in range(4, 20)]

    got_kp = _kp_consume(wire.bootstrap, topic, 7, 13)
    assert [(m.offset, m.value) for m in got_kp] == [(o, sent[o]) for o in range(7, 20)]

    # the listener served the first batch whole, as Kafka does: the client skipped 0..6
    records = _raw_fetch_on(wire, topic, 7, 1 << 20)
    batches = _batches_of(records)
    assert [DefaultRecordBatch(b).base_offset for b in batches] == [0, 10]
    assert [len(list(DefaultRecordBatch(b))) for b in batches] == [10, 10]


def test_fetch_limits_smaller_than_one_batch_still_make_progress(wire):
    topic, full = "vb-small-fetch", "/kafka:vb-small-fetch"
    # three batches of some 1.6 KB: over the consumers' limits below, each one
    runs = [_values(4, 350, tag=bytes([ord("a") + n])) for n in range(3)]
    _ck_produce(wire.bootstrap, topic, runs)
    assert _layout(wire.cluster, full) == [(0, 3, VERBATIM), (4, 7, VERBATIM), (8, 11, VERBATIM)]
    sent = [value for run in runs for _, value, _, _ in run]

    # Kafka's rule: the first batch always goes, whole, whatever the limits
    for offset, base in ((0, 0), (2, 0), (5, 4), (11, 8)):
        [only] = _batches_of(_raw_fetch_on(wire, topic, offset, 1))
        assert len(only) > 1500
        assert DefaultRecordBatch(only).base_offset == base
        assert len(list(DefaultRecordBatch(only))) == 4

    got = _ck_consume(
        wire.bootstrap,
        topic,
        0,
        12,
        **{
            "max.partition.fetch.bytes": 1,
            "fetch.max.bytes": 1000,  # librdkafka's least (message.max.bytes)
            "message.max.bytes": 1000,
            "receive.message.max.bytes": 4000,
        },
    )
    assert [(m.offset(), m.value()) for m in got] == list(enumerate(sent))

    got_kp = _kp_consume(
        wire.bootstrap, topic, 0, 12, max_partition_fetch_bytes=1, fetch_max_bytes=1
    )
    assert [(m.offset, m.value) for m in got_kp] == list(enumerate(sent))


@pytest.mark.parametrize("compression", ["lz4", "gzip"])
def test_a_compressed_batch_is_decoded_not_stored_as_sent(wire, compression):
    topic, full = f"vb-{compression}", f"/kafka:vb-{compression}"
    sent: list[Message] = [
        (b"k%d" % i, b"compressible payload " * 8 + b"%d" % i, [("i", b"%d" % i)], BASE_MS + i)
        for i in range(20)
    ]
    _ck_produce(
        wire.bootstrap,
        topic,
        [sent],
        **{"compression.type": compression, "enable.idempotence": True},
    )
    assert _layout(wire.cluster, full) == [(0, 19, DECODED)]

    got = _ck_consume(wire.bootstrap, topic, 0, 20)
    assert [(m.offset(), m.key(), m.value(), m.headers(), m.timestamp()) for m in got] == [
        (i, k, v, h, (CK_CREATE_TIME, ts)) for i, (k, v, h, ts) in enumerate(sent)
    ]
    records = _engine_poll(wire.cluster, full, 20)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(sent)
    ]


def test_a_corrupt_record_in_a_sound_crc_is_refused_and_nothing_is_stored(wire, raw):
    topic, full = "vb-corrupt", "/kafka:vb-corrupt"
    wire.cluster.create_topic(full, partitions=1)
    assert _raw_produce(raw, topic, _builder_batch([b"a0", b"a1", b"a2"])) == (0, 0)

    bad = bytearray(_builder_batch([b"b0", b"b1", b"b2"]))
    # the first record: length, attributes, timestamp delta, offset delta, key length
    assert bad[61 + 4] == 8  # zigzag 4: b"key0"
    bad[61 + 4] = 0x7E  # a key of 63 bytes, past the end of its record
    corrupt = _with_crc(bad)
    assert DefaultRecordBatch(corrupt).validate_crc()  # only the layout is wrong
    assert _raw_produce(raw, topic, corrupt)[0] == CORRUPT_MESSAGE
    assert wire.cluster.topic(full).partitions[0].log_end_offset == 3
    assert _layout(wire.cluster, full) == [(0, 2, VERBATIM)]

    # the same connection, the same partition: a good batch is taken after it
    assert _raw_produce(raw, topic, _builder_batch([b"c0", b"c1"])) == (0, 3)
    assert wire.cluster.topic(full).partitions[0].log_end_offset == 5
    assert _layout(wire.cluster, full) == [(0, 2, VERBATIM), (3, 4, VERBATIM)]
    records = _engine_poll(wire.cluster, full, 5)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (0, b"key0", b"a0"),
        (1, b"key1", b"a1"),
        (2, b"key2", b"a2"),
        (3, b"key0", b"c0"),
        (4, b"key1", b"c1"),
    ]


@pytest.mark.parametrize("version", [4, 11, 12])
def test_a_stored_batch_is_served_with_its_bytes_as_sent(wire, raw, version):
    topic, full = f"vb-bytes-{version}", f"/kafka:vb-bytes-{version}"
    wire.cluster.create_topic(full, partitions=1)
    assert _raw_produce(raw, topic, _builder_batch([b"first"])) == (0, 0)
    sent = bytearray(_builder_batch([b"v%d" % i * 50 for i in range(5)], ts=BASE_MS + 100))
    # what a producer sets before the CRC: its own base offset and leader epoch
    struct.pack_into(">qii", sent, 0, 12345, len(sent) - 12, 7)
    assert _raw_produce(raw, topic, bytes(sent)) == (0, 1)

    [second] = _batches_of(_raw_fetch(raw, topic, 3, 1 << 20, version))
    # the log's base offset and leader epoch -1; every byte after them as sent
    assert second[:12] == struct.pack(">qi", 1, len(sent) - 12)
    assert second[12:16] == struct.pack(">i", -1)
    assert second[16:] == sent[16:]
    served = DefaultRecordBatch(second)
    assert served.validate_crc()
    assert [(r.offset, r.value) for r in served] == [(1 + i, b"v%d" % i * 50) for i in range(5)]


def test_encode_spliced_joins_each_partitions_records_in_place():
    R = FetchResponse.FetchableTopicResponse
    P = R.PartitionData
    # sizes whose varints take 1, 2 and 3 bytes in the flexible versions
    parts: dict[tuple[str, int], list[bytes | bytearray | memoryview]] = {
        ("alpha", 0): [b"A" * 40, bytearray(b"B" * 60), memoryview(b"C" * 20)],
        ("alpha", 3): [],
        ("beta", 1): [b"D" * 300, memoryview(bytearray(b"E" * 20_000))],
    }

    def response() -> codec.Spliced:
        spliced = codec.Spliced()
        by_topic: dict[str, list] = {}
        for (topic, partition), held in parts.items():
            by_topic.setdefault(topic, []).append(
                P(
                    partition_index=partition,
                    error_code=0,
                    high_watermark=100 + partition,
                    last_stable_offset=100 + partition,
                    log_start_offset=partition,
                    aborted_transactions=[],
                    preferred_read_replica=-1,
                    records=spliced.hold(held),
                )
            )
        spliced.response = FetchResponse(
            throttle_time_ms=0,
            error_code=0,
            session_id=7,
            responses=[R(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )
        return spliced

    expected = {key: b"".join(bytes(p) for p in held) for key, held in parts.items()}
    for version in (4, 11, 12):
        spliced = response()
        assert len(spliced.pieces) == 2  # a partition without records holds none
        framed = b"".join(codec.encode_spliced(spliced, version, correlation_id=99))
        (size,) = struct.unpack_from(">i", framed, 0)
        assert size == len(framed) - 4
        decoded = FetchResponse.decode(framed[4:], version=version, header=True)
        assert decoded.header.correlation_id == 99
        assert decoded.session_id == (7 if version >= 7 else 0)  # a field from v7
        got = {
            (t.topic, p.partition_index): (bytes(p.records or b""), p.high_watermark)
            for t in decoded.responses
            for p in t.partitions
        }
        assert got == {key: (records, 100 + key[1]) for key, records in expected.items()}
        # the records are all the encoding added: the same response with them in place
        # encodes to the same bytes
        plain = response()
        for t in plain.response.responses:
            for p in t.partitions:
                p.records = expected[(t.topic, p.partition_index)]
        assert framed == bytes(codec.encode_response(plain.response, version, 99))


def test_a_fetch_response_is_written_as_its_parts_a_stored_batch_not_copied():
    """`encode_spliced` gives the framed response as the buffers it is made of: a stored
    batch (64 KiB and more) as the very buffer the reader gave, the small pieces around the
    batches joined; the connection writes them one after the other."""
    R = FetchResponse.FetchableTopicResponse
    P = R.PartitionData
    stored = [memoryview(bytes(range(256)) * 1024), b"x" * 100_000]  # two big batches
    small = [b"s" * 500, b"t" * 700]
    spliced = codec.Spliced()
    partitions = [
        P(partition_index=i, error_code=0, high_watermark=1, last_stable_offset=1,
          log_start_offset=0, aborted_transactions=[], preferred_read_replica=-1,
          records=spliced.hold(held))
        for i, held in enumerate([[stored[0]], small, [stored[1]]])
    ]  # fmt: skip
    spliced.response = FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[R(topic="t", partitions=partitions)],
    )
    parts = codec.encode_spliced(spliced, 12, correlation_id=5)
    assert isinstance(parts, codec.Parts)
    assert [p for p in parts if len(p) >= 64 * 1024] == stored
    assert parts[1] is stored[0] and parts[3] is stored[1]  # not copies
    assert len(parts) == 5  # head, batch, the small records with what is around them, batch, tail
    framed = b"".join(parts)
    assert struct.unpack_from(">i", framed)[0] == len(framed) - 4
    decoded = FetchResponse.decode(framed[4:], version=12, header=True)
    got = [bytes(p.records) for p in decoded.responses[0].partitions]
    assert got == [bytes(stored[0]), b"".join(small), stored[1]]
