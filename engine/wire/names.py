"""Topic names on the wire, both ways: what a Kafka client's name means, and how the listener
names a topic back (docs/WIRE.md, "Topic names").

A client names a topic in one of three forms:

- `/apps/sensors:car-17`, the engine's full name, as clients that do not check names send it;
- `apps.sensors..car-17` (with the default separator `..`): the stream path without its
  leading `/`, its segments joined by `.`, then the separator, then the topic. Only
  `[A-Za-z0-9._-]`, so clients that check names against Kafka's rules (kafka-python, Java)
  accept it. The name splits at the first separator that is not at its start;
- anything else, a plain name: a topic of the listener's default stream.

A topic has a short (Kafka-legal) name when the name it would get reads back as itself: its
stream's segments hold no `.` nor the separator (nor end with its first character), and the
short name is at most 249 characters. Topics without one are reached by their full name only,
and not listed in Metadata for all topics (a strict client would refuse the whole answer).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from engine import errors, names

if TYPE_CHECKING:
    from engine import Cluster
    from engine.name_search import TopicEntry

# `__` reads better, but Kafka applications name their own topics with it (Quix Streams'
# `changelog__...`, Faust's `app-__assignor-__leader`, ksqlDB's
# `_confluent-ksql-default__command_topic`): they would land in other streams. No known
# program writes `..`.
DEFAULT_SEPARATOR = ".."
# the catalog is read a page at a time while the answer is built
_PAGE = 1000
_SEPARATOR_RE = re.compile(r"[._-]{1,8}\Z")
# after every topic name of a stream, in the catalog's order: skips the rest of the stream
_PAST_NAMES = "\x7f"


def check_separator(separator: object) -> str | None:
    """`separator` itself if usable: 1 to 8 of `.`, `_`, `-` (characters every client
    accepts in a name), not `.` alone (it joins the path's segments); None turns short
    names of other streams off. Raises errors.InvalidArgument."""
    if separator is None:
        return None
    if not isinstance(separator, str) or not _SEPARATOR_RE.match(separator) or separator == ".":
        raise errors.InvalidArgument(
            f"stream separator must be 1 to 8 of '.', '_' or '-' (not '.' alone, which joins "
            f"the stream's segments), got {separator!r}"
        )
    return separator


class WireNames:
    """The names of one listener: its default stream and its separator. Immutable, so every
    connection's thread may use it."""

    def __init__(self, default_stream: str, separator: str | None = DEFAULT_SEPARATOR) -> None:
        self.default_stream = names.validate_stream_path(default_stream)
        self.separator = check_separator(separator)

    def split(self, name: object) -> tuple[str, str]:
        """(stream path, topic) of a wire name, validated; raises errors.InvalidName."""
        if not isinstance(name, str):
            raise errors.InvalidName(f"topic name must be a string, got {name!r}")
        if name.startswith("/"):
            return names.split_full_name(name)
        sep = self.separator
        at = name.find(sep) if sep else -1
        if at <= 0:  # plain, also one that starts with the separator (`__consumer_offsets`)
            return self.default_stream, names.validate_topic_name(name)
        assert sep is not None
        stream = "/" + name[:at].replace(".", "/")
        try:
            names.validate_stream_path(stream)
        except errors.InvalidName:
            raise errors.InvalidName(
                f"invalid topic name {name!r}: the part before {sep!r} must be a stream path "
                "without its leading '/' and with '.' between its segments, such as "
                f"'apps.sensors{sep}car-17' for /apps/sensors:car-17"
            ) from None
        topic = name[at + len(sep) :]
        try:
            return stream, names.validate_topic_name(topic)
        except errors.InvalidName as exc:
            raise errors.InvalidName(f"invalid topic name {name!r}: after {sep!r}, {exc}") from None

    def full(self, name: object) -> str:
        """The engine's full name of a wire name; raises errors.InvalidName."""
        stream, topic = self.split(name)
        return names.full_name(stream, topic)

    def short(self, full: str) -> str | None:
        """The Kafka-legal name of a full name (plain in the default stream), or None when
        it has none."""
        stream, _, topic = full.rpartition(":")
        if stream == self.default_stream:
            candidate = topic
        elif self.separator is None:
            return None
        else:
            candidate = stream[1:].replace("/", ".") + self.separator + topic
        if len(candidate) > names.MAX_TOPIC_NAME:
            return None
        try:
            back = self.split(candidate)
        except errors.InvalidName:
            return None
        return candidate if back == (stream, topic) else None

    def shown(self, full: str) -> str:
        """A full name as the listener names it to clients: its short name, else itself."""
        return self.short(full) or full

    def listing(
        self, cluster: Cluster, limit: int, after: str | None = None
    ) -> Iterator[tuple[str, str, int]]:
        """(short name, full name, partition count) of at most `limit` topics with a short
        name: the default stream's first, then the other streams' by path, each by topic
        name; from the one after the full name `after` on. Reads the catalog a page at a
        time (no offsets read), so nothing holds a million topics at once."""
        if limit <= 0:
            return
        default = self.default_stream
        in_default = after is None or after.startswith(f"{default}:")
        walks = []
        if in_default:
            topic = after.partition(":")[2] if after else ""
            walks.append(self._walk(cluster, f"{default}~{topic}", only=default))
        if self.separator is not None:
            start = after.replace(":", "~", 1) if after is not None and not in_default else None
            walks.append(self._walk(cluster, start))
        for short, entry in itertools.chain(*walks):
            yield short, entry.name, entry.partitions
            limit -= 1
            if limit == 0:
                return

    def _walk(
        self, cluster: Cluster, cursor: str | None, *, only: str | None = None
    ) -> Iterator[tuple[str, TopicEntry]]:
        """(short name, entry) of the topics with a short name from the cursor
        (`stream~topic`, Cluster.topic_listing's) on, in stream then topic order: of the
        stream `only`, else of every stream but the default one, each skipped at once when
        its topics can have no short name."""
        while True:
            page = cluster.topic_listing(sort="stream", after=cursor, limit=_PAGE)
            for entry in page.entries:
                if only is not None and entry.stream != only:
                    return
                if only is None and (
                    entry.stream == self.default_stream or self.short(f"{entry.stream}:t") is None
                ):
                    cursor = f"{entry.stream}~{_PAST_NAMES}"  # on to the next stream
                    break
                cursor = f"{entry.stream}~{entry.topic}"
                short = self.short(entry.name)
                if short is not None:
                    yield short, entry
            else:
                if page.next_after is None:
                    return
