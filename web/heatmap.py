"""Geometry and colours of the heat maps, ready to draw as SVG: pure functions, no Flask,
no engine.

A heat map is rows (volumes, or partitions) by columns (time buckets). Long windows have
more engine buckets than fit across a page, so neighbouring buckets are merged into one
column (their rates averaged). The colour scale is a sequential palette defined here, from
near white to dark red, with every channel non-increasing from one stop to the next: its
lightness falls monotonically, so darker always means hotter, also in grey print and for
colour-blind readers. Values map through a square root, which keeps a cool partition
visible next to one that is a hundred times hotter; the legend labels real values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# (r, g, b), lightest (no load) first; every channel non-increasing along the list.
PALETTE: tuple[tuple[int, int, int], ...] = (
    (255, 252, 232),
    (254, 236, 170),
    (253, 212, 120),
    (250, 176, 80),
    (243, 132, 56),
    (226, 86, 40),
    (190, 40, 30),
    (130, 15, 25),
    (70, 5, 20),
)
MAX_COLUMNS = 60
CELL_H = 16
LABEL_W = 230
CHART_W = 720
LEGEND_STOPS = 5


def hex_colour(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def scale_position(value: float, vmax: float) -> float:
    """Where `value` sits on the colour scale, 0..1 (square-root scale, clamped)."""
    if vmax <= 0 or value <= 0 or math.isnan(value):
        return 0.0
    return min(1.0, math.sqrt(value / vmax))


def colour_at(t: float) -> str:
    """The palette's colour at position `t` (0..1), interpolated between stops."""
    t = min(1.0, max(0.0, t))
    span = (len(PALETTE) - 1) * t
    i = min(int(span), len(PALETTE) - 2)
    f = span - i
    lo, hi = PALETTE[i], PALETTE[i + 1]
    red, green, blue = (round(lo[k] + (hi[k] - lo[k]) * f) for k in range(3))
    return hex_colour((red, green, blue))


# The scale in 256 steps (more than the eye tells apart), looked up rather than
# interpolated: an hour's map colours 2,000 cells on every refresh.
_STEPS = 256
_SCALE = tuple(colour_at(i / _STEPS) for i in range(_STEPS + 1))


def colour(value: float, vmax: float) -> str:
    """The colour of `value` on a scale from 0 (the lightest colour) to `vmax`."""
    return _SCALE[round(scale_position(value, vmax) * _STEPS)]


def luminance(hex_rgb: str) -> float:
    """Relative luminance (WCAG) of a #rrggbb colour."""

    def channel(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = (int(hex_rgb[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def text_colour(fill: str) -> str:
    """Black or white, whichever reads better on `fill`."""
    return "#000000" if luminance(fill) > 0.18 else "#ffffff"


@dataclass(frozen=True)
class Column:
    """One column of a heat map: `buckets` engine buckets from `start_ms`, `seconds` long."""

    start_ms: int
    seconds: int
    buckets: int


def merge_columns(
    buckets: Sequence[int], bucket_s: int, max_columns: int = MAX_COLUMNS
) -> list[Column]:
    """Group consecutive buckets (start times in ms) into at most `max_columns` columns of
    equal width; the newest bucket always closes the last column."""
    if max_columns < 1:
        raise ValueError("max_columns must be >= 1")
    per = max(1, math.ceil(len(buckets) / max_columns))
    columns = []
    # Align from the newest end so the latest column is whole and ends now.
    first = len(buckets) % per
    if first:
        columns.append(Column(buckets[0], first * bucket_s, first))
    for i in range(first, len(buckets), per):
        columns.append(Column(buckets[i], per * bucket_s, per))
    return columns


def merge_values(values: Sequence[float], columns: Sequence[Column]) -> list[float]:
    """Average per-bucket rates over each column (so rates stay rates)."""
    out = []
    i = 0
    for column in columns:
        chunk = values[i : i + column.buckets]
        out.append(sum(chunk) / column.buckets if column.buckets else 0.0)
        i += column.buckets
    return out


@dataclass(frozen=True)
class Cell:
    row: int
    column: int
    x: float
    y: float
    width: float
    height: float
    value: float
    fill: str


@dataclass(frozen=True)
class Grid:
    """Every cell of a heat map, with the drawing's size and where each row starts."""

    width: float
    height: float
    label_width: float
    cell_width: float
    cell_height: float
    cells: list[Cell]
    row_y: list[float]
    vmax: float


def heat_grid(
    rows: Sequence[Sequence[float]],
    *,
    vmax: float | None = None,
    label_width: float = LABEL_W,
    chart_width: float = CHART_W,
    cell_height: float = CELL_H,
    top: float = 0.0,
) -> Grid:
    """One cell per (row, column) of `rows` (every row as long as the first), coloured on a
    scale from 0 to `vmax` (the largest value when not given)."""
    columns = len(rows[0]) if rows else 0
    if any(len(r) != columns for r in rows):
        raise ValueError("every row of a heat map needs the same number of columns")
    if vmax is None:
        vmax = max((v for r in rows for v in r), default=0.0)
    cell_width = chart_width / columns if columns else chart_width
    cells = []
    row_y = []
    for i, row in enumerate(rows):
        y = top + i * cell_height
        row_y.append(y)
        for j, value in enumerate(row):
            cells.append(
                Cell(
                    i,
                    j,
                    round(label_width + j * cell_width, 2),
                    y,
                    round(cell_width, 2),
                    cell_height,
                    value,
                    colour(value, vmax),
                )
            )
    return Grid(
        label_width + chart_width,
        top + len(rows) * cell_height,
        label_width,
        cell_width,
        cell_height,
        cells,
        row_y,
        vmax,
    )


@dataclass(frozen=True)
class LegendStop:
    value: float
    fill: str
    x: float


def legend(vmax: float, stops: int = LEGEND_STOPS, width: float = 240) -> list[LegendStop]:
    """Labelled stops from 0 to `vmax`, evenly spaced along the colour scale (so, with the
    square-root scale, the values grow quadratically)."""
    if stops < 2:
        raise ValueError("a legend needs at least 2 stops")
    out = []
    for i in range(stops):
        t = i / (stops - 1)
        out.append(LegendStop(vmax * t * t, colour_at(t), round(width * t, 2)))
    return out


def legend_swatches(count: int = 24, width: float = 240) -> list[tuple[float, float, str]]:
    """(x, width, fill) of the small rectangles that draw the legend's colour bar."""
    w = width / count
    return [(round(i * w, 2), round(w + 0.5, 2), colour_at(i / (count - 1))) for i in range(count)]


__all__ = [
    "PALETTE",
    "Cell",
    "Column",
    "Grid",
    "LegendStop",
    "colour",
    "colour_at",
    "heat_grid",
    "legend",
    "legend_swatches",
    "luminance",
    "merge_columns",
    "merge_values",
    "scale_position",
    "text_colour",
]
