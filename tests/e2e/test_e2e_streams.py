"""The Streams list and the Stream page in a real browser: the list and its search without
reload, creating a stream, a policy edit that survives a reload, inline errors, and the
topics list's pages."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import expect

from tests.e2e.conftest import shot


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _rows(region):
    """The body rows of the region's table."""
    return region.get_by_role("table").locator("tbody tr")


def test_streams_list_renders_and_search_narrows_it_without_reload(admin_page, live_server):
    page = admin_page
    page.goto(live_server.url + "/streams")
    expect(page.get_by_role("heading", level=1)).to_have_text("Streams")
    streams = page.get_by_role("region", name="Streams")
    for path in ("/apps/sensors", "/apps/clicks", "/apps/profiles", "/ops/logs"):
        expect(streams.get_by_role("link", name=path, exact=True)).to_be_visible()
    shot(page, "streams")

    page.evaluate("window.__notReloaded = true")
    page.get_by_role("searchbox", name="Search").fill("ops")
    expect(page).to_have_url(re.compile(r"/streams\?q=ops"))
    expect(_rows(streams)).to_have_count(1)
    expect(streams.get_by_role("link", name="/ops/logs")).to_be_visible()
    assert page.evaluate("window.__notReloaded") is True  # htmx swapped the list in place
    shot(page, "streams-search")

    page.get_by_role("searchbox", name="Search").fill("/nothing-here")
    expect(streams.get_by_text("No stream's path starts with")).to_be_visible()
    # the URL is shareable: opening it shows the same narrowed list
    page.goto(live_server.url + "/streams?q=/apps/s")
    expect(_rows(streams)).to_have_count(1)
    expect(page.get_by_role("searchbox", name="Search")).to_have_value("/apps/s")


def test_create_a_stream_from_the_form(admin_page, live_server):
    page = admin_page
    path = "/e2e/" + _unique("made")
    page.goto(live_server.url + "/streams")
    form = page.get_by_role("region", name="Create stream")
    form.get_by_label("Path").fill("no-slash here")
    form.get_by_role("button", name="Create stream").click()
    expect(form.locator("#create-path-error")).to_contain_text("stream path")
    expect(form.get_by_label("Path")).to_have_attribute("aria-invalid", "true")
    form.get_by_label("Path").fill(path)
    form.get_by_label("TTL (seconds)").fill("600")
    form.get_by_role("button", name="Create stream").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Stream {path}")
    assert live_server.cluster.stream(path).policies["ttl"] == 600


def test_policy_edit_round_trips_and_invalid_values_show_inline(admin_page, live_server):
    page = admin_page
    path = "/e2e/" + _unique("policies")
    live_server.cluster.create_stream(path, ttl=3600)
    page.goto(live_server.url + "/streams" + path)
    policies = page.get_by_role("region", name="Policies")
    ttl = policies.get_by_label("TTL (seconds)")
    expect(ttl).to_have_value("1 h")  # as the lists show it

    ttl.fill("7200")
    policies.get_by_role("checkbox", name="Compact").check()
    policies.get_by_role("button", name="Save policies").click()
    expect(policies.get_by_role("status")).to_have_text("Saved the policies.")
    expect(page.get_by_role("region", name="Facts")).to_contain_text("2 h")  # swapped too
    page.reload()
    expect(policies.get_by_label("TTL (seconds)")).to_have_value("2 h")
    expect(policies.get_by_role("checkbox", name="Compact")).to_be_checked()
    assert live_server.cluster.stream(path).policies["ttl"] == 7200

    policies.get_by_label("TTL (seconds)").fill("-5")
    policies.get_by_label("Admin permission").fill("u:al ice")
    policies.get_by_role("button", name="Save policies").click()
    expect(policies.locator("#policy-ttl-error")).to_contain_text("must be at least 0")
    expect(policies.get_by_label("TTL (seconds)")).to_have_attribute("aria-invalid", "true")
    ace_error = policies.locator("#policy-admin_perm-error")
    expect(ace_error).to_contain_text("at column 6")
    expect(ace_error.locator("pre")).to_contain_text("^")
    expect(policies.get_by_role("alert")).to_contain_text("nothing was changed")
    shot(page, "stream-policy-errors")
    assert live_server.cluster.stream(path).policies["ttl"] == 7200


def test_topics_list_pages_and_searches(admin_page, live_server):
    page = admin_page
    path = "/e2e/" + _unique("fleet")
    cluster = live_server.cluster
    cluster.create_stream(path, ttl=0)
    for i in range(60):
        cluster.create_topic(f"{path}:car-{i:02d}")
    page.goto(live_server.url + "/streams" + path)
    topics = page.get_by_role("region", name="Topics")
    expect(_rows(topics)).to_have_count(50)
    expect(topics.get_by_text("Topics 1–50 of 60.")).to_be_visible()
    shot(page, "stream")

    topics.get_by_role("link", name="Next page of topics").click()
    expect(_rows(topics)).to_have_count(10)
    expect(page).to_have_url(re.compile(r"after=car-49"))
    expect(_rows(topics).first).to_contain_text("car-50")
    topics.get_by_role("link", name="First page of topics").click()
    expect(_rows(topics).first).to_contain_text("car-00")
    topics.get_by_role("link", name="Last page of topics").click()
    expect(topics.get_by_text("Topics 11–60 of 60.")).to_be_visible()

    topics.get_by_role("searchbox", name="Search topics").fill("car-3")
    expect(_rows(topics)).to_have_count(10)
    expect(page).to_have_url(re.compile(r"tq=car-3"))

    # create a topic, then delete it (hx-confirm asks first)
    topics.get_by_label("Topic name").fill("car-99")
    topics.get_by_label("Partitions").fill("2")
    topics.get_by_role("button", name="Create topic").click()
    expect(topics.get_by_role("status")).to_contain_text("Created topic car-99.")
    expect(topics.locator("#topic-count")).to_have_text("61")
    assert cluster.topic(f"{path}:car-99").partition_count == 2
    topics.get_by_role("searchbox", name="Search topics").fill("car-99")
    expect(_rows(topics)).to_have_count(1)
    page.once("dialog", lambda dialog: dialog.accept())
    topics.get_by_role("button", name="Delete topic car-99").click()
    expect(topics.get_by_text("Deleted topic car-99.")).to_be_visible()
    assert cluster.topic_count(path) == 60


def test_delete_a_stream_after_confirming(admin_page, live_server):
    page = admin_page
    path = "/e2e/" + _unique("doomed")
    live_server.cluster.create_stream(path)
    page.goto(live_server.url + "/streams" + path)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete stream").click()
    expect(page).to_have_url(re.compile(r"/streams$"))
    expect(page.get_by_text(f"Deleted stream {path}.")).to_be_visible()
    assert live_server.cluster.stream_count(path) == 0


def test_replication_section_loads_on_its_own(admin_page, live_server):
    page = admin_page
    page.goto(live_server.url + "/streams/apps/sensors")
    replication = page.get_by_role("region", name="Replication")
    expect(replication.get_by_role("heading", name=re.compile("Replicas"))).to_be_visible()
    expect(replication.get_by_role("heading", name=re.compile("Upstreams"))).to_be_visible()
