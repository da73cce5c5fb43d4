"""Console users: the logins of the web console and their API tokens, kept in the catalog.

A user has a name, a scrypt password hash, groups and an admin flag; the web console acts
for a logged-in user as `user.principal`, so stream ACEs decide what they see and change.
An admin is a super user (Kafka's `super.users`): every ACE lets them through, so the first
administrator can manage streams created by anyone, as the operator of a cluster must.

API tokens are random strings shown once; only their SHA-256 is stored; a token may carry
an expiry. In the embedded library the file system stays the boundary: whoever can write
the catalog can add users.

What guards the web console's logins lives here too, in the catalog, so that every process
of a cluster (several `plet web`, the CLI) sees one truth at once:

- Sessions: a session is a row of `web_sessions` (the cookie holds a random id, the row its
  SHA-256), with an absolute end fixed at login and an idle limit. Logout deletes the row;
  a password change, a change of the admin flag and deleting the user delete all the user's
  rows, so a copied cookie dies with them, and a new user of an old name inherits nothing.
- Throttling: wrong passwords are counted per user name tried (`login_failures`), known or
  not, so that the answers tell nothing about which names exist. `LOGIN_FAILURES` in a row
  make the name wait `LOGIN_LOCK_S`, doubled at each further failure up to
  `LOGIN_LOCK_MAX_S`; the count goes on a successful login or `LOGIN_WINDOW_S` after the
  last wait ended. Each attempt is counted before its password is hashed, so concurrent
  guesses cannot slip past the limit.
- Memory: a scrypt hash takes 32 MiB; `HASH_GATE` lets at most a few run at once in a
  process and refuses the rest (`errors.Busy`, "try again") after a short wait. A login
  takes its slot before its attempt is counted: a busy server is not a wrong password.
- A fleet: a password just found correct is remembered for `VERIFIED_TTL_S` (keyed by an
  HMAC-SHA256 of name, stored hash and password under a secret of this process, never
  the password itself), so 64 clients of one user logging in at once hash it once or a
  few times, not 64 times. A password change changes the stored hash, so the entry is dead.
- Per client address: engine.auth.logins, the one limiter of every login path.
- Passwords (NIST SP 800-63B, 5.1.1.2): 8 to 1024 characters, not one of the 30,000 most
  common passwords (the list zxcvbn ships), not the user's name either way round.

Thread-safety: the functions take a `Cluster` and go through its catalog's accounts
(engine.storage.accounts, where the SQL is), so any thread that may use the cluster may
call them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from engine import times
from engine.auth import scram
from engine.auth.principal import Principal
from engine.errors import (
    AlreadyExists,
    Busy,
    InvalidArgument,
    InvalidName,
    LoginThrottled,
    TokenExpired,
    UnknownUser,
    WeakPassword,
)
from engine.storage.accounts import Accounts, ScramRow, UserRow

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

# Login throttling per user name (see the module's docstring).
LOGIN_FAILURES = 5
LOGIN_WINDOW_S = 300
LOGIN_LOCK_S = 60
LOGIN_LOCK_MAX_S = 900

# Web console sessions: an absolute lifetime from login, and an idle limit. The last use
# is written at most once a minute (or a tenth of the idle limit, when that is shorter).
SESSION_LIFETIME_S = 12 * 3600
SESSION_IDLE_S = 2 * 3600
SESSION_SEEN_RESOLUTION_MS = 60_000

# API token lifetimes: `expires_in` as seconds, a timedelta or text such as "30d".
MAX_TOKEN_LIFETIME_S = 10 * 366 * 86400
_DURATION = re.compile(r"\s*(\d{1,9})\s*([smhdw]?)\s*", re.IGNORECASE)
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

# Words no password may be, besides the user's name (NIST: "context-specific words").
_CONTEXT_WORDS = ("partitionlet",)
_COMMON_PASSWORDS: frozenset[str] | None = None


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...]
    admin: bool
    created_ms: int
    read_only: bool = False  # refused every change (Cluster.check_may_change)

    @property
    def principal(self) -> Principal:
        return Principal(self.name, self.groups, superuser=self.admin, read_only=self.read_only)


@dataclass(frozen=True)
class ApiTokenInfo:
    """A token as listed: its id is the first 12 hex digits of its hash, enough to revoke
    it; the token itself is never stored."""

    id: str
    user: str
    label: str
    created_ms: int
    last_used_ms: int | None
    expires_ms: int | None = None  # None: never
    expired: bool = False  # as of the listing


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


def common_passwords() -> frozenset[str]:
    """The 30,000 most common passwords, lower case: the list zxcvbn ships (from Xato's
    corpus of leaked passwords), loaded on first use."""
    global _COMMON_PASSWORDS
    if _COMMON_PASSWORDS is None:
        from zxcvbn.frequency_lists import FREQUENCY_LISTS

        _COMMON_PASSWORDS = frozenset(p.lower() for p in FREQUENCY_LISTS["passwords"])
    return _COMMON_PASSWORDS


def check_password(password: object, name: str | None = None) -> str:
    """`password` when it may be set for user `name`, else `errors.WeakPassword` saying
    why (NIST SP 800-63B: length, common passwords, context words; no composition rules)."""
    if not isinstance(password, str):
        raise WeakPassword("a password must be a string")
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise WeakPassword(
            f"a password needs {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters"
        )
    try:
        password.encode()
    except UnicodeEncodeError:  # a lone surrogate: it could never be typed again
        raise WeakPassword("a password must be valid Unicode text") from None
    folded = password.casefold()
    if name and folded in (name.casefold(), name.casefold()[::-1]):
        raise WeakPassword("a password must not be the user's name, nor that name reversed")
    if folded in _CONTEXT_WORDS or folded in common_passwords():
        raise WeakPassword(
            "this password is one of the 30,000 most common passwords, which attackers try "
            "first: choose another (a few unrelated words make a good one)"
        )
    return password


class HashGate:
    """At most `limit` password hashes at once in this process.

    A scrypt hash holds 32 MiB while it runs, so N concurrent logins would cost N x 32 MiB;
    past the limit a hash waits up to `wait_s` for a slot, then `errors.Busy` refuses it.
    `running` and `peak` count the hashes under way (for the tests and for operators)."""

    def __init__(self, limit: int, wait_s: float) -> None:
        self.limit = limit
        self.wait_s = wait_s
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self.running = 0
        self.peak = 0

    @contextmanager
    def slot(self) -> Iterator[None]:
        if self.wait_s > 0:
            got = self._slots.acquire(timeout=self.wait_s)
        else:
            got = self._slots.acquire(blocking=False)
        if not got:
            raise Busy(
                "the server is checking too many passwords at once: try again in a second",
                retry_after=1,
            )
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1
            self._slots.release()

    def reset_peak(self) -> None:
        with self._lock:
            self.peak = self.running


# 2 to 4 (64 to 128 MiB): more than the cores would only make every login slower.
HASH_GATE = HashGate(limit=min(4, max(2, os.cpu_count() or 2)), wait_s=2.0)


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    """The hash; the caller holds a slot of HASH_GATE."""
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_SCRYPT_MAXMEM)


def hash_password(password: str) -> str:
    with HASH_GATE.slot():
        return _hash_password(password)


def _hash_password(password: str) -> str:
    salt = os.urandom(16)
    digest = _scrypt(password, salt, _SCRYPT_N, _SCRYPT_R, _SCRYPT_P)
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    with HASH_GATE.slot():
        return _verify_password(password, stored)


def _verify_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        computed = _scrypt(password, bytes.fromhex(salt), int(n), int(r), int(p))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(computed.hex(), digest)


def _info(row: UserRow) -> UserInfo:
    return UserInfo(row.name, row.groups, row.admin, row.created_ms, row.read_only)


def _accounts(cluster: Cluster) -> Accounts:
    return cluster.catalog.accounts


def add_user(
    cluster: Cluster,
    name: str,
    password: str,
    *,
    groups: tuple[str, ...] | list[str] | str = (),
    admin: bool = False,
    read_only: bool = False,
) -> UserInfo:
    check_user_name(name)
    group_names = _check_groups(groups)
    password_hash = hash_password(check_password(password, name))
    _accounts(cluster).add_user(
        name,
        password_hash,
        group_names,
        bool(admin),
        cluster.clock.now_ms(),
        _scram_rows(password),
        read_only=bool(read_only),
    )
    return user(cluster, name)


def _scram_rows(password: str) -> list[ScramRow]:
    return [ScramRow(*c) for c in scram.credentials(password)]


def user(cluster: Cluster, name: str) -> UserInfo:
    row = _accounts(cluster).user(name)
    if row is None:
        raise UnknownUser(f"no user {name!r}")
    return _info(row)


def users(cluster: Cluster) -> list[UserInfo]:
    return [_info(r) for r in _accounts(cluster).users()]


def set_password(cluster: Cluster, name: str, password: str) -> None:
    """Set `name`'s password (and SCRAM credentials); every session of theirs ends (a
    thief's copy of a cookie with them), and a wait for wrong passwords is lifted. API
    tokens stay."""
    if not isinstance(name, str):
        raise UnknownUser(f"no user {name!r}")
    password_hash = hash_password(check_password(password, name))
    _accounts(cluster).set_password_hash(name, password_hash, _scram_rows(password))


def edit_user(
    cluster: Cluster,
    name: str,
    *,
    groups: tuple[str, ...] | list[str] | str | None = None,
    admin: bool | None = None,
    read_only: bool | None = None,
) -> UserInfo:
    """Change `name`'s groups, admin flag and read-only flag (None: keep). A change of the
    admin flag ends the user's sessions: rights that grew or shrank start from a fresh
    login. The read-only flag applies from the user's next request (each reads it)."""
    checked = None if groups is None else _check_groups(groups)
    _accounts(cluster).edit_user(
        name, checked, admin, None if read_only is None else bool(read_only)
    )
    return user(cluster, name)


