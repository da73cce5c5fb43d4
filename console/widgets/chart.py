"""`MetricChart`: one series of the metrics history (engine.ops.metrics) drawn as a block
line chart: a title with the latest and peak values and their unit, columns of eighth
blocks (blank where nothing was recorded), and a time axis ("last 1 h", start and end).

The chart loads its own series in a worker thread (`reload()`), so a pane can point it at
another group or link (`show_series`) without waiting for its own refresh. The window is
the app's `metrics_window` (cycled by a key, `WINDOWS`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from rich.text import Text
from textual import work
from textual.message import Message
from textual.widget import Widget

from console.display import fmt_rate
from engine.times import format_duration
from engine.units import format_bytes

# The windows the window key cycles through, and their labels.
WINDOWS: tuple[tuple[int, str], ...] = (
    (3600, "1 h"),
    (6 * 3600, "6 h"),
    (86400, "24 h"),
    (7 * 86400, "7 d"),
)
BLOCKS = " ▁▂▃▄▅▆▇█"


def window_label(window_s: int) -> str:
    return dict(WINDOWS).get(window_s, f"{window_s} s")


def next_window(window_s: int) -> int:
    windows = [w for w, _ in WINDOWS]
    return windows[(windows.index(window_s) + 1) % len(windows)] if window_s in windows else 3600


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "B/s":
        return f"{format_bytes(int(value))}/s"
    if unit == "messages":
        return f"{value:,.0f} msgs"
    return f"{fmt_rate(value)} {unit}"


def columns(points: list[tuple[int, float | None]], width: int) -> tuple[list[float | None], int]:
    """The points merged into at most `width` columns (each the highest of its points, so a
    burst stays visible; None when none of them was recorded), newest last, and how many
    points a column holds."""
    if width <= 0 or not points:
        return [], 1
    per = max(1, math.ceil(len(points) / width))
    # Groups end at the newest point, so that the latest column is always a whole one.
    values = [v for _, v in points]
    start = len(values) % per
    merged: list[float | None] = []
    if start:
        merged.append(_highest(values[:start]))
    for i in range(start, len(values), per):
        merged.append(_highest(values[i : i + per]))
    return merged, per


def _highest(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def plot(values: list[float | None], rows: int) -> list[str]:
    """`rows` lines of eighth blocks, top first; 0 is a dim baseline (drawn by `render`),
    None a blank."""
    top = max((v for v in values if v is not None), default=0.0)
    lines = []
    for row in range(rows):
        floor = (rows - 1 - row) * 8  # eighths below this row
        cells = []
        for v in values:
            if v is None or v <= 0 or top <= 0:
                cells.append(" ")
                continue
            level = max(1, math.ceil(v / top * rows * 8))
            cells.append(BLOCKS[max(0, min(8, level - floor))])
        lines.append("".join(cells))
    return lines


def _when(ms: int, window_s: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%m-%d %H:%M" if window_s > 86400 else "%H:%M")


class MetricChart(Widget):
    """A chart of `scope`/`name`/`metric` over the app's window (`title` names it)."""

    DEFAULT_CSS = """
    MetricChart {
        height: 5;
        width: 1fr;
    }
    """

    class Series(Message):
        """A worker's answer: the series (or the error) for request `seq`."""

        bubble = False

        def __init__(self, seq: int, series: Any = None, error: BaseException | None = None):
            super().__init__()
            self.seq = seq
            self.series = series
            self.error = error

    def __init__(
        self,
        title: str,
        scope: str = "cluster",
        name: str | None = "",
        metric: str = "write_messages",
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.heading = title
        self.scope = scope
        self.series_name: str | None = name  # None: nothing to show (no group or link chosen)
        self.metric = metric
        self.series: Any = None  # engine.ops.metrics.MetricSeries once loaded
        self.error: str | None = None
        self._seq = 0
        self.loads = 0  # answers shown, for tests

    @property
    def window_s(self) -> int:
        return int(getattr(self.app, "metrics_window", WINDOWS[0][0]))

    def show_series(self, title: str, scope: str, name: str | None) -> None:
        """Point the chart at another series and load it."""
        if (title, scope, name) != (self.heading, self.scope, self.series_name):
            self.heading, self.scope, self.series_name = title, scope, name
            self.series = None
            self.refresh()
        self.reload()

    def reload(self) -> None:
        cluster = getattr(self.app, "cluster", None)
        self._seq += 1
        if cluster is None or self.series_name is None:
            self.series = None
            self.refresh()
            return
        self._load(self._seq, cluster, self.scope, self.series_name, self.metric, self.window_s)

    @work(thread=True, group="chart")
    def _load(self, seq: int, cluster: Any, scope: str, name: str, metric: str, window_s: int):
        try:
            series = cluster.metrics(scope, name, metric=metric, window_s=window_s)
        except Exception as exc:  # shown in the chart; a worker must not kill the app
            self.post_message(self.Series(seq, error=exc))
        else:
            self.post_message(self.Series(seq, series))

    def on_metric_chart_series(self, message: MetricChart.Series) -> None:
        message.stop()
        if message.seq != self._seq:
            return  # an answer to an older request (another series or window)
        self.series = message.series
        self.error = None if message.error is None else str(message.error)
        self.loads += 1
        self.refresh()

    def summary(self) -> str:
        """The title line: what, latest, peak."""
        series = self.series
        if series is None:
            return self.heading
        return (
            f"{self.heading} · latest {fmt_value(series.latest, series.unit)}"
            f" · peak {fmt_value(series.peak, series.unit)}"
        )

    def render(self) -> Text:
        width = max(1, self.size.width)
        rows = max(1, self.size.height - 2)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(self.summary(), style="bold")
        text.append("\n")
        series = self.series
        label = f"last {window_label(self.window_s)}"
        if self.error is not None:
            text.append(self.error, style="red")
            return text
        if self.series_name is None:
            text.append("nothing chosen", style="dim")
            return text
        if series is None:
            text.append("loading…", style="dim")
            return text
        if not series.recorded:
            # No clock times here: nothing to place on an axis.
            text.append(
                f"no history recorded in the {label} (plet web and plet replicate record it"
                " every minute)",
                style="dim",
            )
            return text
        values, per = columns(series.points, width)
        pad = width - len(values)  # a short series sits at the right, the newest end
        for i, line in enumerate(plot(values, rows)):
            text.append(" " * pad)
            if i == rows - 1:
                # the bottom row: a dim baseline where the value was 0, so 0 and nothing
                # recorded (blank) differ
                for cell, v in zip(line, values, strict=True):
                    if v is not None and v <= 0:
                        text.append("▁", style="dim")
                    else:
                        text.append(cell, style="cyan")
            else:
                text.append(line, style="cyan")
            text.append("\n")
        start = _when(series.points[0][0], series.window_s)
        end = _when(series.points[-1][0], series.window_s)
        middle = f"{label}, {format_duration(series.resolution_s * per)} per column"
        gap = width - len(start) - len(end) - len(middle)
        if gap >= 2:
            left = gap // 2
            axis = f"{start}{' ' * left}{middle}{' ' * (gap - left)}{end}"
        else:
            axis = middle
        text.append(axis, style="dim")
        return text
