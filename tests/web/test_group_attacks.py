"""Attacks on another user's consumer group through a live console and its JSON API
(issue 23, finding 1), over real sockets: alice's group `dash` reads /a (hers alone);
mallory has a stream of her own (/m) and no right on /a."""

from __future__ import annotations

import pytest

from engine import Principal
from tests.group_streams import commit, two_streams

MALLORY, MALLORY_PASSWORD = "mallory", "mallory-password-1"


@pytest.fixture
def dash(live_web):
    cluster = live_web.cluster
    cluster.add_user(MALLORY, MALLORY_PASSWORD)
    two_streams(cluster)
    commit(cluster, "alice", "dash", 6)
    return live_web


def _groups(api):
    answer = api.get("/api/v1/groups")
    assert answer.status_code == 200
    return {g["group_id"] for g in answer.json()["groups"]}


def test_another_user_cannot_see_reset_or_delete_a_group(dash):
    cluster = dash.cluster
    mallory = dash.api(cluster.create_api_token(MALLORY))
    alice = dash.api(cluster.create_api_token("alice"))
    assert _groups(mallory) == set()
    assert _groups(alice) == {"dash"}
    assert mallory.get("/api/v1/groups/dash").status_code == 403
    for body in (
        {"topic": "/m:x", "to": "earliest", "dry_run": False},
        {"topic": "/a:t", "to": "earliest", "dry_run": False},
    ):
        assert mallory.post("/api/v1/groups/dash/reset-offsets", json=body).status_code == 403
    assert (
        mallory.post(
            "/api/v1/groups/dash/reset", json={"topic": "/m:x", "to": "earliest"}
        ).status_code
        == 403
    )
    assert mallory.delete("/api/v1/groups/dash").status_code == 403
    # the pages too
    browser = dash.browser(MALLORY, MALLORY_PASSWORD)
    assert browser.get("/groups/dash").status_code == 403
    assert "dash" not in browser.get("/groups").text
    answer = browser.post_form("/groups/dash", {"action": "delete", "confirm": "yes"})
    assert answer.status_code == 403
    # alice's group is as it was, and hers to see
    mine = alice.get("/api/v1/groups/dash").json()
    assert [(p["topic"], p["committed"]) for p in mine["partitions"]] == [("/a:t", 6)]
    assert mine["permissions"]["creator"] == "alice"
    assert "delete_perm" in mine["permissions"]["allowed"]


def test_a_reset_cannot_add_a_foreign_topic_and_the_owner_still_deletes(dash):
    cluster = dash.cluster
    cluster.as_principal(Principal("alice")).set_group_permissions(
        "dash", reset_perm="u:<creator> | u:mallory", describe_perm="p"
    )
    mallory = dash.api(cluster.create_api_token(MALLORY))
    body = {"topic": "/m:x", "to": "earliest", "dry_run": False}
    answer = mallory.post("/api/v1/groups/dash/reset-offsets", json=body)
    assert answer.status_code == 400 and "no offsets in /m:x" in answer.text
    # describe shared with everyone: mallory sees the group, not the offsets of /a
    seen = mallory.get("/api/v1/groups/dash").json()
    assert seen["partitions"] == []
    alice = dash.api(cluster.create_api_token("alice"))
    assert alice.delete("/api/v1/groups/dash").status_code == 204
    assert _groups(alice) == set()


def test_a_user_cannot_create_groups_on_topics_they_may_not_read(dash):
    cluster = dash.cluster
    mallory = dash.api(cluster.create_api_token(MALLORY))
    for n in range(30):
        body = {"topic": "/a:t", "to": "earliest", "dry_run": False}
        answer = mallory.post(f"/api/v1/groups/flood-{n}/reset-offsets", json=body)
        assert answer.status_code == 403
    assert {g.group_id for g in cluster.groups()} == {"dash"}
    # on her own topic she may, up to the limit
    cluster.set_group_limit(2)
    for n in range(3):
        body = {"topic": "/m:x", "to": "earliest", "dry_run": False}
        answer = mallory.post(f"/api/v1/groups/m-{n}/reset-offsets", json=body)
        assert answer.status_code == (200 if n < 2 else 403), answer.text
    assert _groups(mallory) == {"m-0", "m-1"}
