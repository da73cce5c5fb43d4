"""Clear errors for what cannot be used: foreign directories, corrupt or locked files,
invalid policies, and lookups of what does not exist."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from tests.timing import scaled

T = "/s:t"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_of(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): digest(p) for p in sorted(root.rglob("*")) if p.is_file()}


def make_cluster(path: Path, messages: int = 5, **kwargs) -> None:
    with Cluster.open(path, **kwargs) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T, partitions=4)
        producer = Producer(cluster, acks="all")
        for i in range(messages):
            producer.send(T, value=b"%d" % i, partition=i % 4)
        producer.flush()
        producer.close()


def read_all(cluster) -> list[bytes]:
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(T, p) for p in range(cluster.topic(T).partition_count)])
    values = []
    while True:
        batch = consumer.poll(timeout_ms=100)
        got = [r.value for recs in batch.values() for r in recs]
        if not got:
            break
        values += got
    consumer.close()
    return sorted(values)


def volume_files(path: Path) -> list[Path]:
    return sorted((path / "volumes").glob("vol-*.db"))


# --- not a cluster ---------------------------------------------------------------------


def test_directory_with_other_files_is_not_a_cluster(tmp_path):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "cat.jpg").write_bytes(b"\xff\xd8 not really")
    (d / "sub").mkdir()
    before = files_of(d)
    with pytest.raises(errors.NotACluster) as info:
        Cluster.open(d)
    assert str(d) in str(info.value)
    assert files_of(d) == before
    assert not (d / "catalog.db").exists()
    assert not (d / "volumes").exists()


def test_a_file_is_not_a_cluster(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("hello")
    with pytest.raises(errors.NotACluster):
        Cluster.open(f)
    assert f.read_text() == "hello"


def test_foreign_sqlite_catalog_is_not_a_cluster(tmp_path):
    d = tmp_path / "other"
    d.mkdir()
    conn = sqlite3.connect(d / "catalog.db")
    conn.execute("CREATE TABLE people (name TEXT)")
    conn.execute("INSERT INTO people VALUES ('ada')")
    conn.commit()
    conn.close()
    before = digest(d / "catalog.db")
    with pytest.raises(errors.NotACluster):
        Cluster.open(d)
    assert digest(d / "catalog.db") == before
    conn = sqlite3.connect(d / "catalog.db")
    assert conn.execute("SELECT name FROM people").fetchall() == [("ada",)]
    conn.close()


def test_catalog_of_another_format_is_not_a_cluster(tmp_path):
    d = tmp_path / "other"
    d.mkdir()
    conn = sqlite3.connect(d / "catalog.db")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('format', 'something-else')")
    conn.commit()
    conn.close()
    with pytest.raises(errors.NotACluster):
        Cluster.open(d)


def test_not_a_cluster_is_a_storage_error():
    assert issubclass(errors.NotACluster, errors.StorageError)
    assert issubclass(errors.CorruptFile, errors.StorageError)
    assert issubclass(errors.FileLocked, errors.StorageError)


# --- corrupt files ---------------------------------------------------------------------


def test_corrupt_volume(cluster_path):
    """A volume that is not an SQLite file is reported and left alone; the cluster opens
    and serves the other volumes (issue 26; tests/engine/test_integrity.py breaks more)."""
    make_cluster(cluster_path, messages=20)
    victim = volume_files(cluster_path)[1]
    saved = victim.read_bytes()
    victim.write_bytes(b"this is not an SQLite database, just text. " * 100)
    before = files_of(cluster_path)
    with Cluster.open(cluster_path) as cluster:
        (message,) = cluster.damaged_volumes().values()
        with pytest.raises(errors.DamagedPartition) as info:
            read_all(cluster)
    assert victim.name in message
    assert "not a readable SQLite database" in message
    assert victim.name in str(info.value) and "partition" in str(info.value)
    # nothing else damaged, the bad file left as it was
    after = files_of(cluster_path)
    key = str(victim.relative_to(cluster_path))
    assert after[key] == before[key]
    # put the file back: everything is there
    victim.write_bytes(saved)
    with Cluster.open(cluster_path) as cluster:
        assert read_all(cluster) == sorted(b"%d" % i for i in range(20))


def test_corrupt_catalog(cluster_path):
    make_cluster(cluster_path, messages=8)
    catalog = cluster_path / "catalog.db"
    saved = catalog.read_bytes()
    catalog.write_bytes(b"\x00\x01garbage" * 500)
    volumes_before = {p.name: digest(p) for p in volume_files(cluster_path)}
    with pytest.raises(errors.CorruptFile) as info:
        Cluster.open(cluster_path)
    assert "catalog" in str(info.value)
    assert str(catalog) in str(info.value) or "catalog.db" in str(info.value)
    assert {p.name: digest(p) for p in volume_files(cluster_path)} == volumes_before
    assert catalog.read_bytes() == b"\x00\x01garbage" * 500
    catalog.write_bytes(saved)
    with Cluster.open(cluster_path) as cluster:
        assert read_all(cluster) == sorted(b"%d" % i for i in range(8))


def test_volume_of_another_cluster_is_refused(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_cluster(a, messages=4)
    make_cluster(b, messages=4)
    (a / "volumes" / "vol-1.db").write_bytes((b / "volumes" / "vol-1.db").read_bytes())
    with pytest.raises(errors.CorruptFile) as info:
        Cluster.open(a)
    assert "vol-1.db" in str(info.value)


def test_truncated_volume_is_reported(cluster_path):
    make_cluster(cluster_path, messages=4)
    victim = volume_files(cluster_path)[0]
    victim.write_bytes(victim.read_bytes()[:50])  # part of the header only
    with Cluster.open(cluster_path) as cluster:
        assert victim.name in cluster.damaged_volumes()[1]
        with pytest.raises(errors.StorageError):
            read_all(cluster)


# --- locked files -------------------------------------------------------------------------


@pytest.fixture
def short_busy_timeout(monkeypatch):
    from engine.storage import connection

    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 200)


def test_locked_volume(cluster_path, short_busy_timeout):
    with Cluster.open(cluster_path, volumes=1) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T)
        producer = Producer(cluster, acks=1)
        assert producer.send(T, value=b"before").get(timeout=scaled(10)).offset == 0

        holder = sqlite3.connect(volume_files(cluster_path)[0], isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            future = producer.send(T, value=b"while locked")
            with pytest.raises(errors.FileLocked) as info:
                future.get(timeout=scaled(60))
            assert "vol-1.db" in str(info.value)
        finally:
            holder.execute("ROLLBACK")
            holder.close()

        # the lock is gone: writing works again and offsets stay dense
        assert producer.send(T, value=b"after").get(timeout=scaled(10)).offset == 1
        producer.close()
        assert read_all(cluster) == [b"after", b"before"]


def test_locked_catalog(cluster_path, short_busy_timeout):
    with Cluster.open(cluster_path) as cluster:
        holder = sqlite3.connect(cluster_path / "catalog.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(errors.FileLocked) as info:
                cluster.create_stream("/s")
            assert "catalog" in str(info.value)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        cluster.create_stream("/s")
        assert [s.path for s in cluster.streams()] == ["/s"]


# --- invalid policies -----------------------------------------------------------------------


BAD_POLICIES = [
    {"ttl": -1},
    {"ttl": "forever"},
    {"ttl": 1.5},
    {"ttl": None},
    {"default_partitions": 0},
    {"default_partitions": 10_001},
    {"auto_create": "maybe"},
    {"auto_create": 2},
    {"compact": None},
    {"min_compaction_lag_ms": -5},
    {"delete_retention_ms": -1},
    {"timestamp_type": "append"},
    {"timestamp_type": 0},
    {"max_message_bytes": 0},
    {"max_message_bytes": 10**12},
    {"produce_perm": ""},
    {"consume_perm": 5},
    {"retention": 5},  # not a policy
    {"TTL": 5},
]


@pytest.mark.parametrize("bad", BAD_POLICIES, ids=lambda d: repr(d))
def test_invalid_policy_on_create(cluster, bad):
    with pytest.raises(errors.InvalidPolicy) as info:
        cluster.create_stream("/s", **bad)
    assert next(iter(bad)) in str(info.value)
    assert cluster.streams() == []


@pytest.mark.parametrize("bad", BAD_POLICIES, ids=lambda d: repr(d))
def test_invalid_policy_on_edit_changes_nothing(cluster, bad):
    cluster.create_stream("/s", ttl=60)
    before = cluster.stream("/s").policies
    with pytest.raises(errors.InvalidPolicy):
        cluster.edit_stream("/s", **bad)
    with pytest.raises(errors.InvalidPolicy):
        good = {"default_partitions": 2} if "ttl" in bad else {"ttl": 120}
        cluster.edit_stream("/s", **good, **bad)  # the good one is not applied either
    assert cluster.stream("/s").policies == before


def test_invalid_policy_is_a_value_error():
    assert issubclass(errors.InvalidPolicy, ValueError)


def test_every_policy_has_a_default(cluster):
    info = cluster.create_stream("/s")
    assert info.policies["ttl"] == 604800
    assert info.policies["default_partitions"] == 1
    assert info.policies["auto_create"] is True
    assert info.policies["compact"] is False
    assert info.policies["min_compaction_lag_ms"] == 0
    assert info.policies["delete_retention_ms"] == 86400000
    assert info.policies["timestamp_type"] == "create"
    assert info.policies["max_message_bytes"] == 1048576
    for ace in ("produce_perm", "consume_perm", "topic_perm", "copy_perm", "admin_perm"):
        assert ace in info.policies


# --- lookups of what does not exist ---------------------------------------------------------


def test_unknown_stream(cluster):
    for call in (
        lambda: cluster.stream("/nope"),
        lambda: cluster.edit_stream("/nope", ttl=5),
        lambda: cluster.delete_stream("/nope"),
        lambda: cluster.topics("/nope"),
        lambda: cluster.topic_count("/nope"),
        lambda: cluster.create_topic("/nope:t"),
        lambda: cluster.topic("/nope:t"),
    ):
        with pytest.raises(errors.UnknownStream) as info:
            call()
        assert isinstance(info.value, errors.NotFound)
        assert isinstance(info.value, LookupError)
        assert "/nope" in str(info.value)


def test_unknown_topic(cluster):
    cluster.create_stream("/s")
    for call in (
        lambda: cluster.topic("/s:nope"),
        lambda: cluster.delete_topic("/s:nope"),
        lambda: cluster.add_partitions("/s:nope", 3),
        lambda: cluster.partitionlets("/s:nope"),
    ):
        with pytest.raises(errors.UnknownTopic) as info:
            call()
        assert isinstance(info.value, errors.NotFound)
        assert "/s:nope" in str(info.value)


def test_unknown_group(cluster):
    with pytest.raises(errors.UnknownGroup) as info:
        cluster.group("no-such-group")
    assert isinstance(info.value, errors.NotFound)


def test_an_emptied_volume_is_never_made_again(cluster_path):
    """SQLite takes an empty file for a new database: a volume emptied (truncated to 0
    bytes) must be reported, not given a fresh schema whose offsets start again at 0."""
    make_cluster(cluster_path, messages=20)
    victim = volume_files(cluster_path)[1]
    for suffix in ("-wal", "-shm"):
        Path(str(victim) + suffix).unlink(missing_ok=True)
    victim.write_bytes(b"")
    with Cluster.open(cluster_path) as cluster:
        (message,) = cluster.damaged_volumes().values()
        assert "no SQLite header" in message and victim.name in message
        with pytest.raises(errors.DamagedPartition):
            read_all(cluster)
    assert victim.stat().st_size == 0  # left as it was
