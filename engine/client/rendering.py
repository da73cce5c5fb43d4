"""A message's key, value or header shown to a person: as text, pretty JSON or a hex dump.

Both consoles show messages through these functions, so a value reads the same in the
browser and in the terminal. The result is always plain text: what a message carries is
data, never markup (each frontend escapes it its own way). Control characters are shown
as their Unicode symbols (U+2400...), so a value cannot move a terminal's cursor or hide
text on a page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

FORMATS = ("text", "json", "hex")
SHOW_BYTES = 16 * 1024  # shown as text or JSON; the rest is cut (and said so)
HEX_BYTES = 4 * 1024  # shown as a hex dump
PREVIEW_CHARS = 120

# C0 controls but tab and newline, and DEL, as their visible symbols
_CONTROLS = {c: 0x2400 + c for c in range(32) if c not in (9, 10)}
_CONTROLS[127] = 0x2421


@dataclass(frozen=True)
class Shown:
    """A key, value or header as shown. `kind` is "null", "text", "json", "binary" (text
    that was not valid UTF-8) or "hex"; `note` says what a reader should know (cut, not
    JSON, not UTF-8)."""

    text: str
    kind: str
    size: int
    truncated: bool = False
    note: str = ""

    def line(self, width: int = PREVIEW_CHARS) -> str:
        """One line of at most `width` characters."""
        line = " ".join(self.text.split()) if self.kind == "json" else self.text
        line = line.replace("\n", "⏎")
        return line if len(line) <= width else line[: width - 1] + "…"

    @property
    def preview(self) -> str:
        return self.line()

    @property
    def long(self) -> bool:
        """Whether the preview hides something (a console offers to expand it)."""
        return self.truncated or "\n" in self.text or len(self.text) > PREVIEW_CHARS


def visible(text: str) -> str:
    """`text` (a header's name, say) with its control characters shown as symbols."""
    return text.translate(_CONTROLS)


def as_bytes(data: Any) -> bytes | None:
    """Record data as bytes (deserialized str values are encoded as UTF-8)."""
    if data is None:
        return None
    return data.encode() if isinstance(data, str) else bytes(data)


def shown(data: Any, fmt: str = "text", *, say_not_json: bool = True, decoder: Any = None) -> Shown:
    """`data` as text, pretty JSON (when it parses; else as text, with a note unless
    `say_not_json` is false) or a hex dump.

    With a `decoder` (engine.client.schemas.SchemaDecoder), data in the Confluent wire
    format (magic byte 0, schema id) is shown as text and JSON decoded with its schema, as
    pretty JSON noted with the schema's subject, version and id; when it does not decode,
    as it would be without a decoder, with a note saying why."""
    raw = as_bytes(data)
    if raw is None:
        return Shown("null", "null", 0)
    size = len(raw)
    wire_note = ""
    if decoder is not None and fmt != "hex":
        decoded = decoder.decode(raw)
        if decoded is not None and decoded.ok:
            text = decoded.text
            cut = len(text) > SHOW_BYTES
            return Shown(
                text[:SHOW_BYTES].translate(_CONTROLS),
                "json",
                size,
                cut,
                f"decoded: {decoded.label}",
            )
        if decoded is not None:
            wire_note = f"Confluent wire format? {decoded.error}"
    if wire_note:
        plain = shown(raw, fmt, say_not_json=False)
        return Shown(plain.text, plain.kind, size, plain.truncated, wire_note)
    if fmt == "hex":
        part = raw[:HEX_BYTES]
        return Shown(hex_dump(part), "hex", size, size > len(part))
    part = raw[:SHOW_BYTES]
    truncated = size > len(part)
    try:
        text = part.decode("utf-8")
        kind = "text"
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(part) - 3:  # cut inside a character
            text, kind = part[: exc.start].decode("utf-8", "replace"), "text"
        else:
            text, kind = part.decode("utf-8", "replace"), "binary"
    note = ""
    if fmt == "json" and not truncated:
        try:
            pretty = (
                json.dumps(json.loads(text), indent=2, ensure_ascii=False)
                if kind == "text"
                else None
            )
        except (ValueError, RecursionError):  # a hostile value may nest deeply
            pretty = None
            note = "not JSON"
        else:
            if pretty is not None:
                return Shown(pretty.translate(_CONTROLS), "json", size)
        if kind == "binary":
            note = "not JSON"
    elif fmt == "json":
        note = "too long to parse as JSON here"
    if not say_not_json:
        note = ""
    if kind == "binary":
        note = note or "not valid UTF-8: see hex"
    return Shown(text.translate(_CONTROLS), kind, size, truncated, note)


def hex_dump(data: bytes) -> str:
    """Lines of 16 bytes: offset, bytes in hex, and the printable ASCII ones."""
    lines = []
    for at in range(0, len(data), 16):
        row = data[at : at + 16]
        hexes = " ".join(f"{b:02x}" for b in row)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{at:08x}  {hexes:<47}  {text}")
    return "\n".join(lines)
