"""The heat page (web/heat.py) over a cluster with a known load."""

from __future__ import annotations

import re

import pytest

from engine import Consumer, Producer, TopicPartition
from web import heatmap

TOPIC = "/load:t"


@pytest.fixture
def loaded(cluster):
    """60 messages to partition 2, 25 to partition 0, none to 1; 25 read from partition 0."""
    cluster.create_stream("/load", ttl=0)
    cluster.create_topic(TOPIC, partitions=3)
    producer = Producer(cluster)
    for _ in range(60):
        producer.send(TOPIC, value=b"x" * 100, partition=2)
    for _ in range(25):
        producer.send(TOPIC, value=b"y" * 10, partition=0)
    producer.flush()
    producer.close()
    consumer = Consumer(cluster, enable_auto_commit=False)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = 0
    while got < 25:
        got += sum(len(v) for v in consumer.poll(timeout_ms=200).values())
    consumer.close()  # flushes its read counts into the heat
    return cluster


def _get(client, query: str = "") -> str:
    answer = client.get("/heat" + query)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_data(as_text=True)


def _map(html: str, name: str) -> str:
    found = re.search(rf'<svg class="heat-map" data-map="{name}".*?</svg>', html, re.S)
    assert found is not None, f"no {name} map"
    return found.group(0)


def _rows(svg: str) -> list[str]:
    return re.findall(r'data-row="([^"]+)"', svg)


def test_cells_are_rows_times_columns_and_the_hottest_partition_comes_first(loaded, client):
    html = _get(client)
    volumes = _map(html, "volumes")
    partitions = _map(html, "partitions")
    columns = 300 // 10  # a 5 min window of 10 s buckets, one column each
    assert len(_rows(volumes)) == len(loaded.volumes()) == 4
    assert len(re.findall(r"data-cell=", volumes)) == 4 * columns
    assert _rows(partitions) == [f"{TOPIC} [2]", f"{TOPIC} [0]"]  # partition 1 had no writes
    assert len(re.findall(r"data-cell=", partitions)) == 2 * columns
    # the legend, and a number in every cell's tooltip
    assert 'data-legend="partitions"' in html and 'data-legend="volumes"' in html
    titles = re.findall(r"<title>(/load:t \[2\], [^<]*)</title>", partitions)
    assert len(titles) == columns
    assert any(not t.endswith(": 0.0 msg/s") for t in titles)
    assert 'role="img"' in partitions
    # the hottest cell has the top colour of the scale
    assert heatmap.hex_colour(heatmap.PALETTE[-1]) in partitions
    # the totals tables
    assert '<th scope="col">Volume</th>' in html and "Rank" in html


def test_read_metric_ranks_by_reads(loaded, client):
    html = _get(client, "?metric=read_messages")
    assert _rows(_map(html, "partitions")) == [f"{TOPIC} [0]"]
    html = _get(client, "?metric=write_bytes")
    assert _rows(_map(html, "partitions"))[0] == f"{TOPIC} [2]"
    assert "B/s" in html


def test_windows_merge_buckets_into_at_most_sixty_columns(loaded, client):
    for window, columns in ((300, 30), (900, 45), (3600, 60)):
        svg = _map(_get(client, f"?window={window}"), "volumes")
        assert len(re.findall(r"data-cell=", svg)) == 4 * columns, window


GARBAGE = (
    ("?metric=bogus", "metric must be one of"),
    ("?window=7", "window must be one of"),
    ("?window=abc", "window must be one of"),
    ("?topic=nope&partition=0", "topic must be a full name"),
    (f"?topic={TOPIC}&partition=-1", "partition must be a number"),
    ("?partition=1", "partition needs a topic"),
)


def test_garbage_parameters_are_a_400_with_a_message(loaded, client):
    for query, message in GARBAGE:
        answer = client.get("/heat" + query)
        assert answer.status_code == 400, query
        assert message in answer.get_data(as_text=True), query
        # an htmx refresh gets the message in the flash area instead
        answer = client.get("/heat/live" + query, headers={"HX-Request": "true"})
        assert answer.headers.get("HX-Retarget") == "#flash", query
        assert message in answer.get_data(as_text=True), query


def test_a_partition_asked_for_is_highlighted_even_when_cold(loaded, client):
    html = _get(client, f"?topic={TOPIC}&partition=2")
    svg = _map(html, "partitions")
    assert re.search(r'heat-row-highlight" data-row="/load:t \[2\]" aria-current="true"', svg)
    html = _get(client, f"?topic={TOPIC}&partition=1")
    svg = _map(html, "partitions")
    assert _rows(svg) == [f"{TOPIC} [2]", f"{TOPIC} [0]", f"{TOPIC} [1]"]
    assert len(re.findall(r"data-cell=", svg)) == 3 * 30
    assert "Clear highlight" in html


def test_rows_link_to_the_topic_page(loaded, client, app):
    html = _get(client)
    with app.test_request_context():
        from flask import url_for

        href = url_for("topics.topic", name=TOPIC[1:], partition=2)
    assert f'href="{href}"' in _map(html, "partitions")


def test_the_live_part_refreshes_with_the_same_parameters(loaded, client):
    html = _get(client, "?metric=read_bytes&window=900")
    assert re.search(
        r'hx-get="/heat/live\?metric=read_bytes&amp;window=900" hx-trigger="every 5s"', html
    )
    partial = client.get(
        "/heat/live?metric=read_bytes&window=900", headers={"HX-Request": "true"}
    ).get_data(as_text=True)
    assert "<html" not in partial and 'data-map="partitions"' in partial


def test_an_idle_cluster_shows_empty_maps(client):
    html = _get(client)
    assert len(re.findall(r"data-cell=", _map(html, "volumes"))) == 4 * 30
    assert "No partition had any Write msg/s in this window." in html
