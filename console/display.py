"""How the terminal console shows rates and progress (times and durations are the engine's
`engine.times.format_ms` and `format_duration`, sizes `engine.units.format_bytes`, as every
frontend shows them)."""

from __future__ import annotations


def fmt_rate(value: float) -> str:
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def bar(fraction: float | None, width: int = 12) -> str:
    """A text progress bar; an unknown fraction is a dotted line."""
    if fraction is None:
        return "·" * width
    full = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * full + "░" * (width - full)
