"""Sessions, CSRF and the security headers of every response.

- Sessions live in signed cookies that are HttpOnly and SameSite=Lax (Secure when the
  console is served over https: set `SESSION_COOKIE_SECURE`).
- Every POST needs a CSRF token (Flask-WTF's `CSRFProtect`), the login form included:
  forms carry it in a hidden field, htmx requests in the `X-CSRFToken` header that
  base.html sets with `hx-headers`. The JSON API is exempt: it takes bearer tokens, not
  cookies, so a forged cross-site request has no credentials to ride on.
- The Content-Security-Policy allows scripts and styles from this origin only (no inline
  script; htmx's own indicator style and `eval` are turned off in base.html's htmx-config).
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, request
from flask_wtf.csrf import CSRFProtect

csrf = CSRFProtect()

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)


# Settings create_app applies before the caller's own (which may override them).
CONFIG_DEFAULTS = {
    "SESSION_COOKIE_NAME": "plet_session",
    "SESSION_COOKIE_HTTPONLY": True,
    "SESSION_COOKIE_SAMESITE": "Lax",
    "PERMANENT_SESSION_LIFETIME": 12 * 3600,
    # A token lives as long as its session: a console tab left open all day still posts.
    "WTF_CSRF_TIME_LIMIT": None,
    "WTF_CSRF_SSL_STRICT": True,
}


def init_app(app: Flask) -> None:
    csrf.init_app(app)
    app.after_request(_headers)


def exempt(blueprint: Blueprint) -> None:
    csrf.exempt(blueprint)


def _headers(response: Response) -> Response:
    headers = response.headers
    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Referrer-Policy", "same-origin")
    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
    if response.mimetype == "text/html" or request.path.startswith("/api/"):
        # pages show data only a logged-in user may see: never from a shared cache
        headers.setdefault("Cache-Control", "no-store")
    # htmx requests and full loads of one URL differ: caches must key on the header
    headers.add("Vary", "HX-Request")
    return response
