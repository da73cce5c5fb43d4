"""Kafka record batches stored as a client produced them (issue 28, item 4): what
`Producer.send_record_batch` stores as it came, what it decodes instead, what it refuses,
and that every reader reads such a batch as any other (the consumer, Arrow, the scan plan
Spark reads, compaction, replication, `batch.check`), while a verbatim poll hands it out
whole, byte for byte."""

from __future__ import annotations

import struct
import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from engine import Cluster, Consumer, KafkaBatch, Producer, Replicator, TopicPartition, errors
from engine.storage import batch
from engine.storage import kafka_batch as kb
from engine.storage import scan as engine_scan
from tests.kafka_batches import T0, kafka_batch, with_crc
from tests.readback import stored

TP = TopicPartition("/k:t", 0)


def rows(first: int, n: int) -> list[tuple]:
    """(key, value, timestamp, headers): null keys and values, headers with a null value,
    timestamps out of order."""
    return [
        (
            None if i % 5 == 0 else f"k{i % 7}".encode(),
            None if i % 11 == 10 else f"value {i}".encode() * (1 + i % 3),
            T0 + (i * 37) % 101,
            [("seq", str(i).encode()), ("none", None)] if i % 4 == 0 else [],
        )
        for i in range(first, first + n)
    ]


def consume(cluster: Cluster, tp: TopicPartition = TP) -> list[tuple]:
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([tp])
    got = []
    while polled := consumer.poll(max_records=13):
        got += [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in polled[tp]]
    consumer.close()
    return got


def numbered(records: list[tuple], first: int = 0) -> list[tuple]:
    return [(first + i, *r) for i, r in enumerate(records)]


@pytest.fixture(params=["compiled", "aiokafka"], autouse=True)
def walker(request, monkeypatch):
    """Every test twice: with the compiled walk, and with aiokafka's reader (what a
    checkout runs before it is installed)."""
    if request.param == "aiokafka":
        monkeypatch.setattr(kb, "_compiled", None)
    return request.param


@pytest.fixture
def k(cluster):
    cluster.create_stream("/k", ttl=0)
    cluster.create_topic("/k:t")
    return cluster


def test_a_plain_batch_is_stored_as_it_came_and_read_like_any_other(k):
    records = rows(0, 50)
    data = kafka_batch(records)
    with Producer(k, acks=1) as producer:
        first = producer.send_record_batch("/k:t", 0, data)
        producer.send("/k:t", b"after", partition=0, timestamp_ms=T0)
        assert first.get(10).offset == 0
    (base, last, payload), (after_base, _, after) = stored(k, "/k:t")
    assert (base, last) == (0, 49)
    assert payload[0] == batch.VERSION_KAFKA and after[0] == batch.VERSION
    assert bytes(batch.kafka_data(payload)) == data  # byte for byte
    assert after_base == 50
    want = numbered(records) + [(50, None, b"after", T0, [])]
    assert consume(k) == want
    consumer = Consumer(k, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TP])
    table = consumer.poll_arrow(max_records=1000)[TP]
    assert table.column("offset").to_pylist() == list(range(51))
    assert table.column("key").to_pylist() == [r[1] for r in want]
    assert table.column("value").to_pylist() == [r[2] for r in want]
    assert [h or [] for h in table.column("headers").to_pylist()] == [
        [{"key": k_, "value": v} for k_, v in r[4]] for r in want
    ]


def test_a_verbatim_poll_hands_the_batch_out_whole_from_inside_it(k):
    records = rows(0, 30)
    data = kafka_batch(records)
    with Producer(k, acks=1) as producer:
        producer.send_record_batch("/k:t", 0, data)
        producer.send("/k:t", b"after", partition=0, timestamp_ms=T0)
    consumer = Consumer(k, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TP])
    consumer.seek(TP, 12)
    got = consumer.poll_arrow_batches(max_records=1000, verbatim=True)[TP]
    assert isinstance(got[0], KafkaBatch)
    assert (got[0].base_offset, got[0].last_offset, bytes(got[0].data)) == (0, 29, data)
    assert got[1].column("offset").to_pylist() == [30]  # an engine batch: Arrow
    assert consumer.position(TP) == 31
    # without verbatim, the same read starts where it was asked to
    consumer.seek(TP, 12)
    assert consumer.poll_arrow_batches(max_records=1000)[TP][0].column("offset")[0].as_py() == 12
    consumer.seek(TP, 12)
    assert [r.offset for r in consumer.poll(max_records=5)[TP]] == [12, 13, 14, 15, 16]


@pytest.mark.parametrize("why", ["compressed", "log_append", "bigger than max_message_bytes"])
def test_a_batch_the_engine_cannot_store_as_it_came_is_stored_decoded(cluster, why):
    records = rows(0, 40)
    cluster.create_stream(
        "/k", ttl=0, timestamp_type="log_append" if why == "log_append" else "create"
    )
    cluster.create_topic("/k:t")
    data = kafka_batch(records, codec=3 if why == "compressed" else 0)  # 3: lz4
    if why.startswith("bigger"):
        cluster.edit_stream("/k", max_message_bytes=len(data) - 1)  # each record fits
    with Producer(cluster, acks=1) as producer:
        producer.send_record_batch("/k:t", 0, data).get(10)
    [(base, last, payload)] = stored(cluster, "/k:t")
    assert (base, last, payload[0]) == (0, 39, batch.VERSION)
    got = consume(cluster)
    if why == "log_append":
        assert [g[:3] for g in got] == [g[:3] for g in numbered(records)]
        assert len({g[3] for g in got}) == 1  # one append time for the batch
    else:
        assert got == numbered(records)


