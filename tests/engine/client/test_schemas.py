"""The schema registry (`cluster.schemas`) and the Confluent wire format's codec: ids,
versions, references, compatibility, ACEs, and decoding and encoding Avro, Protobuf and
JSON Schema payloads as both consoles show them."""

from __future__ import annotations

import base64
import json

import pytest

from engine import errors
from engine.auth.principal import Principal
from engine.client import schemas as sc
from engine.client.rendering import shown

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}


def _order(**extra) -> str:
    schema = json.loads(json.dumps(ORDER))
    schema["fields"] += [{"name": n, **spec} for n, spec in extra.items()]
    return json.dumps(schema)


def test_ids_versions_and_the_same_text_in_two_subjects(cluster):
    reg = cluster.schemas
    a = reg.register("orders-value", _order())
    assert (a.id, a.subject, a.version, a.schema_type) == (1, "orders-value", 1, "AVRO")
    # the same schema, spelled differently, is the same version and id
    again = reg.register("orders-value", json.dumps(ORDER, indent=4))
    assert (again.id, again.version) == (1, 1)
    other = reg.register("/apps:orders-value", _order())
    assert (other.id, other.version) == (1, 1)
    b = reg.register("orders-value", _order(qty={"type": "int", "default": 0}))
    assert (b.id, b.version) == (2, 2)
    assert reg.versions("orders-value") == [1, 2]
    assert reg.version("orders-value", "latest").id == 2
    assert reg.version("orders-value", 1).id == 1
    assert reg.uses(1) == [("/apps:orders-value", 1), ("orders-value", 1)]
    assert reg.lookup("orders-value", _order()).version == 1
    with pytest.raises(sc.SchemaNotFound):
        reg.lookup("orders-value", _order(x={"type": "int"}))
    with pytest.raises(sc.SubjectNotFound):
        reg.versions("nobody-value")
    with pytest.raises(sc.VersionNotFound):
        reg.version("orders-value", 3)
    with pytest.raises(sc.InvalidVersion):
        reg.version("orders-value", "0")


def test_deleting_and_ids_are_never_reused(cluster):
    reg = cluster.schemas
    reg.register("d-value", _order())
    reg.register("d-value", _order(qty={"type": "int", "default": 0}))
    with pytest.raises(sc.SubjectNotSoftDeleted):
        reg.delete_subject("d-value", permanent=True)
    assert reg.delete_version("d-value", 2) == 2
    assert reg.versions("d-value") == [1]
    assert reg.versions("d-value", deleted=True) == [1, 2]
    assert reg.delete_subject("d-value") == [1]
    assert reg.subjects() == [] and reg.subjects(deleted=True) == ["d-value"]
    assert reg.delete_subject("d-value", permanent=True) == [1, 2]
    with pytest.raises(sc.SchemaNotFound):
        reg.get_by_id(2)
    # a new schema gets a new id: an old message's id never names another schema
    fresh = reg.register("d-value", _order(note={"type": "string", "default": ""}))
    assert fresh.id == 3 and fresh.version == 1


def test_compatibility_levels_for_avro(cluster):
    reg = cluster.schemas
    assert reg.compatibility() == "BACKWARD"
    reg.register("c-value", _order())
    with pytest.raises(sc.IncompatibleSchema, match="qty"):
        reg.register("c-value", _order(qty={"type": "int"}))  # old data lacks it
    with pytest.raises(sc.IncompatibleSchema):
        reg.register("c-value", json.dumps({**ORDER, "fields": [{"name": "id", "type": "string"}]}))
    reg.set_compatibility("FORWARD", "c-value")
    assert reg.compatibility("c-value") == "FORWARD"
    assert reg.register("c-value", _order(qty={"type": "int"})).version == 2
    with pytest.raises(sc.IncompatibleSchema):  # v2 cannot read data without qty's peer
        reg.register("c-value", json.dumps({**ORDER, "fields": ORDER["fields"][:1]}))
    reg.set_compatibility("NONE", "c-value")
    assert (
        reg.register("c-value", json.dumps({**ORDER, "fields": ORDER["fields"][:1]})).version == 3
    )
    with pytest.raises(sc.InvalidCompatibility):
        reg.set_compatibility("SIDEWAYS")
    reg.set_compatibility(None, "c-value")
    assert reg.compatibility("c-value", fallback=False) is None


