"""Sizes formatted once (engine.units), as the CLI, the web pages and the terminal show
them (the web's `bytes` filter: tests/web/test_web_engine_text.py)."""

from __future__ import annotations

import pytest

from engine.units import format_bytes


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (None, "-"),
        (0, "0 B"),
        (1023, "1,023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1023.7, "1.0 KiB"),  # a rate: rounded as shown, never "1,024 B"
        (1024 * 1024 - 1, "1.0 MiB"),  # never "1,024.0 KiB"
        (64 * 1024 * 1024, "64.0 MiB"),
        (5 * 1024**4, "5.0 TiB"),
        (3000 * 1024**4, "3,000.0 TiB"),  # the largest unit grows past 1,024
    ],
)
def test_format_bytes(size, shown):
    assert format_bytes(size) == shown