def delete_user(cluster: Cluster, name: str) -> None:
    """Delete a user with their API tokens and sessions (a user later made with the same
    name inherits none of them)."""
    _accounts(cluster).delete_user(name)


def authenticate(cluster: Cluster, name: str, password: str) -> UserInfo | None:
    """The user when `password` is theirs, else None (in about the same time either way).

    Throttled per user name: raises `errors.LoginThrottled` (with `retry_after`) without
    looking at the password while the name must wait, and `errors.Busy` when too many
    hashes run in this process (then nothing is counted: try again). A password found
    correct in the last `VERIFIED_TTL_S` is let through without a hash or a count."""
    global _DUMMY_HASH
    if not isinstance(name, str) or not isinstance(password, str):
        return None
    known_shape = _USER_NAME.fullmatch(name) is not None
    if len(password) > MAX_PASSWORD_LENGTH:
        if known_shape:
            _count_attempt(cluster, name)
        return None
    found = _accounts(cluster).password_hash(name) if known_shape else None
    if found is not None and _VERIFIED.seen(name, found[0], password):
        return _remembered(cluster, name, found[1])
    with HASH_GATE.slot():  # errors.Busy before anything is counted
        if found is not None and _VERIFIED.seen(name, found[0], password):
            # checked by another login while this one waited
            return _remembered(cluster, name, found[1])
        if known_shape:  # other names can never log in: nothing to guess, nothing to count
            _count_attempt(cluster, name)
        if found is None:
            if _DUMMY_HASH is None:
                _DUMMY_HASH = _hash_password(secrets.token_hex(16))
            _verify_password(password, _DUMMY_HASH)
            return None
        if not _verify_password(password, found[0]):
            return None
    _VERIFIED.add(name, found[0], password)
    accounts = _accounts(cluster)
    accounts.forget_login_failures(name)
    if accounts.scram_mechanisms(name) != set(scram.MECHANISMS):
        # a user from before SCRAM credentials: the password is known now, once
        accounts.add_scram(name, found[0], _scram_rows(password))
    return _info(found[1])


