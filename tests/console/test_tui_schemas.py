"""The terminal console and schemas: the message view shows a value in the Confluent wire
format decoded with its registered Avro schema (subject, version, id), and the produce
dialog encodes JSON with the topic's schema."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Checkbox, DataTable, Static, TextArea

from console.screens.produce import ProduceScreen
from console.widgets.messages import MessagesPane
from engine import Consumer, Producer, TopicPartition
from engine.client.schemas import encode

pytestmark = pytest.mark.asyncio

TOPIC = "/shop:orders"
ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}


@pytest.fixture
def orders(cluster):
    """/shop:orders with an Avro value schema and one message written with it."""
    cluster.create_stream("/shop")
    cluster.create_topic(TOPIC, partitions=1)
    schema = cluster.schemas.register(TOPIC + "-value", json.dumps(ORDER))
    producer = Producer(cluster, acks=1)
    value = encode(cluster.schemas, schema, '{"id": 42, "item": "lamp"}')
    producer.send(TOPIC, value=value, key=b"o-42")
    producer.flush()
    producer.close()
    return cluster, schema


def _text(app, selector: str) -> str:
    return str(app.query_one(selector, Static).content)


async def test_message_view_shows_the_avro_value_decoded(orders, make_app, until):
    cluster, schema = orders
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        table = app.query_one("#msg-table", DataTable)
        table.focus()
        table.move_cursor(row=0)
        decoded = (
            f"(decoded: Avro, subject {TOPIC}-value v1, schema id {schema.id})\n\n"
            '{\n  "id": 42,\n  "item": "lamp"\n}'
        )
        await until(pilot, lambda: _text(app, "#msg-detail-body") == decoded)
        # the table's preview is the decoded value on one line
        assert '{ "id": 42, "item": "lamp" }' in str(table.get_row_at(0)[5])
        await pilot.press("v")  # json: decoded too
        await until(pilot, lambda: '"item": "lamp"' in _text(app, "#msg-detail-body"))
        await pilot.press("v")  # hex: the bytes as stored
        hex_start = f"00000000  00 00 00 00 {schema.id:02x} 54"
        await until(pilot, lambda: _text(app, "#msg-detail-body").startswith(hex_start))


async def test_produce_dialog_encodes_json_with_the_schema(orders, make_app, until, click):
    cluster, schema = orders
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        await pilot.press("p")
        assert isinstance(app.screen, ProduceScreen)
        screen = app.screen
        encode_box = screen.query_one("#produce-encode", Checkbox)
        await until(pilot, lambda: encode_box.display)
        assert str(encode_box.label) == f"Encode with schema {TOPIC}-value v1"
        encode_box.value = True

        screen.query_one("#produce-value", TextArea).text = '{"id": "x"}'
        await click(pilot, "#produce-send")
        await until(pilot, lambda: "not valid for the schema" in _text(screen, "#produce-error"))
        assert cluster.topic(TOPIC).partitions[0].log_end_offset == 1

        screen.query_one("#produce-value", TextArea).text = '{"id": 7, "item": "desk"}'
        await click(pilot, "#produce-send")  # pressed again: once it can take the click
        await until(pilot, lambda: not isinstance(app.screen, ProduceScreen))

    consumer = Consumer(cluster, enable_auto_commit=False)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 1)
    [record] = consumer.poll(timeout_ms=1000)[tp]
    consumer.close()
    from engine.client.schemas import SchemaDecoder

    decoded = SchemaDecoder(cluster.schemas).decode(record.value)
    assert record.value[:5] == b"\0" + schema.id.to_bytes(4, "big")
    assert decoded.value == {"id": 7, "item": "desk"}


async def test_register_a_schema_from_the_command_palette(cluster, make_app, until, click):
    from textual.command import CommandList
    from textual.widgets import Select

    from console.screens.register_schema import RegisterSchemaScreen

    cluster.create_stream("/shop")
    cluster.create_topic(TOPIC, partitions=1)
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        await pilot.press("ctrl+p")
        await pilot.press(*"Register a schema")
        commands = app.screen.query_one(CommandList)

        def found() -> bool:  # the palette's search runs in a worker
            return commands.highlighted == 0 and "Register a schema" in str(
                commands.get_option_at_index(0).prompt
            )

        await until(pilot, found)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RegisterSchemaScreen))
        screen = app.screen
        screen.query_one("#schema-text", TextArea).text = "{not json"
        await click(pilot, "#schema-register")
        await until(pilot, lambda: "Invalid schema" in _text(screen, "#schema-error"))
        assert cluster.schemas.subjects() == []

        screen.query_one("#schema-part", Select).value = "key"
        screen.query_one("#schema-text", TextArea).text = '"string"'
        await click(pilot, "#schema-register")  # pressed again: once it can take the click
        await until(pilot, lambda: not isinstance(app.screen, RegisterSchemaScreen))
    assert cluster.schemas.version(TOPIC + "-key").schema == '"string"'
