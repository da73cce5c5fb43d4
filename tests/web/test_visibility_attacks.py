"""What a user sees of streams they may not consume, over a live console and its APIs
(issue 23, "Also"; docs/WEB.md, "What users see"): alice's stream /a is hers alone,
mallory has /m of her own. Names stay public; a topic's load (heat, metrics), its
schemas' ids and the server's job processes do not."""

from __future__ import annotations

import json

import pytest

from engine import Principal, Producer

MALLORY, MALLORY_PASSWORD = "mallory", "mallory-password-1"


@pytest.fixture
def two(live_web):
    cluster = live_web.cluster
    cluster.add_user(MALLORY, MALLORY_PASSWORD)
    cluster.create_stream("/a", produce_perm="u:alice", consume_perm="u:alice")
    cluster.create_stream("/m", produce_perm="u:mallory", consume_perm="u:mallory")
    cluster.create_topic("/a:secret-orders", 1)
    cluster.create_topic("/m:x", 1)
    for user, topic in (("alice", "/a:secret-orders"), (MALLORY, "/m:x")):
        producer = Producer(cluster.as_principal(Principal(user)))
        for _ in range(20):
            producer.send(topic, value=b"v" * 100, partition=0)
        producer.flush()
        producer.close()
    return live_web


def _tokens(live):
    cluster = live.cluster
    return (
        live.api(cluster.create_api_token(MALLORY)),
        live.api(cluster.create_api_token("alice")),
        live.api(cluster.create_api_token("admin")),
    )


def test_heat_of_a_topic_is_for_its_consumers(two):
    mallory, alice, admin = _tokens(two)
    seen = {}
    for who, api in (("mallory", mallory), ("alice", alice), ("admin", admin)):
        answer = api.get("/api/v1/heat")
        assert answer.status_code == 200
        body = answer.json()
        seen[who] = {t["topic"] for t in body["topics"]} | {
            p["topic"] for p in body["hottest_partitions"]
        }
        # the volumes' totals stay everyone's
        assert body["total"]["write_messages"] == 40
    assert seen == {
        "mallory": {"/m:x"},
        "alice": {"/a:secret-orders"},
        "admin": {"/a:secret-orders", "/m:x"},
    }
    # the page: neither a row nor a cell of /a, even asked for by name
    browser = two.browser(MALLORY, MALLORY_PASSWORD)
    page = browser.get("/heat?topic=/a:secret-orders&partition=0")
    assert page.status_code == 200
    assert 'data-row="/m:x [0]"' in page.text
    assert 'data-row="/a:secret-orders [0]"' not in page.text
    assert "20 msg" not in page.text.split("/a:secret-orders")[-1]
    own = two.browser("alice").get("/heat").text
    assert 'data-row="/a:secret-orders [0]"' in own


def test_metrics_of_a_topic_or_stream_are_for_its_consumers(two):
    mallory, alice, admin = _tokens(two)
    for scope, name in (("topic", "/a:secret-orders"), ("stream", "/a")):
        query = {"scope": scope, "name": name, "metric": "write_messages"}
        refused = mallory.get("/api/v1/metrics", params=query)
        assert refused.status_code == 403, refused.text
        assert "consume_perm" in refused.json()["message"]
        assert "points" not in refused.json()
        for api in (alice, admin):
            answer = api.get("/api/v1/metrics", params=query)
            assert answer.status_code == 200 and answer.json()["name"] == name
    assert mallory.get("/api/v1/metrics", params={"scope": "topic", "name": "/m:x"}).ok
    # the cluster's totals stay everyone's
    assert mallory.get("/api/v1/metrics").status_code == 200
    # the chart a page loads: 403, or for htmx a sentence instead of the figure
    browser = two.browser(MALLORY, MALLORY_PASSWORD)
    chart = "/charts?scope=topic&name=/a:secret-orders&metric=write_messages&id=t"
    assert browser.get(chart).status_code == 403
    slot = browser.get(chart, headers={"HX-Request": "true"})
    assert slot.status_code == 200
    assert 'data-testid="chart-denied"' in slot.text and "data-points" not in slot.text
    own = two.browser("alice").get(chart, headers={"HX-Request": "true"})
    assert "data-points" in own.text


