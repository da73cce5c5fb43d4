"""The pure geometry of the replication graph (web/graph.py) and of the heat maps
(web/heatmap.py): no app, no cluster."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

from web import graph, heatmap


def test_nodes_on_a_circle_are_distinct_and_inside_the_drawing():
    for count in range(1, 13):
        points = graph.circle_positions(count)
        assert len({(p.x, p.y) for p in points}) == count
        for p in points:
            assert graph.NODE_RADIUS <= p.x <= graph.WIDTH - graph.NODE_RADIUS
            assert graph.NODE_RADIUS <= p.y <= graph.HEIGHT - graph.NODE_RADIUS
    # neighbours on the circle never overlap (up to a dozen clusters)
    points = graph.circle_positions(12)
    gaps = [math.dist((a.x, a.y), (b.x, b.y)) for a, b in pairwise([*points, points[0]])]
    assert min(gaps) > 2 * graph.NODE_RADIUS
    assert graph.circle_positions(0) == []
    with pytest.raises(ValueError):
        graph.circle_positions(-1)


def test_a_ring_gets_straight_edges_and_a_two_way_link_two_distinct_curves():
    ring = [("a", "b"), ("b", "c"), ("c", "a")]
    layout = graph.layout_graph(["a", "b", "c"], ring)
    assert set(layout.edges) == set(ring)
    assert not any(e.curved for e in layout.edges.values())
    both = graph.layout_graph(["a", "b", "c"], [*ring, ("b", "a")])
    ab, ba = both.edges[("a", "b")], both.edges[("b", "a")]
    assert ab.curved and ba.curved and not both.edges[("b", "c")].curved
    assert ab.d != ba.d
    # the two curves bow to opposite sides, so their labels and middles are apart
    assert math.dist((ab.label.x, ab.label.y), (ba.label.x, ba.label.y)) > 2 * graph.BOW
    assert ab.start != ba.end and ab.end != ba.start


def test_edges_end_on_the_rims_of_their_nodes():
    layout = graph.layout_graph(["a", "b"], [("a", "b")])
    a, b = layout.nodes["a"], layout.nodes["b"]
    edge = layout.edges[("a", "b")]
    assert math.dist((a.x, a.y), (edge.start.x, edge.start.y)) == pytest.approx(
        graph.NODE_RADIUS, abs=0.05
    )
    assert math.dist((b.x, b.y), (edge.end.x, edge.end.y)) == pytest.approx(
        graph.NODE_RADIUS, abs=0.05
    )
    assert edge.d.startswith("M") and " L" in edge.d


def test_edges_to_unknown_nodes_or_to_themselves_are_left_out():
    layout = graph.layout_graph(["a", "b"], [("a", "b"), ("a", "zz"), ("a", "a")])
    assert list(layout.edges) == [("a", "b")]


def test_worst_state_and_short_labels():
    assert graph.worst_state(["in_sync", "pending"]) == "pending"
    assert graph.worst_state(["paused", "conflict", "broken"]) == "conflict"
    assert graph.worst_state(["in_sync"]) == "in_sync"
    assert graph.short_label("dc1") == "dc1"
    assert graph.short_label("a-very-long-cluster-name", 8) == "a-very-\u2026"


def test_colour_scale_starts_at_the_lowest_colour_and_darkens_monotonically():
    lowest = heatmap.hex_colour(heatmap.PALETTE[0])
    assert heatmap.colour(0, 100) == lowest
    assert heatmap.colour(0, 0) == lowest  # an idle map is all the lowest colour
    assert heatmap.colour(-5, 100) == lowest
    assert heatmap.colour(100, 100) == heatmap.hex_colour(heatmap.PALETTE[-1])
    assert heatmap.colour(1000, 100) == heatmap.hex_colour(heatmap.PALETTE[-1])
    values = [i * 0.5 for i in range(201)]
    lum = [heatmap.luminance(heatmap.colour(v, 100)) for v in values]
    assert all(a >= b for a, b in pairwise(lum))
    assert lum[0] > lum[-1] + 0.8  # from near white to near black
    # the palette itself: each channel non-increasing, so lightness is ordered
    for lo, hi in pairwise(heatmap.PALETTE):
        assert all(h <= lo_ for lo_, h in zip(lo, hi, strict=True))


def test_legend_stops_run_from_zero_to_the_maximum():
    stops = heatmap.legend(80.0, stops=5)
    assert [s.value for s in stops] == [0.0, 5.0, 20.0, 45.0, 80.0]
    assert stops[0].fill == heatmap.colour(0, 80) and stops[-1].fill == heatmap.colour(80, 80)
    assert [s.fill for s in stops] == [heatmap.colour(s.value, 80) for s in stops]
    assert [s.x for s in stops] == sorted(s.x for s in stops)
    assert len(heatmap.legend_swatches(24)) == 24
    with pytest.raises(ValueError):
        heatmap.legend(1.0, stops=1)


def test_cell_count_is_rows_times_columns():
    rows = [[0.0, 1.0, 2.0], [3.0, 0.0, 0.0], [0.0, 0.0, 9.0], [1.0, 1.0, 1.0]]
    grid = heatmap.heat_grid(rows, top=10)
    assert len(grid.cells) == 4 * 3
    assert {(c.row, c.column) for c in grid.cells} == {(r, k) for r in range(4) for k in range(3)}
    assert grid.vmax == 9.0
    hottest = next(c for c in grid.cells if c.value == 9.0)
    assert hottest.fill == heatmap.hex_colour(heatmap.PALETTE[-1])
    assert grid.row_y == [10, 26, 42, 58]
    assert heatmap.heat_grid([]).cells == []
    with pytest.raises(ValueError):
        heatmap.heat_grid([[1.0], [1.0, 2.0]])


def test_long_windows_merge_buckets_into_columns_that_keep_rates():
    buckets = [i * 10_000 for i in range(360)]  # an hour of 10 s buckets
    columns = heatmap.merge_columns(buckets, 10, max_columns=60)
    assert len(columns) == 60 and all(c.buckets == 6 and c.seconds == 60 for c in columns)
    assert columns[0].start_ms == 0 and columns[-1].start_ms == buckets[-6]
    # 90 buckets (15 min) in 45 columns of 2; 30 (5 min) stay as they are
    assert len(heatmap.merge_columns(buckets[:90], 10)) == 45
    assert len(heatmap.merge_columns(buckets[:30], 10)) == 30
    # an uneven count: a short first column, the newest columns whole
    uneven = heatmap.merge_columns(buckets[:7], 10, max_columns=3)
    assert [c.buckets for c in uneven] == [1, 3, 3]
    assert sum(c.buckets for c in uneven) == 7
    assert heatmap.merge_values([2.0, 4.0, 6.0, 1.0, 1.0, 1.0, 1.0], uneven) == [2.0, 11 / 3, 1.0]
