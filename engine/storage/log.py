"""Reading one partition: its chain of partitionlets and their record batches.

`PartitionLog` knows where each offset lives (the chain, from the catalog), reads batches
straight from the volume files, hides expired messages (the stream's `ttl`), and answers
the offset questions of a consumer: start, end, the first offset at or after a time.

A reader never writes. The chain is re-read from the catalog when the reader walks past
the end of what it knows (another process rolled the partition) or when the topology
version moves (retention dropped partitionlets). One `PartitionLog` belongs to one
consumer and is used by one thread at a time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from functools import partial
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from engine.bulk import bulk_records
from engine.errors import CorruptBatch, CorruptFile, DamagedPartition
from engine.records import ConsumerRecord, KafkaBatch, OffsetAndTimestamp
from engine.storage import batch as batch_codec
from engine.storage.catalog import Catalog, PartitionletRow
from engine.storage.reader import ArchivedRows, BatchReader, RowReader, StoredBatch
from engine.storage.volume import ACTIVE, DELETED

if TYPE_CHECKING:
    from engine.ops.heat import ReadCounter

    # What reads a partitionlet's batches: its volume, or the archive file of an archived
    # one (Cluster.reader chooses).
    PartitionletReader = Callable[[PartitionletRow], BatchReader]

# One C call per record (zip's tuple into a ConsumerRecord), no Python frame.
_record = partial(tuple.__new__, ConsumerRecord)
# The headers of a record without any: shared, so immutable.
NO_HEADERS: tuple[Any, ...] = ()

# Batches fetched per volume query: a batch holds up to thousands of messages.
FETCH_BATCHES = 16


class ProducerState(NamedTuple):
    """One producer's state in a partition (`PartitionLog.producers`); -1: not known."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int  # the first offset of its open transaction here


class _Decoded:
    """One stored batch being read: its row, its payload in the plain layout (inflated
    once if it was compressed, laid out once if it is a Kafka batch), and its columns as
    Python objects (`batch`), made on first use: a columnar reader (`read_columns`) never
    makes them, and one that takes Kafka batches as they are (`verbatim`) not even the
    plain layout of those."""

    __slots__ = (
        "pl_id",
        "volume_id",
        "base",
        "last",
        "ts_type",
        "first_ts",
        "max_ts",
        "stored",
        "_payload",
        "_batch",
        "_positions",
        "_deltas",
        "byte_share",
    )

    def __init__(self, pl: PartitionletRow, row: StoredBatch) -> None:
        base, last, ts_type, first_ts, max_ts, payload = row
        self.pl_id = pl.id
        self.volume_id = pl.volume_id
        # stored bytes per message of this batch: read heat counts bytes without a loop
        self.byte_share = len(payload) / max(1, last - base + 1)
        self.base = base
        self.last = last
        self.ts_type = ts_type
        self.first_ts = first_ts
        self.max_ts = max_ts
        self.stored = payload
        # a compressed batch is inflated now: a damaged one fails where it is read
        self._payload = (
            None if payload[0] == batch_codec.VERSION_KAFKA else batch_codec.plain(payload)
        )
        self._batch: batch_codec.DecodedBatch | None = None
        self._positions: batch_codec.Positions | None = None
        self._deltas: memoryview | None = None

    @property
    def payload(self) -> bytes:
        """The payload in the plain layout."""
        p = self._payload
        if p is None:
            p = self._payload = batch_codec.plain(self.stored)
        return p

    @property
    def batch(self) -> batch_codec.DecodedBatch:
        b = self._batch
        if b is None:
            b = self._batch = batch_codec.decode(self.payload, self.base)
        return b

    @property
    def positions(self) -> batch_codec.Positions:
        at = self._positions
        if at is None:
            at = self._positions = batch_codec.positions(self.payload)
        return at

    def index(self, position: int) -> int:
        """The index in the batch of the first record at an offset >= `position`."""
        at = self.positions
        if at.deltas_at is None:
            return max(0, position - self.base)
        return bisect_left(self.deltas(), position - self.base)

    def offset_at(self, i: int) -> int:
        """The offset of the record at index `i`."""
        if self.positions.deltas_at is None:
            return self.base + i
        return self.base + self.deltas()[i]

    def deltas(self) -> memoryview:
        """The uint32 offset deltas, in place in the payload (the format is little-endian,
        as every platform this runs on)."""
        d = self._deltas
        if d is None:
            at = self.positions
            assert at.deltas_at is not None
            d = self._deltas = memoryview(self.payload)[
                at.deltas_at : at.deltas_at + 4 * at.count
            ].cast("I")
        return d


