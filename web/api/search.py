"""`GET /api/v1/search?q=`: streams and topics by any part of their names, and
`GET /api/v1/topics`: the topics of every stream, sorted, with a cursor (docs/API.md)."""

from __future__ import annotations

from dataclasses import asdict

from flask import Response, request

from engine import errors
from web.api import api
from web.api.base import json_response, paging, query_int
from web.pages import cluster


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
