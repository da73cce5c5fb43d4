"""Cross-cutting security checks of the whole console, through Flask's test client.

The routes are enumerated from `app.url_map`, so every page and form a blueprint adds is
covered the day it lands: every form POST needs its CSRF token, every /api/v1 route needs a
bearer token, every page carries the security headers, uses no inline script, style or
event handler (the CSP would block them), and shows hostile names, keys, values and headers
escaped, never as markup.
"""

from __future__ import annotations

import html
import itertools
import json
from html.parser import HTMLParser
from urllib.parse import unquote, urlencode, urlsplit

import pytest
from flask import url_for
from werkzeug.exceptions import HTTPException

from engine import Consumer, Producer, TopicPartition
from tests.web.conftest import ADMIN, USER, USER_PASSWORD, login
from web.security import login_guard_of

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE = '"><img src=x onerror=alert(1)>'
HOSTILE = (SCRIPT, ATTRIBUTE)
# What must never reach a page unescaped (the payloads and their dangerous cores).
RAW = (*HOSTILE, "<script>alert", "<img src=x")

STREAM = "/hostile/s"
TOPIC = "/hostile/s:t"
GROUP = SCRIPT  # group ids are free text
# Query arguments the pages may read (search boxes, filters, seeks, redirects).
QUERY_NAMES = (
    "q",
    "search",
    "prefix",
    "filter",
    "key",
    "value",
    "header",
    "next",
    "topic",
    "group",
    "stream",
    "name",
    "offset",
    "time",
    "partition",
    "after",
    "sort",
    "format",
    "kind",
    "window_s",
)
_SKIP_ENDPOINTS = {"static", "assets.vendor", "assets.favicon"}
_WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