class Columns(NamedTuple):
    """Records [start, end) (indexes) of one stored batch, in the plain layout, for a
    columnar reader: `payload` is cut with `positions` (engine.storage.batch). Records
    older than the ttl's cutoff are still among them when `first_ts` is below it."""

    payload: bytes
    positions: batch_codec.Positions
    base_offset: int
    timestamp_type: int
    first_ts: int
    start: int
    end: int


class ArchivedColumns(NamedTuple):
    """Records of an archived partitionlet for a columnar reader, as its Parquet file holds
    them: `rows`, a `pyarrow.Table` with the columns of `engine.client.arrow.schema` but
    the topic and partition (a slice of a row group: no copy). Records older than the
    ttl's cutoff are still among them when `first_ts` is below it."""

    rows: Any
    first_ts: int


class _Rows:
    """A run of an archived partitionlet's rows being read by a columnar reader
    (`ArchivedRows`): what `_Decoded` is to a stored batch, with the offsets as the file
    holds them rather than a payload."""

    __slots__ = (
        "pl_id",
        "volume_id",
        "base",
        "last",
        "first_ts",
        "max_ts",
        "rows",
        "offsets",
        "byte_share",
        "_fresh",
    )

    def __init__(self, pl: PartitionletRow, run: ArchivedRows) -> None:
        self.pl_id = pl.id
        self.volume_id = pl.volume_id
        self.base, self.last, self.first_ts, self.max_ts, self.rows, self.offsets = run
        # bytes per message of the run in memory: read heat counts bytes without a loop
        self.byte_share: float = int(run.rows.nbytes) / max(1, len(run.offsets))
        self._fresh: tuple[int, Any] | None = None  # (cutoff, running count of the fresh)

    def take(self, start: int, room: int, cutoff_ms: int | None) -> tuple[int, int]:
        """(end, count): the records [start, end) hold the first `room` records from
        index `start` on that are not older than `cutoff_ms` (or all the run has left),
        `count` of them. A run joins many stored batches, some of which may have expired
        as a whole; a live reader skips those without counting them, and so does this."""
        n = len(self.offsets)
        if cutoff_ms is None or self.first_ts >= cutoff_ms:
            end = min(n, start + room)
            return end, end - start
        import numpy as np  # an archived run exists only where pyarrow and numpy do

        if self._fresh is None or self._fresh[0] != cutoff_ms:
            stamps = self.rows.column("timestamp").to_numpy().view(np.int64)  # us
            fresh = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(stamps >= cutoff_ms * 1000, out=fresh[1:])
            self._fresh = (cutoff_ms, fresh)
        fresh = self._fresh[1]
        want = int(fresh[start]) + room
        end = min(n, int(np.searchsorted(fresh, want, side="left")))
        return end, int(fresh[end]) - int(fresh[start])


