"""Attacks on the console's logins and sessions (issue 12, findings 5 and 6, passwords and
API token expiry), against a live console over real sockets.

A thief copies alice's session cookie into a fresh client, the way a stolen cookie is
replayed, and the test checks when the copy stops working: at logout, a password change
(through the Users page, and from the engine in this process as the CLI would, and from a
real `plet` process), an admin flag change, the deletion of the user (even once a new
`alice` exists), and the session's absolute and idle limits. A guesser sends wrong
passwords and the test checks the throttles, per user name and per client address (the
second address is 127.0.0.2, which reaches the server's 127.0.0.1 on loopback), and that
concurrent logins never run more password hashes at once than the bound.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from engine import errors
from engine.auth import users as user_store
from engine.clock import FakeClock, now_ms
from engine.times import format_ms
from tests.conftest import live_module
from web import state

live = live_module()
ADMIN, ADMIN_PASSWORD = live.ADMIN, live.ADMIN_PASSWORD
USER, USER_PASSWORD = live.USER, live.USER_PASSWORD
COOKIE = "plet_session"
USER_FAILURES, USER_LOCK_S, ADDRESS_FAILURES = (
    live.USER_FAILURES,
    live.USER_LOCK_S,
    live.ADDRESS_FAILURES,
)
from_address = live.from_address
ROOT = Path(__file__).resolve().parents[2]


def steal(live_web, victim: requests.Session, address: str | None = None):
    """A fresh client holding a copy of `victim`'s session cookie, and nothing else."""
    thief = live_web.browser()
    if address is not None:
        from_address(thief, address)
    value = victim.cookies.get(COOKIE)
    assert value, "the victim has no session cookie"
    thief.cookies.set(COOKIE, value)
    return thief


def page(client: requests.Session, path: str = "/users", **kw) -> requests.Response:
    """GET without following a redirect (requests' get() follows them by default)."""
    return client.get(path, allow_redirects=False, **kw)


def assert_in(client: requests.Session) -> None:
    got = page(client)
    assert got.status_code == 200, (got.status_code, got.headers.get("Location"))
    assert "Your API tokens" in got.text


def assert_out(client: requests.Session) -> None:
    """The copy is refused: a page redirects to the login, an htmx request gets 401 with
    HX-Redirect to it."""
    got = page(client)
    assert got.status_code == 302 and got.headers["Location"].startswith("/login"), (
        got.status_code,
        got.headers.get("Location"),
    )
    got = page(client, headers={"HX-Request": "true"})
    assert got.status_code == 401 and "/login" in got.headers["HX-Redirect"]


def try_login(client, name: str, password: str) -> requests.Response:
    return client.login(name, password)


