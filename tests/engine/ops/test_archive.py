"""The archive tier (engine.ops.archive, engine.storage.archive; docs/ARCHIVE.md): sealed
partitionlets become Parquet files that every reader reads as before. Real files, real
processes (kill -9 in the middle of a pass), a real local S3 server."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine import Cluster, Consumer, Principal, Producer, Replicator, TopicPartition, errors
from engine.cli import cli
from engine.client.browse import Query, Seek, browse
from engine.ops.maintenance import Maintenance
from engine.storage.volume import DELETED, SEALED
from tests.local_s3 import local_s3
from tests.timing import scaled, wait_until

ROOT = Path(__file__).resolve().parents[3]
T = "/a:t"
OLD_MS = 1_600_000_000_000  # 2020: older than any archive_after below


def drain(consumer, idle_polls: int = 3) -> list:
    out, idle = [], 0
    for _ in range(100_000):
        got = [r for rs in consumer.poll(timeout_ms=50).values() for r in rs]
        out.extend(got)
        idle = 0 if got else idle + 1
        if idle >= idle_polls:
            return out
    raise AssertionError("the consumer never caught up")


def read_all(cluster, topic=T, partitions=(0,)) -> list:
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    try:
        return drain(consumer)
    finally:
        consumer.close()


def fields(records) -> list[tuple]:
    return [
        (r.topic, r.partition, r.offset, r.key, r.value, [tuple(h) for h in r.headers],
         r.timestamp, r.timestamp_type)
        for r in records
    ]  # fmt: skip


def produce(cluster, n: int, *, topic=T, start=0, keys=True, every=10) -> None:
    producer = Producer(cluster, acks=1)
    for i in range(start, start + n):
        producer.send(
            topic,
            key=f"k{i % 13}".encode() if keys else None,
            value=f"value-{i}".encode(),
            headers=[("n", str(i).encode()), ("empty", None)] if i % 3 else None,
            timestamp_ms=OLD_MS + i,
        )
        if i % every == every - 1:
            producer.flush()
    producer.flush()
    producer.close()


def archive_files(cluster_path: Path) -> list[Path]:
    return sorted((cluster_path / "archive").rglob("*.parquet"))


def tiers(cluster, topic=T) -> list[tuple[int, str, str | None]]:
    return [(p.id, p.tier, p.file) for p in cluster.partitionlets(topic)]


def make(cluster, **policies) -> None:
    cluster.create_stream("/a", archive_after=60, ttl=0, **policies)
    cluster.create_topic(T, partitions=1)


# --- reading archived history ----------------------------------------------------------------


def test_consumer_reads_across_archived_and_live_exactly_once(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        produce(cluster, 400)
        before = read_all(cluster)
        assert [r.offset for r in before] == list(range(400))
        sealed = [p for p in cluster.partitionlets(T) if not p.active]
        assert len(sealed) >= 4

        report = cluster.archive()

        assert {a.id for a in report.archived} == {p.id for p in sealed}
        assert report.messages == sum(p.messages for p in sealed)
        after = read_all(cluster)
        assert fields(after) == fields(before)
        infos = cluster.partitionlets(T)
        assert [p.tier for p in infos] == ["archive"] * len(sealed) + ["live"]
        assert infos[-1].file is None
        files = archive_files(cluster_path)
        assert [f.as_uri() for f in files] == [p.file for p in infos[:-1]]
        # the volumes no longer hold them; the listing gives the archived counts
        for p in infos[:-1]:
            assert cluster.volume(p.volume).state(p.id).state == DELETED
            assert p.messages == next(s.messages for s in sealed if s.id == p.id)
        # a fresh consumer that seeks into the middle of an archived partitionlet
        consumer = Consumer(cluster, enable_auto_commit=False)
        tp = TopicPartition(T, 0)
        consumer.assign([tp])
        consumer.seek(tp, 123)
        got = drain(consumer)
        consumer.close()
        assert fields(got) == fields(before[123:])
        # more messages after archiving go on at the next offsets
        produce(cluster, 50, start=400)
        assert [r.offset for r in read_all(cluster)] == list(range(450))


def test_stream_and_cluster_totals_count_archived_messages(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        produce(cluster, 300)
        before = (cluster.stream("/a").messages, cluster.totals().messages)
        report = cluster.archive()
        assert report.messages > 0
        assert (cluster.stream("/a").messages, cluster.totals().messages) == before == (300, 300)
        assert cluster.stream("/a").bytes >= report.bytes > 0


def test_file_has_the_kafka_source_columns_in_offset_order(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        produce(cluster, 200)
        before = read_all(cluster)
        cluster.archive()
        first = archive_files(cluster_path)[0]
        table = pq.read_table(first)
        meta = pq.read_metadata(first)
    assert table.column_names == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    assert str(table.schema.field("timestamp").type) == "timestamp[us, tz=UTC]"
    assert meta.row_group(0).column(0).compression == "ZSTD"
    rows = table.to_pylist()
    assert [r["offset"] for r in rows] == [r.offset for r in before[: len(rows)]]
    assert rows[1]["value"] == before[1].value and rows[1]["topic"] == T
    assert rows[1]["headers"] == [{"key": "n", "value": b"1"}, {"key": "empty", "value": None}]
    assert rows[0]["headers"] is None


def test_offsets_for_times_and_browse_on_archived_data(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        produce(cluster, 300)
        cluster.archive()
        assert cluster.partitionlets(T)[0].tier == "archive"
        tp = TopicPartition(T, 0)
        consumer = Consumer(cluster)
        found = consumer.offsets_for_times({tp: OLD_MS + 57})
        assert (found[tp].offset, found[tp].timestamp) == (57, OLD_MS + 57)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        consumer.close()
        page = browse(cluster, Query(T, seek=Seek.offset(10), direction="forward", limit=5))
        assert [r.offset for r in page.records] == [10, 11, 12, 13, 14]
        assert page.records[1].value == b"value-11"
        page = browse(cluster, Query(T, seek=Seek.time(OLD_MS + 200), direction="forward", limit=3))
        assert [r.offset for r in page.records] == [200, 201, 202]


# --- crash safety, under load ------------------------------------------------------------------

_CRASH = textwrap.dedent(
    """
    import os, signal, sys
    from engine import Cluster
    from engine.ops import archive
    path, step = sys.argv[1], sys.argv[2]
    seen = []
    def hook(name, pl):
        if name == step:
            seen.append(pl.id)
            if len(seen) == 2:  # the second partitionlet: the first is done
                print(pl.id, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
    with Cluster.open(path) as cluster:
        archive.archive(cluster, step_hook=hook)
    print("finished", flush=True)
    """
)


@pytest.mark.parametrize("step", ["written", "recorded"])
def test_kill_9_while_archiving_under_load_loses_and_duplicates_nothing(cluster_path, step):
    with Cluster.open(cluster_path, partitionlet_bytes=2000) as cluster:
        make(cluster)
        produce(cluster, 600)  # a few sealed partitionlets to start with
        sent = [600]
        stop = threading.Event()

        def producing():
            while not stop.is_set():
                produce(cluster, 20, start=sent[0])
                sent[0] += 20

        received: list = []
        tp = TopicPartition(T, 0)
        live = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
        live.assign([tp])

        def consuming():
            while not stop.is_set():
                received.extend(r for rs in live.poll(timeout_ms=20).values() for r in rs)

        threads = [threading.Thread(target=producing), threading.Thread(target=consuming)]
        for t in threads:
            t.start()
        try:
            done = subprocess.run(
                [sys.executable, "-c", _CRASH, str(cluster_path), step],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=scaled(120),
            )
            assert done.returncode == -signal.SIGKILL, done.stderr
            killed = int(done.stdout.split()[0])
            info = {p.id: p for p in cluster.partitionlets(T)}[killed]
            named = [f for f in archive_files(cluster_path) if f.stem.endswith(f"-{killed}")]
            assert len(named) == 1  # the file was written
            state = cluster.volume(info.volume).state(killed).state
            if step == "written":
                assert (info.tier, state) == ("live", SEALED)  # not recorded yet
            else:
                assert (info.tier, state) == ("archive", SEALED)  # recorded, not purged
            report = cluster.archive()  # the rerun, while producing and consuming go on
            assert report.purged == (1 if step == "recorded" else 0)
            after_rerun = sent[0]
            wait_until(lambda: sent[0] >= after_rerun + 40, message="producing after the rerun")
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        cluster.archive()
        received.extend(drain(live))
        live.close()
        total = sent[0]
        # every offset exactly once, in order, with what was sent
        assert [r.offset for r in received] == list(range(total))
        assert all(r.value == f"value-{r.offset}".encode() for r in received)
        everything = read_all(cluster)
        assert fields(everything) == fields(received)
        infos = cluster.partitionlets(T)
        archived = [p for p in infos if p.tier == "archive"]
        assert killed in {p.id for p in archived}
        # one file per archived partitionlet, none for the others; no volume copies left
        assert [f.as_uri() for f in archive_files(cluster_path)] == [p.file for p in archived]
        for p in archived:
            assert cluster.volume(p.volume).state(p.id).state == DELETED


# --- the other maintenance -----------------------------------------------------------------


def test_ttl_deletes_archived_files_and_rows(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        produce(cluster, 300)
        cluster.archive()
        files = archive_files(cluster_path)
        assert len(files) >= 3
        files[0].unlink()  # a file already gone is no error
        cluster.edit_stream("/a", ttl=3600)  # 2020's messages have expired
        report = cluster.enforce_retention()
        # every archived one, and the live one (sealed for it) with its 2020 messages
        assert report.partitionlets_dropped == len(files) + 1
        assert report.messages_freed == 300
        assert archive_files(cluster_path) == []
        assert [p.tier for p in cluster.partitionlets(T)] == ["live"]
        assert read_all(cluster) == []


def test_compaction_runs_before_archiving(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        cluster.create_stream("/a", compact=True, archive_after=60, ttl=0)
        cluster.create_topic(T, partitions=1)
        produce(cluster, 300)
        report = cluster.archive()
        assert report.compacted
        table = pq.read_table(archive_files(cluster_path)[0])
        offsets = table.column("offset").to_pylist()
        # 13 keys: only the latest of each key in the partition survives
        assert len(offsets) < 20
        latest = {f"k{i % 13}".encode(): i for i in range(300)}
        got = read_all(cluster)
        assert sorted(r.offset for r in got) == sorted(latest.values())
        assert [r.offset for r in got] == sorted(r.offset for r in got)
        assert all(r.value == f"value-{r.offset}".encode() for r in got)


def test_rebalance_leaves_archived_partitionlets_alone(cluster_path):
    from engine.ops import balance

    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        produce(cluster, 300)
        cluster.archive()
        archived = [p for p in cluster.partitionlets(T) if p.tier == "archive"]
        other = next(v.id for v in cluster.volumes() if v.id != archived[0].volume)
        assert balance.move(cluster, archived[0].id, other) is None
        report = cluster.rebalance()
        assert archived[0].id not in {m.partitionlet for m in report.moves}
        assert [p for p in cluster.partitionlets(T) if p.tier == "archive"] == archived


def test_maintenance_thread_pass_archives(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        produce(cluster, 200)
        before = read_all(cluster)
        Maintenance(cluster).run_once()
        assert "archive" in {p.tier for p in cluster.partitionlets(T)}
        assert fields(read_all(cluster)) == fields(before)


def test_not_yet_old_enough_stays_live(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        cluster.create_stream("/a", archive_after=3600)
        cluster.create_topic(T, partitions=1)
        producer = Producer(cluster, acks=1)
        for i in range(200):
            producer.send(T, value=b"x" * 20)
            if i % 10 == 9:
                producer.flush()
        producer.close()
        assert cluster.archive().archived == ()
        assert {p.tier for p in cluster.partitionlets(T)} == {"live"}


def test_plet_archive_command(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        cluster.create_stream("/b", archive_after=60, ttl=0)
        cluster.create_topic("/b:t", partitions=1)
        produce(cluster, 200)
        produce(cluster, 200, topic="/b:t")
    runner = CliRunner()
    got = runner.invoke(cli, ["archive", "--cluster", str(cluster_path), "--stream", "/a"])
    assert got.exit_code == 0, got.output
    assert got.output.startswith("archived ")
    with Cluster.open(cluster_path) as cluster:
        assert "archive" in {p.tier for p in cluster.partitionlets(T)}
        assert {p.tier for p in cluster.partitionlets("/b:t")} == {"live"}
        archived = [p for p in cluster.partitionlets(T) if p.tier == "archive"]
    got = runner.invoke(cli, ["archive", "--cluster", str(cluster_path), "--stream", "/nope"])
    assert got.exit_code == 1 and "does not exist" in got.output
    # the listing says where each partitionlet is: the tier, and an archived one's file
    got = runner.invoke(cli, ["partitionlet", "list", T, "--cluster", str(cluster_path)])
    assert got.exit_code == 0, got.output
    assert "TIER" in got.output and " archive" in got.output and " live" in got.output
    for p in archived:
        assert f"partitionlet {p.id} is archived in {p.file}" in got.output


# --- replication -------------------------------------------------------------------------------


def test_new_replica_receives_archived_history(tmp_path):
    with (
        Cluster.open(tmp_path / "src", partitionlet_bytes=1500) as src,
        Cluster.open(tmp_path / "dst") as dst,
    ):
        make(src)
        produce(src, 300)
        before = read_all(src)
        src.archive()
        assert src.partitionlets(T)[0].tier == "archive"
        src.add_replica("/a", tmp_path / "dst")
        replicator = Replicator(src)
        for _ in range(20):
            if not replicator.run_once():
                break
        assert fields(read_all(dst)) == fields(before)


def test_a_replica_that_had_part_follows_on_after_archiving_without_conflict(tmp_path):
    with (
        Cluster.open(tmp_path / "src", partitionlet_bytes=1500) as src,
        Cluster.open(tmp_path / "dst") as dst,
    ):
        make(src)
        produce(src, 300)
        src.add_replica("/a", tmp_path / "dst")  # copies what exists
        produce(src, 100, start=300)
        src.archive()  # archives partitionlets the replica holds, and some it does not yet
        replicator = Replicator(src)
        for _ in range(20):
            if not replicator.run_once():
                break
        # the replica's last batch compares equal with the archived one (same offsets and
        # origin), so the link stays in sync and the rest follows
        assert [r.state for r in src.replicas("/a")] == ["in_sync"]
        assert fields(read_all(dst)) == fields(read_all(src))


# --- policies ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    ["ftp://host/x", "file:relative/x", "s3://", "s3://bucket/p?bogus=1", "/plain/path", 5],
)
def test_bad_archive_uri_is_refused(cluster, uri):
    with pytest.raises(errors.InvalidPolicy, match="archive_uri"):
        cluster.create_stream("/a", archive_uri=uri)
    with pytest.raises(errors.UnknownStream):
        cluster.stream("/a")


def test_archive_uri_outside_the_cluster_needs_an_administrator(cluster, tmp_path):
    cluster.create_stream("/a", admin_perm="u:bob")
    bob = cluster.as_principal(Principal("bob"))
    with pytest.raises(errors.AccessDenied, match="administrator"):
        bob.edit_stream("/a", archive_uri=(tmp_path / "elsewhere").as_uri())
    bob.edit_stream("/a", archive_after=60)  # the rest is the stream admin's
    admin = cluster.as_principal(Principal("root", superuser=True))
    admin.edit_stream("/a", archive_uri=(tmp_path / "elsewhere").as_uri())
    bob.edit_stream("/a", ttl=60)  # keeping the URI needs nothing more
    assert cluster.stream("/a").policies["archive_uri"] == (tmp_path / "elsewhere").as_uri()


# --- s3 ----------------------------------------------------------------------------------------


@pytest.fixture
def s3_server(monkeypatch):
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(name, value)
    with local_s3() as (port, fs):
        yield port, fs


def test_s3_archive_read_back_by_a_consumer(cluster_path, s3_server):
    port, fs = s3_server
    uri = f"s3://archive/plet?endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1"
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster, archive_uri=uri)
        produce(cluster, 300)
        before = read_all(cluster)
        report = cluster.archive()
        assert report.archived
        infos = [p for p in cluster.partitionlets(T) if p.tier == "archive"]
        assert all(p.file.startswith("s3://archive/plet/a/t/0/") for p in infos)
        stored = fs.get_file_info(pafs_selector("archive/plet/"))
        assert sorted(f.path.rsplit("/", 1)[1] for f in stored if f.is_file) == sorted(
            p.file.split("?")[0].rsplit("/", 1)[1] for p in infos
        )
        assert not (cluster_path / "archive").exists()
    with Cluster.open(cluster_path) as cluster:  # another process's view: from S3 alone
        assert fields(read_all(cluster)) == fields(before)
        cluster.edit_stream("/a", ttl=3600)
        cluster.enforce_retention()
        assert [f for f in fs.get_file_info(pafs_selector("archive/plet/")) if f.is_file] == []


def pafs_selector(path: str):
    import pyarrow.fs as pafs

    return pafs.FileSelector(path, recursive=True, allow_not_found=True)


def test_a_catalog_written_before_the_archive_tier_gains_its_columns(cluster_path):
    import sqlite3

    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        produce(cluster, 200)
        before = read_all(cluster)
    conn = sqlite3.connect(cluster_path / "catalog.db")
    conn.execute("DROP INDEX partitionlets_archived")  # an older catalog had neither
    for column in ("archive_file", "archive_messages", "archive_bytes"):
        conn.execute(f"ALTER TABLE partitionlets DROP COLUMN {column}")
    conn.commit()
    conn.close()
    with Cluster.open(cluster_path) as cluster:
        assert cluster.archive().archived
        assert fields(read_all(cluster)) == fields(before)


def test_kafka_wire_clients_read_archived_history(cluster_path):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    from engine.wire import KafkaServer

    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        produce(cluster, 200)
        before = read_all(cluster)
        cluster.archive()
        assert cluster.partitionlets(T)[0].tier == "archive"
        with KafkaServer(cluster, listen=("127.0.0.1", 0), default_stream="/a") as server:
            consumer = KafkaConsumer(
                bootstrap_servers="{}:{}".format(*server.address),
                auto_offset_reset="earliest",
                consumer_timeout_ms=int(scaled(5000)),
            )
            consumer.assign([KTP("t", 0)])
            got = list(consumer)
            consumer.close()
    assert [(m.offset, m.key, m.value, m.timestamp) for m in got] == [
        (r.offset, r.key, r.value, r.timestamp) for r in before
    ]
    assert [list(m.headers) for m in got] == [[tuple(h) for h in r.headers] for r in before]


def test_deleting_a_topic_deletes_its_archived_files(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=1500) as cluster:
        make(cluster)
        produce(cluster, 200)
        cluster.archive()
        assert archive_files(cluster_path)
        cluster.delete_topic(T)
        assert archive_files(cluster_path) == []


def test_an_archived_batch_is_laid_out_from_arrow_as_encode_lays_it_out_from_lists():
    """The archive reader builds a batch from Arrow's buffers (no Python object per record):
    byte for byte what `encode` makes of the same records, with nulls, empty values, a
    slice that starts inside its buffers and chunks."""
    import pyarrow as pa

    from engine.storage import archive, batch

    values = [b"a", None, b"", b"longer value", None, b"z" * 300]
    keys = [None, b"k1", None, b"", b"k4", None]
    whole = pa.chunked_array(
        [pa.array([b"skipped", *values[:2]], pa.binary()), pa.array(values[2:], pa.binary())]
    )
    column = whole.slice(1)  # starts one record into its first chunk
    lengths, joined, any_value = archive._binary_column(column)
    key_lengths, key_joined, any_key = archive._binary_column(pa.array(keys, pa.binary()))
    assert any_value and any_key
    stamps, deltas = [5, 7, 7, 9, 9, 12], [0, 1, 3, 4, 8, 9]
    assembled = batch.assemble(
        len(values), 5, batch._ints("q", stamps), batch._ints("I", deltas),
        lengths, joined, key_lengths, key_joined,
        batch.encode_headers([[("h", b"v")], [], [], [], [("x", None)], []]),
    )  # fmt: skip
    encoded = batch.encode(
        values, stamps, keys, [[("h", b"v")], [], [], [], [("x", None)], []], deltas
    )
    assert assembled == encoded
    decoded = batch.decode(assembled, 100)
    assert decoded.values == values and decoded.keys == keys
    assert list(decoded.offsets) == [100 + d for d in deltas]
    nothing = archive._binary_column(pa.array([None, None], pa.binary()))
    assert nothing == (batch._ints("i", [-1, -1]), b"", False)
