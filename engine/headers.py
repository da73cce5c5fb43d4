"""Message headers written as text: `name=value`, one per header (DESIGN, "Times, headers
and records in text").

The one syntax of the web and terminal produce forms (one header a line) and of
`plet produce --header name=value` (one header an option). The name is everything before
the first `=` and the value everything after it (so a value may hold `=`); spaces around
either are dropped and the value is stored as UTF-8. A blank line is skipped. The errors
say the syntax, and recognise the `name: value` of HTTP and of older forms.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.client.producer import MAX_HEADERS
from engine.errors import InvalidArgument

SYNTAX = "name=value"
# What a form says under its headers field.
FORM_HELP = f"{SYNTAX}, one per line"

_SHOWN = 40  # characters of a bad header an error repeats


def _shown(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "...")


def parse_header(text: str) -> tuple[str, bytes]:
    """One `name=value` as a header; `InvalidArgument` saying the syntax if it is not one."""
    name, sep, value = text.partition("=")
    if not sep:
        colon_name, colon, colon_value = text.partition(":")
        if colon and colon_name.strip():  # `name: value`: say how to write it instead
            fix = f"{colon_name.strip()}={colon_value.strip()}"
            raise InvalidArgument(
                f"header {_shown(text)} is not {SYNTAX}: write it as {_shown(fix)}"
            )
        raise InvalidArgument(f"header {_shown(text)} is not {SYNTAX} (no '=')")
    if not name.strip():
        raise InvalidArgument(f"header {_shown(text)} has an empty name: write {SYNTAX}")
    return name.strip(), value.strip().encode()


def parse_headers(lines: str | Iterable[str], *, numbered: bool = True) -> list[tuple[str, bytes]]:
    """Headers from `name=value` lines: a form's text (split into lines) or the values of
    repeated options. Blank lines are skipped. An error names the line (`numbered`, as a
    form wants; an option's own text says which one it is) and says the syntax; more than
    the producer's `MAX_HEADERS` is refused here, next to the field, before any send."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    headers: list[tuple[str, bytes]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            header = parse_header(line)
        except InvalidArgument as exc:
            raise InvalidArgument(f"line {number}: {exc}" if numbered else str(exc)) from None
        if len(headers) >= MAX_HEADERS:
            raise InvalidArgument(f"a message may carry at most {MAX_HEADERS:,} headers")
        headers.append(header)
    return headers
