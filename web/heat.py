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
from werkzeug.exceptions import BadRequest

from engine import errors, names
from engine.ops.heat import HeatMap, Load
from engine.records import TopicPartition
from web import heatmap
from web.filters import ms_time
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
        (grid.label_width + i * grid.cell_width, ms_time(columns[i].start_ms)[11:19])
        for i in range(0, len(columns), step)
    ]


def _view(name: str, rows: list[Row], columns: list[heatmap.Column]) -> HeatView:
    grid = heatmap.heat_grid([r.values for r in rows], top=AXIS_H)
    return HeatView(name, rows, columns, grid, _ticks(columns, grid), heatmap.legend(grid.vmax))


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
    if topic is not None and partition is not None:
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
        "volume_map": _view("volumes", volume_rows, columns),
        "partition_map": _view("partitions", partition_rows, columns),
        "columns": columns,
    }


def _context() -> dict[str, Any]:
    params = _params()
    include = ()
    if params["topic"] is not None and params["partition"] is not None:
        include = (TopicPartition(params["topic"], params["partition"]),)
    # only the hottest rows the page shows: fast when 100,000 partitions are warm
    hm = cluster().heat(params["window"], top=HOTTEST, by=params["metric"], include=include)
    label, unit, _ = METRICS[params["metric"]]
    return {
        **params,
        **build_maps(hm, params["metric"], params["topic"], params["partition"]),
        "heat": hm,
        "metrics": METRICS,
        "windows": WINDOWS,
        "metric_label": label,
        "unit": unit,
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
