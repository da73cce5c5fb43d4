"""Actions only where allowed (web/allowed.py, engine.auth.actions): a user sees only the
buttons they may use (the reason on hover for the others); a read-only console
(`plet web --read-only`) refuses every change on pages and the JSON API, before any view;
a read-only user (the Users page's flag) is refused every change by the engine."""

from __future__ import annotations

import re

import pytest

from engine import Consumer, OffsetAndMetadata, TopicPartition
from tests.web.conftest import ADMIN, ADMIN_PASSWORD, USER, USER_PASSWORD, login


def _text(answer) -> str:
    return answer.get_data(as_text=True)


def _buttons(html: str) -> list[str]:
    return [
        re.sub(r"\s+", " ", b).strip() for b in re.findall(r"<button[^>]*>(.*?)</button>", html)
    ]


def _seed(cluster) -> None:
    cluster.create_stream("/s", consume_perm="p")
    cluster.create_topic("/s:t", 1)
    consumer = Consumer(cluster, group_id="g", enable_auto_commit=False)
    consumer.assign([TopicPartition("/s:t", 0)])
    consumer.commit({TopicPartition("/s:t", 0): OffsetAndMetadata(0)})
    consumer.close()
    cluster.set_group_permissions("g", describe_perm="p")  # everyone sees it, no more


# --- a limited user -----------------------------------------------------------------------


def test_a_limited_user_sees_no_button_they_may_not_use(cluster, user_client, client):
    _seed(cluster)
    stream = _text(user_client.get("/streams/s"))
    assert not {"Delete stream", "Save policies", "Delete"} & set(_buttons(stream))
    assert 'title="needs admin_perm on /s" data-denied="Delete stream"' in stream
    assert 'title="needs topic_perm on /s" data-denied="Create topic"' in stream
    assert 'title="needs topic_perm on /s" data-denied="Delete"' in stream
    topic = _text(user_client.get("/topics/s:t"))
    assert "Produce" not in _buttons(topic) and "Register schema" not in _buttons(topic)
    assert 'title="needs produce_perm on /s" data-denied="Produce"' in topic
    group = _text(user_client.get("/groups/g"))
    assert not {"Reset offsets", "Delete group…", "Preview"} & set(_buttons(group))
    assert 'title="needs reset_perm on group g" data-denied="Reset offsets"' in group
    assert 'title="needs delete_perm on group g" data-denied="Delete group"' in group
    assert "read-only-badge" not in stream  # she may change other things (her streams)
    # the administrator (the creator's ACEs pass a super user) sees them all
    assert {"Delete stream", "Save policies", "Delete"} <= set(
        _buttons(_text(client.get("/streams/s")))
    )
    assert "Produce" in _buttons(_text(client.get("/topics/s:t")))
    assert {"Reset offsets", "Delete group…"} <= set(_buttons(_text(client.get("/groups/g"))))


# --- a read-only console ------------------------------------------------------------------


@pytest.fixture
def read_only(app):
    app.config["READ_ONLY"] = True
    return app


def test_a_read_only_console_shows_no_change_and_refuses_a_forged_one(read_only, cluster):
    _seed(cluster)
    client = read_only.test_client()
    csrf = login(client, ADMIN, ADMIN_PASSWORD)  # logging in still works
    page = _text(client.get("/streams/s"))
    assert 'class="badge read-only-badge"' in page
    assert 'title="read-only console" data-denied="Delete stream"' in page
    assert _buttons(page).count("Log out") == 1
    assert not {"Delete stream", "Save policies", "Delete"} & set(_buttons(page))
    assert "Add user" not in _buttons(_text(client.get("/users")))
    forged = [
        ("/streams/s/~/delete", {}),
        ("/streams/s/~/policies", {"ttl": "1"}),
        ("/streams/s/~/topics/delete", {"name": "t"}),
        ("/streams", {"path": "/new"}),
        ("/topics/s:t/produce", {"value": "x"}),
        ("/groups/g", {"action": "delete"}),
        ("/users/add", {"name": "eve", "password": "eve-password-1"}),
    ]
    for url, form in forged:
        answer = client.post(url, data={**form, "csrf_token": csrf})
        assert answer.status_code == 403, url
        assert "this console is read-only" in _text(answer)
    partial = client.post(
        "/streams/s/~/delete", headers={"HX-Request": "true", "X-CSRFToken": csrf}
    )
    assert partial.headers["HX-Retarget"] == "#flash" and "read-only" in _text(partial)
    assert cluster.stream("/s").policies["ttl"] != 1
    assert [t.name for t in cluster.topics("/s")] == ["/s:t"]
    assert cluster.topic("/s:t").partitions[0].log_end_offset == 0
    assert [g.group_id for g in cluster.groups()] == ["g"]
    assert [s.path for s in cluster.streams()] == ["/s"]
    assert "eve" not in {u.name for u in cluster.users()}
    # stopping one's own message search changes nothing of the cluster: still served
    stop = client.post(
        "/topics/s:t/search/0123456789abcdef/cancel",
        headers={"HX-Request": "true", "X-CSRFToken": csrf},
    )
    assert stop.status_code == 200 and "read-only" not in _text(stop)
    assert client.post("/logout", data={"csrf_token": csrf}).status_code == 302


