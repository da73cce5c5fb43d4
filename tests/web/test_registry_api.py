"""The Confluent Schema Registry subset under /registry, driven by confluent-kafka's own
`SchemaRegistryClient` (and raw HTTP for bad input) against a live console on a real
socket (tests/live.py): registering, lookups, versions, ids, deletes, compatibility,
credentials and ACEs, Confluent's error codes."""

from __future__ import annotations

import base64
import json
import warnings

import pytest
import requests

warnings.filterwarnings("ignore", module="authlib")  # its own deprecation of httpx

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

ADMIN = ("admin", "admin-password-1")
ALICE = ("alice", "alice-password-1")
ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def _client(live_web, user=ADMIN) -> SchemaRegistryClient:
    return SchemaRegistryClient(
        {"url": live_web.url + "/registry", "basic.auth.user.info": f"{user[0]}:{user[1]}"}
    )


def _avro(**extra_fields) -> Schema:
    schema = json.loads(json.dumps(ORDER))
    for name, spec in extra_fields.items():
        schema["fields"].append({"name": name, **spec})
    return Schema(json.dumps(schema), "AVRO")


def _error(call) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as caught:
        call()
    return caught.value


def test_register_lookup_versions_and_ids_with_the_real_client(live_web):
    sr = _client(live_web)
    first = sr.register_schema("orders-value", _avro())
    assert first == 1
    # the same schema again is the same version; under another subject the same id
    assert sr.register_schema("orders-value", _avro()) == 1
    assert sr.register_schema("/apps:orders-value", _avro()) == 1
    second = sr.register_schema("orders-value", _avro(qty={"type": "int", "default": 1}))
    assert second == 2

    assert sr.get_subjects() == ["/apps:orders-value", "orders-value"]
    assert sr.get_versions("orders-value") == [1, 2]
    latest = sr.get_latest_version("orders-value")
    assert (latest.subject, latest.version, latest.schema_id) == ("orders-value", 2, 2)
    assert json.loads(latest.schema.schema_str)["fields"][-1]["name"] == "qty"
    v1 = sr.get_version("/apps:orders-value", 1)
    assert (v1.subject, v1.schema_id) == ("/apps:orders-value", 1)
    assert json.loads(sr.get_schema(1).schema_str) == ORDER
    found = sr.lookup_schema("orders-value", _avro())
    assert (found.version, found.schema_id) == (1, 1)
    uses = sr.get_schema_versions(1)
    assert sorted((u.subject, u.version) for u in uses) == [
        ("/apps:orders-value", 1),
        ("orders-value", 1),
    ]
    # what the engine holds is what the registry answers
    assert live_web.cluster.schemas.version("orders-value").id == 2

    # deletes: a version, then the subject (soft), then for good
    assert sr.delete_version("orders-value", 2) == 2
    assert sr.get_versions("orders-value") == [1]
    assert sr.delete_subject("orders-value") == [1]
    assert sr.get_subjects() == ["/apps:orders-value"]
    assert sr.delete_subject("orders-value", permanent=True) == [1, 2]
    assert json.loads(sr.get_schema(1).schema_str) == ORDER  # still named by /apps


def test_compatibility_config_and_enforcement(live_web):
    sr = _client(live_web)
    assert sr.get_compatibility() == "BACKWARD"
    sr.register_schema("c-value", _avro())
    # BACKWARD: a new field without a default cannot read the old data
    error = _error(lambda: sr.register_schema("c-value", _avro(qty={"type": "int"})))
    assert (error.http_status_code, error.error_code) == (409, 409)
    assert "qty" in error.error_message
    sr.set_compatibility("c-value", "NONE")
    assert sr.get_compatibility("c-value") == "NONE"
    assert sr.register_schema("c-value", _avro(qty={"type": "int"})) == 2
    assert sr.set_compatibility(level="FULL") == {"compatibility": "FULL"}
    assert sr.get_compatibility() == "FULL"
    error = _error(lambda: sr.set_compatibility("c-value", "SIDEWAYS"))
    assert (error.http_status_code, error.error_code) == (422, 42203)


def test_bad_input_gets_confluent_error_codes(live_web):
    base = live_web.url + "/registry"
    sr = _client(live_web)
    sr.register_schema("known-value", _avro())
    cases = [
        (lambda: sr.get_schema(999), 404, 40403),
        (lambda: sr.get_latest_version("nobody-value"), 404, 40401),
        (lambda: sr.get_version("known-value", 9), 404, 40402),
        (lambda: sr.lookup_schema("known-value", _avro(x={"type": "int"})), 404, 40403),
        (lambda: sr.register_schema("bad-value", Schema("{not json", "AVRO")), 422, 42201),
        (
            lambda: sr.register_schema("bad-value", Schema('{"type": "recordz"}', "AVRO")),
            422,
            42201,
        ),
        (lambda: sr.register_schema("bad-value", Schema("message {", "PROTOBUF")), 422, 42201),
        (lambda: sr.register_schema("bad-value", Schema('{"type": 5}', "JSON")), 422, 42201),
        (lambda: sr.delete_subject("known-value", permanent=True), 404, 40405),
    ]
    for call, status, code in cases:
        error = _error(call)
        assert (error.http_status_code, error.error_code) == (status, code), error

    def raw(method, path, **kw):
        answer = requests.request(method, base + path, auth=ADMIN, timeout=10, **kw)
        assert answer.headers["Content-Type"] == CONTENT_TYPE
        return answer.status_code, answer.json()["error_code"]

    assert raw("GET", "/schemas/ids/abc") == (404, 40403)
    assert raw("GET", "/schemas/ids/99999999999999999999") == (404, 40403)
    assert raw("GET", "/subjects/known-value/versions/zero") == (422, 42202)
    assert raw("GET", "/subjects/known-value/versions/0") == (422, 42202)
    assert raw("POST", "/subjects/x-value/versions", data=b"{garbage") == (400, 400)
    assert raw("POST", "/subjects/x-value/versions", data=b"[1, 2]") == (422, 422)
    assert raw("POST", "/subjects/x-value/versions", json={"schema": 5}) == (422, 42201)
    assert raw("POST", "/subjects/x-value/versions", data=b"\xff\xfe") == (400, 400)
    assert raw(
        "POST", "/subjects/x-value/versions", json={"schema": "{}", "schemaType": "XML"}
    ) == (422, 42201)
    assert raw(
        "POST",
        "/subjects/x-value/versions",
        json={"schema": json.dumps(ORDER), "references": [{"name": "a"}]},
    ) == (422, 42201)
    assert raw("PUT", "/config", json={"compatibility": 3}) == (422, 42203)
    assert raw("GET", "/no/such/endpoint") == (404, 404)
    assert raw("GET", "/config/known-value") == (404, 40408)


