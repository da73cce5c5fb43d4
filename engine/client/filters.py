"""The filter grammar: what a user types to pick messages, the same in the web page, the
JSON API, the terminal's filter box and `plet consume --filter` (docs/FILTERS.md).

A filter is one term:

- `name=value`, `name: value`, `name:value` (spaces around the separator are dropped): a
  header named `name` whose value is `value`. The name is everything before the first `=`
  or `:`, so the value may hold both; `*` in the value stands for any text (`\\*` is a star).
- anything else: that text, found anywhere (key, value, a header's name or value).
- a quoted `"text"` or `'text'` is taken literally (no separator, no `*`), inside it `\\"`,
  `\\'` and `\\\\` are a quote and a backslash. Quote a header name or value holding spaces,
  quotes or separators (`"my name"="a b"`), or text that would read as a header (`"a:b"`).

What reads two ways is refused with an error saying why and what to write instead, never
matched silently against nothing: a header name that is not a plain word (`12:00`, `my
host=x`), a quoted plain name (`"level":"ERROR"` is JSON text as often as a header),
nothing before or after the separator (`=x`, `host=`), a doubled separator (`host == x`),
an unclosed quote, text after a closing quote.

`parse` answers a typed term (`HeaderIs`, `Text`), or None for an empty filter; `matcher`
turns a term into a test for records. Bytes are matched as UTF-8; `ignore_case` folds case.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.errors import InvalidArgument
from engine.records import ConsumerRecord

__all__ = [
    "ANYWHERE",
    "HEADERS",
    "HeaderIs",
    "Term",
    "Text",
    "as_bytes",
    "contains",
    "matcher",
    "parse",
]

# Where a `Text` term looks: anywhere in a record, or in its headers only (a form's header
# field, which takes the same grammar).
ANYWHERE = "anywhere"
HEADERS = "headers"

SEPARATORS = "=:"
QUOTES = "\"'"
# A header name written without quotes: a plain word, as header names are in practice
# (host, content-type, trace.id, __TypeId__). Anything else before a separator is more
# likely text (a time, a sentence), so it must be quoted to mean either.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_SHOWN = 40  # characters of the filter an error repeats


@dataclass(frozen=True)
class HeaderIs:
    """A header named `name` whose value is `value`: `pattern` is the value cut at each
    wildcard `*` (one piece: the value exactly)."""

    name: str
    pattern: tuple[str, ...]

    @property
    def value(self) -> str:
        """The value as written, a wildcard as `*` (a literal star is `\\*`)."""
        return "*".join(piece.replace("*", "\\*") for piece in self.pattern)

    def describe(self) -> str:
        return f"header {self.name} = {self.value}"


@dataclass(frozen=True)
class Text:
    """`text` found in a record: `where` is ANYWHERE (key, value, a header's name or value)
    or HEADERS (a header's name or value)."""

    text: str
    where: str = ANYWHERE

    def describe(self) -> str:
        return f"{self.text!r} {'anywhere' if self.where == ANYWHERE else 'in a header'}"


Term = HeaderIs | Text


def parse(expression: str, *, where: str = ANYWHERE) -> Term | None:
    """The term `expression` means, None when it is empty (or spaces only), or
    `InvalidArgument` saying why it reads two ways and what to write instead. Text is
    kept as typed (spaces included); `where` is where a `Text` term looks."""
    if where not in (ANYWHERE, HEADERS):
        raise ValueError(f"where is {ANYWHERE!r} or {HEADERS!r}, not {where!r}")
    if not expression.strip():
        return None
    start = len(expression) - len(expression.lstrip())
    if expression[start] in QUOTES:
        text, end = _quoted(expression, start, expression)
        rest = expression[end:]
        if not rest.strip():
            return Text(text, where) if text else None  # "" finds everything: no filter
        after = rest.lstrip()
        if after[0] not in SEPARATORS:
            raise _error(
                expression,
                f"text follows the closing quote ({_shown(after)}): quote all of the text, "
                f'or write "name"=value for a header',
            )
        if not text:
            raise _error(expression, "the header name in quotes is empty")
        if _NAME.fullmatch(text):
            # `"level":"ERROR"` is JSON text more often than a header with a needless quote
            raise _error(
                expression,
                f"reads as JSON text or as the header {text!r}: write {text}{after[0]}value "
                f"for the header, or quote all of it ({_quote(expression.strip())}) to find "
                f"the text",
            )
        return HeaderIs(text, _value(expression, text, after[1:]))
    at = min((i for i in (expression.find(s) for s in SEPARATORS) if i >= 0), default=-1)
    if at < 0:
        return Text(expression, where)
    name, sep = expression[:at].strip(), expression[at]
    if not name:
        raise _error(
            expression,
            f"no header name before {sep!r}: write name{sep}value, or quote the text "
            f"to find it as it is ({_quote(expression.strip())})",
        )
    if not _NAME.fullmatch(name):
        raise _error(
            expression,
            f"{_shown(name)} is not a plain header name (a letter or '_', then letters, "
            f"digits, '_', '-', '.'): quote the text to find it as it is "
            f'({_quote(expression.strip())}), or quote the name ("{name}"{sep}value)',
        )
    return HeaderIs(name, _value(expression, name, expression[at + 1 :]))


def _value(expression: str, name: str, text: str) -> tuple[str, ...]:
    """The value after a header's separator, cut at its wildcards."""
    text = text.strip()
    if not text:
        raise _error(
            expression,
            f"no value after the header name {name!r}: write {name}=* for any value, or "
            f'{name}="" for an empty one',
        )
    if text[0] in SEPARATORS:
        raise _error(
            expression,
            f"two separators after the header name {name!r}: write {name}=value (quote a "
            f'value that starts with {text[0]!r}: {name}="{text}")',
        )
    if text[0] in QUOTES:
        value, end = _quoted(text, 0, expression)
        if text[end:].strip():
            raise _error(
                expression,
                f"text follows the quoted value ({_shown(text[end:].strip())}): quote all of it",
            )
        return (value,)
    pieces, piece, i = [], [], 0
    while i < len(text):
        if text.startswith("\\*", i):
            piece.append("*")
            i += 2
            continue
        if text[i] == "*":
            pieces.append("".join(piece))
            piece = []
        else:
            piece.append(text[i])
        i += 1
    pieces.append("".join(piece))
    return tuple(pieces)


def _quoted(text: str, start: int, expression: str) -> tuple[str, int]:
    """The quoted string opening at `start` of `text` (a part of `expression`), and where
    its closing quote ends."""
    quote = text[start]
    out, i = [], start + 1
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] in QUOTES + "\\":
            out.append(text[i + 1])
            i += 2
            continue
        if char == quote:
            return "".join(out), i + 1
        out.append(char)
        i += 1
    raise _error(expression, f"the quote {quote} is not closed")


def _error(expression: str, why: str) -> InvalidArgument:
    return InvalidArgument(f"filter {_shown(expression)}: {why}")


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "...")


