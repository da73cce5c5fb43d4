"""The archive keeps what transactions need (issue 25, item 4): partitionlets that hold
aborted transactions are archived like any other, below the last stable offset only, and
read_committed readers of archived history (Consumer, poll_arrow, scans) still leave the
aborted messages out, see the same offsets and the same markers as before archiving."""

from __future__ import annotations

import json
import sqlite3

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine import Cluster, Consumer, Producer, TopicPartition
from engine.cli import cli
from engine.client import arrow
from engine.client.browse import Browser, Query, Seek, export
from engine.storage import archive as store
from engine.storage import scan
from tests.timing import scaled

T = "/s:t"
TP = TopicPartition(T, 0)
OLD = 1_600_000_000_000  # 2020: older than archive_after


def _send(producer: Producer, value: bytes, i: int) -> None:
    producer.send(T, value, partition=0, timestamp_ms=OLD + i).get(timeout=scaled(30))


def _history(cluster: Cluster) -> Producer:
    """Plain messages around a committed, an aborted and a second committed transaction
    (the aborted one interleaved with plain messages), then a transaction left open
    (returned) and plain messages after it."""
    plain = Producer(cluster, acks="all")
    txn = Producer(cluster, transactional_id="t1")
    txn.init_transactions()
    i = 0
    for name, end in (("c1", "commit"), ("a1", "abort"), ("c2", "commit")):
        _send(plain, f"before-{name}".encode(), i)
        txn.begin_transaction()
        for k in range(3):
            _send(txn, f"{name}-{k}".encode(), i := i + 1)
            _send(plain, f"during-{name}-{k}".encode(), i := i + 1)
        getattr(txn, f"{end}_transaction")()
    _send(plain, b"before-open", i := i + 1)
    txn.begin_transaction()
    _send(txn, b"open-0", i := i + 1)
    _send(plain, b"after-open", i + 1)
    plain.close()
    return txn


def _pairs(rb) -> list[tuple[int, bytes]]:
    return list(zip(rb.column("offset").to_pylist(), rb.column("value").to_pylist(), strict=True))


def _read(cluster: Cluster, isolation: str) -> tuple[list[tuple[int, bytes]], int]:
    consumer = Consumer(
        cluster, enable_auto_commit=False, auto_offset_reset="earliest", isolation_level=isolation
    )
    consumer.assign([TP])
    got: list[tuple[int, bytes]] = []
    while batch := consumer.poll(timeout_ms=200):
        got += [(r.offset, r.value) for rs in batch.values() for r in rs]
    position = consumer.position(TP)
    consumer.close()
    return got, position


def _arrow(cluster: Cluster, isolation: str) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        cluster, enable_auto_commit=False, auto_offset_reset="earliest", isolation_level=isolation
    )
    consumer.assign([TP])
    got: list[tuple[int, bytes]] = []
    while batch := consumer.poll_arrow(timeout_ms=200):
        for rb in batch.values():
            got += _pairs(rb)
    consumer.close()
    return got


def _scanned(cluster: Cluster, isolation: str) -> list[tuple[int, bytes]]:
    """What a scan plan (Spark's data source) reads, live tasks and archived ones."""
    ranges = cluster.scan_ranges([T], isolation_level=isolation)
    got: list[tuple[int, bytes]] = []
    for task in cluster.scan_plan(ranges, isolation_level=isolation):
        if task.tier == scan.ARCHIVE:
            batches = list(scan.read_archive(task))
        else:
            chunks = [c for b in scan.read(task) if (c := scan.columns(b, task)) is not None]
            batches = [arrow.record_batch(T, 0, chunks, None)] if chunks else []
        for rb in batches:
            got += _pairs(rb)
    return got


def _views(cluster: Cluster) -> dict:
    consumer = Consumer(cluster, enable_auto_commit=False, isolation_level="read_committed")
    lso = consumer.end_offsets([TP])[TP]
    markers = consumer.markers(TP, 0, lso + 10)
    consumer.close()
    return {
        "committed": _read(cluster, "read_committed"),
        "uncommitted": _read(cluster, "read_uncommitted"),
        "arrow committed": _arrow(cluster, "read_committed"),
        "arrow uncommitted": _arrow(cluster, "read_uncommitted"),
        "scan committed": _scanned(cluster, "read_committed"),
        "scan uncommitted": _scanned(cluster, "read_uncommitted"),
        "lso": lso,
        "markers": markers,
    }


@pytest.fixture
def cluster(tmp_path):
    with Cluster.open(tmp_path / "c", partitionlet_bytes=200) as cluster:
        cluster.create_stream("/s", archive_after=60, ttl=0)
        cluster.create_topic(T, partitions=1)
        yield cluster


