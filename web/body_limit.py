"""The request-body limit for chunked bodies: a WSGI middleware that counts what the app
reads from `wsgi.input` when a request has no Content-Length.

With a Content-Length, werkzeug refuses a body past `request.max_content_length` before
reading it (Flask's MAX_CONTENT_LENGTH, web.MAX_REQUEST_BYTES). A chunked body it only
truncates at that bound, silently: the app would parse a cut body, or a server without
the dev server's chunk handling would hand over everything. Here the read that reaches
the bound looks one byte further; if the body goes on, RequestEntityTooLarge (413) is
raised, which the app's error handlers answer (HTML, or JSON under /api and /registry)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

from flask import has_request_context, request
from werkzeug.exceptions import RequestEntityTooLarge


class _CountedInput(io.RawIOBase):
    def __init__(self, stream: Any, default: Callable[[], int | None]) -> None:
        self._stream = stream
        self._default = default
        self._read = 0

    def readable(self) -> bool:
        return True

    def _limit(self) -> int | None:
        # the request's own bound when a route set one (the registry's, replication's)
        return request.max_content_length if has_request_context() else self._default()

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self._read += n
        limit = self._limit()
        if limit is not None and n and self._read >= limit and self._stream.read(1):
            raise RequestEntityTooLarge()
        return n


class BodyLimit:
    """Wraps a WSGI app; `default` gives the bound outside a request context."""

    def __init__(self, app: Any, default: Callable[[], int | None]) -> None:
        self.app = app
        self._default = default

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if not environ.get("CONTENT_LENGTH") and "wsgi.input" in environ:
            environ["wsgi.input"] = _CountedInput(environ["wsgi.input"], self._default)
        result: Iterable[bytes] = self.app(environ, start_response)
        return result
