"""Schemas in the console: the topic page's Schema tab registers a version for the topic's
values (with its ACEs and inline errors), the produce form encodes JSON with it, the
message browser shows such messages decoded, and the Schemas page lists the subjects a user
may read (Flask test client, CSRF on)."""

from __future__ import annotations

import html
import json
import re

import pytest

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
HTMX = {"HX-Request": "true"}


@pytest.fixture
def topic(cluster):
    from engine.auth.principal import Principal

    ace = f"g:analysts | u:{Principal.current().user}"  # alice, and this test's own producer
    cluster.create_stream("/shop", produce_perm=ace, consume_perm=ace)
    cluster.create_topic("/shop:orders", 1)
    return "/shop:orders"


def _text(answer) -> str:
    return html.unescape(answer.get_data(as_text=True))


def test_register_from_the_topic_page_then_produce_and_read_decoded(client, topic, cluster):
    page = _text(client.get("/topics/shop:orders?tab=schema"))
    assert "Schemas of /shop:orders" in page
    assert "none: messages show as text, JSON or hex" in page
    assert "Encode with schema" not in page

    answer = client.post(
        "/topics/shop:orders/schemas",
        data={"part": "value", "schema_type": "AVRO", "schema": "{not json"},
        headers={**HTMX, "X-CSRFToken": client.csrf},
    )
    assert "Invalid schema: an Avro schema is not JSON" in _text(answer)
    assert cluster.schemas.subjects() == []

    answer = client.post(
        "/topics/shop:orders/schemas",
        data={"part": "value", "schema_type": "AVRO", "schema": json.dumps(ORDER)},
        headers={**HTMX, "X-CSRFToken": client.csrf},
    )
    assert "Registered: Avro, subject /shop:orders-value v1, schema id 1." in _text(answer)
    assert cluster.schemas.version("/shop:orders-value").id == 1

    page = _text(client.get("/topics/shop:orders"))
    assert "Encode with schema /shop:orders-value v1" in page
    answer = client.post(
        "/topics/shop:orders/produce",
        data={"value": '{"id": "seven"}', "encode": "1", "csrf_token": client.csrf},
    )
    assert answer.status_code == 400
    assert "Not valid for the schema" in _text(answer)
    assert cluster.topic(topic).partitions[0].log_end_offset == 0
    answer = client.post(
        "/topics/shop:orders/produce",
        data={"value": '{"id": 7, "item": "lamp"}', "encode": "1", "csrf_token": client.csrf},
    )
    assert answer.status_code == 200, _text(answer)

    page = _text(client.get("/topics/shop:orders?start=oldest"))
    assert '"item": "lamp"' in page
    assert "decoded: Avro, subject /shop:orders-value v1, schema id 1" in page
    hexed = _text(client.get("/topics/shop:orders?start=oldest&format=hex"))
    assert "00 00 00 00 01 0e" in hexed  # magic, id 1, then zigzag 7


def test_register_needs_produce_perm_and_csrf(client, user_client, topic, cluster):
    cluster.create_stream("/private")
    cluster.create_topic("/private:t", 1)
    answer = user_client.post(
        "/topics/private:t/schemas",
        data={"part": "value", "schema_type": "AVRO", "schema": json.dumps(ORDER)},
        headers={**HTMX, "X-CSRFToken": user_client.csrf},
    )
    assert "Access denied" in _text(answer)
    answer = user_client.post(
        "/topics/shop:orders/schemas",
        data={"part": "key", "schema_type": "AVRO", "schema": '"string"'},
        headers={**HTMX, "X-CSRFToken": user_client.csrf},
    )
    assert "Registered: Avro, subject /shop:orders-key v1" in _text(answer)
    answer = client.post(
        "/topics/shop:orders/schemas",
        data={"part": "value", "schema_type": "AVRO", "schema": json.dumps(ORDER)},
    )
    assert answer.status_code == 400  # no CSRF token
    assert cluster.schemas.subjects() == ["/shop:orders-key"]


