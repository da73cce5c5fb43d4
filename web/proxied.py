"""A console served through another one (web/remote.py on the other side): which requests
may say where the browser really is.

Another console that serves this one under a prefix of its own (`/c/<name>/`) sends every
request with `X-Partitionlet-Proxy: TOKEN` and the `X-Forwarded-For`, `-Proto`, `-Host` and
`-Prefix` of the browser's request; with them this console builds its links under that
prefix, checks CSRF referrers against the browser's host, and throttles logins by the
browser's address. Those headers are believed only with a token this console's main
cluster issued: a replication token (`plet replica token STREAM`, any stream) or an API
token of one of its administrators. The token proves the other console, never a user: it
is taken out of the request before any view runs, every user still logs in with their own
account and session, and an API request still needs its own bearer token. Without the
header every forwarded header is dropped (nobody else can make this console believe
them); with a wrong token the request is refused (401, and counted as a failed login of
the address, so tokens are guessed no faster than passwords).

A trusted proxy may also ask for a read-only view (`X-Partitionlet-Read-Only: 1`, from a
`plet web --read-only` console): the request is then served as by a read-only console.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.wrappers import Response

from engine import errors
from engine.auth import logins
from engine.replication.http import TOKEN_PREFIX

PROXY_HEADER = "X-Partitionlet-Proxy"
READ_ONLY_HEADER = "X-Partitionlet-Read-Only"
REFUSED = "refused"  # PROXY_HEADER's value on an answer that refused the token
READ_ONLY_ENVIRON = "partitionlet.proxy_read_only"
# on a request a trusted proxy forwarded: the mount it serves this console under
PROXIED_ENVIRON = "partitionlet.proxied"
_TOKEN = "HTTP_X_PARTITIONLET_PROXY"
_READ_ONLY = "HTTP_X_PARTITIONLET_READ_ONLY"
# Every header by which a client could claim another address, scheme, host or prefix.
FORWARDED = (
    "HTTP_FORWARDED",
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PORT",
    "HTTP_X_FORWARDED_PREFIX",
    "HTTP_X_REAL_IP",
)


class ProxyTrust:
    """WSGI middleware around a console (`app`), checking proxy tokens with the cluster of
    the Flask app `main` (see the module's docstring)."""

    def __init__(self, app: Any, main: Flask) -> None:
        self.app = app
        self.main = main
        # one hop: the proxy sets each header to one value of its own
        self.trusted = ProxyFix(app, x_for=1, x_proto=1, x_host=1, x_port=0, x_prefix=1)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        token = environ.pop(_TOKEN, None)
        read_only = environ.pop(_READ_ONLY, None) == "1"
        if token is None:
            for key in FORWARDED:
                environ.pop(key, None)
            return self.app(environ, start_response)
        for key in ("HTTP_FORWARDED", "HTTP_X_FORWARDED_PORT", "HTTP_X_REAL_IP"):
            environ.pop(key, None)  # not among the headers a proxy sends
        refusal = self._refusal(token, environ.get("REMOTE_ADDR") or "unknown")
        if refusal is not None:
            status, message = refusal
            answer = Response(message + "\n", status=status, mimetype="text/plain")
            answer.headers[PROXY_HEADER] = REFUSED
            return answer(environ, start_response)
        environ[PROXIED_ENVIRON] = environ.get("HTTP_X_FORWARDED_PREFIX", "")
        if read_only:
            environ[READ_ONLY_ENVIRON] = True
        return self.trusted(environ, start_response)

    def _refusal(self, token: str, address: str) -> tuple[int, str] | None:
        from web import state
        from web.security import login_guard_of

        limiter = login_guard_of(self.main).limiter
        web_state = state(self.main)
        try:
            if token.startswith(TOKEN_PREFIX):
                web_state.replication.authenticate(token, address, limiter)
                return None
            user = logins.token_user(web_state.cluster, token, address, limiter)
        except errors.TryLater as exc:
            return 429, f"console proxy token: {exc}"
        except errors.PartitionletError as exc:  # unknown, revoked or expired
            return 401, f"console proxy token refused: {exc}"
        if user is None:
            return 401, "console proxy token refused: unknown or revoked token"
        if not user.admin:
            return 401, (
                "console proxy token refused: an API token proves a console only when its "
                "user is an administrator (or give a replication token)"
            )
        return None


__all__ = [
    "FORWARDED",
    "PROXIED_ENVIRON",
    "PROXY_HEADER",
    "READ_ONLY_HEADER",
    "REFUSED",
    "ProxyTrust",
]
