"""The console's pieces that need no screen: value views, seek parsing, reading pages,
the replication graph's cycles, the heat scale and the dialogs' parsers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from console import browse, values
from console.replication_graph import Edge, find_cycles
from console.screens.replay_start import collect
from console.widgets.heat_map import SCALE, shade
from engine import ConsumerRecord, Producer
from engine.errors import InvalidArgument
from engine.headers import parse_headers


def _record(key=b"k", value=b"v", headers=()):
    return ConsumerRecord("/s:t", 0, 0, 0, 0, key, value, list(headers))


def test_value_views():
    assert values.preview(b"a\nb\x01c") == "a⏎b\u2401c"  # as the web shows it
    assert values.preview(b"\xff\xfe") == "0xfffe"
    assert values.preview(None) == "null"
    assert values.preview(b"x" * 100, 10) == "x" * 9 + "…"
    assert values.render(b'{"a":[1]}', "json") == '{\n  "a": [\n    1\n  ]\n}'
    assert values.render(b"nope", "json").startswith("(not JSON")
    assert values.render(b"AB", "hex") == "00000000  41 42" + " " * 42 + "  AB"
    assert values.render(None, "text") == "null (a tombstone)"
    # the filter box: text anywhere (key, value, a header), any case
    match = browse.needle_filter("xyz").compile()
    assert match(_record(headers=[("trace", b"XYZ")]))
    assert not browse.needle_filter("nothing").compile()(_record(key=None))


def test_parse_seek():
    assert browse.parse_seek("") == browse.LATEST
    assert browse.parse_seek(" 42 ") == browse.Seek("offset", 42)
    assert browse.parse_seek("earliest") == browse.Seek("oldest") == browse.OLDEST
    moment = datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert browse.parse_seek("2024-05-01T12:00:00Z") == browse.Seek(
        "time", int(moment.timestamp() * 1000)
    )
    assert browse.parse_seek("2024-05-01T12:00:00") == browse.Seek(
        "time", int(moment.timestamp() * 1000)
    )
    with pytest.raises(InvalidArgument):
        browse.parse_seek("-3")


def test_read_page_merges_partitions_by_time_and_filters(cluster):
    cluster.create_stream("/s", ttl=0)
    cluster.create_topic("/s:t", partitions=2)
    producer = Producer(cluster, acks=1)
    for i in range(10):
        producer.send("/s:t", value=f"m{i}".encode(), partition=i % 2, timestamp_ms=1_000 + i)
    producer.flush()
    producer.close()
    page = browse.read_page(cluster, "/s:t", limit=4)
    assert [r.value for r in page.records] == [b"m9", b"m8", b"m7", b"m6"]  # newest first
    assert page.ends == {0: 5, 1: 5}
    page = browse.read_page(cluster, "/s:t", seek=browse.OLDEST, limit=3)
    assert [r.value for r in page.records] == [b"m0", b"m1", b"m2"]
    page = browse.read_page(cluster, "/s:t", seek=browse.Seek("offset", 3), partition=1)
    assert [r.value for r in page.records] == [b"m7", b"m9"]
    page = browse.read_page(cluster, "/s:t", seek=browse.Seek("time", 1_005), limit=2)
    assert [r.value for r in page.records] == [b"m5", b"m6"]
    page = browse.read_page(cluster, "/s:t", needle="M3")
    assert [r.value for r in page.records] == [b"m3"]
    page = browse.read_page(cluster, "/s:t", seek=browse.OLDEST, needle="m", max_scan=4)
    assert page.truncated and len(page.records) < 10


def test_cycles_are_found_once():
    a, b, c = ("A", "/s"), ("B", "/s"), ("C", "/s")
    edges = [
        Edge(a, b, "in_sync"),
        Edge(b, c, "pending"),
        Edge(c, a, "in_sync"),
        Edge(b, a, "paused"),
    ]
    assert sorted(find_cycles(edges)) == [[a, b], [a, b, c]]
    assert find_cycles([Edge(a, b, "in_sync")]) == []


def test_heat_scale():
    assert shade(0, 10) == 0
    assert shade(0.01, 10) == 1
    assert shade(10, 10) == len(SCALE) - 1
    assert shade(5, 10) == 4


def test_dialog_parsers():
    assert parse_headers("a=1\n b = x=y \n\n") == [("a", b"1"), ("b", b"x=y")]
    with pytest.raises(InvalidArgument):
        parse_headers("a")
    # the reset dialog's target is engine.groups.grammar's (tests/engine/groups)
    raw = {"source": "/s:t", "target": "/s:u", "from_offset": "5", "window": "1 minute"}
    assert collect("copy", raw) == {"source": "/s:t", "target": "/s:u", "from_offset": 5}
    with pytest.raises(InvalidArgument):
        collect("copy", {**raw, "to_offset": "x"})


def test_the_replay_dialogs_times_are_utc_iso_text():
    from spark_tasks import jobs

    raw = {"source": "/s:t", "target": "/s:u", "from_time": "2024-05-01T12:00:00"}
    raw["to_time"] = "2024-05-01T14:00+02:00"
    params = jobs.check_params("copy", collect("copy", raw))
    noon = int(datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp() * 1000)
    assert params["from_time"] == params["to_time"] == noon  # no zone: UTC, not local time
