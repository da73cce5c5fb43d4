"""Schemas: the registry (`cluster.schemas`) and the Confluent wire format's codec.

The registry keeps Avro, Protobuf and JSON Schema texts under subjects, as Confluent's
Schema Registry does (docs/SCHEMAS.md): a schema text gets one global id, which messages
carry after a magic byte 0 (`MAGIC`); a subject's versions name those ids. Subjects are
bound to topics by Confluent's TopicNameStrategy: `<topic>-value` and `<topic>-key`, where
`<topic>` is the name the Kafka client used: a plain name is a topic of `DEFAULT_STREAM`
(the wire listener's and engine.kafka's default), a full `/stream:topic` name is itself.
The stream's ACEs guard its subjects: registering needs produce_perm, deleting and
compatibility settings admin_perm, reading consume_perm or produce_perm (a producer looks
up the schema it writes with). Subjects that name no topic are a cluster administrator's.

Payloads are decoded and encoded by fastavro (Avro), the protobuf runtime (message
classes built from the registered file: a serialized FileDescriptorProto as confluent-
kafka's ProtobufSerializer registers it, or .proto text compiled by protoc from
grpcio-tools) and jsonschema (JSON Schema: the payload is JSON). Nothing here parses a
payload by hand; only the wire format's framing (magic byte, id, Protobuf's message
indexes) is read here.

SQL lives in engine.storage.schemas.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from engine import errors, names, regex
from engine.client import avro_bounds
from engine.storage.schemas import SchemaRow, SchemaTable, VersionRow

if TYPE_CHECKING:
    from engine.cluster import Cluster

__all__ = [
    "AVRO",
    "COMPATIBILITY_LEVELS",
    "DEFAULT_COMPATIBILITY",
    "DEFAULT_STREAM",
    "JSON",
    "MAGIC",
    "PROTOBUF",
    "SCHEMA_TYPES",
    "Decoded",
    "IncompatibleSchema",
    "InvalidCompatibility",
    "InvalidSchema",
    "InvalidVersion",
    "RegisteredSchema",
    "SchemaDecoder",
    "SchemaNotFound",
    "SchemaReference",
    "SchemaRegistry",
    "SubjectNotFound",
    "VersionNotFound",
    "encode",
    "split_wire",
    "subjects_for_topic",
    "topic_of_subject",
]

AVRO, PROTOBUF, JSON = "AVRO", "PROTOBUF", "JSON"
SCHEMA_TYPES = (AVRO, PROTOBUF, JSON)
MAGIC = 0
DEFAULT_STREAM = "/kafka"
COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_COMPATIBILITY = "BACKWARD"  # Confluent's default
MAX_SCHEMA_CHARS = 1_000_000  # a schema text larger than this is refused (42201)
# Sample records the compatibility test writes with one schema and reads with the other.
COMPAT_SAMPLES = 20


# --- errors (each with Confluent's error code, which web/registry.py answers with) ------------


class SubjectNotFound(errors.NotFound):
    code = 40401


class VersionNotFound(errors.NotFound):
    code = 40402


class SchemaNotFound(errors.NotFound):
    code = 40403


class SubjectNotSoftDeleted(errors.IllegalState):
    code = 40405


class InvalidSchema(errors.InvalidArgument):
    code = 42201


class InvalidVersion(errors.InvalidArgument):
    code = 42202


class InvalidCompatibility(errors.InvalidArgument):
    code = 42203


class IncompatibleSchema(errors.IllegalState):
    code = 409


# --- values -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchemaReference:
    """A schema's import of another: the name it is imported by (an Avro named type, a
    .proto file name, a JSON Schema `$ref` URL), and the subject and version holding it."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it: its global id and, when known, the subject and
    version that name it."""

    id: int
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...] = ()
    subject: str = ""
    version: int = 0

    @property
    def label(self) -> str:
        """`Avro, subject orders-value v1, id 3`, for a console's note."""
        kind = {AVRO: "Avro", PROTOBUF: "Protobuf", JSON: "JSON Schema"}[self.schema_type]
        where = f"subject {self.subject} v{self.version}, " if self.subject else ""
        return f"{kind}, {where}schema id {self.id}"


def _refs_of(row: SchemaRow) -> tuple[SchemaReference, ...]:
    return tuple(
        SchemaReference(r["name"], r["subject"], r["version"]) for r in json.loads(row.refs)
    )


def _registered(row: SchemaRow, subject: str = "", version: int = 0) -> RegisteredSchema:
    return RegisteredSchema(row.id, row.schema_type, row.schema, _refs_of(row), subject, version)


def _from_version(v: VersionRow) -> RegisteredSchema:
    return _registered(v.schema, v.subject, v.version)


# --- parsing schemas ------------------------------------------------------------------------


@dataclass
class _Compiled:
    """A parsed schema, ready to read and write payloads."""

    schema_type: str
    avro: Any = None  # fastavro's parsed schema
    avro_named: dict[str, Any] = field(default_factory=dict)
    avro_types: dict[str, Any] = field(default_factory=dict)  # every named type it may use
    avro_item_check: bool = False  # some array's items take no bytes (avro_bounds)
    json_validator: Any = None
    proto_file: Any = None  # a protobuf FileDescriptor
    proto_pool: Any = None


def _load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidSchema(f"Invalid schema: {what} is not JSON: {exc}") from None


