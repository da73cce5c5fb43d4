"""Console users: the logins of the web console and their API tokens, kept in the catalog.

A user has a name, a scrypt password hash, groups and an admin flag; the web console acts
for a logged-in user as `user.principal`, so stream ACEs decide what they see and change.
An admin is a super user (Kafka's `super.users`): every ACE lets them through, so the first
administrator can manage streams created by anyone, as the operator of a cluster must.

API tokens are random strings shown once; only their SHA-256 is stored. In the embedded
library the file system stays the boundary: whoever can write the catalog can add users.

Thread-safety: the functions take a `Cluster` and go through its catalog, so any thread
that may use the cluster may call them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.catalog import now_ms
from engine.errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidName,
    PartitionletError,
    UnknownUser,
)
from engine.principal import Principal

if TYPE_CHECKING:
    from engine.cluster import Cluster

# The first administrator's name, and where its password comes from.
ADMIN = "admin"
ADMIN_PASSWORD_ENV = "PLET_ADMIN_PASSWORD"

# scrypt with OWASP's minimum (N=2^17 is their current advice for servers; 2^15 keeps a
# login under ~0.1 s on a small VM while costing an attacker 32 MiB per guess).
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**15, 8, 1
_SCRYPT_MAXMEM = 64 * 1024 * 1024
MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024
# A token's last use is written at most this often: a busy API client must not turn every
# request into a catalog write.
LAST_USED_RESOLUTION_MS = 60_000

_USER_NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")
_GROUP_NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")
# A hash that matches no password, checked when the user is unknown so that a login takes
# the same time whether or not the name exists.
_DUMMY_HASH: str | None = None


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...]
    admin: bool
    created_ms: int

    @property
    def principal(self) -> Principal:
        return Principal(self.name, self.groups, superuser=self.admin)


@dataclass(frozen=True)
class ApiTokenInfo:
    """A token as listed: its id is the first 12 hex digits of its hash, enough to revoke
    it; the token itself is never stored."""

    id: str
    user: str
    label: str
    created_ms: int
    last_used_ms: int | None


def check_user_name(name: object) -> str:
    if not isinstance(name, str) or not _USER_NAME.fullmatch(name):
        raise InvalidName(
            f"invalid user name {name!r}: 1 to 64 characters of letters, digits and . _ @ -"
        )
    return name


def _check_groups(groups: object) -> tuple[str, ...]:
    if groups is None:
        return ()
    if isinstance(groups, str):
        groups = [g.strip() for g in groups.split(",") if g.strip()]
    if not isinstance(groups, (list, tuple, set, frozenset)):
        raise InvalidArgument(
            f"groups must be a list of names or a comma-separated string, not {groups!r}"
        )
    result = []
    for group in groups:
        if not isinstance(group, str) or not _GROUP_NAME.fullmatch(group):
            raise InvalidName(
                f"invalid group name {group!r}: 1 to 64 characters of letters, digits and . _ @ -"
            )
        result.append(group)
    return tuple(sorted(set(result)))


def _check_password(password: object) -> str:
    if not isinstance(password, str):
        raise InvalidArgument("a password must be a string")
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise InvalidArgument(
            f"a password needs {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters"
        )
    try:
        password.encode()
    except UnicodeEncodeError:  # a lone surrogate: it could never be typed again
        raise InvalidArgument("a password must be valid Unicode text") from None
    return password


def hash_password(password: str) -> str:
    salt = os.urandom(16)
    digest = hashlib.scrypt(
        password.encode(),
        salt=salt,
        n=_SCRYPT_N,
        r=_SCRYPT_R,
        p=_SCRYPT_P,
        maxmem=_SCRYPT_MAXMEM,
    )
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        computed = hashlib.scrypt(
            password.encode(),
            salt=bytes.fromhex(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=_SCRYPT_MAXMEM,
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(computed.hex(), digest)


def _row_info(row: tuple) -> UserInfo:
    name, groups, admin, created_ms = row
    return UserInfo(name, tuple(g for g in groups.split(",") if g), bool(admin), created_ms)


_COLUMNS = "name, groups, admin, created_ms"


def add_user(
    cluster: Cluster,
    name: str,
    password: str,
    *,
    groups: tuple[str, ...] | list[str] | str = (),
    admin: bool = False,
) -> UserInfo:
    check_user_name(name)
    group_names = _check_groups(groups)
    password_hash = hash_password(_check_password(password))
    catalog = cluster._catalog
    with catalog.write():
        if catalog.conn.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
            raise AlreadyExists(f"user {name!r} exists already")
        catalog.conn.execute(
            "INSERT INTO users (name, password_hash, groups, admin, created_ms) "
            "VALUES (?, ?, ?, ?, ?)",
            (name, password_hash, ",".join(group_names), int(bool(admin)), now_ms()),
        )
    return user(cluster, name)


def user(cluster: Cluster, name: str) -> UserInfo:
    rows = cluster._catalog._query(f"SELECT {_COLUMNS} FROM users WHERE name = ?", (name,))
    if not rows:
        raise UnknownUser(f"no user {name!r}")
    return _row_info(rows[0])


def users(cluster: Cluster) -> list[UserInfo]:
    return [
        _row_info(r) for r in cluster._catalog._query(f"SELECT {_COLUMNS} FROM users ORDER BY name")
    ]


def set_password(cluster: Cluster, name: str, password: str) -> None:
    password_hash = hash_password(_check_password(password))
    catalog = cluster._catalog
    with catalog.write():
        cursor = catalog.conn.execute(
            "UPDATE users SET password_hash = ? WHERE name = ?", (password_hash, name)
        )
        if cursor.rowcount == 0:
            raise UnknownUser(f"no user {name!r}")


def edit_user(
    cluster: Cluster,
    name: str,
    *,
    groups: tuple[str, ...] | list[str] | str | None = None,
    admin: bool | None = None,
) -> UserInfo:
    catalog = cluster._catalog
    with catalog.write():
        if not catalog.conn.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
            raise UnknownUser(f"no user {name!r}")
        if groups is not None:
            catalog.conn.execute(
                "UPDATE users SET groups = ? WHERE name = ?",
                (",".join(_check_groups(groups)), name),
            )
        if admin is not None:
            catalog.conn.execute(
                "UPDATE users SET admin = ? WHERE name = ?", (int(bool(admin)), name)
            )
    return user(cluster, name)


def delete_user(cluster: Cluster, name: str) -> None:
    """Delete a user and their API tokens (their sessions end at their next request)."""
    catalog = cluster._catalog
    with catalog.write():
        cursor = catalog.conn.execute("DELETE FROM users WHERE name = ?", (name,))
        if cursor.rowcount == 0:
            raise UnknownUser(f"no user {name!r}")
        catalog.conn.execute("DELETE FROM api_tokens WHERE user = ?", (name,))


def authenticate(cluster: Cluster, name: str, password: str) -> UserInfo | None:
    """The user when `password` is theirs, else None (in about the same time either way)."""
    global _DUMMY_HASH
    if not isinstance(name, str) or not isinstance(password, str):
        return None
    if len(password) > MAX_PASSWORD_LENGTH:
        return None
    rows = cluster._catalog._query(
        f"SELECT password_hash, {_COLUMNS} FROM users WHERE name = ?", (name,)
    )
    if not rows:
        if _DUMMY_HASH is None:
            _DUMMY_HASH = hash_password(secrets.token_hex(16))
        verify_password(password, _DUMMY_HASH)
        return None
    if not verify_password(password, rows[0][0]):
        return None
    return _row_info(rows[0][1:])


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_api_token(cluster: Cluster, name: str, label: str = "") -> str:
    """A new API token for user `name`, returned once (`Authorization: Bearer TOKEN`)."""
    user(cluster, name)
    if not isinstance(label, str) or len(label) > 200:
        raise InvalidArgument("a token label is a string of at most 200 characters")
    token = "plet_" + secrets.token_urlsafe(32)
    catalog = cluster._catalog
    with catalog.write():
        catalog.conn.execute(
            "INSERT INTO api_tokens (token_hash, user, label, created_ms) VALUES (?, ?, ?, ?)",
            (_token_hash(token), name, label, now_ms()),
        )
    return token


def api_tokens(cluster: Cluster, name: str | None = None) -> list[ApiTokenInfo]:
    sql = "SELECT token_hash, user, label, created_ms, last_used_ms FROM api_tokens"
    args: tuple = ()
    if name is not None:
        sql += " WHERE user = ?"
        args = (name,)
    rows = cluster._catalog._query(sql + " ORDER BY created_ms, token_hash", args)
    return [ApiTokenInfo(h[:12], u, label, c, last) for h, u, label, c, last in rows]


def revoke_api_token(cluster: Cluster, name: str, token_id: str) -> None:
    if not isinstance(token_id, str) or not re.fullmatch(r"[0-9a-f]{12}", token_id):
        raise InvalidArgument(f"invalid token id {token_id!r}: 12 hex digits, as listed")
    catalog = cluster._catalog
    with catalog.write():
        cursor = catalog.conn.execute(
            "DELETE FROM api_tokens WHERE user = ? AND substr(token_hash, 1, 12) = ?",
            (name, token_id),
        )
        if cursor.rowcount == 0:
            raise UnknownUser(f"user {name!r} has no token {token_id}")


def user_for_token(cluster: Cluster, token: str) -> UserInfo | None:
    """The user an API token belongs to, or None for an unknown one.

    Records the token's last use, at most once a minute (`LAST_USED_RESOLUTION_MS`), so
    that the Users page can show stale tokens without every request writing."""
    if not isinstance(token, str) or not token or len(token) > 200:
        return None
    token_hash = _token_hash(token)
    columns = ", ".join(f"u.{c.strip()}" for c in _COLUMNS.split(","))
    rows = cluster._catalog._query(
        f"SELECT t.last_used_ms, {columns} "
        "FROM api_tokens t JOIN users u ON u.name = t.user WHERE t.token_hash = ?",
        (token_hash,),
    )
    if not rows:
        return None
    last_used, *user_row = rows[0]
    now = now_ms()
    if last_used is None or now - last_used >= LAST_USED_RESOLUTION_MS:
        catalog = cluster._catalog
        try:
            with catalog.write():
                catalog.conn.execute(
                    "UPDATE api_tokens SET last_used_ms = ? WHERE token_hash = ?",
                    (now, token_hash),
                )
        except PartitionletError:
            pass  # advisory: a busy catalog must not fail the request
    return _row_info(tuple(user_row))


def ensure_admin(cluster: Cluster, password: str | None = None) -> tuple[str, str | None]:
    """Make the first administrator when the cluster has no user yet.

    Its password is `password`, else `$PLET_ADMIN_PASSWORD`, else generated. Returns the
    administrator's name and the generated password (None when none was generated), which
    the caller prints once: only its hash is kept.
    """
    if cluster._catalog._query("SELECT 1 FROM users LIMIT 1"):
        return ADMIN, None
    given = password or os.environ.get(ADMIN_PASSWORD_ENV) or None
    if given is not None and len(given) < MIN_PASSWORD_LENGTH:
        source = "the password" if password else ADMIN_PASSWORD_ENV
        raise InvalidArgument(f"{source} needs at least {MIN_PASSWORD_LENGTH} characters")
    generated = None if given else secrets.token_urlsafe(12)
    try:
        add_user(cluster, ADMIN, given or generated, admin=True)  # type: ignore[arg-type]
    except AlreadyExists:
        # another process made the first administrator at the same moment
        return ADMIN, None
    return ADMIN, generated


__all__ = [
    "ADMIN",
    "ADMIN_PASSWORD_ENV",
    "ApiTokenInfo",
    "UserInfo",
    "add_user",
    "api_tokens",
    "authenticate",
    "create_api_token",
    "delete_user",
    "edit_user",
    "ensure_admin",
    "revoke_api_token",
    "set_password",
    "user",
    "user_for_token",
    "users",
]
