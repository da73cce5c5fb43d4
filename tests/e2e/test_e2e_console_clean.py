"""The browser console stays clean: no Content-Security-Policy violation and no failed
request while a message is produced through a topic page's form and while a group's offsets
are reset from its page (both htmx swaps), and the console's icon loads (no 404 for
/favicon.ico)."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from engine import Consumer, OffsetAndMetadata, Producer, TopicPartition
from tests.e2e.conftest import PAGE_TIMEOUT_MS, log_in, open_produce, shot
from tests.e2e.test_e2e_topics import _unique_topic

# securitypolicyviolation events, reported through the console so one listener sees all
_REPORT_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective);
  console.error(`Content Security Policy violation: ${e.violatedDirective} ` +
                `blocked ${e.blockedURI} at ${e.sourceFile}:${e.lineNumber} ${e.sample}`);
});
"""


def _seed_group(cluster) -> str:
    """A topic of 2 x 10 messages of this test's own and a group, with no live member,
    that read 3 of each (the server is shared: names of its own)."""
    topic = _unique_topic(cluster, partitions=2)
    producer = Producer(cluster)
    for partition in (0, 1):
        for i in range(10):
            producer.send(topic, value=b"%d" % i, partition=partition)
    producer.flush()
    producer.close()
    group = f"e2e-clean-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(cluster, group_id=group, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    consumer.assign(tps)
    consumer.commit({tp: OffsetAndMetadata(3) for tp in tps})
    consumer.close()
    return group


def _watch(page) -> dict[str, list[str]]:
    """What a user would see in the browser's console: CSP refusals (Chromium's own
    messages and the securitypolicyviolation events), other errors, failed responses."""
    seen: dict[str, list[str]] = {"csp": [], "errors": [], "failed": []}

    def on_console(msg) -> None:
        if "Content Security Policy" in msg.text:
            seen["csp"].append(msg.text)
        elif msg.type == "error":
            seen["errors"].append(f"{msg.text} ({msg.location.get('url')})")

    page.add_init_script(_REPORT_VIOLATIONS)
    page.on("console", on_console)
    page.on("pageerror", lambda exc: seen["errors"].append(str(exc)))
    page.on(
        "response",
        lambda r: seen["failed"].append(f"{r.status} {r.url}") if r.status >= 400 else None,
    )
    return seen


@pytest.fixture
def watched(page, live_server):
    """A page watched from before its first request, then logged in as the admin."""
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    seen = _watch(page)
    log_in(page, live_server)
    return page, seen


def test_the_watch_sees_a_csp_refusal(watched):
    """The listener works: an inline style attribute is refused and reported."""
    page, seen = watched
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<p style=\"color:red\">x</p>')")
    page.wait_for_function("window.__cspViolations.length > 0")
    assert any("style-src" in text for text in seen["csp"]), seen


def test_produce_form_swap_violates_no_csp(watched, live_server):
    page, seen = watched
    name = _unique_topic(live_server.cluster)
    page.goto(live_server.url + "/topics/" + name[1:] + "?follow=1")
    produce = open_produce(page)
    produce.get_by_label("Message value").fill("first")
    produce.get_by_label("Headers").fill("not a header")
    produce.get_by_role("button", name="Produce").click()
    expect(produce.locator("#produce-headers-error")).to_contain_text("line 1")
    produce.get_by_label("Headers").fill("source=e2e")
    produce.get_by_role("button", name="Produce").click()
    expect(produce.get_by_role("status")).to_contain_text("Written to partition 0 at offset 0")
    expect(page.locator("#message-rows")).to_contain_text("first")  # the live tail swapped too
    shot(page, "console-clean-produce")
    assert seen == {"csp": [], "errors": [], "failed": []}


def test_offset_reset_swap_violates_no_csp(watched, live_server):
    page, seen = watched
    group = _seed_group(live_server.cluster)
    page.goto(f"{live_server.url}/groups/{group}")
    form = page.get_by_role("region", name="Reset offsets")
    summary = page.get_by_role("region", name="Summary")
    form.get_by_label("Reset to").select_option("offset")
    form.get_by_label("Offset").fill("lots")
    page.once("dialog", lambda dialog: dialog.accept())
    form.get_by_role("button", name="Reset offsets").click()
    expect(form).to_contain_text("An offset is a whole number")
    form.get_by_label("Offset").fill("8")
    page.once("dialog", lambda dialog: dialog.accept())
    form.get_by_role("button", name="Reset offsets").click()
    expect(form.get_by_role("status")).to_contain_text("Offsets reset")
    expect(summary.get_by_test_id("group-lag")).to_have_text("4")  # the live part reloaded
    shot(page, "console-clean-reset")
    assert seen == {"csp": [], "errors": [], "failed": []}


def test_the_icon_loads_and_favicon_ico_answers(watched, live_server):
    page, seen = watched
    link = page.locator('head link[rel="icon"]')
    expect(link).to_have_count(1)
    href = link.get_attribute("href")
    assert href
    icon = page.request.get(live_server.url + href)
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/")
    ico = page.request.get(live_server.url + "/favicon.ico")
    assert ico.status == 200 and ico.headers["content-type"].startswith("image/")
    assert ico.url.endswith(href)
    # the page's own icon request (whichever URL Chromium asked) failed nowhere
    assert seen == {"csp": [], "errors": [], "failed": []}


def test_topic_tabs_and_an_import_violate_no_csp(watched, live_server, tmp_path):
    page, seen = watched
    name = _unique_topic(live_server.cluster)
    path = tmp_path / "two.jsonl"
    path.write_text('{"value": "one", "partition": 0}\n{"value": "two", "key": "k"}\n')
    page.goto(live_server.url + "/topics/" + name[1:])
    for tab in ("Partitions", "Consumers", "Configs", "Schema", "Charts", "Messages"):
        page.get_by_role("tab", name=tab).click()
        expect(page.get_by_role("tab", name=tab)).to_have_attribute("aria-selected", "true")
    page.get_by_text("Import messages", exact=True).click()
    form = page.get_by_role("region", name="Import messages")
    form.get_by_label("File").set_input_files(path)
    form.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#import-result")).to_contain_text("Wrote 2 of 2 messages (100%)")
    assert seen == {"csp": [], "errors": [], "failed": []}
