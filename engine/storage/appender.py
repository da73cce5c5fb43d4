"""The appender: appending batches to the active partitionlets, and rolling them.

A partition is a chain of partitionlets; only the last (active) one takes appends. Its next
offset lives in the volume row of that partitionlet and moves only in the transaction that
appends there (engine.storage.volume), so offsets are unique whichever process writes. When a
volume seals an active partitionlet (by size or age), the writer that notices asks the
catalog for a successor starting at the sealed end offset, on the volume that `Placement`
(engine.storage.placement) chooses; if another writer got there first, the catalog returns
that one instead.

An offset once handed out is never handed out again, also when a volume loses its last
commits (a cut WAL, an old copy put back): about once a second (`MARK_INTERVAL_S`) a writer
saves in the catalog, another file, the offset each partitionlet it appended to has
reached; a partition whose volume holds less than its mark, or less than the catalog's
chain says, takes no more writes (`errors.DamagedPartition`), since the offsets after what
the volume holds may have been read already. Appends in the last second before such a loss
can still go unnoticed: the price of not writing the catalog at each append.

A batch is reported written (its `offset` set) if and only if its volume committed it: a
roll that fails after the append (the catalog's disk is full) fails only the batches still
waiting for the successor, and the next append to that partition rolls again, since the
volume keeps the partitionlet sealed.

Compression happens here, once for every writer that appends through an `Appender`: each
batch's body is compressed by its stream's `compression` policy (engine.storage.batch)
before it reaches the volume. Batches copied by replication keep the codec they have at
their source (they are stored as they are there), and compaction keeps each rewritten
batch's codec (engine.storage.volume), so a policy change affects new batches only.
"""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from collections.abc import Mapping

from engine.clock import SYSTEM_CLOCK, Clock
from engine.errors import (
    CorruptFile,
    DamagedPartition,
    PartitionletError,
    StorageError,
    UnknownStream,
    UnknownTopic,
)
from engine.storage import batch as batch_codec
from engine.storage.catalog import Catalog, EnsuredTopic, FirstPartitionlet, PartitionletRow
from engine.storage.placement import Placement
from engine.storage.volume import DELETED, SEALED, BatchWrite, Volume

log = logging.getLogger(__name__)

# Tries of a batch whose partitionlet other writers keep sealing under it, before it waits
# its turn: after these it tries again after a short random pause (so the writers ahead of
# it get through), for up to ROLL_WAIT_S, as long as a writer waits for a file's lock.
MAX_ROLL_RETRIES = 8
ROLL_WAIT_S = 30.0
# How often a writer saves the offsets its partitionlets reached (`Appender.save_marks`).
MARK_INTERVAL_S = 1.0


