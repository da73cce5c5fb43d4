"""The Users page: every user's own API tokens and password; for administrators, every
user (add, edit groups and the admin flag, reset a password, delete).

Users are not stream objects, so no ACE guards them: a user manages their own password and
tokens, and only administrators manage other users. An administrator may not delete
themselves nor drop their own admin flag, so a cluster never loses its last way in by a
slip. A new API token is shown once, in the answer to the form that made it, and may
expire. A password change ends every session of the user (engine.auth.users); the browser
that made it gets a fresh session, so only copies of the old cookie die.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flask import Blueprint, abort, flash, redirect, request, url_for

from engine import errors
from engine import policies as stream_policies
from engine.auth import logins
from engine.auth.users import MIN_PASSWORD_LENGTH
from web.auth import start_session
from web.pages import cluster, render, user
from web.security import login_guard

users = Blueprint("users", __name__)

LABEL_MAX = 200
# The expiries the token form offers (value: engine.auth.users.parse_lifetime's text, label).
TOKEN_EXPIRIES = (
    ("1d", "1 day"),
    ("7d", "7 days"),
    ("30d", "30 days"),
    ("90d", "90 days"),
    ("365d", "1 year"),
    ("", "no expiry"),
)
DEFAULT_EXPIRY = "90d"


@dataclass
class Forms:
    """What the page's forms show: values as typed and errors per field, by form."""

    values: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    new_token: str | None = None
    new_token_label: str = ""


def _page(forms: Forms | None = None, status: int = 200, wait: int = 0):
    forms = forms or Forms()
    c = cluster()
    me = user()
    context = {
        "me": me,
        "tokens": c.api_tokens(me.name),
        "all_users": c.users() if me.admin else [],
        "forms": forms,
        "min_password": MIN_PASSWORD_LENGTH,
        "expiries": TOKEN_EXPIRIES,
        "default_expiry": DEFAULT_EXPIRY,
    }
    headers = {"Retry-After": str(wait)} if wait else {}
    return render("users/index.html", None, **context), status, headers


def _require_admin() -> None:
    if not user().admin:
        abort(403, "only administrators manage other users")


@users.route("/users")
def index():
    return _page()


# --- one's own tokens and password -----------------------------------------------------------


@users.route("/users/tokens", methods=["POST"])
def create_token():
    label = (request.form.get("label") or "").strip()
    # "" (or no field, as from a script of before expiries): a token that never expires
    expires = (request.form.get("expires") or "").strip()
    forms = Forms(values={"label": label, "expires": expires})
    if len(label) > LABEL_MAX:
        forms.errors["label"] = f"A label has at most {LABEL_MAX} characters."
        return _page(forms, 400)
    try:
        forms.new_token = cluster().create_api_token(user().name, label, expires_in=expires)
    except errors.InvalidArgument as exc:
        forms.errors["expires"] = str(exc)
        return _page(forms, 400)
    forms.new_token_label = label
    forms.values = {}
    return _page(forms)


@users.route("/users/tokens/<token_id>/revoke", methods=["POST"])
def revoke_token(token_id: str):
    try:
        cluster().revoke_api_token(user().name, token_id)
    except (errors.NotFound, errors.InvalidArgument):
        forms = Forms(errors={"tokens": f"You have no token {token_id}."})
        return _page(forms, 404)
    flash(f"Token {token_id} revoked.")
    return redirect(url_for("users.index"))


@users.route("/users/password", methods=["POST"])
def change_password():
    form = request.form
    current = form.get("current_password") or ""
    new = form.get("new_password") or ""
    confirm = form.get("confirm_password") or ""
    forms = Forms()
    me = user()
    try:
        # checked as a login is, on the limiter every login path shares: a stolen session
        # cannot guess the password here faster than at the login form
        address = request.remote_addr or "unknown"
        limiter = login_guard().limiter
        if not current or not logins.password_ok(cluster(), me.name, current, address, limiter):
            forms.errors["current_password"] = "This is not your current password."
    except errors.TryLater as exc:  # too many wrong passwords, or too many hashes at once
        message = str(exc)
        forms.errors["current_password"] = f"{message[:1].upper()}{message[1:]}."
        status = 429 if isinstance(exc, errors.LoginThrottled) else 503
        return _page(forms, status, exc.retry_after)
    if len(new) < MIN_PASSWORD_LENGTH:
        forms.errors["new_password"] = (
            f"A password needs at least {MIN_PASSWORD_LENGTH} characters."
        )
    elif new != confirm:
        forms.errors["confirm_password"] = "The two new passwords differ."
    if not forms.errors:
        try:
            cluster().set_password(me.name, new)  # ends every session of hers, this one too
        except errors.InvalidArgument as exc:
            forms.errors["new_password"] = str(exc)
    if forms.errors:
        return _page(forms, 400)
    start_session(me.name)
    flash("Your password was changed. Your other sessions have ended.")
    return redirect(url_for("users.index"))


# --- administrators: every user --------------------------------------------------------------


@users.route("/users/add", methods=["POST"])
def add_user():
    _require_admin()
    form = request.form
    name = (form.get("name") or "").strip()
    groups = (form.get("groups") or "").strip()
    admin = form.get("admin") == "on"
    read_only = form.get("read_only") == "on"
    password = form.get("password") or ""
    forms = Forms(
        values={
            "name": name,
            "groups": groups,
            "admin": "on" if admin else "",
            "read_only": "on" if read_only else "",
        }
    )
    try:
        cluster().add_user(name, password, groups=groups, admin=admin, read_only=read_only)
    except errors.InvalidName as exc:
        key = "groups" if "group" in str(exc) else "name"
        forms.errors[key] = str(exc)
    except errors.AlreadyExists as exc:
        forms.errors["name"] = str(exc)
    except errors.InvalidArgument as exc:
        forms.errors["password"] = str(exc)
    if forms.errors:
        return _page(forms, 400)
    flash(f"User {name} added.")
    return redirect(url_for("users.index"))


