"""What a hostile walk through a live console found (session 44), over a real socket: a NUL
character where a name or a path is read, JSON and regular expressions nested deeper than
Python's parsers recurse, and two refusals that named the wrong reason. Each is a clear
4xx that changes nothing, never a 500 or a 503 that blames the catalog."""

from __future__ import annotations

import html

import pytest

from engine import Producer
from engine.client.transactions import Transactions

DEEP_JSON = "[" * 50_000 + "]" * 50_000
DEEP_REGEX = "(" * 5_000 + "a" + ")" * 5_000


@pytest.fixture
def setup(public_s):
    return public_s


@pytest.mark.parametrize(
    ("url", "partial"),
    [
        ("/streams?q=car%00x", False),
        ("/streams?q=car%00x", True),  # the type-ahead list
        ("/search?q=abc%00", False),
        ("/streams/s?tq=a%00b", False),
    ],
)
def test_a_nul_in_a_name_search_finds_nothing(setup, url, partial):
    browser = setup.browser("alice")
    answer = browser.get(url, headers={"HX-Request": "true"} if partial else {})
    assert answer.status_code == 200, answer.text[:500]
    assert "StorageError" not in answer.text and "unterminated" not in answer.text


def test_a_nul_in_an_api_name_search_finds_nothing(setup):
    setup.cluster.create_topic("/s:orders")
    api = setup.api(setup.cluster.create_api_token("alice"))
    answer = api.get("/api/v1/search", params={"q": "orders\x00"})
    assert answer.status_code == 200, answer.text[:500]
    assert answer.json()["hits"] == []
    found = api.get("/api/v1/search", params={"q": "orders"}).json()["hits"]
    assert [h["name"] for h in found] == ["/s:orders"]


@pytest.mark.parametrize("action", ["add", "pause", "resume", "remove"])
def test_a_nul_in_a_replica_target_is_a_400(setup, tmp_path, action):
    admin = setup.browser("admin")
    answer = admin.post_form(
        f"/replication/{action}", {"stream": "/s", "target": f"{tmp_path}/x\x00y"}
    )
    assert answer.status_code == 400, answer.text[:500]
    assert "no NUL character" in answer.text
    assert setup.cluster.replicas("/s") == []


@pytest.mark.parametrize("path", ["/api/v1/streams", "/api/v1/topics/s:t/messages"])
def test_an_api_body_nested_past_the_parser_is_a_400(setup, path):
    api = setup.api(setup.cluster.create_api_token("admin"))
    answer = api.post(path, data=DEEP_JSON, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text[:500]
    assert answer.json()["message"] == "the request body is JSON nested too deeply to read"


def test_a_group_reset_plan_nested_past_the_parser_is_a_400(setup):
    admin = setup.browser("admin")
    answer = admin.post_form(
        "/groups/g", {"action": "apply", "topic": "/s:t", "to": "earliest", "plan": DEEP_JSON}
    )
    assert answer.status_code == 400, answer.text[:500]
    assert "The preview sent back is missing or damaged" in answer.text
    assert setup.cluster.group("g").partitions[0].committed == 1  # unchanged


def test_a_replay_topic_pattern_nested_past_the_parser_is_a_400(setup):
    alice = setup.browser("alice")
    answer = alice.post_form(
        "/replays/new/window-counts",
        {"stream": "/s", "topic_pattern": DEEP_REGEX, "window": "1 minute"},
    )
    assert answer.status_code == 400, answer.text[:500]
    assert "topic_pattern nests its groups too deeply" in answer.text


def test_a_refused_schema_registration_is_a_403(setup):
    cluster = setup.cluster
    cluster.create_stream("/closed", produce_perm="u:admin")
    cluster.create_topic("/closed:t")
    answer = setup.browser("alice").post_form(
        "/topics/closed:t/schemas", {"part": "value", "schema_type": "JSON", "schema": "{}"}
    )
    assert answer.status_code == 403, answer.text[:500]
    assert "Access denied" in answer.text
    assert cluster.schemas.subjects() == []


def test_an_administrator_is_told_a_transaction_is_not_open(setup):
    cluster = setup.cluster
    admin = setup.browser("admin")
    unknown = admin.post_form("/transactions/abort", {"transactional_id": "nobody"})
    assert unknown.status_code == 404, unknown.text[:500]
    assert "no transactional id 'nobody'" in html.unescape(unknown.text)
    producer = Producer(cluster, transactional_id="done")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("/s:t", b"in a transaction")
    producer.commit_transaction()
    producer.close()
    ended = admin.post_form("/transactions/abort", {"transactional_id": "done"})
    assert ended.status_code == 409, ended.text[:500]
    assert "transaction 'done' is not open (complete_commit): there is nothing to abort" in (
        html.unescape(ended.text)
    )
    assert Transactions(cluster).describe("done").state == "complete_commit"
    # a plain user still learns nothing about ids that are not theirs
    refused = setup.browser("alice").post_form("/transactions/abort", {"transactional_id": "done"})
    assert refused.status_code == 403
