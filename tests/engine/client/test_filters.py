"""The one filter grammar (engine.client.filters, docs/FILTERS.md): each form, what it
refuses and why, quoting, and how a term matches records."""

from __future__ import annotations

import pytest

from engine.client import browse, filters
from engine.client.filters import ANYWHERE, HEADERS, HeaderIs, Text, matcher, parse
from engine.errors import InvalidArgument
from engine.records import ConsumerRecord


def record(key=None, value=None, headers=()) -> ConsumerRecord:
    return ConsumerRecord(
        topic="/s:t",
        partition=0,
        offset=0,
        timestamp=0,
        timestamp_type=0,
        key=key,
        value=value,
        headers=list(headers),
    )


# --- the forms --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "typed", ["host: api-2", "host=api-2", "host:api-2", "host = api-2", " host :api-2 "]
)
def test_every_header_form_means_the_header_equals_the_value(typed):
    assert parse(typed) == HeaderIs("host", ("api-2",))
    assert parse(typed).describe() == "header host = api-2"


def test_header_names_are_plain_words():
    for name in ("content-type", "trace.id", "__TypeId__", "X-Request-ID", "_a1"):
        assert parse(f"{name}=v") == HeaderIs(name, ("v",))


def test_other_text_is_found_anywhere_as_typed():
    assert parse("api-2") == Text("api-2", ANYWHERE)
    assert parse("  two words ") == Text("  two words ", ANYWHERE)  # spaces may be wanted
    assert parse("a\\b") == Text("a\\b")  # a backslash outside quotes is itself
    assert parse("api-2", where=HEADERS) == Text("api-2", HEADERS)
    assert parse("api-2").describe() == "'api-2' anywhere"


def test_an_empty_filter_is_none():
    assert parse("") is None
    assert parse("   ") is None
    assert parse('""') is None


def test_a_value_may_hold_separators():
    # the name ends at the first separator: the rest, ':' and '=' included, is the value
    assert parse("url=http://x:80/?a=b") == HeaderIs("url", ("http://x:80/?a=b",))
    assert parse("url:http://x") == HeaderIs("url", ("http://x",))
    assert parse("eq:a=b") == HeaderIs("eq", ("a=b",))
    assert parse("ratio=1:2") == HeaderIs("ratio", ("1:2",))


def test_a_star_in_a_value_is_any_text():
    assert parse("host=api-*") == HeaderIs("host", ("api-", ""))
    assert parse("host=*") == HeaderIs("host", ("", ""))
    assert parse("host=*pi*") == HeaderIs("host", ("", "pi", ""))
    assert parse("host=a\\*b") == HeaderIs("host", ("a*b",))  # \* is a star
    assert parse("host=a\\*b").value == "a\\*b"
    assert parse('host="a*b"') == HeaderIs("host", ("a*b",))  # literal in quotes


# --- quoting ----------------------------------------------------------------------------------


def test_quoted_text_is_literal_text():
    assert parse('"host:api-2"') == Text("host:api-2")
    assert parse("'a=b'") == Text("a=b")
    assert parse(' "x" ') == Text("x")
    assert parse("""'"level":"ERROR"'""") == Text('"level":"ERROR"')
    assert parse('"say \\"hi\\""') == Text('say "hi"')
    assert parse("'it\\'s'") == Text("it's")
    assert parse('"back\\\\slash"') == Text("back\\slash")
    assert parse('"a\\nb"') == Text("a\\nb")  # other backslashes are themselves


@pytest.mark.parametrize("text", ["12:00", 'say "hi": now', 'it\'s "x"=1', "a\\b:c", "\\"])
def test_the_quoting_an_error_suggests_finds_the_text(text):
    assert parse(filters._quote(text)) == Text(text)


def test_quoted_names_and_values():
    assert parse('"my name"="a b"') == HeaderIs("my name", ("a b",))
    assert parse('"a:b" : c') == HeaderIs("a:b", ("c",))
    assert parse('host = " api-2 "') == HeaderIs("host", (" api-2 ",))
    assert parse('host=""') == HeaderIs("host", ("",))  # an empty value
    assert parse("host='=x'") == HeaderIs("host", ("=x",))