def plet(*args: str) -> subprocess.CompletedProcess:
    """The real `plet` in its own process (another process than the server's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PLET_CLUSTER",)}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# --- finding 5: sessions end with logout, password, admin flag, deletion ---------------------


def test_a_copied_cookie_dies_at_logout(live_web):
    alice = live_web.browser(USER)
    thief = steal(live_web, alice)
    assert_in(thief)
    assert alice.post_form("/logout").status_code == 302
    assert_out(thief)
    assert_out(alice)


def test_a_copied_cookie_dies_when_she_changes_her_password_on_the_users_page(live_web):
    alice = live_web.browser(USER)
    thief = steal(live_web, alice)
    assert_in(thief)
    got = alice.post_form(
        "/users/password",
        {
            "current_password": USER_PASSWORD,
            "new_password": "a-new-secret-77",
            "confirm_password": "a-new-secret-77",
        },
    )
    assert got.status_code == 302, got.text[:500]
    assert_out(thief)
    # the browser that changed it keeps going, on a fresh session
    got = page(alice)
    assert got.status_code == 200 and "other sessions have ended" in got.text
    assert alice.cookies.get(COOKIE) != thief.cookies.get(COOKIE)


def test_a_copied_cookie_dies_when_the_engine_sets_her_password(live_web):
    alice = live_web.browser(USER)
    thief = steal(live_web, alice)
    assert_in(thief)
    live_web.cluster.set_password(USER, "a-new-secret-77")  # as `plet user passwd` does
    assert_out(thief)
    assert_out(alice)


def test_a_copied_cookie_dies_when_plet_in_another_process_sets_her_password(live_web):
    alice = live_web.browser(USER)
    thief = steal(live_web, alice)
    assert_in(thief)
    got = plet(
        "user",
        "passwd",
        USER,
        "--password",
        "a-new-secret-77",
        "--cluster",
        str(live_web.cluster_path),
    )
    assert got.returncode == 0, got.stderr
    assert_out(thief)


def test_an_admin_password_reset_ends_her_sessions(live_web):
    alice = live_web.browser(USER)
    thief = steal(live_web, alice)
    admin = live_web.browser(ADMIN)
    got = admin.post_form(f"/users/{USER}/password", {"password": "a-new-secret-77"})
    assert got.status_code == 302
    assert_out(thief)
    assert_in(admin)


def test_a_copied_cookie_of_a_deleted_user_stays_dead_for_a_new_user_of_that_name(live_web):
    alice = live_web.browser(USER)
    thief = steal(live_web, alice)
    assert_in(thief)
    admin = live_web.browser(ADMIN)
    got = admin.post_form(f"/users/{USER}/delete", {"confirm": "on"})
    assert got.status_code == 302
    got = admin.post_form("/users/add", {"name": USER, "password": USER_PASSWORD})
    assert got.status_code == 302, got.text[:500]
    assert live_web.cluster.user(USER)
    assert_out(thief)
    assert_out(alice)
    assert_in(live_web.browser(USER))  # the new alice logs in herself


@pytest.mark.parametrize("grant", [True, False])
def test_a_copied_cookie_dies_when_her_admin_flag_changes(live_web, grant):
    if not grant:
        live_web.cluster.edit_user(USER, admin=True)
    alice = live_web.browser(USER)
    thief = steal(live_web, alice)
    assert_in(thief)
    admin = live_web.browser(ADMIN)
    data = {"groups": "analysts", **({"admin": "on"} if grant else {})}
    got = admin.post_form(f"/users/{USER}/edit", data)
    assert got.status_code == 302
    assert live_web.cluster.user(USER).admin is grant
    assert_out(thief)
    assert_out(alice)
    assert_in(admin)


def test_a_group_change_keeps_her_session(live_web):
    alice = live_web.browser(USER)
    admin = live_web.browser(ADMIN)
    got = admin.post_form(f"/users/{USER}/edit", {"groups": "ops"})
    assert got.status_code == 302
    assert_in(alice)


def on_a_fake_clock(server, monkeypatch) -> FakeClock:
    """Put the live server's cluster on a fake clock (the views it makes per request take
    it from there): the sessions' lifetimes pass when the test moves it, however busy the
    machine is. Flask's own cookie signature keeps real time (it is not under test here)."""
    clock = FakeClock(now_ms=now_ms())
    monkeypatch.setattr(state(server.app).cluster, "clock", clock)
    return clock


@pytest.fixture
def short_lived(tmp_path, monkeypatch):
    """A live console whose sessions last 2 s from login, however busy, on a fake clock."""
    with live.serve(tmp_path / "short", SESSION_ABSOLUTE_LIFETIME=2) as server:
        server.clock = on_a_fake_clock(server, monkeypatch)
        yield server


def test_a_session_ends_at_its_absolute_lifetime_however_busy(short_lived):
    clock = short_lived.clock
    alice = short_lived.browser(USER)
    thief = steal(short_lived, alice)
    assert_in(thief)
    # keep using it (each answer renews the cookie): the end stays where it was
    for _ in range(3):
        clock.advance(0.6)
        assert_in(thief)  # 0.6, 1.2, 1.8 s after login
    clock.advance(0.2)
    got = page(thief)
    assert got.status_code == 302 and got.headers["Location"].startswith("/login")
    assert_out(alice)


@pytest.fixture
def quickly_idle(tmp_path, monkeypatch):
    """A live console whose sessions end after 2 s unused, on a fake clock."""
    with live.serve(tmp_path / "idle", PERMANENT_SESSION_LIFETIME=2) as server:
        server.clock = on_a_fake_clock(server, monkeypatch)
        yield server


def test_an_unused_session_ends_on_the_server_whatever_the_cookie_says(quickly_idle):
    alice = quickly_idle.browser(USER)
    value = alice.cookies.get(COOKIE)
    # a raw header: a thief's client ignores the cookie's own expiry date
    raw = {"Cookie": f"{COOKIE}={value}"}
    fresh = quickly_idle.browser()
    assert page(fresh, headers=raw).status_code == 200
    quickly_idle.clock.advance(2.001)  # unused for longer than its idle time
    got = page(quickly_idle.browser(), headers=raw)
    assert got.status_code == 302 and got.headers["Location"].startswith("/login")


def test_the_cookie_holds_no_user_name(live_web):
    """The cookie names a server-side session only: a cookie of the old kind (a signed
    user name, as the console used to trust) is no login, even correctly signed."""
    alice = live_web.browser(USER)
    serializer = live_web.app.session_interface.get_signing_serializer(live_web.app)
    assert USER not in repr(serializer.loads(alice.cookies.get(COOKIE)))
    thief = live_web.browser()
    thief.cookies.set(COOKIE, serializer.dumps({"user": USER}))
    assert_out(thief)


# --- finding 6: throttled logins ----------------------------------------------------------


