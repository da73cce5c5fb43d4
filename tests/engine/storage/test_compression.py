"""The `compression` stream policy (issue 15, item 3): new batches are stored with the
stream's codec (zstd or lz4, body only, header kept), and every reader reads every batch
whatever its codec: the consumer, browse, `plet consume`, offsets_for_times, compaction,
replication (which checks a compressed batch from outside with a bound on what it may
inflate to), the scan plan Spark reads. A corrupt compressed batch is a StorageError."""

from __future__ import annotations

import itertools
import json
import sqlite3
import struct

import lz4.frame
import pytest
import zstandard
from click.testing import CliRunner

from engine import Cluster, Consumer, Producer, Replicator, TopicPartition, errors
from engine.cli import cli
from engine.client import browse
from engine.replication import DirectoryTarget, ReplicaBatch, check_replica_batch
from engine.storage import batch
from engine.storage import scan as engine_scan
from tests.readback import stored

CODECS = ("zstd", "lz4")
T0 = 1_700_000_000_000
ORIGIN = "00000000-0000-4000-8000-000000000000"


def event(i: int) -> bytes:
    return json.dumps(
        {"device": f"car-{i % 17}", "ts": T0 + i, "temp": 21.5, "unit": "C", "status": "ok"}
    ).encode()


def produce(cluster: Cluster, topic: str, first: int, count: int, partitions: int = 1) -> None:
    """Messages first..first+count-1: keyed, some with headers, some null values, a few
    batches (one flush per 50: the linger keeps the sender from writing smaller batches on a
    busy machine, which compression may leave plain)."""
    with Producer(cluster, acks=1, linger_ms=60_000) as producer:
        for i in range(first, first + count):
            producer.send(
                topic,
                key=f"k{i % 23}".encode(),
                value=None if i % 31 == 30 else event(i),
                partition=i % partitions,
                headers=[("seq", str(i).encode()), ("none", None)] if i % 4 == 0 else None,
                timestamp_ms=T0 + i,
            )
            if i % 50 == 49:
                producer.flush()


def expected(first: int, count: int, partitions: int = 1) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {p: [] for p in range(partitions)}
    for i in range(first, first + count):
        out[i % partitions].append(
            (
                f"k{i % 23}".encode(),
                None if i % 31 == 30 else event(i),
                T0 + i,
                [("seq", str(i).encode()), ("none", None)] if i % 4 == 0 else [],
            )
        )
    return out


def consume(cluster: Cluster, topic: str, partitions: int = 1) -> dict[int, list]:
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got: dict[int, list] = {p: [] for p in range(partitions)}
    while polled := consumer.poll(max_records=37):
        for tp, records in polled.items():
            got[tp.partition].extend(records)
    consumer.close()
    return got


def codecs_of(cluster: Cluster, topic: str, partition: int = 0) -> list[str]:
    return [batch.codec_of(p) for _, _, p in stored(cluster, topic, partition)]


def as_tuples(records) -> list[tuple]:
    return [(r.key, r.value, r.timestamp, list(r.headers)) for r in records]


# --- the codec ------------------------------------------------------------------------------


def sample_batch(n: int = 300) -> bytes:
    return batch.encode(
        [event(i) for i in range(n)],
        [T0 + i for i in range(n)],
        [f"k{i}".encode() for i in range(n)],
        [[("h", b"v")] if i % 3 == 0 else None for i in range(n)],
        [2 * i for i in range(n)],
    )


@pytest.mark.parametrize("codec", CODECS)
def test_a_compressed_batch_decodes_to_its_plain_columns(codec):
    plain = sample_batch()
    packed = batch.compress(plain, codec)
    assert batch.codec_of(packed) == codec and batch.codec_of(plain) == "none"
    assert len(packed) < len(plain) / 3
    assert packed[:14] != plain[:14] and batch.count_of(packed) == 300  # header kept
    assert batch.decode(packed, 10) == batch.decode(plain, 10)
    assert batch.plain(packed) == plain
    assert batch.compress(packed, codec) == packed  # a retried write is not packed twice
    batch.check(packed, base_offset=10, last_offset=10 + 598, count=300, first_ts=T0,
                max_ts=T0 + 299)  # fmt: skip


def test_an_incompressible_batch_is_stored_plain():
    import os

    plain = batch.encode([os.urandom(100)], [T0])
    assert batch.compress(plain, "zstd") == plain
    with pytest.raises(errors.InvalidArgument, match="unknown compression 'gzip'"):
        batch.compress(plain, "gzip")