# --- what is refused, and why -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("=api-2", "no header name before '='"),
        (" : x", "no header name before ':'"),
        ("host=", "no value after the header name 'host': write host=* for any value"),
        ("host:  ", "no value after the header name 'host'"),
        ("host == api-2", "two separators after the header name 'host'"),
        ("host::api-2", "two separators"),
        ("12:00:05", "'12' is not a plain header name"),
        ("connection refused: timeout", "'connection refused' is not a plain header name"),
        ('"level":"ERROR"', "reads as JSON text or as the header 'level'"),
        ('"abc', 'the quote " is not closed'),
        ("host='abc", "the quote ' is not closed"),
        ('"a" b', "text follows the closing quote ('b')"),
        ('host="a" b', "text follows the quoted value ('b')"),
        ('""=x', "the header name in quotes is empty"),
    ],
)
def test_what_reads_two_ways_is_refused_with_the_reason(typed, why):
    with pytest.raises(InvalidArgument) as error:
        parse(typed)
    assert why in str(error.value)
    assert str(error.value).startswith(f"filter {typed!r}: ")


def test_a_refusal_says_what_to_write_instead():
    with pytest.raises(InvalidArgument, match=r'quote the text to find it as it is \("12:00"\)'):
        parse("12:00")
    with pytest.raises(InvalidArgument, match=r"""quote all of it \('"level":"ERROR"'\)"""):
        parse('"level":"ERROR"')
    # and what it suggests is accepted
    assert parse('"12:00"') == Text("12:00")
    assert parse("""'"level":"ERROR"'""") == Text('"level":"ERROR"')


def test_a_browse_filter_refuses_when_it_is_made():
    with pytest.raises(InvalidArgument):
        browse.Filter(header="=x")
    with pytest.raises(InvalidArgument):
        browse.Filter(expression="host==x")


# --- matching ---------------------------------------------------------------------------------


def test_a_header_term_matches_the_header_with_that_value():
    hit = record(value=b"v", headers=[("host", b"api-2"), ("zone", b"a")])
    near = [
        record(headers=[("host", b"api-20")]),  # the value equals, it does not contain
        record(headers=[("ghost", b"api-2")]),  # the name equals too
        record(headers=[("zone", b"api-2")]),
        record(value=b"host: api-2"),  # text, not a header
        record(headers=[("host", None)]),
    ]
    match = matcher(parse("host: api-2"))
    assert match(hit)
    assert not any(match(r) for r in near)
    assert matcher(parse("host=api-*"))(near[0])
    assert matcher(parse("host=*"))(hit) and not matcher(parse("host=*"))(near[1])
    assert matcher(parse('host=""'))(near[4])  # a null value reads as empty


def test_ignore_case_folds_the_name_and_the_value():
    r = record(headers=[("Host", "Äpi-2".encode())])
    assert not matcher(parse("host=äpi-2"))(r)
    assert matcher(parse("host=äpi-2"), ignore_case=True)(r)
    assert matcher(parse("HOST=ÄPI-*"), ignore_case=True)(r)


def test_a_text_term_looks_anywhere_or_in_headers_only():
    in_key = record(key=b"api-2")
    in_header = record(headers=[("host", b"api-2")])
    in_name = record(headers=[("api-2", b"")])
    anywhere = matcher(parse("api-2"))
    headers = matcher(parse("api-2", where=HEADERS))
    assert all(anywhere(r) for r in (in_key, in_header, in_name))
    assert not headers(in_key) and headers(in_header) and headers(in_name)
    assert not anywhere(record())  # a null key and value hold nothing


def test_bytes_and_text_are_matched_as_utf8():
    assert filters.contains("é", False)("café".encode())
    assert filters.contains("É", True)("café")  # a deserialized str
    assert not filters.contains("x", False)(None)
