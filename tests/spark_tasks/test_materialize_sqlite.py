"""The materialize replay into a SQLite table (`output` sqlite:PATH with `table`): the
latest value per key, upserted by key, JSON objects as columns, tombstones deleting rows;
computed on the shared Spark session and checked row by row with the sqlite3 module; once
end to end as a real job started by `plet replay materialize --wait`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Cluster, Producer
from engine.errors import InvalidArgument
from spark_tasks import jobs
from tests.timing import scaled

pytestmark = pytest.mark.timeout(scaled(600))

T0 = 1_700_000_000_000
TOPIC = "/state:users"


def send(path: str, messages: list[tuple[bytes, bytes | None]], *, start: int) -> None:
    """(key, value) messages, one a second from T0 + start seconds, over both partitions
    (one key always lands in one partition, so its order is also its offsets' order)."""
    with Cluster.open(path) as c:
        producer = Producer(c, acks=1)
        for i, (key, value) in enumerate(messages):
            producer.send(TOPIC, key=key, value=value, timestamp_ms=T0 + (start + i) * 1000)
        producer.flush()
        producer.close()


@pytest.fixture
def history(tmp_path) -> str:
    path = str(tmp_path / "cluster")
    with Cluster.open(path, name="state") as c:
        c.create_stream("/state", ttl=0)
        c.create_topic(TOPIC, partitions=2)
    send(
        path,
        [
            (b"alice", b'{"name": "Alice", "age": 30, "tags": ["a"]}'),
            (b"bob", b"plain text"),
            (b"carol", b'{"name": "Carol", "age": 41}'),
            (b"dave", b'{"name": "Dave"}'),
            (b"erin", b"\xff\xfe not utf-8"),
            (b"alice", b'{"name": "Alice B.", "city": "Oslo", "key": "k", "value": 7}'),
            (b"dave", None),  # a tombstone: dave never gets a row
            (b"frank", b"[1, 2, 3]"),  # JSON, but no object: a value
            (b"\x80bin", b"binary key"),
            (None, b"no key: left out"),
        ],
        start=0,
    )
    return path


def rows(db: Path, table: str) -> dict[object, dict]:
    """Every row of the table by key, columns with NULL left out, with the value's type."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        found = {}
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            d = {k: row[k] for k in row.keys() if row[k] is not None}
            found[d.pop("key")] = d
        return found
    finally:
        conn.close()


def primary_key(db: Path, table: str) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        return [name for _, name, _, _, _, pk in sorted(info, key=lambda c: c[5]) if pk]
    finally:
        conn.close()


def materialize(spark, cluster: str, **params) -> dict:
    from spark_tasks import replays

    return replays.materialize(spark, cluster, jobs.check_params("materialize", params))


EXPECTED_FIRST = {
    "alice": {"name": "Alice B.", "city": "Oslo", "value.key": "k", "value.value": 7},
    "bob": {"value": "plain text"},
    "carol": {"name": "Carol", "age": 41},
    "erin": {"value": b"\xff\xfe not utf-8"},
    "frank": {"value": "[1, 2, 3]"},
    b"\x80bin": {"value": "binary key"},
}


def test_materialize_to_sqlite_row_by_row(spark, history, tmp_path):
    db = tmp_path / "state.db"
    result = materialize(spark, history, source=TOPIC, output=f"sqlite:{db}", table="users")
    assert result["keys"] == 6
    assert result["output"] == f"sqlite:{db.resolve()}"
    assert result["table"] == "users"
    assert result["written"] == 6
    assert result["tombstones"] == 1
    found = rows(db, "users")
    assert found == EXPECTED_FIRST
    # the types as written: text for UTF-8, blobs for the rest, integers for JSON numbers
    assert isinstance(found["erin"]["value"], bytes)
    assert isinstance(found[b"\x80bin"]["value"], str)
    assert primary_key(db, "users") == ["key"]

    # later: alice changes again (fields she lacks now become NULL), bob is deleted by a
    # tombstone, carol turns into plain text, a new key arrives; a second run from the
    # offsets after the first one's upserts into the same table
    send(
        history,
        [
            (b"alice", b'{"name": "Alice C.", "nested": {"x": [1]}}'),
            (b"bob", None),
            (b"carol", b"retired"),
            (b"gina", b'{"name": "Gina", "big": 123456789012345678901234567890}'),
            (b"dave", b'{"name": "Dave is back"}'),
        ],
        start=100,
    )
    result = materialize(
        spark,
        history,
        source=TOPIC,
        output=f"sqlite:{db}",
        table="users",
        from_time=T0 + 100 * 1000,
    )
    assert result["keys"] == 4
    assert result["tombstones"] == 1
    expected = dict(EXPECTED_FIRST)
    del expected["bob"]
    expected["alice"] = {"name": "Alice C.", "nested": json.dumps({"x": [1]})}
    expected["carol"] = {"value": "retired"}
    expected["gina"] = {"name": "Gina", "big": "123456789012345678901234567890"}
    expected["dave"] = {"name": "Dave is back"}
    assert rows(db, "users") == expected

    # the same run again changes nothing: upserts, no duplicates
    materialize(
        spark,
        history,
        source=TOPIC,
        output=f"sqlite:{db}",
        table="users",
        from_time=T0 + 100 * 1000,
    )
    assert rows(db, "users") == expected


def test_materialize_keeps_parquet_and_topic_outputs(spark, history, tmp_path):
    out = tmp_path / "latest"
    result = materialize(spark, history, source=TOPIC, output=str(out), target="/state:latest")
    assert result["keys"] == 6
    latest = {bytes(r.key): r.value for r in spark.read.parquet(str(out)).collect()}
    assert set(latest) == {b"alice", b"bob", b"carol", b"erin", b"frank", b"\x80bin"}
    with Cluster.open(history) as c:
        assert sum(p.log_end_offset for p in c.topic("/state:latest").partitions) == 6


def test_bad_sqlite_outputs_are_refused_before_any_job(history, tmp_path):
    db = tmp_path / "x.db"
    cases = [
        ({"output": f"sqlite:{db}"}, "needs table"),
        ({"output": "sqlite:", "table": "t"}, "needs a PATH"),
        ({"output": str(tmp_path / "p"), "table": "t"}, "table goes with output sqlite"),
        ({"output": f"sqlite:{db}", "table": "sqlite_state"}, "reserved"),
        ({"output": f"sqlite:{db}", "table": ""}, "empty"),
        ({"output": f"sqlite:{Path(history) / 'catalog.db'}", "table": "t"}, "file of the cluster"),
        ({"output": f"sqlite:{tmp_path / 'no' / 'x.db'}", "table": "t"}, "no directory"),
    ]
    for extra, message in cases:
        with pytest.raises(InvalidArgument, match=message):
            jobs.submit(history, "materialize", source=TOPIC, **extra)
    with Cluster.open(history) as c:
        volume = c.volumes()[0].path
    with pytest.raises(InvalidArgument, match="file of the cluster"):
        jobs.submit(history, "materialize", source=TOPIC, output=f"sqlite:{volume}", table="t")
    with pytest.raises(InvalidArgument, match="writes Parquet"):
        jobs.submit(history, "window-counts", source=TOPIC, output=f"sqlite:{db}", table="t")
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE other (id INTEGER PRIMARY KEY, key TEXT)")
    conn.close()
    with pytest.raises(InvalidArgument, match="primary key"):
        jobs.submit(history, "materialize", source=TOPIC, output=f"sqlite:{db}", table="other")
    assert jobs.list(cluster=history) == []  # no job was recorded


def test_plet_replay_materialize_to_sqlite_end_to_end(history, tmp_path):
    db = tmp_path / "state.db"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "replay",
            "materialize",
            "--cluster",
            history,
            "--source",
            TOPIC,
            "--output",
            f"sqlite:{db}",
            "--table",
            "users",
            "--master",
            "local[1]",
            "--conf",
            "spark.driver.memory=512m",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            "--wait",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(540),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    job = json.loads(done.stdout)
    assert job["state"] == "succeeded"
    assert job["result"]["written"] == 6
    assert rows(db, "users") == EXPECTED_FIRST
