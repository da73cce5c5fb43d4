"""What one listener lets its clients hold (docs/WIRE.md, Limits): connections in all, per
address and per logged-in user; the bytes of unfinished frames of connections that have not
logged in yet, and of each user's connections once logged in; the bytes one produce
request may decompress to. (Its log lines go through engine.log_once.)"""

from __future__ import annotations

import resource
import threading
from dataclasses import dataclass, field

from engine.auth.logins import LIMITER, LoginLimiter

# kept for one release: their old home, now engine.log_once
from engine.log_once import LOG_INTERVAL_S, LogOnce  # noqa: F401


def _default_max_connections() -> int:
    # half the process's file descriptors: the engine needs the rest (SQLite files, WAL)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 10_000
    return max(64, min(10_000, soft // 2))


# Every default of a listener's limits is here (KafkaServer's arguments, `plet serve`'s
# options), in a module that loads fast: the CLI shows them in its help.
# The largest frame after the login.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
# Kafka's fetch.max.wait.ms is the client's; a listener caps it so a parked fetch ends.
DEFAULT_MAX_FETCH_WAIT_MS = 30_000
# A rebalance waits at most this long, and a JoinGroup's session timeout must lie within
# these bounds. Kafka's group.min/max.session.timeout.ms are 6 s and 30 min: our lower bound
# is lower so tests and local tools expire members faster, the upper one lower so a member
# that went silent holds its partitions (and a rebalance) for 5 minutes at most.
DEFAULT_MAX_REBALANCE_TIMEOUT_MS = 300_000
DEFAULT_MIN_SESSION_TIMEOUT_MS = 1_000
DEFAULT_MAX_SESSION_TIMEOUT_MS = 300_000
# Fetch sessions (KIP-227, engine.wire.fetch_sessions): Kafka's
# max.incremental.fetch.session.cache.slots, and a bound per SASL user
DEFAULT_MAX_FETCH_SESSIONS = 1_000
DEFAULT_MAX_FETCH_SESSIONS_PER_USER = 100
DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 1_000
DEFAULT_MAX_CONNECTIONS_PER_USER = 1_000
# A SASL listener closes a connection that has not logged in after this many seconds.
DEFAULT_LOGIN_TIMEOUT_S = 10.0
# Once its first byte came, a frame must be complete within this (a slow half frame goes).
DEFAULT_FRAME_TIMEOUT_S = 30.0
# Kafka's connections.max.idle.ms: a connection that sends nothing for this long is closed.
DEFAULT_IDLE_TIMEOUT_S = 600.0
# The unfinished frames of all connections that have not logged in, together.
DEFAULT_MAX_BYTES_BEFORE_LOGIN = 32 * 1024 * 1024
# The unfinished frames of one logged-in user's connections together (without SASL: of
# every connection, all acting as the cluster's principal). Per user, not per listener, so
# a user who holds half frames spends only their own budget: other users' frames are read.
DEFAULT_MAX_BYTES_PER_USER = 256 * 1024 * 1024
# The batches of one produce request (all its partitions) decompress to at most this much
# together: bounded memory per request, not only per batch (32 small batches that each
# inflate to just under a per-batch bound would make 2 GiB).
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
# Metadata for all topics (and DescribeLogDirs without topics) lists at most this many
# topics: Kafka's Metadata has no paging (engine.wire.names reads the catalog in pages).
DEFAULT_MAX_LISTED_TOPICS = 10_000


@dataclass
class Limits:
    """The counters of one listener (thread-safe: logins count in worker threads)."""

    max_connections: int = field(default_factory=_default_max_connections)
    max_connections_per_address: int = DEFAULT_MAX_CONNECTIONS_PER_ADDRESS
    max_connections_per_user: int = DEFAULT_MAX_CONNECTIONS_PER_USER
    login_timeout_s: float = DEFAULT_LOGIN_TIMEOUT_S
    frame_timeout_s: float = DEFAULT_FRAME_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_bytes_before_login: int = DEFAULT_MAX_BYTES_BEFORE_LOGIN
    max_bytes_per_user: int = DEFAULT_MAX_BYTES_PER_USER
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    # failed logins per client address (engine.auth.logins), shared with the web console
    logins: LoginLimiter = LIMITER
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _total: int = 0
    _by_address: dict[str, int] = field(default_factory=dict, repr=False)
    _by_user: dict[str, int] = field(default_factory=dict, repr=False)
    _before_login: int = 0
    _frames_by_user: dict[str, int] = field(default_factory=dict, repr=False)

    def check(self) -> None:
        from engine import errors

        for name in (
            "max_connections",
            "max_connections_per_address",
            "max_connections_per_user",
            "max_bytes_before_login",
            "max_bytes_per_user",
            "max_decompressed_bytes",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise errors.InvalidArgument(f"{name} must be a positive integer, got {value!r}")
        for name in ("login_timeout_s", "frame_timeout_s", "idle_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value <= 0:
                raise errors.InvalidArgument(f"{name} must be a positive number, got {value!r}")

    def admit(self, address: str) -> str | None:
        """Count a new connection from `address`; the reason it is refused, or None."""
        with self._lock:
            if self._total >= self.max_connections:
                return f"{self._total} connections (max_connections)"
            held = self._by_address.get(address, 0)
            if held >= self.max_connections_per_address:
                return f"{held} connections from {address} (max_connections_per_address)"
            self._total += 1
            self._by_address[address] = held + 1
            return None

    def leave(self, address: str) -> None:
        with self._lock:
            self._total -= 1
            held = self._by_address.pop(address, 1) - 1
            if held > 0:
                self._by_address[address] = held

    def add_user(self, name: str) -> bool:
        """Count a logged-in connection of `name`; False when it has too many."""
        with self._lock:
            held = self._by_user.get(name, 0)
            if held >= self.max_connections_per_user:
                return False
            self._by_user[name] = held + 1
            return True

    def remove_user(self, name: str) -> None:
        with self._lock:
            held = self._by_user.pop(name, 1) - 1
            if held > 0:
                self._by_user[name] = held

    def reserve_before_login(self, n: int) -> bool:
        """Take `n` bytes of the budget of connections not logged in; False when spent."""
        with self._lock:
            if self._before_login + n > self.max_bytes_before_login:
                return False
            self._before_login += n
            return True

    def release_before_login(self, n: int) -> None:
        with self._lock:
            self._before_login -= n

    def reserve_frame(self, user: str, n: int) -> bool:
        """Take `n` bytes of the budget of `user`'s unfinished frames; False when spent."""
        with self._lock:
            held = self._frames_by_user.get(user, 0)
            if held + n > self.max_bytes_per_user:
                return False
            self._frames_by_user[user] = held + n
            return True

    def release_frame(self, user: str, n: int) -> None:
        with self._lock:
            held = self._frames_by_user.pop(user, 0) - n
            if held > 0:
                self._frames_by_user[user] = held
