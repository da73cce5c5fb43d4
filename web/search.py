"""Finding streams and topics by any part of their names, and the topics of every stream.

`/search?q=` is the full results page (bookmarkable); the search box in every page's
header asks the same URL through htmx as you type and gets the few best matches back
(`search/_live.html`). `/topics` lists the topics of all streams with a sort and keyset
paging (a cursor in the URL, `after=`), so every page costs the same at a million topics.
The engine does both (`Cluster.search`, `Cluster.topic_listing`; engine/name_search.py).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request, url_for

from engine import errors, name_search
from web.pages import cluster, render

search = Blueprint("search", __name__)

PAGE_SIZE = 50
LIVE_SIZE = 8  # matches the header's live list shows
LISTING_SIZES = (20, 50, 100, 200)
SORT_LABELS = {"name": "Name", "stream": "Stream", "partitions": "Partitions", "created": "Created"}


def find(text: str, *, limit: int, offset: int = 0, stream: str | None = None) -> dict[str, Any]:
    """The template context of a search: its result, or why there is none (too short)."""
    text = text.strip()
    if not text:
        return {"q": "", "result": None, "problem": None}
    try:
        result = cluster().search(text, limit=limit, offset=offset, stream=stream)
    except errors.InvalidArgument as exc:
        return {"q": text, "result": None, "problem": str(exc)}
    return {"q": text, "result": result, "problem": None}


def hit_url(hit: name_search.SearchHit) -> str:
    if hit.kind == "stream":
        return url_for("streams.stream", stream=hit.name.lstrip("/"))
    return url_for("topics.topic", name=hit.name.lstrip("/"))


def _offset() -> int:
    try:
        return max(0, int(request.args.get("offset", 0)))
    except ValueError:
        return 0


@search.route("/search")
def results():
    if request.headers.get("HX-Target") == "search-live":
        return render(
            "search/index.html",
            "search/_live.html",
            hit_url=hit_url,
            **find(request.args.get("q", ""), limit=LIVE_SIZE),
        )
    context = find(request.args.get("q", ""), limit=PAGE_SIZE, offset=_offset())
    return render("search/index.html", "search/_results.html", hit_url=hit_url, **context)


@search.route("/topics")
def topics():
    sort = request.args.get("sort", "name")
    sort = sort if sort in name_search.LISTING_SORTS else "name"
    descending = request.args.get("order") == "desc"
    try:
        size = int(request.args.get("size", PAGE_SIZE))
    except ValueError:
        size = PAGE_SIZE
    size = size if size in LISTING_SIZES else PAGE_SIZE
    after = request.args.get("after") or None
    listing = cluster().topic_listing(sort=sort, descending=descending, after=after, limit=size)
    state = {"sort": sort, "order": "desc" if descending else None, "size": size}
    state = {
        k: v
        for k, v in state.items()
        if v and (k, v) not in {("sort", "name"), ("size", PAGE_SIZE)}
    }
    return render(
        "search/topics.html",
        "search/_topics.html",
        listing=listing,
        sort=sort,
        descending=descending,
        size=size,
        after=after,
        state=state,
        sizes=LISTING_SIZES,
        sort_labels=SORT_LABELS,
        total=cluster().totals().topics,
    )
