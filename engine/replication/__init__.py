"""Replication: copying streams to other clusters, with offsets and origins preserved.

A link goes from a stream of this cluster (the source) to a stream of another cluster (its
target, or replica). Links live in the source's catalog (`replicas`); the target records
its upstreams (`upstreams`). A `Replicator` moves, for every link out of its cluster, every
topic with its partition count, every batch exactly as stored (key, value, headers,
timestamps, timestamp type, offsets and origin) and the groups' committed offsets.

What a link has moved is not stored anywhere: it is the target partition's log end offset,
which lives in the target volume that holds the partition's active partitionlet and moves
only in the transaction that appends there (DESIGN, "one fact, one file"). So a replicator
killed at any moment resumes where the target says it stopped, and a batch that was applied
before it died is recognised when it comes again:

- a batch is read from the source starting at the target's log end offset, and appended at
  its own base offset with `Volume.append_replicated`, which compares, inside the target
  volume's write transaction, the batch with what the target holds at that offset: the same
  offsets and origin mean "applied already" (a retry, or a second route through a cycle),
  anything else is a conflict, and nothing is overwritten;
- every batch keeps the uuid of the cluster it was first written in (its `origin`); a batch
  whose origin is the target is never sent to it;
- before copying, the last batch both sides hold (at offset min(source end, target end) - 1)
  is compared; if the two differ, the partition was written in both clusters before they
  synced: the link goes to state `conflict`, naming topic, partition and offset, and that
  partition is left alone (both sides untouched) until the user resolves it and calls
  `resume_replica` (docs/REPLICATION.md).

Since every copy holds each message at the same offset and a target that has an offset
already is never sent it again, a message moves at most once into each other cluster, so
at most (clusters - 1) times whatever the graph, cycles included.

Transport: the replicator talks to a target through `Target` (a small interface keyed by
names, not ids, so that it can be carried over HTTP). `DirectoryTarget` opens another
cluster directory in this process; `engine.replication.http.HttpTarget` talks to the
`/api/v1/replication/` endpoints of the target's `plet web` with a per-link token.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

from engine import names
from engine.errors import (
    AccessDenied,
    InvalidArgument,
    InvalidPartition,
    NotACluster,
    PartitionletError,
    StorageError,
    UnknownStream,
)
from engine.policies import shown
from engine.records import CREATE_TIME, LOG_APPEND_TIME
from engine.storage import batch as batch_codec
from engine.storage.log import PartitionLog
from engine.storage.segments import MAX_ROLL_RETRIES, Appender
from engine.storage.volume import DELETED, ReplicaBatch, ReplicaTarget

if TYPE_CHECKING:
    from engine.cluster import Cluster
    from engine.storage.catalog import PartitionletRow

log = logging.getLogger(__name__)

# Batches read from the source and applied to the target per transaction.
DEFAULT_MAX_BATCHES = 64
STATES = ("in_sync", "pending", "paused", "broken", "conflict")
_URL = re.compile(r"^https?://", re.IGNORECASE)


# --- public records ------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaInfo:
    """One link out of a stream, as `Cluster.replicas` reports it."""

    stream: str
    target: str
    target_stream: str
    target_id: str | None
    state: str  # one of STATES
    lag_messages: int
    lag_seconds: float
    error: str | None
    conflict: list[dict[str, Any]] = field(default_factory=list)
    paused: bool = False
    copied_messages: int = 0
    copied_bytes: int = 0
    throughput_messages: float = 0.0  # messages/s of the last run that moved any
    throughput_bytes: float = 0.0
    last_run_ms: int | None = None
    created_ms: int = 0


@dataclass(frozen=True)
class UpstreamInfo:
    """One link into a stream, as `Cluster.upstreams` reports it."""

    stream: str
    source: str
    source_stream: str
    source_id: str
    created_ms: int


@dataclass
class ApplyResult:
    """What `Target.apply` did with a run of batches of one partition."""

    messages: int = 0  # message copies newly applied
    bytes: int = 0
    done: int = 0  # batches applied or found present, from the start of the run
    conflict: dict[str, Any] | None = None


def normalize_target(target: str | os.PathLike[str]) -> str:
    """How a target is named in the catalog and in every call: an absolute directory path,
    or an http(s) address without a trailing slash and without a token (userinfo)."""
    return split_target(target)[0]


def split_target(target: str | os.PathLike[str]) -> tuple[str, str | None]:
    """(normalized target, token): an http(s) target may carry its link token as userinfo,
    `https://TOKEN@host:port`; the token is kept apart, never in the target's name."""
    text = os.fspath(target)
    if not isinstance(text, str) or not text:
        raise InvalidArgument(f"a replica target is a directory or an http(s) address: {target!r}")
    if _URL.match(text):
        parts = urlsplit(text)
        if not parts.hostname:
            raise InvalidArgument(f"no host in replica target {text!r}")
        token = unquote(parts.username) if parts.username else None
        if parts.password:
            raise InvalidArgument("give a replica token as https://TOKEN@host, not user:password")
        netloc = parts.netloc.rpartition("@")[2]
        plain = urlunsplit((parts.scheme.lower(), netloc, parts.path, parts.query, ""))
        return plain.rstrip("/"), token
    return str(Path(text).expanduser().resolve()), None