def scram_credential(
    cluster: Cluster, name: str, mechanism: str
) -> tuple[scram.Credential, UserInfo] | None:
    """`name`'s SCRAM credential for `mechanism` and the user; None for an unknown user or
    one without credentials yet (their password was set before they were kept: the next
    password change or login with the password makes them)."""
    if not isinstance(name, str) or not _USER_NAME.fullmatch(name):
        return None
    found = _accounts(cluster).scram_credential(name, mechanism)
    if found is None:
        return None
    return scram.Credential(*found[0]), _info(found[1])


def proof_checked(cluster: Cluster, name: str, correct: bool) -> None:
    """Count a SCRAM proof (checked without a password hash) as the throttle per name
    counts passwords: a wrong one as a failure, a right one ends the run of failures.
    Raises `LoginThrottled` while the name must wait, right proof or not."""
    if not isinstance(name, str) or not _USER_NAME.fullmatch(name):
        return  # such names can never log in: nothing to guess, nothing to count
    if not correct:
        _count_attempt(cluster, name)
        return
    wait = login_wait(cluster, name)
    if wait:
        raise LoginThrottled(
            f"too many wrong passwords for {name!r}: try again in {wait} seconds",
            retry_after=wait,
        )
    accounts = _accounts(cluster)
    if accounts.has_login_failures(name):  # a read: a fleet's logins write nothing
        accounts.forget_login_failures(name)


