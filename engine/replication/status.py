"""A link as the catalog stores it, its state, and what `replicas`/`upstreams` report:
`LinkState`, `ReplicaInfo`, `UpstreamInfo`, the lag measured against the target, and the
listings of one stream's links or of a whole cluster's."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from engine import names
from engine.errors import InvalidArgument, PartitionletError
from engine.ops import metrics
from engine.replication.protocol import Target
from engine.replication.reading import source_batches, source_end
from engine.replication.targets import is_url, normalize_target, open_target

if TYPE_CHECKING:
    from engine.cluster import Cluster


class LinkState(StrEnum):
    """The state of a link out of a stream (DESIGN, "Replication"). A `StrEnum`: each
    member is its string (`LinkState.IN_SYNC == "in_sync"`), so JSON, templates and
    comparisons with the old strings see the same values."""

    IN_SYNC = "in_sync"
    PENDING = "pending"  # with lag in messages and seconds
    PAUSED = "paused"
    BROKEN = "broken"  # with its reason (`error`)
    CONFLICT = "conflict"  # a partition written in both clusters (`conflict`)


STATES = tuple(LinkState)


@dataclass(frozen=True)
class ReplicaInfo:
    """One link out of a stream, as `Cluster.replicas` reports it."""

    stream: str
    target: str
    target_stream: str
    target_id: str | None
    state: LinkState
    lag_messages: int
    lag_seconds: float
    error: str | None
    conflict: list[dict[str, Any]] = field(default_factory=list)
    paused: bool = False
    copied_messages: int = 0
    copied_bytes: int = 0
    # messages (bytes) copied per second over the last `throughput_window_s` seconds
    throughput_messages: float = 0.0
    throughput_bytes: float = 0.0
    last_run_ms: int | None = None
    created_ms: int = 0
    # the rate of the last run that moved any: a burst, not the link's pace
    last_run_rate_messages: float = 0.0
    last_run_rate_bytes: float = 0.0
    throughput_window_s: int = metrics.THROUGHPUT_WINDOW_S


@dataclass(frozen=True)
class UpstreamInfo:
    """One link into a stream, as `Cluster.upstreams` reports it."""

    stream: str
    source: str
    source_stream: str
    source_id: str
    created_ms: int


@dataclass
class Link:
    """A link out of a stream as its catalog row holds it."""

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
    steady: tuple[float, float] = (0.0, 0.0)  # (messages/s, bytes/s) over a window

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Link:
        """From a row of `Catalog.replica_rows`."""
        (
            stream_id,
            stream,
            target,
            target_stream,
            target_id,
            paused,
            error,
            conflict,
            created_ms,
            last_run_ms,
            copied_messages,
            copied_bytes,
            rate_messages,
            rate_bytes,
        ) = row
        return cls(
            stream_id,
            stream,
            target,
            target_stream,
            target_id,
            bool(paused),
            error,
            json.loads(conflict) if conflict else [],
            created_ms,
            last_run_ms,
            copied_messages,
            copied_bytes,
            rate_messages,
            rate_bytes,
        )


def load_links(cluster: Cluster, stream: str | None = None) -> list[Link]:
    """The links out of one stream, or of every stream, ordered by stream and target."""
    catalog = cluster.catalog
    stream_id = None if stream is None else catalog.stream(stream).id
    links = [Link.from_row(r) for r in catalog.replica_rows(stream_id)]
    if links:
        rates = metrics.steady_rates(cluster)
        for link in links:
            link.steady = rates.get(metrics.replica_name(link.stream, link.target), (0.0, 0.0))
    return links


def find_link(cluster: Cluster, stream: str, target: str | os.PathLike[str]) -> Link:
    key = normalize_target(target)
    for link in load_links(cluster, stream):
        if link.target == key:
            return link
    # A directory is named as given, not as resolved: the answer must not tell whoever may
    # pause a link where a path leads on the server (a symlink, `~`). An address is named
    # without its token.
    shown = key if is_url(key) else os.fspath(target)
    raise InvalidArgument(f"stream {stream} has no replica at {shown}")


def open_link_target(
    cluster: Cluster, link: Link, *, sync: bool = False, retries: int | None = None
) -> Target:
    """The transport of a stored link, with its token when it has one."""
    token = cluster.catalog.replica_token(link.stream_id, link.target)
    return open_target(link.target, cluster.principal, sync=sync, token=token, retries=retries)


# --- state and lag ---------------------------------------------------------------------------


def _state(link: Link, *, failed: bool, lag_messages: int, measured: bool) -> LinkState:
    if link.paused:
        return LinkState.PAUSED
    if link.conflict:
        return LinkState.CONFLICT
    if failed:
        return LinkState.BROKEN
    if measured:
        return LinkState.PENDING if lag_messages else LinkState.IN_SYNC
    # Not measured: pending until a first run went through.
    return LinkState.PENDING if link.last_run_ms is None else LinkState.IN_SYNC


def recorded(link: Link) -> ReplicaInfo:
    """The link as its catalog row tells it, nothing measured."""
    state = _state(link, failed=bool(link.error), lag_messages=0, measured=False)
    return _info(link, state, 0, 0.0, link.error)


def measured(cluster: Cluster, link: Link, tgt: Target | None = None) -> ReplicaInfo:
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
        if tgt is None:
            tgt = open_link_target(cluster, link, retries=1)
    except PartitionletError as exc:
        reachable = False
        error = error or f"{type(exc).__name__}: {exc}"
    else:
        try:
            lag_messages, lag_seconds = lag(cluster, link, tgt)
        except PartitionletError as exc:
            error = error or f"{type(exc).__name__}: {exc}"
            reachable = False
        finally:
            if own:
                tgt.close()
    state = _state(
        link, failed=bool(error) or not reachable, lag_messages=lag_messages, measured=True
    )
    return _info(link, state, lag_messages, lag_seconds, error)


def _info(
    link: Link, state: LinkState, lag_messages: int, lag_seconds: float, error: str | None
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
        link.steady[0],
        link.steady[1],
        link.last_run_ms,
        link.created_ms,
        link.rate_messages,
        link.rate_bytes,
    )


def lag(cluster: Cluster, link: Link, tgt: Target) -> tuple[int, float]:
    """(messages the target lacks, age in seconds of the oldest of them at the source)."""
    topics = cluster.catalog.topics(link.stream_id, None, None, 0)
    if tgt.stream_policies(link.target_stream) is None:
        total = sum(
            source_end(cluster, t.id, p, t.full_name) for t in topics for p in range(t.partitions)
        )
        return total, 0.0
    have = tgt.topic_partitions(link.target_stream)
    wanted = [(t.name, min(t.partitions, have[t.name])) for t in topics if t.name in have]
    ends = tgt.end_offsets(link.target_stream, wanted) if wanted else {}
    now = cluster.clock.now_ms()
    behind = 0
    oldest: int | None = None
    for t in topics:
        for p in range(t.partitions):
            target_end = ends.get((t.name, p), 0)
            end = source_end(cluster, t.id, p, t.full_name)
            if end <= target_end:
                continue
            behind += end - target_end
            batches = source_batches(cluster, t.id, p, target_end, 1, end)
            pending = [b for b in batches if b.marker is None]  # a marker keeps no time
            if pending:
                ms = pending[0].append_ms
                oldest = ms if oldest is None else min(oldest, ms)
    return behind, (max(0, now - oldest) / 1000 if oldest is not None else 0.0)


# --- listings --------------------------------------------------------------------------------


def replicas(cluster: Cluster, stream: str) -> list[ReplicaInfo]:
    """The links out of `stream`, each with its state and lag measured now."""
    names.validate_stream_path(stream)
    return [measured(cluster, link) for link in load_links(cluster, stream)]


def upstreams(cluster: Cluster, stream: str) -> list[UpstreamInfo]:
    """The links into `stream`, as their sources registered them."""
    names.validate_stream_path(stream)
    catalog = cluster.catalog
    row = catalog.stream(stream)
    return [UpstreamInfo(stream, *r) for r in catalog.upstream_rows(row.id)]


def links(cluster: Cluster, *, measure: bool = True) -> list[ReplicaInfo]:
    """Every link out of `cluster`, of all its streams, in one catalog read (`replicas`
    gives one stream's), ordered by stream and target.

    With `measure`, each state and lag is measured as `replicas` measures it, opening each
    directory target once for all its links. Without, nothing is opened (no file, no
    network): the state is what the catalog recorded, `paused`, `conflict`, `broken` (the
    last run's error), else `in_sync` as of the last run (`pending` before the first), with
    no lag: a cheap look at another cluster's links from afar.
    """
    cluster.check_open()
    rows = load_links(cluster)
    if not measure:
        return [recorded(link) for link in rows]
    opened: dict[str, Target | None] = {}
    try:
        result = []
        for link in rows:
            tgt = None
            if not is_url(link.target):  # an http(s) link has its own token: not shared
                if link.target not in opened:
                    try:
                        opened[link.target] = open_link_target(cluster, link)
                    except PartitionletError:
                        opened[link.target] = None  # measured() opens it again, says why
                tgt = opened[link.target]
            result.append(measured(cluster, link, tgt))
        return result
    finally:
        for tgt in opened.values():
            if tgt is not None:
                tgt.close()


def upstream_links(cluster: Cluster) -> list[UpstreamInfo]:
    """Every link into `cluster`, of all its streams (`upstreams` gives one stream's)."""
    cluster.check_open()
    return [UpstreamInfo(*r) for r in cluster.catalog.all_upstream_rows()]
