"""Every login path of the web server shares one limiter per client address (issue 23,
engine.auth.logins): names tried through the schema registry's Basic auth and API tokens
guessed at the JSON API are throttled like the login form, there only."""

from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter

from tests.conftest import live_module

live = live_module()
USER, USER_PASSWORD = live.USER, live.USER_PASSWORD
ADDRESS_FAILURES = 20  # the console's LOGIN_ADDRESS_LIMIT: "20 per minute"


class _FromAddress(HTTPAdapter):
    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.address, 0)
        return super().init_poolmanager(*args, **kwargs)


def _from(address: str) -> requests.Session:
    session = requests.Session()
    session.mount("http://", _FromAddress(address))
    return session


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
