"""What every API endpoint shares: JSON answers and errors, the bearer token, the user it
belongs to, and reading arguments (query strings and JSON bodies) with clear 400s."""

from __future__ import annotations

import json
import re
from typing import Any, overload

from flask import Response, g, request

from engine import errors
from engine.auth import logins
from engine.replication.http import encode_body
from web.errors import status_of
from web.pages import app_cluster
from web.security import login_guard

# Paging: how many items a list answers by default, and at most.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
# The largest integer a query argument may carry (SQLite's integers are int64).
INT64_MAX = 2**63 - 1
_INTEGER = re.compile(r"-?[0-9]{1,19}")
REALM = 'Bearer realm="partitionlet"'


def json_response(obj: object, status: int = 200) -> Response:
    """`obj` as JSON; gzip compressed when the client accepts it and it is worth it."""
    accepts_gzip = "gzip" in (request.headers.get("Accept-Encoding") or "").lower()
    if accepts_gzip:
        body, compressed = encode_body(obj)
    else:
        body, compressed = json.dumps(obj, separators=(",", ":"), default=str).encode(), False
    response = Response(body, status=status, mimetype="application/json")
    if compressed:
        response.headers["Content-Encoding"] = "gzip"
    response.headers["Cache-Control"] = "no-store"
    return response


def error_response(
    status: int, exc: BaseException | None = None, *, name: str = "", message: str = ""
) -> Response:
    response = json_response(
        {
            "error": name or type(exc).__name__,
            "message": message or (str(exc) if exc is not None else ""),
        },
        status,
    )
    if status == 401:
        response.headers["WWW-Authenticate"] = REALM
    return response


def engine_error(exc: errors.PartitionletError) -> Response:
    response = error_response(status_of(exc), exc)
    if isinstance(exc, errors.TryLater):  # 429 or 503: say when to come back
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def bearer_token() -> str | None:
    """The token of `Authorization: Bearer TOKEN`, or None."""
    header = request.headers.get("Authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def authenticate_user() -> Response | None:
    """Make the request act as the owner of its API token, or answer 401.

    Whatever web/auth.py found in a session cookie is dropped first: the API is exempt from
    CSRF protection, so a cookie must never be enough here."""
    g.user = None
    g.cluster = None
    token = bearer_token()
    if token is None:
        return error_response(
            401,
            name="Unauthorized",
            message="an API token is required: Authorization: Bearer TOKEN "
            "(make one on the Users page or with `plet user token`)",
        )
    try:
        # guesses count against the client's address (engine.auth.logins)
        user = logins.token_user(
            app_cluster(), token, request.remote_addr or "unknown", login_guard().limiter
        )
    except errors.TokenExpired as exc:
        return error_response(401, name="TokenExpired", message=str(exc))
    except errors.LoginThrottled as exc:
        return error_response(429, name="LoginThrottled", message=str(exc))
    if user is None:
        return error_response(401, name="Unauthorized", message="unknown or revoked API token")
    g.user = user
    g.cluster = app_cluster().as_principal(user.principal)
    return None


# --- arguments -----------------------------------------------------------------------------


@overload
def query_int(name: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int: ...
@overload
def query_int(
    name: str, default: None = None, *, minimum: int = 0, maximum: int | None = None
) -> int | None: ...
def query_int(
    name: str, default: int | None = None, *, minimum: int = 0, maximum: int | None = None
) -> int | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    # ASCII digits, at most 19 of them: "²" or a 5,000-digit number is a 400, not an int()
    # error, and every value fits SQLite's int64 (an offset past it is no position).
    if maximum is None:
        maximum = INT64_MAX
    if not _INTEGER.fullmatch(raw):
        raise errors.InvalidArgument(
            f"{name} must be an integer from {minimum} to {maximum}, not {raw[:40]!r}"
        )
    value = int(raw)
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" to {maximum}" if maximum is not None else " or more"
        raise errors.InvalidArgument(f"{name} must be {minimum}{upper}, not {value}")
    return value


def paging() -> tuple[int, int]:
    """(limit, offset) from the query string."""
    limit = query_int("limit", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
    offset = query_int("offset", 0)
    return limit, offset


def json_body() -> dict[str, Any]:
    """The request's JSON object (400 for anything else)."""
    try:
        data = request.get_json(silent=True)
    except RecursionError:  # silent covers only malformed JSON, not a hostile nesting
        raise errors.InvalidArgument("the request body is JSON nested too deeply to read") from None
    if not isinstance(data, dict):
        raise errors.InvalidArgument(
            "the request body must be a JSON object (Content-Type: application/json)"
        )
    return data


def field(
    body: dict[str, Any], name: str, kind: type | tuple[type, ...], *, required: bool = False
) -> Any:
    """`body[name]` checked against `kind` (None when absent and not required)."""
    value = body.get(name)
    if value is None:
        if required:
            raise errors.InvalidArgument(f"{name} is required")
        return None
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise errors.InvalidArgument(f"{name} has the wrong type: {value!r}")
    if not isinstance(value, kind):
        raise errors.InvalidArgument(f"{name} has the wrong type: {value!r}")
    return value


def stream_path(url_part: str) -> str:
    """A stream path as the URL carries it (no leading slash) -> the engine's `/a/b`."""
    return "/" + url_part.strip("/")


def topic_name(url_part: str) -> str:
    return "/" + url_part.lstrip("/")
