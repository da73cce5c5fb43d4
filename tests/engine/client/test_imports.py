"""Import (engine.client.imports): a download of a topic imports into another as it was
(keys, values, headers, timestamps, partitions), every bad line is listed and nothing is
written, the dry run says what would be written, and the produce permission decides."""

from __future__ import annotations

import json

import pytest

from engine import Producer, errors
from engine.client import browse, imports
from tests.readback import every_message

SOURCE = "/imp:source"
TARGET = "/imp:target"


@pytest.fixture
def source(cluster):
    """/imp:source, 3 partitions of awkward messages: binary and empty keys and values, a
    tombstone, headers with null, binary and formula-like values, text that a spreadsheet
    would run, U+2028 inside a value, and old timestamps."""
    cluster.create_stream("/imp", ttl=0, default_partitions=3)
    cluster.create_topic(SOURCE)
    cluster.create_topic(TARGET)
    messages = [
        {"value": b"plain", "key": b"k1", "partition": 0},
        {"value": b"\xff\xfe\x00bin", "key": b"\x80", "partition": 1},
        {"value": None, "key": b"gone", "partition": 1},  # a tombstone
        {"value": b"", "key": b"", "partition": 2},  # empty, not null
        {"value": b"=SUM(A1)", "key": b"+1", "partition": 2},
        {"value": b"'=quoted", "key": None, "partition": 0},
        {"value": "line\u2028sep\nnew".encode(), "partition": 0},
        {
            "value": b"with headers",
            "partition": 2,
            "headers": [("unit", b"C"), ("none", None), ("raw", b"\xff"), ("f", b"-1")],
        },
    ]
    producer = Producer(cluster, acks=1)
    for i, m in enumerate(messages):
        producer.send(SOURCE, timestamp_ms=1_600_000_000_000 + i * 7, **m)
    producer.flush()
    producer.close()
    return SOURCE


def _export(cluster, fmt: str, formulas: bool = False) -> bytes:
    query = browse.Query(SOURCE, seek=browse.OLDEST)
    records = browse.export(cluster, query, 1000)
    lines = (
        browse.csv_lines(records, formulas=formulas)
        if fmt == "csv"
        else browse.jsonl_lines(records)
    )
    return b"".join(lines)


@pytest.mark.parametrize(("fmt", "formulas"), [("jsonl", False), ("csv", False), ("csv", True)])
def test_an_export_imports_into_another_topic_as_it_was(cluster, source, fmt, formulas):
    data = _export(cluster, fmt, formulas)
    parsed = imports.parse(data, fmt, formulas=formulas)
    assert parsed.errors == [] and len(parsed.records) == 8
    checked = imports.plan(cluster, TARGET, parsed)
    assert checked.ok and checked.by_partition == {0: 3, 1: 2, 2: 3}
    assert checked.describe() == (
        f"8 messages into {TARGET}: 3 to partition 0, 2 to partition 1, 3 to partition 2."
    )
    assert (checked.first_ms, checked.last_ms) == (1_600_000_000_000, 1_600_000_000_049)
    assert every_message(cluster, TARGET) == []  # a plan writes nothing
    seen = []
    assert imports.write(cluster, checked, progress=seen.append) == 8
    assert seen == [8]
    assert every_message(cluster, TARGET) == every_message(cluster, SOURCE)


def test_every_bad_line_is_listed_and_nothing_is_written(cluster, source):
    good = json.dumps({"value": "fine", "partition": 0})
    lines = [
        good,
        "{not json",
        "[1, 2]",
        json.dumps({"key": "no value"}),
        json.dumps({"value": "x", "value_encoding": "base64"}),
        json.dumps({"value": "x", "value_encoding": "latin-1"}),
        json.dumps({"value": "x", "headers": [{"name": "h", "value": "v", "encoding": "hex"}]}),
        json.dumps({"value": "x", "partition": -1}),
        json.dumps({"value": "x", "timestamp": "soon"}),
        json.dumps({"value": "x", "time": "yesterday"}),
        json.dumps({"value": "x", "colour": "red"}),
        '{"value": ' + "[" * 100_000 + "]" * 100_000 + "}",  # deeper than json can recurse
        "",
        json.dumps({"value": "x", "partition": 7}),  # the topic has 3: the plan refuses it
        good,
    ]
    parsed = imports.parse("\n".join(lines).encode(), "jsonl")
    checked = imports.plan(cluster, TARGET, parsed)
    assert not checked.ok
    expected = [
        "line 2: not JSON (Expecting property name enclosed in double quotes at column 2)",
        "line 3: a line is a JSON object (a record), not a list",
        "line 4: no value (null for a tombstone)",
        "line 5: value is not valid base64",
        "line 6: value's encoding must be 'utf-8', 'base64' or null, not 'latin-1'",
        "line 7: headers[0].value's encoding must be 'utf-8', 'base64' or null, not 'hex'",
        "line 8: partition must be a whole number from 0 to 2,147,483,647, not -1",
        "line 9: timestamp must be a whole number from 0 to 253,402,300,799,999, not 'soon'",
        "line 10: time: 'yesterday' is not a time",
        "line 11: unknown field colour (a record has topic, partition, offset,",
        "line 12: JSON nested too deeply to read",
        f"line 14: partition 7: {TARGET} has partitions 0 to 2",
    ]
    assert len(checked.errors) == len(expected)
    for error, start in zip(checked.errors, expected, strict=True):
        assert str(error).startswith(start), (str(error), start)
    assert checked.describe() == "Nothing written: 12 lines refused."
    with pytest.raises(errors.InvalidArgument):
        imports.write(cluster, checked)
    assert every_message(cluster, TARGET) == []


