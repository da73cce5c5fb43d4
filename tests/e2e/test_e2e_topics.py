"""The topic page in a real browser: partitions, seek, filter, formats, live tail without
reload, downloads, the produce form, and hostile message content that stays text."""

from __future__ import annotations

import csv
import io
import json
import re
import uuid

import pytest
from playwright.sync_api import expect

from engine import Producer
from tests.e2e.conftest import htmx_settled, open_produce, shot
from tests.readback import every_message

SENSORS = "/topics/apps/sensors:car-17"


def _unique_topic(cluster, partitions: int = 1) -> str:
    """A fresh stream and topic of this test's own (the server is shared)."""
    stream = f"/e2e-topics/{uuid.uuid4().hex[:8]}"
    cluster.create_stream(stream, ttl=0)
    name = f"{stream}:t"
    cluster.create_topic(name, partitions=partitions)
    return name


def _produce(cluster, name: str, *messages: dict) -> None:
    producer = Producer(cluster, acks=1)
    try:
        for message in messages:
            producer.send(name, **message)
        producer.flush()
    finally:
        producer.close()


def _rows(page):
    return page.locator("#message-rows tr")


def _shot(page, name: str) -> None:
    """A screenshot once htmx has settled (its busy indicator is hidden again)."""
    expect(page.locator("#browse-busy")).to_have_css("opacity", "0")
    shot(page, name)


@pytest.fixture
def no_dialogs(admin_page):
    """Fail the test if anything on the page opens an alert, confirm or prompt."""
    opened: list[str] = []

    def on_dialog(dialog):
        opened.append(dialog.message)
        dialog.dismiss()

    admin_page.on("dialog", on_dialog)
    yield opened
    assert opened == [], f"a dialog opened: {opened}"


def test_topic_page_opens_on_its_messages_and_tabs_are_links(admin_page, live_server):
    page = admin_page
    page.goto(live_server.url + SENSORS)
    expect(page.get_by_role("heading", level=1)).to_have_text("Topic /apps/sensors:car-17")
    tabs = page.get_by_role("tablist")
    expect(tabs.get_by_role("tab")).to_have_text(
        ["Messages", "Partitions", "Consumers", "Configs", "Schema", "Charts"]
    )
    expect(tabs.get_by_role("tab", name="Messages")).to_have_attribute("aria-selected", "true")
    expect(_rows(page)).to_have_count(50)  # a page of the newest, first thing on the page
    # on screen as the page opens, with rows to read: no scrolling to them
    assert page.locator("#message-rows").bounding_box()["y"] < page.viewport_size["height"] - 100
    _shot(page, "topic")
    # the produce form is a click away
    expect(page.get_by_role("region", name="Produce a message")).to_be_hidden()
    expect(open_produce(page)).to_be_visible()
    # a tab loads in place (htmx) and its URL is pushed, so Back and reload keep it
    page.evaluate("window.__notReloaded = true")
    tabs.get_by_role("tab", name="Partitions").click()
    expect(page).to_have_url(re.compile(r"\?tab=partitions$"))
    partitions = page.get_by_role("region", name="Partitions")
    expect(partitions.locator("tbody > tr")).to_have_count(3)
    expect(partitions.get_by_role("list", name="Partitionlets of partition 0")).to_contain_text(
        "volume"
    )
    tabs = page.get_by_role("tablist")
    expect(tabs.get_by_role("tab", name="Partitions")).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("tabpanel")).to_have_attribute("aria-labelledby", "tab-partitions")
    assert page.evaluate("window.__notReloaded") is True
    shot(page, "topic-partitions")
    # the keyboard: arrows move between the tabs, Enter opens one
    tabs.get_by_role("tab", name="Partitions").focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    expect(tabs.get_by_role("tab", name="Configs")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"\?tab=configs$"))
    expect(page.get_by_role("region", name="Policies")).to_be_visible()
    page.go_back()
    expect(page).to_have_url(re.compile(r"\?tab=partitions$"))
    expect(page.get_by_role("region", name="Partitions")).to_be_visible()
    page.reload()
    expect(page.get_by_role("region", name="Partitions")).to_be_visible()
    page.get_by_role("tab", name="Messages").click()
    expect(_rows(page)).to_have_count(50)


