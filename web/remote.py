"""A remote console served under `/c/<name>/` of this one: a reverse proxy to one address.

`RemoteConsole` forwards every request under its mount (pages, form posts, htmx requests,
assets, downloads, the JSON API) to the one console a clusters-file entry or a replication
link names (engine.served_clusters: `url` with a `token`), and streams the answer back as
it comes. The rules:

- One host only. The address is fixed when the console starts; a request only chooses the
  path and query under it (`//host`, an absolute URL in the request line or a `Host`
  header change nothing: the path is re-encoded behind the fixed origin, redirects are
  never followed). https is verified against the system's CAs or the entry's `ca_file`;
  plain http only on loopback or with `insecure = true` (engine.served_clusters).
- The other console trusts this one (web/proxied.py): every request carries this
  console's token in `X-Partitionlet-Proxy` and the browser's address, scheme, host and
  mount in `X-Forwarded-*`, set here (whatever the browser sent in those is dropped), so
  the remote builds its links under `/c/<name>/`. The token signs in nobody.
- Users sign in to the remote cluster with their own account there (its login page,
  through here). Cookies stay apart: the remote's are renamed `plet_via_<name>.<cookie>`
  and scoped to `/c/<name>/`, so they never reach this console's own apps; of the
  browser's cookies only those go to the remote (this console's session never does).
- A console that is down, slow or answers something that is not HTTP gives a page that
  says so (502, 504 for a timeout), never a 500; one that refuses the token says that.
- A read-only console (`plet web --read-only`) asks the remote for read-only pages
  (web/proxied.py) and itself forwards no change but logging in and out.
- The remote's pages share this console's origin (that is what keeps one address and one
  switcher): its scripts run as this site's. So only a console trusted as much as this one
  is served (an administrator's act: a clusters-file entry, a link), and nothing of an
  answer may reach beyond the mount: no `Clear-Site-Data`, `Strict-Transport-Security`,
  `Alt-Svc` or `Service-Worker-Allowed` header passes, and no service worker script is
  served.
"""

from __future__ import annotations

import html
import logging
import ssl
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    MaxRetryError,
    NewConnectionError,
    ReadTimeoutError,
    SSLError,
)
from werkzeug.wsgi import get_content_length, get_input_stream

from engine.served_clusters import ServedCluster
from web.proxied import FORWARDED, PROXY_HEADER, READ_ONLY_HEADER, REFUSED
from web.security import CONTENT_SECURITY_POLICY

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
# Between two reads of an answer (a download or a search may take long, but not silently).
READ_TIMEOUT_S = 120.0
CHUNK = 64 * 1024
COOKIE_PREFIX = "plet_via_"
# Hop-by-hop headers (RFC 9110 7.6.1) and what this proxy sets itself.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# Expect: the body is sent whole at once (this side already read it)
_REQUEST_DROPPED = frozenset(
    {
        "HTTP_HOST",
        "HTTP_COOKIE",
        "HTTP_EXPECT",
        "HTTP_X_PARTITIONLET_PROXY",
        "HTTP_X_PARTITIONLET_READ_ONLY",
    }
) | frozenset(FORWARDED)
# Answer headers that would reach beyond /c/<name>/ (the whole origin, this console's own
# pages and cookies): never passed on.
_RESPONSE_DROPPED = frozenset(
    {
        "clear-site-data",
        "service-worker-allowed",
        "strict-transport-security",
        "alt-svc",
        "set-cookie2",
    }
)
# Answer headers whose URL may name the remote's own origin.
_URL_HEADERS = ("location", "content-location", "hx-redirect", "hx-location", "hx-push-url")
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# What a read-only console still forwards: a session of the remote starts and ends (of its
# main cluster, `/login`, or of another it serves, `/c/<name>/login`).
_READ_ONLY_OPEN = frozenset({"login", "logout"})
# Characters kept as they are when a path is encoded again (RFC 3986 pchar and "/").
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


