"""A JSON-path search over 100,000 messages in a real browser: typed in the message
browser's query box, it runs to the end with its progress shown and matches appearing;
a second run is cancelled midway."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from playwright.sync_api import expect

from engine import Producer
from tests.e2e.conftest import shot
from tests.timing import scaled
from web import search_messages

COUNT = 100_000


@pytest.fixture(scope="module")
def big_topic(live_server):
    """100,000 JSON messages {"user": {"id": i}} in 4 partitions."""
    cluster = live_server.cluster
    stream = f"/e2e-search/{uuid.uuid4().hex[:8]}"
    cluster.create_stream(stream, ttl=0)
    name = f"{stream}:readings"
    cluster.create_topic(name, partitions=4)
    with Producer(cluster, acks=1, linger_ms=50) as producer:
        for i in range(COUNT):
            producer.send(
                name,
                key=f"k{i}".encode(),
                value=json.dumps({"user": {"id": i}, "temp": i % 40}).encode(),
                headers=[("unit", b"C" if i % 2 == 0 else b"F")],
            )
    return name


def _scanned(text: str) -> int:
    return int(re.search(r"Scanned ([\d,]+) of", text).group(1).replace(",", ""))


def test_a_json_path_search_runs_to_the_end_with_progress(
    admin_page, live_server, big_topic, monkeypatch
):
    # 40,000 messages a second: the search takes a few seconds, so progress shows midway
    monkeypatch.setattr(search_messages, "MAX_RATE", 40_000)
    page = admin_page
    page.goto(live_server.url + "/topics/" + big_topic[1:])
    page.get_by_label("Query", exact=True).fill(
        'value.user.id == `4242` || (value.user.id > 99990 && headers.unit == "C")'
    )
    page.get_by_role("button", name="Search to the end").click()
    progress = page.locator("#search-progress")
    expect(progress).to_have_attribute("data-state", "running")
    # progress moves: some but not all of the messages scanned, shown while running
    expect(page.locator("#search-summary")).to_have_text(
        re.compile(r"Scanned [1-9][\d,]* of 100,000 offsets")
    )
    midway = _scanned(page.locator("#search-summary").inner_text())
    assert 0 < midway
    expect(progress).to_have_attribute("data-state", "done", timeout=int(scaled(60_000)))
    expect(page.locator("#search-summary")).to_contain_text(
        "Scanned 100,000 of 100,000 offsets (100%), 5 matches"
    )
    expect(page.locator("#search-summary")).to_contain_text("Reached the end.")
    rows = page.locator("#search-rows tr")
    expect(rows).to_have_count(5)
    keys = sorted(page.locator("#search-rows td.msg-key").all_inner_texts())
    assert keys == ["k4242", "k99992", "k99994", "k99996", "k99998"]
    # the URL is the search: reloading it runs it again
    assert "query=" in page.url and "/search" in page.url
    shot(page, "message-search-done")
    page.reload()
    expect(page.get_by_label("Query", exact=True)).to_have_value(re.compile("4242"))
    expect(progress).to_have_attribute("data-state", "done", timeout=int(scaled(60_000)))
    expect(rows).to_have_count(5)


def test_a_search_can_be_cancelled_midway(admin_page, live_server, big_topic, monkeypatch):
    # 5,000 messages a second: 20 s to the end, cancelled long before
    monkeypatch.setattr(search_messages, "MAX_RATE", 5_000)
    page = admin_page
    page.goto(live_server.url + "/topics/" + big_topic[1:] + "/search")
    page.get_by_label("Query", exact=True).fill("value.temp == `7`")
    page.get_by_role("button", name="Search").click()
    summary = page.locator("#search-summary")
    expect(summary).to_have_text(re.compile(r"Scanned [1-9][\d,]* of 100,000 offsets"))
    expect(page.locator("#search-rows tr").first).to_be_visible()
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#search-progress")).to_have_attribute("data-state", "cancelled")
    expect(summary).to_contain_text("Cancelled.")
    assert _scanned(summary.inner_text()) < COUNT
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    shot(page, "message-search-cancelled")


def test_a_query_that_does_not_parse_is_shown_by_its_field(admin_page, live_server, big_topic):
    page = admin_page
    page.goto(live_server.url + "/topics/" + big_topic[1:] + "/search")
    page.get_by_label("Query", exact=True).fill("value.user.id ==")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#search-query-error")).to_contain_text("ends too early")
    expect(page.get_by_label("Query", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#search-progress")).to_have_count(0)