def test_seek_by_offset_shows_that_offset_first(admin_page, live_server):
    page = admin_page
    page.goto(live_server.url + SENSORS)
    page.evaluate("window.__notReloaded = true")
    form = page.get_by_role("search", name="Find messages")
    form.get_by_label("Partition").select_option("1")
    form.get_by_label("or at offset").fill("5")
    form.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"offset=5"))
    first = _rows(page).first
    expect(first).to_have_attribute("data-partition", "1")
    expect(first).to_have_attribute("data-offset", "5")
    assert page.evaluate("window.__notReloaded") is True
    _shot(page, "topic-seek-offset")
    # a bad offset is shown next to its field, and the page stays
    form.get_by_label("or at offset").fill("-1")
    form.get_by_role("button", name="Show").click()
    expect(page.locator("#browse-offset-error")).to_contain_text("whole number")
    expect(form.get_by_label("or at offset")).to_have_attribute("aria-invalid", "true")


def test_filter_finds_a_known_key(admin_page, live_server):
    page = admin_page
    page.goto(live_server.url + SENSORS)
    form = page.get_by_role("search", name="Find messages")
    form.get_by_label("Key contains").fill("FUEL-LEVEL")
    form.get_by_label("Ignore case").check()
    form.get_by_role("button", name="Show").click()
    # the demo writes 20 fuel-level readings for car 17
    expect(page.locator("#messages-more")).to_contain_text("20 matches")
    keys = page.locator("#message-rows td.msg-key").all_inner_texts()
    assert len(keys) == 20 and set(keys) == {"fuel-level"}
    _shot(page, "topic-filter")


def test_format_switch_shows_hex_and_json(admin_page, live_server):
    page = admin_page
    page.goto(live_server.url + "/topics/apps/clicks:web")
    form = page.get_by_role("search", name="Find messages")
    form.get_by_label("Show as").select_option("json")
    expect(page.locator("#message-rows pre.value-json").first).to_contain_text('"user":')
    form.get_by_label("Show as").select_option("hex")
    expect(page).to_have_url(re.compile(r"format=hex"))
    hexed = page.locator("#message-rows td.msg-value pre.value-hex").first
    expect(hexed).to_contain_text("00000000  7b 22 75 73 65 72 22")  # {"user"
    _shot(page, "topic-hex")


def test_a_produced_message_appears_in_the_live_tail_without_reload(admin_page, live_server):
    page = admin_page
    name = _unique_topic(live_server.cluster, partitions=2)
    _produce(live_server.cluster, name, {"value": b"before", "key": b"k"})
    page.goto(live_server.url + "/topics/" + name[1:])
    expect(_rows(page)).to_have_count(1)
    page.evaluate("window.__notReloaded = true")
    page.get_by_label("Follow (live tail)").check()
    expect(page.locator("#tail")).to_contain_text("Following")
    _produce(live_server.cluster, name, {"value": b"tail-one", "key": b"k1", "partition": 1})
    expect(page.locator("#message-rows")).to_contain_text("tail-one")
    _produce(live_server.cluster, name, {"value": b"tail-two", "key": b"k2", "partition": 0})
    expect(_rows(page).first).to_contain_text("tail-two")  # newest on top
    expect(_rows(page)).to_have_count(3)
    facts = page.locator("#topic-facts")  # the counts above the tabs move too
    expect(facts.locator("dt:text-is('Messages') + dd")).to_have_text("3")
    assert page.evaluate("window.__notReloaded") is True
    _shot(page, "topic-live-tail")


def test_produce_form_writes_and_the_tail_shows_it(admin_page, live_server):
    page = admin_page
    name = _unique_topic(live_server.cluster)
    page.goto(live_server.url + "/topics/" + name[1:] + "?follow=1")
    produce = open_produce(page)
    produce.get_by_label("Key").fill("order-1")
    produce.get_by_label("Message value").fill('{"total": 12.5}')
    produce.get_by_label("Headers").fill("source=e2e\nsource: e2e")
    produce.get_by_role("button", name="Produce").click()
    expect(produce.locator("#produce-headers-error")).to_contain_text("line 2")
    expect(produce.locator("#produce-headers-error")).to_contain_text("write it as 'source=e2e'")
    produce.get_by_label("Headers").fill("source=e2e")
    produce.get_by_role("button", name="Produce").click()
    expect(produce.get_by_role("status")).to_contain_text("Written to partition 0 at offset 0")
    expect(page.locator("#message-rows")).to_contain_text('{"total": 12.5}')
    expect(page.locator("#message-rows")).to_contain_text("source")
    _shot(page, "topic-produce")


