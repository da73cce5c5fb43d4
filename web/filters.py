"""Jinja filters for numbers, sizes and times as the console shows them, and the help
of the header syntax (both the engine's, so every frontend says the same)."""

from __future__ import annotations

from datetime import UTC, datetime

from flask import Flask

from engine.headers import FORM_HELP
from engine.units import format_bytes


def number(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def ms_time(value: int | None) -> str:
    """Epoch milliseconds as UTC ISO time with milliseconds (what seek by time accepts)."""
    if value is None or value < 0:
        return "-"
    return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def init_app(app: Flask) -> None:
    app.add_template_filter(format_bytes, "bytes")  # the engine's, as the CLI and TUI show sizes
    app.add_template_filter(number, "number")
    app.add_template_filter(ms_time, "ms_time")
    # what a produce form says under its headers field: the engine's one syntax
    app.jinja_env.globals["header_help"] = FORM_HELP
