"""`Replicator`: moves the messages and the groups' committed offsets of every link out of
a cluster (how, and why it is safe to kill at any moment: engine.replication)."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from engine.errors import (
    AccessDenied,
    Closed,
    CorruptBatch,
    InvalidArgument,
    PartitionletError,
    TryLater,
)
from engine.replication.protocol import Target
from engine.replication.reading import (
    batch_at,
    source_aborted,
    source_batches,
    source_stable_end,
)
from engine.replication.status import Link, load_links, open_link_target
from engine.replication.targets import is_url
from engine.storage.catalog import TopicRow

if TYPE_CHECKING:
    from engine.cluster import Cluster

log = logging.getLogger(__name__)

# Batches read from the source and applied to the target per transaction.
DEFAULT_MAX_BATCHES = 64
# A link to a remote target that refused its token (401, 403) or throttled it (429) rests
# this long before `run_once` tries it again: a target counts refused tokens against the
# source's address (engine.auth.logins), and a revoked link retried every pass would soon
# throttle this cluster's other links to that target.
REFUSED_REST_S = 30.0


class Replicator:
    """Moves the messages and committed offsets of every link out of `cluster`.

    `run_once()` moves what is pending now and returns how many message copies it newly
    applied; `run_forever(interval_s)` repeats it until `stop()`. Several replicators (in
    several processes) may run on one cluster at once: every batch is checked against the
    target inside the target's append transaction.
    """

    def __init__(
        self, cluster: Cluster, *, max_batches: int = DEFAULT_MAX_BATCHES, sync: bool = False
    ) -> None:
        if isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 1:
            raise InvalidArgument(f"max_batches must be a positive integer, got {max_batches!r}")
        self.cluster = cluster
        self.max_batches = max_batches
        self.sync = sync
        self.runs = 0
        self.last_error: BaseException | None = None
        self._stop = threading.Event()
        # held through a pass; re-entrant, so a pass that closes the cluster does not hang
        self._passing = threading.RLock()
        self._targets: dict[str, Target] = {}
        # (target, target stream, topic id, partition) -> (source end, target end) when it
        # was last found in step: a partition still at both ends needs no look this time.
        self._settled: dict[tuple[str, str, int, int], tuple[int, int]] = {}
        self._sent_offsets: dict[tuple[str, str], set[tuple[Any, ...]]] = {}
        self._resting: dict[str, float] = {}  # target key -> monotonic time it may go again
        cluster.on_close(self.halt)  # a pass in any thread ends before the files close

    def __enter__(self) -> Replicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for tgt in self._targets.values():
            try:
                tgt.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        self._targets.clear()

    def stop(self) -> None:
        """Have `run_forever` return after the pass under way."""
        self._stop.set()

    def halt(self, timeout: float = 30) -> None:
        """`stop()`, then wait up to `timeout` seconds for a pass under way to end.
        `Cluster.close()` calls it before it closes the files: closing an SQLite connection
        while another thread is inside a statement on it crashes the interpreter."""
        self._stop.set()
        if self._passing.acquire(timeout=timeout):
            self._passing.release()

    def run_forever(self, interval_s: float = 0.5) -> None:
        """Run until `stop()`; an idle pass waits `interval_s` before the next."""
        self._stop.clear()
        try:
            while not self._stop.is_set():
                try:
                    moved = self.run_once()
                except Closed:
                    break  # the cluster closed between two passes
                except Exception as exc:  # noqa: BLE001 - keep going, report it
                    self.last_error = exc
                    log.exception("replication pass failed")
                    moved = 0
                if not moved:
                    self._stop.wait(interval_s)
        finally:
            self.close()

    def run_once(self) -> int:
        """Move what is pending on every link that is not paused; returns message copies
        newly applied."""
        with self._passing:
            # under the lock: once close() has begun, no pass starts (see `halt`)
            self.cluster.check_open()
            total = 0
            now = time.monotonic()
            for link in load_links(self.cluster):
                if link.paused or self._resting.get(self._target_key(link), 0.0) > now:
                    continue
                total += self.run_link(link)
            self.runs += 1
            return total

    @staticmethod
    def _target_key(link: Link) -> str:
        # An http(s) target is reached with one token per link (a token is good for one
        # stream), so each link to it has its own client.
        if is_url(link.target):
            return f"{link.target}\n{link.target_stream}"
        return link.target

    def _target(self, link: Link) -> Target:
        key = self._target_key(link)
        tgt = self._targets.get(key)
        if tgt is None:
            tgt = open_link_target(self.cluster, link, sync=self.sync)
            self._targets[key] = tgt
        return tgt

    def run_link(self, link: Link) -> int:
        """One pass over one link; records its outcome on the link."""
        with self._passing:
            self.cluster.check_open()
            return self._run_link(link)

    def _run_link(self, link: Link) -> int:
        catalog = self.cluster.catalog
        started = time.monotonic()
        stats = [0, 0]
        conflicts = list(link.conflict)
        try:
            tgt = self._target(link)
            self._pass(link, tgt, stats, conflicts)
        except PartitionletError as exc:
            key = self._target_key(link)
            if is_url(link.target) and isinstance(exc, AccessDenied | TryLater):
                self._resting[key] = time.monotonic() + REFUSED_REST_S
            bad = self._targets.pop(key, None)
            # Whatever this replicator believed about the target is to be read again.
            self._settled = {k: v for k, v in self._settled.items() if k[0] != link.target}
            self._sent_offsets = {
                k: v for k, v in self._sent_offsets.items() if k[0] != link.target
            }
            if bad is not None:
                try:
                    bad.close()
                except Exception:  # noqa: BLE001
                    pass
            self.last_error = exc
            catalog.update_replica(
                link.stream_id,
                link.target,
                error=f"{type(exc).__name__}: {exc}",
                last_run_ms=self.cluster.clock.now_ms(),
            )
            if stats[0]:
                catalog.count_replicated(link.stream_id, link.target, stats[0], stats[1])
            return stats[0]
        self._resting.pop(self._target_key(link), None)
        elapsed = max(time.monotonic() - started, 1e-6)
        fields: dict[str, Any] = {
            "error": None,
            "last_run_ms": self.cluster.clock.now_ms(),
            "target_id": tgt.cluster_id,
            "conflict": json.dumps(conflicts) if conflicts else None,
        }
        if stats[0]:
            fields["rate_messages"] = stats[0] / elapsed
            fields["rate_bytes"] = stats[1] / elapsed
            catalog.count_replicated(link.stream_id, link.target, stats[0], stats[1])
        catalog.update_replica(link.stream_id, link.target, **fields)
        return stats[0]

    def _pass(
        self, link: Link, tgt: Target, stats: list[int], conflicts: list[dict[str, Any]]
    ) -> None:
        cluster = self.cluster
        catalog = cluster.catalog
        row = catalog.stream_by_id(link.stream_id)
        cluster.authorize(row, "copy_perm")
        if tgt.cluster_id == cluster.id:
            raise InvalidArgument(f"{link.target} is this cluster, not a replica")
        if tgt.stream_policies(link.target_stream) is None:
            tgt.create_stream(link.target_stream, row.policies, row.creator)
            tgt.add_upstream(link.target_stream, str(cluster.path.resolve()), row.path, cluster.id)
        topics = catalog.topics(row.id, None, None, 0)
        wanted = [(t.name, t.partitions) for t in topics]
        if not wanted:
            return
        # the topics' own policies go with them (their edits too, at the next pass)
        tgt.ensure_topics(link.target_stream, [(t.name, t.partitions, t.overrides) for t in topics])
        ends = tgt.end_offsets(link.target_stream, wanted)
        stuck = {(c["topic"], c["partition"]) for c in conflicts}
        damaged: CorruptBatch | None = None
        for t in topics:
            for p in range(t.partitions):
                if (t.full_name, p) in stuck:
                    continue
                try:
                    found = self._partition(link, tgt, t, p, ends.get((t.name, p), 0), stats)
                except CorruptBatch as exc:
                    # a damaged batch stops its partition there; the others go on, and the
                    # link reports it (the first one) at the end of the pass
                    damaged = damaged or exc
                    continue
                if found is not None:
                    conflicts.append(found)
                    stuck.add((t.full_name, p))
        self._offsets(link, tgt, topics)
        if damaged is not None:
            raise damaged

    def _partition(
        self,
        link: Link,
        tgt: Target,
        topic: TopicRow,
        partition: int,
        target_end: int,
        stats: list[int],
    ) -> dict[str, Any] | None:
        """Copy one partition from the target's end; a conflict found, or None."""
        cluster = self.cluster
        # Up to the last stable offset: an open transaction's batches, and all after them,
        # wait for its marker, so a replica holds only decided data (docs/ARCHITECTURE.md).
        end = source_stable_end(cluster, topic.id, partition, topic.full_name)
        settled_key = (link.target, link.target_stream, topic.id, partition)
        if self._settled.get(settled_key) == (end, target_end):
            return None  # nothing was written on either side since the last look
        tip = min(end, target_end) - 1
        if tip >= 0:
            # The last offset both hold must be the same message on both sides.
            mine = batch_at(cluster, topic.id, partition, tip)
            theirs = tgt.batch_at(link.target_stream, topic.name, partition, tip)
            if mine is not None and theirs is not None and mine != theirs:
                return {
                    "topic": topic.full_name,
                    "partition": partition,
                    "offset": max(mine[0], theirs[0]),
                    "source_origin": mine[2],
                    "source_offsets": [mine[0], mine[1]],
                    "target_origin": theirs[2],
                    "target_offsets": [theirs[0], theirs[1]],
                }
        position = target_end
        while position < end and not self._stop_requested():
            batches = source_batches(cluster, topic.id, partition, position, self.max_batches, end)
            if not batches:
                break
            send = [b for b in batches if b.origin != tgt.cluster_id]
            start, position = position, batches[-1].last_offset + 1
            if not send:
                continue  # the target's own messages: never sent back to it
            # read after the stable end: every aborted range below it is indexed by now
            aborted = source_aborted(cluster, topic.id, partition, start, position)
            result = tgt.apply(link.target_stream, topic.name, partition, send, aborted)
            stats[0] += result.messages
            stats[1] += result.bytes
            if result.conflict is not None:
                result.conflict["topic"] = topic.full_name
                return result.conflict
            if result.done < len(send):
                break
        if position >= end:
            self._settled[settled_key] = (end, max(target_end, end))
        return None

    def _stop_requested(self) -> bool:
        return self._stop.is_set()

    def _offsets(self, link: Link, tgt: Target, topics: list[TopicRow]) -> None:
        by_id = {t.id: t.name for t in topics}
        rows = [
            (group, by_id[topic_id], p, offset, meta, ms)
            for group, topic_id, p, offset, meta, ms in self.cluster.catalog.groups.all_offsets(
                list(by_id)
            )
        ]
        # Only what changed since this replicator last sent it (the target keeps the later
        # commit of each partition anyway, so sending again would be harmless, just work).
        sent = self._sent_offsets.setdefault((link.target, link.target_stream), set())
        fresh = [r for r in rows if r not in sent]
        if fresh:
            tgt.merge_offsets(link.target_stream, fresh)
            sent.clear()
            sent.update(rows)
