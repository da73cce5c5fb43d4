"""What guards the console's logins, in the engine (engine/users.py, issue 12 findings 5 and
6): server-side sessions and what ends them, login throttling per user name, the bound on
password hashes at once, the password rules (NIST SP 800-63B) and API token expiry, on real
catalog files; `plet user` for the same, and a second `Cluster` of the same directory
standing in for another process."""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import timedelta

import pytest

from engine import Cluster, errors
from engine.auth import users as user_store
from engine.clock import FakeClock

PASSWORD = "correct-horse-1"
DAY_MS = 86_400_000


@pytest.fixture
def clock() -> FakeClock:
    """The cluster's clock, moved by the test (sessions, throttles and token expiry read it)."""
    return FakeClock(now_ms=1_800_000_000_000)


@pytest.fixture
def cluster(cluster_path, clock):
    """A fresh cluster on the test's clock."""
    with Cluster.open(cluster_path, name="test", clock=clock) as c:
        yield c


@pytest.fixture
def alice(cluster):
    cluster.add_user("alice", PASSWORD, groups=("analysts",))
    cluster.add_user("bob", PASSWORD)
    return cluster


def rows(cluster, sql: str) -> list[tuple]:
    conn = sqlite3.connect(cluster.path / "catalog.db")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def plet(*args: object, input: str | None = None):
    from click.testing import CliRunner

    from engine.cli import cli

    env = {"PLET_CLUSTER": None, user_store.ADMIN_PASSWORD_ENV: None}
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, env=env)


# --- sessions ------------------------------------------------------------------------------


def test_a_session_names_its_user_and_only_its_hash_is_stored(alice):
    sid = alice.create_session("alice")
    assert alice.session_user(sid) == alice.user("alice")
    assert sid not in repr(rows(alice, "SELECT * FROM web_sessions"))
    for bad in (None, "", 5, "x" * 1000, sid + "x", sid[:-1]):
        assert alice.session_user(bad) is None
    with pytest.raises(errors.UnknownUser):
        alice.create_session("nobody")
    with pytest.raises(errors.InvalidArgument):
        alice.create_session("alice", lifetime_s=0)


def test_logout_ends_that_session_only(alice):
    one, two = alice.create_session("alice"), alice.create_session("alice")
    alice.end_session(one)
    assert alice.session_user(one) is None
    assert alice.session_user(two).name == "alice"
    alice.end_session(one)  # again: nothing to do
    alice.end_session(None)


def test_a_password_change_ends_every_session_of_the_user_in_every_process(alice):
    mine, bobs = alice.create_session("alice"), alice.create_session("bob")
    with Cluster.open(alice.path, clock=alice.clock) as other_process:
        other_process.set_password("alice", "another-secret-9")
    assert alice.session_user(mine) is None
    assert alice.session_user(bobs).name == "bob"


def test_the_admin_flag_changing_ends_sessions_a_group_change_does_not(alice):
    sid = alice.create_session("alice")
    alice.edit_user("alice", groups="ops")
    alice.edit_user("alice", admin=False)  # unchanged
    assert alice.session_user(sid).groups == ("ops",)
    alice.edit_user("alice", admin=True)
    assert alice.session_user(sid) is None
    sid = alice.create_session("alice")
    assert alice.session_user(sid).admin
    alice.edit_user("alice", admin=False)
    assert alice.session_user(sid) is None


def test_a_deleted_users_sessions_do_not_pass_to_a_new_user_of_that_name(alice):
    sid = alice.create_session("alice")
    alice.delete_user("alice")
    assert alice.session_user(sid) is None
    alice.add_user("alice", PASSWORD, admin=True)
    assert alice.session_user(sid) is None
    assert rows(alice, "SELECT user FROM web_sessions") == []  # nothing left to revive
    # and through the command line
    sid = alice.create_session("alice")
    assert plet("user", "delete", "alice", "--cluster", alice.path).exit_code == 0
    assert alice.session_user(sid) is None


def test_a_session_ends_at_its_absolute_lifetime_however_busy(alice, clock):
    sid = alice.create_session("alice", lifetime_s=100)
    for _ in range(9):
        clock.advance(11)
        assert alice.session_user(sid, idle_s=60) is not None
    clock.advance(2)  # 101 s after login
    assert alice.session_user(sid, idle_s=60) is None
    assert rows(alice, "SELECT COUNT(*) FROM web_sessions") == [(0,)]