def test_wrong_passwords_for_alice_throttle_her_name_from_every_address(live_web):
    guesser = live_web.browser()
    for i in range(USER_FAILURES):
        got = try_login(guesser, USER, f"guess-number-{i}")
        assert got.status_code == 401 and "Wrong username or password" in got.text
    got = try_login(guesser, USER, "guess-number-x")
    assert got.status_code == 429
    wait = int(got.headers["Retry-After"])
    assert 0 < wait <= USER_LOCK_S
    assert f"Too many wrong passwords for this user. Try again in {wait} seconds." in got.text
    assert 'role="alert"' in got.text
    # the right password is refused too while she waits, from any address
    assert try_login(live_web.browser(), USER, USER_PASSWORD).status_code == 429
    other_address = from_address(live_web.browser(), "127.0.0.2")
    assert try_login(other_address, USER, USER_PASSWORD).status_code == 429
    # other users are not blocked by her throttle, from this address or another
    assert try_login(live_web.browser(), ADMIN, ADMIN_PASSWORD).status_code == 302
    other_address = from_address(live_web.browser(), "127.0.0.2")
    assert try_login(other_address, ADMIN, ADMIN_PASSWORD).status_code == 302


def test_an_unknown_name_is_throttled_like_a_known_one(live_web):
    """The throttle tells nothing about which names exist."""
    answers = {}
    for name in (USER, "nobody-here"):
        client = live_web.browser()
        answers[name] = [
            try_login(client, name, f"guess-{i}").status_code for i in range(USER_FAILURES + 1)
        ]
    assert answers[USER] == answers["nobody-here"] == [401] * USER_FAILURES + [429]


def test_a_successful_login_resets_her_count(live_web):
    client = live_web.browser()
    for i in range(USER_FAILURES - 1):
        assert try_login(client, USER, f"typo-{i}").status_code == 401
    assert try_login(live_web.browser(), USER, USER_PASSWORD).status_code == 302
    # counted from zero again: a full run of failures before the wait
    for i in range(USER_FAILURES):
        assert try_login(client, USER, f"typo-again-{i}").status_code == 401
    assert try_login(client, USER, "typo-too-many").status_code == 429


def test_a_password_spray_from_one_address_is_throttled_there_only(live_web):
    sprayer = live_web.browser()
    for i in range(ADDRESS_FAILURES):  # one guess per name: no name reaches its own limit
        got = try_login(sprayer, f"user{i}", "Summer2024!")
        assert got.status_code == 401, i
    got = try_login(sprayer, "user-next", "Summer2024!")
    assert got.status_code == 429
    wait = int(got.headers["Retry-After"])
    assert 0 < wait <= 60
    assert f"Too many failed logins from your address. Try again in {wait} seconds." in got.text
    # even the right password, from that address
    assert try_login(live_web.browser(), ADMIN, ADMIN_PASSWORD).status_code == 429
    # another address is not blocked
    other = from_address(live_web.browser(), "127.0.0.2")
    assert try_login(other, ADMIN, ADMIN_PASSWORD).status_code == 302
    assert_in(other)


