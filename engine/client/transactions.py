"""Transactions (Kafka's KIP-98 and KIP-447): the rules, written once for the engine's
`Producer`, the wire listener and the CLI. The state is the cluster's (catalog tables in
engine.storage.transactions, markers in the volumes), so every process agrees and a crash
at any point leaves a transaction that is finished by whoever comes next.

A transaction's life, for the transactional id's current epoch:

1. `init` gives the transactional id's producer id its next epoch (fencing every older
   producer of it) and finishes what the older one left: a transaction that was
   committing is committed, any other open one aborted.
2. `add_partitions` (before the first batch to a partition) and `add_offsets` put
   partitions and group offsets into the open transaction; a partition joins at its log
   end offset, which bounds its last stable offset (LSO) while the transaction is open.
3. `end` stores the decision (state `prepare_commit` or `prepare_abort`: from here the
   outcome is fixed), writes a COMMIT or ABORT marker to each partition (it takes an
   offset; engine.storage.volume), then in one catalog transaction makes the offsets the
   groups' committed ones (commit) or indexes the aborted ranges (abort), and forgets the
   partitions, which releases the LSO. A crash between the steps leaves the decision
   stored: `recover` (maintenance, and the next `init`) writes the markers again and
   completes it; a marker written twice is a harmless second gap.
4. An open transaction older than its timeout is aborted by `recover`, with the next
   epoch, so its producer is fenced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine import names
from engine.errors import (
    AccessDenied,
    IllegalState,
    InvalidArgument,
    NotFound,
    ProducerFenced,
    StorageError,
    UnknownTopic,
)
from engine.records import TopicInfo
from engine.storage.catalog import TopicRow
from engine.storage.transactions import TxnRow
from engine.storage.volume import BatchWrite

if TYPE_CHECKING:
    from engine.cluster import Cluster

STATES = (
    "empty",
    "ongoing",
    "prepare_commit",
    "prepare_abort",
    "complete_commit",
    "complete_abort",
)
OPEN_STATES = ("ongoing", "prepare_commit", "prepare_abort")
DEFAULT_TIMEOUT_MS = 60_000
# Kafka's transaction.max.timeout.ms: a longer timeout is refused.
MAX_TIMEOUT_MS = 900_000
MAX_ID_CHARS = 249


def check_settings(transactional_id: Any, timeout_ms: Any) -> None:
    """Refuse a transactional id or timeout Kafka would refuse."""
    if not isinstance(transactional_id, str) or not 0 < len(transactional_id) <= MAX_ID_CHARS:
        raise InvalidArgument(
            f"a transactional id is a text of 1 to {MAX_ID_CHARS} characters, not "
            f"{transactional_id!r}"
        )
    if (
        isinstance(timeout_ms, bool)
        or not isinstance(timeout_ms, int)
        or not 1 <= timeout_ms <= MAX_TIMEOUT_MS
    ):
        raise InvalidArgument(
            f"transaction_timeout_ms must be 1 to {MAX_TIMEOUT_MS}, got {timeout_ms!r}"
        )


# Kafka's names of the states (ListTransactions, DescribeTransactions, kafka-transactions.sh)
KAFKA_STATES = {
    "empty": "Empty",
    "ongoing": "Ongoing",
    "prepare_commit": "PrepareCommit",
    "prepare_abort": "PrepareAbort",
    "complete_commit": "CompleteCommit",
    "complete_abort": "CompleteAbort",
}


@dataclass(frozen=True)
class TransactionInfo:
    """A transactional id and its transaction (open, or how the last one ended)."""

    transactional_id: str
    producer_id: int
    epoch: int
    state: str  # STATES
    timeout_ms: int
    started_ms: int | None  # when the open transaction began
    partitions: list[tuple[str, int]]  # (full topic name, partition) of the open one
    principal: str  # the user the id belongs to

    @property
    def kafka_state(self) -> str:
        return KAFKA_STATES[self.state]

    @property
    def is_open(self) -> bool:
        """Begun and not yet complete: it holds back the LSO of its partitions."""
        return self.state in OPEN_STATES

    def age_ms(self, now_ms: int) -> int | None:
        """How long the open transaction has been running at `now_ms`."""
        return None if self.started_ms is None else max(0, now_ms - self.started_ms)


# (transaction, its age in ms) of each open transaction, as `Transactions.open` answers
OpenTransactions = list[tuple[TransactionInfo, int | None]]


class Transactions:
    """The transaction coordinator of one cluster, acting as its principal."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def init(self, transactional_id: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> tuple[int, int]:
        """(producer id, epoch) for a producer of `transactional_id`: Kafka's
        `init_transactions`. Fences every older producer of the id and finishes the
        transaction it left open."""
        check_settings(transactional_id, timeout_ms)
        cluster = self._cluster
        cluster.check_open()
        cluster.check_may_change("use transactions")
        tables = cluster.catalog.transactions
        owner = tables.get(transactional_id)
        user = cluster.principal.user
        if owner is not None and owner.principal != user and not cluster.principal.superuser:
            raise AccessDenied(
                f"transactional id {transactional_id!r} belongs to user {owner.principal!r}"
            )
        row, _ = tables.init(transactional_id, user, timeout_ms, cluster.clock.now_ms())
        if row.state in ("prepare_commit", "prepare_abort"):
            self._finish(row, commit=row.state == "prepare_commit")
        return row.producer_id, row.epoch

    def _current(self, transactional_id: str, producer_id: int, epoch: int) -> TxnRow:
        row = self._cluster.catalog.transactions.get(transactional_id)
        if row is None or row.producer_id != producer_id or row.epoch != epoch:
            raise ProducerFenced(
                f"transactional id {transactional_id!r} has a newer producer "
                f"(epoch {row.epoch if row else '?'}; this one has {epoch})"
            )
        return row

    def _topic(self, full: str) -> TopicRow:
        return self._cluster.catalog.topic(*names.split_full_name(full))

    def add_topic_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]]
    ) -> None:
        """Put (full topic name, partition) into the open transaction, each at its log end
        offset now (Kafka's AddPartitionsToTxn); the caller has checked produce_perm."""
        joined = []
        for full, partition in partitions:
            row = self._topic(full)
            if not 0 <= partition < row.partitions:
                raise UnknownTopic(f"{full} has no partition {partition}")
            end = self._cluster.partition_log(row.id, partition, full).end_offset()
            joined.append((row.id, partition, end))
        self.add_partitions(transactional_id, producer_id, epoch, joined)

    def add_topic_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group_id: str,
        offsets: list[tuple[str, int, int, str]],
    ) -> None:
        """`add_offsets` with (full topic name, partition, offset, metadata)."""
        rows = [(self._topic(full).id, p, o, m) for full, p, o, m in offsets]
        self.add_offsets(transactional_id, producer_id, epoch, group_id, rows)

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: list[tuple[int, int, int]],
    ) -> None:
        """Put (topic id, partition, log end offset now) into the open transaction."""
        self._current(transactional_id, producer_id, epoch)
        if not self._cluster.catalog.transactions.add_partitions(
            transactional_id, epoch, partitions, self._cluster.clock.now_ms()
        ):
            self._refused(transactional_id, producer_id, epoch)

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group_id: str,
        offsets: list[tuple[int, int, int, str]],
    ) -> None:
        """Put a group's offsets (topic id, partition, offset, metadata) into the open
        transaction: they become committed when it commits."""
        self._current(transactional_id, producer_id, epoch)
        if not self._cluster.catalog.transactions.add_offsets(
            transactional_id, epoch, group_id, offsets, self._cluster.clock.now_ms()
        ):
            self._refused(transactional_id, producer_id, epoch)

    def _refused(self, transactional_id: str, producer_id: int, epoch: int) -> None:
        row = self._current(transactional_id, producer_id, epoch)  # fenced: raises
        raise IllegalState(
            f"transaction {transactional_id!r} is {row.state.replace('_', ' ')}: it takes "
            "nothing more"
        )

    def end(self, transactional_id: str, producer_id: int, epoch: int, *, commit: bool) -> None:
        """Commit or abort the open transaction (markers, then offsets or the abort index)."""
        row = self._current(transactional_id, producer_id, epoch)
        prepare = "prepare_commit" if commit else "prepare_abort"
        if row.state == "empty" or row.state.startswith("complete"):
            return  # nothing was written in it: nothing to mark
        if row.state not in ("ongoing", prepare):
            raise IllegalState(
                f"transaction {transactional_id!r} is {row.state.replace('_', ' ')}: it cannot "
                f"be {'committed' if commit else 'aborted'}"
            )
        # A decision to commit is fsynced (with the offsets sent before it): from here a
        # machine crash cannot undo the commit, whose markers are then written again by
        # recovery. A lost decision to abort is only taken again.
        if not self._cluster.catalog.transactions.set_state(
            transactional_id, epoch, prepare, self._cluster.clock.now_ms(), sync=commit
        ):
            self._current(transactional_id, producer_id, epoch)  # fenced meanwhile: raises
        self._finish(row, commit=commit)

    def _finish(self, row: TxnRow, *, commit: bool) -> None:
        """Write the markers and complete a transaction whose decision is stored."""
        cluster = self._cluster
        catalog = cluster.catalog
        tables = catalog.transactions
        parts = tables.partitions(row.transactional_id)
        now = cluster.clock.now_ms()
        writes = []
        kept = []
        for topic_id, partition, first in parts:
            topic = catalog.topic_by_id(topic_id)
            if topic is None:
                continue  # deleted since: nothing to mark
            writes.append(
                BatchWrite(
                    topic.stream_id,
                    topic_id,
                    partition,
                    b"",
                    1,
                    now,
                    now,
                    0,
                    cluster.id,
                    producer=(row.producer_id, row.epoch, -1),
                    marker=commit,
                )  # fmt: skip
            )
            kept.append(first)
        if writes:
            # Not fsynced: the decision is (`end`). A machine crash that loses markers
            # leaves the decision stored, and recovery writes them again; until then, as
            # after any crash between the steps, the LSO holds (tests/engine/test_power_loss.py).
            cluster.appender().write(writes, sync=False)
            failed = [w.error for w in writes if w.error is not None]
            if any(not isinstance(e, UnknownTopic) for e in failed):
                raise StorageError(
                    f"transaction {row.transactional_id!r}: a marker could not be written "
                    f"({failed[0]}); it is finished at the next try"
                )
        aborted = [
            (w.topic_id, w.partition, w.offset, row.producer_id, first)
            for w, first in zip(writes, kept, strict=True)
            if w.offset is not None
        ]
        tables.complete(row.transactional_id, row.epoch, commit, [] if commit else aborted, now)
        cluster.appends.notify()  # read_committed readers waiting on the LSO

    # --- what operators see and do (plet txn, the wire's ListTransactions) ---------------------

    def _visible(self, row: TxnRow) -> bool:
        principal = self._cluster.principal
        return row.principal == principal.user or self._cluster.is_administrator

    def _info(self, row: TxnRow) -> TransactionInfo:
        catalog = self._cluster.catalog
        parts = []
        for topic_id, partition, _ in catalog.transactions.partitions(row.transactional_id):
            topic = catalog.topic_by_id(topic_id)
            if topic is not None:
                stream = catalog.stream_by_id(topic.stream_id).path
                parts.append((names.full_name(stream, topic.name), partition))
        return TransactionInfo(
            row.transactional_id, row.producer_id, row.epoch, row.state, row.timeout_ms,
            row.started_ms, parts, row.principal,
        )  # fmt: skip

    def list(self) -> list[TransactionInfo]:
        """The transactional ids this principal may see (its own; all for an
        administrator), by id."""
        self._cluster.check_open()
        rows = self._cluster.catalog.transactions.all()
        return [self._info(row) for row in rows if self._visible(row)]

    def stable_offsets(self, topic: TopicInfo) -> dict[int, int]:
        """The last stable offset (LSO) of each partition of `topic` (as `Cluster.topic`
        described it): the first offset of its earliest open transaction, else its log end
        offset. What a read_committed reader reads up to; the consoles show it."""
        self._cluster.check_open()
        topic_id = self._topic(topic.name).id
        opens = self._cluster.catalog.transactions.first_open_offsets(
            [(topic_id, p.partition) for p in topic.partitions]
        )
        return {
            p.partition: min(p.log_end_offset, opens.get((topic_id, p.partition), p.log_end_offset))
            for p in topic.partitions
        }

    def open(self) -> OpenTransactions:
        """The open transactions this principal may see, each with its age in ms by the
        cluster's clock (what the consoles list), oldest first."""
        now = self._cluster.clock.now_ms()
        found = [(info, info.age_ms(now)) for info in self.list() if info.is_open]
        return sorted(found, key=lambda pair: -(pair[1] or 0))

    def describe(self, transactional_id: str) -> TransactionInfo:
        self._cluster.check_open()
        row = self._cluster.catalog.transactions.get(transactional_id)
        if row is None or not self._visible(row):
            raise NotFound(f"no transactional id {transactional_id!r}")
        return self._info(row)

    def abort(self, transactional_id: str) -> TransactionInfo:
        """Abort the open transaction of an id (a hanging one an operator ends, Kafka's
        kafka-transactions.sh abort): its producer is fenced by the next epoch. A decided
        transaction is finished as decided; one not open is left as it is."""
        info = self.describe(transactional_id)
        self._cluster.check_may_change("abort transactions")
        tables = self._cluster.catalog.transactions
        if info.state == "ongoing":
            bumped, _ = tables.init(
                transactional_id, info.principal, info.timeout_ms, self._cluster.clock.now_ms()
            )
            self._finish(bumped, commit=False)
        elif info.state in ("prepare_commit", "prepare_abort"):
            row = tables.get(transactional_id)
            assert row is not None
            self._finish(row, commit=info.state == "prepare_commit")
        return self.describe(transactional_id)

    def recover(self) -> int:
        """Finish what crashed or timed out: a stored decision is completed, an open
        transaction older than its timeout aborted with the next epoch (fencing its
        producer). Returns how many were finished."""
        cluster = self._cluster
        tables = cluster.catalog.transactions
        now = cluster.clock.now_ms()
        done = 0
        for row in tables.all():
            if row.state in ("prepare_commit", "prepare_abort"):
                self._finish(row, commit=row.state == "prepare_commit")
                done += 1
            elif row.state == "ongoing" and now - (row.started_ms or now) > row.timeout_ms:
                bumped, _ = tables.init(row.transactional_id, row.principal, row.timeout_ms, now)
                self._finish(bumped, commit=False)
                done += 1
        return done
