"""Checksums end to end (issue 26): every stored batch carries a CRC32C, written on append,
compaction, replicated apply and move, and verified by every reader. Bytes of a stored
value are flipped in the real SQLite file on disk (the cluster closed, its WAL checkpointed
first), then read through each reader: each one raises (or reports) a `CorruptBatch`
naming the cluster, volume, topic, partition and offsets, hands out what lies before the
damage and nothing of the damaged batch, and the other partitions go on."""

from __future__ import annotations

import pickle
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine import Cluster, Consumer, Producer, Replicator, TopicPartition, errors
from engine.cli import cli
from engine.client.browse import Browser, Query, Seek
from engine.ops import balance
from engine.replication import DirectoryTarget, ReplicaBatch
from engine.storage import archive, scan
from engine.storage import batch as batch_codec
from tests.timing import scaled

TOPIC = "/s:t"
T0 = 1_700_000_000_000
COUNT = 200  # messages per partition, in batches of BATCH
BATCH = 20
DAMAGED = 105  # the value flipped on disk: partition 0's message at this offset
DAMAGED_BATCH = (100, 119)  # the offsets of its batch


def value(partition: int, i: int) -> bytes:
    return f"p{partition}-value-{i:06d}|".encode() + b"x" * 40


def fill(cluster: Cluster, partitions: int = 2, topic: str = TOPIC) -> None:
    """COUNT messages in each partition, in batches of BATCH (a flush after each)."""
    producer = Producer(cluster, acks=1, linger_ms=1000)
    for start in range(0, COUNT, BATCH):
        for p in range(partitions):
            for i in range(start, start + BATCH):
                producer.send(topic, value=value(p, i), key=b"k%d" % i, partition=p,
                              timestamp_ms=T0 + i)  # fmt: skip
        producer.flush()
    producer.close()


def flip(cluster_path: Path, needle: bytes) -> Path:
    """XOR the bytes of `needle` where the closed cluster's volume file holds them; the
    file is checkpointed first, so the bytes are in the file, not its WAL."""
    for path in sorted((cluster_path / "volumes").glob("*.db")):
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        data = bytearray(path.read_bytes())
        at = data.find(needle)
        if at < 0:
            continue
        assert data.find(needle, at + 1) < 0, "the needle is in the file once"
        for i in range(at, at + len(needle)):
            data[i] ^= 0x01
        path.write_bytes(bytes(data))
        return path
    raise AssertionError(f"{needle!r} is in no volume file")


def make_damaged(cluster_path: Path, topic: str = TOPIC) -> Path:
    """A cluster "dc1" whose `topic` (2 partitions) has partition 0's value at offset
    DAMAGED flipped on disk; partition 1 is sound."""
    with Cluster.open(cluster_path, name="dc1") as cluster:
        cluster.create_stream(topic.split(":")[0], ttl=0)
        cluster.create_topic(topic, partitions=2)
        fill(cluster, topic=topic)
    flip(cluster_path, value(0, DAMAGED)[:16])
    return cluster_path


@pytest.fixture
def damaged(cluster_path) -> Path:
    return make_damaged(cluster_path)


def check_names_the_damage(exc: errors.CorruptBatch, topic: str = TOPIC) -> None:
    assert isinstance(exc, errors.StorageError)
    assert exc.cluster == "dc1"
    assert (exc.topic, exc.partition) == (topic, 0)
    assert (exc.base_offset, exc.last_offset) == DAMAGED_BATCH
    assert exc.volume is not None
    text = str(exc)
    assert f"topic {topic}" in text and "partition 0" in text and "offsets 100..119" in text
    assert f"volume {exc.volume}" in text


def altered(values) -> list:
    """The values read that are not what was written."""
    sound = {value(p, i) for p in (0, 1) for i in range(COUNT)}
    values = list(values)
    assert values, "something was read"
    return [v for v in values if v not in sound]


# --- written -------------------------------------------------------------------------------


def stored_crcs(cluster: Cluster, topic: str = TOPIC) -> list[tuple]:
    """(base, last, ts_type, first_ts, max_ts, payload, crc) of every stored batch."""
    rows = []
    row = cluster.catalog.topic(*topic.split(":"))
    for p in range(row.partitions):
        for pl in cluster.catalog.chain(row.id, p):
            with sqlite3.connect(cluster.volume(pl.volume_id).path) as conn:
                rows += conn.execute(
                    "SELECT base_offset, last_offset, ts_type, first_ts, max_ts, payload, crc "
                    "FROM batches WHERE partitionlet = ? ORDER BY last_offset",
                    (pl.id,),
                ).fetchall()
            conn.close()
    return rows


