"""Logging in and out, and the rule that every page needs a logged-in user.

The session keeps the user's name only; the user is read from the catalog on each request,
so a deleted user is out at their next click and a changed group takes effect at once.
The JSON API (web/api.py) does its own authentication with bearer tokens.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, g, redirect, render_template, request, session, url_for

from engine import errors
from web.pages import app_cluster

auth = Blueprint("auth", __name__)

# Endpoints open without a session: the login page, assets, and the API (tokens).
_PUBLIC_ENDPOINTS = {"auth.login", "static", "assets.vendor"}
_PUBLIC_BLUEPRINTS = {"api"}


@auth.before_app_request
def load_user():
    g.user = None
    name = session.get("user")
    if name is not None:
        try:
            g.user = app_cluster().user(name)
        except errors.UnknownUser:
            session.clear()
    if g.user is not None:
        g.cluster = app_cluster().as_principal(g.user.principal)
        return None
    if request.endpoint in _PUBLIC_ENDPOINTS or request.blueprint in _PUBLIC_BLUEPRINTS:
        return None
    if request.endpoint is None:  # a 404: let the error handler answer
        return None
    target = request.full_path if request.query_string else request.path
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


@auth.route("/login", methods=["GET", "POST"])
def login():
    error = None
    username = ""
    if request.method == "POST":
        username = (request.form.get("username") or "").strip()
        password = request.form.get("password") or ""
        found = app_cluster().authenticate(username, password) if username and password else None
        if found is None:
            error = "Wrong username or password."
        else:
            session.clear()  # a fresh session: no fixation across a login
            session["user"] = found.name
            session.permanent = True
            return redirect(_safe_next(request.args.get("next")))
    status = 401 if error else 200
    return (
        render_template("auth/login.html", error=error, username=username),
        status,
    )


@auth.route("/logout", methods=["POST"])
def logout():
    session.clear()
    return redirect(url_for("auth.login"))
