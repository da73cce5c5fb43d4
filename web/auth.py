"""Logging in and out, and the rule that every page needs a logged-in user.

The session cookie holds the id of a server-side session (engine.auth.users, a row of the
catalog) and nothing else that grants anything: each request looks the session up with its
user, so logout, a password change, an admin flag change or deleting the user end it at
once in every process, and a changed group takes effect at the next click. Login attempts
are throttled per user name (engine) and per client address (web/security.py), and the
password hashes that run at once are bounded (engine.auth.users.HASH_GATE).
The JSON API (web/api/) does its own authentication with bearer tokens.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import (
    Blueprint,
    current_app,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)

from engine import errors
from engine.auth import logins
from web.pages import app_cluster
from web.security import login_guard

auth = Blueprint("auth", __name__)

# Endpoints open without a session: the login page, assets, and the API (tokens).
_PUBLIC_ENDPOINTS = {"auth.login", "static", "assets.vendor", "assets.favicon"}
_PUBLIC_BLUEPRINTS = {"api", "registry"}  # both authenticate by header
# The session cookie's key for the server-side session id.
SESSION_ID = "sid"


def start_session(name: str) -> None:
    """Log this browser in as `name` with a fresh session: a fresh cookie too, so nothing
    of an earlier one (fixation) carries over."""
    session.clear()
    session[SESSION_ID] = app_cluster().create_session(
        name, lifetime_s=current_app.config["SESSION_ABSOLUTE_LIFETIME"]
    )
    session.permanent = True


def end_session() -> None:
    """End this browser's session on the server, then forget the cookie."""
    session_id = session.get(SESSION_ID)
    if session_id is not None:
        app_cluster().end_session(session_id)
    session.clear()


@auth.before_app_request
def load_user():
    g.user = None
    session_id = session.get(SESSION_ID)
    if session_id is not None:
        idle = current_app.permanent_session_lifetime.total_seconds()
        g.user = app_cluster().session_user(session_id, idle_s=idle)
        if g.user is None:
            session.clear()
    if g.user is not None:
        g.cluster = app_cluster().as_principal(g.user.principal)
        return None
    if request.endpoint in _PUBLIC_ENDPOINTS or request.blueprint in _PUBLIC_BLUEPRINTS:
        return None
    if request.endpoint is None:  # a 404: let the error handler answer
        return None
    target = request.full_path if request.query_string else request.path
    # the app may be mounted under a prefix (/c/<cluster>/, web/clusters.py): come back there
    target = request.script_root + target
    login = url_for("auth.login", next=target)
    if request.headers.get("HX-Request"):
        # an htmx request after the session ended: load the login page, not a fragment of it
        return "", 401, {"HX-Redirect": login}
    return redirect(login)


def _safe_next(target: str | None) -> str:
    """Only a path on this site: never an open redirect to another host."""
    if not target:
        return url_for("overview.index")
    parts = urlsplit(target)
    if (
        parts.scheme
        or parts.netloc
        or not target.startswith("/")
        or target.startswith("//")
        # browsers read a backslash as a slash: /\evil.example is //evil.example
        or "\\" in target
        or any(ord(c) < 32 for c in target)
    ):
        return url_for("overview.index")
    return target


def _login_page(username: str = "", error: str | None = None, status: int = 200, wait: int = 0):
    headers = {"Retry-After": str(wait)} if wait else {}
    return render_template("auth/login.html", error=error, username=username), status, headers


@auth.route("/login", methods=["GET", "POST"])
def login():
    if request.method == "GET":
        return _login_page()
    username = (request.form.get("username") or "").strip()
    password = request.form.get("password") or ""
    address = request.remote_addr or "unknown"
    guard = login_guard()
    wait = guard.wait(address)
    if wait:
        return _login_page(
            username,
            f"Too many failed logins from your address. Try again in {wait} seconds.",
            429,
            wait,
        )
    if not username or not password:
        return _login_page(username, "Wrong username or password.", 401)
    try:
        found = logins.login(app_cluster(), username, password, address, guard.limiter)
    except errors.LoginThrottled as exc:
        return _login_page(
            username,
            f"Too many wrong passwords for this user. Try again in {exc.retry_after} seconds.",
            429,
            exc.retry_after,
        )
    except errors.Busy as exc:
        return _login_page(
            username,
            "The server is busy checking other logins. Try again in a moment.",
            503,
            exc.retry_after,
        )
    if found is None:  # counted against the address by logins.login
        return _login_page(username, "Wrong username or password.", 401)
    start_session(found.name)
    return redirect(_safe_next(request.args.get("next")))


@auth.route("/logout", methods=["POST"])
def logout():
    end_session()
    return redirect(url_for("auth.login"))
