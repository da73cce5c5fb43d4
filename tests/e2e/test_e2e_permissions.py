"""A user's effective permissions in a real browser: from the Users page to the table,
filtered by path prefix (htmx), with the answers in words."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from engine import Principal
from tests.e2e.conftest import USER, shot

STREAM = "/e2e-perm/shared"


def test_admin_opens_a_users_permissions_and_filters_them(admin_page, live_server):
    live_server.cluster.as_principal(Principal("carol")).create_stream(
        STREAM, consume_perm="g:analysts", copy_perm="!p"
    )
    page = admin_page
    page.goto(live_server.url + "/users")
    page.get_by_role("link", name=f"Effective permissions of {USER}").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Effective permissions of {USER}")
    page.get_by_label("Path prefix").fill("/e2e-perm")
    table = page.locator("#permission-list")
    expect(table.get_by_text("Streams 1–1 of 1 whose path starts with /e2e-perm.")).to_be_visible()
    expect(page).to_have_url(re.compile(r"q=%2Fe2e-perm|q=/e2e-perm"))
    row = table.get_by_role("row").filter(has_text=STREAM)
    # produce, consume, unmask, topic, copy, admin: only g:analysts lets her in
    cells = row.get_by_role("cell")
    expect(cells).to_have_count(2 + 6)
    # each cell reads "Consume permission on /e2e-perm/shared: yes" to a screen reader
    said = [" ".join(cells.nth(i).text_content().split()) for i in range(2, 8)]
    assert said[1].startswith(f"✓ Consume permission on {STREAM}: yes"), said
    answers = [re.search(r": (yes|no)\b", text)[1] for text in said]
    assert answers == ["no", "yes", "no", "no", "no", "no"]
    expect(cells.nth(3)).to_have_attribute("title", "consume_perm: g:analysts")
    shot(page, "user-permissions")


def test_the_page_size_reloads_the_table_in_place(admin_page, live_server):
    for i in range(25):
        live_server.cluster.create_stream(f"/e2e-perm-pages/s{i:02d}")
    page = admin_page
    page.goto(live_server.url + f"/users/{USER}/permissions?q=/e2e-perm-pages")
    table = page.locator("#permission-list")
    expect(table.get_by_text("Streams 1–25 of 25 whose path starts with")).to_be_visible()
    page.get_by_label("Per page").select_option("20")
    expect(table.get_by_text("Streams 1–20 of 25 whose path starts with")).to_be_visible()
    expect(page).to_have_url(re.compile(r"size=20"))
    expect(page.get_by_role("heading", level=1)).to_have_count(1)  # swapped in, not nested


def test_a_viewer_sees_no_delete_or_save_button_and_the_reason_on_hover(page, live_server):
    """Actions only where allowed (web/allowed.py): alice may read carol's stream and its
    group, nothing more; its pages show her no Delete, Save, Produce or Reset button."""
    from engine import Consumer, OffsetAndMetadata, TopicPartition
    from tests.e2e.conftest import PAGE_TIMEOUT_MS, USER_PASSWORD, log_in

    carol = live_server.cluster.as_principal(Principal("carol"))
    carol.create_stream("/e2e-viewer/s", consume_perm="p")
    carol.create_topic("/e2e-viewer/s:t", 1)
    consumer = Consumer(carol, group_id="e2e-viewer-g", enable_auto_commit=False)
    consumer.assign([TopicPartition("/e2e-viewer/s:t", 0)])
    consumer.commit({TopicPartition("/e2e-viewer/s:t", 0): OffsetAndMetadata(0)})
    consumer.close()
    carol.set_group_permissions("e2e-viewer-g", describe_perm="p")
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    log_in(page, live_server, USER, USER_PASSWORD)
    page.goto(live_server.url + "/streams/e2e-viewer/s")
    expect(page.get_by_role("heading", level=1)).to_have_text("Stream /e2e-viewer/s")
    for name in ("Delete stream", "Save policies", "Create topic", "Delete"):
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
    refused = page.locator('[data-denied="Delete stream"]')
    expect(refused).to_have_attribute("title", "needs admin_perm on /e2e-viewer/s")
    refused.hover()
    expect(page.locator('[data-denied="Save policies"]')).to_be_visible()
    shot(page, "viewer-stream")
    page.goto(live_server.url + "/topics/e2e-viewer/s:t")
    expect(page.get_by_role("button", name="Produce", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Save topic policies")).to_have_count(0)
    expect(page.locator('[data-denied="Produce"]')).to_have_attribute(
        "title", "needs produce_perm on /e2e-viewer/s"
    )
    page.goto(live_server.url + "/groups/e2e-viewer-g")
    for name in ("Reset offsets", "Delete group…", "Preview", "Save permissions"):
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
    expect(page.locator('[data-denied="Delete group"]')).to_have_attribute(
        "title", "needs delete_perm on group e2e-viewer-g"
    )
    # the administrator sees them all
    log_in(page, live_server)
    page.goto(live_server.url + "/streams/e2e-viewer/s")
    expect(page.get_by_role("button", name="Delete stream", exact=True)).to_have_count(1)
    expect(page.get_by_role("button", name="Save policies", exact=True)).to_have_count(1)
