"""Data masking (engine.masking): the `mask` policy's grammar, what a mask does to a record,
and where the engine applies it: the browse service (pages, filters, exports) and message
search, for a principal without `unmask_perm`; never for the owner or an administrator,
and never for the embedded Consumer."""

from __future__ import annotations

import json

import pytest

from engine import Consumer, Principal, Producer, TopicPartition, errors, policies
from engine.client import browse, message_search
from engine.masking import MARKER, parse
from engine.records import ConsumerRecord

ORDER = {"card": {"number": "4111-1111", "exp": "12/30"}, "items": [{"sku": "a", "price": 3}]}


def record(value=None, key=b"k", headers=()):
    raw = json.dumps(value).encode() if isinstance(value, dict) else value
    return ConsumerRecord("/s:t", 0, 7, 1000, 0, key, raw, list(headers))


# --- the grammar -------------------------------------------------------------------------


def test_parse_reads_every_item_and_stores_a_normal_form():
    mask = parse(' key ,value.card.number, value."first name".x , headers.Authorization')
    assert mask.key and not mask.value
    assert mask.paths == (("card", "number"), ("first name", "x"))
    assert mask.headers == {"authorization"}
    assert mask.text == 'key, value.card.number, value."first name".x, headers.Authorization'
    assert parse(mask.text) == mask
    assert not parse("") and not parse("   ")
    assert parse("key, key").text == "key"


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("vlue.x", 1, "unknown item 'vlue.x'"),
        ("key,, value", 5, "an empty item"),
        ("value.a..b", 9, "a field name is missing"),
        ("value.", 7, "a field name is missing"),
        ("value.a b", 8, "expected '.' or ','"),
        ("headers. ", 9, "a header name is missing"),
        ('value.""', 7, "a field name is empty"),
    ],
)
def test_a_bad_mask_is_refused_naming_its_column(text, column, words):
    with pytest.raises(errors.InvalidPolicy) as caught:
        policies.validate({"mask": text})
    assert caught.value.column == column
    assert caught.value.policy == "mask"
    assert words in str(caught.value)
    assert str(caught.value).startswith("mask: ")


def test_the_policies_are_in_the_table_with_their_defaults():
    assert policies.DEFAULTS["mask"] == ""
    assert policies.DEFAULTS["unmask_perm"] == "u:<creator>"
    assert "unmask_perm" in policies.ACE_POLICIES
    assert policies.policy("mask").kind == "text"
    assert "mask" not in policies.TOPIC_POLICIES  # the stream's, like its ACEs
    with pytest.raises(errors.InvalidPolicy):
        policies.validate({"mask": 3})


# --- what a mask does to a record ---------------------------------------------------------


def test_json_fields_are_masked_keeping_the_shape_and_the_rest():
    masked = parse("value.card.number, value.items.price").record(record(ORDER))
    assert json.loads(masked.value) == {
        "card": {"number": MARKER, "exp": "12/30"},
        "items": [{"sku": "a", "price": MARKER}],
    }
    assert masked.key == b"k"


def test_a_record_without_the_fields_is_returned_as_stored():
    raw = b'{"a":  1}'
    original = record(raw)
    assert parse("value.card.number").record(original) is original


def test_a_value_that_is_not_json_is_masked_whole_when_fields_are_named():
    # a name given twice: returned as stored, the first copy would show
    twice = b'{"card": {"number": "4111"}, "card": {"exp": 1}}'
    for raw in (b"card 4111", b"\x00\x00\x00\x00\x01\x02", b'{"broken', twice):
        assert parse("value.card").record(record(raw)).value == MARKER.encode()


def test_whole_key_value_and_headers_keep_nulls_and_header_names():
    mask = parse("key, value, headers.AUTHORIZATION")
    masked = mask.record(record(ORDER, headers=[("authorization", b"secret"), ("unit", b"C")]))
    assert (masked.key, masked.value) == (MARKER.encode(), MARKER.encode())
    assert masked.headers == [("authorization", MARKER.encode()), ("unit", b"C")]
    empty = mask.record(record(None, key=None, headers=[("Authorization", None)]))
    assert (empty.key, empty.value, empty.headers) == (None, None, [("Authorization", None)])


# --- where the engine applies it ----------------------------------------------------------