def test_unknown_schema_id_shows_the_bytes_with_a_note(client, topic, cluster):
    from engine import Producer

    with Producer(cluster, acks=1) as producer:
        producer.send(topic, value=b"\x00\x00\x00\x00\x2aplain")
    page = _text(client.get("/topics/shop:orders?start=oldest"))
    assert "Confluent wire format? schema id 42 is not in this cluster" in page
    assert "␀␀␀␀*plain" in page


# --- the Schemas page ------------------------------------------------------------------------


def _subject_rows(page: str) -> dict[str, str]:
    return dict(re.findall(r'<tr data-subject="([^"]+)">(.*?)</tr>', page, re.S))


def test_the_schemas_page_lists_subjects_versions_compatibility_and_topics(
    client, user_client, topic, cluster
):
    order_v2 = {**ORDER, "fields": [*ORDER["fields"], {"name": "n", "type": "int", "default": 1}]}
    cluster.schemas.register("/shop:orders-value", json.dumps(ORDER))
    cluster.schemas.register("/shop:orders-value", json.dumps(order_v2))
    cluster.schemas.register("/shop:gone-key", '"string"')  # a topic that does not exist
    cluster.schemas.set_compatibility("FULL", "/shop:gone-key")
    cluster.create_stream("/private")
    cluster.create_topic("/private:t", 1)
    cluster.schemas.register("/private:t-value", json.dumps(ORDER))
    cluster.schemas.register("loose", '"string"')  # names no topic: administrators only

    answer = client.get("/schemas")
    assert answer.status_code == 200
    page = _text(answer)
    assert 'data-testid="default-compatibility">BACKWARD<' in page
    rows = _subject_rows(page)
    assert list(rows) == ["/private:t-value", "/shop:gone-key", "/shop:orders-value", "loose"]
    orders = rows["/shop:orders-value"]
    assert 'href="/topics/shop:orders?tab=schema"' in orders and "values" in orders
    assert '<td class="versions">1, 2</td>' in orders
    assert "Avro, subject /shop:orders-value v2, schema id" in orders
    assert 'BACKWARD <span class="muted">(the registry\'s)</span>' in orders
    assert "no such topic" in rows["/shop:gone-key"] and "<td>FULL</td>" in rows["/shop:gone-key"]
    assert "no such topic" in rows["loose"]
    # the nav has the page, and `g c` goes there
    assert '<a href="/schemas" aria-current="page">Schemas</a>' in page
    assert 'data-go-key="c" data-go-href="/schemas"' in page

    # a plain user sees only the subjects of streams she may read
    mine = _subject_rows(_text(user_client.get("/schemas")))
    assert list(mine) == ["/shop:gone-key", "/shop:orders-value"]
    # the filter, and htmx's part of the page
    found = client.get("/schemas", query_string={"q": "ORDERS"}, headers=HTMX)
    assert list(_subject_rows(_text(found))) == ["/shop:orders-value"]
    assert "<html" not in _text(found)


def test_a_subject_page_shows_each_version_and_who_else_has_it(client, user_client, topic, cluster):
    cluster.schemas.register("/shop:orders-value", json.dumps(ORDER))
    cluster.create_topic("/shop:copies", 1)
    cluster.schemas.register("/shop:copies-value", json.dumps(ORDER))  # the same schema
    answer = client.get("/schemas/subject", query_string={"name": "/shop:orders-value"})
    assert answer.status_code == 200
    page = _text(answer)
    assert "<h1>Subject <code>/shop:orders-value</code></h1>" in page
    assert 'href="/topics/shop:orders?tab=schema"' in page
    version = re.search(r'<tr data-version="1">(.*?)</tr>', page, re.S).group(1)
    assert '"name": "Order"' in version or '"name":"Order"' in version
    assert '/schemas/subject?name=/shop:copies-value">/shop:copies-value</a> v1' in version
    cluster.create_stream("/private")
    cluster.create_topic("/private:t", 1)
    cluster.schemas.register("/private:t-value", '"string"')
    for name in ("/private:t-value", "/nope:x-value", ""):
        assert user_client.get("/schemas/subject", query_string={"name": name}).status_code == 404
