"""Transactions in a real browser (issue 25): the message browser marks an aborted record
and shows markers as rows, and an administrator aborts an open transaction from the
Transactions page after the browser's confirm."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.conftest import shot
from tests.txn_data import three_transactions

TOPIC = "/e2e/txn:orders"


def test_marks_in_the_browser_and_abort_from_the_transactions_page(admin_page, live_server):
    cluster = live_server.cluster
    cluster.create_stream("/e2e/txn")
    cluster.create_topic(TOPIC, partitions=1)
    producers = three_transactions(cluster, TOPIC)
    try:
        page = admin_page
        page.goto(f"{live_server.url}/topics{TOPIC}?start=oldest")
        rows = page.locator("#message-rows tr")
        expect(rows).to_have_count(6)
        expect(rows.nth(2)).to_contain_text("aborted")
        expect(rows.nth(3)).to_contain_text("COMMIT marker")
        expect(rows.nth(4)).to_contain_text("ABORT marker")
        shot(page, "transactions-marks")

        nav = page.get_by_role("navigation", name="Main")
        nav.get_by_role("link", name="Transactions").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Transactions")
        row = page.locator('tr[data-transactional-id="o"]')
        expect(row).to_contain_text("Ongoing")
        page.once("dialog", lambda dialog: dialog.accept())
        row.get_by_role("button", name="Abort transaction o").click()
        expect(page.get_by_role("status").first).to_contain_text("Transaction o aborted")
        expect(page.locator('tr[data-transactional-id="o"]')).to_have_count(0)
        shot(page, "transactions-aborted")
    finally:
        for producer in producers.values():
            producer.close()
