"""Attacks on a read-only console (`plet web --read-only`, web/allowed.py) over real
sockets: a logged-in administrator with a valid session and CSRF token forges the
console's change requests and the JSON API's; every one is answered 403 before any view
runs, and nothing changes. A read-only user's token is refused by the engine on a console
that serves changes."""

from __future__ import annotations

import pytest

from engine import Consumer, OffsetAndMetadata, TopicPartition
from tests.conftest import live_module

HTMX = {"HX-Request": "true"}


def _seed(cluster) -> None:
    cluster.create_stream("/s")
    cluster.create_topic("/s:t", 1)
    consumer = Consumer(cluster, group_id="g", enable_auto_commit=False)
    consumer.assign([TopicPartition("/s:t", 0)])
    consumer.commit({TopicPartition("/s:t", 0): OffsetAndMetadata(0)})
    consumer.close()


def _state(cluster) -> tuple:
    """What a change would move."""
    return (
        [(s.path, s.policies["ttl"], s.policies["admin_perm"]) for s in cluster.streams()],
        [(t.name, len(t.partitions), t.partitions[0].log_end_offset) for t in cluster.topics("/s")],
        [(g.group_id, [p.committed for p in g.partitions]) for g in cluster.groups()],
        [(u.name, u.admin, u.groups) for u in cluster.users()],
        len(cluster.api_tokens()),
    )


@pytest.fixture
def read_only(tmp_path):
    with live_module().serve(tmp_path / "live", READ_ONLY=True) as server:
        _seed(server.cluster)
        yield server


def test_a_forged_post_with_a_valid_session_and_csrf_token_changes_nothing(read_only):
    before = _state(read_only.cluster)
    admin = read_only.browser("admin")  # logging in works on a read-only console
    page = admin.get("/streams/s")
    assert page.status_code == 200 and "read-only-badge" in page.text
    assert "Delete stream</button>" not in page.text
    forged = [
        ("/streams/s/~/delete", {}),
        ("/streams/s/~/policies", {"ttl": "1", "admin_perm": "p"}),
        ("/streams/s/~/topics", {"name": "new", "partitions": "1"}),
        ("/streams/s/~/topics/delete", {"name": "t"}),
        ("/streams", {"path": "/evil"}),
        ("/topics/s:t/produce", {"value": "forged"}),
        ("/topics/s:t/policies", {"override": "ttl", "ttl": "1"}),
        ("/groups/g", {"action": "delete"}),
        ("/groups/g", {"topic": "/s:t", "to": "latest", "action": "apply"}),
        ("/users/add", {"name": "eve", "password": "eve-password-1", "admin": "on"}),
        ("/users/alice/edit", {"admin": "on"}),
        ("/users/tokens", {"label": "forged"}),
    ]
    for path, form in forged:
        answer = admin.post_form(path, form)
        assert answer.status_code == 403, (path, answer.status_code)
        assert "this console is read-only" in answer.text, path
        htmx = admin.post_form(path, form, headers=HTMX)  # htmx: the message in #flash
        assert htmx.headers.get("HX-Retarget") == "#flash", path
        assert "this console is read-only" in htmx.text, path
    # PUT and PATCH and DELETE on a page are refused alike
    for method in ("PUT", "PATCH", "DELETE"):
        answer = admin.request(method, "/streams/s", headers={"X-CSRFToken": admin.csrf})
        assert answer.status_code == 403, method
    assert _state(read_only.cluster) == before
    assert admin.post_form("/logout").status_code == 302  # logging out works too


def test_the_json_api_refuses_every_change(read_only):
    cluster = read_only.cluster
    api = read_only.api(cluster.create_api_token("admin", "reading"))
    before = _state(cluster)
    assert api.get("/api/v1/streams").status_code == 200
    for method, path, body in (
        ("POST", "/api/v1/streams", {"path": "/evil"}),
        ("PATCH", "/api/v1/streams/s", {"ttl": 1}),
        ("DELETE", "/api/v1/streams/s", None),
        ("POST", "/api/v1/topics", {"name": "/s:new", "partitions": 1}),
        ("PATCH", "/api/v1/topics/s:t", {"ttl": 1}),
        ("DELETE", "/api/v1/topics/s:t", None),
        ("POST", "/api/v1/topics/s:t/messages", {"value": "forged"}),
        ("POST", "/api/v1/groups/g/reset", {"topic": "/s:t", "to": "latest"}),
        ("DELETE", "/api/v1/groups/g", None),
    ):
        answer = api.request(method, path, json=body)
        assert answer.status_code == 403, (method, path)
        assert answer.json() == {
            "error": "AccessDenied",
            "message": "this console is read-only (read-only console, plet web "
            "--read-only): it serves no changes",
        }
    # the schema registry (Kafka clients' door) answers in its own shape
    for method, path, body in (
        ("PUT", "/registry/config", {"compatibility": "NONE"}),
        ("POST", "/registry/subjects/s:t-value/versions", {"schema": '"string"'}),
    ):
        answer = api.request(method, path, json=body)
        assert answer.status_code == 403 and answer.json()["error_code"] == 40301, path
    assert cluster.schemas.subjects() == []
    assert _state(cluster) == before


def test_a_read_only_users_token_is_refused_by_the_engine(live_web):
    cluster = live_web.cluster
    _seed(cluster)
    cluster.edit_stream("/s", admin_perm="g:analysts", produce_perm="g:analysts")
    cluster.edit_user("alice", read_only=True)
    api = live_web.api(cluster.create_api_token("alice", "hers"))
    before = _state(cluster)
    assert api.get("/api/v1/topics/s:t").status_code == 200  # reading is hers
    for method, path, body in (
        ("DELETE", "/api/v1/streams/s", None),
        ("POST", "/api/v1/topics/s:t/messages", {"value": "forged"}),
    ):
        answer = api.request(method, path, json=body)
        assert answer.status_code == 403, (method, path)
        assert "'alice' is read-only" in answer.json()["message"]
    assert _state(cluster) == before
