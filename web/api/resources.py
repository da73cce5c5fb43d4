"""The resource endpoints: streams, topics, messages, consumer groups, replicas and heat.

Each request acts as the owner of its API token (`pages.cluster()` is the engine cluster as
that user), so the engine checks every ACE: reading messages needs consume_perm, producing
produce_perm, creating topics topic_perm, editing policies and resetting offsets admin_perm.
Metadata (stream and topic names, sizes, heat) is shown to every user, as the console's
pages show it; a consumer group to those its describe_perm lets in, with the topics they may
consume (engine.groups.perms). Stream paths and topic full names come in URLs without their
leading slash: `/api/v1/streams/apps/sensors`, `/api/v1/topics/apps/sensors:car-17`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import Response, request

from engine import errors
from engine.client import browse, imports
from engine.client.browse import encoded, record_json, timestamp_type_name
from engine.client.producer import produce_one
from engine.client.schemas import Decoded, SchemaDecoder
from engine.groups import group_json, group_summary, parse_target, permissions_json, plan_json
from engine.ops.heat import MAX_WINDOW_S, Load
from engine.records import ConsumerRecord, PartitionInfo, TopicInfo
from web.api import api
from web.api.base import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    authenticate_user,
    engine_error,
    field,
    json_body,
    json_response,
    paging,
    query_int,
    stream_path,
    topic_name,
)
from web.pages import cluster, user

# The record shapes `?shape=` may ask for: "v1" is engine.client.browse.record_json;
# "v0", the shape before it, is deprecated and goes in the next release (docs/API.md).
SHAPES = ("v1", "v0")
# `?decode=`: "schema" decodes keys and values in the Confluent wire format with the
# cluster's registry (engine.client.schemas), as the consoles show them.
DECODES = ("none", "schema")
HEAT_TOP_PARTITIONS = 20


@api.before_request
def _authenticate() -> Response | None:
    if request.endpoint == "api.replication":
        return None  # per-stream replication tokens, checked by that endpoint
    return authenticate_user()


@api.errorhandler(errors.PartitionletError)
def _engine_error(exc: errors.PartitionletError) -> Response:
    return engine_error(exc)


# --- shapes ----------------------------------------------------------------------------------


def stream_json(info: Any) -> dict[str, Any]:
    return asdict(info)


def partition_json(info: PartitionInfo, *, chain: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "partition": info.partition,
        "log_start_offset": info.log_start_offset,
        "log_end_offset": info.log_end_offset,
        "high_watermark": info.high_watermark,
        "messages": info.messages,
        "bytes": info.bytes,
        "first_timestamp": info.first_timestamp,
        "last_timestamp": info.last_timestamp,
    }
    if chain:
        data["partitionlets"] = [asdict(p) for p in info.partitionlets]
    return data


def topic_json(info: TopicInfo, *, partitions: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": info.name,
        "stream": info.stream,
        "topic": info.topic,
        "created_ms": info.created_ms,
        "partition_count": info.partition_count,
        "messages": info.messages,
        "bytes": info.bytes,
        # effective (the stream's, with the topic's own on top) and the topic's own
        "policies": info.policies,
        "overrides": info.overrides,
    }
    if partitions:
        data["partitions"] = [partition_json(p) for p in info.partitions]
    return data


def record_json_v0(record: ConsumerRecord) -> dict[str, Any]:
    """Deprecated: a record as the API wrote it before `browse.record_json` (headers as
    `{"key", "value", "value_encoding"}`, no `time`). Asked for with `?shape=v0`."""
    obj: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": timestamp_type_name(record.timestamp_type),
    }
    obj["key"], obj["key_encoding"] = encoded(record.key)
    obj["value"], obj["value_encoding"] = encoded(record.value)
    headers = []
    for name, value in record.headers or ():
        text, encoding = encoded(value)
        headers.append({"key": name, "value": text, "value_encoding": encoding})
    obj["headers"] = headers
    return obj


def decoder_arg(topic: str) -> SchemaDecoder | None:
    """The decoder `?decode=schema` asks for (None for `none`, the default)."""
    decode = request.args.get("decode") or "none"
    if decode not in DECODES:
        raise errors.InvalidArgument(f"decode must be one of {', '.join(DECODES)}, not {decode!r}")
    return SchemaDecoder(cluster().schemas, topic=topic) if decode == "schema" else None


def _decoded_json(found: Decoded | None) -> tuple[Any, dict[str, Any] | None]:
    if found is None:
        return None, None  # not in the wire format: `value` says it all
    schema: dict[str, Any] = {"id": found.schema_id}
    if found.schema is not None:
        schema |= {
            "type": found.schema.schema_type,
            "subject": found.schema.subject or None,
            "version": found.schema.version or None,
        }
    if not found.ok:
        schema["error"] = found.error
    return (found.value if found.ok else None), schema


def record_out(
    record: ConsumerRecord, decoder: SchemaDecoder | None, aborted: bool
) -> dict[str, Any]:
    """The record shape with `aborted` (written by a transaction that aborted: read_committed
    readers never see it), plus with a decoder `key_decoded`/`value_decoded` (the JSON the
    schema decodes to) and `key_schema`/`value_schema` (id, type, subject, version, and
    `error` when it did not decode); all null for bytes not in the wire format."""
    obj = record_json(record)
    obj["aborted"] = aborted
    if decoder is not None:
        for part in ("key", "value"):
            value, schema = _decoded_json(decoder.decode(getattr(record, part)))
            obj[f"{part}_decoded"] = value
            obj[f"{part}_schema"] = schema
    return obj


def load_json(load: Load) -> dict[str, Any]:
    return {
        "write_messages": load.write_messages,
        "write_bytes": load.write_bytes,
        "read_messages": load.read_messages,
        "read_bytes": load.read_bytes,
        "seconds": load.seconds,
        "write_messages_per_s": load.write_messages_per_s,
        "write_bytes_per_s": load.write_bytes_per_s,
        "read_messages_per_s": load.read_messages_per_s,
        "read_bytes_per_s": load.read_bytes_per_s,
    }


def _page(items: list[Any], key: str, limit: int, offset: int, total: int | None = None) -> dict:
    more = len(items) > limit
    items = items[:limit]
    page: dict[str, Any] = {key: items, "limit": limit, "offset": offset}
    if total is not None:
        page["total"] = total
    page["next_offset"] = offset + limit if more else None
    return page


# --- streams ---------------------------------------------------------------------------------


@api.route("/me")
def me() -> Response:
    """Whom the token acts as: a cheap check that a token works."""
    who = user()
    return json_response(
        {
            "name": who.name,
            "groups": list(who.groups),
            "admin": who.admin,
            "read_only": who.read_only,  # refused every change (docs/WEB.md, "Read-only")
        }
    )


@api.route("/streams")
def streams() -> Response:
    """Streams by path: `prefix` (its leading slash optional), `limit`, `offset`."""
    limit, offset = paging()
    prefix = request.args.get("prefix") or None
    if prefix is not None and not prefix.startswith("/"):
        prefix = "/" + prefix
    c = cluster()
    found = [stream_json(s) for s in c.streams(prefix, limit + 1, offset)]
    return json_response(_page(found, "streams", limit, offset, c.stream_count(prefix)))


@api.route("/streams", methods=["POST"])
def create_stream() -> Response:
    """`{"path": "/apps/x", "policies": {...}}` -> the stream (201)."""
    body = json_body()
    path = field(body, "path", str, required=True)
    policies = field(body, "policies", dict) or {}
    return json_response(stream_json(cluster().create_stream(path, **policies)), 201)


@api.route("/streams/<path:stream>")
def stream(stream: str) -> Response:
    return json_response(stream_json(cluster().stream(stream_path(stream))))


@api.route("/streams/<path:stream>", methods=["PATCH"])
def edit_stream(stream: str) -> Response:
    """`{"policies": {...}}`: change those policies (admin_perm); the others stay."""
    body = json_body()
    policies = field(body, "policies", dict, required=True)
    return json_response(stream_json(cluster().edit_stream(stream_path(stream), **policies)))


@api.route("/streams/<path:stream>", methods=["DELETE"])
def delete_stream(stream: str) -> Response:
    """Delete the stream with its topics and messages (admin_perm): 204."""
    cluster().delete_stream(stream_path(stream))
    return Response(status=204)


@api.route("/streams/<path:stream>/topics")
def stream_topics(stream: str) -> Response:
    """Topics of a stream by name: `prefix`, `limit`, and `after` (the last name of the
    previous page, as a cursor that costs the same on every page) or `offset`."""
    path = stream_path(stream)
    limit, offset = paging()
    prefix = request.args.get("prefix") or None
    after = request.args.get("after") or None
    if after is not None and offset:
        raise errors.InvalidArgument("page with after or with offset, not both")
    if after is not None and after.startswith("/"):
        after = after.rpartition(":")[2]  # a full name: the cursor is the name in the stream
    c = cluster()
    found = c.topics(path, prefix, limit + 1, offset, after=after)
    more = len(found) > limit
    found = found[:limit]
    return json_response(
        {
            "stream": path,
            "topics": [topic_json(t, partitions=False) for t in found],
            "limit": limit,
            "offset": offset,
            "after": after,
            "total": c.topic_count(path, prefix),
            "next_after": found[-1].topic if more and found else None,
        }
    )


@api.route("/streams/<path:stream>/replicas")
def stream_replicas(stream: str) -> Response:
    """The stream's links out (with state and lag) and in."""
    path = stream_path(stream)
    c = cluster()
    return json_response(
        {
            "stream": path,
            "replicas": [asdict(r) for r in c.replicas(path)],
            "upstreams": [asdict(u) for u in c.upstreams(path)],
        }
    )