def test_a_read_only_console_refuses_every_api_change(read_only, cluster):
    _seed(cluster)
    client = read_only.test_client()
    headers = {"Authorization": f"Bearer {cluster.create_api_token(ADMIN, 'tests')}"}
    assert client.get("/api/v1/streams", headers=headers).status_code == 200
    for method, url, body in (
        ("POST", "/api/v1/streams", {"path": "/new"}),
        ("PATCH", "/api/v1/streams/s", {"ttl": 1}),
        ("DELETE", "/api/v1/streams/s", None),
        ("DELETE", "/api/v1/topics/s:t", None),
        ("POST", "/api/v1/topics/s:t/messages", {"value": "x"}),
        ("DELETE", "/api/v1/groups/g", None),
    ):
        answer = client.open(url, method=method, json=body, headers=headers)
        assert answer.status_code == 403, (method, url)
        assert answer.get_json()["error"] == "AccessDenied"
        assert "read-only" in answer.get_json()["message"]
    assert [s.path for s in cluster.streams()] == ["/s"]
    assert cluster.topic("/s:t").partitions[0].log_end_offset == 0


# --- a read-only user ---------------------------------------------------------------------


def test_the_users_page_sets_the_read_only_flag_and_the_engine_refuses_her(app, cluster, client):
    _seed(cluster)
    cluster.edit_stream("/s", admin_perm="g:analysts", topic_perm="g:analysts")
    alice = app.test_client()
    alice_csrf = login(alice, USER, USER_PASSWORD)
    assert "Delete stream" in _buttons(_text(alice.get("/streams/s")))
    answer = client.post(
        f"/users/{USER}/edit",
        data={"groups": "analysts", "read_only": "on", "csrf_token": client.csrf},
    )
    assert answer.status_code == 302 and cluster.user(USER).read_only
    assert "Read-only</dt><dd>yes" in _text(client.get(f"/users/{USER}"))
    page = _text(alice.get("/streams/s"))  # the same session: the flag applies at once
    assert 'class="badge read-only-badge" title="read-only user' in page
    assert 'title="read-only user" data-denied="Delete stream"' in page
    refused = alice.post("/streams/s/~/delete", data={"csrf_token": alice_csrf})
    assert refused.status_code == 403 and "is read-only" in _text(refused)
    assert [s.path for s in cluster.streams()] == ["/s"]
    permissions = _text(alice.get(f"/users/{USER}/permissions"))
    assert '<span class="muted">(read-only user)</span>' in permissions
    # her own password is still hers to change
    assert "Change password" in _buttons(_text(alice.get("/users")))
    # an administrator cannot lock themselves out
    mine = client.post(
        f"/users/{ADMIN}/edit",
        data={"admin": "on", "read_only": "on", "csrf_token": client.csrf},
    )
    assert mine.status_code == 400 and "cannot make yourself read-only" in _text(mine)
    assert not cluster.user(ADMIN).read_only
    added = client.post(
        "/users/add",
        data={
            "name": "eve",
            "password": "eve-password-1",
            "read_only": "on",
            "csrf_token": client.csrf,
        },
    )
    assert added.status_code == 302 and cluster.user("eve").read_only


def test_plet_web_read_only_refuses_the_kafka_listener(tmp_path):
    from click.testing import CliRunner

    from engine.cli import cli

    got = CliRunner().invoke(
        cli,
        ["web", "--read-only", "--kafka", "127.0.0.1:0", "--cluster", str(tmp_path / "c")],
        env={"PLET_CLUSTER": None},
    )
    assert got.exit_code == 2
    assert "--read-only serves no changes, and --kafka would take them" in got.output
    assert not (tmp_path / "c").exists()  # refused before anything was opened
