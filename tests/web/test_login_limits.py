"""Every login path of the web server shares one limiter per client address (issue 23,
engine.auth.logins): names tried through the schema registry's Basic auth, API tokens
guessed at the JSON API, replication tokens guessed at the replication API and current
passwords guessed on the Users page are throttled like the login form, there only."""

from __future__ import annotations

import time

import pytest
import requests

from engine.replication.http import hash_token
from tests.conftest import live_module
from tests.timing import scaled

live = live_module()
USER, USER_PASSWORD = live.USER, live.USER_PASSWORD
ADDRESS_FAILURES = live.ADDRESS_FAILURES
from_address = live.from_address


def _from(address: str) -> requests.Session:
    return from_address(requests.Session(), address)


def test_names_tried_through_the_registry_are_throttled_per_address(live_web):
    url = live_web.url + "/registry/subjects"
    attacker = _from("127.0.0.1")
    statuses = [
        attacker.get(url, auth=(f"user{i}", "Summer2024!"), timeout=10).status_code
        for i in range(25)
    ]
    assert statuses == [401] * ADDRESS_FAILURES + [429] * 5
    got = attacker.get(url, auth=("user-next", "Summer2024!"), timeout=10)
    assert "too many failed logins from 127.0.0.1" in got.text
    # the limiter is the login form's too
    form = live_web.browser()
    assert form.login("admin", "x" * 12).status_code == 429
    # another address is served, within 2 s
    other = _from("127.0.0.2")
    got = other.get(url, auth=(USER, USER_PASSWORD), timeout=2)
    assert got.status_code == 200


def test_guessed_api_tokens_are_throttled_per_address(live_web):
    attacker = _from("127.0.0.1")
    url = live_web.url + "/api/v1/streams"
    statuses = [
        attacker.get(
            url, headers={"Authorization": f"Bearer plet_guess{i}"}, timeout=10
        ).status_code
        for i in range(25)
    ]
    assert statuses == [401] * ADDRESS_FAILURES + [429] * 5
    other = _from("127.0.0.2")
    got = other.get(url, headers={"Authorization": "Bearer plet_guess"}, timeout=2)
    assert got.status_code == 401  # still answered, not throttled, elsewhere


# --- replication tokens and the Users page's current password: the same limiter ----------
#
# A quick window (3 failures per 2 s), so that the test sees the limit end too.


@pytest.fixture
def quick_limit(tmp_path):
    with live.serve(tmp_path / "live", LOGIN_ADDRESS_LIMIT="3 per 2 seconds") as server:
        yield server


def _until_not_429(call, within: float = 10.0):
    """`call()` again until it is not answered 429 (the address's window has passed)."""
    deadline = time.monotonic() + scaled(within)
    while True:
        answer = call()
        if answer.status_code != 429 or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def test_guessed_replication_tokens_are_throttled_per_address(quick_limit):
    cluster = quick_limit.cluster
    cluster.create_stream("/r")
    token = cluster.create_replication_token("/r")
    url = quick_limit.url + "/api/v1/replication/info"

    def info(session, presented):
        return session.post(
            url, json={}, headers={"Authorization": f"Bearer {presented}"}, timeout=10
        )

    attacker = _from("127.0.0.1")
    statuses = [info(attacker, f"plet_guess{i}").status_code for i in range(4)]
    assert statuses == [401, 401, 401, 429]
    # the address waits, even with the right token; another address does not
    waiting = info(attacker, token)
    assert waiting.status_code == 429
    assert "too many failed logins from 127.0.0.1" in waiting.json()["message"]
    assert int(waiting.headers["Retry-After"]) >= 1
    assert info(_from("127.0.0.2"), token).json()["stream"] == "/r"
    # the limiter is the login form's too
    assert quick_limit.browser().login(USER, USER_PASSWORD).status_code == 429
    # once the window has passed, the right token works from there again
    answer = _until_not_429(lambda: info(attacker, token))
    assert answer.status_code == 200 and answer.json()["stream"] == "/r"


def test_wrong_current_passwords_on_the_users_page_are_throttled(quick_limit):
    """A stolen session cannot guess its user's password on the Users page faster than at
    the login form: the current password is checked on the same limiter."""
    alice = quick_limit.browser(USER)

    def change(current):
        new = "alice-password-2"
        form = {"current_password": current, "new_password": new, "confirm_password": new}
        return alice.post_form("/users/password", form)

    statuses = [change(f"guess-{i}-password").status_code for i in range(3)]
    assert statuses == [400, 400, 400]
    refused = change(USER_PASSWORD)
    assert refused.status_code == 429
    assert "Too many failed logins from 127.0.0.1" in refused.text
    # another address logs in: only this one waits
    assert live.Browser(quick_limit.url).login(USER, USER_PASSWORD).status_code == 429
    other = from_address(live.Browser(quick_limit.url), "127.0.0.2")
    assert other.login(USER, USER_PASSWORD).status_code == 302
    changed = _until_not_429(lambda: change(USER_PASSWORD))
    assert changed.status_code == 302
    assert quick_limit.browser(USER, "alice-password-2")  # the new password logs in


def test_a_revoked_link_does_not_throttle_the_other_links_of_its_cluster(live_web, tmp_path):
    """Refused tokens count against the source's address at the target: a link whose token
    was revoked rests (`REFUSED_REST_S`) instead of retrying every pass, so the other links
    of its cluster to that target keep working."""
    from engine import Cluster, Producer
    from engine.replication import Replicator

    target = live_web.cluster
    good, bad = target.create_replication_token("/good"), target.create_replication_token("/bad")
    host = live_web.url.removeprefix("http://")
    with Cluster.open(tmp_path / "source", name="source") as source:
        for stream in ("/s1", "/s2"):
            source.create_stream(stream)
            source.create_topic(f"{stream}:t", 1)
        source.add_replica("/s1", f"http://{good}@{host}", "/good")
        source.add_replica("/s2", f"http://{bad}@{host}", "/bad")
        target.revoke_replication_token(hash_token(bad)[:12])
        replicator = Replicator(source)
        try:
            for i in range(ADDRESS_FAILURES + 5):
                producer = Producer(source)
                producer.send("/s1:t", value=f"m{i}".encode(), partition=0)
                producer.flush()
                producer.close()
                replicator.run_once()
            [good_link] = source.replicas("/s1")
            [bad_link] = source.replicas("/s2")
        finally:
            replicator.close()
    assert good_link.error is None, good_link.error
    assert "401" in (bad_link.error or "")
    assert target.topic("/good:t").partitions[0].log_end_offset == ADDRESS_FAILURES + 5
