"""The replication graph around a stream, found by following its links out and in.

Links to cluster directories on this machine are followed (each cluster is opened, asked,
and closed); an http(s) target is shown as an end point. Cycles (A->B->A, A->B->C->A) are
normal in multi-master replication, so they are listed, not treated as errors.
Called from worker threads only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.text import Text

from engine import Cluster
from engine.cluster import CATALOG_FILE
from engine.errors import PartitionletError

MAX_NODES = 24
MAX_CYCLES = 12

STATE_STYLES = {
    "in_sync": "green",
    "pending": "yellow",
    "paused": "dim",
    "broken": "bold red",
    "conflict": "bold magenta",
    "upstream": "cyan",
}

Node = tuple[str, str]  # (cluster id, or a target's address when unknown; stream path)


@dataclass(frozen=True)
class Edge:
    source: Node
    target: Node
    state: str
    lag_messages: int = 0
    lag_seconds: float = 0.0


@dataclass
class Graph:
    start: Node
    labels: dict[Node, str] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    cycles: list[list[Node]] = field(default_factory=list)
    unreachable: dict[Node, str] = field(default_factory=dict)  # why a node was not asked


def _local_dir(target: str) -> Path | None:
    if "://" in target:
        return None
    path = Path(target)
    return path if (path / CATALOG_FILE).is_file() else None


def crawl(cluster: Cluster, stream: str, max_nodes: int = MAX_NODES) -> Graph:
    start: Node = (cluster.id, stream)
    graph = Graph(start)
    graph.labels[start] = f"{cluster.name}:{stream}"
    seen_edges: set[tuple[Node, Node]] = set()
    # (node, how to open its cluster: None for the app's own)
    todo: list[tuple[Node, Path | None]] = [(start, None)]
    visited: set[Node] = set()

    def visit(node: Node, c: Cluster) -> list[tuple[Node, Path | None]]:
        stream_path = node[1]
        found: list[tuple[Node, Path | None]] = []
        for link in c.replicas(stream_path):
            target: Node = (link.target_id or link.target, link.target_stream)
            graph.labels.setdefault(target, _label(link.target, link.target_stream))
            if (node, target) not in seen_edges:
                seen_edges.add((node, target))
                graph.edges.append(
                    Edge(node, target, link.state, link.lag_messages, link.lag_seconds)
                )
            found.append((target, _local_dir(link.target)))
        for up in c.upstreams(stream_path):
            source: Node = (up.source_id, up.source_stream)
            graph.labels.setdefault(source, _label(up.source, up.source_stream))
            found.append((source, _local_dir(up.source)))
        return found

    while todo and len(visited) < max_nodes:
        node, where = todo.pop(0)
        if node in visited:
            continue
        visited.add(node)
        try:
            if where is None:
                if node != start:
                    graph.unreachable[node] = "not a cluster directory on this machine"
                    continue
                todo.extend(visit(node, cluster))
            else:
                with Cluster.open(where) as other:
                    graph.labels[node] = f"{other.name}:{node[1]}"
                    todo.extend(visit(node, other))
        except (PartitionletError, OSError) as exc:
            graph.unreachable[node] = str(exc)
    # Links from a source that could not be asked are known from this side only.
    for source, target in _upstream_only(graph, cluster, visited):
        if (source, target) not in seen_edges:
            seen_edges.add((source, target))
            graph.edges.append(Edge(source, target, "upstream"))
    graph.cycles = [_from(start, cycle) for cycle in find_cycles(graph.edges)]
    return graph


def _from(node: Node, cycle: list[Node]) -> list[Node]:
    """The cycle rotated to begin at `node` when it passes there (easier to read)."""
    if node not in cycle:
        return cycle
    i = cycle.index(node)
    return cycle[i:] + cycle[:i]


def _upstream_only(graph: Graph, cluster: Cluster, visited: set[Node]) -> list[tuple[Node, Node]]:
    """Edges source -> start for upstreams whose source could not be asked."""
    out = []
    for up in cluster.upstreams(graph.start[1]):
        source: Node = (up.source_id, up.source_stream)
        if source not in visited or source in graph.unreachable:
            out.append((source, graph.start))
    return out


def _label(address: str, stream: str) -> str:
    name = address.rstrip("/").rsplit("/", 1)[-1] if "://" not in address else address
    return f"{name}:{stream}"


def find_cycles(edges: list[Edge]) -> list[list[Node]]:
    """Simple cycles of the directed graph, each once (rotated to start at its least node)."""
    succ: dict[Node, list[Node]] = {}
    for e in edges:
        succ.setdefault(e.source, []).append(e.target)
    cycles: list[list[Node]] = []
    seen: set[tuple[Node, ...]] = set()

    def walk(first: Node, node: Node, path: list[Node]) -> None:
        if len(cycles) >= MAX_CYCLES:
            return
        for nxt in succ.get(node, ()):
            if nxt == first:
                cycle = path[:]
                i = cycle.index(min(cycle))
                canon = tuple(cycle[i:] + cycle[:i])
                if canon not in seen:
                    seen.add(canon)
                    cycles.append(list(canon))
            elif nxt not in path and nxt > first:
                walk(first, nxt, path + [nxt])

    for first in sorted(succ):
        walk(first, first, [first])
    return cycles


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
        info = e.state
        if e.state == "pending":
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
