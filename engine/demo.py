"""The demo data set behind `plet demo`: a few streams that show what the engine does.

`seed(cluster)` creates, through the public API only (Cluster, Producer, Consumer):

- `/apps/sensors` (3 partitions per topic, TTL one day): keyed readings of two cars with a
  `unit` header and create timestamps spread over the last hour, so the same key always
  lands in the same partition and `--from-time` has something to find;
- `/apps/clicks` (2 partitions): JSON click events keyed by user, and a consumer group
  `analytics` that has committed half of them, so the consoles have lag to show;
- `/apps/profiles` (compacted, kept forever): profile updates keyed by user, with
  overwrites and a tombstone (a null value), the input `compact()` is made for;
- `/ops/logs` (log-append time, TTL three days): JSON log lines of two services, keyless,
  with a `host` header.

Seeding is idempotent: a stream or topic that exists is left as it is, and a topic gets its
messages only while it has never held any, so running `plet demo` again adds nothing.
The content is fixed (a seeded random generator); only the timestamps follow the clock.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from engine import Consumer, OffsetAndMetadata, Producer, TopicPartition, errors

SENSORS = "/apps/sensors"
CLICKS = "/apps/clicks"
PROFILES = "/apps/profiles"
LOGS = "/ops/logs"

LAG_GROUP = "analytics"

_HOUR_MS = 3_600_000

# Each stream with its policies; each topic with its partition count (None: the stream's).
_STREAMS: dict[str, dict[str, Any]] = {
    SENSORS: {"ttl": 86_400, "default_partitions": 3},
    CLICKS: {"ttl": 7 * 86_400, "default_partitions": 2},
    PROFILES: {"ttl": 0, "compact": True, "default_partitions": 1},
    LOGS: {"ttl": 3 * 86_400, "timestamp_type": "log_append", "default_partitions": 1},
}
_TOPICS: dict[str, int | None] = {
    f"{SENSORS}:car-17": None,
    f"{SENSORS}:car-42": None,
    f"{CLICKS}:web": None,
    f"{PROFILES}:users": None,
    f"{LOGS}:api": None,
    f"{LOGS}:worker": None,
}
# (full topic name, how many of its first messages the tour prints); the first one is also
# the topic of the tour's `plet consume` and `plet produce` examples.
_SAMPLES: tuple[tuple[str, int], ...] = (
    (f"{SENSORS}:car-17", 5),
    (f"{PROFILES}:users", 8),  # up to u-mallory's tombstone
    (f"{LOGS}:api", 3),
)


@dataclass(frozen=True)
class DemoSummary:
    """What one `seed` call did, and what the tour should show."""

    streams_created: tuple[str, ...]
    topics_created: tuple[str, ...]
    messages_produced: int
    streams: tuple[str, ...] = tuple(_STREAMS)
    topics: tuple[str, ...] = tuple(_TOPICS)
    samples: tuple[tuple[str, int], ...] = _SAMPLES
    groups_committed: tuple[str, ...] = field(default=())


# A message to send: (key, value, headers, timestamp_ms or None for "now").
_Message = tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int | None]


def seed(cluster: Any) -> DemoSummary:
    """Create the demo streams, topics, messages and group offsets that are missing."""
    streams_created = [
        path for path, policies in _STREAMS.items() if _ensure_stream(cluster, path, policies)
    ]
    topics_created = [
        name for name, count in _TOPICS.items() if _ensure_topic(cluster, name, count)
    ]

    now = cluster.clock.now_ms()
    generators = {
        f"{SENSORS}:car-17": lambda: _sensor_readings(17, now),
        f"{SENSORS}:car-42": lambda: _sensor_readings(42, now),
        f"{CLICKS}:web": lambda: _clicks(now),
        f"{PROFILES}:users": lambda: _profile_updates(now),
        f"{LOGS}:api": lambda: _log_lines("api", 40),
        f"{LOGS}:worker": lambda: _log_lines("worker", 20),
    }
    empty = [name for name in _TOPICS if _never_written(cluster, name)]
    produced = 0
    if empty:
        producer = Producer(cluster, acks=1, linger_ms=5)
        try:
            futures = []
            for name in empty:
                for key, value, headers, timestamp_ms in generators[name]():
                    futures.append(
                        producer.send(
                            name,
                            value=value,
                            key=key,
                            headers=headers or None,
                            timestamp_ms=timestamp_ms,
                        )
                    )
            producer.flush()
            for future in futures:
                future.get(timeout=30)  # raises if a message was not written
                produced += 1
        finally:
            producer.close()

    groups = []
    if f"{CLICKS}:web" in empty and _commit_half(cluster, f"{CLICKS}:web", LAG_GROUP):
        groups.append(LAG_GROUP)

    return DemoSummary(
        streams_created=tuple(streams_created),
        topics_created=tuple(topics_created),
        messages_produced=produced,
        groups_committed=tuple(groups),
    )


# --- idempotent creation -----------------------------------------------------------------


def _ensure_stream(cluster: Any, path: str, policies: dict[str, Any]) -> bool:
    """Create the stream unless it exists (its policies are then left alone)."""
    try:
        cluster.create_stream(path, **policies)
    except errors.StreamExists:
        return False
    return True


def _ensure_topic(cluster: Any, name: str, partitions: int | None) -> bool:
    try:
        cluster.create_topic(name, partitions=partitions)
    except errors.TopicExists:
        return False
    return True


def _never_written(cluster: Any, name: str) -> bool:
    # log_end_offset never goes down, so a topic that held messages (even ones since
    # expired, compacted away or consumed) is not seeded twice.
    return all(p.log_end_offset == 0 for p in cluster.topic(name).partitions)


def _commit_half(cluster: Any, name: str, group_id: str) -> bool:
    """Commit `group_id` half-way through every partition of `name`, so it shows lag."""
    consumer = Consumer(cluster, group_id=group_id, enable_auto_commit=False)
    try:
        tps = [TopicPartition(name, p.partition) for p in cluster.topic(name).partitions]
        consumer.assign(tps)
        if any(consumer.committed(tp) is not None for tp in tps):
            return False
        ends = consumer.end_offsets(tps)
        consumer.commit({tp: OffsetAndMetadata(ends[tp] // 2, "demo") for tp in tps})
        return True
    finally:
        consumer.close()


# --- the messages ------------------------------------------------------------------------

# Sensor keys chosen so that, with Kafka's default partitioner, every one of 3 partitions
# gets some: engine-temp, battery, coolant -> 0; oil-pressure, fuel-level -> 1; speed -> 2.
_SENSORS: tuple[tuple[str, str, float, float], ...] = (
    # key, unit, base value, spread
    ("engine-temp", "C", 90.0, 4.0),
    ("oil-pressure", "bar", 3.2, 0.4),
    ("speed", "km/h", 88.0, 25.0),
    ("battery", "V", 12.6, 0.3),
    ("coolant", "C", 85.0, 3.0),
    ("fuel-level", "%", 70.0, 0.0),
)
_READINGS = 20  # per sensor, evenly spread over the last hour


def _sensor_readings(car: int, now: int) -> Iterator[_Message]:
    rng = random.Random(car)
    start = now - _HOUR_MS
    step = _HOUR_MS // _READINGS
    for i in range(_READINGS):
        timestamp = start + i * step
        for key, unit, base, spread in _SENSORS:
            if key == "fuel-level":
                value = base - i * 1.5  # a tank that empties
            else:
                value = base + rng.uniform(-spread, spread)
            yield key.encode(), f"{value:.1f}".encode(), [("unit", unit.encode())], timestamp


_USERS = ("u-alice", "u-bob", "u-carol", "u-dave", "u-erin", "u-frank", "u-grace", "u-heidi")
_PAGES = ("/", "/pricing", "/docs", "/docs/cli", "/blog", "/signup", "/cart", "/checkout")
_REFERRERS = ("direct", "search", "newsletter", "social")


def _clicks(now: int) -> Iterator[_Message]:
    rng = random.Random(7)
    count = 80
    start = now - _HOUR_MS // 2
    for i in range(count):
        user = rng.choice(_USERS)
        event = {"user": user, "page": rng.choice(_PAGES), "referrer": rng.choice(_REFERRERS)}
        yield user.encode(), _json(event), [], start + i * (_HOUR_MS // 2 // count)


# Profile updates in order: overwrites of the same key, and a tombstone (None) at the end of
# u-mallory's life; after `compact()` one message per live key remains (and the tombstone
# until delete_retention_ms has passed).
_PROFILE_UPDATES: tuple[tuple[str, dict[str, Any] | None], ...] = (
    ("u-alice", {"name": "Alice", "email": "alice@example.com", "plan": "free"}),
    ("u-bob", {"name": "Bob", "email": "bob@example.com", "plan": "free"}),
    ("u-carol", {"name": "Carol", "email": "carol@example.org", "plan": "team"}),
    ("u-mallory", {"name": "Mallory", "email": "m@example.net", "plan": "free"}),
    ("u-alice", {"name": "Alice", "email": "alice@example.com", "plan": "pro"}),
    ("u-dave", {"name": "Dave", "email": "dave@example.com", "plan": "free"}),
    ("u-bob", {"name": "Bob", "email": "bob@work.example", "plan": "free"}),
    ("u-mallory", None),
    ("u-erin", {"name": "Erin", "email": "erin@example.org", "plan": "pro"}),
    ("u-alice", {"name": "Alice A.", "email": "alice@example.com", "plan": "pro"}),
)


def _profile_updates(now: int) -> Iterator[_Message]:
    start = now - len(_PROFILE_UPDATES) * 60_000
    for i, (user, profile) in enumerate(_PROFILE_UPDATES):
        value = None if profile is None else _json(profile)
        yield user.encode(), value, [], start + i * 60_000


_ROUTES = (
    ("GET", "/v1/orders"),
    ("GET", "/v1/orders/{id}"),
    ("POST", "/v1/orders"),
    ("GET", "/v1/users/{id}"),
    ("PUT", "/v1/users/{id}"),
)
_JOBS = ("send-invoice", "resize-image", "sync-crm", "nightly-report")


def _log_lines(service: str, count: int) -> Iterator[_Message]:
    # No timestamp: the stream stamps each message with log-append time.
    rng = random.Random(service)
    hosts = (f"{service}-1", f"{service}-2")
    for i in range(count):
        host = hosts[i % 2]
        if service == "api":
            method, route = rng.choice(_ROUTES)
            path = route.replace("{id}", str(rng.randint(1000, 9999)))
            status = rng.choices((200, 201, 404, 500), weights=(80, 10, 7, 3))[0]
            line: dict[str, Any] = {
                "level": "ERROR" if status >= 500 else "WARN" if status >= 400 else "INFO",
                "msg": f"{method} {path} {status}",
                "logger": "http",
                "status": status,
                "duration_ms": rng.randint(2, 250),
            }
        else:
            job = rng.choice(_JOBS)
            failed = rng.random() < 0.1
            line = {
                "level": "ERROR" if failed else "INFO",
                "msg": f"{job} {'failed' if failed else 'done'}",
                "logger": "jobs",
                "job": job,
                "attempt": 1 + (i % 3 if failed else 0),
            }
        yield None, _json(line), [("host", host.encode())], None


def _json(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()