def test_every_batch_is_stored_with_the_crc32c_of_its_payload_and_row(cluster):
    cluster.create_stream("/s", ttl=0, compression="zstd")
    cluster.create_topic(TOPIC, partitions=2)
    fill(cluster)
    rows = stored_crcs(cluster)
    assert len(rows) == 2 * COUNT // BATCH
    for row in rows:
        assert row[6] == batch_codec.checksum(*row[:6])
        assert batch_codec.intact(*row)
    # the fields are covered too: another offset, or a flipped payload bit, mismatches
    base, last, ts_type, first_ts, max_ts, payload, crc = rows[0]
    assert not batch_codec.intact(base + 1, last + 1, ts_type, first_ts, max_ts, payload, crc)
    flipped = payload[:-1] + bytes([payload[-1] ^ 1])
    assert not batch_codec.intact(base, last, ts_type, first_ts, max_ts, flipped, crc)
    assert not batch_codec.intact(base, last, ts_type, first_ts, max_ts, "text", crc)


def test_compaction_stores_the_checksum_of_what_it_rewrites(cluster):
    cluster.create_stream("/s", ttl=0, compact=True)
    cluster.create_topic(TOPIC, partitions=1)
    producer = Producer(cluster, acks=1)
    for i in range(300):
        producer.send(TOPIC, key=b"k%d" % (i % 5), value=b"v%d" % i, timestamp_ms=T0 + i)
        if i % 50 == 49:
            producer.flush()
    producer.close()
    cluster.compact()
    rows = stored_crcs(cluster)
    assert sum(batch_codec.count_of(r[5]) for r in rows) < 300  # it did rewrite
    assert all(r[6] is not None and batch_codec.intact(*r) for r in rows)


# --- read: Consumer.poll and poll_arrow --------------------------------------------------------


def poll_until_error(consumer, read, limit=10_000):
    """Poll with `read` until a CorruptBatch; every value read before it, and the error."""
    values = []
    deadline = time.monotonic() + scaled(20)
    while time.monotonic() < deadline:
        try:
            got = read(timeout_ms=100, max_records=limit)
        except errors.CorruptBatch as exc:
            return values, exc
        for tp, records in got.items():
            values += [(tp.partition, v) for v in records]
    raise AssertionError("no CorruptBatch was raised")


def test_poll_raises_naming_the_damage_and_serves_everything_else(damaged):
    with Cluster.open(damaged) as cluster:
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
        consumer.assign(tps)
        records = []
        error = None
        deadline = time.monotonic() + scaled(20)
        # small polls: the damage is met while partition 1 still has records to give
        while time.monotonic() < deadline and consumer.position(tps[1]) < COUNT:
            try:
                for got in consumer.poll(timeout_ms=100, max_records=30).values():
                    records += got
            except errors.CorruptBatch as exc:
                error = exc
        assert error is not None
        check_names_the_damage(error)
        assert not altered(r.value for r in records)
        # partition 1 whole; partition 0 up to the damaged batch, and no further
        assert [r.offset for r in records if r.partition == 1] == list(range(COUNT))
        assert [r.offset for r in records if r.partition == 0] == list(range(100))
        assert consumer.position(tps[0]) == 100
        # polling again raises again (a damaged batch is never skipped silently)...
        with pytest.raises(errors.CorruptBatch):
            consumer.poll(timeout_ms=100)
        # ...until the reader seeks past it, its own choice
        consumer.seek(tps[0], 120)
        rest = [r for rs in consumer.poll(timeout_ms=100, max_records=1000).values() for r in rs]
        assert [r.offset for r in rest] == list(range(120, COUNT))
        consumer.close()


def test_poll_arrow_raises_and_never_returns_the_damaged_values(damaged):
    with Cluster.open(damaged) as cluster:
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TopicPartition(TOPIC, 0)])
        offsets, values = [], []

        def read(**kw):
            got = consumer.poll_arrow(**kw)
            for batch in got.values():
                offsets.extend(batch.column("offset").to_pylist())
                values.extend(batch.column("value").to_pylist())
            return {}

        _, error = poll_until_error(consumer, read, limit=45)
        check_names_the_damage(error)
        assert offsets == list(range(100))
        assert not altered(values)
        consumer.close()