@pytest.fixture
def hostile(cluster):
    """A stream whose messages, keys and headers, a group id, a token label and a replay
    job carry markup."""
    cluster.create_stream(STREAM, consume_perm="p", produce_perm="p", default_partitions=1)
    cluster.create_topic(TOPIC, partitions=1)
    producer = Producer(cluster, acks=1)
    producer.send(
        TOPIC, value=SCRIPT.encode(), key=ATTRIBUTE.encode(), headers=[(SCRIPT, ATTRIBUTE.encode())]
    )
    producer.send(TOPIC, value=ATTRIBUTE.encode(), key=SCRIPT.encode())
    producer.send(TOPIC, value=json.dumps({"x": SCRIPT, "y": ATTRIBUTE}).encode())
    producer.flush()
    producer.close()
    consumer = Consumer(cluster, group_id=GROUP, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.poll(timeout_ms=300, max_records=1)
    consumer.commit()
    consumer.close()
    # the committing user owns the group: make it public as its stream is, so that alice's
    # pages show it too
    perms = ("join_perm", "commit_perm", "describe_perm", "reset_perm", "delete_perm")
    cluster.set_group_permissions(GROUP, **dict.fromkeys(perms, "p"))
    cluster.create_api_token(ADMIN, SCRIPT)
    cluster.create_api_token(USER, ATTRIBUTE)
    return {"job_id": _hostile_job(cluster)}


def _hostile_job(cluster) -> int:
    params = {"source": TOPIC, "window": ATTRIBUTE, "master": "local[1]", "submitted_by": ADMIN}
    job_id = cluster.jobs.add("window-counts", json.dumps(params), "failed", 1)
    cluster.jobs.update(
        job_id,
        ended_ms=2,
        result=json.dumps([{"topic": SCRIPT, "n": 1}]),
        error=SCRIPT,
        log_tail=ATTRIBUTE,
    )
    return job_id


# --- enumerating the routes --------------------------------------------------------------


def _pool(converter: str, name: str, job_id: int) -> list:
    """Values to fill one URL argument with: the hostile objects, as each blueprint might
    name them."""
    if converter == "IntegerConverter":
        return [job_id]
    if converter == "PathConverter":
        return [STREAM.lstrip("/"), TOPIC.lstrip("/"), GROUP]
    return [USER, "copy", GROUP, ATTRIBUTE]  # ATTRIBUTE has no "/": it fits a segment


def _urls(app, rule, job_id: int) -> list[str]:
    names = sorted(rule.arguments)
    pools = [_pool(type(rule._converters[n]).__name__, n, job_id) for n in names]
    urls = []
    adapter = app.url_map.bind("localhost")
    method = sorted((rule.methods or {"GET"}) - {"HEAD", "OPTIONS"})[0]
    with app.test_request_context():
        for values in itertools.islice(itertools.product(*pools), 9):
            url = url_for(rule.endpoint, **dict(zip(names, values, strict=True)))
            try:  # only URLs that reach this rule (a "/" in a plain segment does not)
                endpoint, _ = adapter.match(unquote(urlsplit(url).path), method=method)
            except HTTPException:
                continue
            if endpoint == rule.endpoint:
                urls.append(url)
    assert urls, f"no URL reaches {rule.rule}"
    return sorted(set(urls))


def _rules(app, methods: set[str], *, api: bool):
    for rule in app.url_map.iter_rules():
        if rule.endpoint in _SKIP_ENDPOINTS:
            continue
        if rule.rule.startswith("/registry/"):
            # the schema registry takes header credentials only, never a cookie, as the API
            # does (tests/web/test_registry_api.py checks every one of its endpoints)
            continue
        if rule.rule.startswith("/api/") != api:
            continue
        found = (rule.methods or set()) & methods
        if found:
            yield rule, sorted(found)


def _page_urls(app, job_id: int) -> list[str]:
    urls = []
    for rule, _ in _rules(app, {"GET"}, api=False):
        urls.extend(_urls(app, rule, job_id))
    return urls


# --- CSRF --------------------------------------------------------------------------------


def test_every_form_endpoint_refuses_a_post_without_its_csrf_token(app, client, hostile, cluster):
    rules = list(_rules(app, _WRITE_METHODS, api=False))
    endpoints = {rule.endpoint for rule, _ in rules}
    assert {"auth.login", "auth.logout", "users.create_token", "users.add_user"} <= endpoints
    anonymous = app.test_client()
    before = ([s.path for s in cluster.streams()], [u.name for u in cluster.users()])
    checked = 0
    for rule, methods in rules:
        for url in _urls(app, rule, hostile["job_id"]):
            for method in methods:
                for who in (client, anonymous):
                    for headers in ({}, {"HX-Request": "true"}, {"X-CSRFToken": "forged"}):
                        got = who.open(
                            url,
                            method=method,
                            headers=headers,
                            data={"name": "eve", "password": "x" * 12, "path": "/csrf/x"},
                        )
                        _assert_refused(got, (method, url, headers))
                        checked += 1
    assert checked >= len(rules) * 6
    assert ([s.path for s in cluster.streams()], [u.name for u in cluster.users()]) == before


def _assert_refused(got, where) -> None:
    """400, or for an htmx request the same refusal as a message in #flash (htmx swaps
    only 2xx answers, so web/errors.py answers 200 and retargets)."""
    if got.status_code == 200 and got.headers.get("HX-Retarget") == "#flash":
        assert "CSRF" in got.get_data(as_text=True), where
        return
    assert got.status_code == 400, (where, got.status_code)
    assert "CSRF" in got.get_data(as_text=True), where


def test_the_login_form_needs_its_csrf_token(app):
    client = app.test_client()
    got = client.post("/login", data={"username": ADMIN, "password": "admin-password-1"})
    assert got.status_code == 400
    assert client.get("/").status_code == 302  # not logged in


def test_a_token_from_another_session_is_refused(app, client):
    other = app.test_client()
    other_token = login(other, USER, USER_PASSWORD)
    got = client.post("/users/tokens", data={"label": "x", "csrf_token": other_token})
    assert got.status_code == 400


# --- the API -----------------------------------------------------------------------------


def test_every_api_route_answers_401_without_a_token(app, client, hostile):
    anonymous = app.test_client()
    rules = list(_rules(app, {"GET", *_WRITE_METHODS}, api=True))
    assert len(rules) >= 15
    for rule, methods in rules:
        for url in _urls(app, rule, hostile["job_id"]):
            for method in methods:
                # a logged-in session is no credential for the API either
                for who, headers in (
                    (anonymous, {}),
                    (anonymous, {"Authorization": "Bearer plet_wrong"}),
                    (client, {}),
                ):
                    # wrong tokens count against the address (tests/web/test_login_limits.py)
                    login_guard_of(app).limiter.reset()
                    got = who.open(url, method=method, headers=headers, json={})
                    assert got.status_code == 401, (method, url, got.status_code)
                    assert got.json["error"] == "Unauthorized"
                    assert got.headers["WWW-Authenticate"].startswith("Bearer")
                    assert got.mimetype == "application/json"


# --- headers and cookies -----------------------------------------------------------------


def _check_headers(got) -> None:
    csp = got.headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if " " in d.strip())
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["default-src"] == "'self'" and directives["frame-ancestors"] == "'none'"
    assert got.headers["X-Content-Type-Options"] == "nosniff"
    assert got.headers["X-Frame-Options"] == "DENY"
    assert got.headers["Referrer-Policy"] in ("same-origin", "no-referrer", "strict-origin")


