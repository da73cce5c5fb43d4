"""Geometry of the replication graph, ready to draw as SVG: pure functions, no Flask; of
the engine only the link states.

Clusters sit on a circle (a ring A->B->C->A then reads as a ring), edges run between the
circles' rims so that arrowheads touch the target's outline. A pair of clusters linked both
ways gets two curves bowing to opposite sides (each to the right of its own direction), so
the two edges and their labels never lie on top of each other.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from engine.replication import LinkState
from engine.replication.graph import UPSTREAM

WIDTH = 640
HEIGHT = 440
NODE_RADIUS = 38
# How far a two-way edge bows away from the straight line, in user units.
BOW = 36.0
# Worst first: the state an edge shows when it carries links in several states.
STATE_ORDER = (
    LinkState.CONFLICT,
    LinkState.BROKEN,
    LinkState.PENDING,
    LinkState.PAUSED,
    LinkState.IN_SYNC,
    UPSTREAM,
)


@dataclass(frozen=True)
class Point:
    x: float
    y: float


@dataclass(frozen=True)
class EdgeGeometry:
    """An edge's SVG path (`d`), where its label goes, and whether it is curved."""

    d: str
    start: Point
    end: Point
    label: Point
    curved: bool


@dataclass(frozen=True)
class GraphLayout:
    width: int
    height: int
    node_radius: int
    nodes: dict[Hashable, Point]
    edges: dict[tuple[Hashable, Hashable], EdgeGeometry]


def circle_positions(
    count: int, width: float = WIDTH, height: float = HEIGHT, margin: float = NODE_RADIUS + 30
) -> list[Point]:
    """`count` points evenly spaced on the largest circle that fits, the first at the top,
    going clockwise; one point sits in the middle."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    cx, cy = width / 2, height / 2
    if count == 1:
        return [Point(cx, cy)]
    radius = max(min(width, height) / 2 - margin, 1.0)
    points = []
    for i in range(count):
        angle = -math.pi / 2 + 2 * math.pi * i / count
        points.append(
            Point(round(cx + radius * math.cos(angle), 2), round(cy + radius * math.sin(angle), 2))
        )
    return points


def edge_geometry(
    a: Point, b: Point, *, curved: bool, node_radius: float = NODE_RADIUS, bow: float = BOW
) -> EdgeGeometry:
    """The path from node `a` to node `b`, between their rims; `curved` bows it to the right
    of its direction (seen from `a`), so b->a bows to the other side."""
    dx, dy = b.x - a.x, b.y - a.y
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    # the right-hand normal in SVG's y-down coordinates
    nx, ny = -uy, ux
    if not curved:
        start = Point(round(a.x + ux * node_radius, 2), round(a.y + uy * node_radius, 2))
        end = Point(round(b.x - ux * node_radius, 2), round(b.y - uy * node_radius, 2))
        mid = Point((start.x + end.x) / 2, (start.y + end.y) / 2)
        label = Point(round(mid.x + nx * 12, 2), round(mid.y + ny * 12, 2))
        return EdgeGeometry(f"M{start.x},{start.y} L{end.x},{end.y}", start, end, label, False)
    # Leave each rim a little to the bowed side, so the two curves of a pair start apart.
    spread = 0.45
    sx = a.x + (ux * math.cos(spread) + nx * math.sin(spread)) * node_radius
    sy = a.y + (uy * math.cos(spread) + ny * math.sin(spread)) * node_radius
    ex = b.x + (-ux * math.cos(spread) + nx * math.sin(spread)) * node_radius
    ey = b.y + (-uy * math.cos(spread) + ny * math.sin(spread)) * node_radius
    mx, my = (a.x + b.x) / 2, (a.y + b.y) / 2
    # A quadratic curve's control point twice as far out as its apex.
    cx, cy = mx + nx * bow * 2, my + ny * bow * 2
    start, end = Point(round(sx, 2), round(sy, 2)), Point(round(ex, 2), round(ey, 2))
    apex = Point(
        round(0.25 * sx + 0.5 * cx + 0.25 * ex, 2), round(0.25 * sy + 0.5 * cy + 0.25 * ey, 2)
    )
    label = Point(round(apex.x + nx * 12, 2), round(apex.y + ny * 12, 2))
    d = f"M{start.x},{start.y} Q{round(cx, 2)},{round(cy, 2)} {end.x},{end.y}"
    return EdgeGeometry(d, start, end, label, True)


def layout_graph(
    nodes: Sequence[Hashable],
    edges: Sequence[tuple[Hashable, Hashable]],
    *,
    width: int = WIDTH,
    height: int = HEIGHT,
    node_radius: int = NODE_RADIUS,
) -> GraphLayout:
    """Positions for `nodes` (in the order given, on a circle) and a path per directed edge;
    an edge whose reverse is also present is curved. Edges naming an unknown node, and
    edges from a node to itself, are left out."""
    points = dict(zip(nodes, circle_positions(len(nodes), width, height), strict=True))
    wanted = {(s, t) for s, t in edges if s in points and t in points and s != t}
    geometry = {
        (s, t): edge_geometry(
            points[s], points[t], curved=(t, s) in wanted, node_radius=node_radius
        )
        for s, t in edges
        if (s, t) in wanted
    }
    return GraphLayout(width, height, node_radius, points, geometry)


def worst_state(states: Sequence[str]) -> str:
    """The state an edge carrying links in `states` shows: the worst of them."""
    ranked = [s for s in STATE_ORDER if s in states]
    if ranked:
        return ranked[0]
    return states[0] if states else LinkState.IN_SYNC


def short_label(text: str, limit: int = 14) -> str:
    """`text` cut to `limit` characters with an ellipsis, to fit inside a node."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


__all__ = [
    "EdgeGeometry",
    "GraphLayout",
    "Point",
    "circle_positions",
    "edge_geometry",
    "layout_graph",
    "short_label",
    "worst_state",
]
