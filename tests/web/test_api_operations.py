"""The JSON API's message search, schema decoding and group operations (web/api/), through
Flask's test client with bearer tokens, on the data of tests/web/test_web_api.py."""

from __future__ import annotations

import json

import pytest

from engine import Consumer, Producer
from engine.client.schemas import encode
from tests.web import test_web_api as base

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

# the data and the token clients of the resource tests
data, api, alice = base.data, base.api, base.alice

TOPIC = "/apps/sensors:car-17"
SEARCH = "/topics/apps/sensors:car-17/search"


def test_message_search_pages_by_cursor_within_its_budget(app, api, alice):
    # partition 0 holds v0..v9 (key k), partition 1 one binary value
    query = "value == 'v3' || value == 'v7' || value == 'v8'"
    first = api.get(SEARCH, query_string={"q": query, "limit": 2})
    assert first.status_code == 200, first.json
    body = first.json
    assert [(m["partition"], m["offset"], m["value"]) for m in body["matches"]] == [
        (0, 3, "v3"),
        (0, 7, "v7"),
    ]
    assert body["matches"][0]["key"] == "k" and body["matches"][0]["topic"] == TOPIC
    assert body["stopped_by"] == "limit" and body["complete"] is False
    assert body["next_offsets"]["0"] == 8  # the first match not answered: nothing is lost
    assert body["from_offsets"] == {"0": 0, "1": 0} and body["to_offsets"] == {"0": 10, "1": 1}
    rest = api.get(SEARCH, query_string={"q": query, "limit": 2, "cursor": body["cursor"]}).json
    assert [m["value"] for m in rest["matches"]] == ["v8"]
    assert rest["complete"] is True and rest["cursor"] is None and rest["stopped_by"] is None

    # a budget of 3 messages a request: the search goes on by cursor, never repeating
    seen, cursor, requests = [], None, 0
    while True:
        args = {"q": "starts_with(value, 'v')", "budget": 3, "partition": 0}
        got = api.get(SEARCH, query_string=args | ({"cursor": cursor} if cursor else {})).json
        requests += 1
        assert got["scanned"] <= 3
        seen += [m["offset"] for m in got["matches"]]
        if got["complete"]:
            break
        assert got["stopped_by"] == "budget"
        cursor = got["cursor"]
    assert seen == list(range(10)) and requests == 4

    window = api.get(SEARCH, query_string={"q": "offset >= `0`", "from": "2", "to": "5"}).json
    assert [(m["partition"], m["offset"]) for m in window["matches"]] == [(0, 2), (0, 3), (0, 4)]

    bad = api.get(SEARCH, query_string={"q": "value =="})
    assert bad.status_code == 400 and bad.json["error"] == "InvalidArgument"
    assert bad.json["message"].startswith("q: ")
    assert api.get(SEARCH, query_string={"q": "re2_match(value, '(a')"}).status_code == 400
    assert api.get(SEARCH).status_code == 400
    assert api.get(SEARCH, query_string={"q": "key", "budget": 0}).status_code == 400
    forged = api.get(SEARCH, query_string={"q": "key", "cursor": "bm9wZQ"})
    assert forged.status_code == 400 and "cursor" in forged.json["message"]
    assert api.get("/topics/apps/sensors:none/search?q=key").status_code == 404
    # alice may not consume /apps/sensors; without a token nobody is asked anything
    assert alice.get(SEARCH, query_string={"q": "key"}).status_code == 403
    assert app.test_client().get("/api/v1" + SEARCH + "?q=key").status_code == 401


def test_messages_and_matches_decoded_with_their_schema(api, data):
    schema = data.schemas.register(
        TOPIC + "-value",
        json.dumps({"type": "record", "name": "R", "fields": [{"name": "t", "type": "int"}]}),
    )
    with Producer(data, acks=1) as producer:
        producer.send(TOPIC, value=encode(data.schemas, schema, '{"t": 91}'), partition=1)
        producer.send(TOPIC, value=b"\x00\x00\x00\x03\xe7zz", partition=1)  # no such schema
    got = api.get(
        f"/topics/{TOPIC[1:]}/messages", query_string={"partition": 1, "decode": "schema"}
    )
    assert got.status_code == 200, got.json
    plain, decoded, unknown = got.json["messages"]
    assert plain["value_decoded"] is None and plain["value_schema"] is None
    assert plain["value_encoding"] == "base64"  # the record shape stays as it was
    assert decoded["value_decoded"] == {"t": 91}
    assert decoded["value_schema"] == {
        "id": schema.id,
        "type": "AVRO",
        "subject": TOPIC + "-value",
        "version": 1,
    }
    assert unknown["value_decoded"] is None and unknown["value_schema"]["id"] == 999
    assert "not in this cluster's registry" in unknown["value_schema"]["error"]
    assert "value_decoded" not in api.get(f"/topics/{TOPIC[1:]}/messages").json["messages"][0]
    # a search sees and answers the decoded value too
    found = api.get(SEARCH, query_string={"q": "value.t > 90", "decode": "schema"}).json
    assert [m["value_decoded"] for m in found["matches"]] == [{"t": 91}]
    bad = api.get(f"/topics/{TOPIC[1:]}/messages?decode=avro")
    assert bad.status_code == 400 and "decode must be one of" in bad.json["message"]
    assert api.get(f"/topics/{TOPIC[1:]}/messages?decode=schema&shape=v0").status_code == 400


def test_group_reset_preview_apply_and_delete(api, alice, data):
    url = "/groups/dash/reset-offsets"
    ask = {"topic": TOPIC, "to": "earliest", "partitions": [0]}
    preview = api.post(url, json=ask)  # dry_run is the default
    assert preview.status_code == 200, preview.json
    assert preview.json["dry_run"] is True and preview.json["applied"] is False
    assert preview.json["plan"] == [
        {
            "partition": 0,
            "current": 4,
            "new": 0,
            "log_start_offset": 0,
            "log_end_offset": 10,
            "lag_before": 6,
            "lag_after": 10,
        }
    ]
    assert data.group("dash").partitions[0].committed == 4  # a preview changes nothing
    shift = api.post(url, json={"topic": TOPIC, "to": "shift:+3", "partitions": [0]}).json
    assert shift["plan"][0]["new"] == 7
    applied = api.post(url, json=ask | {"dry_run": False})
    assert applied.status_code == 200 and applied.json["applied"] is True
    assert data.group("dash").partitions[0].committed == 0
    assert api.post(url, json=ask | {"partitions": [5]}).status_code == 400
    assert api.post(url, json=ask | {"dry_run": "no"}).status_code == 400
    assert alice.post(url, json=ask).status_code == 403  # dash's reset_perm: not alice's

    live = Consumer(data, group_id="dash", auto_offset_reset="earliest")
    live.subscribe([TOPIC])
    live.poll(timeout_ms=200)
    try:
        busy = api.post(url, json=ask | {"dry_run": False})
        assert busy.status_code == 409 and busy.json["error"] == "IllegalState"
        assert api.delete("/groups/dash").status_code == 409
    finally:
        live.close()
    assert alice.delete("/groups/dash").status_code == 403
    assert api.delete("/groups/dash").status_code == 204
    assert api.get("/groups/dash").status_code == 404
    gone = api.delete("/groups/dash")
    assert gone.status_code == 404 and gone.json["error"] == "UnknownGroup"