def test_offsets_for_times_at_a_damaged_batch_raises(damaged):
    with Cluster.open(damaged) as cluster:
        consumer = Consumer(cluster, enable_auto_commit=False)
        tp = TopicPartition(TOPIC, 0)
        with pytest.raises(errors.CorruptBatch) as raised:
            consumer.offsets_for_times({tp: T0 + DAMAGED})
        check_names_the_damage(raised.value)
        assert consumer.offsets_for_times({tp: T0 + 50})[tp].offset == 50
        consumer.close()


# --- read: browse and export -----------------------------------------------------------------


def test_browse_raises_at_the_damage(damaged):
    with Cluster.open(damaged) as cluster, Browser(cluster, TOPIC, [0]) as browser:
        page = browser.page(Query(TOPIC, partitions=(0,), seek=Seek.offset(0), limit=50))
        assert [r.offset for r in page.records] == list(range(50))
        with pytest.raises(errors.CorruptBatch) as raised:
            browser.page(Query(TOPIC, partitions=(0,), seek=Seek.offset(90), limit=50))
        check_names_the_damage(raised.value)
    with Cluster.open(damaged) as cluster, Browser(cluster, TOPIC, [1]) as browser:
        page = browser.page(Query(TOPIC, partitions=(1,), seek=Seek.offset(90), limit=50))
        assert [r.offset for r in page.records] == list(range(90, 140))


def test_export_fails_naming_the_damage_and_writes_no_altered_row(damaged, tmp_path):
    out = tmp_path / "out.db"
    env = {"PLET_CLUSTER": None, "PLET_DEFAULT_STREAM": None}
    result = CliRunner().invoke(
        cli, ["export", TOPIC, "--cluster", str(damaged), "--sqlite", str(out)], env=env
    )
    assert result.exit_code != 0
    text = result.output + result.stderr
    assert "damaged record batch" in text and "partition 0" in text and "offsets 100..119" in text
    assert "Traceback" not in text
    if out.exists():
        with sqlite3.connect(out) as conn:
            rows = conn.execute("SELECT value FROM t").fetchall()
        conn.close()
        assert not altered(v.encode() if isinstance(v, str) else v for (v,) in rows)


# --- read: the wire listener, with a real Kafka client ------------------------------------------


def test_a_kafka_client_gets_corrupt_message_for_the_damaged_partition_only(cluster_path):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.errors import CorruptRecordError

    from engine.wire import KafkaServer

    make_damaged(cluster_path, "/kafka:t")  # the listener's default stream: "t" on the wire
    with Cluster.open(cluster_path) as cluster:
        server = KafkaServer(cluster, listen=("127.0.0.1", 0)).start()
        host, port = server.address
        try:
            client = KafkaConsumer(
                bootstrap_servers=f"{host}:{port}",
                enable_auto_commit=False,
                auto_offset_reset="earliest",
            )
            p0, p1 = KTP("t", 0), KTP("t", 1)
            client.assign([p1])
            got = []
            deadline = time.monotonic() + scaled(20)
            while len(got) < COUNT and time.monotonic() < deadline:
                for records in client.poll(timeout_ms=500).values():
                    got += records
            assert [r.offset for r in got] == list(range(COUNT))
            assert not altered(r.value for r in got)

            client.assign([p0])
            client.seek(p0, 0)
            got = []
            with pytest.raises(CorruptRecordError):
                deadline = time.monotonic() + scaled(20)
                while time.monotonic() < deadline:
                    for records in client.poll(timeout_ms=500).values():
                        got += records
            assert [r.offset for r in got] == list(range(100))
            assert not altered(r.value for r in got)
            client.close()
        finally:
            server.close()


# --- read: Spark's scan ------------------------------------------------------------------------


def test_a_scan_task_raises_naming_the_damage(damaged):
    with Cluster.open(damaged) as cluster:
        ranges = cluster.scan_ranges([TOPIC])
        tasks = cluster.scan_plan(ranges)
    by_partition = {t.partition: t for t in tasks}
    with pytest.raises(errors.CorruptBatch) as raised:
        scan.read(by_partition[0])
    exc = pickle.loads(pickle.dumps(raised.value))  # a Spark task's error crosses processes
    assert (exc.topic, exc.partition, exc.base_offset, exc.last_offset) == (TOPIC, 0, 100, 119)
    assert str(exc) == str(raised.value)
    assert sum(b.last_offset - b.base_offset + 1 for b in scan.read(by_partition[1])) == COUNT


