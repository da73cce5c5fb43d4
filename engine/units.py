"""Sizes as people read them: `format_bytes(1536)` is "1.5 KiB".

One formatting for every frontend (the CLI's tables, the web pages, the terminal console),
in binary units (1 KiB = 1,024 bytes, as the engine's own limits are stated).
"""

from __future__ import annotations

UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_bytes(size: int | float | None) -> str:
    """`size` bytes in the largest unit that keeps the number under 1,024: whole bytes,
    else one decimal ("1,023 B", "1.5 KiB", "64.0 MiB"); None (not known) is "-". A rate
    formats the same, the caller adds "/s"."""
    if size is None:
        return "-"
    value = float(size)
    digits = 0
    for unit in UNITS:
        # rounded as it will be shown, so 1,048,575 bytes is "1.0 MiB", never "1,024.0 KiB"
        if abs(round(value, digits)) < 1024 or unit == UNITS[-1]:
            return f"{value:,.{digits}f} {unit}"
        value /= 1024
        digits = 1
    raise AssertionError("unreachable")  # the last unit always returns
