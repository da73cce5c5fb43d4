"""The JSON API, mounted at `/api/v1/`. For now: the replication endpoints.

`POST /api/v1/replication/<op>` runs one method of the `Target` protocol (the list is
`engine.replication_http.OPS`) on this cluster for a remote replicator. The body is a JSON
object, optionally gzip compressed (`Content-Encoding: gzip`); the answer is JSON, gzip
compressed when the client accepts it and it is worth it. A request needs
`Authorization: Bearer TOKEN` with a token this cluster issued (`plet replica token`):
401 without one or with an unknown one, 403 when it is another stream's token. Errors are
`{"error": ClassName, "message": ...}`.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, request

from engine import errors
from engine.replication_http import Unauthorized, decode_body, encode_body
from web import state

api = Blueprint("api", __name__)

# Largest request body accepted, compressed (the inflated size is capped in decode_body).
MAX_REQUEST_BYTES = 128 * 1024 * 1024


def _json(obj: object, status: int = 200) -> Response:
    accepts_gzip = "gzip" in (request.headers.get("Accept-Encoding") or "").lower()
    if accepts_gzip:
        body, compressed = encode_body(obj)
    else:
        import json

        body, compressed = json.dumps(obj, separators=(",", ":")).encode(), False
    response = Response(body, status=status, mimetype="application/json")
    if compressed:
        response.headers["Content-Encoding"] = "gzip"
    response.headers["Cache-Control"] = "no-store"
    return response


def _error(status: int, exc: BaseException) -> Response:
    response = _json({"error": type(exc).__name__, "message": str(exc)}, status)
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="partitionlet"'
    return response


def _bearer() -> str | None:
    header = request.headers.get("Authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


@api.route("/replication/<op>", methods=["POST"])
def replication(op: str) -> Response:
    service = state(current_app).replication
    token = _bearer()
    try:
        # Authenticate before reading the body: no work for strangers.
        service.authenticate(token)
        length = request.content_length
        if length is not None and length > MAX_REQUEST_BYTES:
            raise errors.InvalidArgument(f"request body larger than {MAX_REQUEST_BYTES} bytes")
        try:
            args = decode_body(
                request.get_data(cache=False), request.headers.get("Content-Encoding")
            )
        except (ValueError, OSError, EOFError) as exc:
            if isinstance(exc, errors.PartitionletError):
                raise
            raise errors.InvalidArgument(f"unreadable request body: {exc}") from exc
        return _json(service.handle(token, op, args))
    except Unauthorized as exc:
        return _error(401, exc)
    except errors.AccessDenied as exc:
        return _error(403, exc)
    except errors.NotFound as exc:
        return _error(404, exc)
    except errors.AlreadyExists as exc:
        return _error(409, exc)
    except (ValueError, errors.IllegalState) as exc:
        return _error(400, exc)
    except errors.PartitionletError as exc:
        current_app.logger.warning("replication %s failed: %s", op, exc)
        return _error(503, exc)
