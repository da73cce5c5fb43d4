"""The Streams list and the Stream page: search, sort and paging of streams; a stream's
facts, its policies in a form, its topics (keyset paging), and its replication links.

Speed: the stream page costs the same whatever the size of the stream: it reads
`topic_count` (a stored counter) and one page of topics by name (`after=` the last name
shown, no OFFSET walk), and the replication links, whose lag the engine measures over
every topic of the stream, load in their own request so they never hold the page up.
The list pages streams by path with an offset (the only order the engine keeps an index
for; the other sorts order the current page and say so) and counts them, so its deep
pages grow with the number of streams (docs/BENCHMARKS.md has the numbers).

URLs: a stream path starts with `/`, so `/apps/sensors` is `/streams/apps/sensors`.
Actions on a stream sit under `/~/` (`/streams/apps/sensors/~/policies`): `~` cannot
appear in a stream path, so no action URL is ever also a stream's page.
"""

from __future__ import annotations

import math
from dataclasses import replace
from operator import attrgetter
from typing import Any

from flask import Blueprint, Response, flash, redirect, request, url_for
from werkzeug.datastructures import MultiDict

from engine import errors, names
from engine import policies as stream_policies
from web.pages import cluster, render, wants_partial
from web.search import find, hit_url

streams = Blueprint("streams", __name__)

PAGE_SIZES = (20, 50, 100, 200)
DEFAULT_PAGE_SIZE = 50
TOPIC_PAGE_SIZES = (20, 50, 100, 200)
DEFAULT_TOPIC_PAGE_SIZE = 50
NAME_MATCHES = 20  # streams and topics containing the search text, shown above the list

# Sort keys of the list: (label, StreamInfo attribute). Only "path" spans every page.
SORTS = {
    "path": ("Path", "path"),
    "topics": ("Topics (this page)", "topic_count"),
    "bytes": ("Size (this page)", "bytes"),
    "messages": ("Messages (this page)", "messages"),
}

# The policies form shows the engine's table (label, help, type, choices) in its order.
POLICY_FIELDS = stream_policies.POLICIES
BOOL_POLICIES = tuple(p.name for p in POLICY_FIELDS if p.type is bool)
# The policies the create form offers (the rest take their defaults).
CREATE_FIELDS = ("ttl", "default_partitions", "auto_create", "compact")
# The policies a topic may override, in the table's order (the topic forms).
TOPIC_POLICY_FIELDS = tuple(p for p in POLICY_FIELDS if p.topic)


# --- helpers -------------------------------------------------------------------------------


def _int_arg(name: str, default: int, allowed: tuple[int, ...] | None = None) -> int:
    """A whole-number query argument; garbage or a value not offered falls back to
    `default` (a list is still a list with a bad `?page=`)."""
    try:
        value = int(request.args.get(name, default))
    except ValueError:
        return default
    if allowed is not None and value not in allowed:
        return default
    return value


def _stream_prefix(query: str) -> str | None:
    """The path prefix a search stands for: paths start with `/`, so `apps` means `/apps`."""
    query = query.strip()
    if not query:
        return None
    return query if query.startswith("/") else "/" + query


def _policy_values(form: MultiDict) -> dict[str, str]:
    """The policies a form sent, as text (the engine parses and checks them). A checkbox
    comes with a hidden `false` before it, so a form that shows it always sends it and a
    form that does not leaves the policy alone."""
    values: dict[str, str] = {}
    for name in stream_policies.DEFAULTS:
        sent = form.getlist(name)
        if not sent:
            continue
        if name in BOOL_POLICIES:
            values[name] = "true" if "true" in sent else "false"
        else:
            values[name] = sent[-1].strip()
    return values


def _policy_errors(values: dict[str, Any]) -> dict[str, str]:
    """Every bad value at once, by policy (the engine checks one policy per call here, so
    the form can show all its errors, not just the first)."""
    found: dict[str, str] = {}
    for name, value in values.items():
        try:
            stream_policies.validate({name: value})
        except errors.InvalidPolicy as exc:
            found[name] = str(exc)
    return found


def _override_values(form: MultiDict) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """A topic's overrides as a form sends them: a ticked `override` box per policy with
    its value (the stream form's controls). (the ticked ones by name, as text; every policy
    value sent, to show again; the errors, checked as a stream's policies are). Names that
    are no policy, or not one a topic may override, are left to the engine to refuse."""
    values = _policy_values(form)
    wanted = {n: values.get(n, form.get(n, "")) for n in form.getlist("override") if n}
    found = _policy_errors({n: v for n, v in wanted.items() if n in stream_policies.TOPIC_POLICIES})
    return wanted, values, found