def test_download_returns_the_selection_as_a_file(admin_page, live_server, tmp_path):
    page = admin_page
    page.goto(live_server.url + SENSORS + "?partition=2&start=oldest")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download JSON lines").click()
    download = info.value
    assert download.suggested_filename == "apps_sensors_car-17_p2.jsonl"
    path = tmp_path / "messages.jsonl"
    download.save_as(path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows and {r["partition"] for r in rows} == {2}
    assert [r["offset"] for r in rows] == sorted(r["offset"] for r in rows)
    assert {r["key"] for r in rows} == {"speed"}
    with page.expect_download() as info:
        page.get_by_role("button", name="Download CSV").click()
    assert info.value.suggested_filename.endswith(".csv")


def test_a_filtered_download_contains_exactly_the_matches(admin_page, live_server, tmp_path):
    """The view starts at newest with a header filter; the matches are older than the
    last `At most` offsets (a download once filtered only those, and came back empty)."""
    page = admin_page
    name = _unique_topic(live_server.cluster)
    host = [b"api-2" if i in (3, 7, 11) else b"api-1" for i in range(60)]
    _produce(
        live_server.cluster,
        name,
        *({"value": b"event %d" % i, "headers": [("host", h)]} for i, h in enumerate(host)),
    )
    page.goto(live_server.url + "/topics/" + name[1:] + "?header=host%3A+api-2")
    expect(_rows(page)).to_have_count(3)
    form = page.get_by_role("form", name="Download messages")
    form.get_by_label("At most").fill("10")
    for button, suffix in (("Download JSON lines", "jsonl"), ("Download CSV", "csv")):
        with page.expect_download() as info:
            form.get_by_role("button", name=button).click()
        path = tmp_path / f"matches.{suffix}"
        info.value.save_as(path)
        if suffix == "jsonl":
            rows = [json.loads(line) for line in path.read_text().splitlines()]
        else:
            rows = list(csv.DictReader(io.StringIO(path.read_text())))
        assert [int(r["offset"]) for r in rows] == [3, 7, 11]
        assert {r["value"] for r in rows} == {"event 3", "event 7", "event 11"}


def test_hostile_content_shows_as_text_and_runs_nothing(admin_page, live_server, no_dialogs):
    page = admin_page
    name = _unique_topic(live_server.cluster)
    script = "<script>alert(1)</script>"
    img = "<img src=x onerror=alert(1)>"
    _produce(
        live_server.cluster,
        name,
        {"key": script.encode(), "value": img.encode(), "headers": [(img, script.encode())]},
        {"key": b'"><svg onload=alert(2)>', "value": b"\x1b[31m\x00\xff"},
    )
    page.goto(live_server.url + "/topics/" + name[1:])
    rows = page.locator("#message-rows")
    expect(rows.get_by_text(script, exact=True).first).to_be_visible()
    expect(rows.get_by_text(img, exact=True).first).to_be_visible()
    expect(rows).to_contain_text('"><svg onload=alert(2)>')
    assert rows.locator("img, script, svg").count() == 0
    # the same through the produce form, and the live tail
    page.get_by_label("Follow (live tail)").check()
    expect(page.locator("#tail")).to_be_visible()
    produce = open_produce(page)
    produce.get_by_label("Message value").fill(
        "<script>alert(3)</script><img src=y onerror=alert(4)>"
    )
    produce.get_by_label("Headers").fill("x-evil=<img src=z onerror=alert(5)>")
    produce.get_by_role("button", name="Produce").click()
    expect(rows).to_contain_text("<img src=y onerror=alert(4)>")
    for fmt in ("json", "hex", "text"):
        htmx_settled(page)  # the last answer's select must be live before it is changed
        page.get_by_role("search", name="Find messages").get_by_label("Show as").select_option(fmt)
        expect(page).to_have_url(re.compile(f"format={fmt}"))
        expect(_rows(page)).to_have_count(3)
    assert rows.locator("img, script, svg").count() == 0
    _shot(page, "topic-hostile")


def test_topic_policy_overrides_round_trip_and_bad_values_show_inline(admin_page, live_server):
    page = admin_page
    name = _unique_topic(live_server.cluster)  # its stream: ttl 0
    page.goto(live_server.url + "/topics/" + name[1:] + "?tab=configs")
    policies = page.get_by_role("region", name="Policies")
    ttl_row = policies.locator('tr[data-policy="ttl"]')
    expect(ttl_row.locator("td.source")).to_have_text("stream")

    policies.get_by_role("checkbox", name="Override TTL (seconds)").check()
    policies.get_by_label("TTL (seconds)", exact=True).fill("3600")
    policies.get_by_role("button", name="Save topic policies").click()
    expect(policies.get_by_role("status")).to_have_text("Saved the topic's policies.")
    expect(ttl_row.locator("td.effective")).to_have_text("1 h")
    expect(ttl_row.locator("td.source")).to_have_text("topic")
    page.reload()
    expect(policies.get_by_role("checkbox", name="Override TTL (seconds)")).to_be_checked()
    assert live_server.cluster.topic(name).overrides == {"ttl": 3600}

    policies.get_by_label("TTL (seconds)", exact=True).fill("-5")
    policies.get_by_role("button", name="Save topic policies").click()
    expect(policies.locator("#topic-policy-ttl-error")).to_contain_text("must be at least 0")
    expect(policies.get_by_role("alert")).to_contain_text("nothing was changed")
    shot(page, "topic-policy-errors")
    assert live_server.cluster.topic(name).overrides == {"ttl": 3600}

    policies.get_by_role("checkbox", name="Override TTL (seconds)").uncheck()
    policies.get_by_role("button", name="Save topic policies").click()
    expect(policies.get_by_role("status")).to_have_text("Saved the topic's policies.")
    expect(ttl_row.locator("td.source")).to_have_text("stream")
    assert live_server.cluster.topic(name).overrides == {}


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_an_import_of_an_export_round_trips(admin_page, live_server, tmp_path, kind):
    page = admin_page
    cluster = live_server.cluster
    source = _unique_topic(cluster, partitions=2)
    target = source[: -len(":t")] + ":copy"
    cluster.create_topic(target, partitions=2)
    _produce(
        cluster,
        source,
        *(
            {
                "value": b"=formula %d" % i if i % 4 == 0 else b"\xff\x00 %d" % i,
                "key": None if i == 5 else b"key-%d" % i,
                "partition": i % 2,
                "headers": [("n", b"%d" % i), ("empty", None)],
                "timestamp_ms": 1_700_000_000_000 + 1000 * i,
            }
            for i in range(30)
        ),
    )
    page.goto(live_server.url + "/topics/" + source[1:] + "?start=oldest")
    button = "Download JSON lines" if kind == "jsonl" else "Download CSV"
    with page.expect_download() as info:
        page.get_by_role("form", name="Download messages").get_by_role(
            "button", name=button
        ).click()
    path = tmp_path / f"export.{kind}"
    info.value.save_as(path)

    page.goto(live_server.url + "/topics/" + target[1:])
    page.get_by_text("Import messages", exact=True).click()
    form = page.get_by_role("region", name="Import messages")
    form.get_by_label("File").set_input_files(path)
    form.get_by_role("button", name="Dry run").click()
    result = page.locator("#import-result")
    expect(result).to_contain_text(
        f"Dry run: 30 messages into {target}: 15 to partition 0, 15 to partition 1."
    )
    expect(
        result.get_by_role("table", name="Messages to import").locator("tbody tr")
    ).to_have_count(20)
    assert every_message(cluster, target) == []
    shot(page, f"topic-import-dry-run-{kind}")
    form.get_by_role("button", name="Import", exact=True).click()
    expect(result).to_contain_text(f"Wrote 30 of 30 messages (100%) into {target}")
    shot(page, f"topic-import-done-{kind}")
    assert every_message(cluster, target) == every_message(cluster, source)
