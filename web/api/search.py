"""`GET /api/v1/search?q=`: streams and topics by any part of their names;
`GET /api/v1/topics`: the topics of every stream, sorted, with a cursor; and
`GET /api/v1/topics/<name>/search?q=`: a topic's messages a query matches (docs/API.md).

A message search is the engine's (`engine.client.message_search`, the consoles' search, run as the
token's user) made synchronous and bounded: it stops after `limit` matches, `budget`
messages scanned or `MAX_SECONDS`, whichever comes first, and answers a `cursor` (the
positions it stopped at, as `engine.client.browse` writes cursors) to go on from there.
It counts with the console's searches (`SearchJobs`, web/search_messages.py): a user
runs at most 3 at once, the server 8; past them the answer is 429 with Retry-After. Its
thread is the engine's job, cancelled (within milliseconds) when the time is up."""

from __future__ import annotations

from dataclasses import asdict

from flask import Response, request

from engine import errors
from engine.client import browse, message_search
from web.api import api
from web.api.base import error_response, json_response, paging, query_int, topic_name
from web.api.resources import decoder_arg, record_out
from web.pages import cluster, user
from web.search_messages import jobs

# A message search's bounds per request: matches answered, messages scanned, seconds.
SEARCH_LIMIT = 100
SEARCH_MAX_LIMIT = 1000
SEARCH_BUDGET = 200_000
SEARCH_MAX_BUDGET = 2_000_000
MAX_SECONDS = 10.0


@api.route("/search")
def search() -> Response:
    """`q` (3 characters or more), `limit`, `offset`, and `stream` to search one stream's
    topics only."""
    limit, offset = paging()
    stream = request.args.get("stream") or None
    if stream is not None and not stream.startswith("/"):
        stream = "/" + stream
    result = cluster().search(request.args.get("q", ""), limit=limit, offset=offset, stream=stream)
    return json_response(
        {
            "q": result.text,
            "hits": [asdict(h) for h in result.hits],
            "total": result.total,
            "capped": result.capped,
            "limit": limit,
            "offset": offset,
            "next_offset": offset + limit if result.more else None,
        }
    )


@api.route("/topics")
def all_topics() -> Response:
    """`sort` (name, stream, partitions, created), `order` (asc, desc), `limit`, `after`."""
    order = request.args.get("order", "asc")
    if order not in ("asc", "desc"):
        raise errors.InvalidArgument(f"order must be asc or desc, not {order!r}")
    limit = query_int("limit", 50, minimum=1, maximum=1000)
    page = cluster().topic_listing(
        sort=request.args.get("sort", "name"),
        descending=order == "desc",
        after=request.args.get("after") or None,
        limit=limit,
    )
    return json_response(
        {
            "topics": [asdict(e) for e in page.entries],
            "sort": page.sort,
            "order": order,
            "limit": limit,
            "next_after": page.next_after,
        }
    )


def _seek(name: str) -> browse.Seek | None:
    raw = (request.args.get(name) or "").strip()
    if not raw:
        return None
    try:
        return browse.Seek.parse(raw)
    except errors.InvalidArgument as exc:
        raise errors.InvalidArgument(f"{name}: {exc}") from None


@api.route("/topics/<path:name>/search")
def search_messages(name: str) -> Response:
    """`q` (a query, docs/SEARCH.md), `partition` (default all), `from` and `to` (oldest,
    newest, an offset or a time; `to` is exclusive, default the end as the search starts),
    `limit` (matches), `budget` (messages scanned), `cursor` (an answer's, to go on: pass
    the same q, partition and to), `decode=schema`. consume_perm."""
    full = topic_name(name)
    query = request.args.get("q") or ""
    if not query.strip():
        raise errors.InvalidArgument("q is required: a query such as value.id == 42")
    limit = query_int("limit", SEARCH_LIMIT, minimum=1, maximum=SEARCH_MAX_LIMIT)
    budget = query_int("budget", SEARCH_BUDGET, minimum=1, maximum=SEARCH_MAX_BUDGET)
    partition = query_int("partition")
    start = _seek("from") or browse.OLDEST
    end = _seek("to")
    if end is not None and end.kind == "newest":
        end = None
    decoder = decoder_arg(full)
    c = cluster()
    info = c.topic(full)
    partitions = None if partition is None else [partition]
    positions = None
    cursor = request.args.get("cursor") or None
    try:
        if cursor is not None:
            chosen = range(len(info.partitions)) if partition is None else [partition]
            positions = browse.decode_cursor(cursor, info.name, True, chosen)
        # the console's bounds: a few searches a user, a few more in all (429 past them)
        job = jobs().run(
            user().name,
            c,  # the token's user: the engine checks consume_perm
            info.name,
            query,
            partitions=partitions,
            start=start,
            end=end,
            positions=positions,
            max_matches=limit,
            max_scanned=budget,
            stop_when_full=True,
        )
    except browse.BadQuery as exc:
        # the parser's own words (`fields` names the argument: query, partition, cursor)
        field, message = next(iter(exc.fields.items()))
        raise errors.InvalidArgument(f"{'q' if field == 'query' else field}: {message}") from None
    try:
        finished = job.wait(MAX_SECONDS)
    finally:
        job.cancel()  # no thread outlives its request
        job.wait()
    progress = job.progress
    if progress.state == message_search.FAILED:  # e.g. the cluster closing under it
        return error_response(503, name="SearchFailed", message=progress.error)
    positions_now = job.positions
    remaining = any(positions_now[p] < job.ends[p] for p in job.partitions)
    stopped_by = None
    if remaining:
        stopped_by = "time" if not finished else "limit" if progress.kept >= limit else "budget"
    return json_response(
        {
            "topic": info.name,
            "q": query,
            "matches": [record_out(r, decoder, job.is_aborted(r)) for r in job.results()],
            "scanned": progress.scanned,
            "from_offsets": {str(p): o for p, o in sorted(job.starts.items())},
            "to_offsets": {str(p): o for p, o in sorted(job.ends.items())},
            "next_offsets": {str(p): o for p, o in sorted(positions_now.items())},
            "complete": not remaining,
            "stopped_by": stopped_by,
            "cursor": browse.encode_cursor(info.name, True, positions_now) if remaining else None,
            "errors": progress.errors,
            "first_error": progress.first_error or None,
            "masked": job.mask.text if job.mask is not None else None,
        }
    )