def _compile_avro(text: str, refs: Sequence[tuple[SchemaReference, _Compiled]]) -> _Compiled:
    import fastavro

    obj = _load_json(text, "an Avro schema")
    named: dict[str, Any] = {}
    for _ref, compiled in refs:
        named.update(compiled.avro_named)
    try:
        parsed = fastavro.parse_schema(obj, named_schemas=named)
    except Exception as exc:  # fastavro raises SchemaParseException, ValueError, KeyError...
        raise InvalidSchema(f"Invalid schema: not a valid Avro schema: {exc}") from None
    types = avro_bounds.named_types(parsed, named)
    return _Compiled(
        AVRO,
        avro=parsed,
        avro_named=named,
        avro_types=types,
        avro_item_check=avro_bounds.needs_item_check(parsed, types),
    )


class _Re2AsRe:
    """What jsonschema's keywords use of `re` (`re.search`), done by RE2, so a schema's
    `pattern` or `patternProperties` runs in linear time (engine.regex)."""

    @staticmethod
    def search(pattern: str, text: str) -> Any:
        return regex.compile_pattern(pattern).search(text)


def _use_re2_in_jsonschema() -> None:
    # jsonschema has no hook for its regex engine: `pattern`, `patternProperties`,
    # `additionalProperties` and `unevaluatedProperties` call their module's `re.search`.
    from jsonschema import _keywords, _legacy_keywords, _utils

    for module in (_keywords, _legacy_keywords, _utils):
        module.re = _Re2AsRe  # type: ignore[attr-defined]  # see above; tested in test_schemas


# Keys whose values are data, not schemas: a "pattern" inside them is not a regex.
_JSON_DATA_KEYS = frozenset({"const", "enum", "default", "examples"})


def _check_json_patterns(obj: Any) -> None:
    """InvalidSchema when a `pattern` or a `patternProperties` name is not an RE2 pattern."""
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        patterns = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        if isinstance(node.get("patternProperties"), dict):
            patterns.extend(node["patternProperties"])
        for pattern in patterns:
            try:
                regex.compile_pattern(pattern)
            except errors.InvalidArgument as exc:
                raise InvalidSchema(f"Invalid schema: {exc}") from None
        stack.extend(v for k, v in node.items() if k not in _JSON_DATA_KEYS)