# --- replication -------------------------------------------------------------------------------


def test_replication_never_copies_a_damaged_batch(damaged, tmp_path):
    b_dir = tmp_path / "b"
    with Cluster.open(b_dir, name="b"):
        pass
    with Cluster.open(damaged) as a:
        a.add_replica("/s", b_dir)
        with Replicator(a) as r:
            r.run_once()
        [info] = a.replicas("/s")
        assert info.state == "broken"
        assert "damaged record batch" in info.error and "offsets 100..119" in info.error
    with Cluster.open(b_dir) as b:
        consumer = Consumer(b, enable_auto_commit=False, auto_offset_reset="earliest")
        tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
        consumer.assign(tps)
        got = []
        deadline = time.monotonic() + scaled(10)
        while time.monotonic() < deadline and consumer.position(tps[1]) < COUNT:
            for records in consumer.poll(timeout_ms=100).values():
                got += records
        consumer.close()
        assert not altered(r.value for r in got)
        assert [r.offset for r in got if r.partition == 0] == list(range(100))
        assert [r.offset for r in got if r.partition == 1] == list(range(COUNT))
        # what it stored carries the source's checksums
        assert all(row[6] is not None and batch_codec.intact(*row) for row in stored_crcs(b))


def test_the_receiving_side_checks_the_checksum_before_writing(tmp_path):
    with Cluster.open(tmp_path / "a", name="a") as a:
        a.create_stream("/s", ttl=0)
        a.create_topic(TOPIC, partitions=1)
        fill(a, partitions=1)
        row = a.catalog.topic("/s", "t")
        [pl] = a.catalog.chain(row.id, 0)
        batches = a.volume(pl.volume_id).replica_batches(pl.id, 0, 3)
    assert all(b.crc is not None for b in batches)
    bad = batches[1]
    payload = bytearray(bad.payload)
    payload[-3] ^= 0x01
    tampered = [batches[0], ReplicaBatch(**{**bad.__dict__, "payload": bytes(payload)})]
    with Cluster.open(tmp_path / "b", name="b") as b:
        b.create_stream("/s", ttl=0)
        b.create_topic(TOPIC, partitions=1)
    target = DirectoryTarget(str(tmp_path / "b"))
    try:
        with pytest.raises(errors.CorruptBatch, match="offsets 20..39"):
            target.apply("/s", "t", 0, tampered)
        assert target.cluster.topic(TOPIC).partitions[0].log_end_offset == 0  # nothing
        assert target.apply("/s", "t", 0, batches).done == 3
    finally:
        target.close()


# --- move and compaction ------------------------------------------------------------------------


def test_a_move_refuses_a_damaged_partitionlet_and_leaves_it_where_it_was(cluster_path):
    with Cluster.open(cluster_path, name="dc1", partitionlet_bytes=2000) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(TOPIC, partitions=1)
        fill(cluster, partitions=1)
        infos = cluster.partitionlets(TOPIC)
        holder = next(p for p in infos if p.base_offset <= DAMAGED <= p.last_offset)
        assert not holder.active
    flip(cluster_path, value(0, DAMAGED)[:16])
    with Cluster.open(cluster_path) as cluster:
        to = next(v for v in cluster.open_volumes() if v != holder.volume)
        with pytest.raises(errors.CorruptBatch) as raised:
            balance.move(cluster, holder.id, to)
        assert raised.value.partitionlet == holder.id
        assert raised.value.topic == TOPIC and raised.value.partition == 0
        after = {p.id: p.volume for p in cluster.partitionlets(TOPIC)}
        assert after[holder.id] == holder.volume
        assert cluster.volume(to).state(holder.id) is None  # no copy left behind
        # a sound one moves, its checksums with it
        sound = next(p for p in infos if not p.active and p.id != holder.id)
        to = next(v for v in cluster.open_volumes() if v != sound.volume)
        assert balance.move(cluster, sound.id, to) is not None
        check = cluster.volume(to).verify_batches(sound.id)
        assert check.batches > 0 and check.unchecked == 0 and not check.problems


