"""Front-end assets: htmx and uPlot from the npm registry (installed by `npm ci` into node_modules at
set-up, never committed, never from a CDN) and the console's own files in web/static."""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, abort, redirect, send_from_directory, url_for

ROOT = Path(__file__).resolve().parent.parent
NODE_MODULES = ROOT / "node_modules"

# URL name -> file under node_modules (only these are served, nothing else from there).
VENDOR = {
    "htmx.min.js": "htmx.org/dist/htmx.min.js",
    # uPlot draws the metrics history's charts (web/static/charts.js)
    "uPlot.iife.min.js": "uplot/dist/uPlot.iife.min.js",
    "uPlot.min.css": "uplot/dist/uPlot.min.css",
}

# the console's own files are the app's static folder (web/static, endpoint "static")
assets = Blueprint("assets", __name__)


@assets.route("/vendor/<name>")
def vendor(name: str):
    relative = VENDOR.get(name)
    if relative is None:
        abort(404)
    path = NODE_MODULES / relative
    if not path.is_file():
        abort(
            500,
            description=f"{path} is missing: run `npm ci` (make setup does) to install "
            "the web assets",
        )
    return send_from_directory(path.parent, path.name, max_age=3600)


@assets.route("/favicon.ico")
def favicon():
    """Browsers ask for /favicon.ico whatever the page links: send them to the SVG icon
    (web/static/favicon.svg, which base.html links) rather than answer 404."""
    return redirect(url_for("static", filename="favicon.svg"))


def missing_vendor_files() -> list[str]:
    """The vendor files not installed (for a warning at start-up)."""
    return [
        str(NODE_MODULES / rel) for rel in VENDOR.values() if not (NODE_MODULES / rel).is_file()
    ]