def test_credentials_basic_token_and_acls(live_web):
    base = live_web.url + "/registry"
    # no credentials, a wrong password, a cookie only: 401 in Confluent's shape
    answer = requests.get(base + "/subjects", timeout=10)
    assert answer.status_code == 401 and answer.json()["error_code"] == 401
    assert answer.headers["WWW-Authenticate"].startswith("Basic")
    answer = requests.get(base + "/subjects", auth=("admin", "wrong-password"), timeout=10)
    assert answer.status_code == 401
    browser = live_web.browser("admin")
    assert browser.get(base + "/subjects").status_code == 401

    # an API token as the basic password, or as a bearer token
    token = live_web.cluster.create_api_token("admin", "registry")
    sr = SchemaRegistryClient({"url": base, "basic.auth.user.info": f"token:{token}"})
    assert sr.register_schema("tok-value", _avro()) >= 1
    answer = requests.get(
        base + "/subjects", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    assert answer.status_code == 200 and "tok-value" in answer.json()

    # alice: ACEs of the subject's stream decide (produce to register, consume to read,
    # admin to delete); subjects that name no topic are the administrators'
    cluster = live_web.cluster
    cluster.create_stream("/team", produce_perm="g:analysts", consume_perm="g:analysts")
    cluster.create_stream("/private")
    alice = _client(live_web, ALICE)
    assert alice.register_schema("/team:t-value", _avro()) >= 1
    assert alice.get_latest_version("/team:t-value").version == 1
    error = _error(lambda: alice.register_schema("/private:p-value", _avro()))
    assert (error.http_status_code, error.error_code) == (403, 40301)
    error = _error(lambda: alice.register_schema("NoTopicStrategy", _avro()))
    assert (error.http_status_code, error.error_code) == (403, 40301)
    error = _error(lambda: alice.delete_subject("/team:t-value"))
    assert (error.http_status_code, error.error_code) == (403, 40301)
    _client(live_web).register_schema("/private:p-value", _avro())
    assert "/private:p-value" not in alice.get_subjects()
    assert "/team:t-value" in alice.get_subjects()
    error = _error(lambda: alice.get_latest_version("/private:p-value"))
    assert error.http_status_code == 403
    error = _error(lambda: alice.set_compatibility(level="NONE"))
    assert error.http_status_code == 403


def test_protobuf_schema_text_and_serialized_form(live_web):
    """A .proto text registered by a client: the deserializer's `format=serialized` gets
    it back as a base64 FileDescriptorProto that describes the same message."""
    from google.protobuf import descriptor_pb2

    sr = _client(live_web)
    text = 'syntax = "proto3";\npackage t;\nmessage Reading { string unit = 1; double v = 2; }\n'
    schema_id = sr.register_schema("r-value", Schema(text, "PROTOBUF"))
    assert sr.get_schema(schema_id).schema_str == text
    # (raw HTTP: the client caches the first answer per id, whatever the format)
    answer = requests.get(
        f"{live_web.url}/registry/schemas/ids/{schema_id}?format=serialized", auth=ADMIN, timeout=10
    )
    serialized = answer.json()["schema"]
    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert [m.name for m in proto.message_type] == ["Reading"]
    assert [f.name for f in proto.message_type[0].field] == ["unit", "v"]


def test_every_registry_endpoint_needs_header_credentials(app, client):
    """No credentials, a wrong password, a session cookie with or without a CSRF token:
    401 in Confluent's shape on every route, for every method, and nothing written."""
    rules = [r for r in app.url_map.iter_rules() if r.rule.startswith("/registry")]
    assert len(rules) >= 15
    anonymous = app.test_client()
    wrong = {"Authorization": "Basic " + base64.b64encode(b"admin:nope").decode()}
    for rule in rules:
        url = rule.rule.replace("<subject:subject>", "s-value").replace("<raw_id>", "1")
        url = url.replace("<version>", "1").replace("<path:rest>", "x")
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            for who, headers in (
                (anonymous, {}),
                (anonymous, wrong),
                (client, {}),
                (client, {"X-CSRFToken": client.csrf}),
            ):
                got = who.open(url, method=method, headers=headers, json={"schema": "{}"})
                assert got.status_code == 401, (method, url, got.status_code)
                assert got.json["error_code"] == 401
                assert got.headers["WWW-Authenticate"].startswith("Basic")
    assert app.extensions["partitionlet"].cluster.schemas.subjects(deleted=True) == []