# --- topics ----------------------------------------------------------------------------------


@api.route("/topics", methods=["POST"])
def create_topic() -> Response:
    """`{"name": "/apps/x:t", "partitions": 3, "policies": {...}}` -> the topic (201);
    `policies` are its own overrides of its stream's; needs topic_perm."""
    body = json_body()
    name = field(body, "name", str, required=True)
    partitions = field(body, "partitions", int)
    policies = field(body, "policies", dict)
    return json_response(topic_json(cluster().create_topic(name, partitions, policies)), 201)


@api.route("/topics/<path:name>")
def topic(name: str) -> Response:
    """A topic with its partitions and each partition's partitionlet chain."""
    return json_response(topic_json(cluster().topic(topic_name(name))))


@api.route("/topics/<path:name>", methods=["PATCH"])
def edit_topic(name: str) -> Response:
    """`{"partitions": N}`: grow the topic to N partitions (never fewer); `{"policies":
    {...}}`: change those overrides (null removes one; the others stay). topic_perm."""
    body = json_body()
    count = field(body, "partitions", int)
    policies = field(body, "policies", dict)
    if count is None and policies is None:
        raise errors.InvalidArgument("send 'partitions', 'policies' or both")
    c = cluster()
    full = topic_name(name)
    if policies is not None:
        info = c.edit_topic(full, **policies)
    if count is not None:
        info = c.add_partitions(full, count)
    return json_response(topic_json(info))