def _compile_json(text: str, refs: Sequence[tuple[SchemaReference, _Compiled]]) -> _Compiled:
    import jsonschema
    from referencing import Registry, Resource

    _use_re2_in_jsonschema()
    obj = _load_json(text, "a JSON Schema")
    if not isinstance(obj, dict | bool):
        raise InvalidSchema("Invalid schema: a JSON Schema is an object or a boolean")
    _check_json_patterns(obj)
    cls = jsonschema.validators.validator_for(obj, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(obj)  # type: ignore[arg-type]  # a boolean schema is valid too; the stub wants a dict
    except jsonschema.SchemaError as exc:
        raise InvalidSchema(f"Invalid schema: not a valid JSON Schema: {exc.message}") from None
    from referencing.jsonschema import DRAFT202012

    registry: Registry = Registry()
    for ref, compiled in refs:
        resource = Resource.from_contents(
            compiled.json_validator.schema, default_specification=DRAFT202012
        )
        registry = registry.with_resource(ref.name, resource)
    return _Compiled(JSON, json_validator=cls(obj, registry=registry))


def _proto_files(text: str) -> list[Any]:
    """The FileDescriptorProtos of a Protobuf schema: a base64 FileDescriptorProto (as
    confluent-kafka's ProtobufSerializer registers it) or .proto text (compiled by protoc;
    imports of well-known types resolve, other imports come from references)."""
    from google.protobuf import descriptor_pb2

    stripped = text.strip()
    try:
        raw = base64.b64decode(stripped, validate=True)
        fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
        if fdp.name or fdp.message_type:
            return [fdp]
    except Exception:  # not base64 or not a descriptor: .proto text
        pass
    return []


# protoc runs of this process at once (a child of some 40 MB and a CPU each: 30 concurrent
# registrations ran 25); more wait up to PROTOC_WAIT_S for a turn, then get `Busy`.
PROTOC_RUNS = 2
PROTOC_WAIT_S = 10.0
_PROTOC_TURNS = threading.BoundedSemaphore(PROTOC_RUNS)


def _compile_proto_text(text: str, refs: Sequence[tuple[SchemaReference, _Compiled]]) -> list[Any]:
    """.proto text -> FileDescriptorProtos (dependencies first), compiled by grpcio-tools'
    protoc in a child process (protoc writes its diagnostics to file descriptor 2 and keeps
    global state, neither of which a threaded server should share), at most PROTOC_RUNS at
    once; raises `errors.Busy` when no turn came within PROTOC_WAIT_S."""
    if not _PROTOC_TURNS.acquire(timeout=PROTOC_WAIT_S):
        raise errors.Busy(
            f"the server is compiling {PROTOC_RUNS} other .proto schemas: try again in a few"
            " seconds",
            retry_after=2,
        )
    try:
        return _run_protoc(text, refs)
    finally:
        _PROTOC_TURNS.release()


def _run_protoc(text: str, refs: Sequence[tuple[SchemaReference, _Compiled]]) -> list[Any]:
    import subprocess
    import sys

    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="plet-proto-") as tmp:
        sets: list[str] = []
        for ref, compiled in refs:
            # a referenced file goes in as a descriptor set, which protoc finds by its name
            known: dict[str, Any] = {}
            _add_deps(compiled.proto_file, known)
            proto = descriptor_pb2.FileDescriptorProto()
            compiled.proto_file.CopyToProto(proto)
            proto.name = ref.name
            path = os.path.join(tmp, f"ref{len(sets)}.pb")
            with open(path, "wb") as f:
                files = [*known.values(), proto]
                f.write(descriptor_pb2.FileDescriptorSet(file=files).SerializeToString())
            sets.append(path)
        main = os.path.join(tmp, "schema.proto")
        with open(main, "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(tmp, "out.pb")
        args = [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{include}"]
        if sets:
            args.append(f"--descriptor_set_in={os.pathsep.join(sets)}")
        args += ["--include_imports", f"--descriptor_set_out={out}", main]
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0 or not os.path.exists(out):
            why = " ".join(done.stderr.replace(tmp + os.sep, "").split())[:500]
            raise InvalidSchema(f"Invalid schema: the .proto text does not compile: {why}")
        with open(out, "rb") as f:
            return list(descriptor_pb2.FileDescriptorSet.FromString(f.read()).file)


def _compile_proto(text: str, refs: Sequence[tuple[SchemaReference, _Compiled]]) -> _Compiled:
    from google.protobuf import descriptor_pb2, descriptor_pool

    files = _proto_files(text) or _compile_proto_text(text, refs)
    pool = descriptor_pool.DescriptorPool()
    known: dict[str, Any] = {}
    for _ref, compiled in refs:
        proto = descriptor_pb2.FileDescriptorProto()
        compiled.proto_file.CopyToProto(proto)
        known[proto.name] = proto
        _add_deps(compiled.proto_file, known)
    for proto in files[:-1]:
        known.setdefault(proto.name, proto)
    main = files[-1]

    def add(proto: Any, seen: set[str]) -> None:
        if proto.name in seen:
            return
        seen.add(proto.name)
        for dep in proto.dependency:
            if dep in known:
                add(known[dep], seen)
            else:
                add(_well_known(dep), seen)
        pool.Add(proto)

    try:
        add(main, set())
        file = pool.FindFileByName(main.name)
    except InvalidSchema:
        raise
    except Exception as exc:  # TypeError, KeyError from the pool: a broken descriptor
        raise InvalidSchema(f"Invalid schema: not a valid Protobuf file: {exc}") from None
    if not file.message_types_by_name:
        raise InvalidSchema("Invalid schema: the Protobuf file defines no message")
    return _Compiled(PROTOBUF, proto_file=file, proto_pool=pool)


def _add_deps(file: Any, known: dict[str, Any]) -> None:
    from google.protobuf import descriptor_pb2

    for dep in file.dependencies:
        if dep.name not in known:
            proto = descriptor_pb2.FileDescriptorProto()
            dep.CopyToProto(proto)
            known[dep.name] = proto
            _add_deps(dep, known)


def _well_known(name: str) -> Any:
    """A well-known type's file (google/protobuf/timestamp.proto ...) from the runtime."""
    import importlib

    from google.protobuf import descriptor_pb2, descriptor_pool

    if name.startswith("google/protobuf/") and name.endswith(".proto"):
        module = "google.protobuf." + name.removeprefix("google/protobuf/")[:-6] + "_pb2"
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    try:
        file = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        raise InvalidSchema(
            f"Invalid schema: import {name!r} is neither a reference nor a well-known type"
        ) from None
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    return proto


_COMPILERS = {AVRO: _compile_avro, JSON: _compile_json, PROTOBUF: _compile_proto}


def _normal_form(schema_type: str, text: str) -> str:
    """What two registrations of one schema have in common: JSON re-serialized with sorted
    keys (Avro, JSON Schema), the text without surrounding space (Protobuf)."""
    if schema_type in (AVRO, JSON):
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    return text.strip()


def _fingerprint(schema_type: str, normal: str, refs: Sequence[SchemaReference]) -> str:
    digest = hashlib.sha256()
    digest.update(schema_type.encode())
    digest.update(b"\0")
    digest.update(normal.encode())
    for ref in refs:
        digest.update(f"\0{ref.name}\0{ref.subject}\0{ref.version}".encode())
    return digest.hexdigest()


def _stream_fingerprint(fingerprint: str, stream: str | None) -> str:
    """The fingerprint of a schema stored for one stream's subjects alone (None: the
    subjects that name no topic, an administrator's)."""
    return hashlib.sha256(f"stream\0{stream or ''}\0{fingerprint}".encode()).hexdigest()


# Compiled schemas by (cluster id, schema id): an id names one text for good (ids are never
# reused), so entries never go stale.
_CACHE: OrderedDict[tuple[str, int], _Compiled] = OrderedDict()
_CACHE_SIZE = 512
_CACHE_LOCK = threading.Lock()


# --- the registry ---------------------------------------------------------------------------


class SchemaRegistry:
    """The schema registry of a cluster: `cluster.schemas`. Every method checks the
    cluster principal's ACEs (see the module's docstring) and raises engine errors with
    Confluent's error codes as `code` (SubjectNotFound 40401, VersionNotFound 40402,
    SchemaNotFound 40403, InvalidSchema 42201, InvalidVersion 42202, InvalidCompatibility
    42203, IncompatibleSchema 409)."""

    def __init__(self, cluster: Cluster, default_stream: str = DEFAULT_STREAM) -> None:
        self._cluster = cluster
        self._table = SchemaTable(cluster.catalog)
        self.default_stream = default_stream

    # --- subjects and streams --------------------------------------------------------

    def stream_of(self, subject: str) -> str | None:
        """The stream whose ACEs guard `subject` (TopicNameStrategy), or None."""
        found = topic_of_subject(subject, default_stream=self.default_stream)
        return None if found is None else found[0].rpartition(":")[0]

    def topic_of(self, subject: str) -> tuple[str, str] | None:
        """`topic_of_subject` with this registry's default stream."""
        return topic_of_subject(subject, default_stream=self.default_stream)

    def _check(self, subject: str, perms: tuple[str, ...], what: str) -> None:
        cluster = self._cluster
        if what != "read":
            cluster.check_may_change(f"{what} schemas")  # a read-only user, even an admin
        if cluster.is_administrator:
            return
        stream = self.stream_of(subject)
        if stream is None:
            raise errors.AccessDenied(
                f"subject {subject!r} names no topic (<topic>-value or <topic>-key): only a "
                f"cluster administrator may {what} it"
            )
        refusal: errors.AccessDenied | None = None
        for perm in perms:
            try:
                cluster.authorize(stream, perm, what=f"{what} schemas of")
                return
            except errors.UnknownStream:
                raise errors.AccessDenied(
                    f"stream {stream} does not exist: only a cluster administrator may {what} "
                    f"schemas of subject {subject!r}"
                ) from None
            except errors.AccessDenied as exc:
                refusal = refusal or exc
        assert refusal is not None
        raise refusal

    def _readable(self, subject: str) -> bool:
        try:
            self._check(subject, ("consume_perm", "produce_perm"), "read")
        except errors.AccessDenied:
            return False
        return True

    # --- writing -----------------------------------------------------------------------

    def register(
        self,
        subject: str,
        schema: str,
        schema_type: str = AVRO,
        references: Iterable[SchemaReference | dict[str, Any]] = (),
    ) -> RegisteredSchema:
        """Register `schema` under `subject` (its next version, unless the subject already
        has it) and return it with its global id. Checks the subject's compatibility level
        against its earlier versions (Avro only, see docs/SCHEMAS.md)."""
        self._cluster.check_open()
        subject = _subject(subject)
        self._check(subject, ("produce_perm",), "register")
        schema_type, text, refs = self._checked(schema, schema_type, references)
        compiled = self._compile(schema_type, text, refs)
        normal = _normal_form(schema_type, text)
        fingerprint = _fingerprint(schema_type, normal, refs)
        existing = self._table.find(subject, self._fingerprints(subject, fingerprint))
        if existing is not None:
            return _from_version(existing)
        self._check_compatible(subject, schema_type, compiled)
        refs_json = json.dumps(
            [{"name": r.name, "subject": r.subject, "version": r.version} for r in refs]
        )
        row, _added = self._table.register(
            subject, schema_type, text, refs_json, self._stored_fingerprint(subject, fingerprint)
        )
        return _from_version(row)

    def _fingerprints(self, subject: str, fingerprint: str) -> tuple[str, str]:
        """Under which fingerprints `subject` may hold a schema: the shared one, and its
        stream's own (`_stored_fingerprint`)."""
        return fingerprint, _stream_fingerprint(fingerprint, self.stream_of(subject))

    def _stored_fingerprint(self, subject: str, fingerprint: str) -> str:
        """The fingerprint, so the id, a new version of `subject` gets: the shared one (one
        global id per text, as Confluent's registry) when no schema has it yet, or when the
        principal may read a subject that has it (administrators may read them all); else
        one of the subject's stream alone, a new id, so that the id answered does not tell
        whether a subject the principal may not read holds the same text (the schema-id
        oracle; docs/SCHEMAS.md, "Who sees what")."""
        found = self._table.id_of(fingerprint)
        if found is None or self._cluster.is_administrator:
            return fingerprint
        if any(self._readable(s) for s, _v in self._table.uses_of(found, deleted=True)):
            return fingerprint
        return _stream_fingerprint(fingerprint, self.stream_of(subject))

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Soft-delete every version of `subject` (or, with `permanent`, remove the
        soft-deleted ones for good); returns the versions."""
        self._cluster.check_open()
        subject = _subject(subject)
        self._check(subject, ("admin_perm",), "delete")
        rows = self._table.versions(subject, deleted=True)
        if not rows:
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        if permanent:
            live = [v.version for v in rows if not v.deleted]
            if live:
                raise SubjectNotSoftDeleted(
                    f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            versions = [v.version for v in rows]
        else:
            versions = [v.version for v in rows if not v.deleted]
            if not versions:
                raise SubjectNotFound(f"Subject '{subject}' was soft deleted.")
        self._table.delete_versions(subject, versions, permanent)
        return versions

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> int:
        """Soft-delete (or, with `permanent`, remove a soft-deleted) version; returns it."""
        self._cluster.check_open()
        subject = _subject(subject)
        self._check(subject, ("admin_perm",), "delete")
        row = self._version_row(subject, version, deleted=permanent)
        if permanent and not row.deleted:
            raise SubjectNotSoftDeleted(
                f"Subject '{subject}' Version {row.version} was not deleted first before being "
                "permanently deleted"
            )
        self._table.delete_versions(subject, [row.version], permanent)
        return row.version

    def set_compatibility(self, level: str | None, subject: str | None = None) -> str | None:
        """Set the compatibility level of `subject` (None: the registry's default, which a
        cluster administrator sets); `level` None drops a subject's own level."""
        self._cluster.check_open()
        if level is not None:
            if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
                raise InvalidCompatibility(
                    f"Invalid compatibility level. Valid values are {', '.join(COMPATIBILITY_LEVELS)}"
                )
            level = level.upper()
        if subject is None:
            self._cluster.check_may_change("set the registry's compatibility level")
            if not self._cluster.is_administrator:
                raise errors.AccessDenied(
                    "only a cluster administrator may set the registry's compatibility level"
                )
            self._table.set_compatibility("", level)
        else:
            subject = _subject(subject)
            self._check(subject, ("admin_perm",), "configure")
            self._table.set_compatibility(subject, level)
        return level

    # --- reading -----------------------------------------------------------------------

    def compatibility(self, subject: str | None = None, *, fallback: bool = True) -> str | None:
        """The compatibility level of `subject` (its own, else, with `fallback`, the
        registry's), or the registry's."""
        self._cluster.check_open()
        if subject is not None:
            subject = _subject(subject)
            self._check(subject, ("consume_perm", "produce_perm"), "read")
            own = self._table.compatibility(subject)
            if own is not None or not fallback:
                return own
        return self._table.compatibility("") or DEFAULT_COMPATIBILITY

    def lookup(
        self,
        subject: str,
        schema: str,
        schema_type: str = AVRO,
        references: Iterable[SchemaReference | dict[str, Any]] = (),
        *,
        deleted: bool = False,
    ) -> RegisteredSchema:
        """The version of `subject` that has `schema`: SubjectNotFound, SchemaNotFound."""
        self._cluster.check_open()
        subject = _subject(subject)
        self._check(subject, ("consume_perm", "produce_perm"), "read")
        schema_type, text, refs = self._checked(schema, schema_type, references)
        if not self._table.versions(subject, deleted=deleted):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        try:
            normal = _normal_form(schema_type, text)
        except ValueError:
            raise InvalidSchema("Invalid schema: not JSON") from None
        fingerprints = self._fingerprints(subject, _fingerprint(schema_type, normal, refs))
        row = self._table.find(subject, fingerprints, deleted)
        if row is None:
            raise SchemaNotFound("Schema not found")
        return _from_version(row)

    def get_by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema with global id `schema_id` (subject and version left empty)."""
        self._cluster.check_open()
        row = self._row_by_id(schema_id)
        return _registered(row)

    def uses(self, schema_id: int) -> list[tuple[str, int]]:
        """(subject, version) of the live versions with schema `schema_id`, those the
        principal may read."""
        self._cluster.check_open()
        self._row_by_id(schema_id)
        return [(s, v) for s, v in self._table.uses_of(schema_id) if self._readable(s)]

    def may_read(self, schema_id: int) -> bool:
        """Whether the principal may see schema `schema_id`: an administrator, or a reader
        of a subject with a version of it (soft-deleted ones count: old messages still
        name it). An id of no such subject is not theirs to see, nor to decode with."""
        self._cluster.check_open()
        self._row_by_id(schema_id)
        if self._cluster.is_administrator:
            return True
        return any(self._readable(s) for s, _v in self._table.uses_of(schema_id, deleted=True))

    def subjects(self, prefix: str = "", *, deleted: bool = False) -> list[str]:
        """The subjects with a live version (any, with `deleted`) the principal may read."""
        self._cluster.check_open()
        return [s for s in self._table.subjects(prefix or "", deleted) if self._readable(s)]

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        self._cluster.check_open()
        subject = _subject(subject)
        self._check(subject, ("consume_perm", "produce_perm"), "read")
        rows = self._table.versions(subject, deleted=deleted)
        if not rows:
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        return [r.version for r in rows]

    def version(
        self,
        subject: str,
        version: int | Literal["latest"] | str = "latest",
        *,
        deleted: bool = False,
    ) -> RegisteredSchema:
        """Version `version` (a number, or "latest"/-1) of `subject`."""
        self._cluster.check_open()
        subject = _subject(subject)
        self._check(subject, ("consume_perm", "produce_perm"), "read")
        return _from_version(self._version_row(subject, version, deleted))

    def referenced_by(self, subject: str, version: int | str) -> list[int]:
        self._cluster.check_open()
        subject = _subject(subject)
        self._check(subject, ("consume_perm", "produce_perm"), "read")
        row = self._version_row(subject, version, False)
        return self._table.referenced_by(subject, row.version)

    def for_topic(self, topic: str, *, key: bool = False) -> RegisteredSchema | None:
        """The latest schema bound to the full topic name `topic` (its value's, or its
        key's), or None; the subjects tried are `subjects_for_topic`'s."""
        self._cluster.check_open()
        for subject in subjects_for_topic(topic, key=key, default_stream=self.default_stream):
            if not self._readable(subject):
                continue
            row = self._table.version(subject, None)
            if row is not None:
                return _from_version(row)
        return None

    # --- the codec, for SchemaDecoder and encode ---------------------------------------

    def compiled(self, schema_id: int) -> tuple[RegisteredSchema, _Compiled]:
        """The schema `schema_id` and its parsed form (cached). No ACE check: a reader
        of a message may see what it decodes with (SchemaDecoder checks what it shows)."""
        self._cluster.check_open()
        row = self._row_by_id(schema_id)
        return _registered(row), self._compile_id(row)

    # --- internals ---------------------------------------------------------------------

    def _row_by_id(self, schema_id: int) -> SchemaRow:
        if isinstance(schema_id, bool) or not isinstance(schema_id, int):
            raise SchemaNotFound(f"Schema {schema_id!r} not found")
        row = self._table.by_id(schema_id)
        if row is None:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        return row

    def _version_row(self, subject: str, version: int | str, deleted: bool) -> VersionRow:
        number = _version_number(version)
        row = self._table.version(subject, number, deleted)
        if row is None:
            if not self._table.versions(subject, deleted=True):
                raise SubjectNotFound(f"Subject '{subject}' not found.")
            raise VersionNotFound(f"Version {version} not found.")
        return row

    def _checked(
        self, schema: Any, schema_type: Any, references: Iterable[Any]
    ) -> tuple[str, str, tuple[SchemaReference, ...]]:
        if schema_type is None:
            schema_type = AVRO
        if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
            raise InvalidSchema(
                f"Invalid schema type {schema_type!r}: one of {', '.join(SCHEMA_TYPES)}"
            )
        if not isinstance(schema, str) or not schema.strip():
            raise InvalidSchema("Invalid schema: the schema must be a non-empty string")
        if len(schema) > MAX_SCHEMA_CHARS:
            raise InvalidSchema(f"Invalid schema: longer than {MAX_SCHEMA_CHARS:,} characters")
        refs: list[SchemaReference] = []
        for ref in references or ():
            if isinstance(ref, dict):
                name, subj, ver = ref.get("name"), ref.get("subject"), ref.get("version")
                if (
                    not (isinstance(name, str) and isinstance(subj, str))
                    or isinstance(ver, bool)
                    or not isinstance(ver, int)
                ):
                    raise InvalidSchema(
                        "Invalid schema: a reference has a name, a subject and a version number"
                    )
                ref = SchemaReference(name, subj, ver)
            elif not isinstance(ref, SchemaReference):
                raise InvalidSchema("Invalid schema: references must be {name, subject, version}")
            refs.append(ref)
        return schema_type.upper(), schema, tuple(refs)

    def _resolve_refs(
        self, refs: Sequence[SchemaReference], depth: int = 0
    ) -> list[tuple[SchemaReference, _Compiled]]:
        if depth > 16:
            raise InvalidSchema("Invalid schema: references nest deeper than 16")
        resolved = []
        for ref in refs:
            row = self._table.version(ref.subject, None if ref.version == -1 else ref.version)
            if row is None:
                raise InvalidSchema(
                    f"Invalid schema: reference {ref.name!r} names subject {ref.subject!r} "
                    f"version {ref.version}, which does not exist"
                )
            resolved.append((ref, self._compile_id(row.schema, depth + 1)))
        return resolved

    def _compile(
        self, schema_type: str, text: str, refs: Sequence[SchemaReference], depth: int = 0
    ) -> _Compiled:
        refs_compiled = self._resolve_refs(refs, depth)
        try:
            return _COMPILERS[schema_type](text, refs_compiled)
        except errors.PartitionletError:
            raise
        except (Exception, RecursionError) as exc:  # a parser's own surprise (deep nesting...)
            raise InvalidSchema(f"Invalid schema: {type(exc).__name__}: {exc}"[:500]) from None

    def _compile_id(self, row: SchemaRow, depth: int = 0) -> _Compiled:
        key = (self._cluster.id, row.id)
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
            if hit is not None:
                _CACHE.move_to_end(key)
                return hit
        compiled = self._compile(row.schema_type, row.schema, _refs_of(row), depth)
        with _CACHE_LOCK:
            _CACHE[key] = compiled
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        return compiled

    def _check_compatible(self, subject: str, schema_type: str, new: _Compiled) -> None:
        level = self._table.compatibility(subject) or self._table.compatibility("")
        level = level or DEFAULT_COMPATIBILITY
        if level == "NONE" or schema_type != AVRO:
            return  # only Avro is checked (docs/SCHEMAS.md)
        rows = self._table.versions(subject)
        if not rows:
            return
        if not level.endswith("_TRANSITIVE"):
            rows = rows[-1:]
        for row in rows:
            if row.schema.schema_type != AVRO:
                continue
            old = self._compile_id(row.schema)
            if level.startswith(("BACKWARD", "FULL")):
                problem = _avro_reads(old.avro, new.avro)
                if problem:
                    raise IncompatibleSchema(
                        f"Schema being registered is incompatible with an earlier schema for "
                        f'subject "{subject}" ({level}): version {row.version}\'s data cannot be '
                        f"read with it: {problem}"
                    )
            if level.startswith(("FORWARD", "FULL")):
                problem = _avro_reads(new.avro, old.avro)
                if problem:
                    raise IncompatibleSchema(
                        f"Schema being registered is incompatible with an earlier schema for "
                        f'subject "{subject}" ({level}): version {row.version} cannot read '
                        f"data written with it: {problem}"
                    )


def _avro_reads(writer: Any, reader: Any) -> str:
    """'' when data written with `writer` reads with `reader` (fastavro's schema
    resolution over sample records of `writer`), else what went wrong."""
    import fastavro

    try:
        types = avro_bounds.named_types(writer, {})
        samples = list(avro_bounds.samples(writer, types, COMPAT_SAMPLES))
        for datum in samples:
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, writer, datum)
            buf.seek(0)
            fastavro.schemaless_reader(buf, writer, reader)
    except avro_bounds.TooLarge as exc:
        return f"it is too large to check: {exc}"
    except Exception as exc:
        return str(exc) or type(exc).__name__
    return ""


def _subject(subject: Any) -> str:
    if not isinstance(subject, str) or not subject or len(subject) > 1024 or "\x00" in subject:
        raise SubjectNotFound(f"Subject {str(subject)[:80]!r} not found.")
    return subject


def _version_number(version: Any) -> int | None:
    """A version as the REST API names it: a number from 1, "latest" or -1 (None)."""
    if version in ("latest", -1, "-1"):
        return None
    if isinstance(version, int) and not isinstance(version, bool):
        number = version
    elif isinstance(version, str) and version.isascii() and version.isdigit() and len(version) < 11:
        number = int(version)
    else:
        number = 0
    if not 1 <= number <= 2**31 - 1:
        raise InvalidVersion(
            f"The specified version '{str(version)[:40]}' is not a valid version id. Allowed "
            'values are between [1, 2^31-1] and the string "latest"'
        )
    return number


def subjects_for_topic(
    topic: str, *, key: bool = False, default_stream: str = DEFAULT_STREAM
) -> list[str]:
    """The subjects whose schema a full topic name's values (or keys) have, most specific
    first: `/s:t-value`, and for a topic of the default stream also `t-value` (the name a
    Kafka client of the wire listener uses)."""
    suffix = "-key" if key else "-value"
    stream, _sep, name = topic.rpartition(":")
    found = [topic + suffix]
    if stream == default_stream:
        found.append(name + suffix)
    return found


def topic_of_subject(
    subject: str, *, default_stream: str = DEFAULT_STREAM
) -> tuple[str, str] | None:
    """(full topic name, "value" or "key") of the topic whose values or keys `subject`
    holds by TopicNameStrategy (`subjects_for_topic` the other way round: `t-value` is
    `default_stream`'s topic `t`), or None for a subject that names no topic. Whether the
    topic exists is the caller's question."""
    for part in ("value", "key"):
        suffix = f"-{part}"
        if not subject.endswith(suffix):
            continue
        base = subject[: -len(suffix)]
        try:
            if base.startswith("/"):
                stream, topic = names.split_full_name(base)
            else:
                names.validate_topic_name(base)
                stream, topic = default_stream, base
        except errors.InvalidName:
            return None
        return f"{stream}:{topic}", part
    return None


# --- the wire format ------------------------------------------------------------------------


def split_wire(data: bytes | None) -> tuple[int, bytes] | None:
    """(schema id, the rest) of a value in the Confluent wire format, or None."""
    if data is None or len(data) < 5 or data[0] != MAGIC:
        return None
    return int.from_bytes(data[1:5], "big"), bytes(data[5:])


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint at `at` -> (value, next position); ValueError when cut."""
    shift = result = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("the message indexes are cut short")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), at


def _message_indexes(data: bytes) -> tuple[list[int], bytes]:
    """Protobuf's message indexes after the schema id: a count, then that many indexes
    (a lone 0 means the first message: [0])."""
    count, at = _read_varint(data, 0)
    if count == 0:
        return [0], data[at:]
    if count < 0 or count > 100:
        raise ValueError(f"{count} message indexes")
    indexes = []
    for _ in range(count):
        index, at = _read_varint(data, at)
        indexes.append(index)
    return indexes, data[at:]


def _message_descriptor(file: Any, indexes: list[int]) -> Any:
    types = list(file.message_types_by_name.values())
    desc = None
    for index in indexes:
        if not 0 <= index < len(types):
            raise ValueError(f"message index {index} is not in the schema")
        desc = types[index]
        types = list(desc.nested_types)
    return desc


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return "0x" + bytes(value).hex()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


@dataclass(frozen=True)
class Decoded:
    """A value in the wire format decoded (`value`, JSON-able), or why it was not
    (`error`); `schema` is the schema it names, when the registry has it."""

    schema_id: int
    value: Any = None
    schema: RegisteredSchema | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def text(self) -> str:
        return json.dumps(self.value, indent=2, ensure_ascii=False, default=_jsonable)

    @property
    def label(self) -> str:
        return self.schema.label if self.schema is not None else f"schema id {self.schema_id}"


def decode_payload(schema: RegisteredSchema, compiled: _Compiled, payload: bytes) -> Any:
    """The payload after the schema id as a JSON-able value; ValueError when it does not
    decode with the schema."""
    try:
        if compiled.schema_type == AVRO:
            import fastavro

            if compiled.avro_item_check:
                avro_bounds.check_items(compiled.avro, compiled.avro_types, payload)
            buf = io.BytesIO(payload)
            value = fastavro.schemaless_reader(buf, compiled.avro, None)
            if buf.tell() != len(payload):
                raise ValueError(f"{len(payload) - buf.tell()} bytes left over after the record")
            return value
        if compiled.schema_type == PROTOBUF:
            from google.protobuf import json_format, message_factory

            indexes, body = _message_indexes(payload)
            desc = _message_descriptor(compiled.proto_file, indexes)
            message = message_factory.GetMessageClass(desc).FromString(body)
            return json_format.MessageToDict(message, preserving_proto_field_name=True)
        value = json.loads(payload)
        problem = _json_problem(compiled, value)
        if problem:
            raise ValueError(f"does not match the schema: {problem}")
        return value
    except ValueError:
        raise
    except Exception as exc:  # EOFError, struct errors, DecodeError ...: a damaged payload
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


def _json_problem(compiled: _Compiled, value: Any) -> str:
    error = next(iter(compiled.json_validator.iter_errors(value)), None)
    if error is None:
        return ""
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"


class SchemaDecoder:
    """Decodes keys and values in the Confluent wire format with a cluster's registry,
    for the consoles' message views. `prefetch` does the registry reads (call it where
    I/O is allowed: a request, a worker thread); `decode(..., load=False)` uses what was
    fetched only, so a UI thread never waits on SQLite."""

    def __init__(
        self, registry: SchemaRegistry, *, topic: str | None = None, load: bool = True
    ) -> None:
        self._registry = registry
        self._load_missing = load  # False: decode with prefetched schemas only
        # one schema may be registered under several subjects: name the topic's own
        self._preferred = (
            subjects_for_topic(topic, default_stream=registry.default_stream)
            + subjects_for_topic(topic, key=True, default_stream=registry.default_stream)
            if topic
            else []
        )
        self._known: dict[int, tuple[RegisteredSchema, _Compiled] | str] = {}

    def prefetch(self, datas: Iterable[bytes | None]) -> None:
        for data in datas:
            framed = split_wire(data)
            if framed is not None and framed[0] not in self._known:
                self._load(framed[0])

    def _load(self, schema_id: int) -> tuple[RegisteredSchema, _Compiled] | str:
        try:
            if not self._registry.may_read(schema_id):
                # decoding would show its fields to someone who may not read it
                raise SchemaNotFound(f"Schema {schema_id} not found")
            schema, compiled = self._registry.compiled(schema_id)
            uses = self._registry.uses(schema_id)
            if uses:
                own = [u for u in uses if u[0] in self._preferred]
                subject, version = (own or uses)[-1]
                schema = RegisteredSchema(
                    schema.id,
                    schema.schema_type,
                    schema.schema,
                    schema.references,
                    subject,
                    version,
                )
            found: tuple[RegisteredSchema, _Compiled] | str = (schema, compiled)
        except SchemaNotFound:
            found = f"schema id {schema_id} is not in this cluster's registry"
        except errors.PartitionletError as exc:
            found = f"schema id {schema_id}: {exc}"
        if len(self._known) > 1024:
            self._known.clear()
        self._known[schema_id] = found
        return found

    def decode(self, data: bytes | None, *, load: bool | None = None) -> Decoded | None:
        """None when `data` is not in the wire format (no magic byte 0 and id). `load`
        (default: the decoder's) reads a schema not prefetched yet."""
        if load is None:
            load = self._load_missing
        framed = split_wire(data)
        if framed is None:
            return None
        schema_id, payload = framed
        found = self._known.get(schema_id)
        if found is None:
            if not load:
                return Decoded(schema_id, error=f"schema id {schema_id} not loaded")
            found = self._load(schema_id)
        if isinstance(found, str):
            return Decoded(schema_id, error=found)
        schema, compiled = found
        try:
            value = decode_payload(schema, compiled, payload)
        except (ValueError, RecursionError) as exc:
            return Decoded(
                schema_id, schema=schema, error=f"does not decode with {schema.label}: {exc}"
            )
        return Decoded(schema_id, value, schema)


def encode(registry: SchemaRegistry, schema: RegisteredSchema, text: str) -> bytes:
    """`text` (JSON) encoded with `schema` into the Confluent wire format; InvalidArgument
    saying what is wrong when it is not JSON or does not fit the schema. Protobuf values
    are the file's first message type."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise errors.InvalidArgument(f"not JSON: {exc}") from None
    _schema, compiled = registry.compiled(schema.id)
    head = bytes([MAGIC]) + schema.id.to_bytes(4, "big")
    if compiled.schema_type == AVRO:
        import fastavro
        from fastavro.validation import validate

        try:
            validate(value, compiled.avro, raise_errors=True)
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, compiled.avro, value)
        except Exception as exc:  # ValidationError and the writer's own TypeErrors
            why = "; ".join(map(str, getattr(exc, "errors", None) or [exc]))
            raise errors.InvalidArgument(f"does not fit {schema.label}: {why}") from None
        return head + buf.getvalue()
    if compiled.schema_type == PROTOBUF:
        from google.protobuf import json_format, message_factory

        desc = _message_descriptor(compiled.proto_file, [0])
        try:
            message = json_format.ParseDict(value, message_factory.GetMessageClass(desc)())
        except (json_format.ParseError, TypeError, ValueError) as exc:
            raise errors.InvalidArgument(f"does not fit {schema.label}: {exc}") from None
        return head + b"\x00" + message.SerializeToString()
    problem = _json_problem(compiled, value)
    if problem:
        raise errors.InvalidArgument(f"does not fit {schema.label}: {problem}")
    return head + json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
