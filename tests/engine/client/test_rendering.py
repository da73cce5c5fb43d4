"""How a key, value or header is shown to a person, once for both consoles."""

from __future__ import annotations

from console import values
from engine.client import rendering
from engine.client.rendering import SHOW_BYTES, hex_dump, shown


def test_text_json_and_hex():
    assert shown(None, "text").kind == "null"
    assert shown(b'{"a": [1]}', "json").text == '{\n  "a": [\n    1\n  ]\n}'
    assert shown(b"plain", "json").note == "not JSON"
    assert shown(b"a\x1bb", "text").text == "a\u241bb"  # no escape sequence gets through
    assert hex_dump(b"AB") == "00000000  41 42" + " " * 44 + "AB"
    assert shown("é", "hex").text == "00000000  c3 a9" + " " * 44 + ".."


def test_a_long_value_is_cut_on_a_character_boundary():
    long = shown("é".encode() * SHOW_BYTES, "text")
    assert long.truncated and long.kind == "text" and "\ufffd" not in long.text
    assert len(long.text.encode()) <= SHOW_BYTES


def test_bytes_that_are_not_utf8_say_so():
    view = shown(b"\xff\xfeA", "text")
    assert view.kind == "binary" and view.note == "not valid UTF-8: see hex"


def test_a_line_preview_folds_newlines_and_cuts():
    assert shown(b"a\nb").line(10) == "a⏎b"
    assert shown(b"x" * 50).line(10) == "x" * 9 + "…"
    assert rendering.visible("unit\x07") == "unit\u2407"


def test_the_terminal_shows_what_the_web_shows():
    for data in (b'{"k": 1}', b"plain", b"a\x1bb", b"\x00\x01\xff"):
        for mode in ("text", "json", "hex"):
            web = shown(data, mode)
            assert web.text in values.render(data, mode)
