"""The heat page: recent load as two heat maps drawn as SVG on the server, volumes by time
and the hottest partitions by time, for one metric over one window, with a colour legend,
the numbers in every cell's tooltip, and tables as the accessible alternative.

`?topic=/s:t&partition=N` highlights that partition's row (added below the hottest ones
when it is not among them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, request
from markupsafe import Markup, escape
from werkzeug.exceptions import BadRequest

from engine import errors, names
from engine.ops.heat import HeatMap, Load
from engine.records import TopicPartition
from engine.times import format_ms
from engine.units import format_bytes
from web import heatmap
from web.filters import number
from web.pages import cluster, render

heat = Blueprint("heat", __name__)

# metric -> (label, unit, the Load property it reads)
METRICS: dict[str, tuple[str, str, str]] = {
    "write_messages": ("Write msg/s", "msg/s", "write_messages_per_s"),
    "write_bytes": ("Write bytes/s", "B/s", "write_bytes_per_s"),
    "read_messages": ("Read msg/s", "msg/s", "read_messages_per_s"),
    "read_bytes": ("Read bytes/s", "B/s", "read_bytes_per_s"),
}
WINDOWS: dict[int, str] = {300: "5 min", 900: "15 min", 3600: "1 h"}
DEFAULT_METRIC = "write_messages"
DEFAULT_WINDOW = 300
HOTTEST = 30
REFRESH_S = 5
AXIS_H = 22  # room above the cells for the time axis


@dataclass(frozen=True)
class Row:
    label: str
    values: list[float]
    total: float
    tp: TopicPartition | None = None
    volume: int | None = None
    highlighted: bool = False
    extra: bool = False  # shown because it was asked for, not among the hottest


@dataclass(frozen=True)
class HeatView:
    """One heat map: its rows, columns and cell geometry."""

    name: str
    rows: list[Row]
    columns: list[heatmap.Column]
    grid: heatmap.Grid
    ticks: list[tuple[float, str]]
    legend: list[heatmap.LegendStop]
    cells: Markup  # every cell's <rect>, with its tooltip


def value_text(value: float, unit: str) -> str:
    """A value with its unit, as the page says it everywhere (cells, totals, scale)."""
    if unit == "B/s":
        return f"{format_bytes(value)}/s"
    return f"{number(value, 2 if 0 < value < 1 else 1)} msg/s"


def _cells_svg(rows: list[Row], columns: list[heatmap.Column], grid: heatmap.Grid, unit: str):
    """The cells as SVG, written here rather than in a template loop: an hour's map has
    2,000 cells, and escaping each one's attributes one by one was most of the page's time.
    What a cell says is escaped once per row (its label) and column (its time)."""
    labels = [escape(r.label) for r in rows]
    # the time of day (UTC, as the axis): the date of a window of an hour or less is today's
    times = [f"{format_ms(c.start_ms)[11:19]} +{c.seconds} s" for c in columns]
    out = []
    for cell in grid.cells:
        out.append(
            f'<rect class="heat-cell" data-cell="{cell.row}:{cell.column}" x="{cell.x:g}" '
            f'y="{cell.y:g}" width="{cell.width:g}" height="{cell.height:g}" fill="{cell.fill}">'
            f"<title>{labels[cell.row]}, {times[cell.column]}: "
            f"{value_text(cell.value, unit)}</title></rect>"
        )
    return Markup("".join(out))


def _value(load: Load, metric: str) -> float:
    return float(getattr(load, METRICS[metric][2]))


def _params() -> dict[str, Any]:
    """The page's query parameters, validated: garbage is a 400 with a message."""
    metric = request.args.get("metric", DEFAULT_METRIC)
    if metric not in METRICS:
        raise BadRequest(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    raw_window = request.args.get("window", str(DEFAULT_WINDOW))
    try:
        window = int(raw_window)
    except ValueError:
        window = -1
    if window not in WINDOWS:
        raise BadRequest(
            f"window must be one of {', '.join(str(w) for w in WINDOWS)} seconds, "
            f"not {raw_window!r}"
        )
    topic = request.args.get("topic") or None
    partition: int | None = None
    if topic is not None:
        try:
            names.split_full_name(topic)
        except errors.InvalidName as exc:
            raise BadRequest(f"topic must be a full name /stream:topic: {exc}") from None
    raw_partition = request.args.get("partition")
    if raw_partition not in (None, ""):
        if topic is None:
            raise BadRequest("partition needs a topic")
        if not raw_partition.isdigit():
            raise BadRequest(f"partition must be a number from 0, not {raw_partition!r}")
        partition = int(raw_partition)
    return {"metric": metric, "window": window, "topic": topic, "partition": partition}


def _ticks(columns: list[heatmap.Column], grid: heatmap.Grid) -> list[tuple[float, str]]:
    """About six time labels along the top, at column starts (UTC)."""
    if not columns:
        return []
    step = max(1, math.ceil(len(columns) / 6))
    return [
        (grid.label_width + i * grid.cell_width, format_ms(columns[i].start_ms)[11:19])
        for i in range(0, len(columns), step)
    ]


def _view(name: str, rows: list[Row], columns: list[heatmap.Column], unit: str) -> HeatView:
    grid = heatmap.heat_grid([r.values for r in rows], top=AXIS_H)
    return HeatView(
        name,
        rows,
        columns,
        grid,
        _ticks(columns, grid),
        heatmap.legend(grid.vmax),
        _cells_svg(rows, columns, grid, unit),
    )


def _series(series: list[Load], metric: str, columns: list[heatmap.Column]) -> list[float]:
    return heatmap.merge_values([_value(load, metric) for load in series], columns)


def build_maps(hm: HeatMap, metric: str, topic: str | None, partition: int | None) -> dict:
    columns = heatmap.merge_columns(hm.buckets, hm.bucket_s)
    volume_rows = [
        Row(
            f"volume {vid}",
            _series(series, metric, columns),
            _value(hm.volumes[vid], metric),
            volume=vid,
        )
        for vid, series in sorted(hm.volume_series.items())
    ]
    ranked = sorted(
        ((tp, load) for tp, load in hm.partitions.items() if _value(load, metric) > 0),
        key=lambda item: (-_value(item[1], metric), item[0]),
    )[:HOTTEST]

    def wanted(tp: TopicPartition) -> bool:
        return topic is not None and tp.topic == topic and partition in (None, tp.partition)

    partition_rows = [
        Row(
            f"{tp.topic} [{tp.partition}]",
            _series(hm.partition_series[tp], metric, columns),
            _value(load, metric),
            tp=tp,
            highlighted=wanted(tp),
        )
        for tp, load in ranked
    ]
    # the partition asked for, when cool; not one of a stream the user may not consume,
    # whose load is not theirs to see, even as zeros (docs/WEB.md, "What users see")
    if (
        topic is not None
        and partition is not None
        and cluster().may_consume(names.split_full_name(topic)[0])
    ):
        tp = TopicPartition(topic, partition)
        if not any(r.tp == tp for r in partition_rows):
            series = hm.partition_series.get(tp, [Load()] * len(hm.buckets))
            load = hm.partitions.get(tp, Load(seconds=hm.window_s))
            partition_rows.append(
                Row(
                    f"{topic} [{partition}]",
                    _series(series, metric, columns),
                    _value(load, metric),
                    tp=tp,
                    highlighted=True,
                    extra=True,
                )
            )
    return {
        "volume_map": _view("volumes", volume_rows, columns, METRICS[metric][1]),
        "partition_map": _view("partitions", partition_rows, columns, METRICS[metric][1]),
        "columns": columns,
    }


def _context() -> dict[str, Any]:
    params = _params()
    include: tuple[TopicPartition, ...] = ()
    if params["topic"] is not None and params["partition"] is not None:
        include = (TopicPartition(params["topic"], params["partition"]),)
    # only the hottest rows the page shows: fast when 100,000 partitions are warm
    hm = cluster().heat(
        params["window"],
        top=HOTTEST,
        by=params["metric"],
        include=include,
        columns=heatmap.MAX_COLUMNS,
    )
    label, unit, _ = METRICS[params["metric"]]
    return {
        **params,
        **build_maps(hm, params["metric"], params["topic"], params["partition"]),
        "heat": hm,
        "metrics": METRICS,
        "windows": WINDOWS,
        "metric_label": label,
        "unit": unit,
        "value_text": value_text,  # the cells' tooltips and the totals say values alike
        "hottest": HOTTEST,
        "refresh_s": REFRESH_S,
        "swatches": heatmap.legend_swatches(),
        "text_colour": heatmap.text_colour,
    }


@heat.route("/heat")
def index():
    return render("heat/index.html", "heat/_maps.html", **_context())


@heat.route("/heat/live")
def live():
    return render("heat/index.html", "heat/_maps.html", **_context())
