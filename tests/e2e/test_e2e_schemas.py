"""Schemas end to end (issue 16, item 3): confluent-kafka's serializers register their
schemas with the console's `/registry` (HTTP basic as a console user) and produce through
a live Kafka wire listener on the same cluster; the web console's message browser shows
the messages decoded, with the schema's subject, version and id."""

from __future__ import annotations

import json
import re
import warnings

import pytest
from playwright.sync_api import expect

from engine.wire import KafkaServer
from tests.e2e.conftest import ADMIN, ADMIN_PASSWORD, open_produce, shot

warnings.filterwarnings("ignore", module="authlib")  # its own deprecation of httpx

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "price", "type": "double"},
    ],
}


@pytest.fixture(scope="module")
def wire(live_server):
    server = KafkaServer(live_server.cluster, listen=("127.0.0.1", 0)).start()
    try:
        host, port = server.address
        yield f"{host}:{port}"
    finally:
        server.close()


def _registry(live_server):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient(
        {
            "url": live_server.url + "/registry",
            "basic.auth.user.info": f"{ADMIN}:{ADMIN_PASSWORD}",
        }
    )


def _produce(bootstrap: str, topic: str, serializer, values: list) -> None:
    from confluent_kafka import SerializingProducer
    from confluent_kafka.serialization import StringSerializer

    producer = SerializingProducer(
        {
            "bootstrap.servers": bootstrap,
            "key.serializer": StringSerializer("utf_8"),
            "value.serializer": serializer,
        }
    )
    for i, value in enumerate(values):
        producer.produce(topic, key=f"k{i}", value=value)
    assert producer.flush(30) == 0


def _topic_page(page, live_server, topic: str):
    page.goto(f"{live_server.url}/topics/kafka:{topic}?start=oldest")
    return page.get_by_role("table", name=f"Messages of /kafka:{topic}")


def test_avro_serializer_message_shows_decoded(admin_page, live_server, wire):
    from confluent_kafka.schema_registry.avro import AvroSerializer

    registry = _registry(live_server)
    serializer = AvroSerializer(registry, json.dumps(ORDER))
    _produce(
        wire,
        "orders-avro",
        serializer,
        [{"id": 7, "item": "widget", "price": 2.5}, {"id": 8, "item": "gadget", "price": 4.0}],
    )
    schema_id = registry.get_latest_version("orders-avro-value").schema_id

    table = _topic_page(admin_page, live_server, "orders-avro")
    first = table.locator("tr.message").first
    value = first.locator("td.msg-value")
    expect(value).to_contain_text('"item": "widget"')
    expect(value).to_contain_text('"id": 7')
    expect(value).to_contain_text('"price": 2.5')
    expect(value).to_contain_text(
        f"decoded: Avro, subject orders-avro-value v1, schema id {schema_id}"
    )
    expect(table).to_contain_text('"item": "gadget"')
    shot(admin_page, "schemas-avro-decoded")

    # hex still shows the bytes as stored: the magic byte and the id first
    admin_page.get_by_label("Show as").select_option("hex")
    expect(first.locator("td.msg-value")).to_contain_text(f"00 00 00 00 {schema_id:02x}")


