"""The overview page: the cluster, its volumes and their sizes, totals, live throughput."""

from __future__ import annotations

from flask import Blueprint

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


def _context() -> dict:
    c = cluster()
    return {
        "cluster": c,
        "totals": c.totals(),
        "group_count": len(c.groups()),
        **_volumes_and_rates(),
    }


@overview.route("/")
def index():
    return render("overview/index.html", "overview/_live.html", **_context())


@overview.route("/overview/live")
def live():
    """The live part alone for htmx's polling; the whole page for a plain visit."""
    return render("overview/index.html", "overview/_live.html", **_context())
