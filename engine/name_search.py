"""Finding streams and topics by any part of their names, and listing topics across streams.

The catalog keeps an FTS5 trigram index of every stream path and topic name
(`topic_names`, filled by triggers on the streams and topics tables, so it never drifts;
engine/storage/catalog.py). A search asks it for the names that contain the text (case
folded), at most `MATCH_CAP` of them, and ranks those: the exact name first, then names
that start with the text, then the rest, streams before topics, then by name. A fragment
that more than `MATCH_CAP` names contain is "capped": the result ranks the first
`MATCH_CAP` found and says so, so a search costs the same at any catalog size.

Fragments shorter than `MIN_CHARS` are refused (`errors.InvalidArgument`): a trigram index
cannot answer them, and a scan of a million names is what this index exists to avoid.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_CHARS = 3
MATCH_CAP = 2000  # names ranked per search, at most
MAX_TEXT = 200  # longer than any stream path plus a topic name

EXACT, PREFIX, CONTAINS = "exact", "prefix", "contains"
_RANK = {EXACT: 0, PREFIX: 1, CONTAINS: 2}

# The orders of `Cluster.topic_listing`, each kept by an index (engine/storage/catalog.py).
LISTING_SORTS = ("name", "stream", "partitions", "created")


@dataclass(frozen=True)
class SearchHit:
    """One stream or topic a search found."""

    kind: str  # "stream" or "topic"
    name: str  # the stream's path, or the topic's full name (`/apps/sensors:car-17`)
    stream: str  # the stream's path (the hit itself for a stream)
    topic: str | None  # the topic's own name; None for a stream
    match: str  # "exact", "prefix" or "contains": how the name holds the text
    partitions: int | None  # a topic's partition count; None for a stream
    created_ms: int


@dataclass(frozen=True)
class SearchResult:
    """A page of a search: `hits` ranked, after skipping `offset` of them."""

    text: str
    hits: list[SearchHit]
    total: int  # the matches ranked: all of them, or MATCH_CAP when `capped`
    capped: bool  # more than MATCH_CAP names contain the text: type more to narrow it
    limit: int
    offset: int

    @property
    def streams(self) -> list[str]:
        """The paths of the streams on this page."""
        return [h.name for h in self.hits if h.kind == "stream"]

    @property
    def topics(self) -> list[str]:
        """The full names of the topics on this page."""
        return [h.name for h in self.hits if h.kind == "topic"]

    @property
    def more(self) -> bool:
        """Whether a next page exists (`offset + limit`)."""
        return self.offset + len(self.hits) < self.total


@dataclass(frozen=True)
class TopicEntry:
    """A topic as the cross-stream listing shows it (no offsets are read for it)."""

    name: str  # full name
    stream: str
    topic: str
    partitions: int
    created_ms: int


@dataclass(frozen=True)
class TopicPage:
    """A page of `Cluster.topic_listing`; `next_after` is the cursor of the next page
    (None on the last), to pass back as `after`."""

    entries: list[TopicEntry]
    sort: str
    descending: bool
    next_after: str | None


def match_kind(name: str, text: str) -> str:
    """How `name` holds `text` (case folded): exact, prefix or contains. A stream path also
    matches without its leading slash (`fleet` is the exact name of `/fleet`)."""
    folded, want = name.lower(), text.lower()
    bare = folded.lstrip("/")
    if want in (folded, bare):
        return EXACT
    if folded.startswith(want) or bare.startswith(want):
        return PREFIX
    return CONTAINS


def rank_key(hit: SearchHit) -> tuple[int, bool, str, str]:
    return (_RANK[hit.match], hit.kind != "stream", hit.name.lower(), hit.name)