# --- transport -----------------------------------------------------------------------------


class Target(Protocol):
    """What a replicator needs of a target cluster; every argument is a name or plain data,
    so an HTTP implementation can carry it as JSON (payloads as bytes)."""

    cluster_id: str

    def stream_policies(self, stream: str) -> dict[str, Any] | None: ...

    def create_stream(self, stream: str, policies: dict[str, Any], creator: str) -> None: ...

    def check_admin(self, stream: str, user: str, groups: tuple[str, ...]) -> None: ...

    def ensure_topics(self, stream: str, topics: list[tuple[str, int]]) -> None: ...

    def topic_partitions(self, stream: str) -> dict[str, int]: ...

    def end_offsets(
        self, stream: str, topics: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]: ...

    def batch_at(
        self, stream: str, topic: str, partition: int, offset: int
    ) -> tuple[int, int, str] | None: ...

    def apply(
        self, stream: str, topic: str, partition: int, batches: list[ReplicaBatch]
    ) -> ApplyResult: ...

    def merge_offsets(
        self, stream: str, rows: list[tuple[str, str, int, int, str, int]]
    ) -> int: ...

    def add_upstream(
        self, stream: str, source: str, source_stream: str, source_id: str
    ) -> None: ...

    def remove_upstream(self, stream: str, source_id: str, source_stream: str) -> None: ...

    def close(self) -> None: ...


# A replica stream's creator comes from the source cluster (a user name there).
MAX_CREATOR = 256


def _check_creator(creator: Any) -> None:
    if (
        not isinstance(creator, str)
        or not 1 <= len(creator) <= MAX_CREATOR
        or not creator.isprintable()
    ):
        raise InvalidArgument(
            f"the creator of a replica stream must be a user name of 1 to {MAX_CREATOR} "
            "printable characters"
        )


def check_replica_batch(b: ReplicaBatch, where: str = "") -> None:
    """Raise `InvalidArgument` unless `b`, a batch from another cluster, is one this engine
    could have written: its payload a complete record batch whose record count, offsets and
    timestamps agree with its row (`engine.storage.batch.check`: offsets within 0..MAX_OFFSET,
    timestamps within 0..MAX_TIMESTAMP_MS, first_ts <= max_ts), a known timestamp type and
    a cluster uuid as its origin."""
    try:
        if not isinstance(b, ReplicaBatch):
            raise InvalidArgument(f"a ReplicaBatch is required, not {type(b).__name__}")
        if isinstance(b.ts_type, bool) or b.ts_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise InvalidArgument(
                f"unknown timestamp type {shown(b.ts_type)} (0 create time, 1 log-append time)"
            )
        if not _is_uuid(b.origin):
            raise InvalidArgument("its origin must be a cluster id (a uuid)")
        if (
            isinstance(b.append_ms, bool)
            or not isinstance(b.append_ms, int)
            or not 0 <= b.append_ms <= batch_codec.MAX_TIMESTAMP_MS
        ):
            raise InvalidArgument("its append_ms must be epoch milliseconds")
        batch_codec.check(
            b.payload,
            base_offset=b.base_offset,
            last_offset=b.last_offset,
            count=b.count,
            first_ts=b.first_ts,
            max_ts=b.max_ts,
        )
    except InvalidArgument as exc:
        offsets = ""
        if isinstance(b, ReplicaBatch):
            offsets = f"at offsets {shown(b.base_offset)}..{shown(b.last_offset)} "
        raise InvalidArgument(
            f"replicated batch {offsets}{where + ' ' if where else ''}refused: {exc}"
        ) from None


def _is_uuid(text: Any) -> bool:
    """A uuid as clusters write their ids: the canonical lower-case 36-character form."""
    if not isinstance(text, str) or len(text) != 36:
        return False
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def open_target(
    target: str,
    principal: Any = None,
    *,
    sync: bool = False,
    token: str | None = None,
    retries: int | None = None,
) -> Target:
    """The transport for a normalized target: a directory, or an http(s) address served by
    the target's `plet web` (engine.replication.http), authenticated with `token` (each
    request retried up to `retries` times, default DEFAULT_RETRIES)."""
    if _URL.match(target):
        from engine.replication.http import HttpTarget

        if not token:
            raise InvalidArgument(
                f"replication over HTTP to {target} needs a token: create one on the target "
                "(plet replica token STREAM) and give the target as http(s)://TOKEN@host:port"
            )
        if retries is None:
            return HttpTarget(target, token)
        return HttpTarget(target, token, retries=retries)
    return DirectoryTarget(target, principal, sync=sync)


