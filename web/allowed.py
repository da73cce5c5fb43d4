"""Actions only where allowed: what the pages offer the logged-in user, and the read-only
console (`plet web --read-only`, the app's `READ_ONLY`).

Templates ask `may("delete_stream", path)` (engine.auth.actions: a `Verdict`, false with
its `reason` when the user may not) and show the button only when it is allowed, else
`not_allowed(verdict, label)`: the label greyed, the reason on hover. The engine checks every
change again; this only decides what a page shows.

A read-only console refuses every request that could change something (any method but
GET, HEAD and OPTIONS, on pages and the JSON API alike) with 403 before any view runs;
logging in and out, and stopping one's own message search, still work. The pages show a
"read-only" badge and no change buttons. A request that a read-only console proxies here
(web/remote.py, web/proxied.py) is served the same way.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, current_app, g, request
from markupsafe import Markup, escape

from engine import errors
from engine.auth.actions import READ_ONLY_CONSOLE, Allowed, Verdict
from web.pages import cluster
from web.proxied import READ_ONLY_ENVIRON

READ_ONLY = "READ_ONLY"
"""The app's config key: True serves no changes (`plet web --read-only`)."""

# Methods that change nothing (RFC 9110's safe methods).
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
# What a read-only console still takes: a session starts and ends, and a message search
# of the user's own stops (it lives in this process's memory); nothing of the cluster.
_OPEN = frozenset({"auth.login", "auth.logout", "message_search.cancel"})


def read_only() -> bool:
    """This console is read-only, or serves this request to a read-only console that proxies
    it (web/proxied.py, believed from a proxy with a token only)."""
    return bool(current_app.config.get(READ_ONLY)) or bool(request.environ.get(READ_ONLY_ENVIRON))


def allowed() -> Allowed:
    """The request's `Allowed` for the logged-in user (made once per request)."""
    found = g.get("allowed")
    if found is None:
        found = g.allowed = Allowed(cluster(), read_only=read_only())
    return found


def may(action: str, where: str | None = None) -> Verdict:
    return allowed()(action, where)


def not_allowed(verdict: Verdict, label: str) -> Markup:
    """What stands where a refused button would: its label, greyed, the reason on hover
    (and for screen readers)."""
    return Markup(
        '<span class="denied" title="{reason}" data-denied="{label}">{label}'
        '<span class="visually-hidden"> ({reason})</span></span>'
    ).format(reason=escape(verdict.reason), label=escape(label))


def refuse_changes() -> None:
    """A read-only console's guard, before every view (and before the user is looked up:
    the answer is the same for everyone)."""
    if not read_only() or request.method in _SAFE or request.endpoint in _OPEN:
        return
    raise errors.AccessDenied(
        f"this console is read-only ({READ_ONLY_CONSOLE}, plet web --read-only): it serves "
        "no changes"
    )


def init_app(app: Flask) -> None:
    app.config.setdefault(READ_ONLY, False)
    # first of all the request hooks: a refused change never reaches a view or a form
    app.before_request_funcs.setdefault(None, []).insert(0, refuse_changes)

    @app.context_processor
    def allowed_globals() -> dict[str, Any]:
        return {
            "may": may,
            "not_allowed": not_allowed,
            "may_change": lambda: allowed().changes,
            "read_only_console": read_only,
        }
