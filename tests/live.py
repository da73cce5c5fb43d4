"""A live web console for attack tests: the real app served on a loopback socket, and
HTTP clients that talk to it the way a browser or a script would (cookies, CSRF tokens,
bearer tokens), so a test performs the attack over the network, not through Flask's
test client.

`tests/conftest.py` turns `serve` into the `live_web` fixture.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter

ADMIN = "admin"
ADMIN_PASSWORD = "admin-password-1"
USER = "alice"
USER_PASSWORD = "alice-password-1"

# The documented login throttles (docs/WEB.md, "Security model"): 5 wrong passwords per user
# name, then a wait of 60 s that doubles; 20 wrong passwords per client address per minute
# (the console's LOGIN_ADDRESS_LIMIT), on every login path.
USER_FAILURES, USER_LOCK_S, ADDRESS_FAILURES = 5, 60, 20

_CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    """The CSRF token a page carries in its forms."""
    found = _CSRF_FIELD.search(html)
    assert found is not None, "the page carries no CSRF token"
    return found.group(1)


class FromAddress(HTTPAdapter):
    """Connect from a given local address (another client, as the server sees it: Linux
    routes all of 127/8 to lo)."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def from_address(client: requests.Session, address: str) -> requests.Session:
    """`client`, connecting from `address` from now on."""
    client.mount("http://", FromAddress(address))
    return client


class Browser(requests.Session):
    """A cookie-keeping client of one live server; `post_form` sends the CSRF token the
    way the console's forms do."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base
        self.csrf: str | None = None

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:
        if url.startswith("/"):
            url = self.base + url
        kwargs.setdefault("allow_redirects", False)
        kwargs.setdefault("timeout", 30)
        return super().request(method, url, *args, **kwargs)

    def get(self, url: str, **kwargs: Any) -> requests.Response:
        # requests' own get() asks to follow redirects explicitly: an attack test must see
        # the redirect to /login itself
        kwargs.setdefault("allow_redirects", False)
        return self.request("GET", url, **kwargs)

    def login(self, name: str, password: str) -> requests.Response:
        """Post the login form; on success keep the CSRF token of the next page."""
        page = self.get("/login")
        answer = self.post(
            "/login",
            data={"username": name, "password": password, "csrf_token": csrf_of(page.text)},
        )
        if answer.status_code == 302:
            self.csrf = csrf_of(self.get("/").text)
        return answer

    def post_form(self, path: str, data: dict[str, Any] | None = None, **kw: Any):
        """POST a console form with this session's CSRF token."""
        assert self.csrf is not None, "log in first"
        return self.post(path, data={**(data or {}), "csrf_token": self.csrf}, **kw)


@dataclass
class LiveWeb:
    url: str
    cluster_path: Path
    cluster: Any  # an engine Cluster of the test process, to set up and check
    app: Any

    def browser(self, name: str | None = None, password: str | None = None) -> Browser:
        """A new client; logged in when given a name (the password defaults to the
        fixture users')."""
        b = Browser(self.url)
        if name is not None:
            if password is None:
                password = {ADMIN: ADMIN_PASSWORD, USER: USER_PASSWORD}[name]
            answer = b.login(name, password)
            assert answer.status_code == 302, answer.text[:500]
        return b

    def api(self, token: str) -> requests.Session:
        """A client of `/api/v1/` that sends `token` as its bearer token."""
        s = Browser(self.url)
        s.headers["Authorization"] = f"Bearer {token}"
        return s


@contextmanager
def serve(cluster_path: Path, *, users: bool = True, **config: Any) -> Iterator[LiveWeb]:
    """Serve `create_app(cluster_path, **config)` on 127.0.0.1 (a free port) from a thread
    of this process, threaded like `plet web`; with `users`, add `admin` (an administrator)
    and `alice` (group `analysts`)."""
    from werkzeug.serving import make_server

    from engine import Cluster
    from web import close_app, create_app

    cluster = Cluster.open(cluster_path, name="live")
    if users:
        cluster.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
        cluster.add_user(USER, USER_PASSWORD, groups=("analysts",))
    app = create_app(cluster_path, **config)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="live-web", daemon=True)
    thread.start()
    try:
        yield LiveWeb(f"http://127.0.0.1:{server.server_port}", Path(cluster_path), cluster, app)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
        close_app(app)
        cluster.close()