class PartitionLog:
    """One partition's chain, read through `catalog` (the chain) and `reader` (the batches
    of one partitionlet, from its volume or archive file); it never writes, and its offsets
    only grow as the partition does. Used by one thread at a time (its consumer's)."""

    def __init__(
        self,
        catalog: Catalog,
        reader: PartitionletReader,
        topic_id: int,
        partition: int,
        topic: str,
        counter: ReadCounter | None = None,
        *,
        committed: bool = False,
    ) -> None:
        self._catalog = catalog
        self._reader = reader
        self._counter = counter
        # read_committed (Kafka's isolation level): nothing at or past the last stable
        # offset, nothing of an aborted transaction
        self.committed = committed
        self._lso: int | None = None  # the first offset of an open transaction here
        self._skip: tuple[tuple[int, int, int], ...] = ()  # aborted (producer, first, marker)
        self.topic_id = topic_id
        self.partition = partition
        self.topic = topic
        self._chain: list[PartitionletRow] = []
        self._start = 0  # the log start DeleteRecords moved (0: never), read with the chain
        self._loaded = False
        self._decoded: _Decoded | None = None
        self._run: _Rows | None = None  # the archived rows a columnar reader is in
        # fetched rows not yet decoded, of _ahead_pl: stored batches, or an archived
        # partitionlet's runs of Arrow rows for a columnar reader (_ahead_rows)
        self._ahead: list[StoredBatch] | list[ArchivedRows] = []
        self._ahead_pl = -1
        self._ahead_rows = False
        # transaction markers met by `_check_gap`: (partitionlet, first, last offset looked
        # at, the markers' offsets there), so a reader of small transactions asks once per
        # fetch, not once per marker
        self._markers_seen: tuple[int, int, int, frozenset[int]] | None = None

    # --- the chain ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the chain (the consumer calls it when the topology version moved)."""
        self._loaded = True
        self._chain = self._catalog.chain(self.topic_id, self.partition)
        self._start = self._catalog.log_start(self.topic_id, self.partition)
        self._ahead = []
        self._decoded = None
        self._run = None

    def _ensure_chain(self) -> None:
        if not self._loaded:
            self.refresh()

    def start_offset(self) -> int:
        """The log start offset: the first partitionlet's base, or where DeleteRecords
        moved it inside a partitionlet (Kafka's logical log start)."""
        self._ensure_chain()
        return max(self._chain[0].base_offset if self._chain else 0, self._start)

    def end_offset(self) -> int:
        """The log end offset: the next offset to be written."""
        try:
            return self._end_offset()
        except CorruptFile as exc:  # a damaged volume: say which partition it stops
            raise self._damaged(str(exc)) from exc

    def _end_offset(self) -> int:
        self._ensure_chain()
        if not self._chain:
            self.refresh()
            if not self._chain:
                return 0
        last = self._chain[-1]
        if last.end_offset is not None:  # sealed, successor not known yet: look again
            self.refresh()
            last = self._chain[-1]
            if last.end_offset is not None:
                return last.end_offset
        state = self._reader(last).state(last.id)  # active: in its volume, never archived
        return last.base_offset if state is None else state.next_offset

    def stable_offset(self) -> int:
        """The last stable offset (Kafka's LSO): the first offset of the earliest open
        transaction here, else the log end offset. A read_committed reader stops there."""
        open_first = self._catalog.transactions.first_open_offsets(
            [(self.topic_id, self.partition)]
        ).get((self.topic_id, self.partition))
        end = self.end_offset()
        return end if open_first is None else min(open_first, end)

    def producers(self) -> list[ProducerState]:
        """The idempotent and transactional producers active in this partition (Kafka's
        DescribeProducers): each from its last batch in the newest partitionlet it wrote
        to, whose id the cluster has not expired; with the first offset of its open
        transaction here, if any. By producer id."""
        self._ensure_chain()
        found: dict[int, ProducerState] = {}
        for pl in reversed(self._chain):
            for producer_id, epoch, last_seq, last_ts in self._reader(pl).producers(pl.id):
                if producer_id not in found:
                    found[producer_id] = ProducerState(producer_id, epoch, last_seq, last_ts, -1)
        opens = self._catalog.transactions.open_in_partition(self.topic_id, self.partition)
        for producer_id, (epoch, first) in opens.items():
            state = found.get(producer_id)
            found[producer_id] = (
                ProducerState(producer_id, epoch, -1, -1, first)
                if state is None
                else state._replace(txn_start_offset=first)
            )
        alive = self._catalog.producers.alive(list(found))
        return [found[p] for p in sorted(found) if p in alive]

    def markers(self, start: int, end: int) -> list[tuple[int, int, int, bool]]:
        """The transaction markers at offsets start..end-1: (offset, producer id, epoch,
        True for COMMIT). An archived partitionlet keeps none (readers pass its gaps)."""
        self._ensure_chain()
        found: list[tuple[int, int, int, bool]] = []
        for pl in self._chain:
            if pl.end_offset is not None and pl.end_offset <= start:
                continue
            if pl.base_offset >= end:
                break
            found += self._reader(pl).markers(pl.id, start, end - 1)
        return found

    def aborted_batches(self, start: int, end: int) -> list[tuple[int, int]]:
        """(first offset, last offset) of the stored batches of aborted transactions that
        hold offsets in start..end-1; every record in one of these ranges was aborted."""
        self._ensure_chain()
        skip = self._catalog.transactions.aborted(self.topic_id, self.partition, start, end - 1)
        found: list[tuple[int, int]] = []
        if not skip or start >= end:
            return found
        for pl in self._chain:
            if pl.end_offset is not None and pl.end_offset <= start:
                continue
            if pl.base_offset >= end:
                break
            # the stored batches themselves (an archived file's reads merge them)
            found += [
                (base, last)
                for base, last in self._reader(pl).aborted_offsets(pl.id, skip)
                if last >= start and base < end
            ]
        return found

    def _see_transactions(self, position: int) -> None:
        """read_committed: learn the LSO and the aborted ranges from `position` on; what was
        fetched ahead under another view is read again."""
        key = (self.topic_id, self.partition)
        tables = self._catalog.transactions
        lso = tables.first_open_offsets([key]).get(key)
        skip = tuple(tables.aborted(self.topic_id, self.partition, position, 2**62))
        if skip != self._skip or lso != self._lso:
            self._ahead = []
            self._decoded = None
            self._run = None
        self._lso, self._skip = lso, skip

    # --- reading --------------------------------------------------------------------------

    def read(
        self, position: int, max_records: int, cutoff_ms: int | None
    ) -> tuple[list[ConsumerRecord], int]:
        """Up to `max_records` records at offsets >= `position`, and the next position.

        Records older than `cutoff_ms` (expired by the stream's ttl) are skipped. A damaged
        stored batch (its checksum does not match) raises `errors.CorruptBatch` once the
        records before it are returned: the next position is its first offset, so every
        read of it raises again, and nothing of it is ever returned.
        """
        self._ensure_chain()
        position = max(position, self._start)
        try:
            if self.committed:
                self._see_transactions(position)
            with bulk_records(max_records):
                return self._read(position, max_records, cutoff_ms)
        except CorruptFile as exc:  # a damaged volume: say which partition it stops
            raise self._damaged(str(exc)) from exc

    def _read(
        self, position: int, max_records: int, cutoff_ms: int | None
    ) -> tuple[list[ConsumerRecord], int]:
        records: list[ConsumerRecord] = []
        lso = self._lso if self.committed else None
        while len(records) < max_records:
            d = self._decoded
            if d is None or not d.base <= position <= d.last:
                try:
                    d, position = self._fetch(position)
                except CorruptBatch:
                    if records:  # what lies before the damage first; the error next read
                        break
                    raise
                if d is None:
                    break
                if position < d.base:
                    position = d.base  # a gap: compaction, retention or a marker
                self._decoded = d
            if lso is not None and d.base >= lso:
                position = min(position, lso)
                break  # an open transaction's batch, or one after it
            if cutoff_ms is not None and d.max_ts < cutoff_ms:
                position = d.last + 1  # the whole batch has expired
                continue
            got, next_position = self._records(d, position, max_records - len(records), cutoff_ms)
            if self._counter is not None and got:
                self._counter.add(
                    d.volume_id, d.pl_id, len(got), int((next_position - position) * d.byte_share)
                )
            position = next_position
            records.extend(got)
        return records, position

    def _records(
        self, d: _Decoded, position: int, limit: int, cutoff_ms: int | None
    ) -> tuple[list[ConsumerRecord], int]:
        b = d.batch
        offsets = b.offsets
        if isinstance(offsets, range):
            start = position - d.base
        else:
            start = bisect_left(offsets, position)
        end = min(len(offsets), start + limit)
        if start >= end:
            return [], d.last + 1
        headers = b.headers[start:end] if b.headers is not None else repeat(NO_HEADERS)
        records = list(
            map(
                _record,
                zip(
                    repeat(self.topic),
                    repeat(self.partition),
                    offsets[start:end],
                    b.timestamps[start:end],
                    repeat(d.ts_type),
                    b.keys[start:end],
                    b.values[start:end],
                    headers,
                ),
            )
        )
        next_position = offsets[end - 1] + 1 if end < len(offsets) else d.last + 1
        if cutoff_ms is not None and d.first_ts < cutoff_ms:
            records = [r for r in records if r.timestamp >= cutoff_ms]
        return records, next_position

    def read_columns(
        self, position: int, max_records: int, cutoff_ms: int | None
    ) -> tuple[list[Columns | ArchivedColumns], int]:
        """What `read` reads, as `Columns` of the stored batches rather than records (no
        Python object per message), and the next position; an archived partitionlet's
        records come as `ArchivedColumns`, its file's Arrow columns as they are. Batches
        that expired as a whole are skipped; `first_ts` below `cutoff_ms` says a chunk
        holds some expired records, which the caller drops."""
        try:
            chunks, position = self._read_columns(position, max_records, cutoff_ms, False)
        except CorruptFile as exc:  # a damaged volume: say which partition it stops
            raise self._damaged(str(exc)) from exc
        return cast(list[Columns | ArchivedColumns], chunks), position

    def read_verbatim(
        self, position: int, max_records: int, cutoff_ms: int | None
    ) -> tuple[list[Columns | ArchivedColumns | KafkaBatch], int]:
        """`read_columns`, with each Kafka batch stored as it came, none of its records
        expired, as a `KafkaBatch`: whole, even when `position` lies inside it (as Kafka
        serves a batch: a client skips what it did not ask for)."""
        try:
            return self._read_columns(position, max_records, cutoff_ms, True)
        except CorruptFile as exc:  # a damaged volume: say which partition it stops
            raise self._damaged(str(exc)) from exc

    def _read_columns(
        self, position: int, max_records: int, cutoff_ms: int | None, verbatim: bool
    ) -> tuple[list[Columns | ArchivedColumns | KafkaBatch], int]:
        out: list[Columns | ArchivedColumns | KafkaBatch] = []
        taken = 0
        self._ensure_chain()
        position = max(position, self._start)  # below the log start: deleted records
        if self.committed:
            self._see_transactions(position)
        lso = self._lso if self.committed else None
        while taken < max_records:
            d: _Decoded | _Rows | None = self._run or self._decoded
            if d is None or not d.base <= position <= d.last:
                try:
                    d, position = self._fetch_any(position, rows=True)
                except CorruptBatch:
                    if out:  # what lies before the damage first; the error next read
                        break
                    raise
                if d is None:
                    break
                if position < d.base:
                    position = d.base  # a gap: compaction, retention or a marker
                if isinstance(d, _Rows):
                    self._run = d
                else:
                    self._decoded, self._run = d, None
            if lso is not None and d.base >= lso:
                position = min(position, lso)
                break  # an open transaction's batch, or one after it
            if cutoff_ms is not None and d.max_ts < cutoff_ms:
                position = d.last + 1  # the whole batch has expired
                continue
            if isinstance(d, _Rows):  # archived: the file's columns, sliced
                start = bisect_left(d.offsets, position)
                end, count = d.take(start, max_records - taken, cutoff_ms)
                if start >= end:
                    position = d.last + 1
                    continue
                next_position = int(d.offsets[end - 1]) + 1 if end < len(d.offsets) else d.last + 1
                if count:
                    out.append(ArchivedColumns(d.rows.slice(start, end - start), d.first_ts))
                    taken += count
                    if self._counter is not None:
                        self._counter.add(
                            d.volume_id, d.pl_id, count, int((end - start) * d.byte_share)
                        )
                position = next_position
                continue
            if verbatim and (cutoff_ms is None or d.first_ts >= cutoff_ms):
                data = batch_codec.kafka_data(d.stored)
                if data is not None:
                    out.append(KafkaBatch(d.base, d.last, data))
                    taken += d.last - position + 1
                    if self._counter is not None:
                        self._counter.add(
                            d.volume_id,
                            d.pl_id,
                            d.last - position + 1,
                            int((d.last + 1 - position) * d.byte_share),
                        )
                    position = d.last + 1
                    continue
            at = d.positions
            start = d.index(position)
            end = min(at.count, start + max_records - taken)
            if start >= end:
                position = d.last + 1
                continue
            next_position = d.offset_at(end - 1) + 1 if end < at.count else d.last + 1
            out.append(Columns(d.payload, at, d.base, d.ts_type, d.first_ts, start, end))
            taken += end - start
            if self._counter is not None:
                self._counter.add(
                    d.volume_id,
                    d.pl_id,
                    end - start,
                    int((next_position - position) * d.byte_share),
                )
            position = next_position
        return out, position

    def _fetch(self, position: int) -> tuple[_Decoded | None, int]:
        """The first batch holding an offset >= `position`, walking the chain, and the
        position moved past partitionlets found empty (compaction) on the way."""
        d, position = self._fetch_any(position, rows=False)
        return cast(_Decoded | None, d), position

    def _fetch_any(self, position: int, *, rows: bool) -> tuple[_Decoded | _Rows | None, int]:
        """`_fetch`; with `rows`, an archived partitionlet's records come as the runs of
        Arrow rows of its file (`_Rows`), which a columnar reader hands on as they are."""
        refreshes = 0
        while refreshes < 3:
            self._ensure_chain()
            pl = self._locate(position)
            if pl is None:
                return None, position
            as_rows = rows and pl.archive_file is not None
            if (
                self._ahead_pl != pl.id
                or self._ahead_rows != as_rows
                or not self._ahead
                or self._ahead[0][1] < position  # all of it is behind us
                or self._ahead[-1][0] > position  # a seek back, or a gap (read once more)
            ):
                # the volume, or the archive file of an archived partitionlet
                reader = self._reader(pl)
                if as_rows:
                    self._ahead = cast(RowReader, reader).read_rows(
                        pl.id, position, FETCH_BATCHES, self._skip
                    )
                else:
                    self._ahead = reader.read(pl.id, position, FETCH_BATCHES, self._skip)
                self._ahead_pl = pl.id
                self._ahead_rows = as_rows
                self._ahead.reverse()  # pop() from the end in offset order
            while self._ahead and self._ahead[-1][1] < position:
                self._ahead.pop()
            if self._ahead:
                row = self._ahead.pop()
                if row[0] > position:
                    self._check_gap(pl, position, row[0])
                if isinstance(row, ArchivedRows):
                    return _Rows(pl, row), position
                return _Decoded(pl, row), position
            # Nothing at or after `position` in this partitionlet.
            state = self._reader(pl).state(pl.id)
            if pl.end_offset is not None:
                if state is None or state.state == DELETED:
                    # Moved to another volume (rebalance) or dropped (retention) since
                    # the chain was read: read the chain again before skipping anything.
                    refreshes += 1
                    if not self._moved(pl):
                        position = max(position, pl.end_offset)
                    continue
                self._check_gap(pl, position, pl.end_offset)
                position = max(position, pl.end_offset)  # emptied by compaction
                continue
            if state is not None and state.state != ACTIVE and position >= state.next_offset:
                refreshes += 1
                self.refresh()  # another writer rolled it: learn the successor
                continue
            # Offsets below the end that hold no batch (a transaction marker last, or what
            # an aborted transaction left to a read_committed reader) are passed over, so a
            # reader at the end is at the end offset.
            if state is not None and position < state.next_offset:  # else no gap: no query
                gap_end = self._reader(pl).gap_end(pl.id, position, self._skip)
                if gap_end is not None:
                    self._check_gap(pl, position, gap_end)
                    position = gap_end
            return None, position
        return None, position

    def _check_gap(self, pl: PartitionletRow, start: int, end: int) -> None:
        """Raise `DamagedPartition` unless offsets start..end-1 of `pl` may hold no
        message: transaction markers, an aborted transaction (read_committed), or what
        compaction or the ttl removed. A partitionlet whose messages and markers fill its
        range has no gap to jump, so a reader there met a damaged index, row or file; and
        one the catalog says is sealed must end where the catalog's chain says."""
        start = max(start, pl.base_offset, self._start)
        if start >= end or pl.archive_file is not None:
            return  # an archive file keeps no markers (its gaps are its own)
        if any(first < end and marker >= start for _, first, marker in self._skip):
            return
        reader = self._reader(pl)
        seen = self._markers_seen
        if seen is None or seen[0] != pl.id or not seen[1] <= start <= end - 1 <= seen[2]:
            # up to the last batch fetched ahead: the gaps before it are asked here at once
            last = self._ahead[0][1] if self._ahead and self._ahead_pl == pl.id else end - 1
            last = max(last, end - 1)
            found = frozenset(m[0] for m in reader.markers(pl.id, start, last))
            seen = self._markers_seen = (pl.id, start, last, found)
        markers = seen[3]
        if end - start <= len(markers) and all(o in markers for o in range(start, end)):
            return  # transaction markers
        state = reader.state(pl.id)
        if state is None or state.state == DELETED:
            return  # moved or dropped meanwhile: the caller reads the chain again
        if pl.end_offset is not None and state.next_offset != pl.end_offset:
            raise self._damaged(
                f"the catalog says partitionlet {pl.id} holds offsets {pl.base_offset}.."
                f"{pl.end_offset - 1}, its volume {pl.volume_id} holds "
                f"{state.base_offset}..{state.next_offset - 1}"
            )
        span = state.next_offset - state.base_offset
        in_all = len(reader.markers(pl.id, state.base_offset, state.next_offset))
        if state.messages + in_all < span:
            return  # compaction or the ttl removed messages here: gaps are expected
        raise self._damaged(
            f"offsets {start}..{end - 1} of partitionlet {pl.id} (volume {pl.volume_id}) "
            f"cannot be read though it holds {state.messages} messages for its "
            f"{span} offsets (a damaged index or file)"
        )

    def _damaged(self, problem: str) -> DamagedPartition:
        return DamagedPartition(
            f"partition {self.partition} of topic {self.topic}: {problem}; reading stops "
            "here instead of skipping messages (run `plet check`)"
        )

    def _moved(self, pl: PartitionletRow) -> bool:
        """Re-read the chain; True if `pl` now lives elsewhere (or is gone)."""
        self.refresh()
        return all(
            p.id != pl.id or p.volume_id != pl.volume_id or p.archive_file != pl.archive_file
            for p in self._chain
        )

    def _locate(self, position: int) -> PartitionletRow | None:
        chain = self._chain
        if not chain:
            self.refresh()
            chain = self._chain
            if not chain:
                return None
        for pl in chain:
            if pl.end_offset is None or position < pl.end_offset:
                return pl  # below the start: the first batch after `position` is next
        # Past every sealed partitionlet we know of: the successor may be new.
        self.refresh()
        for pl in self._chain:
            if pl.end_offset is None or position < pl.end_offset:
                return pl
        return None

    # --- time -----------------------------------------------------------------------------

    def offset_for_time(
        self, timestamp_ms: int, cutoff_ms: int | None
    ) -> OffsetAndTimestamp | None:
        """The earliest offset whose timestamp is >= `timestamp_ms`, or None."""
        try:
            return self._offset_for_time(timestamp_ms, cutoff_ms)
        except CorruptFile as exc:  # a damaged volume: say which partition it stops
            raise self._damaged(str(exc)) from exc

    def _offset_for_time(
        self, timestamp_ms: int, cutoff_ms: int | None
    ) -> OffsetAndTimestamp | None:
        self._ensure_chain()
        target = timestamp_ms if cutoff_ms is None else max(timestamp_ms, cutoff_ms)
        for pl in self._chain:
            if pl.max_ts is not None and pl.end_offset is not None and pl.max_ts < target:
                continue  # sealed and entirely older
            row = self._reader(pl).first_batch_at_time(pl.id, target)
            if row is None:
                continue
            b = batch_codec.decode(row[5], row[0])
            for offset, ts in zip(b.offsets, b.timestamps, strict=True):
                if ts >= target:
                    if offset < self._start:
                        return self._first_at_time_from(self._start, target)
                    return OffsetAndTimestamp(offset, ts)
        return None

    def _first_at_time_from(self, position: int, target: int) -> OffsetAndTimestamp | None:
        """The first record at or after `position` whose timestamp is >= `target`, read
        in order: the time index found one below the log start DeleteRecords moved."""
        while True:
            records, next_position = self.read(position, 1000, None)
            for r in records:
                if r.timestamp >= target:
                    return OffsetAndTimestamp(r.offset, r.timestamp)
            if next_position <= position:
                return None
            position = next_position
