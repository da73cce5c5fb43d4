"""The Users page (web/users.py): own API tokens and password for everyone; adding,
editing, resetting and deleting users for administrators. Effects are checked in the
engine, and bad input changes nothing and says why next to the field."""

from __future__ import annotations

import html
import re

from tests.web.conftest import ADMIN, ADMIN_PASSWORD, USER, USER_PASSWORD, login


def text(answer) -> str:
    return html.unescape(answer.get_data(as_text=True))


def test_the_page_shows_own_tokens_and_admin_sections(client, user_client, cluster):
    cluster.create_api_token(USER, "alice-ci")
    cluster.create_api_token(ADMIN, "admin-ci")
    page = text(user_client.get("/users"))
    assert "Your API tokens" in page and "alice-ci" in page
    assert "admin-ci" not in page  # only her own
    assert "All users" not in page and "Add user" not in page
    page = text(client.get("/users"))
    assert "admin-ci" in page and "alice-ci" not in page
    assert "All users" in page and "Add user" in page
    assert re.search(r">alice</a>.*?analysts.*?no", page, re.S)
    assert 'href="/users"' in client.get("/").get_data(as_text=True)  # in the nav


def test_create_a_token_shown_once_then_listed_and_usable(user_client, cluster, app):
    got = user_client.post(
        "/users/tokens", data={"label": "laptop", "csrf_token": user_client.csrf}
    )
    assert got.status_code == 200
    token = re.search(r'id="new-token"[^>]*value="([^"]+)"', got.get_data(as_text=True)).group(1)
    assert cluster.user_for_token(token).name == USER
    [info] = cluster.api_tokens(USER)
    assert info.label == "laptop"
    page = text(user_client.get("/users"))
    assert token not in page and info.id in page and "laptop" in page
    api = app.test_client().get("/api/v1/streams", headers={"Authorization": f"Bearer {token}"})
    assert api.status_code == 200
    assert "never" not in text(user_client.get("/users"))  # last used is recorded


def test_a_too_long_label_is_refused_inline(user_client, cluster):
    got = user_client.post(
        "/users/tokens", data={"label": "x" * 201, "csrf_token": user_client.csrf}
    )
    assert got.status_code == 400
    assert 'aria-invalid="true"' in got.get_data(as_text=True)
    assert "at most 200" in text(got)
    assert cluster.api_tokens(USER) == []


def test_revoke_own_token_only(user_client, client, cluster):
    cluster.create_api_token(USER, "a")
    cluster.create_api_token(ADMIN, "b")
    alice_id = cluster.api_tokens(USER)[0].id
    admin_id = cluster.api_tokens(ADMIN)[0].id
    got = user_client.post(
        f"/users/tokens/{admin_id}/revoke", data={"csrf_token": user_client.csrf}
    )
    assert got.status_code == 404 and "no token" in text(got)
    assert len(cluster.api_tokens(ADMIN)) == 1
    got = user_client.post(
        f"/users/tokens/{alice_id}/revoke", data={"csrf_token": user_client.csrf}
    )
    assert got.status_code == 302
    assert cluster.api_tokens(USER) == []
    assert "revoked" in text(user_client.get("/users"))


def test_change_own_password(user_client, cluster, app):
    def change(current, new, confirm):
        return user_client.post(
            "/users/password",
            data={
                "current_password": current,
                "new_password": new,
                "confirm_password": confirm,
                "csrf_token": user_client.csrf,
            },
        )

    got = change("wrong-password", "new-password-1", "new-password-1")
    assert got.status_code == 400 and "not your current password" in text(got)
    got = change(USER_PASSWORD, "short", "short")
    assert got.status_code == 400 and "at least 8" in text(got)
    got = change(USER_PASSWORD, "new-password-1", "new-password-2")
    assert got.status_code == 400 and "differ" in text(got)
    assert cluster.authenticate(USER, USER_PASSWORD) is not None  # nothing changed
    got = change(USER_PASSWORD, "new-password-1", "new-password-1")
    assert got.status_code == 302
    assert cluster.authenticate(USER, "new-password-1") is not None
    assert cluster.authenticate(USER, USER_PASSWORD) is None
    login(app.test_client(), USER, "new-password-1")


