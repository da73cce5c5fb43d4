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
    # produce, consume, topic, copy, admin: only g:analysts lets her in
    cells = row.get_by_role("cell")
    expect(cells).to_have_count(2 + 5)
    # each cell reads "Consume permission on /e2e-perm/shared: yes" to a screen reader
    said = [" ".join(cells.nth(i).text_content().split()) for i in range(2, 7)]
    assert said[1].startswith(f"✓ Consume permission on {STREAM}: yes"), said
    answers = [re.search(r": (yes|no)\b", text)[1] for text in said]
    assert answers == ["no", "yes", "no", "no", "no"]
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