class Appender:
    """Appends batches to the active partitionlets of many partitions, one transaction per
    volume, rolling a partitionlet when it holds `roll_bytes` or is `roll_ms` old (the
    volume decides, in the transaction of the append). Caches where each partition's
    active partitionlet lives, so it must forget when topics or policies change. One per
    writing thread (a producer's sender, a replicated apply); not thread-safe."""

    def __init__(
        self,
        catalog: Catalog,
        volumes: Mapping[int, Volume],
        placement: Placement,
        *,
        roll_bytes: int,
        roll_ms: int,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._catalog = catalog
        self._clock = clock
        self._volumes = volumes
        self._placement = placement
        self.roll_bytes = roll_bytes
        self.roll_ms = roll_ms
        # where each partition's active partitionlet is (what an append needs of it)
        self._active: dict[tuple[int, int], PartitionletRow | FirstPartitionlet] = {}
        # partitionlets learnt (or made) since the catalog was last made durable: a write
        # that is fsynced first makes their catalog rows so (`Catalog.make_durable`), or a
        # machine crash could keep its batches in a partitionlet the catalog forgot
        self._learnt = False
        self._codecs: dict[int, str] = {}  # stream id -> its `compression` policy
        # partitions whose chain disagrees with its volumes (`_check_chain`): no writes
        self._refused: dict[tuple[int, int], DamagedPartition] = {}
        # partitionlet id -> the next offset its appends reached, not saved yet
        self._marks: dict[int, int] = {}
        # when `save_marks` may write next (clock.monotonic): a writer that appends once and
        # goes (a transaction's markers) costs the catalog nothing
        self._next_save = clock.monotonic() + MARK_INTERVAL_S

    def forget(self) -> None:
        """Drop cached metadata (topics were deleted or changed, or policies)."""
        self._active.clear()
        self._codecs.clear()
        self._refused.clear()

    def codec(self, stream_id: int) -> str:
        """The `compression` policy of a stream ("none" for a stream gone, or one whose
        catalog predates the policy or holds a bad value: plain batches are always read)."""
        codec = self._codecs.get(stream_id)
        if codec is None:
            try:
                codec = self._catalog.stream_by_id(stream_id).policies.get("compression", "none")
            except UnknownStream:
                codec = "none"
            if codec not in batch_codec.CODECS:
                codec = "none"
            self._codecs[stream_id] = codec
        return codec

    def ensure_topics(
        self, stream_id: int, names: list[str], partitions: int
    ) -> dict[str, EnsuredTopic]:
        """Create the topics of `names` that do not exist, with `partitions` each and their
        first partitionlets, in one catalog transaction (`Catalog.ensure_topics`); returns
        every one that exists after, by name. The new partitionlets are learnt here, so the
        first appends to them look nothing up."""
        found, firsts = self._catalog.ensure_topics(
            stream_id, names, partitions, self._placement.choose_many
        )
        for pl in firsts:
            self._active[(pl.topic_id, pl.partition)] = pl
        self._learnt = self._learnt or bool(firsts)
        return found

    def write(self, writes: list[BatchWrite], *, sync: bool) -> None:
        """Append every batch (in list order within a partition); sets `offset` or `error`.

        A failure on one volume fails only the batches bound for that volume. The offsets
        reached are saved when due (`save_marks`).
        """
        try:
            self._write(writes, sync)
        finally:
            self._note_reached(writes)
        self.save_marks()

    def _write(self, writes: list[BatchWrite], sync: bool) -> None:
        for w in writes:
            codec = w.compression or self.codec(w.stream_id)
            if codec != "none":
                w.payload = batch_codec.compress(w.payload, codec)
            if w.marker is None:
                # the checksum's costly part, here rather than under the volume's write lock
                w.payload_crc = batch_codec.payload_crc(w.payload)
        pending = writes
        tries = 0
        deadline: float | None = None
        while True:
            try:
                pending = self._write_once(pending, sync)
            except PartitionletError as exc:
                if all(w.offset is None for w in writes):
                    raise  # nothing stored: the caller may try it all again
                for w in pending:  # some are stored: fail only the others
                    if w.offset is None and w.error is None:
                        w.error = exc
                return
            if not pending:
                return
            tries += 1
            if tries >= MAX_ROLL_RETRIES:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + ROLL_WAIT_S
                elif now >= deadline:
                    break
                # its turn: the writers that sealed it under this one append and go
                time.sleep(random.uniform(0.0, 0.001 * min(tries, 20)))
        for w in pending:
            w.error = StorageError(
                f"partition {w.partition} of topic #{w.topic_id} kept rolling under this "
                f"writer for {ROLL_WAIT_S:.0f} s ({tries} tries); try again"
            )

    # --- the offsets reached, saved in the catalog -------------------------------------------

    def _note_reached(self, writes: list[BatchWrite]) -> None:
        marks = self._marks
        for w in writes:
            if w.offset is not None and not w.duplicate:
                end = w.offset + max(w.count, 1)  # a marker takes one offset
                if marks.get(w.pl_id, -1) < end:
                    marks[w.pl_id] = end

    def marks_due_in(self) -> float | None:
        """Seconds until `save_marks` has something to write (0: now); None: nothing to
        save. A writer that waits for work waits at most this long."""
        if not self._marks:
            return None
        return max(0.0, self._next_save - self._clock.monotonic())

    def save_marks(self, *, now: bool = False) -> None:
        """Save the offsets reached since the last save, when `MARK_INTERVAL_S` has passed
        since it (or `now`). A failure (a full disk) keeps them for the next try: the
        appends themselves are committed, and a late mark only narrows what is checked."""
        if not self._marks:
            return
        clock_now = self._clock.monotonic()
        if not now and clock_now < self._next_save:
            return
        self._next_save = clock_now + MARK_INTERVAL_S
        try:
            self._catalog.mark_reached(self._marks)
        except PartitionletError as exc:  # a full disk, a closed cluster
            log.debug("offsets reached not saved: %s", exc)
            return
        self._marks = {}

    def _write_once(self, pending: list[BatchWrite], sync: bool) -> list[BatchWrite]:
        """One round of `write`: append what can be, roll what was sealed; returns the
        writes to try again (their partitionlet was sealed before they got in)."""
        self._load_active(
            {w.key for w in pending if w.key not in self._active},
            {w.key for w in pending if w.new_topic},
        )
        if sync and self._learnt:
            self._catalog.make_durable()
            self._learnt = False
        by_volume: dict[int, list[BatchWrite]] = defaultdict(list)
        for w in pending:
            pl = self._active.get(w.key)
            if w.key in self._refused:
                w.error = self._refused[w.key]
                continue
            if pl is None:
                w.error = UnknownTopic(
                    f"topic #{w.topic_id} partition {w.partition} no longer exists "
                    "(deleted while writing)"
                )
                continue
            w.pl_id = pl.id
            w.pl_base_offset = pl.base_offset
            w.pl_reached = pl.reached_offset
            by_volume[pl.volume_id].append(w)
        retry: list[BatchWrite] = []
        sealed: dict[tuple[int, int], tuple[int, int, int]] = {}
        for volume_id, batch_writes in by_volume.items():
            try:
                self._volumes[volume_id].append(
                    batch_writes, sync=sync, roll_bytes=self.roll_bytes, roll_ms=self.roll_ms
                )
            except PartitionletError as exc:
                for w in batch_writes:
                    w.error = self._named(w, exc) if isinstance(exc, CorruptFile) else exc
                continue
            for w in batch_writes:
                if isinstance(w.error, DamagedPartition):
                    w.error = self._named(w, w.error)
                if w.needs_history:
                    w.history = self._history(w)
                if w.offset is None and w.error is None:
                    retry.append(w)
                if w.sealed_at is not None:
                    sealed[w.key] = (w.pl_id, w.sealed_at, volume_id)
        if sealed:
            try:
                self._roll(sealed)
            except PartitionletError as exc:
                # The appends are committed and readable: only what waits for a successor
                # fails. The volume keeps the partitionlet sealed, so the next append to
                # the partition finds it so and rolls again.
                for w in retry:
                    if w.key in sealed:
                        w.error = exc
                retry = [w for w in retry if w.error is None]
        return retry

    def _named(self, w: BatchWrite, exc: StorageError) -> DamagedPartition:
        """`exc` (a damaged file or partition) as an error that names `w`'s topic and
        partition."""
        topic = self._catalog.topic_by_id(w.topic_id)
        name = topic.full_name if topic is not None else f"#{w.topic_id}"
        text = str(exc)
        if isinstance(exc, DamagedPartition):
            return DamagedPartition(text.replace(f"topic #{w.topic_id}", f"topic {name}", 1))
        return DamagedPartition(f"partition {w.partition} of topic {name}: {text}")

    def _history(self, w: BatchWrite) -> list[tuple[int, int, int, int]]:
        """An idempotent producer's last batches in the partitionlet before `w`'s: sealed,
        so read outside the append's transaction (a resend that crossed a roll)."""
        assert w.producer is not None
        before = self._catalog.partitionlet_before(w.topic_id, w.partition, w.pl_base_offset)
        volume = self._volumes.get(before.volume_id) if before is not None else None
        if before is None or volume is None:
            return []
        return volume.producer_batches(before.id, w.producer[0], w.origin)

    def _load_active(self, keys: set[tuple[int, int]], new: set[tuple[int, int]]) -> None:
        """Learn (or make) the active partitionlet of each key; `new` are partitions of
        topics this writer has just created, which cannot have one yet."""
        if not keys:
            return
        catalog = self._catalog
        found = catalog.active_partitionlets(sorted(keys - new)) if keys - new else {}
        missing = sorted(k for k in keys if k not in found)
        if missing:
            volumes = self._placement.choose_many(len(missing))
            found.update(
                catalog.add_first_partitionlets(
                    [(tid, part, vid) for (tid, part), vid in zip(missing, volumes, strict=True)]
                )
            )
        self._active.update(found)
        self._learnt = self._learnt or bool(found)
        self._check_chain([pl for pl in found.values() if pl.base_offset > 0])

    def _check_chain(self, active: list[PartitionletRow]) -> None:
        """Refuse the partitions whose active partitionlet follows one its volume does not
        hold to the end the catalog says: that volume lost commits (a cut WAL, an old copy),
        and the offsets after what it holds may have been handed out and read already, so
        none is handed out again. Once per active partitionlet learnt, a row read each."""
        before: dict[int, list[tuple[tuple[int, int], PartitionletRow]]] = defaultdict(list)
        key_base = {(pl.topic_id, pl.partition): pl.base_offset for pl in active}
        for pl in active:
            prev = self._catalog.partitionlet_before(pl.topic_id, pl.partition, pl.base_offset)
            volume = self._volumes.get(prev.volume_id) if prev is not None else None
            if prev is not None and prev.archive_file is None and volume is not None:
                if volume.damage is None:  # a damaged one refuses by itself
                    before[prev.volume_id].append(((pl.topic_id, pl.partition), prev))
        for volume_id, pairs in before.items():
            volume = self._volumes[volume_id]
            states = volume.states([prev.id for _, prev in pairs])
            for key, prev in pairs:
                st = states.get(prev.id)
                if st is None or st.state == DELETED:
                    continue  # moved or dropped since the catalog was read
                if st.state != SEALED or st.next_offset != prev.end_offset:
                    topic = self._catalog.topic_by_id(key[0])
                    name = topic.full_name if topic is not None else f"#{key[0]}"
                    self._refused[key] = DamagedPartition(
                        f"partition {key[1]} of topic {name}: the catalog says partitionlet "
                        f"{prev.id} holds offsets {prev.base_offset}..{key_base[key] - 1}, its "
                        f"volume {volume_id} ({volume.path}) holds {st.base_offset}.."
                        f"{st.next_offset - 1}"
                        + (" and has not sealed it" if st.state != SEALED else "")
                        + ": the volume lost commits; writes to this partition are refused so "
                        "that no offset is handed out twice; run `plet check` for the repair"
                    )

    def _roll(self, sealed: dict[tuple[int, int], tuple[int, int, int]]) -> None:
        """Give each sealed partitionlet its successor (or learn the one another made)."""
        catalog = self._catalog
        volumes = self._placement.choose_many(len(sealed))
        wanted: list[tuple[int, int, int, int, int | None]] = [
            (tid, part, vid, end, pl_id)
            for ((tid, part), (pl_id, end, _)), vid in zip(
                sorted(sealed.items()), volumes, strict=True
            )
        ]
        for key in sealed:
            self._active.pop(key, None)
        self._active.update(catalog.add_partitionlets(wanted))
        self._learnt = True
        for pl_id, _, volume_id in sealed.values():
            state = self._volumes[volume_id].state(pl_id)
            if state is None:
                continue
            try:  # statistics for listings that read no volume
                catalog.record_sealed_stats(pl_id, state.bytes, state.first_ts, state.max_ts)
            except StorageError as exc:  # a full disk: listings read the volume instead
                log.debug("no sealed statistics for partitionlet %d: %s", pl_id, exc)

    # --- for a writer that appends through the volume itself (replicated apply) -------------

    def active(self, key: tuple[int, int]) -> PartitionletRow | FirstPartitionlet | None:
        """The active partitionlet of (topic id, partition), learnt (or made) when not
        known yet; None when the partition no longer exists; `DamagedPartition` when its
        chain disagrees with its volumes (`_check_chain`)."""
        if key not in self._active:
            self._load_active({key}, set())
        if key in self._refused:
            raise self._refused[key]
        return self._active.get(key)

    def sealed(self, key: tuple[int, int], pl_id: int, end: int, volume_id: int) -> None:
        """The volume sealed `pl_id` (of `key`) at offset `end`: give it its successor."""
        self._roll({key: (pl_id, end, volume_id)})

    def stale(self, key: tuple[int, int]) -> None:
        """Forget where `key`'s active partitionlet is (another writer rolled it)."""
        self._active.pop(key, None)
