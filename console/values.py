"""Message keys, values and headers as the console shows them: a one-line preview, and the
whole of it as text, JSON or a hex dump. Anything a message carries is data, never markup."""

from __future__ import annotations

import json
from typing import Any

from engine import ConsumerRecord

VIEW_MODES = ("text", "json", "hex")


def as_bytes(data: Any) -> bytes | None:
    if data is None:
        return None
    if isinstance(data, str):
        return data.encode()
    return bytes(data)


def as_text(data: Any) -> str:
    raw = as_bytes(data)
    return "null" if raw is None else raw.decode("utf-8", errors="replace")


def preview(data: Any, width: int = 60) -> str:
    """One line: newlines and control characters shown as symbols, cut at `width`."""
    raw = as_bytes(data)
    if raw is None:
        return "null"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = "0x" + raw[: width // 2].hex()
    text = "".join(
        "⏎" if ch == "\n" else "·" if (ord(ch) < 32 or ord(ch) == 127) else ch for ch in text
    )
    return text if len(text) <= width else text[: width - 1] + "…"


def render(data: Any, mode: str) -> str:
    """The whole value in one of VIEW_MODES."""
    raw = as_bytes(data)
    if mode == "hex":
        return hexdump(raw or b"")
    if raw is None:
        return "null (a tombstone)" if mode == "text" else "null"
    if mode == "json":
        try:
            return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
        except (ValueError, UnicodeDecodeError) as exc:
            return f"(not JSON: {exc})\n\n{as_text(raw)}"
    return as_text(raw)


def hexdump(raw: bytes) -> str:
    lines = []
    for start in range(0, len(raw), 16):
        chunk = raw[start : start + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {hexes:<47}  {text}")
    return "\n".join(lines) if lines else "(empty)"


def matches(record: ConsumerRecord, needle: str) -> bool:
    """True if `needle` occurs (ignoring case) in the key, the value or a header."""
    if not needle:
        return True
    low = needle.lower()
    fields = [record.key, record.value]
    for name, value in record.headers or ():
        fields.append(name)
        fields.append(value)
    return any(data is not None and low in as_text(data).lower() for data in fields)