def frame(codec: str, body: bytes, flags: int, count: int, raw: int | None = None) -> bytes:
    packed = (
        zstandard.ZstdCompressor().compress(body) if codec == "zstd" else (lz4.frame.compress(body))
    )
    flag = batch.F_ZSTD if codec == "zstd" else batch.F_LZ4
    header = struct.pack("<BBIq", batch.VERSION, flags | flag, count, T0)
    return header + struct.pack("<I", len(body) if raw is None else raw) + packed


@pytest.mark.parametrize("codec", CODECS)
def test_check_refuses_a_decompression_bomb_before_inflating_it(codec):
    # One record whose value is 200 MiB of zeros: a few KiB compressed.
    size = 200 * 1024 * 1024
    body = struct.pack("<i", size) + bytes(size)
    bomb = frame(codec, body, 0, 1)
    assert len(bomb) < 1_000_000
    with pytest.raises(errors.InvalidArgument, match="claims 209,715,204 bytes"):
        batch.check(bomb, base_offset=0, last_offset=0, count=1, first_ts=T0, max_ts=T0)
    # a frame that inflates past the length the batch states is refused too
    small = struct.pack("<i", 1000) + bytes(1000)
    lying = frame(codec, small, 0, 1, raw=100)
    with pytest.raises(errors.InvalidArgument, match="100 bytes"):
        batch.check(lying, base_offset=0, last_offset=0, count=1, first_ts=T0, max_ts=T0)
    # and a sound one passes, then its plain layout is checked as any batch
    batch.check(frame(codec, small, 0, 1), base_offset=0, last_offset=0, count=1,
                first_ts=T0, max_ts=T0)  # fmt: skip
    with pytest.raises(errors.InvalidArgument, match="columns account for"):
        batch.check(frame(codec, small + b"x", 0, 1), base_offset=0, last_offset=0, count=1,
                    first_ts=T0, max_ts=T0)  # fmt: skip


@pytest.mark.parametrize("codec", CODECS)
def test_a_corrupt_compressed_batch_is_a_storage_error(codec):
    packed = batch.compress(sample_batch(), codec)
    broken = packed[:30] + bytes(len(packed) - 30)
    with pytest.raises(errors.StorageError, match="stored record batch is corrupt"):
        batch.decode(broken, 0)
    with pytest.raises(errors.InvalidArgument, match="does not decompress|does not say"):
        batch.check(broken, base_offset=0, last_offset=598, count=300, first_ts=T0,
                    max_ts=T0 + 299)  # fmt: skip


# --- every reader, each codec -------------------------------------------------------------


@pytest.fixture(params=CODECS)
def compressed(request, cluster):
    """A stream with `compression` = the codec, a topic of 3 partitions, 600 messages."""
    cluster.create_stream("/z", compression=request.param, ttl=0)
    cluster.create_topic("/z:t", partitions=3)
    produce(cluster, "/z:t", 0, 600, partitions=3)
    return request.param


def test_the_stream_stores_compressed_batches_and_the_consumer_reads_them(cluster, compressed):
    for p in range(3):
        assert set(codecs_of(cluster, "/z:t", p)) == {compressed}
    info = cluster.stream("/z")
    assert info.policies["compression"] == compressed
    assert info.bytes < 600 * len(event(0)) / 2  # well under the plain size
    got = consume(cluster, "/z:t", 3)
    want = expected(0, 600, 3)
    for p in range(3):
        assert as_tuples(got[p]) == want[p]
        assert [r.offset for r in got[p]] == list(range(200))
    consumer = Consumer(cluster)
    at = consumer.offsets_for_times({TopicPartition("/z:t", 1): T0 + 300})
    assert at[TopicPartition("/z:t", 1)] == (100, T0 + 301)  # message 301, offset 100 of p1


def test_browse_reads_a_compressed_stream(cluster, compressed):
    page = browse.browse(cluster, browse.Query("/z:t", (2,), browse.Seek.offset(10), limit=5))
    assert [r.offset for r in page.records] == [10, 11, 12, 13, 14]
    assert [r.value for r in page.records] == [event(3 * o + 2) for o in range(10, 15)]