def test_a_session_ends_when_unused_for_its_idle_time(alice, clock):
    sid = alice.create_session("alice")
    clock.advance(5)
    assert alice.session_user(sid, idle_s=10) is not None  # seen: the idle time restarts
    clock.advance(9)
    assert alice.session_user(sid, idle_s=10) is not None
    clock.advance(11)
    assert alice.session_user(sid, idle_s=10) is None
    clock.set(clock.now_ms() - 11_000)  # the wall clock set back
    assert alice.session_user(sid, idle_s=10) is None  # ended for good, not just refused


def test_ended_sessions_are_purged_at_the_next_login(alice, clock):
    for _ in range(3):
        alice.create_session("alice", lifetime_s=10)
    clock.advance(11)
    alice.create_session("bob")
    assert [u for (u,) in rows(alice, "SELECT user FROM web_sessions")] == ["bob"]


def test_end_sessions_ends_all_of_one_user(alice):
    for _ in range(3):
        alice.create_session("alice")
    kept = alice.create_session("bob")
    assert alice.end_sessions("alice") == 3
    assert alice.session_user(kept) is not None


# --- login throttling ----------------------------------------------------------------------


def test_five_wrong_passwords_make_the_name_wait_doubling_up_to_a_cap(alice, clock):
    assert (user_store.LOGIN_FAILURES, user_store.LOGIN_LOCK_S) == (5, 60)  # as documented
    for _ in range(5):
        assert alice.authenticate("alice", "wrong-guess") is None
    with pytest.raises(errors.LoginThrottled) as caught:
        alice.authenticate("alice", PASSWORD)  # even the right one
    assert caught.value.retry_after == 60 and "try again in 60 seconds" in str(caught.value)
    assert user_store.login_wait(alice, "alice") == 60
    waits = []
    for _ in range(6):
        clock.advance(caught.value.retry_after)
        assert alice.authenticate("alice", "wrong-guess") is None
        with pytest.raises(errors.LoginThrottled) as caught:
            alice.authenticate("alice", "wrong-guess")
        waits.append(caught.value.retry_after)
    assert waits == [120, 240, 480, 900, 900, 900]
    # the others are not held up
    assert alice.authenticate("bob", PASSWORD).name == "bob"


def test_a_success_resets_the_count(alice, clock):
    for _ in range(4):
        assert alice.authenticate("alice", "wrong-guess") is None
    assert alice.authenticate("alice", PASSWORD).name == "alice"
    for _ in range(5):
        assert alice.authenticate("alice", "wrong-guess") is None
    with pytest.raises(errors.LoginThrottled):
        alice.authenticate("alice", "wrong-guess")


def test_failures_are_forgotten_a_window_after_the_last_wait(alice, clock):
    for _ in range(5):
        alice.authenticate("alice", "wrong-guess")
    clock.advance(60 + user_store.LOGIN_WINDOW_S + 1)
    for _ in range(5):  # a fresh run: five more before the next wait
        assert alice.authenticate("alice", "wrong-guess") is None
    with pytest.raises(errors.LoginThrottled) as caught:
        alice.authenticate("alice", "wrong-guess")
    assert caught.value.retry_after == 60


def test_unknown_names_are_throttled_alike_and_do_not_pile_up(alice, clock):
    def run(name: str) -> list[str]:
        got = []
        for _ in range(6):
            try:
                got.append(repr(alice.authenticate(name, "wrong-guess")))
            except errors.LoginThrottled as exc:
                got.append(f"wait {exc.retry_after}")
        return got

    assert run("alice") == run("nobody") == ["None"] * 5 + ["wait 60"]
    for i in range(10):
        alice.authenticate(f"made-up-{i}", "wrong-guess")
    clock.advance(user_store.LOGIN_WINDOW_S + user_store.LOGIN_LOCK_MAX_S + 1)
    alice.authenticate("someone", "wrong-guess")
    assert rows(alice, "SELECT name FROM login_failures") == [("someone",)]


def test_names_that_cannot_exist_are_not_recorded(alice):
    for _ in range(10):
        assert alice.authenticate("not a name", "wrong-guess") is None
    assert rows(alice, "SELECT COUNT(*) FROM login_failures") == [(0,)]


