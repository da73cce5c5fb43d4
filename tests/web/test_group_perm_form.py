"""Editing a consumer group's permissions in the web console, over a live server (issue 23):
alice's group `dash` reads /a (hers alone); mallory may not change it, whatever she posts,
and a bad ACE is a 400 that says what is wrong, never a 500."""

from __future__ import annotations

import pytest

from engine import Consumer, OffsetAndMetadata, Principal, TopicPartition

MALLORY, MALLORY_PASSWORD = "mallory", "mallory-password-1"


@pytest.fixture
def dash(live_web):
    cluster = live_web.cluster
    cluster.add_user(MALLORY, MALLORY_PASSWORD)
    cluster.create_stream("/a", produce_perm="p", consume_perm="u:alice")
    cluster.create_topic("/a:t", 1)
    consumer = Consumer(
        cluster.as_principal(Principal("alice")), group_id="dash", enable_auto_commit=False
    )
    consumer.assign([TopicPartition("/a:t", 0)])
    consumer.commit({TopicPartition("/a:t", 0): OffsetAndMetadata(0)})
    consumer.close()
    return live_web


def _aces(cluster):
    return dict(cluster.group_permissions("dash").aces)


def test_the_creator_edits_the_group_permissions_and_a_bad_ace_is_a_400(dash):
    cluster = dash.cluster
    alice = dash.browser("alice")
    page = alice.get("/groups/dash")
    assert page.status_code == 200 and 'id="group-perms-form"' in page.text
    before = _aces(cluster)
    bad = {"action": "perms", "join_perm": "u:bob &", "describe_perm": "g:(etl"}
    answer = alice.post_form("/groups/dash", bad)
    assert answer.status_code == 400
    assert "2 ACEs are invalid" in answer.text
    assert "join_perm" in answer.text and '<pre class="caret">' in answer.text
    assert _aces(cluster) == before
    # htmx gets the section alone, with the same message
    part = alice.post_form("/groups/dash", bad, headers={"HX-Request": "true"})
    assert part.status_code == 200 and "<html" not in part.text
    assert 'id="group-perms"' in part.text and "2 ACEs are invalid" in part.text
    shared = {"action": "perms", "describe_perm": "u:<creator> | u:mallory"}
    saved = alice.post_form("/groups/dash", shared)
    assert saved.status_code == 200 and "Saved the permissions." in saved.text
    aces = _aces(cluster)
    assert aces["describe_perm"] == "u:<creator> | u:mallory"
    assert aces["join_perm"] == "u:<creator>"  # a blank field: the default
    assert cluster.group_permissions("dash").sources["describe_perm"] == "group"


def test_a_user_without_the_right_cannot_edit_them(dash):
    cluster = dash.cluster
    mallory = dash.browser(MALLORY, MALLORY_PASSWORD)
    grab = {"action": "perms", "join_perm": "p", "delete_perm": "p", "reset_perm": "p"}
    # she may not even describe the group
    assert mallory.post_form("/groups/dash", grab).status_code == 403
    # once she may describe it, she sees the permissions but no form, and may not change them
    cluster.as_principal(Principal("alice")).set_group_permissions(
        "dash", describe_perm="u:<creator> | u:mallory"
    )
    before = _aces(cluster)
    page = mallory.get("/groups/dash")
    assert page.status_code == 200
    assert 'id="group-perms"' in page.text and 'id="group-perms-form"' not in page.text
    answer = mallory.post_form("/groups/dash", grab)
    assert answer.status_code == 403
    assert "may not set the permissions of consumer group" in answer.text
    htmx = mallory.post_form("/groups/dash", grab, headers={"HX-Request": "true"})
    assert "may not set the permissions" in htmx.text
    assert _aces(cluster) == before
    # an administrator may
    admin = dash.browser("admin")
    assert admin.post_form("/groups/dash", {"action": "perms", "join_perm": "g:etl"}).ok
    assert _aces(cluster)["join_perm"] == "g:etl"
