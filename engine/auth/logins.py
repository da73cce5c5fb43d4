"""The one limiter of every login path (SASL/PLAIN and SCRAM on the wire, the schema
registry's Basic auth, the web console's login form and its Users page's current password,
API tokens, replication tokens): wrong passwords or unknown tokens counted per client
address in a moving window, and a few logins per address checked at once.

It complements the per user name throttle of engine.auth.users (in the catalog, for every
process): that one stops guesses at one name from anywhere, this one guesses at many names
from one address, and keeps one address from holding every password hash slot (so its
flood cannot refuse other clients' logins). It lives in this process's memory.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from engine.auth import scram, users
from engine.errors import Busy, LoginThrottled

if TYPE_CHECKING:
    from engine.auth.users import UserInfo
    from engine.cluster import Cluster

# Failed logins one address may have in the window, then it waits until the oldest leaves.
ADDRESS_FAILURES = 20
ADDRESS_WINDOW_S = 60.0
# Logins of one address whose password is being checked at once (a hash each); more wait
# up to ADDRESS_WAIT_S for their turn (a fleet's logins after the first are quick: the
# password just checked is remembered, engine.auth.users).
ADDRESS_CONCURRENT = 2
ADDRESS_WAIT_S = 10.0
_MAX_ADDRESSES = 100_000  # addresses remembered; the stalest go first


class LoginLimiter:
    """Per client address: at most `failures` failed logins in `window_s` seconds, at most
    `concurrent` logins checked at once. Thread-safe."""

    def __init__(
        self,
        failures: int = ADDRESS_FAILURES,
        window_s: float = ADDRESS_WINDOW_S,
        concurrent: int = ADDRESS_CONCURRENT,
        wait_s: float = ADDRESS_WAIT_S,
    ) -> None:
        self.failures = failures
        self.window_s = window_s
        self.concurrent = concurrent
        self.wait_s = wait_s
        self._lock = threading.Condition()
        self._failed: dict[str, deque[float]] = {}
        self._running: dict[str, int] = {}

    def wait(self, address: str) -> int:
        """Seconds until `address` may try again (0: now)."""
        now = time.monotonic()
        with self._lock:
            times = self._failed.get(address)
            if times is None:
                return 0
            while times and times[0] <= now - self.window_s:
                times.popleft()
            if not times:
                del self._failed[address]
                return 0
            if len(times) < self.failures:
                return 0
            return max(1, math.ceil(times[0] + self.window_s - now))

    def failed(self, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            times = self._failed.pop(address, None)
            if times is None:
                times = deque(maxlen=self.failures)
                if len(self._failed) >= _MAX_ADDRESSES:
                    del self._failed[next(iter(self._failed))]
            times.append(now)
            self._failed[address] = times  # last: the dict's order is staleness

    def check(self, address: str) -> None:
        """Raise `LoginThrottled` while `address` must wait."""
        wait = self.wait(address)
        if wait:
            raise LoginThrottled(
                f"too many failed logins from {address}: try again in {wait} seconds",
                retry_after=wait,
            )

    @contextmanager
    def attempt(self, address: str) -> Iterator[None]:
        """Hold one of the address's login checks, waiting up to `wait_s` for one; `Busy`
        (try again, nothing counted) when none came free."""
        deadline = time.monotonic() + self.wait_s
        with self._lock:
            while (running := self._running.get(address, 0)) >= self.concurrent:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Busy(
                        f"{running} logins from {address} are being checked: try again in a second",
                        retry_after=1,
                    )
                self._lock.wait(left)
            self._running[address] = running + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._running.pop(address) - 1
                if left:
                    self._running[address] = left
                self._lock.notify_all()

    def reset(self) -> None:
        with self._lock:
            self._failed.clear()


# The limiter of this process, shared by its wire listeners, registry and web console.
LIMITER = LoginLimiter()


def login(
    cluster: Cluster, name: str, password: str, address: str, limiter: LoginLimiter = LIMITER
) -> UserInfo | None:
    """A login with a console user's name and password from `address`: the user, or None
    for a wrong name or password (counted against the address). Raises `LoginThrottled`
    while the address or the name must wait, `Busy` when the server cannot check it now
    (not a failure: try again)."""
    limiter.check(address)
    with limiter.attempt(address):
        user = cluster.authenticate(name, password)
    if user is None:
        limiter.failed(address)
    return user


def password_ok(
    cluster: Cluster, name: str, password: str, address: str, limiter: LoginLimiter = LIMITER
) -> bool:
    """Whether `password` is user `name`'s, asked again of a logged-in user (the Users
    page's current password before a change): checked and counted as a `login`, so a
    stolen session cannot guess the password faster than a login could."""
    return login(cluster, name, password, address, limiter) is not None


def replication_stream(
    find: Callable[[str], str | None], token: str, address: str, limiter: LoginLimiter = LIMITER
) -> str | None:
    """The stream a replication token opens (`find` looks it up: ReplicationService),
    None for an unknown one (counted against the address). Raises `LoginThrottled` while
    the address must wait, even with a good token."""
    limiter.check(address)
    stream = find(token)
    if stream is None:
        limiter.failed(address)
    return stream


def token_user(
    cluster: Cluster, token: str, address: str, limiter: LoginLimiter = LIMITER
) -> UserInfo | None:
    """The owner of an API token presented from `address`, None for an unknown or revoked
    one (counted against the address, so tokens cannot be guessed at speed either). Raises
    `LoginThrottled` while the address must wait, `errors.TokenExpired`."""
    limiter.check(address)
    user = cluster.user_for_token(token)
    if user is None:
        limiter.failed(address)
    return user


class ScramFailed(Exception):
    """A SCRAM login was refused; the message is what the client is told."""


# Kafka's words for a refused SCRAM login, with the one reason a right password fails here.
_SCRAM_FAILED = (
    "Authentication failed: Invalid username or password (a user whose password was set "
    "before SCRAM credentials were kept logs in once with PLAIN or on the web console, or "
    "sets the password again)"
)
# The decoys' salts (engine.auth.scram.decoy): the same for one name while this process runs.
_DECOY_SECRET = secrets.token_bytes(32)


class ScramLogin:
    """One SCRAM login from `address` (RFC 5802: client-first, server-first, client-final,
    server-final): `first` answers the client's first message, `final` its proof with the
    user, or raises `ScramFailed`. A wrong proof counts as a failed login of the address
    (`limiter`) and of the name (engine.auth.users' throttle), as a wrong PLAIN password.
    Checking a proof costs two HMACs and a hash, no password hash: the PBKDF2 rounds are
    the client's."""

    def __init__(
        self, cluster: Cluster, mechanism: str, address: str, limiter: LoginLimiter = LIMITER
    ) -> None:
        self.cluster = cluster
        self.mechanism = mechanism
        self.address = address
        self.limiter = limiter
        self._client: scram.ClientFirst | None = None
        self._server_first = ""
        self._credential: scram.Credential | None = None
        self._user: UserInfo | None = None

    @property
    def name(self) -> str | None:
        """The user name the client gave (after `first`)."""
        return None if self._client is None else self._client.name

    def first(self, message: bytes) -> bytes:
        """The server-first message answering the client-first `message`."""
        if self._client is not None:
            raise ScramFailed("Authentication failed: the client-first message came twice")
        try:
            self.limiter.check(self.address)
            client = scram.parse_client_first(message)
        except (LoginThrottled, scram.ScramError) as exc:
            raise ScramFailed(f"Authentication failed: {exc}") from None
        if client.authzid and client.authzid != client.name:
            raise ScramFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        if client.token_auth:
            raise ScramFailed("Authentication failed: delegation tokens are not supported")
        wait = users.login_wait(self.cluster, client.name)
        if wait:
            raise ScramFailed(
                f"Authentication failed: too many wrong passwords for {client.name!r}: try "
                f"again in {wait} seconds"
            )
        found = users.scram_credential(self.cluster, client.name, self.mechanism)
        if found is None:  # unknown, or no credential yet: answered alike
            credential = scram.decoy(self.mechanism, client.name, _DECOY_SECRET)
        else:
            credential, self._user = found
        self._client, self._credential = client, credential
        self._server_first = scram.server_first(client, credential)
        return self._server_first.encode("ascii")

    def final(self, message: bytes) -> tuple[bytes, UserInfo]:
        """The server-final message answering the client's proof, and the user logged in."""
        client, credential = self._client, self._credential
        if client is None or credential is None:
            raise ScramFailed("Authentication failed: the client-final message came first")
        self._client = None  # one proof per login
        try:
            answer = scram.check_client_final(message, client, self._server_first, credential)
        except scram.ScramError as exc:
            raise ScramFailed(f"Authentication failed: {exc}") from None
        correct = answer is not None and self._user is not None
        if not correct:
            self.limiter.failed(self.address)
        try:
            users.proof_checked(self.cluster, client.name, correct)
        except LoginThrottled as exc:
            raise ScramFailed(f"Authentication failed: {exc}") from None
        if answer is None or self._user is None:
            raise ScramFailed(_SCRAM_FAILED)
        return answer.encode("ascii"), self._user
