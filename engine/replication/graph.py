"""The replication graph around a cluster (or one of its streams), found by following links
from cluster to cluster; the web page and the terminal console both draw from it.

This cluster's links have their lag measured now. Cluster directories reached along links
are opened briefly to read their own links as their catalogs record them (nothing measured,
nothing sent over a network), so a ring A->B->C->A shows whole from A; at most
`max_clusters` are opened. An http(s) target is shown, not asked. An upstream's source
address is whatever the source said it is (over HTTP, whoever holds a token), so it is
followed only when the caller asks (`follow_upstreams`, for a local user whose file system
is the boundary anyway); otherwise clusters are followed along links only, which an
administrator added. Cycles (A->B->A, A->B->C->A) are normal in multi-master replication:
they are listed (`ReplicationGraph.cycles`), not treated as errors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import urlsplit

from engine.cluster import CATALOG_FILE, Cluster
from engine.replication.status import (
    LinkState,
    ReplicaInfo,
    UpstreamInfo,
    links,
    replicas,
    upstream_links,
)
from engine.replication.targets import is_url

# How many other clusters a walk opens to follow links (a bound on its cost).
MAX_CLUSTERS = 12
# How many cycles are listed at most.
MAX_CYCLES = 12
# The state shown for a link known only from its target's upstream record (its source was
# not asked): no state was measured or recorded for it.
UPSTREAM: Literal["upstream"] = "upstream"

EdgeState = LinkState | Literal["upstream"]
StreamNode = tuple[str, str]  # (node key, stream path)


class _Ordered(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


N = TypeVar("N", bound=_Ordered)  # a node: hashable and ordered (a cycle starts at its least)


@dataclass
class GraphNode:
    """A cluster of the graph."""

    key: str  # the cluster id, or the address when the cluster could not be asked
    name: str
    address: str
    cluster_id: str | None = None
    this: bool = False
    reachable: bool = True
    reason: str | None = None  # why it was not asked, or why asking failed
    remote: bool = False  # an http(s) address: shown, not opened

    @property
    def short_id(self) -> str:
        return self.cluster_id[:8] if self.cluster_id else ""


@dataclass
class GraphLink:
    """A link from a stream of one cluster to a stream of another; `measured` when its lag
    was measured now (this cluster's links), otherwise as the source's catalog recorded
    it."""

    source: str  # node keys
    target: str
    stream: str
    target_stream: str
    state: EdgeState
    lag_messages: int = 0
    lag_seconds: float = 0.0
    error: str | None = None
    conflict: list[dict[str, Any]] = field(default_factory=list)
    measured: bool = False


@dataclass
class ReplicationGraph:
    nodes: list[GraphNode]  # this cluster first, then the others by name
    links: list[GraphLink]
    own: list[ReplicaInfo]  # this cluster's links out, measured (of `stream` when given)
    upstreams: list[UpstreamInfo]  # links into this cluster (into `stream` when given)
    stream: str | None = None  # the stream the walk started from, or None for all

    @property
    def this(self) -> GraphNode:
        return self.nodes[0]

    def node(self, key: str) -> GraphNode:
        return next(n for n in self.nodes if n.key == key)

    def cycles(self) -> list[list[StreamNode]]:
        """The simple cycles of links between streams, each once; a cycle through the
        stream the walk started from begins there."""
        found = find_cycles(
            ((lk.source, lk.stream), (lk.target, lk.target_stream)) for lk in self.links
        )
        if self.stream is None:
            return found
        start = (self.this.key, self.stream)
        return [_rotated(cycle, start) for cycle in found]


def walk(
    cluster: Cluster,
    stream: str | None = None,
    *,
    follow_upstreams: bool = False,
    max_clusters: int = MAX_CLUSTERS,
    measure: bool = True,
) -> ReplicationGraph:
    """The graph around `cluster`: every link of every stream, or with `stream` only the
    links reached from that stream (a link to another stream goes on from that one).
    Without `measure`, this cluster's links too are as its catalog recorded them (nothing
    measured: a cheap look at which clusters are linked)."""
    here = str(cluster.path.resolve())
    this = GraphNode(cluster.id, cluster.name, here, cluster.id, this=True)
    nodes: dict[str, GraphNode] = {cluster.id: this}
    key_of: dict[str, str] = {here: cluster.id}  # address -> node key
    known_ids: dict[str, str] = {}  # address -> cluster id, as links recorded it
    if measure:
        own = links(cluster) if stream is None else replicas(cluster, stream)
    else:
        own = [i for i in links(cluster, measure=False) if stream is None or i.stream == stream]
    in_own = {(i.stream, i.target) for i in own}
    measured = in_own if measure else set()
    mine = own
    if stream is not None:  # a ring may come back to another stream of this cluster
        mine = own + [
            i for i in links(cluster, measure=False) if (i.stream, i.target) not in in_own
        ]
    ups = upstream_links(cluster)
    reads: dict[str, tuple[list[ReplicaInfo], list[UpstreamInfo]]] = {cluster.id: (mine, ups)}
    found: list[GraphLink] = []
    seen: set[tuple[str, str, str, str]] = set()
    queue: deque[tuple[str, str | None]] = deque([(here, stream)])
    visited: set[tuple[str, str | None]] = set()
    opened = 0
    while queue:
        address, at = queue.popleft()
        if (address, at) in visited:
            continue
        visited.add((address, at))
        if address not in key_of:
            node = GraphNode(
                known_ids.get(address, address),
                _address_name(address),
                address,
                known_ids.get(address),
            )
            read = None
            if is_url(address):
                node.remote = True
            elif opened >= max_clusters:
                node.reason = "not opened: too many clusters to follow"
            else:
                opened += 1
                read = _peek(address, node)
            key_of[address] = node.key
            if node.key not in nodes:  # else the same cluster under a second address
                nodes[node.key] = node
                if read is not None:
                    reads[node.key] = read
        key = key_of[address]
        if key not in reads:
            continue
        out, into = reads[key]
        for info in out:
            if at is not None and info.stream != at:
                continue
            if info.target_id:
                known_ids.setdefault(info.target, info.target_id)
            ident = (key, info.stream, info.target, info.target_stream)
            if ident not in seen:
                seen.add(ident)
                found.append(
                    GraphLink(
                        key,
                        info.target,
                        info.stream,
                        info.target_stream,
                        info.state,
                        info.lag_messages,
                        info.lag_seconds,
                        info.error,
                        list(info.conflict),
                        key == cluster.id and (info.stream, info.target) in measured,
                    )
                )
            queue.append((info.target, None if at is None else info.target_stream))
        for up in into:
            if at is not None and up.stream != at:
                continue
            known_ids.setdefault(up.source, up.source_id)
            if follow_upstreams and not is_url(up.source):
                queue.append((up.source, None if at is None else up.source_stream))
    # Targets are addresses until here: name them by node key.
    for link in found:
        address = link.target
        link.target = key_of.get(address, known_ids.get(address, address))
        if link.target not in nodes:
            nodes[link.target] = GraphNode(link.target, _address_name(address), address)
    # Upstreams whose source could not be asked still show, as a link into this cluster.
    shown_ups = [u for u in ups if stream is None or u.stream == stream]
    for u in shown_ups:
        source = key_of.get(u.source, u.source_id)
        if not any(
            (lk.source, lk.target, lk.stream, lk.target_stream)
            == (source, cluster.id, u.source_stream, u.stream)
            for lk in found
        ):
            if source not in nodes:
                nodes[source] = GraphNode(source, _address_name(u.source), u.source, u.source_id)
            found.append(GraphLink(source, cluster.id, u.source_stream, u.stream, UPSTREAM))
    order = [this] + sorted(
        (n for n in nodes.values() if not n.this), key=lambda n: (n.name, n.key)
    )
    return ReplicationGraph(order, found, own, shown_ups, stream)


def _address_name(address: str) -> str:
    if is_url(address):
        return urlsplit(address).netloc or address
    return Path(address).name or address


def _peek(address: str, node: GraphNode) -> tuple[list[ReplicaInfo], list[UpstreamInfo]] | None:
    """Open the cluster directory at `address` just long enough to read its links as its
    catalog records them; a directory that is missing or not a cluster is a broken node
    (never created: the catalog file must be there before it is opened)."""
    if not (Path(address) / CATALOG_FILE).is_file():
        node.reachable = False
        node.reason = f"no cluster at {address}"
        return None
    try:
        other = Cluster.open(address)
    except Exception as exc:  # noqa: BLE001 - whatever is wrong there, the graph still shows
        node.reachable = False
        node.reason = f"{type(exc).__name__}: {exc}"
        return None
    try:
        node.key = node.cluster_id = other.id
        node.name = other.name
        return links(other, measure=False), upstream_links(other)
    except Exception as exc:  # noqa: BLE001
        node.reachable = False
        node.reason = f"{type(exc).__name__}: {exc}"
        return None
    finally:
        other.close()


def find_cycles(edges: Iterable[tuple[N, N]]) -> list[list[N]]:
    """Simple cycles of a directed graph given by its edges, each once (rotated to start at
    its least node), at most MAX_CYCLES."""
    succ: dict[N, list[N]] = {}
    for source, target in edges:
        succ.setdefault(source, []).append(target)
    cycles: list[list[N]] = []
    seen: set[tuple[N, ...]] = set()

    def follow(first: N, node: N, path: list[N]) -> None:
        if len(cycles) >= MAX_CYCLES:
            return
        for nxt in succ.get(node, ()):
            if nxt == first:
                i = path.index(min(path))
                canon = tuple(path[i:] + path[:i])
                if canon not in seen:
                    seen.add(canon)
                    cycles.append(list(canon))
            elif nxt not in path and first < nxt:
                follow(first, nxt, path + [nxt])

    for first in sorted(succ):
        follow(first, first, [first])
    return cycles


def _rotated(cycle: list[StreamNode], node: StreamNode) -> list[StreamNode]:
    """The cycle rotated to begin at `node` when it passes there (easier to read)."""
    if node not in cycle:
        return cycle
    i = cycle.index(node)
    return cycle[i:] + cycle[:i]