def test_a_password_reset_lifts_the_wait(alice):
    for _ in range(5):
        alice.authenticate("alice", "wrong-guess")
    with pytest.raises(errors.LoginThrottled):
        alice.authenticate("alice", PASSWORD)
    alice.set_password("alice", "another-secret-9")
    assert alice.authenticate("alice", "another-secret-9") is not None


def test_the_throttle_is_shared_by_every_process(alice):
    with Cluster.open(alice.path, clock=alice.clock) as other_process:
        for _ in range(5):
            other_process.authenticate("alice", "wrong-guess")
    with pytest.raises(errors.LoginThrottled):
        alice.authenticate("alice", PASSWORD)


# --- the bound on hashes at once -----------------------------------------------------------


def test_hashes_beyond_the_bound_wait_then_are_refused(monkeypatch):
    gate = user_store.HASH_GATE
    assert 2 <= gate.limit <= 4
    monkeypatch.setattr(gate, "wait_s", 0.05)
    slots = [gate.slot() for _ in range(gate.limit)]
    for slot in slots:
        slot.__enter__()
    try:
        with pytest.raises(errors.Busy) as caught:
            user_store.hash_password(PASSWORD)
        assert caught.value.retry_after == 1
    finally:
        for slot in slots:
            slot.__exit__(None, None, None)
    assert gate.running == 0
    assert user_store.verify_password(PASSWORD, user_store.hash_password(PASSWORD))


def test_concurrent_hashes_stay_within_the_bound(monkeypatch):
    gate = user_store.HASH_GATE
    # A long wait, so a loaded test machine cannot turn slow hashes into Busy: what is
    # checked here is the bound on hashes at once, not how fast they run.
    monkeypatch.setattr(gate, "wait_s", 120.0)
    stored = user_store.hash_password(PASSWORD)
    gate.reset_peak()
    start = threading.Barrier(12)
    results: list[bool] = []

    def run() -> None:
        start.wait()
        results.append(user_store.verify_password(PASSWORD, stored))

    threads = [threading.Thread(target=run) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert results == [True] * 12  # waiting lets them all through, in turn
    assert 1 <= gate.peak <= gate.limit


# --- passwords -----------------------------------------------------------------------------


@pytest.mark.parametrize("password", ["password123", "Password123", "iloveyou1", "QWERTYUIOP"])
def test_common_passwords_are_refused(cluster, password):
    with pytest.raises(errors.WeakPassword, match="most common passwords"):
        cluster.add_user("alice", password)
    assert cluster.users() == []
    cluster.add_user("alice", PASSWORD)
    with pytest.raises(errors.InvalidArgument, match="most common passwords"):
        cluster.set_password("alice", password)
    assert cluster.authenticate("alice", PASSWORD) is not None


@pytest.mark.parametrize("password", ["alexander", "ALEXANDER", "rednaxela", "RedNaxelA"])
def test_the_users_own_name_is_refused_either_way_round(cluster, password):
    with pytest.raises(errors.WeakPassword, match="user's name"):
        cluster.add_user("alexander", password)
    cluster.add_user("alexander", PASSWORD)
    with pytest.raises(errors.WeakPassword, match="user's name"):
        cluster.set_password("alexander", password)


def test_the_products_name_is_refused_and_good_passwords_pass(cluster):
    with pytest.raises(errors.WeakPassword):
        cluster.add_user("alice", "Partitionlet")
    for good in (PASSWORD, "alexander-the-great", "purple monkey dishwasher"):
        user_store.check_password(good, "alexander")


def test_the_first_administrators_password_follows_the_rules(cluster, monkeypatch):
    monkeypatch.setenv(user_store.ADMIN_PASSWORD_ENV, "password1234")
    with pytest.raises(errors.WeakPassword, match=user_store.ADMIN_PASSWORD_ENV):
        user_store.ensure_admin(cluster)
    assert cluster.users() == []


@pytest.mark.parametrize(
    "name, password, message",
    [("bob", "password123", "most common passwords"), ("alexander", "rednaxela", "user's name")],
)
def test_plet_user_refuses_weak_passwords(cluster_path, name, password, message):
    Cluster.open(cluster_path).close()
    got = plet("user", "add", name, "--password", password, "--cluster", cluster_path)
    assert got.exit_code == 1 and got.stderr.startswith("error: ") and message in got.stderr
    got = plet("user", "add", name, "--cluster", cluster_path, input=f"{PASSWORD}\n{PASSWORD}\n")
    assert got.exit_code == 0, got.output
    got = plet("user", "passwd", name, "--password", password, "--cluster", cluster_path)
    assert got.exit_code == 1 and message in got.stderr
    with Cluster.open(cluster_path) as c:
        assert c.authenticate(name, PASSWORD) is not None


# --- API token expiry ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "expires_in, seconds",
    [
        (3600, 3600),
        ("30d", 30 * 86400),
        ("12h", 12 * 3600),
        ("2w", 14 * 86400),
        ("90 m", 5400),
        (timedelta(hours=2), 7200),
        (None, None),
        ("never", None),
        ("", None),
    ],
)
def test_a_token_may_expire(alice, clock, expires_in, seconds):
    token = alice.create_api_token("alice", "ci", expires_in=expires_in)
    [info] = alice.api_tokens("alice")
    expected = None if seconds is None else clock.now_ms() + seconds * 1000
    assert info.expires_ms == expected and not info.expired
    assert alice.user_for_token(token).name == "alice"


