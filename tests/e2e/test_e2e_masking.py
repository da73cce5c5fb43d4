"""Data masking in the browser (docs/WEB.md, "Data masking"): a stream's masked field is
`****` for a viewer without `unmask_perm` and plain for the stream's owner, in the message
page, the JSON API and a download. Runs on the session's one server and browser."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from engine import Principal, Producer
from tests.e2e.conftest import PAGE_TIMEOUT_MS, USER, USER_PASSWORD, log_in

STREAM = "/e2e-mask"
TOPIC = STREAM + ":orders"
VIEWER = "mask-viewer"
VIEWER_PASSWORD = "mask-viewer-password-1"
SECRET = "4111-1111-1111-1111"


@pytest.fixture(scope="module")
def masked(live_server):
    """/e2e-mask, created by alice (its owner: the default unmask_perm) with a mask;
    everyone may read it; `mask-viewer` is a plain user."""
    cluster = live_server.cluster
    cluster.add_user(VIEWER, VIEWER_PASSWORD)
    owner = cluster.as_principal(Principal(USER, ("analysts",)))
    owner.create_stream(STREAM, consume_perm="p", mask="value.card.number, headers.token")
    owner.create_topic(TOPIC, partitions=1)
    with Producer(owner) as producer:
        order = {"id": 7, "card": {"number": SECRET, "exp": "12/30"}}
        producer.send(TOPIC, json.dumps(order).encode(), key=b"o7", headers=[("token", b"t0p")])
    return live_server


def _check(page, server, name, tmp_path, *, masked_for_them: bool) -> None:
    url = server.url + "/topics/" + TOPIC[1:] + "?start=oldest"
    page.goto(url)
    rows = page.locator("#message-rows")
    expect(rows).to_contain_text("12/30")
    if masked_for_them:
        expect(rows).to_contain_text("****")
        expect(rows).not_to_contain_text(SECRET)
        expect(rows).not_to_contain_text("t0p")
        expect(page.get_by_text("unmask permission")).to_be_visible()
    else:
        expect(rows).to_contain_text(SECRET)
        expect(rows).to_contain_text("t0p")
    # the JSON API, with the user's token
    token = server.cluster.create_api_token(name, "e2e masking")
    got = page.request.get(
        server.url + f"/api/v1/topics{TOPIC}/messages",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert got.status == 200
    (message,) = got.json()["messages"]
    shown = "****" if masked_for_them else SECRET
    assert json.loads(message["value"])["card"]["number"] == shown
    # the download
    form = page.get_by_role("form", name="Download messages")
    with page.expect_download() as info:
        form.get_by_role("button", name="Download JSON lines").click()
    path = tmp_path / f"{name}.jsonl"
    info.value.save_as(path)
    (row,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert json.loads(row["value"])["card"]["number"] == shown
    assert row["headers"][0]["value"] == ("****" if masked_for_them else "t0p")


def test_a_masked_field_is_masked_for_a_viewer_and_plain_for_the_owner(masked, browser, tmp_path):
    for name, password, hidden in ((VIEWER, VIEWER_PASSWORD, True), (USER, USER_PASSWORD, False)):
        context = browser.new_context(accept_downloads=True)
        try:
            page = context.new_page()
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            log_in(page, masked, name, password)
            _check(page, masked, name, tmp_path, masked_for_them=hidden)
        finally:
            context.close()