def test_security_headers_on_pages_errors_assets_and_the_api(app, client):
    anonymous = app.test_client()
    for who, url in (
        (anonymous, "/login"),
        (anonymous, "/"),
        (client, "/"),
        (client, "/users"),
        (client, "/no/such/page"),
        (client, "/static/app.css"),
        (anonymous, "/api/v1/streams"),
    ):
        got = who.get(url)
        _check_headers(got)
        if got.mimetype == "text/html" or url.startswith("/api/"):
            assert got.headers["Cache-Control"] == "no-store", url


def test_the_session_cookie_is_httponly_and_samesite(app):
    client = app.test_client()
    page = client.get("/login").get_data(as_text=True)
    token = page.split('name="csrf_token" value="')[1].split('"')[0]
    got = client.post(
        "/login", data={"username": ADMIN, "password": "admin-password-1", "csrf_token": token}
    )
    assert got.status_code == 302
    cookies = [c for c in got.headers.getlist("Set-Cookie") if c.startswith("plet_session=")]
    assert cookies
    attributes = {a.strip().split("=")[0].lower(): a for a in cookies[-1].split(";")[1:]}
    assert "httponly" in attributes
    assert attributes["samesite"].strip().lower() in ("samesite=lax", "samesite=strict")


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example",
        "//evil.example",
        "//evil.example/path",
        "http:evil.example",
        "javascript:alert(1)",
        "evil.example",
    ],
)
def test_login_next_refuses_an_open_redirect(app, target):
    location = _login_redirect(app, target)
    assert location.startswith("/") and not location.startswith("//"), location
    assert urlsplit(location).netloc == "" and "evil" not in location


@pytest.mark.parametrize("target", ["/\t/evil.example", "/\n/evil.example"])
def test_login_next_refuses_control_character_tricks(app, target):
    location = _login_redirect(app, target)
    # browsers drop tabs and newlines from URLs: "/\t/host" must not become "//host"
    assert not location.replace("\t", "").replace("\n", "").startswith("//"), location


def test_login_next_refuses_a_backslash_trick(app):
    location = _login_redirect(app, "/\\evil.example")
    assert "\\" not in location and "evil" not in location, location


def test_login_next_keeps_a_local_path(app):
    assert _login_redirect(app, "/users?x=1") == "/users?x=1"


def _login_redirect(app, target: str) -> str:
    client = app.test_client()
    page = client.get("/login?" + urlencode({"next": target})).get_data(as_text=True)
    token = page.split('name="csrf_token" value="')[1].split('"')[0]
    got = client.post(
        "/login?" + urlencode({"next": target}),
        data={"username": ADMIN, "password": "admin-password-1", "csrf_token": token},
    )
    assert got.status_code == 302
    return got.headers["Location"]


def test_a_deleted_users_session_and_tokens_end(app, cluster):
    browser = app.test_client()
    login(browser, USER, USER_PASSWORD)
    token = cluster.create_api_token(USER)
    assert browser.get("/").status_code == 200
    cluster.delete_user(USER)
    got = browser.get("/")
    assert got.status_code == 302 and got.headers["Location"].startswith("/login")
    got = browser.get("/users", headers={"HX-Request": "true"})
    assert got.status_code == 401 and "/login" in got.headers["HX-Redirect"]
    api = app.test_client().get("/api/v1/streams", headers={"Authorization": f"Bearer {token}"})
    assert api.status_code == 401


