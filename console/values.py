"""Message keys, values and headers as the console shows them: a one-line preview, and the
whole of it as text, JSON or a hex dump. Anything a message carries is data, never markup."""

from __future__ import annotations

from typing import Any

from engine.client.rendering import FORMATS, as_bytes, shown

VIEW_MODES = FORMATS


def as_text(data: Any) -> str:
    raw = as_bytes(data)
    return "null" if raw is None else raw.decode("utf-8", errors="replace")


def preview(data: Any, width: int = 60, decoder: Any = None) -> str:
    """One line: newlines and control characters shown as symbols, cut at `width`;
    bytes that are not UTF-8 as hex, which says more than replacement characters; data in
    the Confluent wire format decoded with its schema when `decoder` has it."""
    raw = as_bytes(data)
    if decoder is not None:
        view = shown(raw, "json", decoder=decoder)
        if view.note.startswith("decoded"):
            return view.line(width)
    if raw is not None:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            text = "0x" + raw[: width // 2].hex()
            return text if len(text) <= width else text[: width - 1] + "…"
    return shown(raw).line(width)


def headers_preview(headers: Any, width: int = 30) -> str:
    """A message's headers on one line, `name=value` as the produce dialog takes them,
    separated by commas and cut at `width`; "" when it has none."""
    text = ", ".join(f"{name}={preview(value, width)}" for name, value in headers or ())
    return text if len(text) <= width else text[: width - 1] + "…"


def render(data: Any, mode: str, decoder: Any = None) -> str:
    """The whole value in one of VIEW_MODES (engine.client.rendering, as the web shows it);
    with a `decoder` (engine.client.schemas.SchemaDecoder), data in the Confluent wire
    format decoded with its schema, noted with the schema's subject, version and id."""
    view = shown(data, mode, decoder=decoder)
    if view.kind == "null":
        return "null (a tombstone)" if mode == "text" else "null"
    if mode == "hex" and not view.text:
        return "(empty)"
    return f"({view.note})\n\n{view.text}" if view.note else view.text
