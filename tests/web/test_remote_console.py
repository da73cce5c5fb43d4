"""A remote console served under /c/<name>/ of this one (web/remote.py), and what a console
believes of a proxy (web/proxied.py), over real sockets: the remote is another `plet web`
in its own process, over https with a certificate of a private CA made here; beside it a
loopback "echo" console that answers with what it received, so the tests see exactly what
the proxy forwards, and an "evil" server that must never hear from the proxy.
"""

from __future__ import annotations

import html
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from engine import Cluster, Producer
from tests.live import Browser, csrf_of
from tests.remote_console import Pki, RemotePletWeb, make_pki

STREAM = "/ring"
TOPIC = f"{STREAM}:only-in-eu"
ADMIN = "admin"
EU_PASSWORD = "eu-admin-password-1"
LOCAL_PASSWORD = "local-admin-password-1"
BOB = "bob"
BOB_PASSWORD = "bob-password-1"
ECHO_TOKEN = "echo-token-of-this-console"


@dataclass
class Remote:
    url: str
    path: Path
    pki: Pki
    replication_token: str
    admin_token: str
    bob_token: str


@pytest.fixture(scope="module")
def remote(tmp_path_factory) -> Iterator[Remote]:
    """The cluster eu with its own admin, a non-admin bob and a topic, served by its own
    `plet web` over https."""
    root = tmp_path_factory.mktemp("remote")
    pki = make_pki(root)
    with Cluster.open(root / "eu", name="eu") as eu:
        eu.add_user(ADMIN, EU_PASSWORD, admin=True)
        eu.add_user(BOB, BOB_PASSWORD)
        eu.create_stream(STREAM)
        eu.create_topic(TOPIC, partitions=1)
        producer = Producer(eu)
        for i in range(3):
            producer.send(TOPIC, key=b"k", value=f"hello from eu {i}".encode()).get(10)
        producer.close()
        replication_token = eu.create_replication_token(STREAM)
        admin_token = eu.create_api_token(ADMIN)
        bob_token = eu.create_api_token(BOB)
    server = RemotePletWeb(root / "eu", "--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    try:
        yield Remote(server.url, root / "eu", pki, replication_token, admin_token, bob_token)
    finally:
        server.stop()


# --- small servers: an echo console, an evil host, one that answers garbage or nothing -----


@Request.application
def _echo(request: Request) -> Response:
    if request.path == "/set-cookie":
        answer = Response("cookies")
        answer.headers.add("Set-Cookie", "plet_session=remote; Path=/; HttpOnly; Domain=127.0.0.1")
        answer.headers.add("Set-Cookie", "deep=1; Path=/x/; Secure; SameSite=Lax")
        return answer
    if request.path == "/site-wide":
        return Response(
            "reaching out",
            headers={
                "Clear-Site-Data": '"cookies"',
                "Service-Worker-Allowed": "/",
                "Strict-Transport-Security": "max-age=63072000; includeSubDomains",
                "Alt-Svc": 'h3=":443"',
                "X-Kept": "yes",
            },
        )
    if request.path == "/redirect":
        host = request.headers.get("Host", "")
        return Response("", 302, headers={"Location": f"http://{host}/elsewhere?a=1"})
    if request.path == "/stream":
        release = _STREAM_RELEASE

        def lines() -> Iterator[bytes]:
            yield b"first\n"
            release.wait(30)
            yield b"second\n"

        return Response(lines(), mimetype="text/plain")
    body = {
        "echo": True,
        "path": request.environ.get("RAW_URI") or request.path,
        "headers": dict(request.headers),
        "body": request.get_data().decode("latin-1"),
    }
    return Response(json.dumps(body), mimetype="application/json")


_STREAM_RELEASE = threading.Event()


class _Serve:
    def __init__(self, app: Any) -> None:
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Raw:
    """A TCP server that answers every connection with `reply` (None: never answers)."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.held: list[socket.socket] = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            if self.reply is None:
                self.held.append(conn)  # never answered
                continue
            try:
                conn.recv(65536)
                conn.sendall(self.reply)
            finally:
                conn.close()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Local:
    url: str
    echo: str
    evil: _Raw
    console: Any


@pytest.fixture(scope="module")
def local(remote, tmp_path_factory) -> Iterator[Local]:
    """This console: its own cluster `here`, and in its clusters file eu (with the
    replication token eu issued and eu's CA), the echo console, and consoles that are down,
    answer garbage, fail the TLS check or refuse the token."""
    from engine.served_clusters import served_clusters
    from web.clusters import Console

    root = tmp_path_factory.mktemp("local")
    with Cluster.open(root / "here", name="here") as here:
        here.add_user(ADMIN, LOCAL_PASSWORD, admin=True)
    echo = _Serve(_echo)
    evil = _Raw(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil")
    garbage = _Raw(b"this is not http at all\r\n\r\n")
    port = remote.url.rsplit(":", 1)[1]
    (root / "eu.token").write_text(remote.replication_token + "\n")
    (root / "clusters.toml").write_text(
        f"""
[[cluster]]
name = "eu"
url = "{remote.url}"
token_file = "eu.token"
ca_file = "{remote.pki.ca}"

[[cluster]]
name = "echo"
url = "{echo.url}"
token = "{ECHO_TOKEN}"

[[cluster]]
name = "down"
url = "http://127.0.0.1:{_closed_port()}"
token = "x"

[[cluster]]
name = "garbage"
url = "http://127.0.0.1:{garbage.port}"
token = "x"

[[cluster]]
name = "untrusted"
url = "https://LOCALHOST:{port}/"
token = "x"
ca_file = "{remote.pki.other_ca}"

[[cluster]]
name = "wrongtoken"
url = "https://localhost:{port}"
token = "plr_not-a-token-eu-issued"
ca_file = "{remote.pki.ca}"
"""
    )
    console = Console(served_clusters(root / "here", clusters_file=root / "clusters.toml"))
    served = _Serve(console)
    try:
        yield Local(served.url, echo.url, evil, console)
    finally:
        served.stop()
        console.close()
        echo.stop()
        evil.close()
        garbage.close()


def _echoed(answer: requests.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text[:300]
    body: dict[str, Any] = answer.json()
    assert body["echo"] is True
    return body


# --- a user of two clusters ---------------------------------------------------------------


def test_a_user_signs_in_to_the_remote_and_uses_it_through_this_console(local, remote):
    b = Browser(local.url)
    first = b.get(f"/c/eu/topics{TOPIC}")
    assert first.status_code == 302  # eu's own login, under this console's /c/eu/
    assert first.headers["Location"].startswith("/c/eu/login?next=/c/eu/topics/ring")
    page = b.get("/c/eu/login")
    assert page.status_code == 200 and 'action="/c/eu/login' in page.text
    # this console's password is not eu's
    refused = b.post(
        "/c/eu/login",
        data={"username": ADMIN, "password": LOCAL_PASSWORD, "csrf_token": csrf_of(page.text)},
    )
    assert refused.status_code == 401
    page = b.get("/c/eu/login")
    answer = b.post(
        "/c/eu/login",
        data={"username": ADMIN, "password": EU_PASSWORD, "csrf_token": csrf_of(page.text)},
    )
    assert answer.status_code == 302, answer.text[:300]
    # the remote's session cookie, renamed and kept under /c/eu/ (http here: not Secure)
    cookies = answer.raw.headers.getlist("Set-Cookie")
    session = [c for c in cookies if c.startswith("plet_via_eu.plet_session=")]
    assert len(session) == 1, cookies
    assert "Path=/c/eu/" in session[0] and "HttpOnly" in session[0]
    assert "Domain" not in session[0] and "Secure" not in session[0]
    assert all(c.startswith("plet_via_eu.") for c in cookies)

    topic = b.get(f"/c/eu/topics{TOPIC}")
    assert topic.status_code == 200
    assert "hello from eu 2" in topic.text
    assert 'href="/c/eu/streams"' in topic.text  # eu builds its links under the mount
    assert 'href="/streams"' not in topic.text
    # its assets come through too
    asset = next(
        part.split('"')[1]
        for part in topic.text.split("<script src=")[1:]
        if part.startswith('"/c/eu/')
    )
    assert b.get(asset).status_code == 200
    # an htmx request gets eu's partial
    more = b.get(f"/c/eu/topics{TOPIC}", headers={"HX-Request": "true"})
    assert more.status_code == 200 and "<html" not in more.text
    # a form post (with eu's CSRF token) writes into eu
    written = b.post(
        f"/c/eu/topics{TOPIC}/produce",
        data={"value": "sent through the proxy", "partition": "0"},
        headers={"HX-Request": "true", "X-CSRFToken": csrf_of(topic.text)},
    )
    assert written.status_code == 200 and "Written to partition 0 at offset 3" in written.text
    # a download streams eu's records
    download = b.get(f"/c/eu/topics{TOPIC}/download?file=jsonl&start=oldest&partition=all")
    assert download.status_code == 200
    values = [json.loads(line)["value"] for line in download.text.splitlines()]
    assert values[-1] == "sent through the proxy" and len(values) == 4
    # the JSON API, with eu's own bearer token
    api = b.get("/c/eu/api/v1/streams", headers={"Authorization": f"Bearer {remote.bob_token}"})
    assert api.status_code == 200
    # signed in to eu is not signed in here
    assert b.get("/streams").status_code == 302


def test_a_local_session_never_reaches_the_remote(local):
    b = Browser(local.url)
    assert b.login(ADMIN, LOCAL_PASSWORD).status_code == 302
    assert b.get("/streams").status_code == 200
    b.cookies.set("plet_via_echo.remote_one", "r1")  # as the remote would have set it
    b.cookies.set("plet_via_eu.other", "not-echo's")
    seen = _echoed(
        b.get(
            "/c/echo/anything?q=1",
            headers={
                "X-Forwarded-Host": "evil.example",
                "X-Forwarded-Prefix": "/evil",
                "X-Forwarded-For": "203.0.113.9",
                "X-Forwarded-Proto": "https",
                "Forwarded": "for=203.0.113.9",
                "X-Real-IP": "203.0.113.9",
            },
        )
    )
    headers = seen["headers"]
    assert headers["Cookie"] == "remote_one=r1"  # the remote's own cookie only
    assert seen["path"] == "/anything?q=1"
    assert headers["Host"] == local.echo.removeprefix("http://")
    assert headers["X-Forwarded-Prefix"] == "/c/echo"
    assert headers["X-Forwarded-Host"] == local.url.removeprefix("http://")
    assert headers["X-Forwarded-For"] == "127.0.0.1"
    assert headers["X-Forwarded-Proto"] == "http"
    assert headers["X-Partitionlet-Proxy"] == ECHO_TOKEN
    assert "Forwarded" not in headers and "X-Real-Ip" not in headers


def test_a_browser_cannot_claim_to_be_a_proxy(local, remote):
    # a forged proxy header to this console is checked against this console's cluster
    b = Browser(local.url)
    forged = b.get("/c/echo/x", headers={"X-Partitionlet-Proxy": ECHO_TOKEN})
    assert forged.status_code == 401 and "refused" in forged.text


def test_the_remote_cookies_are_renamed_and_kept_under_the_mount(local):
    answer = Browser(local.url).get("/c/echo/set-cookie")
    assert answer.status_code == 200
    cookies = sorted(answer.raw.headers.getlist("Set-Cookie"))
    assert cookies == [
        "plet_via_echo.deep=1; SameSite=Lax; Path=/c/echo/x/",
        "plet_via_echo.plet_session=remote; HttpOnly; Path=/c/echo/",
    ]


def test_nothing_of_the_remote_reaches_beyond_its_mount(local):
    """Its pages share this console's origin: no header of theirs may act on the whole site
    (clear this console's cookies, pin it to https, let a service worker serve it)."""
    answer = Browser(local.url).get("/c/echo/site-wide")
    assert answer.status_code == 200 and answer.headers["X-Kept"] == "yes"
    for name in (
        "Clear-Site-Data",
        "Service-Worker-Allowed",
        "Strict-Transport-Security",
        "Alt-Svc",
    ):
        assert name not in answer.headers
    worker = Browser(local.url).get("/c/echo/sw.js", headers={"Service-Worker": "script"})
    assert worker.status_code == 403


def test_a_redirect_to_the_remote_stays_under_the_mount(local):
    answer = Browser(local.url).get("/c/echo/redirect")
    assert answer.status_code == 302
    assert answer.headers["Location"] == "/c/echo/elsewhere?a=1"


def test_answers_stream(local):
    _STREAM_RELEASE.clear()
    with requests.get(f"{local.url}/c/echo/stream", stream=True, timeout=30) as answer:
        lines = answer.iter_lines()
        assert next(lines) == b"first"  # before the remote has finished
        _STREAM_RELEASE.set()
        assert next(lines) == b"second"


def test_an_answer_left_half_read_does_not_spoil_the_next_one(local):
    _STREAM_RELEASE.clear()
    with requests.get(f"{local.url}/c/echo/stream", stream=True, timeout=30) as answer:
        assert next(answer.iter_lines()) == b"first"
    # the browser left mid-answer; the remote finishes it anyway
    _STREAM_RELEASE.set()
    for _ in range(10):  # every pooled connection answers its own request
        assert _echoed(requests.get(f"{local.url}/c/echo/after", timeout=30))["path"] == "/after"


def test_a_body_goes_to_the_remote_whole_up_to_the_consoles_limit(local, tmp_path):
    from engine.served_clusters import served_clusters
    from web.clusters import Console

    seen = _echoed(requests.post(f"{local.url}/c/echo/form", data={"a": "1 2"}, timeout=30))
    assert seen["body"] == "a=1+2" and seen["headers"]["Content-Length"] == "5"
    chunked = iter([b"x" * 1000, b"y" * 1000])  # no Content-Length: sent chunked
    seen = _echoed(requests.post(f"{local.url}/c/echo/up", data=chunked, timeout=30))
    assert seen["body"] == "x" * 1000 + "y" * 1000

    with Cluster.open(tmp_path / "here", name="here"):
        pass
    (tmp_path / "c.toml").write_text(
        f'[[cluster]]\nname = "echo"\nurl = "{local.echo}"\ntoken = "{ECHO_TOKEN}"\n'
    )
    small = Console(
        served_clusters(tmp_path / "here", clusters_file=tmp_path / "c.toml"),
        MAX_CONTENT_LENGTH=1024,
    )
    served = _Serve(small)
    try:
        for data in (b"z" * 2000, iter([b"z" * 800, b"z" * 800])):
            answer = requests.post(f"{served.url}/c/echo/up", data=data, timeout=30)
            assert answer.status_code == 413
            assert "at most 1,024 bytes" in answer.text
    finally:
        served.stop()
        small.close()


# --- what the remote believes -------------------------------------------------------------


def _login_form_action(url: str, ca: Path, headers: dict[str, str]) -> requests.Response:
    return requests.get(f"{url}/login", headers=headers, verify=str(ca), timeout=30)


def test_forwarded_headers_are_believed_only_with_a_token_the_remote_issued(remote):
    forwarded = {"X-Forwarded-Prefix": "/evil", "X-Forwarded-Host": "evil.example"}
    plain = _login_form_action(remote.url, remote.pki.ca, forwarded)
    assert plain.status_code == 200
    assert 'action="/login' in plain.text and "/evil" not in plain.text
    for token in ("plr_guessed", "not-a-token", remote.bob_token):  # bob is no administrator
        refused = _login_form_action(
            remote.url, remote.pki.ca, {**forwarded, "X-Partitionlet-Proxy": token}
        )
        assert refused.status_code == 401, token
        assert "console proxy token refused" in refused.text
        assert refused.headers["X-Partitionlet-Proxy"] == "refused"
    for token in (remote.replication_token, remote.admin_token):
        trusted = _login_form_action(
            remote.url, remote.pki.ca, {**forwarded, "X-Partitionlet-Proxy": token}
        )
        assert trusted.status_code == 200
        assert 'action="/evil/login' in trusted.text
    # the token proves a console, not a user: no page without a user's own login
    page = requests.get(
        f"{remote.url}/streams",
        headers={"X-Partitionlet-Proxy": remote.admin_token},
        verify=str(remote.pki.ca),
        allow_redirects=False,
        timeout=30,
    )
    assert page.status_code == 302 and "/login" in page.headers["Location"]
    api = requests.get(
        f"{remote.url}/api/v1/streams",
        headers={"X-Partitionlet-Proxy": remote.admin_token},
        verify=str(remote.pki.ca),
        timeout=30,
    )
    assert api.status_code == 401


# --- one host only ------------------------------------------------------------------------


def _raw_get(url: str, target: str, host: str | None = None) -> tuple[int, bytes]:
    address = url.removeprefix("http://")
    name, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(name, int(port), timeout=30)
    try:
        conn.putrequest("GET", target, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or address)
        conn.endheaders()
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def test_the_proxy_only_ever_reaches_the_configured_host(local):
    evil = f"127.0.0.1:{local.evil.port}"
    echo_host = local.echo.removeprefix("http://")
    for target, host in (
        (f"/c/echo//{evil}/x", None),
        (f"/c/echo/http://{evil}/x", None),
        (f"/c/echo/%2F%2F{evil}/x", None),
        (f"/c/echo/@{evil}/x", None),
        (f"http://{evil}/c/echo/x", evil),  # an absolute URL in the request line
        ("/c/echo/x", evil),  # another Host
    ):
        status, body = _raw_get(local.url, target, host)
        assert status == 200, (target, body[:200])
        seen = json.loads(body)
        assert seen["echo"] is True, target
        assert seen["headers"]["Host"] == echo_host, target
        assert seen["path"].startswith("/") and not seen["path"].startswith("//"), target
    assert local.evil.hits == 0


# --- consoles that cannot answer ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "status", "says"),
    [
        ("down", 502, "could not be reached"),
        ("garbage", 502, "answered something that is not HTTP"),
        ("untrusted", 502, "failed the TLS check"),
        ("wrongtoken", 502, "did not accept this console's token"),
    ],
)
def test_a_console_that_cannot_answer_gets_a_page_that_says_why(local, name, status, says):
    answer = Browser(local.url).get(f"/c/{name}/topics")
    assert answer.status_code == status
    assert says in html.unescape(answer.text)
    assert 'href="/"' in answer.text  # the way back


def test_a_console_that_does_not_answer_in_time_gets_a_504(tmp_path, monkeypatch):
    from engine.served_clusters import served_clusters
    from web import remote as module
    from web.clusters import Console

    monkeypatch.setattr(module, "READ_TIMEOUT_S", 0.5)
    silent = _Raw(None)
    with Cluster.open(tmp_path / "here", name="here"):
        pass
    (tmp_path / "c.toml").write_text(
        f'[[cluster]]\nname = "slow"\nurl = "http://127.0.0.1:{silent.port}"\ntoken = "x"\n'
    )
    console = Console(served_clusters(tmp_path / "here", clusters_file=tmp_path / "c.toml"))
    served = _Serve(console)
    try:
        started = time.monotonic()
        answer = Browser(served.url).get("/c/slow/")
        assert answer.status_code == 504
        assert "did not answer in time" in answer.text
        assert time.monotonic() - started < 20
    finally:
        served.stop()
        console.close()
        silent.close()


# --- the switcher ----------------------------------------------------------------------------


def test_the_switcher_opens_the_remote_here(local):
    b = Browser(local.url)
    assert b.login(ADMIN, LOCAL_PASSWORD).status_code == 302
    page = b.get("/streams").text
    assert 'href="/c/eu/" title="through its own console' in page
    assert 'href="/c/echo/"' in page


def test_a_read_only_console_serves_the_remote_read_only(remote, tmp_path):
    from engine.served_clusters import served_clusters
    from web.clusters import Console

    with Cluster.open(tmp_path / "here", name="here"):
        pass
    (tmp_path / "eu.token").write_text(remote.replication_token)
    (tmp_path / "c.toml").write_text(
        f'[[cluster]]\nname = "eu"\nurl = "{remote.url}"\ntoken_file = "eu.token"\n'
        f'ca_file = "{remote.pki.ca}"\n'
    )
    console = Console(
        served_clusters(tmp_path / "here", clusters_file=tmp_path / "c.toml"), READ_ONLY=True
    )
    served = _Serve(console)
    try:
        b = Browser(served.url)
        page = b.get("/c/eu/login")
        answer = b.post(
            "/c/eu/login",
            data={"username": ADMIN, "password": EU_PASSWORD, "csrf_token": csrf_of(page.text)},
        )
        assert answer.status_code == 302  # logging in still works
        topic = b.get(f"/c/eu/topics{TOPIC}")
        assert topic.status_code == 200 and "read-only" in topic.text
        refused = b.post(
            f"/c/eu/topics{TOPIC}/produce",
            data={"value": "no", "csrf_token": csrf_of(topic.text)},
        )
        assert refused.status_code == 403
    finally:
        served.stop()
        console.close()


def test_only_a_proxy_with_a_token_changes_the_address_scheme_host_or_prefix(tmp_path):
    """What the console's views see (web/proxied.py around a WSGI app that keeps its
    environ): without the token no forwarded header at all; with it, the proxy's values."""
    from werkzeug.test import Client

    from web import close_app, create_app
    from web.proxied import ProxyTrust

    with Cluster.open(tmp_path / "c", name="c") as cluster:
        cluster.create_stream(STREAM)
        token = cluster.create_replication_token(STREAM)
    seen: dict[str, Any] = {}

    def app(environ, start_response):
        seen.clear()
        seen.update(environ)
        start_response("200 OK", [])
        return [b""]

    main = create_app(tmp_path / "c")
    try:
        client = Client(ProxyTrust(app, main))
        forwarded = {
            "X-Forwarded-For": "203.0.113.9",
            "X-Forwarded-Proto": "https",
            "X-Forwarded-Host": "evil.example",
            "X-Forwarded-Prefix": "/evil",
            "X-Forwarded-Port": "444",
            "Forwarded": "for=203.0.113.9;host=evil.example",
            "X-Real-IP": "203.0.113.9",
            "X-Partitionlet-Read-Only": "1",
        }
        client.get("/x", headers=forwarded, environ_base={"REMOTE_ADDR": "198.51.100.7"})
        assert seen["REMOTE_ADDR"] == "198.51.100.7"
        assert seen["wsgi.url_scheme"] == "http" and seen["SCRIPT_NAME"] == ""
        assert seen["HTTP_HOST"] == "localhost"
        assert not [k for k in seen if "FORWARDED" in k or k == "HTTP_X_REAL_IP"]
        assert "partitionlet.proxy_read_only" not in seen

        client.get(
            "/x",
            headers={**forwarded, "X-Partitionlet-Proxy": token},
            environ_base={"REMOTE_ADDR": "198.51.100.7"},
        )
        assert seen["REMOTE_ADDR"] == "203.0.113.9"
        assert seen["wsgi.url_scheme"] == "https"
        assert seen["HTTP_HOST"] == "evil.example" and seen["SCRIPT_NAME"] == "/evil"
        assert "HTTP_X_PARTITIONLET_PROXY" not in seen  # no view ever sees the token
        assert seen["partitionlet.proxy_read_only"] is True
    finally:
        close_app(main)