def _remembered(cluster: Cluster, name: str, row: UserRow) -> UserInfo:
    """A login with a password found correct lately: no hash, no count, but a name that
    must wait (wrong passwords since) waits all the same."""
    wait = login_wait(cluster, name)
    if wait:
        raise LoginThrottled(
            f"too many wrong passwords for {name!r}: try again in {wait} seconds",
            retry_after=wait,
        )
    return _info(row)


# How long a password found correct lets its user in without a hash (a fleet's logins).
VERIFIED_TTL_S = 60.0
_VERIFIED_MAX = 10_000


class _Verified:
    """Passwords found correct lately, as HMAC-SHA256(secret of this process, name, stored
    hash, password): a fast check that reveals nothing of the password if memory leaks."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._until: dict[bytes, float] = {}

    def _key(self, name: str, stored: str, password: str) -> bytes:
        text = "\0".join((name, stored, password)).encode("utf-8", "surrogatepass")
        return hmac.new(self._secret, text, hashlib.sha256).digest()

    def seen(self, name: str, stored: str, password: str) -> bool:
        key = self._key(name, stored, password)
        with self._lock:
            until = self._until.get(key)
            if until is None:
                return False
            if until < time.monotonic():
                del self._until[key]
                return False
            return True

    def add(self, name: str, stored: str, password: str) -> None:
        key = self._key(name, stored, password)
        now = time.monotonic()
        with self._lock:
            if len(self._until) >= _VERIFIED_MAX:
                self._until = {k: t for k, t in self._until.items() if t >= now}
                while len(self._until) >= _VERIFIED_MAX:
                    del self._until[next(iter(self._until))]
            self._until[key] = now + VERIFIED_TTL_S

    def clear(self) -> None:
        with self._lock:
            self._until.clear()


_VERIFIED = _Verified()


def _lock_ms(failures: int) -> int:
    """How long a name waits after its `failures`-th wrong password in a row."""
    if failures < LOGIN_FAILURES:
        return 0
    return min(LOGIN_LOCK_S << min(failures - LOGIN_FAILURES, 20), LOGIN_LOCK_MAX_S) * 1000


def _count_attempt(cluster: Cluster, name: str) -> None:
    """Count an attempt at `name` as a failure before its hash is checked (a success takes
    it back), or raise `LoginThrottled` while the name must wait."""
    now = cluster.clock.now_ms()
    wait_ms = _accounts(cluster).count_login_attempt(
        name,
        now,
        window_ms=LOGIN_WINDOW_S * 1000,
        lock_ms=_lock_ms,
        # names nobody tried for long go, so guesses at made-up names cannot pile up
        forget_before=now - (LOGIN_WINDOW_S + LOGIN_LOCK_MAX_S) * 1000,
    )
    if wait_ms:
        seconds = -(-wait_ms // 1000)
        raise LoginThrottled(
            f"too many wrong passwords for {name!r}: try again in {seconds} seconds",
            retry_after=seconds,
        )


def login_wait(cluster: Cluster, name: str) -> int:
    """Seconds `name` must still wait before its next login attempt (0: none)."""
    wait_ms = _accounts(cluster).locked_until(name) - cluster.clock.now_ms()
    return -(-wait_ms // 1000) if wait_ms > 0 else 0


# --- web console sessions ------------------------------------------------------------------


def _session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def create_session(cluster: Cluster, name: str, *, lifetime_s: float = SESSION_LIFETIME_S) -> str:
    """A new session of user `name` that ends `lifetime_s` from now at the latest; returns
    its id, for the session cookie (only its hash is kept)."""
    if not isinstance(lifetime_s, (int, float)) or not 0 < lifetime_s <= 366 * 86400:
        raise InvalidArgument(f"a session lifetime is 0 to 366 days in seconds, not {lifetime_s!r}")
    session_id = secrets.token_urlsafe(32)
    now = cluster.clock.now_ms()
    _accounts(cluster).add_session(
        _session_hash(session_id), name, now, now + int(lifetime_s * 1000)
    )
    return session_id


def session_user(
    cluster: Cluster, session_id: object, *, idle_s: float = SESSION_IDLE_S
) -> UserInfo | None:
    """The user of a live session, or None: unknown, ended (logout, password, admin flag,
    user deleted), past its absolute end, or unused for more than `idle_s`."""
    if not isinstance(session_id, str) or not 20 <= len(session_id) <= 100:
        return None
    id_hash = _session_hash(session_id)
    accounts = _accounts(cluster)
    found = accounts.session(id_hash)
    if found is None:
        return None
    now = cluster.clock.now_ms()
    idle_ms = int(idle_s * 1000)
    last_seen = found.last_used_ms if found.last_used_ms is not None else 0
    if (found.expires_ms is not None and now >= found.expires_ms) or now - last_seen > idle_ms:
        accounts.end_session(id_hash)
        return None
    if now - last_seen >= min(SESSION_SEEN_RESOLUTION_MS, idle_ms // 10):
        accounts.touch_session(id_hash, now)
    return _info(found.user)


def end_session(cluster: Cluster, session_id: object) -> None:
    """End one session (logout); an unknown or ended one is left as it is."""
    if isinstance(session_id, str) and session_id:
        _accounts(cluster).end_session(_session_hash(session_id))


def end_sessions(cluster: Cluster, name: str) -> int:
    """End every session of user `name`; returns how many there were."""
    return _accounts(cluster).end_sessions(name)


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_lifetime(value: object) -> int | None:
    """A token lifetime in seconds from seconds, a `timedelta` or text: a number with an
    optional unit `s`, `m`, `h`, `d` or `w` ("30d", "12h"); None, "" or "never" is None
    (no expiry). Anything else, or more than ten years, is `InvalidArgument`."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "never")):
        return None
    seconds: float
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str) and (found := _DURATION.fullmatch(value)):
        seconds = int(found.group(1)) * _DURATION_UNITS[found.group(2).lower()]
    else:
        raise InvalidArgument(
            f"invalid expiry {value!r}: a number of seconds, or a number with a unit "
            "s, m, h, d or w such as 30d, or never"
        )
    if not 0 < seconds <= MAX_TOKEN_LIFETIME_S:
        raise InvalidArgument(f"a token expires after 1 second to 10 years, not {value!r}")
    return int(seconds)


