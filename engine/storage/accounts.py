"""Console accounts in the catalog: users, web sessions, API tokens and login failures.

The SQL of engine.auth.users lives here; the rules (password strength, hashing, the
throttle's arithmetic, session lifetimes) stay there. Each method is one short
transaction. A session or an API token is a credential: a row keyed by the SHA-256 of the
secret, naming its user, with a last use and an optional expiry.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.errors import AlreadyExists, PartitionletError, UnknownUser

if TYPE_CHECKING:
    from engine.storage.catalog import Catalog


class UserRow(NamedTuple):
    name: str
    groups: tuple[str, ...]
    admin: bool
    created_ms: int
    read_only: bool = False


class CredentialRow(NamedTuple):
    """A session or an API token with its user."""

    last_used_ms: int | None
    expires_ms: int | None
    user: UserRow


class ScramRow(NamedTuple):
    """A user's SCRAM credential for one mechanism (engine.auth.scram.Credential)."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


class TokenRow(NamedTuple):
    token_hash: str
    user: str
    label: str
    created_ms: int
    last_used_ms: int | None
    expires_ms: int | None


_USER = "name, groups, admin, created_ms, read_only"
# Credential tables: (table, key column, last-use column). Nothing else reaches the SQL.
_SESSIONS = ("web_sessions", "id_hash", "last_seen_ms")
_TOKENS = ("api_tokens", "token_hash", "last_used_ms")


def _put_scram(
    conn: sqlite3.Connection, name: str, scram: Iterable[ScramRow], replace: bool = True
) -> None:
    verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
    conn.executemany(
        f"{verb} INTO scram_credentials "
        "(name, mechanism, salt, iterations, stored_key, server_key) VALUES (?, ?, ?, ?, ?, ?)",
        [(name, *row) for row in scram],
    )


def _user(row: tuple[Any, ...]) -> UserRow:
    name, groups, admin, created_ms, read_only = row
    return UserRow(
        name, tuple(g for g in groups.split(",") if g), bool(admin), created_ms, bool(read_only)
    )


