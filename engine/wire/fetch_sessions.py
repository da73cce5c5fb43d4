"""Fetch sessions (KIP-227): a consumer's full fetch (epoch 0) makes a session holding its
partitions and fetch offsets; its next fetches (epoch 1, 2, ...) name only what changed
(new offsets, added partitions, `forgotten_topics_data`), and the answers carry only the
partitions with new data or changed metadata. A client with many partitions then sends and
receives a few bytes per idle partition instead of a full list each time.

The cache is Kafka's FetchSessionCache, bounded per listener (`max_fetch_sessions`,
Kafka's `max.incremental.fetch.session.cache.slots`) and, with SASL, per user
(`max_fetch_sessions_per_user`, so one user cannot push out everyone else's sessions). A
new session first takes the place of its user's least recently used one when that user
is at their cap; when the listener is full, it takes the place of a session unused for
`EVICTION_AGE_S` (Kafka's `min.incremental.fetch.session.eviction.ms`), else of the
smallest session (fewest partitions, then least recently used) if that one is no larger;
otherwise no session is made (session id 0: the client keeps sending full fetches).

A session belongs to the principal that made it (another user's id is answered
`FETCH_SESSION_ID_NOT_FOUND`, as an unknown one) and lives until epoch -1 closes it, a full
fetch names it, it is evicted, or the connection that made it closes.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine import errors
from engine.wire import codes
from engine.wire.limits import DEFAULT_MAX_FETCH_SESSIONS, DEFAULT_MAX_FETCH_SESSIONS_PER_USER

INITIAL_EPOCH = 0  # a full fetch that asks for a session
FINAL_EPOCH = -1  # a full fetch without a session (and the close of the one named)
EVICTION_AGE_S = 120.0

Key = tuple[str, int]  # (wire topic name, partition)


@dataclass(slots=True)
class Cached:
    """A partition of a session: the client's last fetch offset and byte limit, and the
    metadata last sent for it (a change puts the partition in the next answer)."""

    fetch_offset: int
    max_bytes: int
    high_watermark: int = -2  # never sent
    log_start: int = -2


@dataclass(eq=False, slots=True)
class FetchSession:
    id: int
    owner: object  # the principal (None: the listener's own, without SASL)
    conn: object  # the connection that made it: the session goes when it closes
    partitions: dict[Key, Cached]
    epoch: int = 1  # the epoch the next incremental fetch must carry
    last_used: float = field(default_factory=time.monotonic)


class FetchSessions:
    """The fetch session cache of one listener (thread-safe)."""

    def __init__(
        self,
        max_sessions: int = DEFAULT_MAX_FETCH_SESSIONS,
        max_per_user: int = DEFAULT_MAX_FETCH_SESSIONS_PER_USER,
        eviction_age_s: float = EVICTION_AGE_S,
    ) -> None:
        for name, value in (("max_fetch_sessions", max_sessions),):
            if not isinstance(value, int) or value < 0:
                raise errors.InvalidArgument(f"{name} must be an integer >= 0, got {value!r}")
        if not isinstance(max_per_user, int) or max_per_user < 1:
            raise errors.InvalidArgument(
                f"max_fetch_sessions_per_user must be a positive integer, got {max_per_user!r}"
            )
        self.max_sessions = max_sessions
        self.max_per_user = max_per_user
        self.eviction_age_s = eviction_age_s
        self._lock = threading.Lock()
        self._sessions: dict[int, FetchSession] = {}  # least recently used first
        self._by_owner: Counter[object] = Counter()
        self._stats: Counter[str] = Counter()

    def stats(self) -> dict[str, int]:
        """Counters since the listener started: `full` and `incremental` fetches answered,
        `sessionless` ones (full fetches that made no session, old versions included),
        `created`, `closed` (epoch -1, a full fetch naming it, emptied or its connection
        gone), `evicted`, `not_found` and `invalid_epoch` errors; and `sessions` now."""
        with self._lock:
            out = {
                k: self._stats[k]
                for k in (
                    "full",
                    "incremental",
                    "sessionless",
                    "created",
                    "closed",
                    "evicted",
                    "not_found",
                    "invalid_epoch",
                )
            }
            out["sessions"] = len(self._sessions)
            return out

    def count(self, what: str) -> None:
        with self._lock:
            self._stats[what] += 1

    def create(
        self, owner: object, conn: object, per_user: bool, partitions: dict[Key, Cached]
    ) -> FetchSession | None:
        """A new session for a full fetch of `partitions` (None when the cache has no room
        for it: the client goes on with full fetches). `per_user`: the owner is a SASL
        user, bounded by `max_per_user`."""
        now = time.monotonic()
        with self._lock:
            if self.max_sessions == 0:
                return None
            if per_user and self._by_owner[owner] >= self.max_per_user:
                # the user's own least recently used session makes room
                oldest = next(s for s in self._sessions.values() if s.owner == owner)
                self._remove(oldest, "evicted")
            if len(self._sessions) >= self.max_sessions and not self._evict(len(partitions), now):
                return None
            session_id = 0
            while session_id == 0 or session_id in self._sessions:
                session_id = secrets.randbelow(1 << 31)
            session = FetchSession(session_id, owner, conn, partitions, last_used=now)
            self._sessions[session_id] = session
            self._by_owner[owner] += 1
            self._stats["created"] += 1
            return session

    def _evict(self, size: int, now: float) -> bool:
        """Make room for a session of `size` partitions (under the lock): Kafka's rule."""
        lru = next(iter(self._sessions.values()))
        if now - lru.last_used > self.eviction_age_s:
            self._remove(lru, "evicted")
            return True
        smallest = min(self._sessions.values(), key=lambda s: len(s.partitions))
        if len(smallest.partitions) > size:
            return False
        self._remove(smallest, "evicted")
        return True

    def _remove(self, session: FetchSession, why: str) -> None:
        if self._sessions.pop(session.id, None) is not None:
            self._by_owner[session.owner] -= 1
            if self._by_owner[session.owner] <= 0:
                del self._by_owner[session.owner]
            self._stats[why] += 1

    def close(self, owner: object, session_id: int) -> None:
        """Close a session named by a full fetch; another owner's is left alone."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.owner == owner:
                self._remove(session, "closed")

    def alive(self, ids: Iterable[int]) -> set[int]:
        """Those of `ids` still in the cache."""
        with self._lock:
            return {i for i in ids if i in self._sessions}

    def drop(self, conn: object, ids: Iterable[int]) -> None:
        """The sessions `conn` made, when it closes."""
        with self._lock:
            for session_id in ids:
                session = self._sessions.get(session_id)
                if session is not None and session.conn is conn:
                    self._remove(session, "closed")

    def update(
        self,
        owner: object,
        session_id: int,
        epoch: int,
        fetch: dict[Key, tuple[int, int]],
        forgotten: Iterable[Key],
    ) -> tuple[int, FetchSession | None]:
        """An incremental fetch: (error, session). The session takes the partitions the
        request names (new ones or new offsets and limits) and drops the forgotten ones;
        its epoch moves on. (NONE, None) when the session is now empty (closed: the fetch
        is answered without a session, as Kafka does)."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or session.owner != owner:
                self._stats["not_found"] += 1
                return codes.FETCH_SESSION_ID_NOT_FOUND, None
            if session.epoch != epoch:
                self._stats["invalid_epoch"] += 1
                return codes.INVALID_FETCH_SESSION_EPOCH, None
            parts = session.partitions
            for key, (offset, max_bytes) in fetch.items():
                cached = parts.get(key)
                if cached is None:
                    parts[key] = Cached(offset, max_bytes)
                else:
                    cached.fetch_offset, cached.max_bytes = offset, max_bytes
            for key in forgotten:
                parts.pop(key, None)
            if not parts:
                self._remove(session, "closed")
                return codes.NONE, None
            session.epoch = session.epoch + 1 if session.epoch < (1 << 31) - 1 else 1
            session.last_used = time.monotonic()
            # most recently used last: eviction by age looks at the first
            del self._sessions[session_id]
            self._sessions[session_id] = session
            self._stats["incremental"] += 1
            return codes.NONE, session

    def sent(self, session: FetchSession, key: Key, high_watermark: int, log_start: int) -> bool:
        """Record what an answer says of a session's partition; True when it changed since
        the last answer (an incremental answer then carries the partition)."""
        cached = session.partitions.get(key)
        if cached is None:
            return True
        changed = cached.high_watermark != high_watermark or cached.log_start != log_start
        cached.high_watermark, cached.log_start = high_watermark, log_start
        return changed
