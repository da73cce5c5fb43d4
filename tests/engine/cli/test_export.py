"""`plet export TOPIC --sqlite PATH --table NAME`: a topic's messages into a SQLite table
(sqlite-utils), checked row by row with the sqlite3 module; re-runs upsert; bad input is a
usage error (exit 2) that writes nothing. Through click's CliRunner, and once as a real
`plet` process."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from engine import Cluster, Producer
from engine.cli import cli

TOPIC = "/apps:events"
T0 = 1_700_000_000_000


def run(*args: object) -> Result:
    env = {"PLET_CLUSTER": None, "PLET_DEFAULT_STREAM": None}
    return CliRunner().invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)


def ok(*args: object) -> Result:
    result = run(*args)
    assert result.exit_code == 0, result.output + result.stderr
    return result


def usage_error(*args: object) -> str:
    result = run(*args)
    assert result.exit_code == 2, result.output + result.stderr
    assert "Traceback" not in result.output
    return result.stderr


# (key, value, headers, partition) of each message; timestamps T0 + i seconds
MESSAGES = [
    (b"a", b'{"temp": 21.5, "unit": "C", "offset": "field named like a column"}', None, 0),
    (b"b", b"plain text", [("host", b"web1"), ("raw", b"\xff\x00")], 1),
    (None, b"\xff\xfe\x00binary", None, 0),
    (b"\x80k", None, None, 1),  # a tombstone with a binary key
    (b"a", b'{"temp": 22.0, "nested": {"x": [1, 2]}}', None, 0),
    (b"c", b"[1, 2]", None, 1),
]


@pytest.fixture
def cpath(tmp_path) -> Path:
    path = tmp_path / "cluster"
    with Cluster.open(path, name="export") as c:
        c.create_stream("/apps", ttl=0)
        c.create_topic(TOPIC, partitions=2)
        c.create_topic("/apps:other", partitions=1)
        producer = Producer(c, acks=1)
        for i, (key, value, headers, partition) in enumerate(MESSAGES):
            producer.send(
                TOPIC,
                key=key,
                value=value,
                headers=headers,
                partition=partition,
                timestamp_ms=T0 + i * 1000,
            )
        producer.send("/apps:other", value=b"x")
        producer.flush()
        producer.close()
    return path


def expected_rows() -> dict[tuple[int, int], dict]:
    """The table's rows by (partition, offset), from MESSAGES."""
    out = {}
    next_offset = {0: 0, 1: 0}
    for i, (key, value, headers, partition) in enumerate(MESSAGES):
        offset = next_offset[partition]
        next_offset[partition] += 1
        out[(partition, offset)] = {
            "topic": TOPIC,
            "partition": partition,
            "offset": offset,
            "timestamp": T0 + i * 1000,
            "timestamp_type": "create",
            "key": None if key is None else _text_or_blob(key),
            "value": None if value is None else _text_or_blob(value),
            "headers": None
            if not headers
            else json.dumps(
                [
                    {"name": "host", "value": "web1", "encoding": "utf-8"},
                    {"name": "raw", "value": "/wA=", "encoding": "base64"},
                ],
                ensure_ascii=False,
            ),
        }
    return out


def _text_or_blob(raw: bytes) -> str | bytes:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw


