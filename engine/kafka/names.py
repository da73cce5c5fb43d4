"""Topic names as the program writes them <-> the engine's full names.

A name without a leading '/' is a topic of the default stream: `default_stream=`, else
`PLET_DEFAULT_STREAM`, else `/kafka`, created on first use. Everything handed back to the
program (records, metadata, `TopicPartition`s) carries the name the way it wrote it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from engine import errors as engine_errors
from engine import names as engine_names
from engine.cluster import Cluster
from engine.kafka.errors import IllegalArgumentError, KafkaConfigurationError, translated
from engine.records import OffsetAndMetadata as EngineOffsetAndMetadata
from engine.records import TopicPartition

DEFAULT_STREAM = "/kafka"
ENV_DEFAULT_STREAM = "PLET_DEFAULT_STREAM"

# Bound on the cache of resolved names: a program that makes up names forever (one topic
# per user, say) must not grow it without end.
_MAX_KNOWN = 100_000


class TopicNames:
    """Resolves the topic names a program writes and shows full names back its way."""

    def __init__(self, cluster: Cluster, default_stream: str | None) -> None:
        stream = default_stream or os.environ.get(ENV_DEFAULT_STREAM, "").strip() or None
        self.implicit = stream is None  # the stream is /kafka, created on first use
        self.stream = stream or DEFAULT_STREAM
        try:
            engine_names.validate_stream_path(self.stream)
        except engine_errors.InvalidName as exc:
            raise KafkaConfigurationError(f"default_stream: {exc}") from exc
        self._cluster = cluster
        self._ready = not self.implicit
        self.known: dict[str, str] = {}  # the program's name -> full name (send's fast path)
        self._shown: dict[str, str] = {}  # full name -> the program's name, where not plain

    def ensure_stream(self) -> None:
        """Create /kafka when it is the default stream and does not exist yet."""
        if self._ready:
            return
        with translated():
            try:
                self._cluster.stream(self.stream)
            except engine_errors.UnknownStream:
                with contextlib.suppress(engine_errors.StreamExists):
                    self._cluster.create_stream(self.stream)
        self._ready = True

    def full(self, name: Any) -> str:
        """The full name of a topic as the program wrote it; raises the engine's InvalidName."""
        full = self.known.get(name) if isinstance(name, str) else None
        if full is not None:
            return full
        full = engine_names.resolve(name, self.stream)
        if not name.startswith("/"):
            self.ensure_stream()
        elif full.rpartition(":")[0] == self.stream:
            self._shown[full] = name  # a full name in the default stream: keep it so
        if len(self.known) > _MAX_KNOWN:
            self.known.clear()
        self.known[name] = full
        return full

    def show(self, full: str) -> str:
        """A full name the way the program writes it."""
        shown = self._shown.get(full)
        if shown is not None:
            return shown
        stream, _, topic = full.rpartition(":")
        return topic if stream == self.stream else full

    def tp(self, tp: Any) -> TopicPartition:
        """The program's (topic, partition) with the full topic name."""
        if not isinstance(tp, tuple) or len(tp) != 2:
            raise IllegalArgumentError(f"expected a TopicPartition, got {tp!r}")
        with translated():
            return TopicPartition(self.full(tp[0]), tp[1])

    def show_tp(self, tp: TopicPartition) -> TopicPartition:
        return TopicPartition(self.show(tp.topic), tp.partition)

    def engine_offsets(
        self, offsets: dict[Any, Any]
    ) -> list[tuple[TopicPartition, EngineOffsetAndMetadata]]:
        """(full-name tp, the engine's OffsetAndMetadata) per entry of the program's
        `offsets`, whose values are OffsetAndMetadata (the facade's, the engine's or a
        plain tuple) or ints."""
        out = []
        for tp, value in offsets.items():
            if isinstance(value, tuple):
                offset, meta = value[0], value[1] if len(value) > 1 else ""
            else:
                offset, meta = value, ""
            out.append((self.tp(tp), EngineOffsetAndMetadata(offset, meta or "")))
        return out

    def full_names_of_stream(self) -> list[str]:
        """Full names of the topics of the default stream (none if it does not exist)."""
        self.ensure_stream()
        try:
            return [t.name for t in self._cluster.topics(self.stream)]
        except engine_errors.UnknownStream:
            return []
