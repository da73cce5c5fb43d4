"""A heat-map widget: one row per series, one cell per time column, coloured on a scale
from idle to the hottest value shown, with a legend and a relative time axis."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from console.display import fmt_rate
from engine.times import format_duration

# Idle first, then cold to hot.
SCALE = (
    "#202433",
    "#29366f",
    "#3b5dc9",
    "#41a6f6",
    "#73eff7",
    "#a7f070",
    "#ffcd75",
    "#ef7d57",
    "#b13e53",
)

# Shades as well as colours, so that the map reads on a monochrome terminal too.
GLYPHS = " ░░▒▒▓▓██"


def _style(level: int) -> Style:
    return Style(color=SCALE[level], bgcolor=SCALE[0])


@dataclass(frozen=True)
class HeatData:
    rows: list[tuple[str, list[float]]] = field(default_factory=list)
    bucket_s: int = 10
    unit: str = "msg/s"


def shade(value: float, top: float) -> int:
    """Index into SCALE: 0 for idle, 1..len-1 by the share of `top`."""
    if value <= 0 or top <= 0:
        return 0
    steps = len(SCALE) - 1
    return max(1, min(steps, math.ceil(value / top * steps)))


def _merge(series: list[float], columns: int) -> list[float]:
    """Average consecutive buckets so that the series fits in `columns` cells."""
    if len(series) <= columns:
        return series
    size = math.ceil(len(series) / columns)
    return [
        sum(series[i : i + size]) / len(series[i : i + size]) for i in range(0, len(series), size)
    ]


class HeatMapWidget(Widget):
    data: reactive[HeatData] = reactive(HeatData, layout=True)

    DEFAULT_CSS = """
    HeatMapWidget { height: auto; }
    """

    def render(self) -> Text:
        data = self.data
        text = Text()
        if not data.rows:
            text.append("no load in this window", style="dim")
            return text
        label_w = min(36, max(len(label) for label, _ in data.rows))
        room = max(4, self.size.width - label_w - 2)
        buckets = len(data.rows[0][1])
        cell = 2 if buckets * 2 <= room else 1
        merged = [(label, _merge(series, room // cell)) for label, series in data.rows]
        top = max((v for _, series in merged for v in series), default=0.0)
        for label, series in merged:
            text.append(label[-label_w:].rjust(label_w) + " ")
            for value in series:
                level = shade(value, top)
                text.append(GLYPHS[level] * cell, style=_style(level))
            text.append("\n")
        columns = len(merged[0][1]) * cell
        left = f"-{format_duration(buckets * data.bucket_s)}"
        text.append(" " * (label_w + 1) + left + "now".rjust(max(1, columns - len(left))) + "\n")
        text.append("scale ", style="bold")
        text.append("idle ")
        for level in range(len(SCALE)):
            text.append(GLYPHS[level] * 2, style=_style(level))
        text.append(f" {fmt_rate(top)} {data.unit} (hottest cell)")
        return text

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(1, len(self.data.rows) + 2)
