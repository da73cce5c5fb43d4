"""The Confluent Schema Registry REST API, the subset confluent-kafka's serializers and
`SchemaRegistryClient` use, mounted at `/registry` (docs/SCHEMAS.md has the list).

It is an API for clients, not pages: exempt from CSRF (it takes no cookie: a session
cookie a browser adds is dropped, as web/api does) and open only with credentials in the
`Authorization` header: HTTP basic with a console user's name and password or an API token
as the password (`basic.auth.user.info=alice:plet_...`, the wire listener's SASL/PLAIN
rules, engine.wire.auth), or `Bearer TOKEN`. The request then acts as that user, so the
streams' ACEs decide (engine.client.schemas). Answers are
`application/vnd.schemaregistry.v1+json`; errors are Confluent's
`{"error_code": 40401, "message": ...}` with its HTTP statuses.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from flask import Blueprint, Response, g, request
from flask.blueprints import BlueprintSetupState
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.routing import PathConverter

from engine import errors
from engine.auth import logins
from engine.client import schemas as sc
from engine.wire.auth import AuthenticationFailed, login_plain
from web.errors import too_large_message
from web.pages import app_cluster, cluster
from web.security import login_guard

registry = Blueprint("registry", __name__)


class SubjectConverter(PathConverter):
    """A subject: like `path`, but it may start with a slash (`/apps:orders-value`, which a
    client sends as %2Fapps%3Aorders-value and arrives decoded)."""

    regex = ".+?"
    part_isolating = False  # it spans segments, so matching must not split it at slashes


# converters must be known before the blueprint's rules are added to the app's map
def _add_subject_converter(state: BlueprintSetupState) -> None:
    state.app.url_map.converters.setdefault("subject", SubjectConverter)


registry.record_once(_add_subject_converter)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
REALM = 'Basic realm="partitionlet schema registry"'
MAX_BODY = 2 * sc.MAX_SCHEMA_CHARS  # a register body larger than this is refused (413)


class _Answer(Exception):
    """An error answer in Confluent's shape."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _json(obj: Any, status: int = 200) -> Response:
    response = Response(json.dumps(obj), status=status, mimetype=CONTENT_TYPE)
    response.headers["Cache-Control"] = "no-store"
    return response


def _error(status: int, code: int, message: str) -> Response:
    response = _json({"error_code": code, "message": message}, status)
    if status == 401:
        response.headers["WWW-Authenticate"] = REALM
    return response


@registry.errorhandler(_Answer)
def _answer(exc: _Answer) -> Response:
    return _error(exc.status, exc.code, exc.message)


@registry.errorhandler(RequestEntityTooLarge)
def _too_large(exc: RequestEntityTooLarge) -> Response:
    return _error(413, 413, too_large_message())


@registry.errorhandler(errors.PartitionletError)
def _engine_error(exc: errors.PartitionletError) -> Response:
    code = getattr(exc, "code", None)
    if isinstance(exc, errors.AccessDenied):
        return _error(403, 40301, str(exc))
    if isinstance(exc, errors.NotFound):
        return _error(404, code or 40400, str(exc))
    if isinstance(exc, sc.IncompatibleSchema):
        return _error(409, 409, str(exc))
    if isinstance(exc, ValueError):
        return _error(422, code or 42200, str(exc))
    if isinstance(exc, sc.SubjectNotSoftDeleted):
        return _error(404, exc.code, str(exc))  # Confluent answers this one with 404
    if isinstance(exc, errors.IllegalState):
        return _error(409, 409, str(exc))
    if isinstance(exc, errors.TryLater):  # busy (protoc runs, password hashes): come back
        response = _error(503, 50003, str(exc))
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
    return _error(500, 50001, f"Error in the backend data store: {exc}")