def test_archived_history_reads_as_live_under_both_isolation_levels(cluster):
    txn = _history(cluster)
    before = _views(cluster)
    committed = [v for _, v in before["committed"][0]]
    assert not any(v.startswith(b"a1-") for v in committed)  # the aborted ones
    assert [v for v in committed if v.startswith(b"c")] == [
        b"c1-0", b"c1-1", b"c1-2", b"c2-0", b"c2-1", b"c2-2"
    ]  # fmt: skip
    assert committed[-1] == b"before-open"  # nothing at or past the open transaction
    assert before["committed"][1] == before["lso"]  # stops at the LSO
    uncommitted = [v for _, v in before["uncommitted"][0]]
    assert b"a1-1" in uncommitted and uncommitted[-2:] == [b"open-0", b"after-open"]
    assert before["arrow committed"] == before["committed"][0]
    assert before["scan committed"] == before["committed"][0]
    assert before["arrow uncommitted"] == before["scan uncommitted"] == before["uncommitted"][0]
    assert [(m[3]) for m in before["markers"]] == [True, False, True]

    report = cluster.archive()
    archived = {a.id for a in report.archived}
    topic_id = cluster.catalog.topic("/s", "t").id
    aborted = cluster.catalog.transactions.aborted(topic_id, 0, 0, 2**62)
    tiers = [
        (p.id, p.tier, p.base_offset, None if p.active else p.last_offset + 1)
        for p in cluster.partitionlets(T)
    ]
    # every sealed partitionlet below the LSO is archived, those with aborted batches too
    below = [t for t in tiers if t[3] is not None and t[3] <= before["lso"]]
    assert below and {t[0] for t in below} == archived
    assert aborted and any(t[2] <= aborted[0][1] < t[3] for t in below)
    # nothing that reaches the open transaction is
    assert all(t[1] == "live" for t in tiers if t[3] is None or t[3] > before["lso"])

    assert _views(cluster) == before

    txn.commit_transaction()
    txn.close()
    after = _read(cluster, "read_committed")[0]
    assert [v for _, v in after][-2:] == [b"open-0", b"after-open"]


def _wire(bootstrap: str, isolation: str) -> list[tuple[int, bytes]]:
    """Every (offset, value) of /s:t partition 0 read by librdkafka to the partition's end."""
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import KafkaError
    from confluent_kafka import TopicPartition as CKTP

    consumer = CKConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{isolation}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([CKTP("t", 0, 0)])
    got: list[tuple[int, bytes]] = []
    try:
        while True:
            msg = consumer.poll(scaled(10))
            assert msg is not None, f"no end of partition after {got}"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return got
            got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()


def test_kafka_clients_read_archived_transactions_as_live(cluster):
    from engine.wire import KafkaServer

    txn = _history(cluster)
    server = KafkaServer(cluster, listen=("127.0.0.1", 0), default_stream="/s").start()
    try:
        bootstrap = "{}:{}".format(*server.address)
        before = {i: _wire(bootstrap, i) for i in ("read_committed", "read_uncommitted")}
        assert before["read_committed"] == _read(cluster, "read_committed")[0]
        assert before["read_uncommitted"] == _read(cluster, "read_uncommitted")[0]
        assert cluster.archive().archived
        after = {i: _wire(bootstrap, i) for i in ("read_committed", "read_uncommitted")}
        assert after == before
    finally:
        server.close()
        txn.abort_transaction()
        txn.close()


def test_the_file_keeps_producers_and_markers_and_says_its_format(cluster):
    txn = _history(cluster)
    txn.abort_transaction()
    txn.close()
    markers = Consumer(cluster, isolation_level="read_committed").markers(TP, 0, 1000)
    report = cluster.archive()
    assert report.archived
    fields = []
    kept = []
    for a in report.archived:
        info = json.loads(pq.read_metadata(a.file.removeprefix("file://")).metadata[store.META_KEY])
        assert info["format"] == store.FORMAT == 2
        fields.append(info["fields"])
        kept += [tuple(m) for m in info["markers"]]
    # the old fields first, in their order: a reader of format 1 reads these files as before
    assert all(f[:9] == list(store._BATCH_FIELDS[:9]) for f in fields)
    assert fields[0][9:] == ["producer_id", "producer_epoch", "base_seq"]
    archived_below = [
        m for m in markers if any(a.base_offset <= m[0] < a.end_offset for a in report.archived)
    ]
    # -1: each marker's origin is this cluster
    assert kept == [(o, p, e, int(c), -1) for o, p, e, c in archived_below]
    assert len(kept) >= 3


def _exported(cluster: Cluster, tmp_path, isolation: str) -> list[tuple[int, bytes]]:
    db = tmp_path / f"{isolation}-{len(list(tmp_path.iterdir()))}.db"
    result = CliRunner().invoke(
        cli,
        ["export", T, "--cluster", str(cluster.path), "--sqlite", str(db)]
        + ["--table", "t", "--isolation-level", isolation],
    )
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute('SELECT "offset", value FROM t ORDER BY "offset"').fetchall()
    finally:
        conn.close()
    return [(o, v.encode()) for o, v in rows]


