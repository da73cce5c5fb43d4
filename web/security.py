"""Sessions, CSRF and the security headers of every response.

- Sessions live in signed cookies that are HttpOnly and SameSite=Lax (Secure when the
  console is served over https: set `SESSION_COOKIE_SECURE`).
- Every POST needs a CSRF token (Flask-WTF's `CSRFProtect`), the login form included:
  forms carry it in a hidden field, htmx requests in the `X-CSRFToken` header that
  base.html sets with `hx-headers`. The JSON API is exempt: it takes bearer tokens, not
  cookies, so a forged cross-site request has no credentials to ride on.
- The Content-Security-Policy allows scripts and styles from this origin only (no inline
  script; htmx's own indicator style and `eval` are turned off in base.html's htmx-config).
- The cookie only names a server-side session (engine.auth.users, in the catalog): it ends at
  logout, password change, admin flag change, deletion of the user, after
  `SESSION_ABSOLUTE_LIFETIME` seconds from login, and after `PERMANENT_SESSION_LIFETIME`
  seconds unused, in every process serving the cluster at once.
- Logins are throttled per user name in the catalog (engine.auth.users), and per client address
  in this process (`LoginGuard`, engine.auth.logins' limiter, which the Users page's
  current password, the schema registry's Basic auth, API and replication tokens and the
  wire listener `plet web --kafka` starts use too):
  `LOGIN_ADDRESS_LIMIT` wrong passwords per address.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, current_app, request
from flask_wtf.csrf import CSRFProtect
from limits import parse

from engine.auth.logins import LoginLimiter

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
    # The idle limit: the cookie's lifetime, renewed on each request, and checked on the
    # server too (a copied cookie gains nothing from its own expiry date).
    "PERMANENT_SESSION_LIFETIME": 2 * 3600,
    # The absolute limit from login, however busy the session (seconds).
    "SESSION_ABSOLUTE_LIFETIME": 12 * 3600,
    # Wrong passwords one client address may send to this process (limits' notation).
    "LOGIN_ADDRESS_LIMIT": "20 per minute",
    # A token lives as long as its session: a console tab left open all day still posts.
    "WTF_CSRF_TIME_LIMIT": None,
    "WTF_CSRF_SSL_STRICT": True,
}

_GUARD = "plet-login-guard"


class LoginGuard:
    """The per-address throttle of logins, in this process's memory: engine.auth.logins'
    `LoginLimiter` with the app's `LOGIN_ADDRESS_LIMIT` (the `limits` library's notation,
    e.g. "20 per minute"); once an address reached the limit, its logins are refused with
    429 until the oldest failure leaves the window. The address is the socket's peer:
    behind a reverse proxy, make Flask see the client's (werkzeug's ProxyFix)."""

    def __init__(self, limit: str) -> None:
        item = parse(limit)
        self.limiter = LoginLimiter(failures=item.amount, window_s=item.get_expiry())

    def wait(self, address: str) -> int:
        """Seconds until `address` may try again (0: now)."""
        return self.limiter.wait(address)

    def failed(self, address: str) -> None:
        self.limiter.failed(address)


def login_guard() -> LoginGuard:
    return login_guard_of(current_app)


def login_guard_of(app: Flask) -> LoginGuard:
    guard: LoginGuard = app.extensions[_GUARD]
    return guard


def init_app(app: Flask) -> None:
    csrf.init_app(app)
    app.extensions[_GUARD] = LoginGuard(app.config["LOGIN_ADDRESS_LIMIT"])
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
