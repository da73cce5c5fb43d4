"""The replication graph around a stream, drawn in text.

The graph is the engine's walk (engine.replication.graph.walk): links followed out of the
stream and, since a console user reads this machine's files anyway, upstreams followed in;
cluster directories on this machine are opened, asked and closed; an http(s) target is an
end point. Cycles (A->B->A, A->B->C->A) are normal in multi-master replication, so they are
listed and drawn as rings, not treated as errors. Called from worker threads only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rich.text import Text

from engine import Cluster
from engine.replication import LinkState
from engine.replication import graph as replication_graph
from engine.replication.graph import UPSTREAM, EdgeState

MAX_CLUSTERS = replication_graph.MAX_CLUSTERS

STATE_STYLES: dict[str, str] = {
    LinkState.IN_SYNC: "green",
    LinkState.PENDING: "yellow",
    LinkState.PAUSED: "dim",
    LinkState.BROKEN: "bold red",
    LinkState.CONFLICT: "bold magenta",
    UPSTREAM: "cyan",
}

Node = tuple[str, str]  # (cluster id, or a target's address when unknown; stream path)


@dataclass(frozen=True)
class Edge:
    source: Node
    target: Node
    state: EdgeState
    lag_messages: int = 0
    lag_seconds: float = 0.0
    measured: bool = False  # lag measured now (this cluster's links), else as recorded


@dataclass
class Graph:
    start: Node
    labels: dict[Node, str] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    cycles: list[list[Node]] = field(default_factory=list)
    unreachable: dict[Node, str] = field(default_factory=dict)  # why a node was not asked


def crawl(cluster: Cluster, stream: str, max_clusters: int = MAX_CLUSTERS) -> Graph:
    """The engine's graph around `stream`, as streams ((cluster, stream) nodes) and links."""
    walked = replication_graph.walk(
        cluster, stream, follow_upstreams=True, max_clusters=max_clusters
    )
    clusters = {n.key: n for n in walked.nodes}
    start: Node = (walked.this.key, stream)
    graph = Graph(start)
    graph.labels[start] = f"{cluster.name}:{stream}"
    for link in walked.links:
        source: Node = (link.source, link.stream)
        target: Node = (link.target, link.target_stream)
        for node in (source, target):
            where = clusters[node[0]]
            graph.labels.setdefault(node, f"{where.name}:{node[1]}")
            if where.remote:
                graph.unreachable[node] = "not a cluster directory on this machine"
            elif where.reason:
                graph.unreachable[node] = where.reason
        graph.edges.append(
            Edge(source, target, link.state, link.lag_messages, link.lag_seconds, link.measured)
        )
    graph.cycles = walked.cycles()
    return graph


def find_cycles(edges: list[Edge]) -> list[list[Node]]:
    """Simple cycles among `edges`, each once (rotated to start at its least node)."""
    return replication_graph.find_cycles((e.source, e.target) for e in edges)


def draw(graph: Graph, style_of: Callable[[str], str] | None = None) -> Text:
    """The graph as text: one line per link with its state and lag, then the cycles."""
    style_of = style_of or (lambda state: STATE_STYLES.get(state, ""))
    label = graph.labels.get
    text = Text(no_wrap=True)  # a wrapped line would break the drawing
    nodes = {graph.start} | {e.source for e in graph.edges} | {e.target for e in graph.edges}
    text.append(f"Replication graph: {len(nodes)} stream(s), {len(graph.edges)} link(s)\n", "bold")
    if not graph.edges:
        text.append("  no links in or out of this stream\n", "dim")
    width = max((len(label(e.source, "?")) for e in graph.edges), default=0)
    for e in graph.edges:
        here = e.source == graph.start or e.target == graph.start
        text.append("  " + label(e.source, "?").ljust(width), "bold" if here else "")
        info: str = e.state
        if e.state == LinkState.PENDING and e.measured:
            info += f" {e.lag_messages:,} msgs / {e.lag_seconds:.1f} s"
        text.append(" ──", "dim")
        text.append(f"{info}", style_of(e.state))
        text.append("──▶ ", "dim")
        text.append(label(e.target, "?") + "\n", "bold" if here else "")
    if graph.cycles:
        text.append("Cycles (each message still applied once):\n", "bold")
        for cycle in graph.cycles:
            text.append("  ↻ " + " → ".join(label(n, "?") for n in cycle + cycle[:1]) + "\n")
            text.append_text(ring(graph, cycle, style_of))
    for node, why in graph.unreachable.items():
        text.append(f"  (not followed: {label(node, '?')}: {why})\n", "dim")
    return text


def ring(graph: Graph, cycle: list[Node], style_of: Callable[[str], str]) -> Text:
    """A cycle drawn as a loop: its streams left to right, the closing link underneath.

    ┌▶ dc1:/s ─in_sync─▶ dc2:/s ─pending─▶ dc3:/s ─┐
    └───────────────────── paused ─────────────────┘
    """
    edges = {(e.source, e.target): e for e in graph.edges}
    label = graph.labels.get
    top = Text("  ┌▶ ", "dim")
    for here, there in zip(cycle, cycle[1:], strict=False):
        top.append(label(here, "?"))
        state = edges[(here, there)].state
        top.append(" ─", "dim")
        top.append(state, style_of(state))
        top.append("─▶ ", "dim")
    top.append(label(cycle[-1], "?"))
    top.append(" ─┐", "dim")
    closing = edges[(cycle[-1], cycle[0])].state
    inner = len(top.plain) - 4  # between "  └" and "┘"
    left = max(1, (inner - len(closing) - 2) // 2)
    right = max(1, inner - left - len(closing) - 2)
    bottom = Text("  └" + "─" * left + " ", "dim")
    bottom.append(closing, style_of(closing))
    bottom.append(" " + "─" * right + "┘", "dim")
    return Text("\n").join([top, bottom]) + Text("\n")