def test_invalid_schemas_are_refused_before_anything_is_written(cluster):
    reg = cluster.schemas
    bad = [
        ("{nope", "AVRO"),
        ('{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nothing"}]}', "AVRO"),
        ('{"type": 5}', "JSON"),
        ("[1]", "JSON"),
        ("message {", "PROTOBUF"),
        ('syntax = "proto3"; import "missing.proto"; message A { int32 a = 1; }', "PROTOBUF"),
        ("", "AVRO"),
        ('"string"', "XML"),
    ]
    for text, kind in bad:
        with pytest.raises(sc.InvalidSchema):
            reg.register("bad-value", text, kind)
    with pytest.raises(sc.InvalidSchema):
        reg.register(
            "bad-value", _order(), references=[{"name": "x", "subject": "none", "version": 1}]
        )
    assert reg.subjects(deleted=True) == []


def test_acls_of_the_subjects_stream(cluster):
    cluster.create_stream("/team", produce_perm="u:writer", consume_perm="u:reader")
    writer = cluster.as_principal(Principal("writer")).schemas
    reader = cluster.as_principal(Principal("reader")).schemas
    other = cluster.as_principal(Principal("mallory")).schemas
    assert writer.register("/team:t-value", _order()).version == 1
    assert reader.version("/team:t-value").version == 1
    assert writer.version("/team:t-value").version == 1  # a producer looks its schema up
    with pytest.raises(errors.AccessDenied):
        reader.register("/team:t-value", _order(x={"type": "int", "default": 0}))
    with pytest.raises(errors.AccessDenied):
        other.version("/team:t-value")
    with pytest.raises(errors.AccessDenied):
        writer.delete_subject("/team:t-value")  # admin_perm
    with pytest.raises(errors.AccessDenied):
        writer.register("free-form-subject", _order())  # names no topic
    with pytest.raises(errors.AccessDenied, match="does not exist"):
        writer.register("/nowhere:t-value", _order())
    # plain names are topics of the default stream (/kafka), as the wire listener has it
    assert writer.stream_of("orders-value") == "/kafka"
    assert writer.stream_of("/team:t-key") == "/team"
    assert other.subjects() == [] and reader.subjects() == ["/team:t-value"]
    assert sc.subjects_for_topic("/kafka:orders") == ["/kafka:orders-value", "orders-value"]
    assert sc.subjects_for_topic("/team:t", key=True) == ["/team:t-key"]


def test_avro_round_trip_references_and_damage(cluster):
    reg = cluster.schemas
    reg.register(
        "item-value",
        json.dumps(
            {"type": "record", "name": "shop.Item", "fields": [{"name": "sku", "type": "string"}]}
        ),
    )
    cart = reg.register(
        "cart-value",
        json.dumps(
            {
                "type": "record",
                "name": "shop.Cart",
                "fields": [{"name": "items", "type": {"type": "array", "items": "shop.Item"}}],
            }
        ),
        references=[{"name": "shop.Item", "subject": "item-value", "version": 1}],
    )
    assert reg.referenced_by("item-value", 1) == [cart.id]
    data = sc.encode(reg, cart, '{"items": [{"sku": "a-1"}, {"sku": "b-2"}]}')
    assert data[:5] == b"\0" + cart.id.to_bytes(4, "big")
    decoder = sc.SchemaDecoder(reg, topic="/kafka:cart")
    decoded = decoder.decode(data)
    assert decoded.ok and decoded.value == {"items": [{"sku": "a-1"}, {"sku": "b-2"}]}
    assert decoded.label == f"Avro, subject cart-value v1, schema id {cart.id}"
    # cut short, or with bytes left over: not decoded, said why
    assert "does not decode" in decoder.decode(data[:-2]).error
    assert "left over" in decoder.decode(data + b"\x00").error
    with pytest.raises(errors.InvalidArgument, match="does not fit"):
        sc.encode(reg, cart, '{"items": [{"sku": 5}]}')
    with pytest.raises(errors.InvalidArgument, match="not JSON"):
        sc.encode(reg, cart, "{items")


