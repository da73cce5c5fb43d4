"""Jinja filters for numbers, sizes, times and durations as the console shows them, and
the help of the header syntax (the engine's, so every frontend says the same)."""

from __future__ import annotations

from flask import Flask

from engine.headers import FORM_HELP
from engine.times import format_duration, format_ms
from engine.units import format_bytes


def number(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def init_app(app: Flask) -> None:
    app.add_template_filter(format_bytes, "bytes")  # the engine's, as the CLI and TUI show sizes
    app.add_template_filter(number, "number")
    # the engine's times and durations, as the CLI and TUI show them
    app.add_template_filter(format_ms, "ms_time")
    app.add_template_filter(format_duration, "duration")
    # what a produce form says under its headers field: the engine's one syntax
    app.jinja_env.globals["header_help"] = FORM_HELP