def test_a_record_over_max_message_bytes_is_refused_and_nothing_is_written(k):
    k.edit_stream("/k", max_message_bytes=100)
    records = [(None, b"x" * 50, T0, []), (None, b"y" * 150, T0, [])]
    with Producer(k, acks=1) as producer:
        with pytest.raises(errors.MessageTooLarge):
            producer.send_record_batch("/k:t", 0, kafka_batch(records))
    assert stored(k, "/k:t") == []


def _damaged(kind: str) -> bytes:
    good = bytearray(kafka_batch(rows(0, 5)))
    if kind == "crc":
        good[-1] ^= 0x01  # the CRC no longer matches
        return bytes(good)
    if kind == "varint":
        good[61] = 0x7F  # the first record's length: longer than the batch
        return with_crc(good)
    if kind == "trailing bytes":
        good += b"\x00\x00"
        struct.pack_into(">i", good, 8, len(good) - 12)
        return with_crc(good)
    if kind.startswith("offset deltas"):
        records = rows(0, 3)
        builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 30)
        deltas = (0, 2, 2) if kind == "offset deltas" else (2, 3, 4)
        for delta, (key, value, ts, headers) in zip(deltas, records, strict=True):
            builder.append(delta, ts, key, value, headers)
        data = bytearray(builder.build())
        struct.pack_into(">i", data, 23, 2)  # the header's last delta: what a count of 3 says
        return with_crc(data)
    if kind == "control":
        (attributes,) = struct.unpack_from(">h", good, 21)
        struct.pack_into(">h", good, 21, attributes | 0x20)
        return with_crc(good)
    if kind == "count":
        struct.pack_into(">i", good, 57, 6)
        struct.pack_into(">i", good, 23, 5)
        return with_crc(good)
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "crc",
        "varint",
        "trailing bytes",
        "offset deltas",
        "offset deltas from 2",
        "control",
        "count",
    ],
)
def test_an_unsound_batch_is_refused_and_the_partition_takes_the_next(k, kind):
    with Producer(k, acks=1) as producer:
        with pytest.raises(errors.InvalidRecordBatch):
            producer.send_record_batch("/k:t", 0, _damaged(kind))
        assert stored(k, "/k:t") == []
        producer.send_record_batch("/k:t", 0, kafka_batch(rows(0, 5))).get(10)
    assert consume(k) == numbered(rows(0, 5))


def test_a_compressed_stream_stores_such_a_batch_compressed(k):
    k.edit_stream("/k", compression="zstd")
    records = [(b"key", b"the same reading again " * 20, T0 + i, []) for i in range(40)]
    with Producer(k, acks=1) as producer:
        producer.send_record_batch("/k:t", 0, kafka_batch(records)).get(10)
    [(_, _, payload)] = stored(k, "/k:t")
    assert batch.codec_of(payload) == "zstd"
    assert consume(k) == numbered(records)


def test_an_idempotent_resend_is_answered_with_its_offset_not_written_twice(k):
    producer_id, epoch = k.init_producer_id()
    data = kafka_batch(rows(0, 10), ids=(producer_id, epoch, 0))
    with Producer(k, acks="all") as producer:
        first = producer.send_record_batch("/k:t", 0, data, idempotent=(producer_id, epoch, 0))
        again = producer.send_record_batch("/k:t", 0, data, idempotent=(producer_id, epoch, 0))
        assert first.get(10).offset == again.get(10).offset == 0
    assert [(b, last) for b, last, _ in stored(k, "/k:t")] == [(0, 9)]


def test_check_takes_a_stored_batch_with_its_row_and_refuses_a_wrong_row(k):
    records = rows(0, 20)
    payload, summary = batch.from_kafka(kafka_batch(records))
    stamps = [r[2] for r in records]
    row = dict(base_offset=100, last_offset=119, count=20, first_ts=min(stamps), max_ts=max(stamps))
    batch.check(payload, **row)
    for wrong in (
        {"count": 19},
        {"last_offset": 120},
        {"first_ts": min(stamps) - 1},
        {"max_ts": max(stamps) + 1},
    ):
        with pytest.raises(errors.InvalidArgument, match="not a valid record batch"):
            batch.check(payload, **{**row, **wrong})
    damaged = bytearray(payload)
    damaged[-1] ^= 0x01
    with pytest.raises(errors.InvalidArgument, match="not a valid record batch"):
        batch.check(bytes(damaged), **row)
    assert summary.count == 20