def _open_link_target(
    cluster: Cluster, link: _Link, *, sync: bool = False, retries: int | None = None
) -> Target:
    """The transport of a stored link, with its token when it has one."""
    token = cluster._catalog.replica_token(link.stream_id, link.target)
    return open_target(link.target, cluster.principal, sync=sync, token=token, retries=retries)


class DirectoryTarget:
    """A target cluster directory opened in this process."""

    def __init__(self, path: str, principal: Any = None, *, sync: bool = False) -> None:
        from engine.cluster import CATALOG_FILE, Cluster

        if not (Path(path) / CATALOG_FILE).exists():
            raise NotACluster(f"no cluster at {path} (no {CATALOG_FILE}); create it first")
        self.cluster = Cluster.open(path, principal=principal)
        self.cluster_id = self.cluster.id
        self.sync = sync
        self._appender = Appender(self.cluster)

    def close(self) -> None:
        self.cluster.close()

    def _stream_row(self, stream: str):
        return self.cluster._catalog.stream(stream)

    def stream_policies(self, stream: str) -> dict[str, Any] | None:
        try:
            return dict(self._stream_row(stream).policies)
        except UnknownStream:
            return None

    def create_stream(self, stream: str, policies: dict[str, Any], creator: str) -> None:
        """Create the replica stream with the source's policies; the catalog checks the
        path and every policy (a bad one is refused, and nothing is created)."""
        from engine.errors import StreamExists

        if not isinstance(policies, dict):
            raise InvalidArgument("the policies of a replica stream must be a mapping")
        _check_creator(creator)
        try:
            self.cluster._catalog.create_stream(stream, dict(policies), creator)
        except StreamExists:
            pass

    def check_admin(self, stream: str, user: str, groups: tuple[str, ...]) -> None:
        from engine.auth.principal import Principal

        self.cluster._authorize(
            self._stream_row(stream),
            "admin_perm",
            Principal(user, groups),
            what="replicate into",
        )

    def ensure_topics(self, stream: str, topics: list[tuple[str, int]]) -> None:
        catalog = self.cluster._catalog
        row = self._stream_row(stream)
        existing = {t.name: t for t in catalog.topics(row.id, None, None, 0)}
        missing = [(n, p) for n, p in topics if n not in existing]
        if missing:
            catalog.create_topics(row.id, missing, exist_ok=True)
        for name, count in topics:
            t = existing.get(name)
            if t is not None and t.partitions < count:
                catalog.set_partitions(t.id, count)

    def topic_partitions(self, stream: str) -> dict[str, int]:
        catalog = self.cluster._catalog
        return {
            t.name: t.partitions for t in catalog.topics(self._stream_row(stream).id, None, None, 0)
        }

    def end_offsets(self, stream: str, topics: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Log end offsets of the first `count` partitions of each topic; a topic is asked
        once, however often it is named, and only for partitions it has (the replicator
        calls ensure_topics first), so the work is bounded by what exists here."""
        catalog = self.cluster._catalog
        result = {}
        for name, count in dict(topics).items():
            row = catalog.topic(stream, name)
            if count > row.partitions:
                raise InvalidPartition(
                    f"topic {row.full_name} has {row.partitions} partitions, not {count}"
                )
            for p in range(count):
                result[(name, p)] = PartitionLog(
                    self.cluster, row.id, p, row.full_name
                ).end_offset()
        return result

    def batch_at(
        self, stream: str, topic: str, partition: int, offset: int
    ) -> tuple[int, int, str] | None:
        row = self.cluster._catalog.topic(stream, topic)
        if not 0 <= partition < row.partitions:
            raise InvalidPartition(f"topic {row.full_name} has no partition {partition}")
        return _batch_at(self.cluster, self.cluster._catalog.chain(row.id, partition), offset)

    def apply(
        self, stream: str, topic: str, partition: int, batches: list[ReplicaBatch]
    ) -> ApplyResult:
        cluster = self.cluster
        row = cluster._catalog.topic(stream, topic)
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise InvalidPartition(f"a partition is an int, not {type(partition).__name__}")
        if not 0 <= partition < row.partitions:
            last = row.partitions - 1
            raise InvalidPartition(
                f"topic {row.full_name} has partitions 0 to {last}, not {partition}"
            )
        # Every batch is checked before the first is written: a bad one refuses the whole
        # call and changes nothing (whoever reads the replica trusts its bytes from here).
        for b in batches:
            check_replica_batch(b, f"for topic {row.full_name} partition {partition}")
        key = (row.id, partition)
        result = ApplyResult()
        pending = list(batches)
        for _ in range(MAX_ROLL_RETRIES * 4):
            if not pending:
                return result
            if key not in self._appender._active:
                self._appender._load_active({key}, set())
            pl = self._appender._active.get(key)
            if pl is None:
                raise StorageError(f"topic {row.full_name} partition {partition} disappeared")
            got = cluster._volume(pl.volume_id).append_replicated(
                ReplicaTarget(pl.id, row.stream_id, row.id, partition, pl.base_offset),
                pending,
                sync=self.sync,
                roll_bytes=cluster.partitionlet_bytes,
                roll_ms=cluster.partitionlet_ms,
            )
            result.messages += got.messages
            result.bytes += got.bytes
            ok = 0
            for status in got.statuses:
                if status not in ("applied", "present"):
                    break
                ok += 1
            result.done += ok
            stopped = got.statuses[ok] if ok < len(got.statuses) else None
            if got.sealed_at is not None:
                self._appender._roll({key: (pl.id, got.sealed_at, pl.volume_id)})
            elif stopped == "sealed":
                self._appender._active.pop(key, None)  # stale: read the chain again
            pending = pending[ok:]
            if stopped == "conflict":
                here = got.conflict_with
                result.conflict = _conflict(row.full_name, partition, pending[0], here)
                return result
            if stopped == "behind":
                # The offset lies in an earlier partitionlet of the chain: compare there.
                b = pending[0]
                here = _batch_at(cluster, cluster._catalog.chain(row.id, partition), b.base_offset)
                if here is None or here == (b.base_offset, b.last_offset, b.origin):
                    result.done += 1
                    pending = pending[1:]
                    continue
                result.conflict = _conflict(row.full_name, partition, b, here)
                return result
        if pending:
            raise StorageError(
                f"topic {row.full_name} partition {partition} kept rolling under the replicator"
            )
        return result

    def merge_offsets(self, stream: str, rows: list[tuple[str, str, int, int, str, int]]) -> int:
        catalog = self.cluster._catalog
        row = self._stream_row(stream)
        ids = {t.name: t.id for t in catalog.topics(row.id, None, None, 0)}
        mapped = [
            (group, ids[topic], p, offset, meta, ms)
            for group, topic, p, offset, meta, ms in rows
            if topic in ids
        ]
        if not mapped:
            return 0
        return catalog.merge_offsets(mapped, time.time_ns() // 1_000_000)

    def add_upstream(self, stream: str, source: str, source_stream: str, source_id: str) -> None:
        catalog = self.cluster._catalog
        catalog.add_upstream(catalog.stream(stream).id, source, source_stream, source_id)

    def remove_upstream(self, stream: str, source_id: str, source_stream: str) -> None:
        catalog = self.cluster._catalog
        try:
            stream_id = catalog.stream(stream).id
        except UnknownStream:
            return
        catalog.remove_upstream(stream_id, source_id, source_stream)


def _conflict(
    topic: str, partition: int, batch: ReplicaBatch, here: tuple[int, int, str] | None
) -> dict[str, Any]:
    offset = batch.base_offset if here is None else max(batch.base_offset, here[0])
    return {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "source_origin": batch.origin,
        "source_offsets": [batch.base_offset, batch.last_offset],
        "target_origin": None if here is None else here[2],
        "target_offsets": None if here is None else [here[0], here[1]],
    }


def _batch_at(
    cluster: Cluster, chain: list[PartitionletRow], offset: int
) -> tuple[int, int, str] | None:
    """(base, last, origin) of the batch holding `offset` in a partition's chain."""
    for pl in chain:
        if offset < pl.base_offset or (pl.end_offset is not None and offset >= pl.end_offset):
            continue
        found = cluster._volume(pl.volume_id).batch_at(pl.id, offset)
        if found is not None:
            return found
    return None


# --- the source side -----------------------------------------------------------------------


def _source_batches(
    cluster: Cluster, topic_id: int, partition: int, position: int, limit: int
) -> list[ReplicaBatch]:
    """Up to `limit` stored batches holding offsets >= `position`, from the first
    partitionlet of the chain that has any. A sealed partitionlet found gone from its volume
    (moved by rebalance, dropped by retention) makes the chain be read again, so nothing is
    skipped that still exists."""
    for _ in range(4):
        chain = cluster._catalog.chain(topic_id, partition)
        retry = False
        for pl in chain:
            if pl.end_offset is not None and pl.end_offset <= position:
                continue
            vol = cluster._volume(pl.volume_id)
            got = vol.replica_batches(pl.id, position, limit)
            if got:
                return got
            if pl.end_offset is None:
                return []
            state = vol.state(pl.id)
            if state is None or state.state == DELETED:
                retry = True
                break
            # emptied by compaction: go on with the next partitionlet
        if not retry:
            return []
    return []


def _source_end(cluster: Cluster, topic_id: int, partition: int, name: str) -> int:
    return PartitionLog(cluster, topic_id, partition, name).end_offset()


# --- links ---------------------------------------------------------------------------------


@dataclass
class _Link:
    stream_id: int
    stream: str
    target: str
    target_stream: str
    target_id: str | None
    paused: bool
    error: str | None
    conflict: list[dict[str, Any]]
    created_ms: int
    last_run_ms: int | None
    copied_messages: int
    copied_bytes: int
    rate_messages: float
    rate_bytes: float

    @classmethod
    def from_row(cls, row: tuple) -> _Link:
        conflict = json.loads(row[7]) if row[7] else []
        return cls(
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            bool(row[5]),
            row[6],
            conflict,
            row[8],
            row[9],
            row[10],
            row[11],
            row[12],
            row[13],
        )


def _links(cluster: Cluster, stream: str | None = None) -> list[_Link]:
    stream_id = None if stream is None else cluster._catalog.stream(stream).id
    return [_Link.from_row(r) for r in cluster._catalog.replica_rows(stream_id)]


def _find_link(cluster: Cluster, stream: str, target: str) -> _Link:
    key = normalize_target(target)
    for link in _links(cluster, stream):
        if link.target == key:
            return link
    # A directory is named as given, not as resolved: the answer must not tell whoever may
    # pause a link where a path leads on the server (a symlink, `~`). An address is named
    # without its token.
    shown = key if _URL.match(key) else os.fspath(target)
    raise InvalidArgument(f"stream {stream} has no replica at {shown}")


ADD_LINK_DENIED = (
    "only a cluster administrator may add a replica link: a link makes this cluster's "
    "server open another cluster directory or connect to another host. Ask an "
    "administrator to add it"
)


def check_may_add_link(cluster: Cluster) -> None:
    """`AccessDenied` unless the cluster's principal is a cluster administrator (DESIGN's
    security model: what reaches outside the cluster is an administrator's act)."""
    if not cluster.is_administrator:
        raise AccessDenied(f"{ADD_LINK_DENIED} (user {cluster.principal.user!r} is not one).")


def add_replica(
    cluster: Cluster,
    stream: str,
    target: str | os.PathLike[str],
    target_stream: str | None = None,
    paused: bool = False,
) -> ReplicaInfo:
    names.validate_stream_path(stream)
    target_stream = stream if target_stream is None else target_stream
    names.validate_stream_path(target_stream)
    row = cluster._catalog.stream(stream)
    cluster._authorize(row, "copy_perm")
    # Before the target is even parsed: nothing is opened, resolved or sent, so the refusal
    # is the same whatever the target is, and says nothing about it.
    check_may_add_link(cluster)
    key, token = split_target(target)
    if token is None and _URL.match(key):
        # A link that exists already keeps its token (add_replica called again).
        token = cluster._catalog.replica_token(row.id, key)
    if not _URL.match(key) and Path(key) == cluster.path.resolve():
        raise InvalidArgument(
            f"a replica lives in another cluster: {key} is this cluster ({cluster.name})"
        )
    tgt = open_target(key, cluster.principal, token=token)
    try:
        if tgt.cluster_id == cluster.id:
            raise InvalidArgument(f"{key} is this cluster ({cluster.name}), not another one")
        if tgt.stream_policies(target_stream) is None:
            # MapR's autosetup: the replica gets the source's policies.
            tgt.create_stream(target_stream, row.policies, row.creator)
        else:
            tgt.check_admin(target_stream, cluster.principal.user, tuple(cluster.principal.groups))
        if not cluster._catalog.add_replica(row.id, key, target_stream, paused):
            existing = _find_link(cluster, stream, key)
            if existing.target_stream != target_stream:
                raise InvalidArgument(
                    f"stream {stream} is replicated to {existing.target_stream} at {key} "
                    "already; remove that link first"
                )
        cluster._catalog.update_replica(row.id, key, target_id=tgt.cluster_id)
        if token is not None:
            cluster._catalog.set_replica_token(row.id, key, token)
        tgt.add_upstream(target_stream, str(cluster.path.resolve()), stream, cluster.id)
    finally:
        tgt.close()
    if not paused:
        with Replicator(cluster) as replicator:
            replicator.run_link(_find_link(cluster, stream, key))
    return _find_info(cluster, stream, key)


def _find_info(cluster: Cluster, stream: str, key: str) -> ReplicaInfo:
    for info in replicas(cluster, stream):
        if info.target == key:
            return info
    raise InvalidArgument(f"stream {stream} has no replica at {key}")


def replicas(cluster: Cluster, stream: str) -> list[ReplicaInfo]:
    names.validate_stream_path(stream)
    return [_status(cluster, link) for link in _links(cluster, stream)]


def upstreams(cluster: Cluster, stream: str) -> list[UpstreamInfo]:
    names.validate_stream_path(stream)
    row = cluster._catalog.stream(stream)
    return [UpstreamInfo(stream, *r) for r in cluster._catalog.upstream_rows(row.id)]


def pause_replica(cluster: Cluster, stream: str, target: str | os.PathLike[str]) -> None:
    link = _find_link(cluster, stream, target)
    cluster._authorize(cluster._catalog.stream_by_id(link.stream_id), "admin_perm")
    cluster._catalog.update_replica(link.stream_id, link.target, paused=1)


def resume_replica(cluster: Cluster, stream: str, target: str | os.PathLike[str]) -> None:
    """Resume a paused link; also clears a conflict (after the user resolved it) and the
    last error, so that the next run checks again."""
    link = _find_link(cluster, stream, target)
    row = cluster._catalog.stream_by_id(link.stream_id)
    cluster._authorize(row, "admin_perm")
    cluster._authorize(row, "copy_perm")
    cluster._catalog.update_replica(
        link.stream_id, link.target, paused=0, conflict=None, error=None
    )


def remove_replica(cluster: Cluster, stream: str, target: str | os.PathLike[str]) -> None:
    """Remove the link (the replica keeps what it received); the target forgets its
    upstream when it can be opened."""
    link = _find_link(cluster, stream, target)
    cluster._authorize(cluster._catalog.stream_by_id(link.stream_id), "admin_perm")
    token = cluster._catalog.replica_token(link.stream_id, link.target)
    cluster._catalog.remove_replica(link.stream_id, link.target)
    cluster._catalog.set_replica_token(link.stream_id, link.target, None)
    try:
        tgt = open_target(link.target, cluster.principal, token=token)
    except PartitionletError:
        return
    try:
        tgt.remove_upstream(link.target_stream, cluster.id, link.stream)
    finally:
        tgt.close()


def links(cluster: Cluster, *, measure: bool = True) -> list[ReplicaInfo]:
    """Every link out of `cluster`, of all its streams, in one catalog read (`replicas`
    gives one stream's), ordered by stream and target.

    With `measure`, each state and lag is measured as `replicas` measures it, opening each
    directory target once for all its links. Without, nothing is opened (no file, no
    network): the state is what the catalog recorded, `paused`, `conflict`, `broken` (the
    last run's error), else `in_sync` as of the last run (`pending` before the first), with
    no lag: a cheap look at another cluster's links from afar.
    """
    cluster._check_open()
    rows = _links(cluster)
    if not measure:
        return [_recorded(link) for link in rows]
    opened: dict[str, Target | None] = {}
    try:
        result = []
        for link in rows:
            tgt = None
            if not _URL.match(link.target):  # an http(s) link has its own token: not shared
                if link.target not in opened:
                    try:
                        opened[link.target] = _open_link_target(cluster, link)
                    except PartitionletError:
                        opened[link.target] = None  # _status opens it again and says why
                tgt = opened[link.target]
            result.append(_status(cluster, link, tgt))
        return result
    finally:
        for tgt in opened.values():
            if tgt is not None:
                tgt.close()


def upstream_links(cluster: Cluster) -> list[UpstreamInfo]:
    """Every link into `cluster`, of all its streams (`upstreams` gives one stream's)."""
    cluster._check_open()
    rows = cluster._catalog._query(
        "SELECT s.path, u.source, u.source_stream, u.source_id, u.created_ms "
        "FROM upstreams u JOIN streams s ON s.id = u.stream_id "
        "ORDER BY s.path, u.source, u.source_stream"
    )
    return [UpstreamInfo(*r) for r in rows]


def _recorded(link: _Link) -> ReplicaInfo:
    """The link as its catalog row tells it, nothing measured."""
    if link.paused:
        state = "paused"
    elif link.conflict:
        state = "conflict"
    elif link.error:
        state = "broken"
    elif link.last_run_ms is None:
        state = "pending"
    else:
        state = "in_sync"
    return _info(link, state, 0, 0.0, link.error)


def _status(cluster: Cluster, link: _Link, tgt: Target | None = None) -> ReplicaInfo:
    """The link's state, with its lag measured now (source and target end offsets), through
    `tgt` when the caller has the target open already."""
    lag_messages = 0
    lag_seconds = 0.0
    error = link.error
    reachable = True
    own = tgt is None
    try:
        # A status is a look, not a copy: one retry, so a console does not wait long on a
        # target that is down.
        if own:
            tgt = _open_link_target(cluster, link, retries=1)
    except PartitionletError as exc:
        reachable = False
        error = error or f"{type(exc).__name__}: {exc}"
    else:
        try:
            lag_messages, lag_seconds = _lag(cluster, link, tgt)
        except PartitionletError as exc:
            error = error or f"{type(exc).__name__}: {exc}"
            reachable = False
        finally:
            if own:
                tgt.close()
    if link.paused:
        state = "paused"
    elif link.conflict:
        state = "conflict"
    elif error or not reachable:
        state = "broken"
    elif lag_messages:
        state = "pending"
    else:
        state = "in_sync"
    return _info(link, state, lag_messages, lag_seconds, error)


def _info(
    link: _Link, state: str, lag_messages: int, lag_seconds: float, error: str | None
) -> ReplicaInfo:
    return ReplicaInfo(
        link.stream,
        link.target,
        link.target_stream,
        link.target_id,
        state,
        lag_messages,
        lag_seconds,
        error,
        link.conflict,
        link.paused,
        link.copied_messages,
        link.copied_bytes,
        link.rate_messages,
        link.rate_bytes,
        link.last_run_ms,
        link.created_ms,
    )


def _lag(cluster: Cluster, link: _Link, tgt: Target) -> tuple[int, float]:
    """(messages the target lacks, age in seconds of the oldest of them at the source)."""
    catalog = cluster._catalog
    topics = catalog.topics(link.stream_id, None, None, 0)
    if tgt.stream_policies(link.target_stream) is None:
        total = sum(
            _source_end(cluster, t.id, p, t.full_name) for t in topics for p in range(t.partitions)
        )
        return total, 0.0
    have = tgt.topic_partitions(link.target_stream)
    wanted = [(t.name, min(t.partitions, have[t.name])) for t in topics if t.name in have]
    ends = tgt.end_offsets(link.target_stream, wanted) if wanted else {}
    now = time.time_ns() // 1_000_000
    lag = 0
    oldest: int | None = None
    for t in topics:
        for p in range(t.partitions):
            target_end = ends.get((t.name, p), 0)
            source_end = _source_end(cluster, t.id, p, t.full_name)
            if source_end <= target_end:
                continue
            lag += source_end - target_end
            batches = _source_batches(cluster, t.id, p, target_end, 1)
            if batches:
                ms = batches[0].append_ms
                oldest = ms if oldest is None else min(oldest, ms)
    return lag, (max(0, now - oldest) / 1000 if oldest is not None else 0.0)


# --- the replicator ------------------------------------------------------------------------


class Replicator:
    """Moves the messages and committed offsets of every link out of `cluster`.

    `run_once()` moves what is pending now and returns how many message copies it newly
    applied; `run_forever(interval_s)` repeats it until `stop()`. Several replicators (in
    several processes) may run on one cluster at once: every batch is checked against the
    target inside the target's append transaction.
    """

    def __init__(
        self, cluster: Cluster, *, max_batches: int = DEFAULT_MAX_BATCHES, sync: bool = False
    ) -> None:
        if isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 1:
            raise InvalidArgument(f"max_batches must be a positive integer, got {max_batches!r}")
        self.cluster = cluster
        self.max_batches = max_batches
        self.sync = sync
        self.runs = 0
        self.last_error: BaseException | None = None
        self._stop = threading.Event()
        self._targets: dict[str, Target] = {}
        # (target, target stream, topic id, partition) -> (source end, target end) when it
        # was last found in step: a partition still at both ends needs no look this time.
        self._settled: dict[tuple[str, str, int, int], tuple[int, int]] = {}
        self._sent_offsets: dict[tuple[str, str], set[tuple]] = {}

    def __enter__(self) -> Replicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for tgt in self._targets.values():
            try:
                tgt.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        self._targets.clear()

    def stop(self) -> None:
        self._stop.set()

    def run_forever(self, interval_s: float = 0.5) -> None:
        """Run until `stop()`; an idle pass waits `interval_s` before the next."""
        self._stop.clear()
        try:
            while not self._stop.is_set():
                try:
                    moved = self.run_once()
                except Exception as exc:  # noqa: BLE001 - keep going, report it
                    self.last_error = exc
                    log.exception("replication pass failed")
                    moved = 0
                if not moved:
                    self._stop.wait(interval_s)
        finally:
            self.close()

    def run_once(self) -> int:
        """Move what is pending on every link that is not paused; returns message copies
        newly applied."""
        self.cluster._check_open()
        total = 0
        for link in _links(self.cluster):
            if link.paused:
                continue
            total += self.run_link(link)
        self.runs += 1
        return total

    @staticmethod
    def _target_key(link: _Link) -> str:
        # An http(s) target is reached with one token per link (a token is good for one
        # stream), so each link to it has its own client.
        if _URL.match(link.target):
            return f"{link.target}\n{link.target_stream}"
        return link.target

    def _target(self, link: _Link) -> Target:
        key = self._target_key(link)
        tgt = self._targets.get(key)
        if tgt is None:
            tgt = _open_link_target(self.cluster, link, sync=self.sync)
            self._targets[key] = tgt
        return tgt

    def run_link(self, link: _Link) -> int:
        """One pass over one link; records its outcome on the link."""
        catalog = self.cluster._catalog
        started = time.monotonic()
        stats = [0, 0]
        conflicts = list(link.conflict)
        try:
            tgt = self._target(link)
            self._pass(link, tgt, stats, conflicts)
        except PartitionletError as exc:
            bad = self._targets.pop(self._target_key(link), None)
            # Whatever this replicator believed about the target is to be read again.
            self._settled = {k: v for k, v in self._settled.items() if k[0] != link.target}
            self._sent_offsets = {
                k: v for k, v in self._sent_offsets.items() if k[0] != link.target
            }
            if bad is not None:
                try:
                    bad.close()
                except Exception:  # noqa: BLE001
                    pass
            self.last_error = exc
            catalog.update_replica(
                link.stream_id,
                link.target,
                error=f"{type(exc).__name__}: {exc}",
                last_run_ms=time.time_ns() // 1_000_000,
            )
            if stats[0]:
                catalog.count_replicated(link.stream_id, link.target, stats[0], stats[1])
            return stats[0]
        elapsed = max(time.monotonic() - started, 1e-6)
        fields: dict[str, Any] = {
            "error": None,
            "last_run_ms": time.time_ns() // 1_000_000,
            "target_id": tgt.cluster_id,
            "conflict": json.dumps(conflicts) if conflicts else None,
        }
        if stats[0]:
            fields["rate_messages"] = stats[0] / elapsed
            fields["rate_bytes"] = stats[1] / elapsed
            catalog.count_replicated(link.stream_id, link.target, stats[0], stats[1])
        catalog.update_replica(link.stream_id, link.target, **fields)
        return stats[0]

    def _pass(
        self, link: _Link, tgt: Target, stats: list[int], conflicts: list[dict[str, Any]]
    ) -> None:
        cluster = self.cluster
        catalog = cluster._catalog
        row = catalog.stream_by_id(link.stream_id)
        cluster._authorize(row, "copy_perm")
        if tgt.cluster_id == cluster.id:
            raise InvalidArgument(f"{link.target} is this cluster, not a replica")
        if tgt.stream_policies(link.target_stream) is None:
            tgt.create_stream(link.target_stream, row.policies, row.creator)
            tgt.add_upstream(link.target_stream, str(cluster.path.resolve()), row.path, cluster.id)
        topics = catalog.topics(row.id, None, None, 0)
        wanted = [(t.name, t.partitions) for t in topics]
        if not wanted:
            return
        tgt.ensure_topics(link.target_stream, wanted)
        ends = tgt.end_offsets(link.target_stream, wanted)
        stuck = {(c["topic"], c["partition"]) for c in conflicts}
        for t in topics:
            for p in range(t.partitions):
                if (t.full_name, p) in stuck:
                    continue
                found = self._partition(link, tgt, t, p, ends.get((t.name, p), 0), stats)
                if found is not None:
                    conflicts.append(found)
                    stuck.add((t.full_name, p))
        self._offsets(link, tgt, topics)

    def _partition(
        self, link: _Link, tgt: Target, topic: Any, partition: int, target_end: int, stats: list
    ) -> dict[str, Any] | None:
        """Copy one partition from the target's end; a conflict found, or None."""
        cluster = self.cluster
        source_end = _source_end(cluster, topic.id, partition, topic.full_name)
        settled_key = (link.target, link.target_stream, topic.id, partition)
        if self._settled.get(settled_key) == (source_end, target_end):
            return None  # nothing was written on either side since the last look
        tip = min(source_end, target_end) - 1
        if tip >= 0:
            # The last offset both hold must be the same message on both sides.
            mine = _batch_at(cluster, cluster._catalog.chain(topic.id, partition), tip)
            theirs = tgt.batch_at(link.target_stream, topic.name, partition, tip)
            if mine is not None and theirs is not None and mine != theirs:
                return {
                    "topic": topic.full_name,
                    "partition": partition,
                    "offset": max(mine[0], theirs[0]),
                    "source_origin": mine[2],
                    "source_offsets": [mine[0], mine[1]],
                    "target_origin": theirs[2],
                    "target_offsets": [theirs[0], theirs[1]],
                }
        position = target_end
        while position < source_end and not self._stop_requested():
            batches = _source_batches(cluster, topic.id, partition, position, self.max_batches)
            if not batches:
                break
            send = [b for b in batches if b.origin != tgt.cluster_id]
            position = batches[-1].last_offset + 1
            if not send:
                continue  # the target's own messages: never sent back to it
            result = tgt.apply(link.target_stream, topic.name, partition, send)
            stats[0] += result.messages
            stats[1] += result.bytes
            if result.conflict is not None:
                result.conflict["topic"] = topic.full_name
                return result.conflict
            if result.done < len(send):
                break
        if position >= source_end:
            self._settled[settled_key] = (source_end, max(target_end, source_end))
        return None

    def _stop_requested(self) -> bool:
        return self._stop.is_set()

    def _offsets(self, link: _Link, tgt: Target, topics: list[Any]) -> None:
        by_id = {t.id: t.name for t in topics}
        rows = [
            (group, by_id[topic_id], p, offset, meta, ms)
            for group, topic_id, p, offset, meta, ms in self.cluster._catalog.all_group_offsets(
                list(by_id)
            )
        ]
        # Only what changed since this replicator last sent it (the target keeps the later
        # commit of each partition anyway, so sending again would be harmless, just work).
        sent = self._sent_offsets.setdefault((link.target, link.target_stream), set())
        fresh = [r for r in rows if r not in sent]
        if fresh:
            tgt.merge_offsets(link.target_stream, fresh)
            sent.clear()
            sent.update(rows)


__all__ = [
    "ADD_LINK_DENIED",
    "STATES",
    "ApplyResult",
    "DirectoryTarget",
    "ReplicaInfo",
    "Replicator",
    "Target",
    "UpstreamInfo",
    "check_may_add_link",
    "check_replica_batch",
    "normalize_target",
    "open_target",
    "links",
    "split_target",
    "upstream_links",
]
