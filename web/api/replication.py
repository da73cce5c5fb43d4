"""`POST /api/v1/replication/<op>`: the door other clusters' replicators use.

Runs one method of the `Target` protocol (the list is `engine.replication.http.OPS`) on this
cluster for a remote replicator. The body is a JSON object, optionally gzip compressed
(`Content-Encoding: gzip`); the answer is JSON, gzip compressed when the client accepts it
and it is worth it. A request needs `Authorization: Bearer TOKEN` with a replication token
this cluster issued (`plet replica token`), never a user's API token: 401 without one or
with an unknown one, 403 when it is another stream's token; unknown tokens count against
the client's address like wrong passwords (engine.auth.logins), 429 while it must wait. Errors are
`{"error": ClassName, "message": ...}`.
"""

from __future__ import annotations

from flask import Response, current_app, request

from engine import errors
from engine.replication.http import Unauthorized, decode_body
from web import state
from web.api import api
from web.api.base import bearer_token, error_response, json_response
from web.security import login_guard

# Largest request body accepted, compressed (the inflated size is capped in decode_body).
MAX_REQUEST_BYTES = 128 * 1024 * 1024


@api.route("/replication/<op>", methods=["POST"])
def replication(op: str) -> Response:
    service = state(current_app).replication
    token = bearer_token()
    try:
        # Authenticate before reading the body: no work for strangers. Unknown tokens count
        # against the client's address in the limiter every login path shares.
        address = request.remote_addr or "unknown"
        service.authenticate(token, address, login_guard().limiter)
        length = request.content_length
        if length is not None and length > MAX_REQUEST_BYTES:
            raise errors.InvalidArgument(f"request body larger than {MAX_REQUEST_BYTES} bytes")
        # a replication peer, now known, may send more than the app's bound for everyone
        request.max_content_length = MAX_REQUEST_BYTES
        try:
            args = decode_body(
                request.get_data(cache=False), request.headers.get("Content-Encoding")
            )
        except (ValueError, OSError, EOFError) as exc:
            if isinstance(exc, errors.PartitionletError):
                raise
            raise errors.InvalidArgument(f"unreadable request body: {exc}") from exc
        return json_response(service.handle(token, op, args))
    except Unauthorized as exc:
        return error_response(401, exc)
    except errors.LoginThrottled as exc:
        response = error_response(429, exc)
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
    except errors.AccessDenied as exc:
        return error_response(403, exc)
    except errors.NotFound as exc:
        return error_response(404, exc)
    except errors.AlreadyExists as exc:
        return error_response(409, exc)
    except (ValueError, errors.IllegalState) as exc:
        return error_response(400, exc)
    except errors.CorruptBatch as exc:
        # a batch that arrived altered: the request's fault, refused whole; a retry of the
        # same bytes would be too (a 5xx would be retried)
        return error_response(400, exc)
    except errors.PartitionletError as exc:
        current_app.logger.warning("replication %s failed: %s", op, exc)
        return error_response(503, exc)
