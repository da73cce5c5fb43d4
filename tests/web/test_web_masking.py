"""Data masking in the web console (engine.masking): a stream's `mask` policy hides its
fields from a user without `unmask_perm` in the message page, the JSON API, downloads and
message search; the stream's owner (its creator, the default unmask_perm) and an
administrator see the data. The policy is set in the stream's policy form."""

from __future__ import annotations

import json
import re

import pytest

from engine import Principal, Producer
from engine.masking import MARKER
from tests.web.conftest import USER, USER_PASSWORD, login
from tests.web.test_web_message_search import finished

VIEWER = "bob"
VIEWER_PASSWORD = "bob-password-12"
STREAM = "/pay"
TOPIC = "/pay:orders"
PATH = "/topics/pay:orders"
SECRET = "4111-1111-1111-1111"
ORDER = {"id": 7, "card": {"number": SECRET, "exp": "12/30"}}


@pytest.fixture
def data(app, cluster):
    """`/pay`, created by alice (its owner) with a mask; bob may read it."""
    cluster.add_user(VIEWER, VIEWER_PASSWORD)
    owner = cluster.as_principal(Principal(USER))
    owner.create_stream(STREAM, consume_perm="p", mask="value.card.number, headers.token")
    owner.create_topic(TOPIC, partitions=1)
    with Producer(owner) as producer:
        producer.send(TOPIC, json.dumps(ORDER).encode(), key=b"o7", headers=[("token", b"t0p")])
    return cluster


@pytest.fixture
def viewer(app, data):
    client = app.test_client()
    client.csrf = login(client, VIEWER, VIEWER_PASSWORD)
    return client


@pytest.fixture
def owner(app, data):
    client = app.test_client()
    client.csrf = login(client, USER, USER_PASSWORD)
    return client


def _api(app, cluster, name):
    client = app.test_client()
    headers = {"Authorization": f"Bearer {cluster.create_api_token(name)}"}
    return lambda url, **kw: client.get("/api/v1" + url, headers=headers, **kw)


def test_the_page_masks_for_a_viewer_and_says_why(viewer, owner, client):
    html = viewer.get(PATH, query_string={"start": "oldest"}).get_data(as_text=True)
    assert SECRET not in html and "t0p" not in html
    assert MARKER in html and "12/30" in html
    assert "unmask permission" in html
    for reader in (owner, client):  # the owner and an administrator
        html = reader.get(PATH, query_string={"start": "oldest"}).get_data(as_text=True)
        assert SECRET in html and "t0p" in html
        assert "unmask permission" not in html


def test_a_filter_cannot_find_a_masked_value(viewer, owner):
    args = {"start": "oldest", "value": "4111"}
    assert 'data-offset="0"' not in viewer.get(PATH, query_string=args).get_data(as_text=True)
    assert 'data-offset="0"' in owner.get(PATH, query_string=args).get_data(as_text=True)


def test_the_api_masks_for_a_viewer(app, data):
    got = _api(app, data, VIEWER)(f"/topics{TOPIC}/messages").get_json()
    (message,) = got["messages"]
    assert json.loads(message["value"])["card"] == {"number": MARKER, "exp": "12/30"}
    assert message["headers"] == [{"name": "token", "value": MARKER, "encoding": "utf-8"}]
    assert got["masked"] == "value.card.number, headers.token"
    mine = _api(app, data, USER)(f"/topics{TOPIC}/messages").get_json()
    assert json.loads(mine["messages"][0]["value"])["card"]["number"] == SECRET
    assert mine["masked"] is None


def test_the_api_search_matches_the_masked_message(app, data):
    search = _api(app, data, VIEWER)
    hidden = search(
        f"/topics{TOPIC}/search", query_string={"q": f'value.card.number == "{SECRET}"'}
    )
    assert hidden.get_json()["matches"] == []
    found = search(f"/topics{TOPIC}/search", query_string={"q": "value.id == 7"}).get_json()
    assert json.loads(found["matches"][0]["value"])["card"]["number"] == MARKER
    assert found["masked"] == "value.card.number, headers.token"
    mine = _api(app, data, USER)(
        f"/topics{TOPIC}/search", query_string={"q": f'value.card.number == "{SECRET}"'}
    ).get_json()
    assert len(mine["matches"]) == 1


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_downloads_mask_for_a_viewer(viewer, owner, kind):
    args = {"file": kind, "start": "oldest"}
    body = viewer.get(f"{PATH}/download", query_string=args).get_data(as_text=True)
    assert SECRET not in body and "t0p" not in body and MARKER in body
    assert SECRET in owner.get(f"{PATH}/download", query_string=args).get_data(as_text=True)


def test_the_search_page_shows_masked_matches(viewer, owner):
    args = {"query": "value.id == `7`"}
    rows = finished(viewer, viewer.get(f"{PATH}/search", query_string=args).get_data(as_text=True))
    assert 'data-offset="0"' in rows and SECRET not in rows and MARKER in rows
    rows = finished(owner, owner.get(f"{PATH}/search", query_string=args).get_data(as_text=True))
    assert SECRET in rows


def test_the_policy_form_sets_and_checks_the_mask(client, data):
    page = client.get(f"/streams{STREAM}").get_data(as_text=True)
    assert 'name="mask"' in page and "Masked fields" in page and 'name="unmask_perm"' in page
    bad = client.post(
        f"/streams{STREAM}/~/policies",
        data={"mask": "value..x", "csrf_token": client.csrf},
    )
    assert bad.status_code == 400
    assert "a field name is missing" in bad.get_data(as_text=True)
    good = client.post(
        f"/streams{STREAM}/~/policies",
        data={"mask": "key , value.id", "unmask_perm": "g:auditors", "csrf_token": client.csrf},
    )
    assert good.status_code in (200, 302, 303)
    assert data.stream(STREAM).policies["mask"] == "key, value.id"
    assert data.stream(STREAM).policies["unmask_perm"] == "g:auditors"
    assert re.search(
        r'name="mask" value="key, value.id"', client.get(f"/streams{STREAM}").get_data(as_text=True)
    )
