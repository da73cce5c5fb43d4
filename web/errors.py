"""Engine errors as HTTP answers: 404 for what does not exist, 403 for what an ACE refuses,
400 for bad input, 503 for storage trouble. A page gets an error page; an htmx request gets
a short message in the page's error area (`#flash`), so a failed action never blanks the
view."""

from __future__ import annotations

from flask import Flask, Response, jsonify, render_template, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from engine import errors
from engine.client.message_search import TooManySearches
from spark_tasks.jobs import TooManyJobs
from web.pages import wants_partial

_STATUS = (
    (errors.NotFound, 404),
    (errors.AccessDenied, 403),
    (errors.AlreadyExists, 409),
    (ValueError, 400),  # InvalidName, InvalidArgument, InvalidPolicy, MessageTooLarge ...
    (errors.IllegalState, 409),
    (errors.LoginThrottled, 429),
    (TooManySearches, 429),
    (TooManyJobs, 429),
    (errors.TokenExpired, 401),
    (errors.PartitionletError, 503),  # Busy, storage trouble
)


def status_of(exc: BaseException) -> int:
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def too_large_message() -> str:
    """What a 413 says: the bound this request was held to."""
    limit = request.max_content_length
    return f"the request body is larger than {limit:,} bytes" if limit else "too large"


def _answer(status: int, title: str, message: str) -> tuple[Response | str, int] | Response:
    if request.path.startswith("/api/"):
        return jsonify({"error": title, "message": message}), status
    if wants_partial():
        # htmx swaps only 2xx answers by default: send the message to #flash instead
        response = Response(
            render_template("errors/_flash.html", status=status, title=title, message=message),
            status=200,
        )
        response.headers["HX-Retarget"] = "#flash"
        response.headers["HX-Reswap"] = "innerHTML"
        return response
    return render_template("errors/error.html", status=status, title=title, message=message), status


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(errors.PartitionletError)
    def engine_error(exc: errors.PartitionletError):
        status = status_of(exc)
        if status >= 500:
            app.logger.warning("%s %s: %s", request.method, request.path, exc)
        answer = _answer(status, type(exc).__name__, str(exc))
        if isinstance(exc, errors.TryLater):  # 429 or 503: say when to come back
            response = app.make_response(answer)
            response.headers["Retry-After"] = str(exc.retry_after)
            return response
        return answer

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(exc: RequestEntityTooLarge):
        return _answer(413, exc.name, too_large_message())

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        return _answer(exc.code or 500, exc.name, exc.description or "")