# --- escaping ----------------------------------------------------------------------------


class _InlineCode(HTMLParser):
    """Collects what the CSP would block: inline scripts, style attributes and event
    handler attributes (htmx's hx-on included)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name.lower() for name, _ in attrs}
        if tag == "script":
            self._in_script = "src" not in names
        if tag == "style":
            self.found.append("<style>")
        for name in names:
            if name == "style" or name.startswith("on") or name.startswith("hx-on"):
                self.found.append(f"<{tag} {name}=>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.found.append("inline <script>")


def _hostile_query() -> str:
    return urlencode([(name, value) for name in QUERY_NAMES for value in HOSTILE][:40])


# Pages known to fail with a server error, reported to their owners (path -> why). A page
# that fails renders nothing, hostile or not; a new failure fails the test below.
KNOWN_SERVER_ERRORS: dict[str, str] = {}


def _crawl(app, client, job_id: int, errors: list[tuple[str, str]] | None = None):
    """Every page (and its htmx partial) with the hostile objects and query strings.
    Server errors go to `errors` as (url, error) instead of the answers."""
    query = _hostile_query()
    urls = [
        (url + suffix, headers)
        for url in _page_urls(app, job_id)
        for suffix in ("", "?" + query)
        for headers in ({}, {"HX-Request": "true"})
    ]
    urls += [(u, {}) for u in ("/" + SCRIPT, "/streams/" + ATTRIBUTE, "/login?next=" + SCRIPT)]
    for url, headers in urls:
        try:
            got = client.get(url, headers=headers)
            got.get_data()  # run a streamed answer (a download) to its end
        except Exception as exc:  # TESTING propagates a view's exception
            if errors is not None:
                errors.append((url, repr(exc)))
            continue
        if got.status_code >= 500 and errors is not None:
            errors.append((url, got.status))
        yield url, headers, got


def test_no_page_fails_with_a_server_error(app, client, user_client, hostile):
    failures: list[tuple[str, str]] = []
    for browser in (client, user_client):
        for _ in _crawl(app, browser, hostile["job_id"], failures):
            pass
    unexpected = [(u, e) for u, e in failures if urlsplit(u).path not in KNOWN_SERVER_ERRORS]
    assert unexpected == []


@pytest.mark.parametrize("who", ["admin", "alice"])
def test_hostile_content_renders_escaped_on_every_page(app, client, user_client, hostile, who):
    browser = client if who == "admin" else user_client
    shown: dict[str, set[str]] = {h: set() for h in HOSTILE}
    visited = 0
    for url, headers, got in _crawl(app, browser, hostile["job_id"]):
        visited += 1
        body = got.get_data(as_text=True)
        if got.mimetype != "text/html":
            # downloads and JSON: never sniffed into HTML
            assert got.headers["X-Content-Type-Options"] == "nosniff", url
            continue
        for raw in RAW:
            assert raw not in body, (url, headers, raw)
        parser = _InlineCode()
        parser.feed(body)
        assert parser.found == [], (url, parser.found)
        text = html.unescape(body)
        for h in HOSTILE:
            if h in text:
                shown[h].add(urlsplit(url).path)
    assert visited > 20
    # The data is really on the pages (so the test above tested something).
    joined = {h: " ".join(sorted(paths)) for h, paths in shown.items()}
    if who == "admin":
        assert "/users" in shown[SCRIPT]  # the admin's token label
    else:
        assert "/users" in shown[ATTRIBUTE]  # alice's token label
    assert "/topics/hostile/s:t" in joined[SCRIPT] and "/topics/hostile/s:t" in joined[ATTRIBUTE]
    assert "/groups" in shown[SCRIPT], joined[SCRIPT]


def test_hostile_json_values_pretty_printed_stay_escaped(app, client, hostile):
    for fmt in ("text", "json", "hex"):
        got = client.get(f"/topics/hostile/s:t?format={fmt}")
        body = got.get_data(as_text=True)
        for raw in RAW:
            assert raw not in body, (fmt, raw)