@registry.before_request
def _authenticate() -> Response | None:
    # whatever web/auth.py found in a cookie is dropped: only the Authorization header counts
    g.user = None
    g.cluster = None
    header = request.headers.get("Authorization") or ""
    scheme, _, credentials = header.partition(" ")
    credentials = credentials.strip()
    # every login path shares one limiter per client address (engine.auth.logins)
    address = request.remote_addr or "unknown"
    limiter = login_guard().limiter
    try:
        limiter.check(address)  # 429 while the address waits
        if scheme.lower() == "basic" and credentials:
            try:
                name, sep, password = (
                    base64.b64decode(credentials, validate=True).decode("utf-8").partition(":")
                )
            except (binascii.Error, UnicodeDecodeError):
                return _error(401, 401, "malformed basic credentials")
            if not sep:
                return _error(401, 401, "basic credentials are user:password")
            user = login_plain(app_cluster(), f"\0{name}\0{password}".encode(), address, limiter)
        elif scheme.lower() == "bearer" and credentials:
            owner = logins.token_user(app_cluster(), credentials, address, limiter)
            if owner is None:
                return _error(401, 401, "unknown or revoked API token")
            user = owner
        else:
            return _error(
                401,
                401,
                "credentials are required: HTTP basic with a console user and password or an "
                "API token (basic.auth.user.info=USER:PASSWORD), or Authorization: Bearer TOKEN",
            )
    except AuthenticationFailed as exc:
        return _error(401, 401, str(exc))
    except errors.TokenExpired as exc:
        return _error(401, 401, str(exc))
    except errors.LoginThrottled as exc:
        return _error(429, 429, str(exc))
    g.user = user
    g.cluster = cluster().as_principal(user.principal)
    return None


def _registry() -> sc.SchemaRegistry:
    return g.cluster.schemas