def table_rows(db: Path, table: str) -> dict[tuple[int, int], dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        found = {}
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            found[(row["partition"], row["offset"])] = dict(row)
        return found
    finally:
        conn.close()


def count(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    finally:
        conn.close()


def test_export_writes_every_message_row_by_row_and_reruns_upsert(cpath, tmp_path):
    db = tmp_path / "out.db"
    result = ok("export", TOPIC, "--cluster", cpath, "--sqlite", db, "--table", "events")
    assert "exported 6 messages of /apps:events" in result.stderr
    assert "rows/s" in result.stderr
    expected = expected_rows()
    found = table_rows(db, "events")
    assert found == expected
    assert isinstance(found[(0, 1)]["value"], bytes)  # not UTF-8: a blob
    assert isinstance(found[(1, 1)]["key"], bytes)
    assert found[(1, 1)]["value"] is None  # the tombstone is a row with a null value

    # a re-run writes the same rows again: replaced, not duplicated
    ok("export", TOPIC, "--cluster", cpath, "--sqlite", db, "--table", "events")
    assert table_rows(db, "events") == expected
    assert count(db, "events") == 6

    # new messages: a re-run adds them (and only them)
    with Cluster.open(cpath) as c:
        producer = Producer(c, acks=1)
        producer.send(TOPIC, key=b"d", value=b"later", partition=1, timestamp_ms=T0 + 10_000)
        producer.flush()
        producer.close()
    ok("export", TOPIC, "--cluster", cpath, "--sqlite", db, "--table", "events")
    found = table_rows(db, "events")
    assert count(db, "events") == 7
    assert found[(1, 3)]["value"] == "later"
    assert {k: v for k, v in found.items() if k != (1, 3)} == expected


def test_export_ranges_and_json_columns(cpath, tmp_path):
    db = tmp_path / "out.db"
    expected = expected_rows()
    ok("export", TOPIC, "--cluster", cpath, "--sqlite", db, "--table", "from1", "--from-offset", 1)
    assert table_rows(db, "from1") == {k: v for k, v in expected.items() if k[1] >= 1}

    # messages 1 to 4 by time (T0+1 s .. T0+4 s, both inclusive)
    ok(
        "export",
        TOPIC,
        "--cluster",
        cpath,
        "--sqlite",
        db,
        "--table",
        "timed",
        "--from-time",
        "2023-11-14T22:13:21Z",  # T0 + 1 s
        "--to-time",
        str(T0 + 4000),
    )
    times = sorted(r["timestamp"] for r in table_rows(db, "timed").values())
    assert times == [T0 + 1000, T0 + 2000, T0 + 3000, T0 + 4000]

    ok("export", TOPIC, "--cluster", cpath, "--sqlite", db, "--table", "j", "--json-columns")
    found = table_rows(db, "j")
    first, later = found[(0, 0)], found[(0, 2)]
    assert first["temp"] == 21.5
    assert first["unit"] == "C"
    assert first["value.offset"] == "field named like a column"
    assert first["offset"] == 0
    assert first["nested"] is None
    assert later["temp"] == 22.0
    assert later["nested"] == json.dumps({"x": [1, 2]})
    assert later["unit"] is None
    # the message columns are those of the plain export
    columns = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value")
    for key, row in found.items():
        assert {c: row[c] for c in columns} == {c: expected[key][c] for c in columns}
    assert found[(1, 2)]["temp"] is None  # "[1, 2]" is JSON but no object


def test_export_table_defaults_to_the_topic_name(cpath, tmp_path):
    db = tmp_path / "out.db"
    ok("export", TOPIC, "--cluster", cpath, "--sqlite", db)
    assert count(db, "events") == 6


def test_bad_input_is_a_usage_error_that_writes_nothing(cpath, tmp_path):
    db = tmp_path / "out.db"
    base = ("--cluster", cpath, "--sqlite", db, "--table", "t")
    assert "does not exist" in usage_error("export", "/apps:nope", *base)
    assert "does not exist" in usage_error("export", "/nope:t", *base)
    assert "reserved" in usage_error("export", TOPIC, "--cluster", cpath, "--sqlite", db,
                                     "--table", "sqlite_master")  # fmt: skip
    assert "empty" in usage_error("export", TOPIC, "--cluster", cpath, "--sqlite", db,
                                  "--table", " ")  # fmt: skip
    assert "no directory" in usage_error(
        "export", TOPIC, "--cluster", cpath, "--sqlite", tmp_path / "no" / "x.db"
    )
    assert "directory" in usage_error("export", TOPIC, "--cluster", cpath, "--sqlite", tmp_path)
    assert not db.exists()

    # the cluster's own files: refused, and left as they were
    catalog = cpath / "catalog.db"
    with Cluster.open(cpath) as c:
        volume = Path(c.volumes()[0].path)
    for target in (catalog, volume, cpath / "elsewhere.db"):
        before = target.read_bytes() if target.exists() else None
        assert "file of the cluster" in usage_error(
            "export", TOPIC, "--cluster", cpath, "--sqlite", target
        )
        assert (target.read_bytes() if target.exists() else None) == before

    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("not a database\n" * 100)
    assert "not a SQLite database" in usage_error(
        "export", TOPIC, "--cluster", cpath, "--sqlite", not_a_db
    )
    assert not_a_db.read_text() == "not a database\n" * 100

    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT)")
    conn.execute("INSERT INTO t (x) VALUES ('mine')")
    conn.commit()
    conn.close()
    assert "primary key" in usage_error("export", TOPIC, *base)
    assert table_rows_plain(db, "t") == [(1, "mine")]

    # one table holds one topic's messages: (partition, offset) would mix two topics
    ok("export", "/apps:other", "--cluster", cpath, "--sqlite", db, "--table", "o")
    assert "another topic" in usage_error(
        "export", TOPIC, "--cluster", cpath, "--sqlite", db, "--table", "o"
    )
    assert count(db, "o") == 1


def table_rows_plain(db: Path, table: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f'SELECT * FROM "{table}"').fetchall()
    finally:
        conn.close()


def test_plet_export_in_a_real_process(cpath, tmp_path):
    db = tmp_path / "out.db"
    plet = shutil.which("plet", path=str(Path(sys.executable).parent))
    assert plet is not None
    env = {k: v for k, v in os.environ.items() if k != "PLET_CLUSTER"}
    args = [plet, "export", TOPIC, "--cluster", str(cpath), "--sqlite", str(db), "--table", "e"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "exported 6 messages" in done.stderr
    assert table_rows(db, "e") == expected_rows()
    bad = subprocess.run(
        [*args[:-1], "sqlite_e"], capture_output=True, text=True, env=env, timeout=120
    )
    assert bad.returncode == 2
    assert "reserved" in bad.stderr
    assert "Traceback" not in bad.stderr