class RemoteConsole:
    """The WSGI app that serves the remote console `cluster` (its `url` and `token`) under
    the mount it is given (SCRIPT_NAME). `max_body`: the largest request body forwarded.
    Thread-safe: a pool of connections to the one host."""

    def __init__(self, cluster: ServedCluster, *, max_body: int, read_only: bool = False) -> None:
        if cluster.url is None or cluster.token is None:
            raise ValueError(f"{cluster.name} is not a remote console with a token")
        parts = urlsplit(cluster.url)
        if parts.hostname is None:
            raise ValueError(f"no host in {cluster.url}")
        self.cluster = cluster
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.netloc = parts.netloc
        self.max_body = max_body
        self.read_only = read_only
        self.cookie_prefix = f"{COOKIE_PREFIX}{cluster.name}."
        timeout = urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S)
        pool: urllib3.HTTPConnectionPool
        if parts.scheme == "https":
            # verified always: the system's CAs, or the private CA the entry names
            context = ssl.create_default_context(cafile=cluster.ca_file)
            pool = urllib3.HTTPSConnectionPool(
                parts.hostname,
                parts.port or 443,
                ssl_context=context,
                timeout=timeout,
                maxsize=8,
                retries=False,
            )
        else:
            pool = urllib3.HTTPConnectionPool(
                parts.hostname, parts.port or 80, timeout=timeout, maxsize=8, retries=False
            )
        self.pool = pool

    def close(self) -> None:
        self.pool.close()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        path = environ.get("PATH_INFO", "") or "/"
        mount = environ.get("SCRIPT_NAME", "")
        if environ.get("HTTP_SERVICE_WORKER"):
            # a service worker's script: registered from here it could serve this whole site
            why = f"{self.cluster.name}'s pages are served here without service workers."
            return self._page(environ, start_response, 403, "no service workers", why)
        if self.read_only and method not in _SAFE_METHODS and not _opens_or_ends(path):
            why = f"plet web --read-only forwards no change to {self.cluster.name}."
            return self._page(environ, start_response, 403, "this console is read-only", why)
        body = self._body_of(environ)
        if body is None:
            why = f"a request body is at most {self.max_body:,} bytes here"
            return self._page(environ, start_response, 413, "request too large", why)
        try:
            answer = self.pool.urlopen(
                method,
                self._target(environ),
                body=body if body or method not in _SAFE_METHODS else None,
                headers=self._request_headers(environ, mount, len(body)),
                redirect=False,
                assert_same_host=True,
                preload_content=False,
                decode_content=False,
            )
        except ValueError as exc:  # a header http.client will not send
            return self._page(environ, start_response, 400, "bad request", _short(exc))
        except HTTPError as exc:
            status, why = _failure(exc)
            log.warning("console %s at %s: %s", self.cluster.name, self.origin, why)
            title = f"{self.cluster.name} cannot be reached"
            return self._page(
                environ, start_response, status, title, f"the console at {self.origin} {why}"
            )
        if answer.headers.get(PROXY_HEADER) == REFUSED:
            reason = answer.read(4096).decode("utf-8", "replace").strip()
            answer.close()
            why = (
                f"the console at {self.origin} did not accept this console's token "
                f"(the clusters file's token, or the replication link's): {reason}"
            )
            title = f"{self.cluster.name} refused this console"
            return self._page(environ, start_response, 502, title, why)
        start_response(
            f"{answer.status} {answer.reason or ''}".strip(),
            self._response_headers(answer, environ, mount),
        )
        return self._body(answer)

    def _body_of(self, environ: dict[str, Any]) -> bytes | None:
        """The request's body, read whole (None: longer than `max_body`, chunked or not)."""
        length = get_content_length(environ)
        if length is not None:
            return None if length > self.max_body else get_input_stream(environ).read()
        if "wsgi.input_terminated" not in environ:
            return b""  # neither a length nor a server that ends the body: none (werkzeug's rule)
        stream, chunks, size = environ["wsgi.input"], [], 0
        while chunk := stream.read(min(CHUNK, self.max_body + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > self.max_body:
                return None
        return b"".join(chunks)

    def _target(self, environ: dict[str, Any]) -> str:
        """The request target on the remote: always a path of the one origin (one leading
        slash: `//host/...` is a path here, never another host), encoded again."""
        raw = environ.get("PATH_INFO", "") or "/"
        # WSGI gives the path as latin-1 text of its bytes: back to bytes, then encoded
        path = "/" + quote(raw.encode("latin-1").lstrip(b"/"), safe=_PATH_SAFE)
        query = environ.get("QUERY_STRING", "")
        if query:
            path += "?" + quote(query.encode("latin-1"), safe=_PATH_SAFE + "?%")
        return path

    def _request_headers(self, environ: dict[str, Any], mount: str, length: int) -> dict[str, str]:
        listed = {h.strip().lower() for h in environ.get("HTTP_CONNECTION", "").split(",")}
        headers: dict[str, str] = {}
        for key, value in environ.items():
            if not key.startswith("HTTP_") or key in _REQUEST_DROPPED:
                continue
            name = key[5:].replace("_", "-").title()
            if name.lower() in _HOP or name.lower() in listed:
                continue
            headers[name] = value
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        if length or environ.get("REQUEST_METHOD", "GET").upper() not in _SAFE_METHODS:
            headers["Content-Length"] = str(length)
        cookies = self._cookies_to_remote(environ.get("HTTP_COOKIE", ""))
        if cookies:
            headers["Cookie"] = cookies
        headers["Host"] = self.netloc
        headers["X-Forwarded-For"] = environ.get("REMOTE_ADDR") or "unknown"
        headers["X-Forwarded-Proto"] = environ.get("wsgi.url_scheme", "http")
        headers["X-Forwarded-Host"] = _local_host(environ)
        headers["X-Forwarded-Prefix"] = mount
        headers[PROXY_HEADER] = self.cluster.token or ""
        if self.read_only:
            headers[READ_ONLY_HEADER] = "1"
        return headers

    def _cookies_to_remote(self, header: str) -> str:
        """The browser's cookies of the remote only (this console's never leave it)."""
        sent = []
        for part in header.split(";"):
            name, sep, value = part.strip().partition("=")
            if sep and name.startswith(self.cookie_prefix) and len(name) > len(self.cookie_prefix):
                sent.append(f"{name[len(self.cookie_prefix) :]}={value}")
        return "; ".join(sent)

    def _response_headers(
        self, answer: Any, environ: dict[str, Any], mount: str
    ) -> list[tuple[str, str]]:
        secure = environ.get("wsgi.url_scheme") == "https"
        listed = {h.strip().lower() for h in answer.headers.get("Connection", "").split(",")}
        out = []
        for name, value in answer.headers.items():
            lower = name.lower()
            if lower in _HOP or lower in listed or lower == PROXY_HEADER.lower():
                continue
            if lower in _RESPONSE_DROPPED:
                continue
            if lower == "set-cookie":
                value = self._cookie_to_browser(value, mount, secure)
                if value is None:
                    continue
            elif lower in _URL_HEADERS and value.startswith(self.origin):
                rest = value[len(self.origin) :]
                if rest == "" or rest[0] in "/?#":
                    value = mount + (rest if rest.startswith("/") else "/" + rest)
            out.append((name, value))
        return out

    def _cookie_to_browser(self, header: str, mount: str, secure: bool) -> str | None:
        """The remote's cookie renamed and scoped to this mount: it cannot overwrite, or be
        sent to, anything of this console's own."""
        first, *attributes = header.split(";")
        name, sep, value = first.strip().partition("=")
        if not sep or not name:
            return None
        kept = [f"{self.cookie_prefix}{name}={value}"]
        path = "/"
        for attribute in attributes:
            key, _, val = attribute.strip().partition("=")
            lower = key.strip().lower()
            if lower == "path":
                path = val.strip() or "/"
            elif lower == "domain" or (lower == "secure" and not secure) or not lower:
                continue  # this host's cookie; Secure only where this console is https
            else:
                kept.append(attribute.strip())
        path = path if path.startswith("/") else "/"
        kept.append(f"Path={mount}{path}")
        return "; ".join(kept)

    def _body(self, answer: Any) -> Iterator[bytes]:
        done = False
        try:
            yield from answer.stream(CHUNK, decode_content=False)
            done = True
        except HTTPError as exc:  # the remote went away mid-answer: the answer ends here
            log.warning("console %s at %s: %s", self.cluster.name, self.origin, exc)
        finally:
            if done:
                answer.release_conn()  # read to its end: the connection serves the next
            else:
                answer.close()  # half read (the browser left): never reused

    def _page(
        self, environ: dict[str, Any], start_response: Any, status: int, title: str, text: str
    ) -> Iterable[bytes]:
        """A plain page of this console saying what went wrong, with a way back."""
        mount = environ.get("SCRIPT_NAME", "")
        home = mount.rpartition("/c/")[0] + "/"
        body = (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title></head><body><main>"
            f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>"
            f'<p><a href="{html.escape(home)}">Back to this console</a></p>'
            "</main></body></html>"
        ).encode()
        start_response(
            f"{status} {_REASONS.get(status, 'Error')}",
            [
                ("Content-Type", "text/html; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
                ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
                ("X-Content-Type-Options", "nosniff"),
            ],
        )
        return [body]


_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    413: "Content Too Large",
    502: "Bad Gateway",
    504: "Gateway Timeout",
}


def _opens_or_ends(path: str) -> bool:
    return path.rpartition("/")[2] in _READ_ONLY_OPEN


def _failure(exc: HTTPError) -> tuple[int, str]:
    """(status, reason) for a request the remote did not answer."""
    if isinstance(exc, MaxRetryError) and exc.reason is not None:
        exc = exc.reason  # type: ignore[assignment]  # urllib3 keeps the cause there
    if isinstance(exc, NewConnectionError):  # before timeouts: urllib3 makes it one
        return 502, f"could not be reached: {_short(exc)}"
    if isinstance(exc, (ConnectTimeoutError, ReadTimeoutError)):
        return 504, "did not answer in time"
    if isinstance(exc, SSLError):
        return 502, f"failed the TLS check: {_short(exc)}"
    return 502, f"answered something that is not HTTP, or hung up: {_short(exc)}"


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 300 else text[:300] + "..."


def _local_host(environ: dict[str, Any]) -> str:
    host = environ.get("HTTP_HOST")
    if host:
        return str(host)
    port = environ.get("SERVER_PORT", "")
    default = "443" if environ.get("wsgi.url_scheme") == "https" else "80"
    name = str(environ.get("SERVER_NAME", "localhost"))
    return name if port in ("", default) else f"{name}:{port}"


__all__ = ["COOKIE_PREFIX", "RemoteConsole"]