def _user_page(name: str, forms: Forms | None = None, status: int = 200):
    _require_admin()
    c = cluster()
    info = c.user(name)  # UnknownUser: 404
    context = {
        "me": user(),
        "info": info,
        "tokens": c.api_tokens(name),
        "forms": forms or Forms(),
        "min_password": MIN_PASSWORD_LENGTH,
    }
    return render("users/user.html", None, **context), status


@users.route("/users/<name>")
def detail(name: str):
    return _user_page(name)


@users.route("/users/<name>/edit", methods=["POST"])
def edit_user(name: str):
    _require_admin()
    groups = (request.form.get("groups") or "").strip()
    admin = request.form.get("admin") == "on"
    read_only = request.form.get("read_only") == "on"
    forms = Forms(values={"groups": groups})
    if name == user().name and not admin:
        forms.errors["admin"] = "You cannot take away your own administrator rights."
        return _user_page(name, forms, 400)
    if name == user().name and read_only:
        # a read-only administrator could never clear the flag again from here
        forms.errors["read_only"] = "You cannot make yourself read-only."
        return _user_page(name, forms, 400)
    before = cluster().user(name)  # UnknownUser: 404
    try:
        cluster().edit_user(name, groups=groups, admin=admin, read_only=read_only)
    except errors.InvalidName as exc:
        forms.errors["groups"] = str(exc)
        return _user_page(name, forms, 400)
    if before.admin != admin:
        flash(f"User {name} saved; their sessions have ended (the administrator flag changed).")
    else:
        flash(f"User {name} saved.")
    return redirect(url_for("users.detail", name=name))


@users.route("/users/<name>/password", methods=["POST"])
def reset_password(name: str):
    _require_admin()
    password = request.form.get("password") or ""
    forms = Forms()
    try:
        cluster().set_password(name, password)
    except errors.InvalidArgument as exc:
        forms.errors["password"] = str(exc)
        return _user_page(name, forms, 400)
    if name == user().name:  # one's own sessions ended with it: keep this browser in
        start_session(name)
    flash(f"Password of {name} reset; their sessions have ended.")
    return redirect(url_for("users.detail", name=name))


@users.route("/users/<name>/tokens/<token_id>/revoke", methods=["POST"])
def revoke_user_token(name: str, token_id: str):
    _require_admin()
    try:
        cluster().revoke_api_token(name, token_id)
    except (errors.NotFound, errors.InvalidArgument):
        forms = Forms(errors={"tokens": f"{name} has no token {token_id}."})
        return _user_page(name, forms, 404)
    flash(f"Token {token_id} of {name} revoked.")
    return redirect(url_for("users.detail", name=name))


# --- effective permissions: what each stream lets a user do --------------------------------

PERMISSION_PAGE_SIZES = (20, 50, 100, 200)
DEFAULT_PERMISSION_PAGE_SIZE = 50


def _whole_arg(name: str, default: int) -> int:
    """A whole-number query argument (400 with a message when it is not one)."""
    text = request.args.get(name, "").strip()
    if not text:
        return default
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        abort(400, f"{name} must be a whole number, got {text[:40]!r}")
    return int(text)


@users.route("/users/<name>/permissions")
def permissions(name: str):
    """A page of streams with what each ACE policy lets user `name` do: an administrator
    may look at anyone, a user at themselves (the engine refuses the rest: 403)."""
    query = request.args.get("q", "").strip()
    size = _whole_arg("size", DEFAULT_PERMISSION_PAGE_SIZE)
    if size not in PERMISSION_PAGE_SIZES:
        abort(400, f"size must be one of {', '.join(map(str, PERMISSION_PAGE_SIZES))}")
    page_no = _whole_arg("page", 1)
    if page_no < 1:
        abort(400, "page must be 1 or more")
    c = cluster()
    # The first call checks the name, who asks and the user (400, 403, 404) and counts.
    result = c.effective_permissions(name, prefix=query, limit=size, offset=(page_no - 1) * size)
    pages = max(1, -(-result.total // size))
    if page_no > pages:  # past the end (streams went away): the last page
        page_no = pages
        result = c.effective_permissions(
            name, prefix=query, limit=size, offset=(page_no - 1) * size
        )
    args = {
        k: v for k, v in (("q", query), ("size", size)) if v and v != DEFAULT_PERMISSION_PAGE_SIZE
    }
    context = {
        "me": user(),
        "result": result,
        "labels": {p: stream_policies.policy(p) for p in result.policies},
        "query": query,
        "size": size,
        "page_sizes": PERMISSION_PAGE_SIZES,
        "page_no": page_no,
        "pages": pages,
        "first_row": (page_no - 1) * size + 1 if result.streams else 0,
        "list_args": args,
    }
    return render("users/permissions.html", "users/_permissions_table.html", **context)


@users.route("/users/<name>/delete", methods=["POST"])
def delete_user(name: str):
    _require_admin()
    forms = Forms()
    if name == user().name:
        forms.errors["delete"] = "You cannot delete yourself."
        return _user_page(name, forms, 400)
    if request.form.get("confirm") != "on":
        forms.errors["delete"] = f"Tick the box to confirm that {name} goes."
        return _user_page(name, forms, 400)
    cluster().delete_user(name)
    flash(f"User {name} deleted, with their API tokens and sessions.")
    return redirect(url_for("users.index"))