class Accounts:
    """The account tables of one catalog (`catalog.accounts`): every method is one short
    transaction, so a password change, its ended sessions and forgotten failures land
    together; times are given by the caller (engine.auth.users, from the cluster's clock).
    Any thread may call it (the catalog's connection of that thread)."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    # --- users ----------------------------------------------------------------------------

    def has_users(self) -> bool:
        return bool(self._catalog.query("SELECT 1 FROM users LIMIT 1"))

    def user(self, name: str) -> UserRow | None:
        rows = self._catalog.query(f"SELECT {_USER} FROM users WHERE name = ?", (name,))
        return _user(rows[0]) if rows else None

    def users(self) -> list[UserRow]:
        return [_user(r) for r in self._catalog.query(f"SELECT {_USER} FROM users ORDER BY name")]

    def password_hash(self, name: str) -> tuple[str, UserRow] | None:
        """(stored password hash, user) of `name`, or None."""
        rows = self._catalog.query(
            f"SELECT password_hash, {_USER} FROM users WHERE name = ?", (name,)
        )
        return (rows[0][0], _user(rows[0][1:])) if rows else None

    def add_user(
        self,
        name: str,
        password_hash: str,
        groups: tuple[str, ...],
        admin: bool,
        now: int,
        scram: Iterable[ScramRow] = (),
        read_only: bool = False,
    ) -> None:
        """Insert a user with their SCRAM credentials; `AlreadyExists` when the name is
        taken."""
        catalog = self._catalog
        with catalog.write():
            conn = catalog.conn
            if conn.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                raise AlreadyExists(f"user {name!r} exists already")
            conn.execute(
                "INSERT INTO users (name, password_hash, groups, admin, created_ms, read_only) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (name, password_hash, ",".join(groups), int(bool(admin)), now, int(read_only)),
            )
            _put_scram(conn, name, scram)

    def set_password_hash(
        self, name: str, password_hash: str, scram: Iterable[ScramRow] = ()
    ) -> None:
        """Replace the hash and the SCRAM credentials (those of the old password go), end
        every session of the user and forget their failed logins, in one transaction;
        `UnknownUser` when there is no such user."""
        catalog = self._catalog
        with catalog.write():
            conn = catalog.conn
            cursor = conn.execute(
                "UPDATE users SET password_hash = ? WHERE name = ?", (password_hash, name)
            )
            if cursor.rowcount == 0:
                raise UnknownUser(f"no user {name!r}")
            conn.execute("DELETE FROM scram_credentials WHERE name = ?", (name,))
            _put_scram(conn, name, scram)
            conn.execute("DELETE FROM web_sessions WHERE user = ?", (name,))
            conn.execute("DELETE FROM login_failures WHERE name = ?", (name,))

    def edit_user(
        self,
        name: str,
        groups: tuple[str, ...] | None,
        admin: bool | None,
        read_only: bool | None = None,
    ) -> None:
        """Set the groups, the admin flag and the read-only flag (None: keep); a change of
        the admin flag ends the user's sessions in the same transaction."""
        catalog = self._catalog
        with catalog.write():
            conn = catalog.conn
            row = conn.execute("SELECT admin FROM users WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise UnknownUser(f"no user {name!r}")
            if groups is not None:
                conn.execute("UPDATE users SET groups = ? WHERE name = ?", (",".join(groups), name))
            if read_only is not None:
                # each request reads the flag again: no session needs to end for it
                conn.execute(
                    "UPDATE users SET read_only = ? WHERE name = ?", (int(read_only), name)
                )
            if admin is not None and bool(admin) != bool(row[0]):
                conn.execute("UPDATE users SET admin = ? WHERE name = ?", (int(bool(admin)), name))
                conn.execute("DELETE FROM web_sessions WHERE user = ?", (name,))

    def delete_user(self, name: str) -> None:
        """Delete a user with their API tokens and sessions."""
        catalog = self._catalog
        with catalog.write():
            conn = catalog.conn
            if conn.execute("DELETE FROM users WHERE name = ?", (name,)).rowcount == 0:
                raise UnknownUser(f"no user {name!r}")
            conn.execute("DELETE FROM api_tokens WHERE user = ?", (name,))
            conn.execute("DELETE FROM web_sessions WHERE user = ?", (name,))
            conn.execute("DELETE FROM scram_credentials WHERE name = ?", (name,))

    # --- SCRAM credentials ----------------------------------------------------------------

    def scram_credential(self, name: str, mechanism: str) -> tuple[ScramRow, UserRow] | None:
        """`name`'s credential for `mechanism` with the user, or None (no such user, or a
        user whose password was set before SCRAM credentials were kept)."""
        columns = ", ".join(f"u.{c.strip()}" for c in _USER.split(","))
        rows = self._catalog.query(
            f"SELECT s.mechanism, s.salt, s.iterations, s.stored_key, s.server_key, {columns} "
            "FROM scram_credentials s JOIN users u ON u.name = s.name "
            "WHERE s.name = ? AND s.mechanism = ?",
            (name, mechanism),
        )
        if not rows:
            return None
        return ScramRow(*rows[0][:5]), _user(rows[0][5:])

    def scram_mechanisms(self, name: str) -> set[str]:
        """The mechanisms `name` has a SCRAM credential for."""
        rows = self._catalog.query(
            "SELECT mechanism FROM scram_credentials WHERE name = ?", (name,)
        )
        return {r[0] for r in rows}

    def add_scram(self, name: str, password_hash: str, scram: Iterable[ScramRow]) -> bool:
        """Store SCRAM credentials derived from the password whose hash is `password_hash`,
        only while it is still `name`'s (a password changed meanwhile wins); False when it
        is not. Credentials the user has already are kept."""
        catalog = self._catalog
        with catalog.write():
            conn = catalog.conn
            row = conn.execute("SELECT password_hash FROM users WHERE name = ?", (name,)).fetchone()
            if row is None or row[0] != password_hash:
                return False
            _put_scram(conn, name, scram, replace=False)
        return True

    # --- login failures -------------------------------------------------------------------

    def count_login_attempt(
        self,
        name: str,
        now: int,
        window_ms: int,
        lock_ms: Callable[[int], int],
        forget_before: int,
    ) -> int:
        """Count an attempt at `name` as a failure, in one transaction, unless the name
        must still wait: then return how many ms (and count nothing).

        A run of failures is forgotten `window_ms` after its last failure or wait;
        `lock_ms(failures)` is how long the name waits after that many in a row. Names
        whose last failure is older than `forget_before` (and that wait no more) go."""
        catalog = self._catalog
        with catalog.write():
            conn = catalog.conn
            row = conn.execute(
                "SELECT failures, last_failure_ms, locked_until_ms FROM login_failures "
                "WHERE name = ?",
                (name,),
            ).fetchone()
            if row is not None and row[2] > now:
                wait: int = row[2] - now
                return wait
            recent = row is not None and now - max(row[1], row[2]) <= window_ms
            failures = (row[0] if recent else 0) + 1
            lock = lock_ms(failures)
            conn.execute(
                "INSERT INTO login_failures (name, failures, last_failure_ms, locked_until_ms) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                "failures = excluded.failures, last_failure_ms = excluded.last_failure_ms, "
                "locked_until_ms = excluded.locked_until_ms",
                (name, failures, now, now + lock if lock else 0),
            )
            conn.execute(
                "DELETE FROM login_failures WHERE last_failure_ms < ? AND locked_until_ms < ?",
                (forget_before, now),
            )
        return 0

    def forget_login_failures(self, name: str) -> None:
        with self._catalog.write():
            self._catalog.conn.execute("DELETE FROM login_failures WHERE name = ?", (name,))

    def has_login_failures(self, name: str) -> bool:
        return bool(self._catalog.query("SELECT 1 FROM login_failures WHERE name = ?", (name,)))

    def locked_until(self, name: str) -> int:
        """When `name` may try again (ms since the epoch; 0: no wait was ever set)."""
        rows = self._catalog.query(
            "SELECT locked_until_ms FROM login_failures WHERE name = ?", (name,)
        )
        return rows[0][0] if rows else 0

    # --- sessions -------------------------------------------------------------------------

    def add_session(self, id_hash: str, name: str, now: int, expires_ms: int) -> None:
        """Insert a session of user `name` (dropping every expired one on the way)."""
        catalog = self._catalog
        with catalog.write():
            conn = catalog.conn
            if not conn.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                raise UnknownUser(f"no user {name!r}")
            conn.execute("DELETE FROM web_sessions WHERE expires_ms <= ?", (now,))
            conn.execute(
                "INSERT INTO web_sessions (id_hash, user, created_ms, last_seen_ms, expires_ms) "
                "VALUES (?, ?, ?, ?, ?)",
                (id_hash, name, now, now, expires_ms),
            )

    def session(self, id_hash: str) -> CredentialRow | None:
        return self._credential(_SESSIONS, id_hash)

    def touch_session(self, id_hash: str, now: int) -> None:
        self._touch(_SESSIONS, id_hash, now)

    def end_session(self, id_hash: str) -> None:
        with self._catalog.write():
            self._catalog.conn.execute("DELETE FROM web_sessions WHERE id_hash = ?", (id_hash,))

    def end_sessions(self, name: str) -> int:
        """End every session of `name`; returns how many there were."""
        with self._catalog.write():
            return self._catalog.conn.execute(
                "DELETE FROM web_sessions WHERE user = ?", (name,)
            ).rowcount

    # --- API tokens -----------------------------------------------------------------------

    def add_token(
        self, token_hash: str, name: str, label: str, now: int, expires_ms: int | None
    ) -> None:
        with self._catalog.write():
            self._catalog.conn.execute(
                "INSERT INTO api_tokens (token_hash, user, label, created_ms, expires_ms) "
                "VALUES (?, ?, ?, ?, ?)",
                (token_hash, name, label, now, expires_ms),
            )

    def tokens(self, name: str | None = None) -> list[TokenRow]:
        """The tokens (of one user, when given), oldest first."""
        sql = "SELECT token_hash, user, label, created_ms, last_used_ms, expires_ms FROM api_tokens"
        args: tuple[Any, ...] = ()
        if name is not None:
            sql += " WHERE user = ?"
            args = (name,)
        return [
            TokenRow(*r)
            for r in self._catalog.query(sql + " ORDER BY created_ms, token_hash", args)
        ]

    def delete_token(self, name: str, token_id: str) -> bool:
        """Delete `name`'s token whose hash starts with `token_id`; False if none."""
        with self._catalog.write():
            cursor = self._catalog.conn.execute(
                "DELETE FROM api_tokens WHERE user = ? AND substr(token_hash, 1, 12) = ?",
                (name, token_id),
            )
            return cursor.rowcount > 0

    def token(self, token_hash: str) -> CredentialRow | None:
        return self._credential(_TOKENS, token_hash)

    def touch_token(self, token_hash: str, now: int) -> None:
        self._touch(_TOKENS, token_hash, now)

    # --- credentials ----------------------------------------------------------------------

    def _credential(self, table: tuple[str, str, str], key_hash: str) -> CredentialRow | None:
        name, key, seen = table
        columns = ", ".join(f"u.{c.strip()}" for c in _USER.split(","))
        rows = self._catalog.query(
            f"SELECT c.{seen}, c.expires_ms, {columns} "
            f"FROM {name} c JOIN users u ON u.name = c.user WHERE c.{key} = ?",
            (key_hash,),
        )
        if not rows:
            return None
        last_seen, expires, *user_row = rows[0]
        return CredentialRow(last_seen, expires, _user(tuple(user_row)))

    def _touch(self, table: tuple[str, str, str], key_hash: str, now: int) -> None:
        """Record a credential's last use; advisory: a busy catalog must not fail the
        request."""
        name, key, seen = table
        try:
            with self._catalog.write():
                self._catalog.conn.execute(
                    f"UPDATE {name} SET {seen} = ? WHERE {key} = ?", (now, key_hash)
                )
        except PartitionletError:
            pass
