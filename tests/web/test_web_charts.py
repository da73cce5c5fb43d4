"""The metrics history's charts in the web console (web/charts.py, templates/_chart.html)
and `GET /api/v1/metrics`: every page that has a history places a chart slot, the slot's
fragment carries the recorded points, and bad or foreign arguments are refused."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from engine import Cluster, Consumer, Producer, Replicator
from engine.clock import SYSTEM_CLOCK
from engine.ops import metrics
from tests.web.conftest import ADMIN

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

STREAM = "/m"
TOPIC = "/m:t"
POINTS = re.compile(r'data-points="([^"]*)"')


@pytest.fixture
def recorded(cluster, tmp_path, monkeypatch):
    """120 messages written and read in one minute on /m:t, a group with a lag of 30 and a
    replication link that copied the 120, recorded as the metrics history three minutes
    later (the process's clock stays there for the test)."""
    other = tmp_path / "dc2"
    Cluster.open(other, name="dc2").close()
    cluster.create_stream(STREAM)
    cluster.create_topic(TOPIC, partitions=1)
    cluster.add_replica(STREAM, other, paused=True)
    producer = Producer(cluster)
    for _ in range(120):
        producer.send(TOPIC, b"x" * 10)
    producer.flush()
    producer.close()
    reader = Consumer(cluster, TOPIC, group_id="g", auto_offset_reset="earliest")
    got = 0
    while got < 120:
        got += sum(len(r) for r in reader.poll(1000).values())
    reader.close()  # flushes the read heat
    cluster.reset_offsets("g", TOPIC, 90)
    later = SYSTEM_CLOCK.now_ms() + 3 * 60_000
    monkeypatch.setattr(SYSTEM_CLOCK, "now_ms", lambda: later)  # every cluster of the process
    cluster.record_metrics()
    cluster.resume_replica(STREAM, other)
    with Replicator(cluster) as replicator:
        assert replicator.run_once() == 120
    return cluster.replicas(STREAM)[0].target


def figure_data(body: str) -> dict:
    found = POINTS.search(body)
    assert found, body[:2000]
    return json.loads(html.unescape(found.group(1)))


def slot_urls(body: str) -> list[str]:
    return [html.unescape(u) for u in re.findall(r'class="chart-slot"[^>]*hx-get="([^"]+)"', body)]


def test_every_page_with_a_history_places_its_chart(client, recorded):
    link = metrics.replica_name(STREAM, recorded)
    pages = {
        "/": ("cluster", ""),
        "/streams/m": ("stream", STREAM),
        "/topics/m:t?tab=charts": ("topic", TOPIC),  # the topic page keeps it in a tab
        "/groups/g": ("group", "g"),
        "/streams/m/~/replicas": ("replica", link),
        "/replication": ("replica", link),
    }
    for page, (scope, name) in pages.items():
        answer = client.get(page)
        assert answer.status_code == 200, page
        urls = slot_urls(answer.get_data(as_text=True))
        assert len(urls) == 1, (page, urls)
        query = parse_qs(urlsplit(urls[0]).query, keep_blank_values=True)
        assert query["scope"] == [scope] and query.get("name", [""]) == [name], (page, query)
        # each slot's fragment is a drawn figure with the series' points
        fragment = client.get(urls[0], headers={"HX-Request": "true"})
        assert fragment.status_code == 200, (page, fragment.get_data(as_text=True)[:500])
        data = figure_data(fragment.get_data(as_text=True))
        assert data["t"] and all(len(s["values"]) == len(data["t"]) for s in data["series"])


def test_the_fragment_carries_the_recorded_points(client, recorded):
    body = client.get(
        "/charts",
        query_string={
            "scope": "topic",
            "name": TOPIC,
            "metric": ["write_messages", "read_messages"],
            "title": "Throughput",
            "id": "t1",
        },
    ).get_data(as_text=True)
    data = figure_data(body)
    assert [s["label"] for s in data["series"]] == ["Written (msg/s)", "Read (msg/s)"]
    for s in data["series"]:
        recorded_values = [v for v in s["values"] if v is not None]
        assert max(recorded_values) == 2.0  # 120 messages in one minute
        assert s["values"][-1] == 0.0  # nothing since
    assert len(data["t"]) == 60 and data["t"] == sorted(data["t"])
    assert 'id="chart-t1"' in body and "latest 0.00, peak 2.00" in body.replace(" msg/s", "")
    # the Data table lists the busy minute in text
    assert re.search(r"<td class=\"num\">2(\.00)?</td>", body)

    body = client.get("/charts?scope=group&name=g&metric=lag_messages").get_data(as_text=True)
    lag = figure_data(body)
    assert [v for v in lag["series"][0]["values"] if v is not None] == [30.0]
    # a lag is a count of messages: written as one, not as "30.00"
    assert re.search(r"latest \d+, peak 30\b", body) and "30.00" not in body

    name = metrics.replica_name(STREAM, recorded)
    link = figure_data(
        client.get(
            "/charts",
            query_string={
                "scope": "replica",
                "name": name,
                "metric": ["copied_messages", "lag_messages"],
            },
        ).get_data(as_text=True)
    )
    copied, link_lag = link["series"]
    assert max(v for v in copied["values"] if v is not None) == 2.0
    assert [v for v in link_lag["values"] if v is not None] == [120.0]  # read while paused


def test_the_window_buttons_ask_for_longer_windows(client, recorded):
    body = client.get("/charts?scope=cluster&metric=write_messages&window=7d").get_data(
        as_text=True
    )
    data = figure_data(body)
    assert len(data["t"]) == 168  # a week of hours
    assert data["t"][1] - data["t"][0] == 3600
    assert max(v for v in data["series"][0]["values"] if v is not None) == pytest.approx(
        120 / 3600, abs=1e-4
    )
    assert 'aria-pressed="true"' in body and "a point per hour" in body
    for window in ("1h", "6h", "24h"):
        assert f"window={window}" in html.unescape(body)


@pytest.mark.parametrize(
    "query, status, words",
    [
        ("scope=galaxy", 400, "scope"),
        ("scope=topic&name=/m:t&metric=lag_seconds", 400, "metric"),
        ("scope=cluster&window=forever", 400, "window"),
        ("scope=cluster&window=99999999", 400, "window"),
        ("scope=topic&name=/m:nope", 404, "nope"),
        ("scope=stream&name=/nowhere", 404, "nowhere"),
        ("scope=group&name=nobody", 404, "nobody"),
        ("scope=replica&name=/m", 400, "STREAM -> TARGET"),
        ("scope=replica&name=/m -> /elsewhere", 404, "/elsewhere"),
        ("scope=cluster&metric=write_messages&metric=read_messages&metric=read_bytes", 400, "two"),
    ],
)
def test_bad_arguments_get_a_clear_error(client, recorded, query, status, words):
    answer = client.get("/charts?" + query)
    assert answer.status_code == status, answer.get_data(as_text=True)[:500]
    assert words in html.unescape(answer.get_data(as_text=True))


def test_titles_and_ids_from_the_query_are_inert(client, recorded):
    body = client.get(
        "/charts",
        query_string={
            "scope": "topic",
            "name": TOPIC,
            "title": '<script>alert(1)</script>"><img src=x onerror=alert(2)>',
            "id": '"><svg onload=alert(3)>',
        },
    ).get_data(as_text=True)
    assert "<script>alert" not in body and "<img" not in body and "<svg onload" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert 'id="chart----svg-onload-alert-3--"' in body


def test_charts_need_a_login(app, recorded):
    anonymous = app.test_client()
    answer = anonymous.get("/charts?scope=cluster")
    assert answer.status_code in (302, 401)
    assert "data-points" not in answer.get_data(as_text=True)


def test_the_api_answers_a_series(app, cluster, recorded):
    headers = {"Authorization": f"Bearer {cluster.create_api_token(ADMIN, 'charts')}"}
    api = app.test_client()
    answer = api.get(
        "/api/v1/metrics",
        query_string={"scope": "topic", "name": TOPIC, "metric": "read_messages"},
        headers=headers,
    )
    assert answer.status_code == 200, answer.json
    body = answer.json
    assert body["scope"] == "topic" and body["name"] == TOPIC and body["unit"] == "msg/s"
    assert body["resolution_s"] == 60 and body["peak"] == 2.0 and body["latest"] == 0.0
    times = [t for t, _ in body["points"]]
    assert len(times) == 60 and times == sorted(times)
    unknown = api.get(
        "/api/v1/metrics?scope=topic&name=/m:nope&metric=read_messages", headers=headers
    )
    assert unknown.status_code == 404
    bad = api.get("/api/v1/metrics?scope=topic&name=/m:t&metric=lag_seconds", headers=headers)
    assert bad.status_code == 400 and "metric" in bad.json["message"]
    assert api.get("/api/v1/metrics").status_code == 401
