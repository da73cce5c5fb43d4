"""Fixtures of the web console's view tests: an app over a fresh cluster, and Flask test
clients logged in as the administrator or as a plain user (CSRF protection stays on)."""

from __future__ import annotations

import re

import pytest

ADMIN = "admin"
ADMIN_PASSWORD = "admin-password-1"
USER = "alice"
USER_PASSWORD = "alice-password-1"

_CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')


def login(client, name: str, password: str) -> str:
    """Log `client` in as `name` through the login form; returns the session's CSRF token
    (send it as the `csrf_token` form field or the `X-CSRFToken` header)."""
    page = client.get("/login")
    token = _CSRF_FIELD.search(page.get_data(as_text=True)).group(1)
    answer = client.post(
        "/login", data={"username": name, "password": password, "csrf_token": token}
    )
    assert answer.status_code == 302, answer.get_data(as_text=True)
    page = client.get("/")
    return _CSRF_FIELD.search(page.get_data(as_text=True)).group(1)


@pytest.fixture
def app(cluster):
    """The console over the `cluster` fixture's directory, with an administrator and a
    plain user (group `analysts`). Tests may use `cluster` to set up data."""
    from web import close_app, create_app

    cluster.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
    cluster.add_user(USER, USER_PASSWORD, groups=("analysts",))
    app = create_app(cluster.path, testing=True)
    yield app
    close_app(app)


@pytest.fixture
def client(app):
    """A test client logged in as the administrator; `client.csrf` is its CSRF token."""
    client = app.test_client()
    client.csrf = login(client, ADMIN, ADMIN_PASSWORD)
    return client


@pytest.fixture
def user_client(app):
    """A test client logged in as the plain user `alice` (ACEs apply to her)."""
    client = app.test_client()
    client.csrf = login(client, USER, USER_PASSWORD)
    return client


@pytest.fixture
def public_s(live_web):
    """The live console with /s (every ACE public), /s:t holding one message, and a group
    `g` that has committed on it (offset 1); returns `live_web`."""
    from engine import Consumer, Producer
    from tests.timing import scaled

    cluster = live_web.cluster
    every = ("produce_perm", "consume_perm", "topic_perm", "admin_perm")
    cluster.create_stream("/s", ttl=0, **dict.fromkeys(every, "p"))
    cluster.create_topic("/s:t", partitions=1)
    producer = Producer(cluster)
    producer.send("/s:t", b"first").get(scaled(10))
    producer.close()
    consumer = Consumer(cluster, "/s:t", group_id="g", auto_offset_reset="earliest")
    assert consumer.poll(timeout_ms=2000)
    consumer.commit()
    consumer.close()
    return live_web