def test_admin_adds_a_user_with_inline_errors(client, cluster):
    def add(**fields):
        return client.post("/users/add", data={**fields, "csrf_token": client.csrf})

    got = add(name="bad name", password="long-enough-1")
    assert got.status_code == 400 and "invalid user name" in text(got)
    got = add(name="bob", password="short")
    assert got.status_code == 400 and "8 to" in text(got)
    got = add(name="bob", password="long-enough-1", groups="ok, bad group")
    assert got.status_code == 400 and "invalid group name" in text(got)
    assert 'value="ok, bad group"' in got.get_data(as_text=True)  # kept as typed
    got = add(name=USER, password="long-enough-1")
    assert got.status_code == 400 and "exists already" in text(got)
    assert [u.name for u in cluster.users()] == [ADMIN, USER]
    got = add(name="bob", password="long-enough-1", groups="ops, analysts", admin="on")
    assert got.status_code == 302
    bob = cluster.user("bob")
    assert bob.groups == ("analysts", "ops") and bob.admin
    assert cluster.authenticate("bob", "long-enough-1") is not None


def test_admin_edits_resets_and_deletes(client, cluster, app):
    page = text(client.get(f"/users/{USER}"))
    assert "User alice" in page and "Delete user alice" in page
    got = client.post(
        f"/users/{USER}/edit", data={"groups": "ops", "admin": "on", "csrf_token": client.csrf}
    )
    assert got.status_code == 302
    assert cluster.user(USER).groups == ("ops",) and cluster.user(USER).admin
    got = client.post(
        f"/users/{USER}/edit", data={"groups": "b@d group", "csrf_token": client.csrf}
    )
    assert got.status_code == 400 and "invalid group name" in text(got)
    assert cluster.user(USER).groups == ("ops",)
    got = client.post(f"/users/{USER}/password", data={"password": "x", "csrf_token": client.csrf})
    assert got.status_code == 400
    got = client.post(
        f"/users/{USER}/password", data={"password": "reset-password-1", "csrf_token": client.csrf}
    )
    assert got.status_code == 302 and cluster.authenticate(USER, "reset-password-1")
    cluster.create_api_token(USER, "x")
    token_id = cluster.api_tokens(USER)[0].id
    got = client.post(f"/users/{USER}/tokens/{token_id}/revoke", data={"csrf_token": client.csrf})
    assert got.status_code == 302 and cluster.api_tokens(USER) == []
    cluster.create_api_token(USER, "y")
    got = client.post(f"/users/{USER}/delete", data={"csrf_token": client.csrf})
    assert got.status_code == 400 and "confirm" in text(got)
    assert cluster.user(USER)
    got = client.post(f"/users/{USER}/delete", data={"confirm": "on", "csrf_token": client.csrf})
    assert got.status_code == 302
    assert [u.name for u in cluster.users()] == [ADMIN]
    assert cluster.api_tokens(USER) == []
    assert client.get(f"/users/{USER}").status_code == 404


def test_an_admin_cannot_delete_or_demote_themselves(client, cluster):
    got = client.post(f"/users/{ADMIN}/delete", data={"confirm": "on", "csrf_token": client.csrf})
    assert got.status_code == 400 and "cannot delete yourself" in text(got)
    got = client.post(f"/users/{ADMIN}/edit", data={"groups": "", "csrf_token": client.csrf})
    assert got.status_code == 400 and "own administrator rights" in text(got)
    assert cluster.user(ADMIN).admin


def test_plain_users_cannot_manage_others(user_client, cluster):
    assert user_client.get(f"/users/{ADMIN}").status_code == 403
    for url, data in (
        ("/users/add", {"name": "eve", "password": "long-enough-1", "admin": "on"}),
        (f"/users/{USER}/edit", {"groups": "ops", "admin": "on"}),
        (f"/users/{ADMIN}/password", {"password": "taken-over-1"}),
        (f"/users/{ADMIN}/delete", {"confirm": "on"}),
    ):
        got = user_client.post(url, data={**data, "csrf_token": user_client.csrf})
        assert got.status_code == 403, url
    assert [u.name for u in cluster.users()] == [ADMIN, USER]
    assert not cluster.user(USER).admin
    assert cluster.authenticate(ADMIN, ADMIN_PASSWORD) is not None


def test_a_deleted_users_session_ends(app, client, cluster):
    other = app.test_client()
    login(other, USER, USER_PASSWORD)
    assert other.get("/users").status_code == 200
    client.post(f"/users/{USER}/delete", data={"confirm": "on", "csrf_token": client.csrf})
    got = other.get("/users")
    assert got.status_code == 302 and "/login" in got.headers["Location"]