def test_compaction_never_rewrites_a_damaged_batch(cluster_path):
    with Cluster.open(cluster_path, name="dc1") as cluster:
        cluster.create_stream("/s", ttl=0, compact=True)
        cluster.create_topic(TOPIC, partitions=1)
        fill(cluster, partitions=1)
    flip(cluster_path, value(0, DAMAGED)[:16])
    with Cluster.open(cluster_path) as cluster:
        report = cluster.compact()
        [(where, why)] = report.damaged.items()
        assert where == f"{TOPIC} partition 0" and "offsets 100..119" in why
        row = cluster.catalog.topic("/s", "t")
        [pl] = cluster.catalog.chain(row.id, 0)
        check = cluster.volume(pl.volume_id).verify_batches(pl.id)
        # still there and still found damaged: not blessed with a new checksum
        assert [(p.base_offset, p.last_offset) for p in check.problems] == [DAMAGED_BATCH]


# --- the check `plet check` calls, and old batches ----------------------------------------------


def test_verify_batches_lists_each_damaged_batch(damaged):
    with Cluster.open(damaged) as cluster:
        row = cluster.catalog.topic("/s", "t")
        found = {}
        for p in (0, 1):
            for pl in cluster.catalog.chain(row.id, p):
                found[p] = cluster.volume(pl.volume_id).verify_batches(pl.id, chunk=3)
        assert found[1].batches == COUNT // BATCH and not found[1].problems
        assert found[0].batches == COUNT // BATCH and found[0].unchecked == 0
        [problem] = found[0].problems
        check_names_the_damage(problem)


def test_batches_written_before_checksums_stay_readable(cluster_path):
    with Cluster.open(cluster_path, name="dc1") as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(TOPIC, partitions=1)
        fill(cluster, partitions=1)
        paths = [v.path for v in cluster.open_volumes().values()]
    for path in paths:  # as a volume of the release before: no crc column at all
        with sqlite3.connect(path) as conn:
            conn.execute("ALTER TABLE batches DROP COLUMN crc")
        conn.close()
    with Cluster.open(cluster_path) as cluster:  # the column comes back, NULL for them
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TopicPartition(TOPIC, 0)])
        got = []
        while len(got) < COUNT:
            polled = consumer.poll(timeout_ms=100)
            assert polled
            got += [r for rs in polled.values() for r in rs]
        assert [r.value for r in got] == [value(0, i) for i in range(COUNT)]
        row = cluster.catalog.topic("/s", "t")
        [pl] = cluster.catalog.chain(row.id, 0)
        check = cluster.volume(pl.volume_id).verify_batches(pl.id)
        assert (check.batches, check.unchecked, check.problems) == (COUNT // BATCH,) * 2 + ([],)
        # new batches are written with theirs
        producer = Producer(cluster, acks=1)
        producer.send(TOPIC, value=b"new", partition=0)
        producer.close()
        rows = stored_crcs(cluster)
        assert rows[-1][6] is not None and batch_codec.intact(*rows[-1])
        assert [r[6] for r in rows[:-1]] == [None] * (COUNT // BATCH)
        consumer.close()


# --- the archive tier ------------------------------------------------------------------------


def archived(cluster_path: Path) -> list[Path]:
    """Partition 0 of /s:t, its sealed partitionlets archived; their Parquet files."""
    with Cluster.open(cluster_path, name="dc1", partitionlet_bytes=2000) as cluster:
        cluster.create_stream("/s", ttl=0, archive_after=60)
        cluster.create_topic(TOPIC, partitions=1)
        fill(cluster, partitions=1)
        assert cluster.archive().archived
    files = sorted((cluster_path / "archive").rglob("*.parquet"))
    assert files
    return files


def topic_id(cluster: Cluster) -> int:
    return cluster.catalog.topic("/s", "t").id


def forget(cluster_path: Path, files: list[Path]) -> None:
    """This process's open readers of `files` go (another process would open them anew)."""
    for f in files:
        archive.forget(str(f.relative_to(cluster_path)))


def read_partition(cluster: Cluster) -> list:
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(TOPIC, 0)])
    got = []
    try:
        while polled := consumer.poll(timeout_ms=100, max_records=1000):
            got += [r for rs in polled.values() for r in rs]
    finally:
        consumer.close()
    return got