def _reading_file():
    from google.protobuf import descriptor_pb2

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="r.proto", package="r", syntax="proto3")
    outer = proto.message_type.add(name="Other")
    outer.field.add(name="x", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    reading = proto.message_type.add(name="Reading")
    reading.field.add(name="unit", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    inner = reading.nested_type.add(name="Inner")
    inner.field.add(name="deep", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    return proto


def test_protobuf_serialized_descriptor_and_message_indexes(cluster):
    """confluent-kafka's ProtobufSerializer registers a base64 FileDescriptorProto and
    writes message indexes (zigzag varints) before the payload."""
    from google.protobuf import descriptor_pool, message_factory

    reg = cluster.schemas
    proto = _reading_file()
    schema = reg.register(
        "r-value", base64.b64encode(proto.SerializeToString()).decode(), "PROTOBUF"
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    reading = message_factory.GetMessageClass(pool.FindMessageTypeByName("r.Reading"))
    inner = message_factory.GetMessageClass(pool.FindMessageTypeByName("r.Reading.Inner"))
    head = b"\0" + schema.id.to_bytes(4, "big")
    decoder = sc.SchemaDecoder(reg)
    # indexes [1]: count 1 (zigzag 2), index 1 (zigzag 2)
    got = decoder.decode(head + b"\x02\x02" + reading(unit="C").SerializeToString())
    assert got.ok and got.value == {"unit": "C"}
    # indexes [1, 0]: the nested Inner
    got = decoder.decode(head + b"\x04\x02\x00" + inner(deep="yes").SerializeToString())
    assert got.ok and got.value == {"deep": "yes"}
    # [0] is written as a single 0
    data = sc.encode(reg, schema, '{"x": 3}')
    assert data == head + b"\x00\x08\x03"
    assert decoder.decode(data).value == {"x": 3}
    assert "not in the schema" in decoder.decode(head + b"\x02\x0a").error
    with pytest.raises(errors.InvalidArgument, match="does not fit"):
        sc.encode(reg, schema, '{"nope": 1}')


def test_protobuf_text_with_a_well_known_import(cluster):
    reg = cluster.schemas
    text = (
        'syntax = "proto3";\npackage t;\nimport "google/protobuf/timestamp.proto";\n'
        "message Reading { string unit = 1; google.protobuf.Timestamp at = 2; }\n"
    )
    schema = reg.register("/kafka:sensors-value", text, "PROTOBUF")
    data = sc.encode(reg, schema, '{"unit": "C", "at": "2024-05-01T12:00:00Z"}')
    decoded = sc.SchemaDecoder(reg, topic="/kafka:sensors").decode(data)
    assert decoded.value == {"unit": "C", "at": "2024-05-01T12:00:00Z"}
    assert decoded.label == f"Protobuf, subject /kafka:sensors-value v1, schema id {schema.id}"


def test_json_schema_payloads_are_validated(cluster):
    reg = cluster.schemas
    schema = reg.register(
        "e-value",
        json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        "JSON",
    )
    assert sc.encode(reg, schema, '{"n": 4}') == b"\0" + schema.id.to_bytes(4, "big") + b'{"n":4}'
    with pytest.raises(errors.InvalidArgument, match="n: 'a' is not of type 'integer'"):
        sc.encode(reg, schema, '{"n": "a"}')
    decoder = sc.SchemaDecoder(reg)
    bad = b"\0" + schema.id.to_bytes(4, "big") + b'{"m": 1}'
    assert "'n' is a required property" in decoder.decode(bad).error


def test_rendering_shows_decoded_values_and_notes_the_rest(cluster):
    reg = cluster.schemas
    schema = reg.register("/kafka:o-value", _order())
    data = sc.encode(reg, schema, '{"id": 1, "item": "lamp"}')
    decoder = sc.SchemaDecoder(reg, topic="/kafka:o")
    view = shown(data, "text", decoder=decoder)
    assert view.kind == "json"
    assert view.text == '{\n  "id": 1,\n  "item": "lamp"\n}'
    assert view.note == f"decoded: Avro, subject /kafka:o-value v1, schema id {schema.id}"
    # hex shows the bytes as stored
    assert shown(data, "hex", decoder=decoder).text.startswith("00000000  00 00 00 00 01 02")
    # an id the registry does not have: shown as before, with a note, never an error
    unknown = b"\0\0\0\0\x63hello"
    view = shown(unknown, "text", decoder=decoder)
    assert view.text == "␀␀␀␀chello"
    assert "schema id 99 is not in this cluster's registry" in view.note
    # not the wire format at all: exactly as without a decoder
    assert shown(b'{"a": 1}', "json", decoder=decoder) == shown(b'{"a": 1}', "json")
    assert shown(b"\0ab", "text", decoder=decoder) == shown(b"\0ab", "text")
    # a decoder that must not load (a UI thread) says so instead of reading the catalog
    lazy = sc.SchemaDecoder(reg, load=False)
    assert "not loaded" in shown(data, "text", decoder=lazy).note
    lazy.prefetch([data])
    assert shown(data, "text", decoder=lazy).kind == "json"


def test_topic_of_subject_is_subjects_for_topic_the_other_way_round():
    from engine.client.schemas import subjects_for_topic, topic_of_subject

    assert topic_of_subject("/shop:orders-value") == ("/shop:orders", "value")
    assert topic_of_subject("/a/b:c-key") == ("/a/b:c", "key")
    assert topic_of_subject("orders-value") == ("/kafka:orders", "value")
    assert topic_of_subject("orders-key", default_stream="/k") == ("/k:orders", "key")
    for subject in ("loose", "bad name!-value", "/no-topic-value", "-value"):
        assert topic_of_subject(subject) is None
    for topic in ("/shop:orders", "/kafka:orders"):
        for subject in subjects_for_topic(topic, key=True):
            assert topic_of_subject(subject) == (topic, "key")