def _override_error(exc: errors.InvalidPolicy, wanted: dict[str, str], other: str) -> str:
    """The field of a topic form an engine error belongs to: the override it names, else
    `other` (a name no topic may override has no field of its own)."""
    key = _error_policy(exc, wanted)
    return key if key in stream_policies.TOPIC_POLICIES else other


def _error_policy(exc: errors.InvalidPolicy, values: dict[str, Any]) -> str:
    """The field an engine error belongs to: the policy it names, else the form."""
    named = getattr(exc, "policy", None)
    if named in values:
        return named
    for name in values:
        if f"'{name}'" in str(exc) or str(exc).startswith(f"{name}:"):
            return name
    return "form"


def _stream_url(path: str, **args: Any) -> str:
    return url_for("streams.stream", stream=path.lstrip("/"), **args)


# --- the list ------------------------------------------------------------------------------


def _list_context() -> dict[str, Any]:
    query = request.args.get("q", "").strip()
    prefix = _stream_prefix(query)
    sort = request.args.get("sort", "path")
    sort = sort if sort in SORTS else "path"
    order = "desc" if request.args.get("order") == "desc" else "asc"
    size = _int_arg("size", DEFAULT_PAGE_SIZE, PAGE_SIZES)
    c = cluster()
    total = c.stream_count(prefix)
    pages = max(1, math.ceil(total / size))
    page = min(max(1, _int_arg("page", 1)), pages)
    if sort == "path" and order == "desc":
        # The engine pages by path ascending: page n from the end is an ascending slice,
        # reversed, so descending order spans every page too.
        end = total - (page - 1) * size
        start = max(0, end - size)
        rows = c.streams(prefix, limit=max(0, end - start), offset=start)[::-1]
    else:
        rows = c.streams(prefix, limit=size, offset=(page - 1) * size)
        if sort != "path":
            rows.sort(key=attrgetter(SORTS[sort][1]), reverse=order == "desc")
    args = {"q": query, "sort": sort, "order": order, "size": size}
    # streams and topics whose names contain the text anywhere, in any stream (less the
    # streams the list below shows already)
    names = find(query, limit=NAME_MATCHES)
    if names["result"] is not None:
        listed = {r.path for r in rows}
        names["result"] = replace(
            names["result"],
            hits=[h for h in names["result"].hits if not (h.kind == "stream" and h.name in listed)],
        )
    return {
        **{"name_" + k: v for k, v in names.items()},
        "hit_url": hit_url,
        "rows": rows,
        "query": query,
        "prefix": prefix,
        "sort": sort,
        "order": order,
        "size": size,
        "page_no": page,
        "pages": pages,
        "total": total,
        "first_row": (page - 1) * size + 1 if rows else 0,
        "page_links": _page_links(page, pages),
        "list_args": {k: v for k, v in args.items() if v and not _is_default(k, v)},
        "sorts": SORTS,
        "page_sizes": PAGE_SIZES,
    }


def _is_default(name: str, value: Any) -> bool:
    return (name, value) in {("sort", "path"), ("order", "asc"), ("size", DEFAULT_PAGE_SIZE)}


def _page_links(page: int, pages: int) -> list[int | None]:
    """Page numbers to show: the first, the last, and two either side of the current one;
    None marks a gap."""
    wanted = sorted({1, pages, *range(max(1, page - 2), min(pages, page + 2) + 1)})
    links: list[int | None] = []
    for number in wanted:
        if links and number - links[-1] > 1:
            links.append(None)
        links.append(number)
    return links


def _create_defaults() -> dict[str, Any]:
    return {
        name: stream_policies.form_text(name, value)
        for name, value in stream_policies.DEFAULTS.items()
        if name in CREATE_FIELDS
    }


@streams.route("/streams")
def index():
    return render(
        "streams/index.html",
        "streams/_list.html",
        create={"path": "", **_create_defaults()},
        create_errors={},
        fields=[p for p in POLICY_FIELDS if p.name in CREATE_FIELDS],
        **_list_context(),
    )


@streams.route("/streams", methods=["POST"])
def create():
    path = request.form.get("path", "").strip()
    values = {k: v for k, v in _policy_values(request.form).items() if k in CREATE_FIELDS}
    found = _policy_errors(values)
    if not path:
        found["path"] = "A stream path is required, for example /apps/sensors."
    else:
        try:  # checked apart too, so a bad path and bad policies show at once
            names.validate_stream_path(path)
        except errors.InvalidName as exc:
            found["path"] = str(exc)
    if not found:
        try:
            cluster().create_stream(path, **values)
        except (errors.InvalidName, errors.StreamExists) as exc:
            found["path"] = str(exc)
        except errors.InvalidPolicy as exc:
            found[_error_policy(exc, values)] = str(exc)
        except errors.AccessDenied as exc:
            found["form"] = str(exc)
    if not found:
        flash(f"Created stream {path}.")
        target = _stream_url(path)
        if wants_partial():
            return Response(status=204, headers={"HX-Redirect": target})
        return redirect(target, code=303)
    status = 403 if set(found) == {"form"} else 400
    context = {
        "create": {"path": path, **_create_defaults(), **values},
        "create_errors": found,
        "fields": [p for p in POLICY_FIELDS if p.name in CREATE_FIELDS],
    }
    if wants_partial():
        return render("streams/index.html", "streams/_create.html", **context)
    return render("streams/index.html", None, **context, **_list_context()), status


