"""`DirectoryTarget`: a target cluster directory opened in this process, the `Target`
(engine.replication.protocol) that the replicator uses for a local directory and that the
HTTP server half (engine.replication.http.ReplicationService) runs requests on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.auth.principal import Principal
from engine.cluster import CATALOG_FILE, Cluster
from engine.errors import (
    InvalidArgument,
    InvalidPartition,
    NotACluster,
    StorageError,
    StreamExists,
    UnknownStream,
)
from engine.policies import TOPIC_POLICIES
from engine.replication.protocol import (
    ApplyResult,
    TopicSpec,
    check_aborted,
    check_replica_batch,
    conflict_record,
)
from engine.replication.reading import batch_at
from engine.storage.appender import MAX_ROLL_RETRIES
from engine.storage.catalog import StreamRow
from engine.storage.volume import ReplicaBatch, ReplicaTarget

# A replica stream's creator comes from the source cluster (a user name there).
MAX_CREATOR = 256


def _check_creator(creator: Any) -> None:
    if (
        not isinstance(creator, str)
        or not 1 <= len(creator) <= MAX_CREATOR
        or not creator.isprintable()
    ):
        raise InvalidArgument(
            f"the creator of a replica stream must be a user name of 1 to {MAX_CREATOR} "
            "printable characters"
        )


class DirectoryTarget:
    """A target cluster directory opened in this process."""

    def __init__(
        self, path: str, principal: Principal | None = None, *, sync: bool = False
    ) -> None:
        # Cluster.open would create a missing cluster: a link never does.
        if not (Path(path) / CATALOG_FILE).exists():
            raise NotACluster(f"no cluster at {path} (no {CATALOG_FILE}); create it first")
        self.cluster = Cluster.open(path, principal=principal)
        self.cluster_id = self.cluster.id
        self.sync = sync
        self._appender = self.cluster.appender()

    def close(self) -> None:
        self.cluster.close()

    def _stream_row(self, stream: str) -> StreamRow:
        return self.cluster.catalog.stream(stream)

    def stream_policies(self, stream: str) -> dict[str, Any] | None:
        try:
            return dict(self._stream_row(stream).policies)
        except UnknownStream:
            return None

    def create_stream(self, stream: str, policies: dict[str, Any], creator: str) -> None:
        """Create the replica stream with the source's policies; the catalog checks the
        path and every policy (a bad one is refused, and nothing is created)."""
        if not isinstance(policies, dict):
            raise InvalidArgument("the policies of a replica stream must be a mapping")
        _check_creator(creator)
        try:
            self.cluster.catalog.create_stream(stream, dict(policies), creator)
        except StreamExists:
            pass

    def check_admin(self, stream: str, user: str, groups: tuple[str, ...]) -> None:
        self.cluster.authorize(
            self._stream_row(stream),
            "admin_perm",
            Principal(user, groups),
            what="replicate into",
        )

    def check_stream(self, stream: str) -> None:
        """`UnknownStream` unless `stream` exists here."""
        self._stream_row(stream)

    def ensure_topics(self, stream: str, topics: list[TopicSpec]) -> None:
        catalog = self.cluster.catalog
        row = self._stream_row(stream)
        existing = {t.name: t for t in catalog.topics(row.id, None, None, 0)}
        # The source's overrides, but for policies this engine does not know (nothing here
        # could honour them; a stream's policy set is taken the same way).
        own = {n: {k: v for k, v in o.items() if k in TOPIC_POLICIES} for n, _, o in topics}
        missing = [(n, p) for n, p, _ in topics if n not in existing]
        if missing:
            catalog.create_topics(
                row.id,
                missing,
                exist_ok=True,
                overrides={n: own[n] for n, _ in missing if own[n]} or None,
            )
        for name, count, _ in topics:
            t = existing.get(name)
            if t is None:
                continue
            if t.partitions < count:
                catalog.set_partitions(t.id, count)
            if t.overrides != own[name]:
                catalog.set_topic_policies(t.id, own[name])

    def topic_partitions(self, stream: str) -> dict[str, int]:
        catalog = self.cluster.catalog
        return {
            t.name: t.partitions for t in catalog.topics(self._stream_row(stream).id, None, None, 0)
        }

    def end_offsets(self, stream: str, topics: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Log end offsets of the first `count` partitions of each topic; a topic is asked
        once, however often it is named, and only for partitions it has (the replicator
        calls ensure_topics first), so the work is bounded by what exists here."""
        catalog = self.cluster.catalog
        result = {}
        for name, count in dict(topics).items():
            row = catalog.topic(stream, name)
            if count > row.partitions:
                raise InvalidPartition(
                    f"topic {row.full_name} has {row.partitions} partitions, not {count}"
                )
            for p in range(count):
                result[(name, p)] = self.cluster.partition_log(
                    row.id, p, row.full_name
                ).end_offset()
        return result

    def batch_at(
        self, stream: str, topic: str, partition: int, offset: int
    ) -> tuple[int, int, str] | None:
        row = self.cluster.catalog.topic(stream, topic)
        if not 0 <= partition < row.partitions:
            raise InvalidPartition(f"topic {row.full_name} has no partition {partition}")
        return batch_at(self.cluster, row.id, partition, offset)

    def apply(
        self,
        stream: str,
        topic: str,
        partition: int,
        batches: list[ReplicaBatch],
        aborted: list[tuple[int, int, int]] | None = None,
    ) -> ApplyResult:
        result = self._apply(stream, topic, partition, batches, aborted)
        if result.done:
            self.cluster.appends.notify()  # the replica's waiting consumers, any process
        return result

    def _apply(
        self,
        stream: str,
        topic: str,
        partition: int,
        batches: list[ReplicaBatch],
        aborted: list[tuple[int, int, int]] | None,
    ) -> ApplyResult:
        cluster = self.cluster
        row = cluster.catalog.topic(stream, topic)
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise InvalidPartition(f"a partition is an int, not {type(partition).__name__}")
        if not 0 <= partition < row.partitions:
            last = row.partitions - 1
            raise InvalidPartition(
                f"topic {row.full_name} has partitions 0 to {last}, not {partition}"
            )
        # Every batch is checked before the first is written: a bad one refuses the whole
        # call and changes nothing (whoever reads the replica trusts its bytes from here).
        for b in batches:
            check_replica_batch(b, f"for topic {row.full_name} partition {partition}")
        if aborted:
            check_aborted(aborted)
            # Indexed before the batches are written: a read_committed reader never meets an
            # aborted batch here before its range (a crash in between leaves a range over
            # offsets not written yet, which hides nothing else: it names its producer).
            cluster.catalog.transactions.add_aborted(row.id, partition, aborted)
        key = (row.id, partition)
        result = ApplyResult()
        pending = list(batches)
        for _ in range(MAX_ROLL_RETRIES * 4):
            if not pending:
                return result
            pl = self._appender.active(key)
            if pl is None:
                raise StorageError(f"topic {row.full_name} partition {partition} disappeared")
            got = cluster.volume(pl.volume_id).append_replicated(
                ReplicaTarget(pl.id, row.stream_id, row.id, partition, pl.base_offset),
                pending,
                sync=self.sync,
                roll_bytes=cluster.partitionlet_bytes,
                roll_ms=cluster.partitionlet_ms,
            )
            result.messages += got.messages
            result.bytes += got.bytes
            ok = 0
            for status in got.statuses:
                if status not in ("applied", "present"):
                    break
                ok += 1
            result.done += ok
            stopped = got.statuses[ok] if ok < len(got.statuses) else None
            if got.sealed_at is not None:
                self._appender.sealed(key, pl.id, got.sealed_at, pl.volume_id)
            elif stopped == "sealed":
                self._appender.stale(key)  # another writer rolled it: read the chain again
            pending = pending[ok:]
            if stopped == "conflict":
                result.conflict = conflict_record(
                    row.full_name, partition, pending[0], got.conflict_with
                )
                return result
            if stopped == "behind":
                # The offset lies in an earlier partitionlet of the chain: compare there.
                b = pending[0]
                here = batch_at(cluster, row.id, partition, b.base_offset)
                if here is None or here == (b.base_offset, b.last_offset, b.origin):
                    result.done += 1
                    pending = pending[1:]
                    continue
                result.conflict = conflict_record(row.full_name, partition, b, here)
                return result
        if pending:
            raise StorageError(
                f"topic {row.full_name} partition {partition} kept rolling under the replicator"
            )
        return result

    def merge_offsets(self, stream: str, rows: list[tuple[str, str, int, int, str, int]]) -> int:
        catalog = self.cluster.catalog
        row = self._stream_row(stream)
        ids = {t.name: t.id for t in catalog.topics(row.id, None, None, 0)}
        mapped = [
            (group, ids[topic], p, offset, meta, ms)
            for group, topic, p, offset, meta, ms in rows
            if topic in ids
        ]
        if not mapped:
            return 0
        return catalog.groups.merge_offsets(mapped, self.cluster.clock.now_ms())

    def add_upstream(self, stream: str, source: str, source_stream: str, source_id: str) -> None:
        catalog = self.cluster.catalog
        catalog.add_upstream(catalog.stream(stream).id, source, source_stream, source_id)

    def remove_upstream(self, stream: str, source_id: str, source_stream: str) -> None:
        catalog = self.cluster.catalog
        try:
            stream_id = catalog.stream(stream).id
        except UnknownStream:
            return
        catalog.remove_upstream(stream_id, source_id, source_stream)
