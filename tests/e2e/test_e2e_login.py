"""Logging in and out in a real browser."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.e2e.conftest import ADMIN_PASSWORD, log_in, shot
from tests.timing import scaled


def test_wrong_password_is_refused_then_right_one_logs_in(page, live_server):
    page.goto(live_server.url + "/")
    expect(page).to_have_url(re.compile(r"/login"))
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
    shot(page, "login-wrong-password")
    page.get_by_label("Password").fill(ADMIN_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Cluster e2e")
    shot(page, "overview")
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/login"))


def test_overview_lists_the_volumes_and_refreshes_live(page, live_server):
    log_in(page, live_server)
    volumes = page.get_by_role("region", name="Volumes")
    expect(volumes.get_by_role("row")).to_have_count(1 + 4)  # header + 4 volumes
    # the live part is replaced by htmx every 2 s: wait for one swap
    with page.expect_response(lambda r: "/overview/live" in r.url, timeout=int(scaled(10_000))):
        pass
    expect(volumes).to_be_visible()
