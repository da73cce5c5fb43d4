"""Jinja filters for numbers, sizes and times as the console shows them."""

from __future__ import annotations

from datetime import UTC, datetime

from flask import Flask


def human_bytes(value: float | int | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"  # pragma: no cover - the loop returns


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
    app.add_template_filter(human_bytes, "bytes")
    app.add_template_filter(number, "number")
    app.add_template_filter(ms_time, "ms_time")
