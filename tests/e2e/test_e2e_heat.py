"""The heat page in a real browser: cells, legend, numbers on hover, links to topics."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from engine import Producer
from tests.e2e.conftest import shot

TOPIC = "/e2e-heat:hot"


@pytest.fixture(scope="module")
def hot(live_server):
    cluster = live_server.cluster
    cluster.create_stream("/e2e-heat", ttl=0)
    cluster.create_topic(TOPIC, partitions=2)
    producer = Producer(cluster)
    for _ in range(300):
        producer.send(TOPIC, value=b"h" * 50, partition=1)
    producer.flush()
    producer.close()
    return TOPIC


def test_heat_maps_have_a_cell_per_row_and_column_and_a_legend(admin_page, live_server, hot):
    page = admin_page
    page.goto(live_server.url + "/heat")
    volumes = page.locator('svg[data-map="volumes"]')
    partitions = page.locator('svg[data-map="partitions"]')
    expect(volumes.locator("[data-cell]")).to_have_count(4 * 30)  # 4 volumes, 5 min of 10 s
    rows = partitions.locator("[data-row]").count()
    assert 1 <= rows <= 30
    expect(partitions.locator("[data-cell]")).to_have_count(rows * 30)
    expect(page.locator('[data-legend="partitions"]')).to_be_visible()
    expect(page.get_by_role("img", name=re.compile("Colour scale from 0"))).to_have_count(2)
    shot(page, "heat")


def test_a_cell_tells_its_number_on_hover_and_a_row_opens_its_topic(admin_page, live_server, hot):
    page = admin_page
    page.goto(f"{live_server.url}/heat?topic={TOPIC}&partition=1")
    partitions = page.locator('svg[data-map="partitions"]')
    row = partitions.locator(f'[data-row="{TOPIC} [1]"]')
    expect(row).to_have_attribute("aria-current", "true")
    cells = partitions.locator("rect.heat-cell").filter(
        has=page.locator("title", has_text=f"{TOPIC} [1],")
    )
    expect(cells).to_have_count(30)
    busy = None
    for i in range(30):
        text = cells.nth(i).locator("title").text_content()
        assert re.search(r": [\d,.]+ msg/s$", text), text
        if not text.endswith(": 0.0 msg/s"):
            busy = cells.nth(i)
    assert busy is not None, "no cell shows the 300 messages"
    busy.hover()
    expect(busy.locator("title")).to_have_text(re.compile(r"\d+\.\d msg/s$"))
    shot(page, "heat-highlight")
    row.get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"/topics/e2e-heat(:|%3A)hot"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("hot")
