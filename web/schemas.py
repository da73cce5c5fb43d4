"""Schemas in the console (docs/SCHEMAS.md), read as the logged-in user (the registry's
ACE rules: a stream's subjects are read with its consume_perm or produce_perm):

- the Schemas page (`/schemas`, `g c`): every subject the user may read, with its
  versions, its compatibility level and the topic that uses it (TopicNameStrategy:
  `/stream:topic-value` and `-key`); a subject's page (`/schemas/subject?name=`) shows each
  version's schema;
- the topic page's Schema tab: the schemas bound to the topic's values and keys, and a
  form that registers a new version (produce_perm on the stream). The tab includes the
  partial (schemas/_topic.html); the form posts with htmx and gets the partial back."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, request

from engine import errors
from engine.client import schemas as sc
from engine.records import TopicInfo
from web.pages import cluster, render, wants_partial

schemas = Blueprint("schemas", __name__)

PARTS = (("value", "Values"), ("key", "Keys"))
# The Schemas page lists at most this many subjects; the filter narrows them.
MAX_SUBJECTS = 500


def _topic_of(subject: str) -> dict[str, str] | None:
    """{"name", "part"} of the topic whose values or keys `subject` holds, when it exists."""
    found = cluster().schemas.topic_of(subject)
    if found is None:
        return None
    try:
        cluster().topic(found[0])
    except (errors.NotFound, errors.InvalidName):
        return None
    return {"name": found[0], "part": found[1]}


def _subject_row(subject: str) -> dict[str, Any]:
    """What the Schemas page shows of `subject`: versions, the latest, the compatibility
    level (its own, or the registry's) and the topic that uses it."""
    registry = cluster().schemas
    own = registry.compatibility(subject, fallback=False)
    return {
        "subject": subject,
        "versions": registry.versions(subject),
        "latest": registry.version(subject),
        "compatibility": own or registry.compatibility(),
        "own_compatibility": own is not None,
        "topic": _topic_of(subject),
    }


@schemas.route("/schemas")
def index():
    """The subjects the user may read, filtered by `q` (a part of the name)."""
    query = (request.args.get("q") or "").strip()
    registry = cluster().schemas
    subjects = [s for s in registry.subjects() if query.casefold() in s.casefold()]
    rows = []
    for subject in subjects[:MAX_SUBJECTS]:
        try:
            rows.append(_subject_row(subject))
        except sc.SubjectNotFound:  # deleted since it was listed
            continue
    return render(
        "schemas/index.html",
        "schemas/_subjects.html",
        rows=rows,
        query=query,
        total=len(subjects),
        max_subjects=MAX_SUBJECTS,
        default_compatibility=registry.compatibility(),
    )


@schemas.route("/schemas/subject")
def subject():
    """One subject (`name`): each version's schema, and the other subjects that have it."""
    name = request.args.get("name") or ""
    registry = cluster().schemas
    try:
        row = _subject_row(name)
        versions = [registry.version(name, v) for v in row["versions"]]
    except (sc.SubjectNotFound, errors.AccessDenied):
        # a subject the user may not read is not told from one that does not exist
        abort(404, description=f"No subject {name[:200]!r} that you may read.")
    shared = {v.version: [(s, n) for s, n in registry.uses(v.id) if s != name] for v in versions}
    return render("schemas/subject.html", row=row, versions=versions[::-1], shared=shared)


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
    denied = False
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
            denied = True  # a refusal answers 403, as every other refused action
    status = 403 if denied else 400 if problems else 200
    context = _context(info, schema_form=form, schema_errors=problems, schema_done=done)
    body = render("schemas/topic.html", "schemas/_topic.html", **context)
    return body, (200 if wants_partial() else status)