def _quote(text: str) -> str:
    """`text` in the quotes that make it literal text again."""
    text = text.replace("\\", "\\\\")
    if '"' not in text:
        return f'"{text}"'
    if "'" not in text:
        return f"'{text}'"
    return '"' + text.replace('"', '\\"') + '"'


# --- matching ---------------------------------------------------------------------------------


def matcher(term: Term, *, ignore_case: bool = False) -> Callable[[ConsumerRecord], bool]:
    """A test for records: whether `term` matches one."""
    if isinstance(term, HeaderIs):
        return _header_is(term, ignore_case)
    text = contains(term.text, ignore_case)
    if term.where == HEADERS:
        return lambda r: any(text(n) or text(v) for n, v in r.headers or ())
    return lambda r: (
        text(r.key) or text(r.value) or any(text(n) or text(v) for n, v in r.headers or ())
    )


def _header_is(term: HeaderIs, ignore_case: bool) -> Callable[[ConsumerRecord], bool]:
    if ignore_case:
        name = term.name.casefold()
        text = re.compile(".*".join(re.escape(p.casefold()) for p in term.pattern), re.DOTALL)

        def is_value(data: bytes | None) -> bool:
            return (
                text.fullmatch(as_bytes(data or b"").decode("utf-8", "replace").casefold())
                is not None
            )

        return lambda r: any(n.casefold() == name and is_value(v) for n, v in r.headers or ())
    raw = re.compile(b".*".join(re.escape(p.encode()) for p in term.pattern), re.DOTALL)
    return lambda r: any(
        n == term.name and raw.fullmatch(as_bytes(v or b"")) is not None for n, v in r.headers or ()
    )


def contains(needle: str, ignore_case: bool) -> Callable[[Any], bool]:
    """A test for a key, value or header (bytes, str or None): whether it holds `needle`."""
    if not ignore_case:
        raw = needle.encode()
        return lambda data: data is not None and raw in as_bytes(data)
    if needle.isascii():
        # bytes.lower() folds ASCII only, which is all an ASCII needle can match
        low = needle.lower().encode()
        return lambda data: data is not None and low in as_bytes(data).lower()
    folded = needle.casefold()
    return lambda data: (
        data is not None and folded in as_bytes(data).decode("utf-8", "replace").casefold()
    )


def as_bytes(data: Any) -> bytes:
    """A key, value or header as bytes."""
    # a consumer made with a deserializer hands over str; the browse service's do not
    return data.encode() if isinstance(data, str) else bytes(data)
