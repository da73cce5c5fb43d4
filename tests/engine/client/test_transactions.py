"""Transactions in the engine (issue 25, item 1): a transactional `Producer` commits or aborts
messages across partitions and topics together with group offsets; a read_committed
`Consumer` reads up to the last stable offset and never sees an aborted message, a
read_uncommitted one sees everything; markers take offsets but hold no message; a newer
producer of the same transactional id fences the older one; a transaction left open by a
crashed process is aborted after its timeout, one whose commit was decided is completed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from engine.client.transactions import Transactions
from engine.clock import SYSTEM_CLOCK, FakeClock
from tests.timing import scaled

A, B = "/s:a", "/s:b"


@pytest.fixture
def cluster(tmp_path):
    with Cluster.open(tmp_path / "c", name="txn") as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(A, partitions=2)
        cluster.create_topic(B, partitions=1)
        yield cluster


def _read(cluster, isolation: str, *tps: TopicPartition) -> tuple[list[bytes], Consumer]:
    consumer = Consumer(
        cluster, enable_auto_commit=False, auto_offset_reset="earliest", isolation_level=isolation
    )
    consumer.assign(list(tps))
    values: list[bytes] = []
    while batch := consumer.poll(timeout_ms=300):
        values += [r.value for rs in batch.values() for r in rs]
    return values, consumer


def _values(cluster, isolation: str, *tps: TopicPartition) -> list[bytes]:
    values, consumer = _read(cluster, isolation, *tps)
    consumer.close()
    return values


def _producer(cluster, tid: str = "t1", **kw) -> Producer:
    producer = Producer(cluster, transactional_id=tid, **kw)
    producer.init_transactions()
    return producer


def test_a_commit_shows_everything_at_once_to_read_committed_readers(cluster):
    producer = _producer(cluster)
    a0, b0 = TopicPartition(A, 0), TopicPartition(B, 0)
    try:
        producer.begin_transaction()
        producer.send(A, b"a1", partition=0)
        producer.send(B, b"b1", partition=0)
        producer.flush()
        assert _values(cluster, "read_uncommitted", a0, b0) == [b"a1", b"b1"]
        assert _values(cluster, "read_committed", a0, b0) == []  # not yet
        probe = Consumer(cluster, isolation_level="read_committed")
        assert probe.end_offsets([a0]) == {a0: 0}  # the last stable offset
        probe.close()
        producer.commit_transaction()
    finally:
        producer.close()
    values, consumer = _read(cluster, "read_committed", a0, b0)
    try:
        assert sorted(values) == [b"a1", b"b1"]
        # the marker took offset 1 and holds nothing: the reader is at the end
        assert consumer.position(a0) == 2 == consumer.end_offsets([a0])[a0]
    finally:
        consumer.close()


def test_an_abort_hides_its_messages_but_not_others_written_meanwhile(cluster):
    a0 = TopicPartition(A, 0)
    producer = _producer(cluster)
    plain = Producer(cluster, acks="all")
    try:
        producer.begin_transaction()
        producer.send(A, b"aborted-1", partition=0)
        producer.flush()
        plain.send(A, b"plain", partition=0).get(timeout=scaled(30))
        producer.send(A, b"aborted-2", partition=0)
        # the open transaction holds read_committed readers before its first message
        assert _values(cluster, "read_committed", a0) == []
        producer.abort_transaction()
        assert _values(cluster, "read_committed", a0) == [b"plain"]
        producer.begin_transaction()
        producer.send(A, b"committed", partition=0)
        producer.commit_transaction()
    finally:
        producer.close()
        plain.close()
    assert _values(cluster, "read_committed", a0) == [b"plain", b"committed"]
    assert _values(cluster, "read_uncommitted", a0) == [
        b"aborted-1",
        b"plain",
        b"aborted-2",
        b"committed",
    ]


def test_offsets_sent_to_a_transaction_are_committed_only_by_its_commit(cluster):
    a0 = TopicPartition(A, 0)
    producer = _producer(cluster)
    group = Consumer(cluster, group_id="g", enable_auto_commit=False)
    try:
        producer.begin_transaction()
        producer.send(B, b"out", partition=0)
        producer.send_offsets_to_transaction({a0: 7}, "g")
        assert group.committed(a0) is None
        producer.abort_transaction()
        assert group.committed(a0) is None
        producer.begin_transaction()
        producer.send(B, b"out", partition=0)
        producer.send_offsets_to_transaction({a0: 9}, "g")
        producer.commit_transaction()
        assert group.committed(a0) == 9
    finally:
        producer.close()
        group.close()


def test_a_newer_producer_of_the_same_id_fences_the_older_and_aborts_its_transaction(cluster):
    a0 = TopicPartition(A, 0)
    zombie = _producer(cluster, "same")
    try:
        zombie.begin_transaction()
        zombie.send(A, b"zombie", partition=0)
        zombie.flush()
        newer = _producer(cluster, "same")  # its init aborts the zombie's transaction
        try:
            newer.begin_transaction()
            newer.send(A, b"newer", partition=0)
            newer.commit_transaction()
        finally:
            newer.close()
        zombie.send(A, b"late", partition=0)
        with pytest.raises(errors.InvalidProducerEpoch):
            zombie.commit_transaction()
    finally:
        zombie.close()
    assert _values(cluster, "read_committed", a0) == [b"newer"]
    assert b"late" not in _values(cluster, "read_uncommitted", a0)


def test_sending_outside_a_transaction_is_refused(cluster):
    producer = Producer(cluster, transactional_id="t")
    try:
        with pytest.raises(errors.IllegalState, match="init_transactions"):
            producer.send(A, b"x")
        producer.init_transactions()
        with pytest.raises(errors.IllegalState, match="begin_transaction"):
            producer.send(A, b"x")
        with pytest.raises(errors.IllegalState, match="no transaction is open"):
            producer.commit_transaction()
    finally:
        producer.close()
    with pytest.raises(errors.InvalidArgument, match="transaction_timeout_ms"):
        Producer(cluster, transactional_id="t", transaction_timeout_ms=0)


def test_a_transaction_left_open_by_a_killed_process_is_aborted_after_its_timeout(tmp_path):
    path = tmp_path / "c"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(A, partitions=1)
    script = textwrap.dedent(
        f"""
        import os
        from engine import Cluster, Producer
        c = Cluster.open({str(path)!r})
        p = Producer(c, transactional_id="crash", transaction_timeout_ms=60000)
        p.init_transactions()
        p.begin_transaction()
        p.send({A!r}, b"never committed", partition=0)
        p.flush()
        os._exit(9)  # as kill -9: no commit, no abort, nothing closed
        """
    )
    done = subprocess.run([sys.executable, "-c", script], timeout=scaled(60))
    assert done.returncode == 9
    clock = FakeClock(now_ms=SYSTEM_CLOCK.now_ms())  # the killed process wrote real times
    with Cluster.open(path, clock=clock) as cluster:
        a0 = TopicPartition(A, 0)
        assert _values(cluster, "read_uncommitted", a0) == [b"never committed"]
        coordinator = Transactions(cluster)
        assert coordinator.recover() == 0  # its timeout has not passed
        assert _values(cluster, "read_committed", a0) == []
        clock.advance(ms=10 * 60_000)
        assert coordinator.recover() == 1
        assert _values(cluster, "read_committed", a0) == []
        plain = Producer(cluster, acks="all")
        plain.send(A, b"after", partition=0).get(timeout=scaled(30))
        plain.close()
        assert _values(cluster, "read_committed", a0) == [b"after"]


def test_a_decided_commit_is_completed_by_the_next_init_after_a_crash(cluster):
    a0 = TopicPartition(A, 0)
    producer = _producer(cluster, "decided")
    try:
        producer.begin_transaction()
        producer.send(A, b"kept", partition=0)
        producer.flush()
        pid, epoch = producer._producer_id
        # the decision is stored, then the process dies before any marker is written
        assert cluster.catalog.transactions.set_state("decided", epoch, "prepare_commit", 1)
        assert _values(cluster, "read_committed", a0) == []
    finally:
        producer._in_txn = False  # as a crashed process: no abort on close
        producer.close()
    _producer(cluster, "decided").close()  # its init completes the commit
    assert _values(cluster, "read_committed", a0) == [b"kept"]


def test_operators_list_describe_and_abort_a_hanging_transaction(cluster):
    from click.testing import CliRunner

    from engine.cli import cli

    a0 = TopicPartition(A, 0)
    hanging = _producer(cluster, "hanging")
    hanging.begin_transaction()
    hanging.send(A, b"stuck", partition=0)
    hanging.flush()
    runner = CliRunner()
    listed = runner.invoke(cli, ["txn", "list", "--cluster", str(cluster.path)])
    assert listed.exit_code == 0, listed.output
    assert "hanging" in listed.output and "Ongoing" in listed.output
    described = runner.invoke(cli, ["txn", "describe", "hanging", "--cluster", str(cluster.path)])
    assert described.exit_code == 0, described.output
    assert f"{A} partition 0" in described.output
    aborted = runner.invoke(cli, ["txn", "abort", "hanging", "--cluster", str(cluster.path)])
    assert aborted.exit_code == 0, aborted.output
    assert "CompleteAbort (epoch 1)" in aborted.output
    missing = runner.invoke(cli, ["txn", "describe", "nope", "--cluster", str(cluster.path)])
    assert missing.exit_code == 1 and "no transactional id 'nope'" in missing.output
    hanging.send(A, b"after the abort", partition=0)
    with pytest.raises(errors.InvalidProducerEpoch):
        hanging.commit_transaction()  # fenced by the operator's abort
    hanging.close()
    assert _values(cluster, "read_committed", a0) == []
    # another user sees none of it
    from engine import Principal

    bob = Transactions(cluster.as_principal(Principal("bob")))
    assert bob.list() == []
    with pytest.raises(errors.NotFound):
        bob.describe("hanging")


def test_compaction_keeps_committed_values_over_aborted_ones_and_leaves_open_ones(tmp_path):
    with Cluster.open(tmp_path / "c") as cluster:
        cluster.create_stream("/s", compact=True)
        cluster.create_topic(A, partitions=1)
        a0 = TopicPartition(A, 0)
        plain = Producer(cluster, acks="all")
        plain.send(A, b"k-v1", key=b"k", partition=0).get(timeout=scaled(30))
        plain.send(A, b"j-v1", key=b"j", partition=0).get(timeout=scaled(30))
        producer = _producer(cluster)
        producer.begin_transaction()
        producer.send(A, b"k-aborted", key=b"k", partition=0)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(A, b"j-committed", key=b"j", partition=0)
        producer.commit_transaction()
        plain.send(A, b"k-v2", key=b"k", partition=0).get(timeout=scaled(30))
        producer.begin_transaction()
        producer.send(A, b"k-open", key=b"k", partition=0)
        producer.flush()
        plain.send(A, b"j-late", key=b"j", partition=0).get(timeout=scaled(30))
        plain.close()
        before = _values(cluster, "read_uncommitted", a0)
        assert before == [
            b"k-v1",
            b"j-v1",
            b"k-aborted",
            b"j-committed",
            b"k-v2",
            b"k-open",
            b"j-late",
        ]

        report = cluster.compact()
        # j-v1 is superseded by the committed j; k-v1 by k-v2 (not by the aborted k); the
        # aborted batch is removed but for the producer's last batch, which is kept whole;
        # nothing at or past the open transaction's first offset is looked at
        assert report.messages_removed == 3
        assert _values(cluster, "read_uncommitted", a0) == [
            b"j-committed",
            b"k-v2",
            b"k-open",
            b"j-late",
        ]
        assert _values(cluster, "read_committed", a0) == [b"j-committed", b"k-v2"]
        producer.commit_transaction()
        producer.close()
        assert _values(cluster, "read_committed", a0) == [
            b"j-committed",
            b"k-v2",
            b"k-open",
            b"j-late",
        ]
        consumer = Consumer(cluster, enable_auto_commit=False)
        try:  # the markers keep their offsets
            assert [m[0] for m in consumer.markers(a0, 0, 10)] == [3, 5, 9]
        finally:
            consumer.close()


def test_retention_drops_an_aborted_transaction_with_its_index_entry(tmp_path):
    with Cluster.open(tmp_path / "c", partitionlet_bytes=1024) as cluster:
        cluster.create_stream("/s", ttl=60)
        cluster.create_topic(A, partitions=1)
        a0 = TopicPartition(A, 0)
        old = 1_600_000_000_000  # 2020: past the ttl
        producer = _producer(cluster)
        producer.begin_transaction()
        producer.send(A, b"x" * 2000, partition=0, timestamp_ms=old)
        producer.abort_transaction()
        producer.close()
        plain = Producer(cluster, acks="all")
        for i in range(2):
            plain.send(A, b"y" * 2000, partition=0, timestamp_ms=old + i).get(timeout=scaled(30))
        plain.send(A, b"new", partition=0).get(timeout=scaled(30))
        plain.close()
        topic_id = cluster.catalog.topic("/s", "a").id
        tables = cluster.catalog.transactions
        txn = tables.get("t1")
        assert txn is not None
        # the aborted batch at offset 0, its marker at 1
        assert tables.aborted(topic_id, 0, 0, 2**62) == [(txn.producer_id, 0, 1)]
        assert cluster.enforce_retention().partitionlets_dropped >= 1
        assert tables.aborted(topic_id, 0, 0, 2**62) == []
        assert _values(cluster, "read_committed", a0) == [b"new"]


def test_consoles_see_the_lso_open_transactions_aborted_records_and_markers(cluster):
    """What both consoles show (issue 25): a partition's LSO, the open transactions with
    their age, which browsed records were aborted and where the markers are."""
    from engine.client.browse import OLDEST, Browser, Query

    a0 = TopicPartition(A, 0)
    committer, aborter, opener = (_producer(cluster, tid) for tid in ("c", "x", "o"))
    try:
        for producer, values in ((committer, [b"c1", b"c2"]), (aborter, [b"x1"])):
            producer.begin_transaction()
            for v in values:
                producer.send(A, v, partition=0)
            producer.flush()
        committer.commit_transaction()  # c1 0, c2 1, x1 2, COMMIT 3
        aborter.abort_transaction()  # ABORT 4
        opener.begin_transaction()
        opener.send(A, b"o1", partition=0)  # 5, open
        opener.flush()
        txns = Transactions(cluster)
        assert txns.stable_offsets(cluster.topic(A)) == {0: 5, 1: 0}
        [(info, age)] = txns.open()
        assert (info.transactional_id, info.partitions, info.is_open) == ("o", [(A, 0)], True)
        assert age is not None and age >= 0
        probe = Consumer(cluster)
        assert probe.aborted_ranges(a0, 0, 6) == [(2, 2)]
        assert probe.aborted_ranges(a0, 0, 2) == []
        assert [m[0] for m in probe.markers(a0, 0, 6)] == [3, 4]
        probe.close()
        with Browser(cluster, A, [0]) as browser:
            page = browser.page(Query(A, (0,), OLDEST))
            marks = browser.marks(page.records)
            assert [r.value for r in page.records if marks.is_aborted(r)] == [b"x1"]
            rows = marks.rows(page.records, forward=True)
            shown = [r.kind if hasattr(r, "kind") else r.value for r in rows]
            assert shown == [b"c1", b"c2", b"x1", "COMMIT", "ABORT", b"o1"]
            newest = marks.rows(list(reversed(page.records)), forward=False)
            assert [r.kind if hasattr(r, "kind") else r.value for r in newest] == list(
                reversed(shown)
            )
    finally:
        for producer in (committer, aborter, opener):
            producer.close()


def test_a_followed_tail_marks_aborted_records_and_the_markers_that_arrived(cluster):
    """`follow` (the consoles' live tail) hands each batch with its marks, markers that
    arrived after the records before them included: a COMMIT written after c1 was shown
    comes with the next batch, not lost between two batches."""
    import queue
    import threading

    from engine.client.browse import OLDEST, Browser, Query, follow

    plain = Producer(cluster)
    plain.send(A, b"p0", partition=0).get(timeout=scaled(10))
    with Browser(cluster, A, [0]) as browser:
        tail = browser.page(Query(A, (0,), OLDEST)).tail
    batches: queue.Queue = queue.Queue()
    go_on = threading.Event()
    stop = threading.Event()

    def arrived(records, marks) -> None:
        rows = marks.rows(records, forward=True)
        batches.put(
            [
                r.kind
                if hasattr(r, "kind")
                else ("aborted " if marks.is_aborted(r) else "") + r.value.decode()
                for r in rows
            ]
        )
        go_on.wait(scaled(30))  # the next batch waits for the test's writes
        go_on.clear()

    follower = threading.Thread(
        target=follow,
        args=(cluster, A, tail),
        kwargs={
            "partitions": [0],
            "on_records": arrived,
            "cancelled": stop.is_set,
            "poll_ms": 20,
        },
    )
    follower.start()
    committer, aborter = _producer(cluster, "c"), _producer(cluster, "x")
    try:
        committer.begin_transaction()
        committer.send(A, b"c1", partition=0)  # 1
        committer.flush()
        assert batches.get(timeout=scaled(30)) == ["c1"]
        committer.commit_transaction()  # COMMIT 2, after c1 was handed out
        plain.send(A, b"p1", partition=0).get(timeout=scaled(10))  # 3
        aborter.begin_transaction()
        aborter.send(A, b"x1", partition=0)  # 4
        aborter.flush()
        aborter.abort_transaction()  # ABORT 5
        plain.send(A, b"p2", partition=0).get(timeout=scaled(10))  # 6
        go_on.set()
        assert batches.get(timeout=scaled(30)) == ["COMMIT", "p1", "aborted x1", "ABORT", "p2"]
    finally:
        stop.set()
        go_on.set()
        follower.join(scaled(30))
        for producer in (plain, committer, aborter):
            producer.close()