@pytest.fixture
def masked_topic(cluster):
    """/s:t with a mask, readable by everyone, unmasked by its creator (the default)."""
    cluster.create_stream("/s", consume_perm="p", mask="value.card.number, headers.authorization")
    cluster.create_topic("/s:t", partitions=1)
    with Producer(cluster) as producer:
        producer.send(
            "/s:t", json.dumps(ORDER).encode(), key=b"o1", headers=[("authorization", b"tok")]
        )
        producer.send("/s:t", b'{"card": {"number": "5500"}}', key=b"o2")
    return cluster


def test_the_browse_service_masks_pages_exports_and_filters_for_a_viewer(masked_topic):
    viewer = masked_topic.as_principal(Principal("bob"))
    assert not viewer.may_unmask("/s") and masked_topic.may_unmask("/s")
    query = browse.Query("/s:t", seek=browse.OLDEST)
    page = browse.browse(viewer, query)
    first = page.records[0]
    assert json.loads(first.value)["card"] == {"number": MARKER, "exp": "12/30"}
    assert first.headers == [("authorization", MARKER.encode())]
    assert any("****" in note and "unmask" in note for note in page.notes)
    exported = list(browse.export(viewer, query, 10))
    assert [json.loads(r.value)["card"]["number"] for r in exported] == [MARKER, MARKER]
    # a filter sees the masked record: it cannot find what is hidden
    hidden = browse.Query("/s:t", seek=browse.OLDEST, filter=browse.Filter(value="4111"))
    assert browse.browse(viewer, hidden).records == []
    # the owner sees the data
    owner = browse.browse(masked_topic, query)
    assert json.loads(owner.records[0].value)["card"]["number"] == "4111-1111"
    assert not any("unmask" in note for note in owner.notes)
    assert len(browse.browse(masked_topic, hidden).records) == 1


def test_unmask_perm_and_administrators_see_the_data(masked_topic):
    masked_topic.edit_stream("/s", unmask_perm="g:auditors")
    auditor = masked_topic.as_principal(Principal("carol", ("auditors",)))
    admin = masked_topic.as_principal(Principal("root", superuser=True))
    for reader in (auditor, admin):
        page = browse.browse(reader, browse.Query("/s:t", seek=browse.OLDEST))
        assert json.loads(page.records[0].value)["card"]["number"] == "4111-1111"


def test_message_search_matches_and_returns_the_masked_message(masked_topic):
    viewer = masked_topic.as_principal(Principal("bob"))
    hidden = message_search.search(viewer, "/s:t", 'value.card.number == "4111-1111"')
    assert hidden.wait(10)
    assert hidden.results() == [] and hidden.progress.matches == 0
    assert hidden.mask is not None
    found = message_search.search(viewer, "/s:t", "value.card.exp")
    assert found.wait(10)
    (match,) = found.results()
    assert json.loads(match.value)["card"]["number"] == MARKER
    assert match.headers == [("authorization", MARKER.encode())]
    mine = message_search.search(masked_topic, "/s:t", 'value.card.number == "4111-1111"')
    assert mine.wait(10) and len(mine.results()) == 1 and mine.mask is None


def test_the_embedded_consumer_reads_the_data_itself(masked_topic):
    viewer = masked_topic.as_principal(Principal("bob"))
    consumer = Consumer(viewer, enable_auto_commit=False)
    try:
        tp = TopicPartition("/s:t", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = consumer.poll(timeout_ms=1000)[tp]
    finally:
        consumer.close(autocommit=False)
    assert json.loads(got[0].value)["card"]["number"] == "4111-1111"


# --- the command line ---------------------------------------------------------------------


def test_plet_stream_create_and_edit_take_the_mask_and_unmask_perm(cluster, cluster_path):
    from tests.engine.cli.test_cli import ok, run

    where = ("--cluster", cluster_path)
    ok("stream", "create", "/pay", "--mask", "value.card.number ,key", *where)
    ok("stream", "edit", "/pay", "--unmask-perm", "g:auditors", *where)
    info = ok("stream", "info", "/pay", *where).stdout
    assert "value.card.number, key" in info and "g:auditors" in info
    bad = run("stream", "edit", "/pay", "--mask", "value.", *where)
    assert bad.exit_code == 1 and "mask: a field name is missing at column 7" in bad.stderr