@api.route("/topics/<path:name>", methods=["DELETE"])
def delete_topic(name: str) -> Response:
    """Delete the topic with its messages and committed offsets (topic_perm): 204."""
    cluster().delete_topic(topic_name(name))
    return Response(status=204)


@api.route("/topics/<path:name>/messages")
def messages(name: str) -> Response:
    """A page of a topic's messages (consume_perm), read by the engine's browse service
    with the web page's query grammar (`browse.parse_query`): `partition`, `start`
    (oldest by default here, newest, offset, time), `offset`, `time`, `direction`,
    `limit`, substring filters `key`, `value` and `text`, `header` and `filter` in the
    filter grammar (engine.client.filters: `host: api-2`, `host=api-2`, `host:api-2`),
    `icase`, `cursor` (a page's `cursor`, to continue) and `isolation_level`
    (read_uncommitted, the default, shows aborted messages marked `aborted`, with the
    transaction `markers` among them; read_committed leaves them out and stops at each
    partition's last stable offset). `shape=v0` answers records in the deprecated shape;
    `decode=schema` adds the schema-decoded key and value."""
    full = topic_name(name)
    shape = request.args.get("shape") or "v1"
    if shape not in SHAPES:
        raise errors.InvalidArgument(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    decoder = decoder_arg(full)
    if decoder is not None and shape == "v0":
        raise errors.InvalidArgument("decode=schema needs the record shape v1")
    if request.args.get("offset") and request.args.get("time"):
        raise errors.InvalidArgument("give offset or time, not both")
    level = request.args.get("isolation_level") or "read_uncommitted"  # the engine checks it
    c = cluster()
    info = c.topic(full)
    try:
        query = browse.parse_query(
            request.args,
            info,
            default_start="oldest",
            default_limit=DEFAULT_LIMIT,
            max_limit=MAX_LIMIT,
        )
        # the browser checks consume_perm as the token's user
        with browse.Browser(c, query.topic, query.partitions, isolation_level=level) as browser:
            page = browser.page(query)
            marks = browser.marks(page.records)
            mask = browser.mask
    except browse.BadQuery as exc:
        # the API's error name for a bad argument, whichever module found it
        raise errors.InvalidArgument(str(exc)) from None
    records = page.records
    if shape == "v0":
        out = [record_json_v0(r) for r in sorted(records, key=lambda r: (r.partition, r.offset))]
    else:
        out = [record_out(r, decoder, marks.is_aborted(r)) for r in records]
    return json_response(
        {
            "topic": page.topic,
            "messages": out,
            "markers": [
                {
                    "partition": m.partition,
                    "offset": m.offset,
                    "type": m.kind,
                    "producer_id": m.producer_id,
                    "producer_epoch": m.epoch,
                }
                for m in marks.markers
            ],
            "cursor": page.cursor,
            "more": page.more,
            "budget_exhausted": page.budget_exhausted,
            "scanned": page.scanned,
            "next_offsets": {str(p): o for p, o in sorted(page.positions.items())},
            "end_offsets": {str(p): o for p, o in sorted(page.ends.items())},
            "end_reached": not page.more,
            # the stream's mask policy when it applies to this user (engine.masking)
            "masked": mask.text if mask is not None else None,
        }
    )


def _decode(body: dict[str, Any], name: str, where: str = "") -> bytes | None:
    data = body.get(name)
    if data is None:
        return None  # null, whatever its encoding says
    # the record shape's decoding, the one an import of a file does
    return imports.decoded(data, body.get(f"{name}_encoding"), f"{where}{name}")


def _headers(raw: Any) -> list[tuple[str, bytes]] | None:
    if raw is None:
        return None
    if isinstance(raw, dict):
        raw = [{"key": k, "value": v} for k, v in raw.items()]
    if not isinstance(raw, list):
        raise errors.InvalidArgument("headers must be a list of {key, value} or an object")
    headers = []
    for i, item in enumerate(raw):
        if isinstance(item, dict) and "name" in item:
            # the record shape's header (name, value, encoding): what a read gives back
            item = {"key": item["name"], "value": item.get("value")} | (
                {"value_encoding": item["encoding"]} if item.get("encoding") else {}
            )
        if not isinstance(item, dict) or not isinstance(item.get("key"), str) or not item["key"]:
            raise errors.InvalidArgument(f"headers[{i}] needs a non-empty string name")
        headers.append((item["key"], _decode(item, "value", f"headers[{i}].") or b""))
    return headers


@api.route("/topics/<path:name>/messages", methods=["POST"])
def produce(name: str) -> Response:
    """Produce one message (produce_perm, acks="all"): `key`, `value` (text, or base64 with
    `key_encoding`/`value_encoding: "base64"`), `headers`, `partition`, `timestamp_ms`.
    Answers its RecordMetadata (201) once it is committed."""
    full = topic_name(name)
    body = json_body()
    key = _decode(body, "key")
    value = _decode(body, "value")
    headers = _headers(body.get("headers"))
    partition = field(body, "partition", int)
    timestamp_ms = field(body, "timestamp_ms", int)
    meta = produce_one(
        cluster(),
        full,
        value=value,
        key=key,
        partition=partition,
        headers=headers,
        timestamp_ms=timestamp_ms,
    )
    return json_response(
        {
            "topic": meta.topic,
            "partition": meta.partition,
            "offset": meta.offset,
            "timestamp": meta.timestamp,
        },
        201,
    )


# --- consumer groups -------------------------------------------------------------------------


@api.route("/groups")
def groups() -> Response:
    """Consumer groups by id, with state and lag: `limit`, `offset`."""
    limit, offset = paging()
    found = cluster().groups()
    items = [group_summary(g) for g in found[offset : offset + limit + 1]]
    return json_response(_page(items, "groups", limit, offset, len(found)))


@api.route("/groups/<path:group_id>")
def group(group_id: str) -> Response:
    """A group (its describe_perm) with its permissions (docs/API.md)."""
    c = cluster()
    info = c.group(group_id)
    return json_response(
        {**group_json(info), "permissions": permissions_json(c.group_permissions(group_id))}
    )


@api.route("/groups/<path:group_id>/reset", methods=["POST"])
def reset_group(group_id: str) -> Response:
    """`{"topic": "/s:t", "to": "earliest" | "latest" | OFFSET | "ISO time"}`: set the
    group's committed offsets on that topic (the group's reset_perm and the topic's
    consume_perm; the group must be empty)."""
    body = json_body()
    topic = field(body, "topic", str, required=True)
    to = body.get("to")
    result = cluster().reset_offsets(group_id, topic, parse_target(to))
    return json_response(
        {
            "group_id": group_id,
            "topic": topic,
            "offsets": [
                {"partition": tp.partition, "offset": o} for tp, o in sorted(result.items())
            ],
        }
    )


@api.route("/groups/<path:group_id>/reset-offsets", methods=["POST"])
def reset_offsets(group_id: str) -> Response:
    """`{"topic", "to", "partitions": [..] (default all), "dry_run": true}`: the plan per
    partition (`Cluster.plan_offset_reset`); with `dry_run: false` it is also applied
    (`Cluster.apply_offset_reset`: exactly that plan, or 409 when the group changed since).
    The group's reset_perm and the topic's consume_perm; the group must have no live
    members (409)."""
    body = json_body()
    topic = field(body, "topic", str, required=True)
    target = parse_target(body.get("to"))
    partitions = field(body, "partitions", list)  # each checked by the engine
    dry_run = body.get("dry_run", True)
    if not isinstance(dry_run, bool):
        raise errors.InvalidArgument(f"dry_run must be true or false, not {dry_run!r}")
    c = cluster()
    plans = c.plan_offset_reset(group_id, topic, target, partitions=partitions)
    if not dry_run:
        c.apply_offset_reset(group_id, plans)
    return json_response(
        {
            "group_id": group_id,
            "topic": topic,
            "dry_run": dry_run,
            "applied": not dry_run,
            "plan": [plan_json(p) for p in plans],
        }
    )


@api.route("/groups/<path:group_id>", methods=["DELETE"])
def delete_group(group_id: str) -> Response:
    """Delete the group (`Cluster.delete_group`: the group's delete_perm): 204; 409 while
    it has live members, 404 for an unknown group."""
    cluster().delete_group(group_id)
    return Response(status=204)


# --- heat ------------------------------------------------------------------------------------


@api.route("/heat")
def heat() -> Response:
    """Load over the last `window_s` seconds (default 300): totals per volume and topic,
    the `limit` hottest partitions (default 20), and per-bucket series per volume."""
    window_s = query_int("window_s", 300, minimum=1, maximum=MAX_WINDOW_S)
    top = query_int("limit", HEAT_TOP_PARTITIONS, minimum=1, maximum=MAX_LIMIT)
    hm = cluster().heat(window_s)
    return json_response(
        {
            "window_s": hm.window_s,
            "bucket_s": hm.bucket_s,
            "buckets": hm.buckets,
            "total": load_json(hm.total),
            "volumes": [
                {
                    "volume": v,
                    **load_json(load),
                    "series": [load_json(x) for x in hm.volume_series.get(v, [])],
                }
                for v, load in sorted(hm.volumes.items())
            ],
            "topics": [{"topic": t, **load_json(load)} for t, load in sorted(hm.topics.items())],
            "hottest_partitions": [
                {"topic": tp.topic, "partition": tp.partition, **load_json(load)}
                for tp, load in hm.hottest_partitions(top)
            ],
        }
    )
