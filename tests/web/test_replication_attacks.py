"""Attacks on replication links through a live console (issue 12, findings 1 and 2, and
replication tokens), over real sockets.

A plain user owns a stream (anyone may create one) and tries to make the server connect
where she likes (SSRF), or write into another cluster directory of the host. Small HTTP
servers of this test stand in for "somewhere else": they record every request they get,
and answer with a redirect, a secret body, or just enough of the replication protocol.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from engine import Cluster, Replicator, errors
from engine.replication.http import MAX_MESSAGE_CHARS, HttpTarget, TransportError, hash_token

SECRET = "s3cr3t-internal-answer-do-not-show"
ADMIN_ONLY = "only a cluster administrator may add a replica link"


class Recorder:
    """An HTTP server on 127.0.0.1 that records every request (method, path, headers) and
    answers as its `mode` says:

    - `fake`: enough of the replication protocol for a link to be added (a stream that
      never exists there, no topics);
    - `redirect`: 302 to `redirect_to` (the same path);
    - `secret`: 400 with a JSON body that is not a Partitionlet error object;
    - `secret-html`: 400 with an HTML body;
    - `secret-200`: 200 with a JSON object that is not a Partitionlet answer;
    - `long-error`: 400 with a Partitionlet error object whose message is very long.
    """

    def __init__(self, mode: str = "fake", redirect_to: str | None = None) -> None:
        self.mode = mode
        self.redirect_to = redirect_to
        self.cluster_id = str(uuid.uuid4())
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                outer._answer(self)

            do_GET = do_POST  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        handler.rfile.read(length)
        with self._lock:
            self.requests.append(
                {"method": handler.command, "path": handler.path, "headers": dict(handler.headers)}
            )
        status, body, ctype, extra = 200, b"{}", "application/json", {}
        if self.mode == "redirect":
            status, body, extra = 302, b"", {"Location": f"{self.redirect_to}{handler.path}"}
        elif self.mode == "secret":
            status, body = 400, json.dumps({"error": "Nope", "message": SECRET}).encode()
        elif self.mode == "secret-html":
            status, body, ctype = 400, f"<html><p>{SECRET}</p></html>".encode(), "text/html"
        elif self.mode == "secret-200":
            body = json.dumps({"message": SECRET}).encode()
        elif self.mode == "long-error":
            status = 400
            body = json.dumps({"error": "InvalidArgument", "message": "x" * 10_000}).encode()
        else:
            op = handler.path.rstrip("/").rsplit("/", 1)[-1]
            answer: dict[str, Any] = {
                "info": {"cluster_id": self.cluster_id, "name": "fake", "stream": "/s"},
                "stream_policies": {"policies": None},
                "topic_partitions": {"topics": {}},
                "end_offsets": {"ends": []},
            }.get(op, {})
            body = json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in extra.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)


@pytest.fixture
def recorders():
    made: list[Recorder] = []

    def make(mode: str = "fake", redirect_to: str | None = None) -> Recorder:
        r = Recorder(mode, redirect_to)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def _flash_error(html: str) -> str:
    found = re.search(r'<p class="flash flash-error" role="alert">(.*?)</p>', html, re.S)
    assert found is not None, html[:2000]
    return found.group(1)


def _create_stream(browser, path: str) -> None:
    answer = browser.post_form("/streams", {"path": path})
    assert answer.status_code == 303, answer.text[:1000]


def _add(browser, stream: str, target: str, target_stream: str = "") -> requests.Response:
    return browser.post_form(
        "/replication/add", {"stream": stream, "target": target, "target_stream": target_stream}
    )


# --- a plain user ----------------------------------------------------------------------------


def test_a_plain_user_cannot_make_the_server_connect_anywhere(live_web, recorders):
    alice = live_web.browser("alice")
    _create_stream(alice, "/alice/s")
    landing = recorders("secret")
    redirecting = recorders("redirect", redirect_to=landing.url)
    secret = recorders("secret")
    for target in (
        f"http://plr_anything@{redirecting.url.removeprefix('http://')}/path",
        f"http://plr_anything@{secret.url.removeprefix('http://')}",
        secret.url,  # without a token too
    ):
        answer = _add(alice, "/alice/s", target)
        assert answer.status_code == 403, answer.text[:2000]
        assert ADMIN_ONLY in _flash_error(answer.text)
        assert SECRET not in answer.text
    assert redirecting.requests == [] and landing.requests == [] and secret.requests == []
    assert live_web.cluster.replicas("/alice/s") == []
    page = alice.get("/replication").text
    assert SECRET not in page and "127.0.0.1:" + str(secret.server.server_port) not in page


def test_a_plain_user_cannot_write_into_another_cluster_directory(live_web, tmp_path):
    other_dir = tmp_path / "other"
    Cluster.open(other_dir, name="other").close()
    alice = live_web.browser("alice")
    _create_stream(alice, "/alice/s")
    answer = _add(alice, "/alice/s", str(other_dir), "/injected")
    assert answer.status_code == 403
    assert ADMIN_ONLY in _flash_error(answer.text)
    with Cluster.open(other_dir) as other:
        assert other.streams() == []  # no /injected, nor anything else
    assert live_web.cluster.replicas("/alice/s") == []


def test_the_refusal_says_nothing_about_which_paths_exist(live_web, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("hello")
    missing = tmp_path / "missing"
    alice = live_web.browser("alice")
    _create_stream(alice, "/alice/s")
    texts = set()
    for target in (str(missing), str(plain), "/etc", "/etc/catalog.db"):
        answer = _add(alice, "/alice/s", target)
        assert answer.status_code == 403
        texts.add(_flash_error(answer.text))
        assert target not in _flash_error(answer.text)
    assert len(texts) == 1 and ADMIN_ONLY in texts.pop()
    assert not missing.exists()
    assert sorted(p.name for p in plain.iterdir()) == ["notes.txt"]


def test_a_plain_user_sees_why_there_is_no_add_link_form(live_web):
    page = live_web.browser("alice").get("/replication").text
    assert 'action="/replication/add"' not in page
    assert "Only a cluster administrator can add a link" in page
    page = live_web.browser("admin").get("/replication").text
    assert 'action="/replication/add"' in page


# --- an administrator's link to a server that misbehaves -------------------------------------


def test_an_admin_link_follows_no_redirect_and_shows_no_foreign_answer(live_web, recorders):
    admin = live_web.browser("admin")
    _create_stream(admin, "/s")
    landing = recorders("secret-200")
    target = recorders("fake")
    address = target.url.removeprefix("http://")
    # Adding a link straight to a redirect: refused, naming it; nothing reaches the landing.
    target.mode, target.redirect_to = "redirect", landing.url
    answer = _add(admin, "/s", f"http://plr_token-1@{address}")
    assert answer.status_code == 400
    assert "302" in answer.text and "redirect" in answer.text
    assert landing.requests == []
    # A link added while the target behaved, which then redirects: broken, naming it.
    target.mode = "fake"
    answer = _add(admin, "/s", f"http://plr_token-1@{address}")
    assert answer.status_code == 200, answer.text[:2000]
    assert [r["headers"].get("Authorization") for r in target.requests][-1] == "Bearer plr_token-1"
    target.mode = "redirect"
    with Replicator(live_web.cluster) as replicator:
        replicator.run_once()
    [info] = live_web.cluster.replicas("/s")
    assert info.state == "broken" and "302" in info.error and "redirect" in info.error
    page = admin.get("/replication").text
    row = re.search(r'<tr data-link="/s [^"]*">(.*?)</tr>', page, re.S).group(1)
    assert ">broken<" in row and "redirect" in row
    assert landing.requests == []
    # Answers that are not a Partitionlet error: the status only, never the body.
    for mode in ("secret", "secret-html", "secret-200"):
        target.mode = mode
        with Replicator(live_web.cluster) as replicator:
            replicator.run_once()
        [info] = live_web.cluster.replicas("/s")
        assert info.state == "broken" and SECRET not in info.error, info.error
        for page in (admin.get("/replication").text, admin.get("/streams/s/~/replicas").text):
            assert SECRET not in page
        assert SECRET not in json.dumps(
            live_web.api(live_web.cluster.create_api_token("admin"))
            .get("/api/v1/streams/s/replicas")
            .json()
        )
    assert landing.requests == []


def test_http_target_sends_no_authorization_across_a_redirect(recorders):
    landing = recorders("fake")
    redirecting = recorders("redirect", redirect_to=landing.url)
    with pytest.raises(TransportError, match="302") as info:
        HttpTarget(redirecting.url, "plr_secret", retries=0)
    assert "redirect" in str(info.value)
    assert landing.requests == []
    assert len(redirecting.requests) == 1  # a redirect is an answer: not retried


def test_http_target_caps_a_target_error_message(recorders):
    long_error = recorders("long-error")
    with pytest.raises(errors.InvalidArgument) as info:
        HttpTarget(long_error.url, "plr_x", retries=0)
    assert len(str(info.value)) <= MAX_MESSAGE_CHARS + 50
    secret = recorders("secret")
    with pytest.raises(TransportError) as info:
        HttpTarget(secret.url, "plr_x", retries=0)
    assert SECRET not in str(info.value) and "400" in str(info.value)


# --- replication tokens ----------------------------------------------------------------------


def test_tokens_are_listed_and_revoked_and_a_revoked_one_is_refused(live_web):
    c = live_web.cluster
    c.create_stream("/s")
    first = c.create_replication_token("/s")
    second = c.create_replication_token("/s")
    listed = c.replication_tokens()
    assert len(listed) == 2 and {t.stream for t in listed} == {"/s"}
    shown = json.dumps([asdict(t) for t in listed])
    assert first not in shown and second not in shown
    ids = {token: hash_token(token)[:12] for token in (first, second)}
    assert {t.id for t in listed} == set(ids.values())
    assert all(t.last_used_ms is None for t in listed)
    answer = requests.post(
        f"{live_web.url}/api/v1/replication/info",
        json={},
        headers={"Authorization": f"Bearer {first}"},
        timeout=30,
    )
    assert answer.status_code == 200
    used = {t.id: t.last_used_ms for t in c.replication_tokens()}
    assert used[ids[first]] is not None and used[ids[second]] is None
    # The console lists them for an administrator only, never the secret.
    admin = live_web.browser("admin")
    page = admin.get("/replication").text
    assert all(t.id in page for t in listed) and first not in page and second not in page
    alice = live_web.browser("alice")
    page = alice.get("/replication").text
    assert not any(t.id in page for t in listed)
    answer = alice.post_form("/replication/tokens/revoke", {"token_id": ids[first]})
    assert answer.status_code == 403
    assert len(c.replication_tokens()) == 2
    # The administrator revokes the first: refused at once; the second still works.
    answer = admin.post_form("/replication/tokens/revoke", {"token_id": ids[first]})
    assert answer.status_code == 302, answer.text[:1000]
    assert [t.id for t in c.replication_tokens()] == [ids[second]]
    for token, status in ((first, 401), (second, 200)):
        answer = requests.post(
            f"{live_web.url}/api/v1/replication/info",
            json={},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert answer.status_code == status, answer.text


def test_revoking_a_malformed_or_unknown_token_id_is_a_clear_error(live_web):
    admin = live_web.browser("admin")
    answer = admin.post_form("/replication/tokens/revoke", {"token_id": "../../etc"})
    assert answer.status_code == 400
    assert "12 hex digits" in answer.text
    answer = admin.post_form("/replication/tokens/revoke", {"token_id": "0" * 12})
    assert answer.status_code == 404