def test_concurrent_logins_never_run_more_hashes_than_the_bound(live_web, monkeypatch):
    gate = user_store.HASH_GATE
    assert 2 <= gate.limit <= 4
    # no waiting for a slot, so that the excess shows at once (the default waits briefly)
    monkeypatch.setattr(gate, "wait_s", 0.0)
    # each hash held for 0.5 s: on an idle machine 16 quick hashes could run one after
    # another and never reach the bound (CI saw 16 answers of 401, none refused)
    scrypt = user_store._scrypt

    def slow_scrypt(*args, **kwargs):
        time.sleep(0.5)
        return scrypt(*args, **kwargs)

    monkeypatch.setattr(user_store, "_scrypt", slow_scrypt)
    clients = 16
    browsers = []
    for i in range(clients):
        # each from its own address: one address has at most a few checks running at once
        # (engine.auth.logins), so the bound of the process shows with many
        b = from_address(live_web.browser(), f"127.0.0.{i + 2}")
        b.token = live.csrf_of(page(b, "/login").text)
        browsers.append(b)
    gate.reset_peak()
    start = threading.Barrier(clients)
    answers: list[requests.Response | BaseException] = [None] * clients  # type: ignore[list-item]  # each slot filled by its thread

    def run(i: int) -> None:
        b = browsers[i]
        start.wait()
        try:
            answers[i] = b.post(
                "/login",
                data={"username": f"guess{i}", "password": "wrong-guess-1", "csrf_token": b.token},
            )
        except BaseException as exc:  # reported below
            answers[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    statuses = [a.status_code if isinstance(a, requests.Response) else repr(a) for a in answers]
    assert set(statuses) <= {401, 503}, statuses
    assert 1 <= gate.peak <= gate.limit, gate.peak
    refused = [a for a in answers if a.status_code == 503]
    assert refused, statuses
    for answer in refused:
        assert int(answer.headers["Retry-After"]) >= 1
        assert "The server is busy checking other logins" in answer.text
    assert gate.running == 0


# --- passwords ----------------------------------------------------------------------------


LONG_NAME = "bob-the-builder"


@pytest.mark.parametrize(
    "password, message",
    [
        ("password123", "most common passwords"),
        ("Sunshine", "most common passwords"),
        (LONG_NAME, "user's name"),
        (LONG_NAME.upper()[::-1], "user's name"),
    ],
)
def test_the_users_page_refuses_common_passwords_and_the_users_name(live_web, password, message):
    admin = live_web.browser(ADMIN)
    got = admin.post_form("/users/add", {"name": LONG_NAME, "password": password})
    assert got.status_code == 400 and message in html.unescape(got.text)
    assert 'aria-invalid="true" aria-describedby="add-password-error"' in got.text
    assert [u.name for u in live_web.cluster.users()] == [ADMIN, USER]


def test_an_admin_cannot_reset_a_password_to_a_common_one(live_web):
    admin = live_web.browser(ADMIN)
    got = admin.post_form(f"/users/{USER}/password", {"password": "Password1"})
    assert got.status_code == 400 and "most common passwords" in got.text
    assert live_web.cluster.authenticate(USER, USER_PASSWORD) is not None


def test_one_cannot_change_ones_password_to_a_common_one_or_ones_name(live_web):
    live_web.cluster.add_user(LONG_NAME, "can-we-fix-it-1")
    bob = live_web.browser(LONG_NAME, "can-we-fix-it-1")
    for new, message in (
        ("iloveyou1", "most common passwords"),
        ("Bob-The-Builder", "user's name"),
    ):
        got = bob.post_form(
            "/users/password",
            {"current_password": "can-we-fix-it-1", "new_password": new, "confirm_password": new},
        )
        assert got.status_code == 400 and message in html.unescape(got.text)
    assert live_web.cluster.authenticate(LONG_NAME, "can-we-fix-it-1") is not None


# --- API tokens expire --------------------------------------------------------------------


def token_row(listing: str, token_id: str) -> str:
    found = re.search(rf"<tr>\s*<td><code>{token_id}</code>.*?</tr>", listing, re.S)
    assert found, "the token is not listed"
    return found.group(0)


def test_an_expired_api_token_gets_401_saying_so(live_web, monkeypatch):
    alice = live_web.browser(USER)
    got = alice.post_form("/users/tokens", {"label": "ci", "expires": "1d"})
    assert got.status_code == 200
    token = re.search(r'id="new-token"[^>]*value="([^"]+)"', got.text).group(1)
    [info] = live_web.cluster.api_tokens(USER)
    assert (
        info.expires_ms is not None and 86_000_000 < info.expires_ms - info.created_ms <= 86_400_000
    )
    row = token_row(page(alice).text, info.id)
    assert format_ms(info.expires_ms) in row and "expired" not in row
    assert live_web.api(token).get("/api/v1/streams").status_code == 200
    # a day and a minute later
    on_a_fake_clock(live_web, monkeypatch).advance(86_460)
    got = live_web.api(token).get("/api/v1/streams")
    assert got.status_code == 401
    body = got.json()
    assert body["error"] == "TokenExpired" and "expired" in body["message"]
    assert "plet user token" in body["message"]
    # listed as expired (her session of a day ago has ended too: she logs in again)
    alice = live_web.browser(USER)
    assert re.search(r"<strong[^>]*>expired</strong>", token_row(page(alice).text, info.id))


def test_a_cookie_thief_cannot_guess_her_current_password_on_the_users_page(live_web):
    """Changing the password needs the current one: guessing it is throttled like a login."""
    thief = steal(live_web, live_web.browser(USER))
    thief.csrf = live.csrf_of(page(thief).text)
    for i in range(USER_FAILURES):
        got = thief.post_form(
            "/users/password",
            {
                "current_password": f"guess-{i}",
                "new_password": "owned-by-eve-1",
                "confirm_password": "owned-by-eve-1",
            },
        )
        assert got.status_code == 400 and "not your current password" in got.text
    got = thief.post_form(
        "/users/password",
        {
            "current_password": USER_PASSWORD,
            "new_password": "owned-by-eve-1",
            "confirm_password": "owned-by-eve-1",
        },
    )
    assert got.status_code == 429 and int(got.headers["Retry-After"]) > 0
    assert "Too many wrong passwords for" in html.unescape(got.text)
    with pytest.raises(errors.LoginThrottled):  # the name waits, for the login form too
        live_web.cluster.authenticate(USER, USER_PASSWORD)