def test_plet_consume_reads_a_compressed_stream(cluster, compressed, cluster_path):
    result = CliRunner().invoke(
        cli,
        [
            "consume",
            "/z:t",
            "--partition",
            "0",
            "--from-beginning",
            "--format",
            "json",
            "--cluster",
            str(cluster_path),
        ],  # fmt: skip
        env={"PLET_CLUSTER": None, "PLET_DEFAULT_STREAM": None},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 200
    assert lines[7]["offset"] == 7 and lines[7]["value"] == event(21).decode()


def test_compaction_of_a_compressed_stream_keeps_its_codec(cluster):
    cluster.create_stream("/c", compression="zstd", compact=True, ttl=0,
                          delete_retention_ms=0)  # fmt: skip
    produce(cluster, "/c:t", 0, 400)
    before = stored(cluster, "/c:t")
    report = cluster.compact()
    assert report.messages_removed > 300
    after = stored(cluster, "/c:t")
    assert {batch.codec_of(p) for _, _, p in after} == {"zstd"}
    assert len(after) <= len(before)
    got = as_tuples(consume(cluster, "/c:t")[0])
    latest: dict[bytes, tuple] = {}
    for row in expected(0, 400)[0]:
        latest[row[0]] = row
    assert got == sorted(
        [r for r in latest.values() if r[1] is not None], key=lambda r: r[2]
    )  # the latest of each key, tombstones gone, in offset order


def test_replication_carries_compressed_batches_to_another_cluster(cluster, compressed, tmp_path):
    with Cluster.open(tmp_path / "b", name="b") as b:
        cluster.add_replica("/z", str(tmp_path / "b"))
        Replicator(cluster).run_once()
        for p in range(3):
            assert set(codecs_of(b, "/z:t", p)) == {compressed}
            assert codecs_of(b, "/z:t", p) == codecs_of(cluster, "/z:t", p)  # as stored
        got = consume(b, "/z:t", 3)
        want = expected(0, 600, 3)
        for p in range(3):
            assert as_tuples(got[p]) == want[p]


@pytest.mark.parametrize("codec", CODECS)
def test_replication_refuses_a_compressed_bomb(cluster, codec, tmp_path):
    cluster.create_stream("/z")
    cluster.create_topic("/z:t")
    size = 200 * 1024 * 1024
    bomb = frame(codec, struct.pack("<i", size) + bytes(size), 0, 1)
    rb = ReplicaBatch(0, 0, 1, T0, T0, 0, ORIGIN, bomb, T0)
    with pytest.raises(errors.InvalidArgument, match="refused: .*claims"):
        check_replica_batch(rb)
    target = DirectoryTarget(str(cluster.path))
    try:
        with pytest.raises(errors.InvalidArgument, match="refused"):
            target.apply("/z", "t", 0, [rb])
    finally:
        target.close()
    assert stored(cluster, "/z:t") == []


def test_the_scan_plan_reads_compressed_batches_plain(cluster, compressed):
    ranges = cluster.scan_ranges(["/z:t"])
    tasks = cluster.scan_plan(ranges)
    values = []
    for task in tasks:
        for b in engine_scan.read(task):
            assert batch.codec_of(b.payload) == "none"
            cols = engine_scan.layout(b.payload, b.base_offset)
            values.append(cols.count)
    assert sum(values) == 600


def test_a_mixed_stream_reads_in_order_after_the_policy_changes(cluster):
    cluster.create_stream("/m", ttl=0)
    produce(cluster, "/m:t", 0, 100)
    cluster.edit_stream("/m", compression="zstd")
    produce(cluster, "/m:t", 100, 100)
    cluster.edit_stream("/m", compression="lz4")
    produce(cluster, "/m:t", 200, 100)
    cluster.edit_stream("/m", compression="none")
    produce(cluster, "/m:t", 300, 100)
    # each batch in the codec of its time; how many batches 100 sends make depends on the
    # producer's timing (a busy machine makes more), so compare the runs of codecs
    codecs = codecs_of(cluster, "/m:t")
    assert [codec for codec, _ in itertools.groupby(codecs)] == ["none", "zstd", "lz4", "none"]
    assert as_tuples(consume(cluster, "/m:t")[0]) == expected(0, 400)[0]


def test_a_corrupt_stored_batch_fails_the_read_with_a_storage_error(cluster):
    cluster.create_stream("/x", compression="zstd", ttl=0)
    produce(cluster, "/x:t", 0, 100)
    (base, _, payload), *_ = stored(cluster, "/x:t")
    row = cluster.catalog.topic("/x", "t")
    pl = cluster.catalog.chain(row.id, 0)[0]
    path = cluster.volume(pl.volume_id).path
    with sqlite3.connect(path) as conn:
        # without its checksum (as a batch written before checksums), so that what is
        # tested is the inflate's own check (tests/engine/storage/test_checksums.py: with)
        conn.execute(
            "UPDATE batches SET payload = ?, crc = NULL WHERE partitionlet = ? AND base_offset = ?",
            (payload[:40] + b"\x00" * (len(payload) - 40), pl.id, base),
        )
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("/x:t", 0)])
    with pytest.raises(errors.StorageError, match="stored record batch is corrupt"):
        consumer.poll()


def test_the_policy_is_checked(cluster):
    with pytest.raises(errors.InvalidPolicy, match="'none' or 'zstd' or 'lz4'"):
        cluster.create_stream("/bad", compression="gzip")
    assert cluster.create_stream("/ok").policies["compression"] == "none"