def _body() -> dict[str, Any]:
    # held to MAX_BODY as it is read, a chunked body too (413 by _too_large)
    request.max_content_length = min(MAX_BODY, request.max_content_length or MAX_BODY)
    try:
        data = json.loads(request.get_data(cache=False) or b"null")
    except (ValueError, RecursionError) as exc:
        raise _Answer(400, 400, f"the request body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _Answer(422, 422, "the request body must be a JSON object")
    return data


def _flag(name: str) -> bool:
    return (request.args.get(name) or "").lower() == "true"


def _schema_id(raw: str) -> int:
    if not (raw.isascii() and raw.isdigit() and len(raw) < 11):
        raise _Answer(404, 40403, f"Schema {raw[:40]!r} not found")
    return int(raw)


def _schema_text(schema: sc.RegisteredSchema) -> str:
    """The schema as stored, or with `?format=serialized` a Protobuf schema as the base64
    FileDescriptorProto confluent-kafka's ProtobufDeserializer asks for."""
    if request.args.get("format") == "serialized" and schema.schema_type == sc.PROTOBUF:
        from google.protobuf import descriptor_pb2

        _s, compiled = _registry().compiled(schema.id)
        proto = descriptor_pb2.FileDescriptorProto()
        compiled.proto_file.CopyToProto(proto)
        return base64.standard_b64encode(proto.SerializeToString()).decode("ascii")
    return schema.schema


def _described(schema: sc.RegisteredSchema, with_subject: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if with_subject:
        out |= {"subject": schema.subject, "version": schema.version}
    out["id"] = schema.id
    if schema.schema_type != sc.AVRO:  # Confluent leaves the default type out
        out["schemaType"] = schema.schema_type
    if schema.references:
        out["references"] = [
            {"name": r.name, "subject": r.subject, "version": r.version} for r in schema.references
        ]
    out["schema"] = _schema_text(schema)
    return out


def _schema_args(body: dict[str, Any]) -> tuple[Any, Any, Any]:
    return body.get("schema"), body.get("schemaType") or sc.AVRO, body.get("references") or ()


# --- routes (merge_slashes off: a subject such as /apps:orders-value arrives as //apps...) ---


def route(rule: str, **options: Any):
    return registry.route(rule, merge_slashes=False, **options)


@route("/")
def root():
    return _json({})


@route("/schemas/types")
def schema_types():
    return _json(list(sc.SCHEMA_TYPES))


def _readable_id(raw: str) -> int:
    """A schema id the user may see: one only subjects they may not read name is answered
    as an id that does not exist (docs/SCHEMAS.md, "Who sees what")."""
    schema_id = _schema_id(raw)
    if not _registry().may_read(schema_id):
        raise _Answer(404, 40403, f"Schema {schema_id} not found")
    return schema_id


@route("/schemas/ids/<raw_id>")
def schema_by_id(raw_id: str):
    schema = _registry().get_by_id(_readable_id(raw_id))
    return _json(_described(schema, with_subject=False))


@route("/schemas/ids/<raw_id>/schema")
def schema_text_by_id(raw_id: str):
    schema = _registry().get_by_id(_readable_id(raw_id))
    return _json(_schema_text(schema))


@route("/schemas/ids/<raw_id>/versions")
def schema_versions(raw_id: str):
    uses = _registry().uses(_readable_id(raw_id))
    return _json([{"subject": s, "version": v} for s, v in uses])


@route("/schemas/ids/<raw_id>/subjects")
def schema_subjects(raw_id: str):
    uses = _registry().uses(_readable_id(raw_id))
    return _json(sorted({s for s, _v in uses}))


@route("/subjects")
def subjects():
    prefix = request.args.get("subjectPrefix") or ""
    return _json(_registry().subjects(prefix, deleted=_flag("deleted")))


@route("/subjects/<subject:subject>/versions", methods=["GET"])
def versions(subject: str):
    return _json(_registry().versions(subject, deleted=_flag("deleted")))


@route("/subjects/<subject:subject>/versions", methods=["POST"])
def register(subject: str):
    schema, schema_type, refs = _schema_args(_body())
    registered = _registry().register(subject, schema, schema_type, refs)
    return _json({"id": registered.id})


@route("/subjects/<subject:subject>", methods=["POST"])
def lookup(subject: str):
    schema, schema_type, refs = _schema_args(_body())
    found = _registry().lookup(subject, schema, schema_type, refs, deleted=_flag("deleted"))
    return _json(_described(found))


@route("/subjects/<subject:subject>/versions/<version>", methods=["GET"])
def version(subject: str, version: str):
    return _json(_described(_registry().version(subject, version, deleted=_flag("deleted"))))


@route("/subjects/<subject:subject>/versions/<version>/schema", methods=["GET"])
def version_schema(subject: str, version: str):
    return _json(_schema_text(_registry().version(subject, version)))


@route("/subjects/<subject:subject>/versions/<version>/referencedby", methods=["GET"])
def referenced_by(subject: str, version: str):
    return _json(_registry().referenced_by(subject, version))


@route("/subjects/<subject:subject>", methods=["DELETE"])
def delete_subject(subject: str):
    return _json(_registry().delete_subject(subject, permanent=_flag("permanent")))


@route("/subjects/<subject:subject>/versions/<version>", methods=["DELETE"])
def delete_version(subject: str, version: str):
    return _json(_registry().delete_version(subject, version, permanent=_flag("permanent")))


def _level(body: dict[str, Any]) -> str:
    level = body.get("compatibility", body.get("compatibilityLevel"))
    if not isinstance(level, str):
        raise _Answer(
            422,
            42203,
            f"Invalid compatibility level. Valid values are {', '.join(sc.COMPATIBILITY_LEVELS)}",
        )
    return level


@route("/config", methods=["GET"])
def get_config():
    return _json({"compatibilityLevel": _registry().compatibility()})


@route("/config", methods=["PUT"])
def put_config():
    return _json({"compatibility": _registry().set_compatibility(_level(_body()))})


@route("/config/<subject:subject>", methods=["GET"])
def get_subject_config(subject: str):
    fallback = _flag("defaultToGlobal")
    level = _registry().compatibility(subject, fallback=fallback)
    if level is None:
        raise _Answer(
            404,
            40408,
            f"Subject '{subject}' does not have subject-level compatibility configured",
        )
    return _json({"compatibilityLevel": level})


@route("/config/<subject:subject>", methods=["PUT"])
def put_subject_config(subject: str):
    return _json({"compatibility": _registry().set_compatibility(_level(_body()), subject)})


@route("/config/<subject:subject>", methods=["DELETE"])
def delete_subject_config(subject: str):
    before = _registry().compatibility(subject)
    _registry().set_compatibility(None, subject)
    return _json({"compatibilityLevel": before})


@route("/<path:rest>", methods=["GET", "POST", "PUT", "DELETE"])
def unknown(rest: str):
    return _error(404, 404, "HTTP 404 Not Found")
