"""Replication of transactions (issue 25, item 4): batches keep their producer fields,
markers their offsets, the aborted index goes along, and a partition is copied up to its
last stable offset, so a replica's read_committed readers see the source's commits, at the
same offsets, whether the target is a directory or another cluster's `plet web`."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from engine import Cluster, Consumer, Producer, Replicator, TopicPartition
from engine.replication.http import HttpTarget
from engine.replication.reading import batch_at, source_batches
from engine.storage.transactions import TransactionTables
from tests.engine.replication.test_replication_http import served

T = "/s:t"
TP = TopicPartition(T, 0)


@contextmanager
def linked(a: Cluster, b: Cluster, how: str):
    """A link from a's /s to b, a directory or b's web app."""
    if how == "directory":
        a.add_replica("/s", str(b.path))
        yield
        return
    with served(b.path) as port:
        a.add_replica("/s", f"http://{b.create_replication_token('/s')}@127.0.0.1:{port}")
        yield


def settle(*clusters: Cluster) -> None:
    replicators = [Replicator(c) for c in clusters]
    try:
        for _ in range(30):
            moved = sum(r.run_once() for r in replicators)
            errors = [r.error for c in clusters for r in c.replicas("/s") if r.error]
            assert not errors
            if not moved:
                return
    finally:
        for r in replicators:
            r.close()
    raise AssertionError("replication did not settle")


def records(cluster: Cluster, isolation: str) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        cluster, enable_auto_commit=False, auto_offset_reset="earliest", isolation_level=isolation
    )
    consumer.assign([TP])
    got: list[tuple[int, bytes]] = []
    while batch := consumer.poll(timeout_ms=300):
        got += [(r.offset, r.value) for rs in batch.values() for r in rs]
    consumer.close()
    return got


def ends(cluster: Cluster, isolation: str) -> int:
    consumer = Consumer(cluster, enable_auto_commit=False, isolation_level=isolation)
    try:
        return consumer.end_offsets([TP])[TP]
    finally:
        consumer.close()


def markers(cluster: Cluster) -> list[tuple[int, bool]]:
    consumer = Consumer(cluster, enable_auto_commit=False)
    try:
        return [(o, commit) for o, _, _, commit in consumer.markers(TP, 0, 1000)]
    finally:
        consumer.close()


def producer_fields(cluster: Cluster) -> list[tuple]:
    topic = cluster.catalog.topic("/s", "t")
    return [
        (b.base_offset, b.producer_id, b.producer_epoch, b.base_seq, b.marker)
        for b in source_batches(cluster, topic.id, 0, 0, 1000, 2**53)
    ]


def every_producer_field(cluster: Cluster) -> list[tuple]:
    """`producer_fields` of every partitionlet (source_batches reads one at a time)."""
    topic = cluster.catalog.topic("/s", "t")
    found: list[tuple] = []
    position = 0
    while got := source_batches(cluster, topic.id, 0, position, 1000, 2**53):
        found += [
            (b.base_offset, b.producer_id, b.producer_epoch, b.base_seq, b.marker) for b in got
        ]
        position = got[-1].last_offset + 1
    return found


def send(producer: Producer, *values: str) -> None:
    for v in values:
        producer.send(T, v.encode(), partition=0)
    producer.flush()


@pytest.fixture
def pair(tmp_path):
    with Cluster.open(tmp_path / "a", name="a") as a, Cluster.open(tmp_path / "b", name="b") as b:
        a.create_stream("/s", ttl=0)
        a.create_topic(T, partitions=1)
        yield a, b


@pytest.mark.parametrize("how", ["directory", "http"])
def test_read_committed_readers_of_a_replica_see_the_sources_commits(pair, how):
    a, b = pair
    plain = Producer(a)
    send(plain, "p0", "p1")
    committed = Producer(a, transactional_id="c")
    committed.init_transactions()
    committed.begin_transaction()
    send(committed, "c0", "c1")
    committed.commit_transaction()
    aborted = Producer(a, transactional_id="x")
    aborted.init_transactions()
    aborted.begin_transaction()
    send(aborted, "x0", "x1")
    aborted.abort_transaction()
    idempotent = Producer(a, enable_idempotence=True)
    send(idempotent, "i0")
    open_txn = Producer(a, transactional_id="o")
    open_txn.init_transactions()
    open_txn.begin_transaction()
    send(open_txn, "o0")
    send(plain, "after")  # behind the open transaction: not stable yet
    lso = ends(a, "read_committed")
    assert lso < ends(a, "read_uncommitted")
    with linked(a, b, how):
        settle(a)
        # A replica holds what is decided: up to the source's last stable offset, at the
        # same offsets, markers included; nothing of the open transaction is there.
        assert ends(b, "read_uncommitted") == ends(b, "read_committed") == lso
        stable = [r for r in records(a, "read_committed")]
        assert records(b, "read_committed") == stable
        assert [v for _, v in stable] == [b"p0", b"p1", b"c0", b"c1", b"i0"]
        # read_uncommitted shows the aborted ones, at the source's offsets
        below = [r for r in records(a, "read_uncommitted") if r[0] < lso]
        assert records(b, "read_uncommitted") == below
        assert markers(b) == markers(a) == [(4, True), (7, False)]
        assert producer_fields(b) == [f for f in producer_fields(a) if f[0] < lso]
        assert len({f[1] for f in producer_fields(b)} - {None}) == 3  # c, x and i
        # The open transaction commits at the source: the rest follows, and shows.
        open_txn.commit_transaction()
        settle(a)
        assert records(b, "read_committed") == records(a, "read_committed")
        assert [v for _, v in records(b, "read_committed")][-2:] == [b"o0", b"after"]
        assert ends(b, "read_committed") == ends(a, "read_uncommitted")
        assert markers(b) == markers(a)
        assert producer_fields(b) == producer_fields(a)
    for p in (plain, committed, aborted, idempotent, open_txn):
        p.close()


def test_a_replicas_own_producers_are_not_mistaken_for_the_sources(pair):
    """Producer ids are each cluster's own: a producer of the replica whose id a source's
    producer had too writes after the replicated batches, and in a cycle everything goes
    round once."""
    a, b = pair
    producer = Producer(a, transactional_id="c")
    producer.init_transactions()
    producer.begin_transaction()
    send(producer, "a0", "a1")
    producer.commit_transaction()
    producer.close()
    a.add_replica("/s", str(b.path))
    b.add_replica("/s", str(a.path))
    settle(a, b)
    local = Producer(b, enable_idempotence=True)
    send(local, "b0")
    local.close()
    local = Producer(b, transactional_id="c")  # the same transactional id, b's own
    local.init_transactions()
    local.begin_transaction()
    send(local, "b1")
    local.commit_transaction()
    local.close()
    settle(a, b)
    values = [b"a0", b"a1", b"b0", b"b1"]
    assert [v for _, v in records(a, "read_committed")] == values
    assert records(b, "read_committed") == records(a, "read_committed")
    assert markers(a) == markers(b)
    assert all(not r.conflict for c in (a, b) for r in c.replicas("/s"))
    # b's idempotent producer had the id a's transactional one has: another producer. The
    # batches are found by their offsets: a0 and a1 may be one batch or two (the sender
    # may wake between the two sends)
    offsets = {value: offset for offset, value in records(b, "read_committed")}
    fields = {f[0]: f for f in producer_fields(b)}
    first, local = fields[offsets[b"a0"]], fields[offsets[b"b0"]]
    assert first[1] == local[1] and first[0] == 0 and local[0] == offsets[b"a1"] + 2


def test_a_target_without_the_transactions_feature_gets_batches_as_before(pair):
    """To a server from before transactions (its `info` names no "transactions" feature) a
    source sends 9-field batches and no markers, and counts the markers as done."""
    a, b = pair
    producer = Producer(a, transactional_id="c")
    producer.init_transactions()
    producer.begin_transaction()
    send(producer, "c0")
    producer.commit_transaction()
    producer.begin_transaction()
    send(producer, "c1")
    producer.commit_transaction()
    producer.close()
    topic = a.catalog.topic("/s", "t")
    items = source_batches(a, topic.id, 0, 0, 100, 2**53)
    assert [i.marker for i in items] == [None, True, None, True]
    with served(b.path) as port:
        target = HttpTarget(f"http://127.0.0.1:{port}", b.create_replication_token("/s"))
        assert target.transactions
        target.transactions = False  # as an older server answers
        target.create_stream("/s", {}, b.principal.user)
        target.ensure_topics("/s", [("t", 1, {})])
        result = target.apply("/s", "t", 0, items, [])
    assert (result.done, result.messages) == (4, 2)
    assert markers(b) == []
    assert [f[1:] for f in producer_fields(b)] == [(None, None, None, None)] * 2
    assert [v for _, v in records(b, "read_committed")] == [b"c0", b"c1"]


def test_a_chain_passes_the_aborted_ranges_and_markers_on(pair, tmp_path):
    """a -> b -> c: c learns a's aborted transaction from b, and its markers keep their
    origin (a's), so c sends none of them back to a cycle's a."""
    a, b = pair
    with Cluster.open(tmp_path / "c", name="c") as c:
        producer = Producer(a, transactional_id="x")
        producer.init_transactions()
        producer.begin_transaction()
        send(producer, "x0")
        producer.abort_transaction()
        producer.begin_transaction()
        send(producer, "c0")
        producer.commit_transaction()
        producer.close()
        a.add_replica("/s", str(b.path))
        b.add_replica("/s", str(c.path))
        c.add_replica("/s", str(a.path))
        settle(a, b, c)
        assert [v for _, v in records(c, "read_committed")] == [b"c0"]
        assert [v for _, v in records(c, "read_uncommitted")] == [b"x0", b"c0"]
        assert markers(c) == markers(b) == markers(a) == [(1, False), (3, True)]
        topic = c.catalog.topic("/s", "t")
        assert {m.origin for m in source_batches(c, topic.id, 0, 0, 100, 2**53)} == {a.id}
        # a marker answers the replicator's comparison of the last common offset
        at_a = batch_at(a, a.catalog.topic("/s", "t").id, 0, 3)
        assert batch_at(c, topic.id, 0, 3) == at_a == (3, 3, a.id)
        assert all(not r.conflict and not r.error for x in (a, b, c) for r in x.replicas("/s"))


def test_a_transaction_aborted_while_the_replicator_reads_is_never_shown(pair, monkeypatch):
    """The replicator reads a partition's end, then its open transactions: one that aborts
    in between (its marker past the end read) is no longer open, so its batch is copied
    without its marker; its aborted range, indexed at the source when it stopped being
    open, goes along, so a read_committed reader of the replica never sees the batch."""
    a, b = pair
    producer = Producer(a, transactional_id="x")
    producer.init_transactions()
    producer.begin_transaction()
    send(producer, "x0")
    first_open = TransactionTables.first_open_offsets

    def abort_first(self, keys):
        monkeypatch.setattr(TransactionTables, "first_open_offsets", first_open)  # once
        producer.abort_transaction()
        return first_open(self, keys)

    a.add_replica("/s", str(b.path))
    monkeypatch.setattr(TransactionTables, "first_open_offsets", abort_first)
    with Replicator(a) as replicator:
        assert replicator.run_once() == 1  # x0, without its marker
        assert markers(b) == []
        assert records(b, "read_uncommitted") == [(0, b"x0")]
        assert records(b, "read_committed") == []
        replicator.run_once()
    assert markers(b) == markers(a) == [(1, False)]
    assert records(b, "read_committed") == []
    producer.close()


def test_a_replica_lists_only_its_own_producers(pair):
    """DescribeProducers on a replica: the replicated batches carry the source's producer
    ids, which name other producers there, even where the replica issued the same id."""
    a, b = pair
    producer = Producer(a, enable_idempotence=True)
    send(producer, "a0")
    producer.close()
    a.add_replica("/s", str(b.path))
    settle(a)
    source_id = producer_fields(b)[0][1]
    assert b.init_producer_id()[0] == source_id  # b's first id is the one a issued
    for cluster, listed in ((a, [source_id]), (b, [])):
        consumer = Consumer(cluster, enable_auto_commit=False)
        try:
            assert [s.producer_id for s in consumer.producers(TP)] == listed
        finally:
            consumer.close()


@pytest.mark.parametrize("how", ["directory", "http"])
def test_archived_transactions_replicate_as_live_ones(tmp_path, how):
    """Partitionlets archived at the source (their batches read back from Parquet) reach a
    replica with their producer fields, markers and aborted ranges, so its read_committed
    readers leave the aborted messages out as the source's do."""
    old = 1_600_000_000_000  # 2020: older than archive_after
    with (
        Cluster.open(tmp_path / "a", name="a", partitionlet_bytes=200) as a,
        Cluster.open(tmp_path / "b", name="b") as b,
    ):
        a.create_stream("/s", ttl=0, archive_after=60)
        a.create_topic(T, partitions=1)
        plain = Producer(a)
        txn = Producer(a, transactional_id="t")
        txn.init_transactions()
        stamp = iter(range(old, old + 1000))
        for name, end in (("c1", "commit"), ("a1", "abort"), ("c2", "commit")):
            txn.begin_transaction()
            for k in range(3):
                txn.send(T, f"{name}-{k}".encode(), partition=0, timestamp_ms=next(stamp))
                plain.send(T, f"p-{name}-{k}".encode(), partition=0, timestamp_ms=next(stamp))
                plain.flush()
                txn.flush()
            getattr(txn, f"{end}_transaction")()
        send(plain, "last")
        archived = {p.id for p in a.archive().archived}
        tiers = {p.id: p.tier for p in a.partitionlets(T)}
        assert len(archived) >= 2 and all(tiers[i] == "archive" for i in archived)
        with linked(a, b, how):
            settle(a)
        committed = [v for _, v in records(b, "read_committed")]
        assert committed == [v for _, v in records(a, "read_committed")]
        assert [v for v in committed if not v.startswith(b"p-")] == [
            b"c1-0", b"c1-1", b"c1-2", b"c2-0", b"c2-1", b"c2-2", b"last"
        ]  # fmt: skip
        assert records(b, "read_uncommitted") == records(a, "read_uncommitted")
        assert b"a1-1" in [v for _, v in records(b, "read_uncommitted")]
        assert markers(b) == markers(a) and [m[1] for m in markers(a)] == [True, False, True]
        assert every_producer_field(b) == every_producer_field(a)
        assert {f[1] for f in every_producer_field(b)} == {None, 1}  # the plain ones, t's
        assert ends(b, "read_committed") == ends(a, "read_committed")
        plain.close()
        txn.close()
