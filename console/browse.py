"""The message browser's reads: the engine's browse service (engine.client.browse) with
the console's choices (one filter box in the filter grammar, ignoring case; a scan budget sized
for a worker thread rather than a web request).

Called from worker threads only: every function here does engine I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from engine import Cluster, ConsumerRecord, PartitionInfo
from engine.client import browse as service
from engine.client.browse import NEWEST, OLDEST, Seek
from engine.client.filters import parse as parse_filter
from engine.client.transactions import Transactions
from engine.times import format_ms

__all__ = ["LATEST", "OLDEST", "Page", "Seek", "describe_partitions", "follow", "parse_seek"]

PAGE = 200  # messages shown per page
# The console has no "continue" button: a filter may scan this much before it stops.
MAX_SCAN = 100_000
MAX_SCAN_SECONDS = 5.0

LATEST = NEWEST
parse_seek = Seek.parse


@dataclass(frozen=True)
class Page:
    """A page of messages in display order (newest first from the newest, else oldest
    first), the topic's partitions, and the cursor a live tail follows on from."""

    topic: str
    partitions: list[PartitionInfo]  # all of the topic's, for the partition picker
    selected: tuple[int, ...]  # those read
    records: list[ConsumerRecord]
    tail: str
    ends: dict[int, int]
    scanned: int = 0
    truncated: bool = False  # the scan stopped at its budget before the page was full
    forward: bool = True  # oldest first (else newest first)
    # what transactions did: aborted records and the markers among the records
    marks: service.TransactionMarks = service.TransactionMarks(frozenset(), ())
    stable: dict[int, int] = field(default_factory=dict)  # each partition's LSO
    masked: str = ""  # the stream's mask policy, when it applies to the user (engine.masking)

    @property
    def rows(self) -> list[ConsumerRecord | service.Marker]:
        """The records with the transaction markers among them, in display order."""
        return self.marks.rows(self.records, self.forward)


def needle_filter(needle: str) -> service.Filter:
    """The console's filter box, any case: the one filter grammar (engine.client.filters),
    a header (`host: api-2`, `host=api-2`, `host:api-2`) or text found anywhere.
    `InvalidArgument` says why a filter that reads two ways is refused."""
    return service.Filter(expression=needle, ignore_case=True)


def describe_filter(needle: str) -> str:
    """How the filter box's text is read, for the status line."""
    term = parse_filter(needle)
    return term.describe() if term is not None else ""


def read_page(
    cluster: Cluster,
    topic: str,
    *,
    seek: Seek = LATEST,
    partition: int | None = None,
    needle: str = "",
    limit: int = PAGE,
    max_scan: int = MAX_SCAN,
) -> Page:
    """Up to `limit` messages of `topic` (one partition or all) at `seek`, those matching
    `needle` only: from the newest, the newest matches; otherwise the first ones at or
    after the position."""
    info = cluster.topic(topic)
    partitions = None if partition is None else (partition,)
    query = service.Query(
        info.name,
        partitions,
        seek,
        filter=needle_filter(needle),
        limit=limit,
        budget=service.Budget(messages=max_scan, seconds=MAX_SCAN_SECONDS),
    )
    with service.Browser(cluster, info, partitions) as browser:
        page = browser.page(query)
        marks = browser.marks(page.records)
        masked = browser.mask.text if browser.mask is not None else ""
    return Page(
        info.name,
        info.partitions,
        page.partitions,
        page.records,
        page.tail,
        page.ends,
        page.scanned,
        page.budget_exhausted,
        page.forward,
        marks,
        Transactions(cluster).stable_offsets(info),
        masked,
    )


def follow(
    cluster: Cluster,
    page: Page,
    *,
    needle: str,
    on_records: Callable[[list[ConsumerRecord], service.TransactionMarks], None],
    cancelled: Callable[[], bool],
    poll_ms: int = 250,
) -> None:
    """Hand what arrives after `page` (matching `needle`) to `on_records`, with its
    transaction marks, until `cancelled()`."""
    service.follow(
        cluster,
        page.topic,
        page.tail,
        partitions=page.selected,
        filter=needle_filter(needle),
        on_records=on_records,
        cancelled=cancelled,
        poll_ms=poll_ms,
    )


def describe_seek(seek: Seek) -> str:
    if seek.kind == "time":
        return f"from {format_ms(seek.value or 0)}"
    return seek.describe()


def describe_partitions(
    partitions: Iterable[PartitionInfo], stable: dict[int, int] | None = None
) -> str:
    """Each partition's offsets, with its last stable offset where an open transaction
    holds it below the end."""
    stable = stable or {}
    return "  ".join(
        f"p{p.partition} {p.log_start_offset:,}..{p.log_end_offset:,}"
        + (
            f" LSO {stable[p.partition]:,}"
            if stable.get(p.partition, p.log_end_offset) < p.log_end_offset
            else ""
        )
        for p in partitions
    )
