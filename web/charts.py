"""The metrics history as charts (engine.ops.metrics, `Cluster.metrics`): what every page's
chart shares, and the fragment its window buttons load.

A chart is one `<figure class="chart">` (templates/_chart.html, one macro for every page)
that carries its data in a `data-points` JSON attribute; web/static/charts.js draws it with
uPlot (served from node_modules, web/assets.py). The data are embedded rather than fetched:
the JSON API opens with bearer tokens only, which a browser page does not hold, and an
embedded chart is drawn in the same response that lists its numbers. Each figure has a
server-rendered caption (latest and peak) and a "Data" table, so the numbers do not need
the canvas.

Who sees a series (docs/WEB.md, "What users see"): a stream's or topic's to those who may
consume the stream, a group's to those its describe_perm lets in (the engine checks both,
`Cluster.metrics`: 403 otherwise), a link's to every user, as the replication page shows
links; a series of what does not exist is a 404.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, request, url_for

from engine import errors
from engine.ops.metrics import MetricSeries, replica_name
from engine.replication import links
from web.pages import cluster, render, wants_partial

charts = Blueprint("charts", __name__)

# The windows a chart offers: (key, seconds, button text, accessible name).
WINDOWS = (
    ("1h", 3600, "1 h", "last hour"),
    ("6h", 6 * 3600, "6 h", "last 6 hours"),
    ("24h", 24 * 3600, "24 h", "last 24 hours"),
    ("7d", 7 * 86400, "7 d", "last 7 days"),
)
WINDOW_SECONDS = {key: seconds for key, seconds, _, _ in WINDOWS}
DEFAULT_WINDOW = "1h"
# The Data table lists at most this many points, newest first (a day of minutes is 1,440).
TABLE_ROWS = 120
# What the legend and table call each metric.
LABELS = {
    "write_messages": "Written",
    "write_bytes": "Written",
    "read_messages": "Read",
    "read_bytes": "Read",
    "copied_messages": "Copied",
    "copied_bytes": "Copied",
    "lag_messages": "Lag",
    "lag_seconds": "Lag",
}


@charts.record_once
def _globals(setup: Any) -> None:
    # globals, not context: _chart.html's macro is imported without the page's context
    setup.app.jinja_env.globals.update(
        chart_windows=WINDOWS,
        chart_table_rows=TABLE_ROWS,
        replica_series_name=replica_name,
    )


def parse_window(text: str | None) -> int:
    """A window as `1h`, `6h`, `24h`, `7d` or whole seconds -> seconds (the engine checks
    the bounds)."""
    if text is None or text == "":
        return WINDOW_SECONDS[DEFAULT_WINDOW]
    if text in WINDOW_SECONDS:
        return WINDOW_SECONDS[text]
    if text.isascii() and text.isdigit() and len(text) <= 9:
        return int(text)
    raise errors.InvalidArgument(
        f"window must be one of {', '.join(WINDOW_SECONDS)} or whole seconds, not {text[:40]!r}"
    )


def window_key(seconds: int) -> str | None:
    for key, value, _, _ in WINDOWS:
        if value == seconds:
            return key
    return None


def check_visible(c: Any, scope: str, name: str) -> None:
    """Raise NotFound (404) when the user may not see what the series measures: the
    stream, topic, group or replication link, looked up as the pages look them up."""
    if scope == "stream":
        c.stream(name)
    elif scope == "topic":
        c.topic(name)
    elif scope == "group":
        c.group(name)
    elif scope == "replica":
        stream, sep, target = name.partition(" -> ")
        if not sep or not stream or not target:
            raise errors.InvalidArgument(
                f"a replica series is named 'STREAM -> TARGET', not {name[:200]!r}"
            )
        # the links as recorded: measuring them would open every target (or call it over
        # HTTP) for each chart
        if not any(r.stream == stream and r.target == target for r in links(c, measure=False)):
            raise errors.NotFound(f"stream {stream} has no replication link to {target!r}")


def series_json(series: MetricSeries) -> dict[str, Any]:
    """A series as the API answers it."""
    return {
        "scope": series.scope,
        "name": series.name,
        "metric": series.metric,
        "unit": series.unit,
        "resolution_s": series.resolution_s,
        "window_s": series.window_s,
        "latest": series.latest,
        "peak": series.peak,
        "points": [[t, v] for t, v in series.points],
    }


@dataclass(frozen=True)
class Chart:
    """What _chart.html draws: one or two series of one scope and name over a window."""

    id: str
    title: str
    scope: str
    name: str
    series: list[MetricSeries]
    labels: list[str]
    window_s: int

    @property
    def window(self) -> str | None:
        return window_key(self.window_s)

    @property
    def data(self) -> str:
        """The data-points attribute: times in epoch seconds (uPlot's) and each series'
        values, None for a gap."""
        times = [t // 1000 for t, _ in self.series[0].points]
        return json.dumps(
            {
                "t": times,
                "series": [
                    {
                        "label": label,
                        "unit": s.unit,
                        "values": [None if v is None else round(v, 4) for _, v in s.points],
                    }
                    for label, s in zip(self.labels, self.series, strict=True)
                ],
            },
            separators=(",", ":"),
        )

    @property
    def recorded(self) -> int:
        return len(self.series[0].recorded)

    @property
    def rows(self) -> list[tuple[str, list[float | None]]]:
        """The Data table: (UTC time, a value per series) for the points with a value,
        newest first, at most TABLE_ROWS."""
        out = []
        for i in range(len(self.series[0].points) - 1, -1, -1):
            values = [s.points[i][1] for s in self.series]
            if all(v is None for v in values):
                continue
            t = self.series[0].points[i][0]
            out.append((utc_minute(t), values))
            if len(out) == TABLE_ROWS:
                break
        return out

    def url(self, window: str) -> str:
        """The fragment that redraws this chart over another window."""
        return url_for(
            "charts.fragment",
            scope=self.scope,
            name=self.name,
            metric=[s.metric for s in self.series],
            title=self.title,
            id=self.id,
            window=window,
        )


def utc_minute(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def make_chart(
    c: Any,
    scope: str,
    name: str,
    metrics: tuple[str, ...] | list[str],
    *,
    title: str,
    chart_id: str,
    window_s: int | None = None,
) -> Chart:
    """A chart of one or two `metrics` of a series (the engine checks scope and metrics)."""
    if not 1 <= len(metrics) <= 2:
        raise errors.InvalidArgument("a chart shows one or two metrics")
    window_s = WINDOW_SECONDS[DEFAULT_WINDOW] if window_s is None else window_s
    series = [c.metrics(scope, name, metric=m, window_s=window_s) for m in metrics]
    labels = [f"{LABELS.get(s.metric, s.metric)} ({s.unit})" for s in series]
    return Chart(chart_id, title, scope, name, series, labels, window_s)


def _safe_id(text: str) -> str:
    cleaned = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_") else "-" for ch in text)
    return cleaned[:80] or "chart"


@charts.route("/charts")
def fragment():
    """One chart over the window asked for (the window buttons' htmx request); the series'
    visibility is checked as the pages check it."""
    scope = request.args.get("scope", "cluster")
    name = request.args.get("name", "")
    wanted = request.args.getlist("metric") or ["write_messages"]
    window_s = parse_window(request.args.get("window"))
    c = cluster()
    check_visible(c, scope, name)
    chart_id = _safe_id(request.args.get("id", "chart"))
    try:
        chart = make_chart(
            c,
            scope,
            name,
            wanted,
            title=request.args.get("title", "")[:200] or f"{scope} {name}".strip(),
            chart_id=chart_id,
            window_s=window_s,
        )
    except errors.AccessDenied as exc:
        # a series of a stream the user may not consume: the slot says so (htmx swaps
        # only a 2xx answer), a plain request gets the 403
        if not wants_partial():
            raise
        return render("_chart_denied.html", None, chart_id=chart_id, message=str(exc))
    return render("_chart_fragment.html", None, chart=chart)
