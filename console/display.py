"""How the terminal console shows times and durations: short and fixed-width (sizes are
the engine's `engine.units.format_bytes`, as every frontend shows them)."""

from __future__ import annotations

from datetime import UTC, datetime


def fmt_ms(ms: int | None) -> str:
    """Epoch milliseconds as UTC time, to the millisecond (as the CLI prints them)."""
    if ms is None:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


def fmt_s(ms: int | None) -> str:
    """Epoch milliseconds as UTC time, to the second."""
    return fmt_ms(ms)[:19]


def fmt_seconds(seconds: int) -> str:
    if seconds == 0:
        return "forever"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def fmt_rate(value: float) -> str:
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def bar(fraction: float | None, width: int = 12) -> str:
    """A text progress bar; an unknown fraction is a dotted line."""
    if fraction is None:
        return "·" * width
    full = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * full + "░" * (width - full)
