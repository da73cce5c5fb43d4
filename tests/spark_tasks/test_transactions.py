"""Spark replays read committed data by default (issue 25, item 4): the `partitionlet` data
source and `history.load` leave aborted transactions out and stop at the last stable
offset; `isolationLevel=read_uncommitted` shows everything; archived history reads the
same (real Spark, real files)."""

from __future__ import annotations

import pytest

from engine import Cluster, Consumer, Producer, TopicPartition
from spark_tasks import history
from spark_tasks.scan import OptionError
from tests.timing import scaled

T = "/s:t"
OLD = 1_600_000_000_000  # 2020: older than archive_after


def _send(producer: Producer, value: bytes, i: int) -> None:
    producer.send(T, value, partition=0, timestamp_ms=OLD + i).get(timeout=scaled(30))


def _read(spark, path, **options) -> list[tuple[int, bytes]]:
    reader = spark.read.format("partitionlet").option("cluster", str(path)).option("topic", T)
    for key, value in options.items():
        reader = reader.option(key, value)
    return [(r.offset, bytes(r.value)) for r in reader.load().orderBy("offset").collect()]


def _history(spark, path, **options) -> list[tuple[int, bytes]]:
    df = history.load(spark, {"cluster": str(path), "topic": T, **options})
    return [(r.offset, bytes(r.value)) for r in df.orderBy("offset").collect()]


def test_spark_reads_committed_data_by_default_live_and_archived(spark, tmp_path):
    path = tmp_path / "c"
    with Cluster.open(path, partitionlet_bytes=200) as cluster:
        cluster.create_stream("/s", archive_after=60, ttl=0)
        cluster.create_topic(T, partitions=1)
        plain = Producer(cluster, acks="all")
        txn = Producer(cluster, transactional_id="spark-t")
        txn.init_transactions()
        i = 0
        for name, end in (("committed", "commit"), ("aborted", "abort")):
            txn.begin_transaction()
            for k in range(3):
                _send(txn, f"{name}-{k}".encode(), i := i + 1)
                _send(plain, f"plain-{name}-{k}".encode(), i := i + 1)
            getattr(txn, f"{end}_transaction")()
        _send(plain, b"before-open", i := i + 1)
        txn.begin_transaction()
        _send(txn, b"open-0", i := i + 1)
        _send(plain, b"after-open", i + 1)
        plain.close()
        consumer = Consumer(cluster, isolation_level="read_committed")
        lso = consumer.end_offsets([TopicPartition(T, 0)])[TopicPartition(T, 0)]
        consumer.close()

        def answers() -> dict:
            return {
                "default": _read(spark, path),
                "committed": _read(spark, path, isolationLevel="read_committed"),
                "uncommitted": _read(spark, path, isolationLevel="read_uncommitted"),
                "history": _history(spark, path),
                "history uncommitted": _history(spark, path, isolationLevel="read_uncommitted"),
            }

        live = answers()
        values = [v for _, v in live["default"]]
        assert values == [
            b"committed-0", b"plain-committed-0", b"committed-1", b"plain-committed-1",
            b"committed-2", b"plain-committed-2", b"plain-aborted-0", b"plain-aborted-1",
            b"plain-aborted-2", b"before-open",
        ]  # fmt: skip
        assert all(o < lso for o, _ in live["default"])  # stops before the open one
        assert live["committed"] == live["history"] == live["default"]
        every = [v for _, v in live["uncommitted"]]
        assert b"aborted-1" in every and every[-2:] == [b"open-0", b"after-open"]
        assert live["history uncommitted"] == live["uncommitted"]

        report = cluster.archive()
        assert report.archived  # those holding the aborted transaction among them
        tiers = {p.tier for p in cluster.partitionlets(T)}
        assert tiers == {"archive", "live"}
        assert answers() == live

        with pytest.raises(Exception, match="isolationLevel"):
            _read(spark, path, isolationLevel="serializable")
        with pytest.raises(OptionError, match="isolationLevel"):
            history.load(spark, {"cluster": str(path), "topic": T, "isolationLevel": "dirty"})
        txn.abort_transaction()
        txn.close()


def test_a_streaming_read_stops_at_the_last_stable_offset_unless_read_uncommitted(tmp_path):
    from spark_tasks.source import StreamReader

    path = tmp_path / "c"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(T, partitions=1)
        plain = Producer(cluster, acks="all")
        _send(plain, b"before", 0)
        txn = Producer(cluster, transactional_id="stream-t")
        txn.init_transactions()
        txn.begin_transaction()
        _send(txn, b"open", 1)
        _send(plain, b"after", 2)
        plain.close()
        options = {"cluster": str(path), "topic": T, "startingOffsets": "earliest"}
        committed = StreamReader(options)
        uncommitted = StreamReader({**options, "isolationLevel": "read_uncommitted"})
        assert committed.reportLatestOffset() == {T: {"0": 1}}  # the open transaction's first
        assert uncommitted.reportLatestOffset() == {T: {"0": 3}}
        txn.commit_transaction()  # its marker takes offset 3
        txn.close()
        assert committed.reportLatestOffset() == {T: {"0": 4}}


def test_a_replay_copies_committed_data_unless_asked_for_read_uncommitted(spark, tmp_path):
    """`isolation_level` of a replay job (the same in `plet replay --isolation-level`, the
    web form and the terminal dialog): read_committed by default, as the data source."""
    from spark_tasks import jobs, replays

    path = tmp_path / "c"
    with Cluster.open(path) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic(T, partitions=1)
        txn = Producer(cluster, transactional_id="replayed")
        txn.init_transactions()
        for value, end in ((b"kept", "commit"), (b"dropped", "abort")):
            txn.begin_transaction()
            txn.send(T, value, partition=0).get(timeout=scaled(30))
            getattr(txn, f"{end}_transaction")()
        txn.close()
    for target, level in (("/s:committed", None), ("/s:everything", "read_uncommitted")):
        params = jobs.check_params(
            "copy", {"source": T, "target": target, "isolation_level": level}
        )
        replays.copy(spark, str(path), params)
    with Cluster.open(path) as cluster:
        got = {}
        for target in ("/s:committed", "/s:everything"):
            consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
            consumer.assign([TopicPartition(target, 0)])
            got[target] = []
            while batch := consumer.poll(timeout_ms=500):
                got[target] += [r.value for rs in batch.values() for r in rs]
            got[target].sort()
            consumer.close()
    assert got == {"/s:committed": [b"kept"], "/s:everything": [b"dropped", b"kept"]}
    with pytest.raises(Exception, match="isolation_level must be read_committed"):
        jobs.check_params("copy", {"source": T, "target": "/s:x", "isolation_level": "dirty"})