def _reading_class():
    """A Protobuf message class made at run time (no generated module to ship)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(
        name="e2e_reading.proto", package="e2e", syntax="proto3"
    )
    message = proto.message_type.add(name="Reading")
    string, double = (
        descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    )
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    message.field.add(name="sensor", number=1, type=string, label=optional)
    message.field.add(name="celsius", number=2, type=double, label=optional)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("e2e.Reading"))


def test_protobuf_serializer_message_shows_decoded(admin_page, live_server, wire):
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    registry = _registry(live_server)
    reading = _reading_class()
    serializer = ProtobufSerializer(reading, registry, {"use.deprecated.format": False})
    _produce(wire, "readings-proto", serializer, [reading(sensor="kitchen", celsius=21.5)])

    value = _topic_page(admin_page, live_server, "readings-proto").locator("td.msg-value").first
    expect(value).to_contain_text('"sensor": "kitchen"')
    expect(value).to_contain_text('"celsius": 21.5')
    expect(value).to_contain_text(re.compile(r"decoded: Protobuf, subject readings-proto-value v1"))


def test_json_schema_serializer_message_shows_decoded(admin_page, live_server, wire):
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Event",
        "type": "object",
        "properties": {"user": {"type": "integer"}, "action": {"type": "string"}},
        "required": ["user", "action"],
    }
    registry = _registry(live_server)
    serializer = JSONSerializer(json.dumps(schema), registry)
    _produce(wire, "events-json", serializer, [{"user": 42, "action": "login"}])

    value = _topic_page(admin_page, live_server, "events-json").locator("td.msg-value").first
    expect(value).to_contain_text('"user": 42')
    expect(value).to_contain_text('"action": "login"')
    expect(value).to_contain_text(re.compile(r"decoded: JSON Schema, subject events-json-value v1"))


def test_produce_form_encodes_json_with_the_schema(admin_page, live_server):
    """The topic page's produce form writes JSON in the wire format with the topic's
    schema; JSON that does not fit it is a form error next to the value."""
    cluster = live_server.cluster
    cluster.create_stream("/e2e-schemas")
    cluster.create_topic("/e2e-schemas:orders", 1)
    cluster.schemas.register("/e2e-schemas:orders-value", json.dumps(ORDER))

    page = admin_page
    page.goto(f"{live_server.url}/topics/e2e-schemas:orders")
    produce = open_produce(page)
    produce.get_by_label("Message value").fill('{"id": 1, "item": "bolt"}')
    produce.get_by_label("Encode with schema /e2e-schemas:orders-value v1").check()
    produce.get_by_role("button", name="Produce", exact=True).click()
    expect(produce.locator("#produce-value-error")).to_contain_text("Not valid for the schema")

    produce.get_by_label("Message value").fill('{"id": 1, "item": "bolt", "price": 0.25}')
    produce.get_by_role("button", name="Produce", exact=True).click()
    expect(produce.get_by_role("status")).to_contain_text("Written to partition 0 at offset 0")

    page.goto(f"{live_server.url}/topics/e2e-schemas:orders")
    value = page.locator("td.msg-value").first
    expect(value).to_contain_text('"item": "bolt"')
    expect(value).to_contain_text("decoded: Avro, subject /e2e-schemas:orders-value v1")


def test_g_c_opens_the_schemas_page_and_a_subject(admin_page, live_server):
    """`g c` (docs/WEB.md) answered 404: the Schemas page lists the subjects with their
    topic, versions and compatibility, and a subject's page shows its versions."""
    cluster = live_server.cluster
    cluster.create_stream("/e2e-subjects")
    cluster.create_topic("/e2e-subjects:orders", 1)
    cluster.schemas.register("/e2e-subjects:orders-value", json.dumps(ORDER))
    page = admin_page
    page.goto(live_server.url + "/")
    page.keyboard.press("g")
    page.keyboard.press("c")
    expect(page).to_have_url(re.compile(r"/schemas$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Schemas")
    expect(page.get_by_role("navigation").get_by_role("link", name="Schemas")).to_have_attribute(
        "aria-current", "page"
    )
    page.get_by_label("Subject contains").fill("e2e-subjects")
    row = page.locator('tr[data-subject="/e2e-subjects:orders-value"]')
    expect(row).to_contain_text("/e2e-subjects:orders values")
    expect(row).to_contain_text("BACKWARD (the registry's)")
    expect(page).to_have_url(re.compile(r"q=e2e-subjects"))
    shot(page, "schemas")
    row.get_by_role("link", name="/e2e-subjects:orders-value").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Subject /e2e-subjects:orders-value")
    expect(page.locator('tr[data-version="1"] pre.value')).to_contain_text('"name": "Order"')
    page.get_by_role("link", name="/e2e-subjects:orders", exact=True).click()
    expect(page.get_by_role("tab", name="Schema")).to_have_attribute("aria-selected", "true")