# --- the stream page -----------------------------------------------------------------------


def _topics_context(path: str, source: MultiDict | None = None) -> dict[str, Any]:
    """One page of the stream's topics: by name after `after`, or the last page; with a
    name prefix `tq`. Costs one index range per page, never a count of the matches."""
    source = request.args if source is None else source
    query = source.get("tq", "").strip()
    after = source.get("after", "").strip() or None
    last = source.get("last") == "1" and not query
    try:
        size = int(source.get("tsize", DEFAULT_TOPIC_PAGE_SIZE))
    except ValueError:
        size = DEFAULT_TOPIC_PAGE_SIZE
    size = size if size in TOPIC_PAGE_SIZES else DEFAULT_TOPIC_PAGE_SIZE
    c = cluster()
    count = c.topic_count(path)  # a stored counter: O(1) at any size
    if last:
        start = max(0, count - size)
        rows = c.topics(path, limit=size, offset=start)  # the engine walks from the end
        more = False
        after = None
    else:
        rows = c.topics(path, query or None, limit=size + 1, after=after)
        more = len(rows) > size
        rows = rows[:size]
        start = 0 if after is None and not query else None
    matches = None
    if query and not rows and after is None and len(query) >= 3:
        # no name starts with it: the names that contain it, from the trigram index
        matches = c.search(query, stream=path, limit=size)
    state = {"tq": query, "tsize": size if size != DEFAULT_TOPIC_PAGE_SIZE else None}
    state = {k: v for k, v in state.items() if v}
    links = []  # (text, accessible name, URL) of the pager
    if after is not None or last:
        links.append(("« First", "First page of topics", _stream_url(path, **state)))
    if more:
        next_url = _stream_url(path, **state, after=rows[-1].topic)
        links.append(("Next ›", "Next page of topics", next_url))
        if not query:
            links.append(("Last »", "Last page of topics", _stream_url(path, **state, last=1)))
    return {
        "stream_path": path,
        "topics": rows,
        "topic_count": count,
        "topic_query": query,
        "topic_matches": matches,
        "hit_url": hit_url,
        "topic_after": after,
        "topic_last": last,
        "topic_size": size,
        "topic_start": start,  # index of the first row when known (first and last pages)
        "topic_more": more,
        "topic_state": state,
        "topic_pages": links,
        "topic_page_sizes": TOPIC_PAGE_SIZES,
    }


def _policy_form(info, values: dict[str, Any] | None = None) -> dict[str, Any]:
    """The policies as the form shows them (durations as the lists do: "7 d"; the engine
    reads that back), with what was sent on top."""
    shown = {name: stream_policies.form_text(name, value) for name, value in info.policies.items()}
    shown.update(values or {})
    return shown


def _topic_policy_form(info, values: dict[str, str] | None = None) -> dict[str, str]:
    """The create form's override controls: the stream's values, or those sent."""
    shown = {k: v for k, v in _policy_form(info).items() if k in stream_policies.TOPIC_POLICIES}
    shown.update({k: v for k, v in (values or {}).items() if k in shown})
    return shown


def _stream_context(path: str, **overrides: Any) -> dict[str, Any]:
    info = cluster().stream(path)
    context = {
        "info": info,
        "stream_path": path,
        "policy_fields": POLICY_FIELDS,
        "policy_values": _policy_form(info),
        "policy_errors": {},
        "policy_saved": False,
        "topic_policy_fields": TOPIC_POLICY_FIELDS,
        "stored_problem": stream_policies.problem(info.policies),
        "topic_form": {"name": "", "partitions": ""},
        "topic_policy_form": _topic_policy_form(info),
        "topic_overridden": set(),
        "topic_errors": {},
        "topic_message": None,
        "create_defaults": {},
    }
    context.update(_topics_context(path))
    context.update(overrides)
    return context


@streams.route("/streams/<path:stream>")
def stream(stream: str):
    path = "/" + stream
    if wants_partial():
        # the topics list asked for another page or a search: only that part
        return render("streams/stream.html", "streams/_topics.html", **_topics_context(path))
    return render("streams/stream.html", None, **_stream_context(path))