def test_archived_files_carry_checksums_that_every_read_verifies(cluster_path):
    import pyarrow.parquet as pq

    files = archived(cluster_path)
    with Cluster.open(cluster_path) as cluster:  # sound: read as before
        assert [r.value for r in read_partition(cluster)] == [value(0, i) for i in range(COUNT)]
    # a flipped byte inside the value column's pages of the first file
    meta = pq.ParquetFile(files[0]).metadata
    values = meta.schema.to_arrow_schema().get_field_index("value")
    chunk = meta.row_group(0).column(values)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    data = bytearray(files[0].read_bytes())
    data[start + chunk.total_compressed_size // 2] ^= 0x01
    files[0].write_bytes(bytes(data))
    forget(cluster_path, files)
    with Cluster.open(cluster_path) as cluster:
        with pytest.raises(errors.CorruptBatch) as raised:
            read_partition(cluster)
        exc = raised.value
        # what `plet check` calls: this file's damage, none in the others
        rows = [pl for pl in cluster.catalog.chain(topic_id(cluster), 0) if pl.archive_file]
        found = {pl.archive_file: archive.verify_pages(cluster_path, pl) for pl in rows}
        assert [len(v) for v in found.values()] == [1] + [0] * (len(rows) - 1)
        assert files[0].name in str(exc) and exc.partition == 0
        assert exc.base_offset == 0
        ranges = cluster.scan_ranges([TOPIC])
        [task, *_] = cluster.scan_plan(ranges)
    with pytest.raises(errors.CorruptBatch):  # Spark's scan of the file, both ways
        list(scan.read_archive(task))
    with pytest.raises(errors.CorruptBatch):
        scan.read(task)


def test_a_damaged_archive_footer_is_found(cluster_path):
    files = archived(cluster_path)
    data = files[-1].read_bytes()
    at = data.rindex(b'"format": 2')
    files[-1].write_bytes(data[:at] + b'"format": 3' + data[at + len(b'"format": 2') :])
    forget(cluster_path, files)
    with Cluster.open(cluster_path) as cluster:
        with pytest.raises(errors.CorruptBatch, match="footer does not match"):
            read_partition(cluster)


def test_over_http_a_batch_travels_with_its_checksum(tmp_path):
    from engine.replication.http import FEATURES, batch_from_json, batch_to_json

    with Cluster.open(tmp_path / "a", name="a") as a:
        a.create_stream("/s", ttl=0)
        a.create_topic(TOPIC, partitions=1)
        fill(a, partitions=1)
        row = a.catalog.topic("/s", "t")
        [pl] = a.catalog.chain(row.id, 0)
        [b] = a.volume(pl.volume_id).replica_batches(pl.id, 0, 1)
    assert "checksums" in FEATURES
    item = batch_to_json(b)
    assert len(item) == 14 and item[13] == b.crc
    assert batch_from_json(item) == b
    assert batch_from_json(item[:9]).crc is None  # from a source before checksums
    payload = bytearray(b.payload)
    payload[-1] ^= 0x01
    tampered = batch_to_json(ReplicaBatch(**{**b.__dict__, "payload": bytes(payload)}))
    with pytest.raises(errors.CorruptBatch, match="offsets 0..19"):
        batch_from_json(tampered)


def test_the_kafka_facade_raises_its_corrupt_record_error(damaged):
    from engine.kafka import KafkaConsumer
    from engine.kafka import TopicPartition as KTP
    from engine.kafka.errors import CorruptRecordException

    consumer = KafkaConsumer(bootstrap_servers=f"file://{damaged.resolve()}",
                             enable_auto_commit=False, auto_offset_reset="earliest")  # fmt: skip
    try:
        consumer.assign([KTP(TOPIC, 0)])
        got = []
        with pytest.raises(CorruptRecordException, match="offsets 100..119") as raised:
            for _ in range(100):
                for records in consumer.poll(timeout_ms=100, max_records=30).values():
                    got += records
        assert isinstance(raised.value.__cause__, errors.CorruptBatch)
        assert [r.offset for r in got] == list(range(100))
    finally:
        consumer.close()


def test_plet_check_names_each_damaged_batch_and_quick_skips_the_bytes(damaged):
    import json

    from click.testing import CliRunner

    from engine.cli import cli

    def plet_check(*options: str):
        result = CliRunner().invoke(cli, ["check", "--cluster", str(damaged), *options])
        assert result.exception is None or isinstance(result.exception, SystemExit)
        return result.exit_code, result.output

    code, out = plet_check("--json")
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    [problem] = [p for p in report["problems"] if p["check"] == "checksums"]
    assert (problem["topic"], problem["partition"]) == (TOPIC, 0)
    assert "offsets 100..119" in problem["message"] and problem["repairable"] is False
    code, out = plet_check()
    assert code == 1 and "offsets 100..119" in out and TOPIC in out
    # --quick reads no batch: the damage inside a value is for the full check to find
    code, out = plet_check("--quick", "--json")
    assert [p for p in json.loads(out)["problems"] if p["check"] == "checksums"] == []