def test_replication_carries_the_batch_as_it_came(k, tmp_path):
    records = rows(0, 25)
    with Producer(k, acks=1) as producer:
        producer.send_record_batch("/k:t", 0, kafka_batch(records)).get(10)
    with Cluster.open(tmp_path / "b", name="b") as b:
        k.add_replica("/k", str(tmp_path / "b"))
        Replicator(k).run_once()
        assert [p for _, _, p in stored(b, "/k:t")] == [p for _, _, p in stored(k, "/k:t")]
        assert consume(b) == numbered(records)


def test_compaction_reads_such_batches(cluster):
    cluster.create_stream("/k", ttl=0, compact=True, delete_retention_ms=0)
    cluster.create_topic("/k:t")
    records = [(f"k{i % 3}".encode(), f"v{i}".encode(), T0 + i, []) for i in range(30)]
    with Producer(cluster, acks=1) as producer:
        for first in range(0, 30, 10):
            producer.send_record_batch("/k:t", 0, kafka_batch(records[first : first + 10]))
        producer.flush()
    assert cluster.compact().messages_removed == 27
    assert [g[1:3] for g in consume(cluster)] == [(b"k0", b"v27"), (b"k1", b"v28"), (b"k2", b"v29")]


def test_the_scan_plan_reads_such_batches_plain(k):
    with Producer(k, acks=1) as producer:
        producer.send_record_batch("/k:t", 0, kafka_batch(rows(0, 30))).get(10)
    [task] = k.scan_plan(k.scan_ranges(["/k:t"]))
    [read] = engine_scan.read(task)
    assert read.payload[0] == batch.VERSION
    layout = engine_scan.layout(read.payload, read.base_offset)
    assert layout.count == 30
    assert layout.headers is not None and layout.headers[4] == [("seq", b"4"), ("none", None)]


def test_a_header_name_the_engine_cannot_store_is_refused_as_send_batch_refuses_it(k):
    records = [(None, b"v", T0, [("n" * 70_000, b"x")])]
    with Producer(k, acks=1) as producer:
        with pytest.raises(errors.InvalidArgument, match="header"):
            producer.send_record_batch("/k:t", 0, kafka_batch(records))
    assert stored(k, "/k:t") == []


@pytest.mark.parametrize(
    "damage",
    [
        "header name not UTF-8",
        "header name of negative length",
        "varint of 11 bytes",
        "negative count",
    ],
)
def test_records_the_walk_refuses(k, damage):
    data = bytearray(kafka_batch([(b"key", b"value", T0, [("hdr", b"v")])]))
    at = 61 + 1  # after the record's length: attributes
    if damage == "header name not UTF-8":
        data[data.index(b"hdr")] = 0xFF
    elif damage == "header name of negative length":
        data[data.index(b"hdr") - 1] = 0x05  # zigzag -3
    elif damage == "varint of 11 bytes":
        data[at + 1 : at + 2] = b"\x80" * 10 + b"\x00"  # the timestamp delta
        data[61] = data[61] + 20  # the record's length (zigzag), taking the 10 bytes
        struct.pack_into(">i", data, 8, len(data) - 12)
    else:
        data[61] = 0x03  # the record's length: zigzag -2
    with Producer(k, acks=1) as producer:
        with pytest.raises(errors.InvalidRecordBatch):
            producer.send_record_batch("/k:t", 0, with_crc(data))
    assert stored(k, "/k:t") == []


def test_a_verbatim_poll_reads_a_batch_with_expired_records_through_columns(cluster):
    """A batch some of whose records are past the ttl is not handed out whole: the expired
    ones stay hidden, as in any read."""
    cluster.create_stream("/k", ttl=3600)
    cluster.create_topic("/k:t")
    now = int(time.time() * 1000)
    records = [(None, b"old", now - 7_200_000, []), (None, b"new", now, [])]
    with Producer(cluster, acks=1) as producer:
        producer.send_record_batch("/k:t", 0, kafka_batch(records)).get(10)
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TP])
    [got] = consumer.poll_arrow_batches(max_records=100, verbatim=True)[TP]
    assert not isinstance(got, KafkaBatch)
    assert got.column("value").to_pylist() == [b"new"]
    assert got.column("offset").to_pylist() == [1]


def test_send_record_batch_refuses_a_bad_partition_and_a_producer_with_serializers(k):
    data = kafka_batch(rows(0, 3))
    with Producer(k, acks=1) as producer:
        with pytest.raises(errors.InvalidPartition):
            producer.send_record_batch("/k:t", 1, data)
    with Producer(k, acks=1, value_serializer=str.encode) as producer:
        with pytest.raises(errors.InvalidArgument, match="serializers"):
            producer.send_record_batch("/k:t", 0, data)
    assert stored(k, "/k:t") == []


def test_send_record_batch_at_acks_0_stores_the_batch_and_answers_at_once(k):
    records = rows(0, 4)
    with Producer(k, acks=0) as producer:
        metadata = producer.send_record_batch("/k:t", 0, kafka_batch(records)).get(10)
        assert (metadata.offset, metadata.timestamp) == (-1, records[0][2])
    [(base, last, payload)] = stored(k, "/k:t")
    assert (base, last, payload[0]) == (0, 3, batch.VERSION_KAFKA)