@pytest.mark.parametrize("bad", ["30x", "d", "-1d", 0, -5, "0s", True, 11 * 366 * 86400, [30]])
def test_a_bad_expiry_is_refused_and_nothing_is_made(alice, bad):
    with pytest.raises(errors.InvalidArgument, match="expir"):
        alice.create_api_token("alice", expires_in=bad)
    assert alice.api_tokens("alice") == []


def test_an_expired_token_is_refused_saying_so_and_listed_as_expired(alice, clock):
    token = alice.create_api_token("alice", "ci", expires_in="1d")
    forever = alice.create_api_token("alice", "cron")
    clock.advance(86_399)
    assert alice.user_for_token(token).name == "alice"
    clock.advance(1)
    [token_id] = [t.id for t in alice.api_tokens("alice") if t.label == "ci"]
    with pytest.raises(errors.TokenExpired, match=f"API token {token_id} expired at"):
        alice.user_for_token(token)
    listed = {t.label: t.expired for t in alice.api_tokens("alice")}
    assert listed == {"ci": True, "cron": False}
    assert alice.user_for_token(forever).name == "alice"
    alice.revoke_api_token("alice", token_id)
    assert alice.user_for_token(token) is None


def test_plet_user_token_expires(cluster_path):
    with Cluster.open(cluster_path) as c:
        c.add_user("alice", PASSWORD)
    got = plet("user", "token", "alice", "--expires", "30d", "--cluster", cluster_path)
    assert got.exit_code == 0, got.output
    token = got.stdout.strip()
    got = plet("user", "token", "alice", "--label", "forever", "--cluster", cluster_path)
    assert got.exit_code == 0
    listed = json.loads(plet("user", "tokens", "alice", "--json", "--cluster", cluster_path).stdout)
    by_label = {t["label"]: t for t in listed}
    made = by_label[""]
    assert made["expires_ms"] - made["created_ms"] == 30 * DAY_MS and made["expired"] is False
    assert by_label["forever"]["expires_ms"] is None
    table = plet("user", "tokens", "alice", "--cluster", cluster_path).stdout
    assert "EXPIRES" in table and "never" in table
    got = plet("user", "token", "alice", "--expires", "soon", "--cluster", cluster_path)
    assert got.exit_code == 1 and "invalid expiry 'soon'" in got.stderr
    with Cluster.open(cluster_path) as c:
        assert c.user_for_token(token).name == "alice"
        assert len(c.api_tokens("alice")) == 2


def test_an_older_catalog_gets_the_expiry_column(cluster_path):
    with Cluster.open(cluster_path) as c:
        c.add_user("alice", PASSWORD)
        old = c.create_api_token("alice")
    conn = sqlite3.connect(cluster_path / "catalog.db")
    conn.execute("ALTER TABLE api_tokens DROP COLUMN expires_ms")
    conn.commit()
    conn.close()
    with Cluster.open(cluster_path) as c:
        assert c.user_for_token(old).name == "alice"
        new = c.create_api_token("alice", expires_in="1h")
        assert c.user_for_token(new).name == "alice"
        assert sorted(t.expires_ms is None for t in c.api_tokens("alice")) == [False, True]
