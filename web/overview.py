"""The overview page: the cluster, its volumes and their sizes, totals, live throughput,
and (under `plet web`, which runs it) background maintenance: its last passes and the
streams it skips because their stored policies are invalid."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app

from engine.ops import check
from engine.ops.maintenance import Maintenance
from web import state
from web.pages import cluster, render

overview = Blueprint("overview", __name__)

# The window the live throughput is averaged over.
THROUGHPUT_WINDOW_S = 30


def _volumes_and_rates() -> dict:
    c = cluster()
    volumes = c.volumes()
    heat = c.heat(THROUGHPUT_WINDOW_S)
    return {
        "volumes": volumes,
        "heat": heat,
        "window_s": THROUGHPUT_WINDOW_S,
        "total_bytes": sum(v.bytes for v in volumes),
    }


def _maintenance() -> Maintenance | None:
    """The app's maintenance worker, when it runs one (`plet web` does)."""
    for worker in state(current_app).workers:
        if isinstance(worker, Maintenance):
            return worker
    return None


def _maintenance_status() -> dict[str, Any]:
    worker = _maintenance()
    if worker is None:
        return {"maintenance": None}
    error = worker.last_error
    return {
        "maintenance": {
            "runs": worker.runs,
            "interval_s": worker.interval_s,
            "skipped": worker.skipped_streams,
            "error": None if error is None else f"{type(error).__name__}: {error}",
        }
    }


def _context() -> dict:
    c = cluster()
    sound, line = check.health(c)
    return {
        "cluster": c,
        "health": {
            "sound": sound,
            "line": line,
            "last": check.last_check(c),
            "damaged": c.damaged_volumes(),
        },
        "totals": c.totals(),
        "group_count": len(c.groups()),
        **_volumes_and_rates(),
        **_maintenance_status(),
    }


@overview.route("/")
def index():
    return render("overview/index.html", "overview/_live.html", **_context())


@overview.route("/overview/live")
def live():
    """The live part alone for htmx's polling; the whole page for a plain visit."""
    return render("overview/index.html", "overview/_live.html", **_context())