def test_browse_and_export_read_at_the_isolation_level_asked_live_and_archived(cluster, tmp_path):
    txn = _history(cluster)
    levels = ("read_committed", "read_uncommitted")

    def views() -> dict:
        out = {}
        for level in levels:
            with Browser(cluster, T, isolation_level=level) as browser:
                page = browser.page(Query(T, seek=Seek.parse("oldest"), limit=500))
                marks = browser.marks(page.records)  # what the consoles' browsers show
            query = Query(T, seek=Seek.parse("oldest"))
            out[level] = {
                "page": [(r.offset, r.value) for r in page.records],
                "marks": (sorted(marks.aborted), marks.markers),
                "export": [
                    (r.offset, r.value) for r in export(cluster, query, 1000, isolation_level=level)
                ],
                "plet export": _exported(cluster, tmp_path, level),
            }
        return out

    live = views()
    assert len(live["read_committed"]["page"]) < len(live["read_uncommitted"]["page"])
    assert len(live["read_uncommitted"]["marks"][0]) == 3  # the aborted records
    assert len(live["read_uncommitted"]["marks"][1]) == 3  # the markers
    for level in levels:
        read = _read(cluster, level)[0]
        views_of_level = {k: v for k, v in live[level].items() if k != "marks"}
        assert views_of_level == {"page": read, "export": read, "plet export": read}
    assert cluster.archive().archived
    assert views() == live
    txn.abort_transaction()
    txn.close()


def _as_format_1(path: str) -> None:
    """Rewrite an archive file as the engine wrote them before format 2: a batch table of
    the first nine fields, no markers, no format key, no footer checksum."""
    import base64

    import numpy as np
    import zstandard

    table = pq.read_table(path)
    meta = dict(pq.read_metadata(path).metadata)
    info = json.loads(meta[store.META_KEY])
    raw = zstandard.ZstdDecompressor().decompress(base64.b64decode(info["batches"]))
    batches = np.frombuffer(raw, dtype=np.int64).reshape(-1, len(info["fields"]))[:, :9]
    packed = zstandard.ZstdCompressor().compress(np.ascontiguousarray(batches).tobytes())
    info["batches"] = base64.b64encode(packed).decode()
    info["fields"] = info["fields"][:9]
    del info["markers"], info["format"]
    meta[store.META_KEY] = json.dumps(info).encode()
    del meta[store.META_CRC_KEY]  # files of format 1 had no checksum of their footer
    pq.write_table(table.replace_schema_metadata(meta), path)


def test_a_file_of_format_1_reads_as_batches_without_producers(cluster):
    plain = Producer(cluster, acks="all")
    for i in range(12):
        _send(plain, f"v{i}".encode(), i)
    plain.close()
    before = _read(cluster, "read_committed")
    report = cluster.archive()
    assert report.archived
    for a in report.archived:
        path = a.file.removeprefix("file://")
        _as_format_1(path)
        info = json.loads(pq.read_metadata(path).metadata[store.META_KEY])
        assert len(info["fields"]) == 9 and "markers" not in info
    assert _read(cluster, "read_committed") == before
    assert _read(cluster, "read_uncommitted") == before
    assert _scanned(cluster, "read_committed") == before[0]


def _stored(cluster: Cluster) -> tuple[list[tuple], list[tuple]]:
    """Each stored batch's offset, producer fields and origin, and each marker's, as
    replication reads them (from the volume or the archive, wherever they are)."""
    from engine.replication.reading import source_batches

    topic = cluster.catalog.topic("/s", "t")
    got = []
    while chunk := source_batches(
        cluster, topic.id, 0, got[-1].last_offset + 1 if got else 0, 10_000, 2**53
    ):
        got += chunk
    batches = [
        (b.base_offset, b.producer_id, b.producer_epoch, b.base_seq, b.origin)
        for b in got
        if b.marker is None
    ]
    marks = [
        (b.base_offset, b.producer_id, b.marker, b.origin) for b in got if b.marker is not None
    ]
    return batches, marks


def test_archived_transactions_replicate_as_live_ones_down_a_chain(cluster, tmp_path):
    """A replica of archived history gets the producer fields, the markers and their
    origins, as it would from the volume: its read_committed readers leave out the same
    aborted messages, at the same offsets. b archives what it got from a, then passes it on
    to c: the markers keep a's origin."""
    from engine import Replicator

    txn = _history(cluster)
    txn.abort_transaction()
    txn.close()
    before = _views(cluster)
    stored = _stored(cluster)
    assert {b[1] for b in stored[0]} - {None} and len(stored[1]) == 4
    assert cluster.archive().archived
    assert _stored(cluster) == stored  # read back from the files as it was stored

    with (
        Cluster.open(tmp_path / "b", name="b", partitionlet_bytes=200) as b,
        Cluster.open(tmp_path / "c", name="c") as c,
    ):
        cluster.add_replica("/s", str(b.path))
        b.add_replica("/s", str(c.path))
        for source, archive in ((cluster, False), (b, True)):
            replicator = Replicator(source)
            try:
                while replicator.run_once():
                    pass
            finally:
                replicator.close()
            assert not [r.error for r in source.replicas("/s") if r.error]
            if archive:
                assert source.archive().archived  # b's copy goes to its own archive first
        for replica in (b, c):
            views = _views(replica)
            for level in ("committed", "uncommitted"):
                assert views[level] == before[level]
            assert views["markers"] == before["markers"]
            assert _stored(replica) == stored