def create_api_token(
    cluster: Cluster, name: str, label: str = "", *, expires_in: object = None
) -> str:
    """A new API token for user `name`, returned once (`Authorization: Bearer TOKEN`).

    `expires_in` (seconds, a timedelta or text such as "30d"; see `parse_lifetime`) makes
    it stop working that long from now; None: never."""
    user(cluster, name)
    if not isinstance(label, str) or len(label) > 200:
        raise InvalidArgument("a token label is a string of at most 200 characters")
    lifetime = parse_lifetime(expires_in)
    token = "plet_" + secrets.token_urlsafe(32)
    now = cluster.clock.now_ms()
    _accounts(cluster).add_token(
        _token_hash(token), name, label, now, None if lifetime is None else now + lifetime * 1000
    )
    return token


def api_tokens(cluster: Cluster, name: str | None = None) -> list[ApiTokenInfo]:
    now = cluster.clock.now_ms()
    return [
        ApiTokenInfo(
            t.token_hash[:12],
            t.user,
            t.label,
            t.created_ms,
            t.last_used_ms,
            t.expires_ms,
            t.expires_ms is not None and now >= t.expires_ms,
        )
        for t in _accounts(cluster).tokens(name)
    ]


def revoke_api_token(cluster: Cluster, name: str, token_id: str) -> None:
    if not isinstance(token_id, str) or not re.fullmatch(r"[0-9a-f]{12}", token_id):
        raise InvalidArgument(f"invalid token id {token_id!r}: 12 hex digits, as listed")
    if not _accounts(cluster).delete_token(name, token_id):
        raise UnknownUser(f"user {name!r} has no token {token_id}")