def test_job_answers_carry_the_server_process_for_administrators_only(two, launches):
    from spark_tasks import jobs

    two.cluster.create_topic("/m:copy", 1)
    job_id = jobs.submit(
        two.cluster_path, "copy", source="/m:x", target="/m:copy", principal=Principal(MALLORY)
    )
    mallory, _alice, admin = _tokens(two)
    mine = mallory.get(f"/api/v1/jobs/{job_id}").json()
    assert "pid" not in mine and "host" not in mine
    assert all(
        "pid" not in j and "host" not in j for j in mallory.get("/api/v1/jobs").json()["jobs"]
    )
    theirs = admin.get(f"/api/v1/jobs/{job_id}").json()
    assert isinstance(theirs["pid"], int) and theirs["host"]
    page = two.browser(MALLORY, MALLORY_PASSWORD).get(f"/replays/{job_id}")
    assert page.status_code == 200 and "<dt>Process</dt>" not in page.text
    assert "<dt>Process</dt>" in two.browser("admin").get(f"/replays/{job_id}").text


def _register(api, subject, schema):
    return api.post(
        f"/registry/subjects/{subject}/versions",
        data=json.dumps({"schema": json.dumps(schema)}),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )


def test_a_schema_id_does_not_tell_whether_another_user_registered_a_text(two):
    from urllib.parse import quote

    mallory, alice, admin = _tokens(two)
    secret = {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "cardholder_pan", "type": "string"}],
    }

    def schema(n):
        return {"type": "record", "name": f"Guess{n}", "fields": [{"name": "f", "type": "int"}]}

    answer = _register(alice, quote("/a:secret-orders-value", safe=""), secret)
    assert answer.status_code == 200, answer.text
    theirs = answer.json()["id"]
    mine = quote("/m:x-value", safe="")
    two.cluster.schemas.set_compatibility("NONE", "/m:x-value")  # her guesses are unrelated
    before = _register(mallory, mine, schema(1)).json()["id"]
    guessed = _register(mallory, mine, secret).json()["id"]
    after = _register(mallory, mine, schema(2)).json()["id"]
    # a text alice holds gets a new id, as a text nobody holds does
    assert guessed != theirs
    assert (before, guessed, after) == (before, before + 1, before + 2)
    # and neither her id nor her subject answers mallory
    for path in ("", "/schema", "/versions", "/subjects"):
        answer = mallory.get(f"/registry/schemas/ids/{theirs}{path}")
        assert answer.status_code == 404 and answer.json()["error_code"] == 40403, path
    lookup = mallory.post(
        f"/registry/subjects/{quote('/a:secret-orders-value', safe='')}",
        data=json.dumps({"schema": json.dumps(secret)}),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    assert lookup.status_code == 403
    # alice's own registrations and lookups keep her id; a reader of both shares one
    assert _register(alice, quote("/a:secret-orders-value", safe=""), secret).json()["id"] == theirs
    assert alice.get(f"/registry/schemas/ids/{theirs}").status_code == 200
    two.cluster.create_topic("/a:other", 1)
    again = _register(alice, quote("/a:other-value", safe=""), secret).json()["id"]
    assert again == theirs
    assert admin.get(f"/registry/schemas/ids/{guessed}/subjects").json() == ["/m:x-value"]
    # nor does a message she crafts with alice's id decode with alice's fields
    producer = Producer(two.cluster.as_principal(Principal(MALLORY)))
    producer.send("/m:x", value=b"\x00" + theirs.to_bytes(4, "big") + b"\x08ABCD", partition=0)
    producer.flush()
    producer.close()
    page = two.browser(MALLORY, MALLORY_PASSWORD).get("/topics/m:x")
    assert page.status_code == 200
    assert f"schema id {theirs} is not in this cluster" in page.text
    assert "cardholder_pan" not in page.text
