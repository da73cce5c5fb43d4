"""One header syntax for forms and the command line: `name=value`, one per header
(engine.headers), with errors that say the syntax."""

from __future__ import annotations

import pytest

from engine.client.producer import MAX_HEADERS
from engine.errors import InvalidArgument
from engine.headers import FORM_HELP, parse_header, parse_headers


def test_name_is_before_the_first_equals_sign_and_spaces_around_go():
    assert parse_header("unit=C") == ("unit", b"C")
    assert parse_header(" trace = a=b ") == ("trace", b"a=b")
    assert parse_header("empty=") == ("empty", b"")
    assert parse_header("city=Zürich") == ("city", "Zürich".encode())
    assert FORM_HELP == "name=value, one per line"


def test_form_text_is_one_header_a_line_and_blank_lines_are_skipped():
    text = "unit=C\r\n\n  \nsource = web form\n"
    assert parse_headers(text) == [("unit", b"C"), ("source", b"web form")]
    assert parse_headers(["a=1", "", "a=2"]) == [("a", b"1"), ("a", b"2")]  # repeats kept
    assert parse_headers("") == []


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("unit: C", "line 1: header 'unit: C' is not name=value: write it as 'unit=C'"),
        ("ok=1\nno equals", "line 2: header 'no equals' is not name=value (no '=')"),
        ("=C", "line 1: header '=C' has an empty name: write name=value"),
        ("  =C", "line 1: header '=C' has an empty name: write name=value"),
    ],
)
def test_errors_name_the_line_and_say_the_syntax(given, message):
    with pytest.raises(InvalidArgument) as caught:
        parse_headers(given)
    assert str(caught.value) == message


def test_options_are_not_numbered_and_a_long_header_is_cut_in_the_message():
    with pytest.raises(InvalidArgument) as caught:
        parse_headers(["a=1", "host: web1"], numbered=False)
    assert str(caught.value) == "header 'host: web1' is not name=value: write it as 'host=web1'"
    with pytest.raises(InvalidArgument) as caught:
        parse_headers(["x" * 10_000])
    assert len(str(caught.value)) < 120


def test_more_headers_than_the_producer_takes_are_refused_before_sending():
    assert len(parse_headers(["h=v"] * MAX_HEADERS)) == MAX_HEADERS
    with pytest.raises(InvalidArgument, match=f"at most {MAX_HEADERS:,} headers"):
        parse_headers("h=v\n" * 100_000)