def user_for_token(cluster: Cluster, token: str) -> UserInfo | None:
    """The user an API token belongs to, or None for an unknown one; `errors.TokenExpired`
    for one past its expiry (it stays listed until revoked, marked expired).

    Records the token's last use, at most once a minute (`LAST_USED_RESOLUTION_MS`), so
    that the Users page can show stale tokens without every request writing."""
    if not isinstance(token, str) or not token or len(token) > 200:
        return None
    token_hash = _token_hash(token)
    accounts = _accounts(cluster)
    found = accounts.token(token_hash)
    if found is None:
        return None
    last_used, expires, row = found
    now = cluster.clock.now_ms()
    if expires is not None and now >= expires:
        raise TokenExpired(
            f"API token {token_hash[:12]} expired at {times.format_ms(expires, seconds=True)}: make a new one "
            "on the Users page or with `plet user token`"
        )
    if last_used is None or now - last_used >= LAST_USED_RESOLUTION_MS:
        accounts.touch_token(token_hash, now)
    return _info(row)


def ensure_admin(cluster: Cluster, password: str | None = None) -> tuple[str, str | None]:
    """Make the first administrator when the cluster has no user yet.

    Its password is `password`, else `$PLET_ADMIN_PASSWORD`, else generated. Returns the
    administrator's name and the generated password (None when none was generated), which
    the caller prints once: only its hash is kept.
    """
    if _accounts(cluster).has_users():
        return ADMIN, None
    given = password or os.environ.get(ADMIN_PASSWORD_ENV) or None
    if given is not None:
        source = "the password" if password else ADMIN_PASSWORD_ENV
        if len(given) < MIN_PASSWORD_LENGTH:
            raise WeakPassword(f"{source} needs at least {MIN_PASSWORD_LENGTH} characters")
        try:
            check_password(given, ADMIN)
        except WeakPassword as exc:
            raise WeakPassword(f"{source}: {exc}") from None
    password = given or secrets.token_urlsafe(12)
    generated = None if given else password
    try:
        add_user(cluster, ADMIN, password, admin=True)
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
    "HASH_GATE",
    "HashGate",
    "authenticate",
    "check_password",
    "common_passwords",
    "create_api_token",
    "create_session",
    "delete_user",
    "edit_user",
    "end_session",
    "end_sessions",
    "ensure_admin",
    "login_wait",
    "parse_lifetime",
    "proof_checked",
    "revoke_api_token",
    "scram_credential",
    "session_user",
    "set_password",
    "user",
    "user_for_token",
    "users",
]
