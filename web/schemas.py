"""The topic page's Schemas part: the schemas bound to the topic's values and keys
(docs/SCHEMAS.md, subjects `/stream:topic-value` and `-key`), and a form that registers a
new version, as the logged-in user (produce_perm on the stream; the registry's ACE rules).

It is its own small blueprint so the topic page only includes its partial
(schemas/_topic.html); the form posts with htmx and gets the partial back."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from engine import errors
from engine.client import schemas as sc
from engine.records import TopicInfo
from web.pages import cluster, render, wants_partial

schemas = Blueprint("schemas", __name__)

PARTS = (("value", "Values"), ("key", "Keys"))


def topic_schemas(topic: str) -> list[tuple[str, str, sc.RegisteredSchema | None]]:
    """(part, subject to register under, latest schema or None) for the topic's values
    and keys; a user who may not read them sees None."""
    found = []
    for part, _label in PARTS:
        subject = f"{topic}-{part}"
        try:
            schema = cluster().schemas.for_topic(topic, key=part == "key")
        except errors.PartitionletError:
            schema = None
        found.append((part, schema.subject if schema else subject, schema))
    return found


@schemas.app_context_processor
def _helpers() -> dict[str, Any]:
    return {"topic_schemas": topic_schemas, "schema_types": sc.SCHEMA_TYPES}


def _context(info: TopicInfo, **extra: Any) -> dict[str, Any]:
    return {"topic": info, "schema_form": {}, "schema_errors": {}, "schema_done": None} | extra


@schemas.route("/topics/<path:name>/schemas", methods=["POST"])
def register(name: str):
    info = cluster().topic("/" + name)
    form = {k: request.form.get(k, "") for k in ("part", "schema_type", "schema")}
    problems: dict[str, str] = {}
    part = form["part"] if form["part"] in ("value", "key") else None
    if part is None:
        problems["part"] = "register the schema of the values or of the keys"
    done = None
    if part is not None and not problems:
        subject = dict((p, s) for p, s, _x in topic_schemas(info.name))[part]
        try:
            done = cluster().schemas.register(
                subject, form["schema"].replace("\r\n", "\n"), form["schema_type"] or sc.AVRO
            )
        except (sc.InvalidSchema, sc.IncompatibleSchema) as exc:
            problems["schema"] = str(exc)
        except errors.AccessDenied as exc:
            problems["schema"] = f"Access denied: {exc}"
    status = 400 if problems else 200
    context = _context(info, schema_form=form, schema_errors=problems, schema_done=done)
    body = render("schemas/topic.html", "schemas/_topic.html", **context)
    return body, (200 if wants_partial() else status)