def test_csv_rows_and_header_are_checked_by_line(cluster, source):
    data = b'key,value,partition\r\na,1,0\r\nb,2\r\n"c\nd",3,x\r\ne,4,1\r\n'
    parsed = imports.parse(data, "csv")
    assert [str(e) for e in parsed.errors] == [
        "line 3: 2 cells, the header row has 3",
        "line 4: partition must be a whole number from 0 to 2,147,483,647, not 'x'",
    ]
    deep = b"value,headers\r\nv," + b"[" * 100_000 + b"\r\n"
    assert [str(e) for e in imports.plan(cluster, TARGET, imports.parse(deep, "csv")).errors] == [
        "line 2: headers is JSON nested too deeply to read"
    ]
    bad = imports.parse(b"offset,colour\r\n1,red\r\n", "csv")
    assert bad.error_count == 1 and "header row" in str(bad.errors[0])
    assert (
        str(imports.parse(b"\xff\xfe", "jsonl").errors[0]) == "line 1: the file is not UTF-8 text"
    )
    assert str(imports.parse(b"\n\n", "jsonl").errors[0]) == "the file holds no message"


def test_without_the_files_partitions_the_producer_chooses(cluster, source):
    lines = [json.dumps({"value": f"v{i}", "key": f"k{i}", "partition": 9}) for i in range(6)]
    parsed = imports.parse("\n".join(lines).encode(), "jsonl")
    checked = imports.plan(cluster, TARGET, parsed, keep_partitions=False)
    assert checked.ok and checked.by_partition == {None: 6}
    assert "Messages without a timestamp get the time they are written." in checked.notes
    imports.write(cluster, checked)
    assert len(every_message(cluster, TARGET)) == 6


def test_the_produce_permission_decides(cluster, source):
    from engine.auth.principal import Principal

    cluster.add_user("bob", "bob-password-1")
    cluster.edit_stream("/imp", produce_perm="u:nobody")
    bob = cluster.as_principal(Principal("bob", ("bob",)))
    parsed = imports.parse(b'{"value": "x"}', "jsonl")
    with pytest.raises(errors.AccessDenied):
        imports.plan(bob, TARGET, parsed)


def test_a_job_writes_in_the_background_with_progress(cluster, source, monkeypatch):
    monkeypatch.setattr(imports, "CHUNK", 10)
    lines = [json.dumps({"value": f"v{i}", "partition": i % 3}) for i in range(45)]
    checked = imports.plan(cluster, TARGET, imports.parse("\n".join(lines).encode(), "jsonl"))
    jobs = imports.ImportJobs()
    job = jobs.start("alice", cluster, checked)
    assert jobs.get("alice", job.id) is job and jobs.get("bob", job.id) is None
    assert job.wait(30)
    assert (job.state, job.written, job.total, job.percent) == ("done", 45, 45, 100)
    assert job.describe().startswith(f"Wrote 45 of 45 messages (100%) into {TARGET} in ")
    assert [r[4] for r in every_message(cluster, TARGET) if r[0] == 1][:3] == [b"v1", b"v4", b"v7"]


def test_a_neutralized_csv_cell_comes_back_exactly():
    cells = ["=a", "'=a", "''=a", "'hello", "plain", "-1", "'", "", "\t", "'\r=1", "a=b"]
    shown = [browse.neutralize(c) for c in cells]
    assert shown[:4] == ["'=a", "''=a", "'''=a", "'hello"]
    assert not any(c.startswith(browse.FORMULA_STARTS) for c in shown)
    assert [browse.unneutralize(c) for c in shown] == cells
