"""Topic-level policies (issue 24, build 1): a topic overrides the policies of its stream
that make sense per topic (DESIGN, "Stream policies"); retention (`ttl` and the new
`retention_bytes`), compaction, archiving, the producer and every reader honour the
topic's effective value; overrides are stored in the catalog, survive a reopen, replicate,
and are set from `plet topic create/edit --policy`. On real SQLite files."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner

from engine import Cluster, Consumer, Principal, Producer, Replicator, TopicPartition, errors
from engine.cli import cli
from engine.clock import FakeClock, now_ms
from engine.policies import TOPIC_POLICIES, validate_overrides
from engine.replication.http import _topic_specs
from engine.storage import batch

S = "/s"
T = "/s:t"
OTHER = "/s:other"


def drain(consumer: Consumer) -> list:
    out: list = []
    for _ in range(10_000):
        got = [r for rs in consumer.poll(timeout_ms=50).values() for r in rs]
        if not got:
            return out
        out.extend(got)
    raise AssertionError("the consumer never caught up")


def read_all(cluster: Cluster, topic: str, partition: int = 0) -> list:
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, partition)])
    try:
        return drain(consumer)
    finally:
        consumer.close()


def send_each(cluster: Cluster, topic: str, values: list[bytes], **kwargs) -> list:
    """One send (one batch) per value, each resolved before the next."""
    with Producer(cluster, acks=1) as producer:
        return [producer.send(topic, value=v, **kwargs).get(timeout=10) for v in values]


# --- the API ---------------------------------------------------------------------------------


def test_overrides_are_the_topics_own_and_policies_its_effective_set(cluster_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream(S, ttl=3600, compression="lz4")
        info = cluster.create_topic(T, 2, {"ttl": "60", "compact": True, "retention_bytes": 0})
        assert info.overrides == {"ttl": 60, "compact": True, "retention_bytes": 0}
        assert info.policies["ttl"] == 60 and info.policies["compact"] is True
        assert info.policies["compression"] == "lz4"  # the stream's
        assert info.policies["produce_perm"] == cluster.stream(S).policies["produce_perm"]
        plain = cluster.create_topic(OTHER)
        assert plain.overrides == {} and plain.policies == cluster.stream(S).policies

        # None removes an override (the stream's value applies again); the rest are kept
        info = cluster.edit_topic(T, compact=None, max_message_bytes=100)
        assert info.overrides == {"ttl": 60, "retention_bytes": 0, "max_message_bytes": 100}
        assert info.policies["compact"] is False
        # a stream edit reaches what the topic does not override, and only that
        cluster.edit_stream(S, ttl=7200, compression="zstd")
        info = cluster.topic(T)
        assert info.policies["ttl"] == 60 and info.policies["compression"] == "zstd"
        assert [t.overrides for t in cluster.topics(S)] == [{}, info.overrides]

    with Cluster.open(cluster_path) as cluster:  # stored in the catalog
        assert cluster.topic(T).overrides == {
            "ttl": 60,
            "retention_bytes": 0,
            "max_message_bytes": 100,
        }
        assert cluster.topic(OTHER).overrides == {}


def test_a_topic_without_overrides_stores_nothing_more(cluster_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream(S)
        cluster.create_topic(OTHER)
        cluster.create_topic(T, policies={"ttl": 5})
        cluster.edit_topic(T, ttl=None)  # its last override gone: back to nothing stored
    conn = sqlite3.connect(cluster_path / "catalog.db")
    try:
        assert conn.execute("SELECT name, policies FROM topics ORDER BY name").fetchall() == [
            ("other", None),
            ("t", None),
        ]
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"no_such": 1}, "unknown policy 'no_such'; known policies: "),
        ({"produce_perm": "p"}, "'produce_perm' is an ACE: set it on the stream, not on a topic"),
        ({"copy_perm": "p"}, "'copy_perm' is an ACE: set it on the stream"),
        ({"auto_create": False}, "'auto_create' is a policy of the whole stream"),
        ({"default_partitions": 3}, "'default_partitions' is a policy of the whole stream"),
        ({"archive_uri": "file:///tmp/x"}, "'archive_uri' is a policy of the whole stream"),
        ({"ttl": -1}, "policy 'ttl' must be at least 0"),
        ({"retention_bytes": "lots"}, "policy 'retention_bytes' must be an integer"),
        ({"timestamp_type": "append"}, "must be 'create' or 'log_append'"),
        ({"compression": "gzip"}, "policy 'compression' must be"),
    ],
)
def test_a_bad_override_is_refused_with_a_clear_error_and_changes_nothing(
    cluster_path, changes, message
):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream(S)
        cluster.create_topic(T, policies={"ttl": 5})
        with pytest.raises(errors.InvalidPolicy, match=message):
            cluster.edit_topic(T, **changes)
        with pytest.raises(errors.InvalidPolicy, match=message):
            cluster.create_topic(OTHER, policies=changes)
        assert cluster.topic(T).overrides == {"ttl": 5}
        assert cluster.topic_count(S) == 1  # nothing created


def test_the_table_says_which_policies_a_topic_may_override():
    assert TOPIC_POLICIES == (
        "ttl",
        "compact",
        "min_compaction_lag_ms",
        "delete_retention_ms",
        "timestamp_type",
        "max_message_bytes",
        "retention_bytes",
        "compression",
        "archive_after",
    )
    assert validate_overrides({"ttl": None}, base={"ttl": 5, "compact": True}) == {"compact": True}


def test_editing_a_topic_needs_the_streams_topic_perm(cluster_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream(S, topic_perm="u:alice", produce_perm="p", consume_perm="p")
        alice = cluster.as_principal(Principal("alice"))
        alice.create_topic(T)
        bob = cluster.as_principal(Principal("bob"))
        with pytest.raises(errors.AccessDenied):
            bob.edit_topic(T, ttl=5)
        with pytest.raises(errors.AccessDenied):
            bob.create_topic(OTHER, policies={"ttl": 5})
        assert cluster.topic(T).overrides == {}
        assert alice.edit_topic(T, ttl=5).overrides == {"ttl": 5}


# --- the producer ------------------------------------------------------------------------------


def test_the_producer_honours_a_topics_max_message_bytes_timestamp_type_and_compression(
    cluster_path,
):
    clock = FakeClock(now_ms=now_ms())
    with Cluster.open(cluster_path, clock=clock) as cluster:
        cluster.create_stream(S, ttl=0)
        cluster.create_topic(
            T,
            policies={
                "max_message_bytes": 50,
                "timestamp_type": "log_append",
                "compression": "zstd",
            },
        )
        cluster.create_topic(OTHER)
        producer = Producer(cluster, acks=1)
        with pytest.raises(errors.MessageTooLarge, match="max_message_bytes=50 of /s:t"):
            producer.send(T, value=b"x" * 51)
        with pytest.raises(errors.MessageTooLarge, match="max_message_bytes=50"):
            producer.send_batch(T, 0, [b"x" * 51])
        producer.send(OTHER, value=b"x" * 51).get(timeout=10)  # the stream's limit
        meta = producer.send(T, value=b"y" * 50, timestamp_ms=1_000).get(timeout=10)
        assert meta.timestamp == clock.now_ms()  # the log's time, not the producer's
        producer.close()
        record = read_all(cluster, T)[0]
        assert (record.value, record.timestamp_type, record.timestamp) == (
            b"y" * 50,
            1,
            meta.timestamp,
        )
        assert read_all(cluster, OTHER)[0].timestamp_type == 0
        codecs = {
            name: [
                batch.codec_of(row[4])
                for pl in cluster.partitionlets(name)
                for row in cluster.volume(pl.volume).batch_rows(pl.id, -1, 100)
            ]
            for name in (T, OTHER)
        }
        assert codecs == {T: ["zstd"], OTHER: ["none"]}

        # an edit reaches a producer that cached the topic
        producer = Producer(cluster, acks=1)
        producer.send(T, value=b"z").get(timeout=10)
        cluster.edit_topic(T, max_message_bytes=None)
        producer.send(T, value=b"x" * 51).get(timeout=10)
        producer.close()


# --- readers: ttl --------------------------------------------------------------------------------


def test_a_topic_ttl_shorter_than_its_streams_hides_messages_at_once(cluster_path):
    clock = FakeClock(now_ms=now_ms())
    with Cluster.open(cluster_path, clock=clock) as cluster:
        cluster.create_stream(S, ttl=86_400)
        cluster.create_topic(T, policies={"ttl": 60})
        cluster.create_topic(OTHER)
        for topic in (T, OTHER):
            send_each(cluster, topic, [b"a", b"b"], timestamp_ms=clock.now_ms())
        watching = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
        watching.assign([TopicPartition(OTHER, 0)])
        assert len(read_all(cluster, T)) == 2
        clock.advance(61_000)
        assert read_all(cluster, T) == []  # hidden at once, nothing purged yet
        assert [r.value for r in read_all(cluster, OTHER)] == [b"a", b"b"]
        assert cluster.topic(T).partitions[0].log_end_offset == 2
        # the Spark scan plan hides them as well: each task carries its topic's cutoff
        tasks = cluster.scan_plan(cluster.scan_ranges([T, OTHER]))
        assert {(t.topic, t.cutoff_ms) for t in tasks} == {
            (T, clock.now_ms() - 60_000),
            (OTHER, clock.now_ms() - 86_400_000),
        }

        # shortening the ttl of a topic a consumer is reading hides its messages at once
        cluster.edit_topic(OTHER, ttl=30)
        assert drain(watching) == []
        watching.close()
        # and removing the override shows them again (nothing was purged)
        cluster.edit_topic(T, ttl=None)
        assert [r.value for r in read_all(cluster, T)] == [b"a", b"b"]


# --- retention_bytes -------------------------------------------------------------------------------


def test_a_retention_bytes_topic_is_trimmed_oldest_first_by_enforce_retention(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=300) as cluster:
        cluster.create_stream(S, ttl=0)
        cluster.create_topic(T, policies={"retention_bytes": 1000})
        cluster.create_topic(OTHER)
        for topic in (T, OTHER):
            send_each(cluster, topic, [f"{i:03d}".encode() * 20 for i in range(60)])
        before = cluster.topic(T).partitions[0]
        assert before.bytes > 3000 and len(before.partitionlets) > 5
        other_before = cluster.topic(OTHER).partitions[0]

        report = cluster.enforce_retention()

        after = cluster.topic(T).partitions[0]
        lets = after.partitionlets
        assert report.partitionlets_dropped == len(before.partitionlets) - len(lets) > 0
        assert set(report.by_topic) == {T}
        # Kafka's rule: what is left holds at least retention_bytes, and dropping the
        # oldest one left would go below it
        assert after.bytes >= 1000 and after.bytes - lets[0].bytes < 1000
        assert after.log_start_offset == lets[0].base_offset > 0
        assert after.log_end_offset == before.log_end_offset == 60
        values = [r.value for r in read_all(cluster, T)]
        assert values == [f"{i:03d}".encode() * 20 for i in range(after.log_start_offset, 60)]
        assert cluster.topic(OTHER).partitions[0] == other_before  # no limit: untouched
        assert cluster.enforce_retention().partitionlets_dropped == 0  # nothing more to drop


def test_retention_bytes_on_the_stream_applies_to_its_topics_unless_one_overrides_it(
    cluster_path,
):
    with Cluster.open(cluster_path, partitionlet_bytes=300) as cluster:
        cluster.create_stream(S, ttl=0, retention_bytes=600)
        cluster.create_topic(T)
        cluster.create_topic(OTHER, policies={"retention_bytes": 0})
        for topic in (T, OTHER):
            send_each(cluster, topic, [b"v" * 60 for _ in range(40)])
        report = cluster.enforce_retention()
        assert set(report.by_topic) == {T}
        assert cluster.topic(OTHER).partitions[0].log_start_offset == 0
        assert cluster.topic(T).partitions[0].log_start_offset > 0


# --- compaction -------------------------------------------------------------------------------


def test_a_compacted_topic_in_a_stream_that_is_not_compacted_is_compacted(cluster_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream(S, ttl=0)
        cluster.create_topic(T, policies={"compact": True})
        cluster.create_topic(OTHER)
        for topic in (T, OTHER):
            with Producer(cluster, acks=1) as producer:
                for i in range(30):
                    producer.send(topic, key=f"k{i % 3}".encode(), value=str(i).encode())
        report = cluster.compact()
        assert set(report.by_topic) == {T} and report.by_topic[T].messages_removed == 27
        kept = read_all(cluster, T)
        assert [(r.key, r.value, r.offset) for r in kept] == [
            (b"k0", b"27", 27),
            (b"k1", b"28", 28),
            (b"k2", b"29", 29),
        ]
        assert len(read_all(cluster, OTHER)) == 30

        # and a topic that turns compaction off in a compacted stream is left alone
        cluster.edit_stream(S, compact=True)
        cluster.edit_topic(OTHER, compact=False)
        assert cluster.compact().by_topic == {}
        assert len(read_all(cluster, OTHER)) == 30


# --- archiving ----------------------------------------------------------------------------------


def test_archive_after_of_a_topic_archives_that_topic_only(cluster_path):
    clock = FakeClock(now_ms=now_ms())
    with Cluster.open(cluster_path, partitionlet_bytes=300, clock=clock) as cluster:
        cluster.create_stream(S, ttl=0)
        cluster.create_topic(T, policies={"archive_after": 60})
        cluster.create_topic(OTHER)
        for topic in (T, OTHER):
            send_each(cluster, topic, [b"v" * 60 for _ in range(20)], timestamp_ms=clock.now_ms())
        clock.advance(120_000)
        report = cluster.archive()
        assert report.archived and {a.topic for a in report.archived} == {T}
        assert {p.tier for p in cluster.partitionlets(OTHER)} == {"live"}
        assert len(read_all(cluster, T)) == 20


# --- catalog migration ----------------------------------------------------------------------------


def test_a_catalog_written_before_topic_policies_opens_and_gains_them(cluster_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream(S, ttl=0)
        cluster.create_topic(T, 2)
        send_each(cluster, T, [b"a", b"b"], partition=0)
    conn = sqlite3.connect(cluster_path / "catalog.db")
    # as an older engine wrote it: without the column, nor the index on it
    conn.execute("DROP INDEX topics_with_overrides")
    conn.execute("ALTER TABLE topics DROP COLUMN policies")
    conn.commit()
    conn.close()
    with Cluster.open(cluster_path) as cluster:
        info = cluster.topic(T)
        assert (info.overrides, info.partition_count) == ({}, 2)
        assert [r.value for r in read_all(cluster, T)] == [b"a", b"b"]
        assert cluster.edit_topic(T, ttl=5).overrides == {"ttl": 5}
        assert cluster.create_topic(OTHER, policies={"compact": True}).overrides == {
            "compact": True
        }
    with Cluster.open(cluster_path) as cluster:
        assert cluster.topic(T).overrides == {"ttl": 5}


# --- replication -----------------------------------------------------------------------------------


def test_overrides_replicate_with_their_topics_and_so_do_edits(tmp_path):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with Cluster.open(a_dir, name="a") as a, Cluster.open(b_dir, name="b") as b:
        a.create_stream(S, ttl=0)
        a.create_topic(T, 2, {"compact": True, "retention_bytes": 5000})
        a.create_topic(OTHER)
        send_each(a, T, [b"x"], key=b"k")
        a.add_replica(S, b_dir)
        replicator = Replicator(a)
        replicator.run_once()
        assert b.topic(T).overrides == {"compact": True, "retention_bytes": 5000}
        assert b.topic(T).partition_count == 2
        assert b.topic(OTHER).overrides == {}

        a.edit_topic(T, compact=None, ttl=60)
        a.edit_topic(OTHER, max_message_bytes=1000)
        replicator.run_once()
        assert b.topic(T).overrides == {"retention_bytes": 5000, "ttl": 60}
        assert b.topic(OTHER).overrides == {"max_message_bytes": 1000}
        a.edit_topic(OTHER, max_message_bytes=None)
        replicator.run_once()
        assert b.topic(OTHER).overrides == {}


def test_the_http_transport_reads_topics_with_and_without_overrides():
    specs = _topic_specs({"topics": [["t", 2], ["u", 1, {"ttl": 5}]]})
    assert specs == [("t", 2, {}), ("u", 1, {"ttl": 5})]
    with pytest.raises(errors.InvalidArgument, match="policies must be an object"):
        _topic_specs({"topics": [["u", 1, "ttl=5"]]})
    with pytest.raises(errors.InvalidArgument):
        _topic_specs({"topics": [["u", 10_001, {}]]})


# --- the command line ----------------------------------------------------------------------------------


def test_plet_topic_create_and_edit_take_policies(cluster_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream(S, ttl=3600)
    runner = CliRunner()
    where = ["--cluster", str(cluster_path)]

    def plet(*args: str):
        return runner.invoke(cli, [*args[:2], *where, *args[2:]])

    got = plet("topic", "create", T, "--policy", "compact=true", "--policy", "retention-bytes=1000")
    assert got.exit_code == 0, got.output
    got = plet("topic", "edit", T, "--policy", "ttl=60", "--unset", "compact")
    assert got.exit_code == 0, got.output
    assert "retention_bytes=1000, ttl=60" in got.output
    assert "nothing to unset" not in got.output  # compact was the topic's own
    got = plet("topic", "info", T)
    assert "own policies  retention_bytes=1000, ttl=60" in got.output
    # unsetting what the topic does not set says so, rather than pass it over
    got = plet("topic", "edit", T, "--unset", "compact")
    assert got.exit_code == 0, got.output
    assert "compact was not the topic's own: nothing to unset" in got.output
    for bad, message in [
        (["--policy", "produce_perm=p"], "is an ACE: set it on the stream"),
        (["--policy", "ttl"], "expected NAME=VALUE, got 'ttl'"),
        (["--policy", "ttl=soon"], "policy 'ttl' must be an integer"),
        ([], "nothing to change"),
    ]:
        got = plet("topic", "edit", T, *bad)
        assert got.exit_code != 0 and message in got.output, got.output
    with Cluster.open(cluster_path) as cluster:
        info = cluster.topic(T)
        assert info.overrides == {"retention_bytes": 1000, "ttl": 60}
        assert info.policies["ttl"] == 60 and info.policies["compact"] is False


def test_a_topic_whose_stored_overrides_are_bad_is_skipped_and_named(cluster_path):
    with Cluster.open(cluster_path, partitionlet_bytes=300) as cluster:
        cluster.create_stream(S, ttl=0, compact=True)
        cluster.create_topic(T, policies={"retention_bytes": 500})
        cluster.create_topic(OTHER, policies={"retention_bytes": 500})
        for topic in (T, OTHER):
            send_each(cluster, topic, [b"v" * 60 for _ in range(20)], key=b"k")
    conn = sqlite3.connect(cluster_path / "catalog.db")
    # an override written past the checks (by hand, or a future engine's bad value)
    conn.execute("""UPDATE topics SET policies = '{"retention_bytes": -3}' WHERE name = 't'""")
    conn.commit()
    conn.close()
    with Cluster.open(cluster_path) as cluster:
        report = cluster.enforce_retention()
        assert set(report.by_topic) == {OTHER}
        assert "retention_bytes" in report.skipped_streams[T]
        compacted = cluster.compact()
        assert set(compacted.by_topic) == {OTHER} and T in compacted.skipped_streams
        with pytest.raises(errors.InvalidPolicy, match="topic /s:t has an invalid stored policy"):
            read_all(cluster, T)
        # an edit replaces the bad value
        assert cluster.edit_topic(T, retention_bytes=1000).overrides == {"retention_bytes": 1000}
        assert len(read_all(cluster, T)) == 20