@streams.route("/streams/<path:stream>/~/policies", methods=["POST"])
def edit_policies(stream: str):
    path = "/" + stream
    c = cluster()
    info = c.stream(path)  # 404 before anything else
    values = _policy_values(request.form)
    found = _policy_errors(values)
    denied = False
    if not found:
        try:
            info = c.edit_stream(path, **values)
        except errors.InvalidPolicy as exc:
            found[_error_policy(exc, values)] = str(exc)
        except errors.AccessDenied as exc:
            found["form"] = str(exc)
            denied = True
    context = {
        "info": info,
        "stream_path": path,
        "policy_fields": POLICY_FIELDS,
        "policy_values": _policy_form(info, values if found else None),
        "policy_errors": found,
        "policy_saved": not found,
        "topic_policy_fields": TOPIC_POLICY_FIELDS,
        "stored_problem": stream_policies.problem(info.policies),
    }
    if wants_partial():
        return render("streams/stream.html", "streams/_policies.html", **context)
    if not found:
        flash(f"Saved the policies of {path}.")
        return redirect(_stream_url(path), code=303)
    page = _stream_context(path, **context)
    return render("streams/stream.html", None, **page), (403 if denied else 400)


@streams.route("/streams/<path:stream>/~/topics", methods=["POST"])
def create_topic(stream: str):
    path = "/" + stream
    c = cluster()
    name = request.form.get("name", "").strip()
    raw_partitions = request.form.get("partitions", "").strip()
    partitions: int | None = None
    overrides, sent, found = _override_values(request.form)
    if raw_partitions:
        try:
            partitions = int(raw_partitions)
        except ValueError:
            found["partitions"] = f"Partitions must be a whole number, got {raw_partitions!r}."
    if not name:
        found["name"] = "A topic name is required (letters, digits, '.', '_' and '-')."
    else:
        try:  # checked apart too, so a bad name and a bad count show at once
            names.validate_topic_name(name)
        except errors.InvalidName as exc:
            found["name"] = str(exc)
    if not found:
        try:
            c.create_topic(f"{path}:{name}", partitions, overrides)
        except (errors.InvalidName, errors.TopicExists) as exc:
            found["name"] = str(exc)
        except errors.InvalidPolicy as exc:
            found[_override_error(exc, overrides, "policies")] = str(exc)
        except errors.InvalidPartition as exc:
            found["partitions"] = str(exc)
        except errors.AccessDenied as exc:
            found["form"] = str(exc)
    message = None if found else f"Created topic {name}."
    context = {
        "stream_path": path,
        "topic_form": {"name": name, "partitions": raw_partitions} if found else {},
        "topic_policy_form": _topic_policy_form(c.stream(path), sent if found else None),
        "topic_overridden": set(overrides) if found else set(),
        "topic_policy_fields": TOPIC_POLICY_FIELDS,
        "topic_errors": found,
        "topic_message": message,
        "topic_created": None if found else name,
        "refresh_topics": not found,
        **_topics_context(path, request.form),
    }
    if wants_partial():
        return render("streams/stream.html", "streams/_topic_create.html", **context)
    if message is not None:  # created
        flash(message)
        return redirect(_stream_url(path, tq=name), code=303)
    status = 403 if set(found) == {"form"} else 400
    return render("streams/stream.html", None, **_stream_context(path, **context)), status


@streams.route("/streams/<path:stream>/~/topics/delete", methods=["POST"])
def delete_topic(stream: str):
    path = "/" + stream
    name = request.form.get("name", "").strip()
    cluster().delete_topic(f"{path}:{name}")  # engine errors answer 400/403/404
    message = f"Deleted topic {name}."
    if wants_partial():
        context = _topics_context(path, request.form)
        return render(
            "streams/stream.html",
            "streams/_topics.html",
            topic_status=message,
            count_oob=True,
            **context,
        )
    flash(message)
    return redirect(_stream_url(path), code=303)


@streams.route("/streams/<path:stream>/~/delete", methods=["POST"])
def delete_stream(stream: str):
    path = "/" + stream
    cluster().delete_stream(path)  # admin_perm, checked by the engine
    flash(f"Deleted stream {path}.")
    target = url_for("streams.index")
    if wants_partial():
        return Response(status=204, headers={"HX-Redirect": target})
    return redirect(target, code=303)


@streams.route("/streams/<path:stream>/~/replicas")
def replicas(stream: str):
    """The stream's replication links: in their own request because the engine measures
    each link's lag now, over every topic of the stream (and may reach another cluster)."""
    path = "/" + stream
    c = cluster()
    return render(
        "streams/replicas.html",
        "streams/_replicas.html",
        stream_path=path,
        replicas=c.replicas(path),
        upstreams=c.upstreams(path),
    )
