"""How commands print: tables and JSON on stdout, counts and progress on stderr (times and
durations in tables are the engine's: `engine.times.format_ms`, `format_duration`).

Data goes to stdout so that it stays a clean stream for pipes; what is said about it goes
to stderr.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import click


def echo_err(message: str) -> None:
    click.echo(message, err=True)


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def echo_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "") -> None:
    """Left-aligned columns, two spaces apart, header in bold on a terminal."""
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(row: Sequence[str]) -> str:
        return indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))

    click.echo(click.style(line(headers).rstrip(), bold=True))
    for row in cells:
        click.echo(line(row).rstrip())


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))
