"""Input limits and stored policies (issue 12, finding 3 and the limits), on real files.

- Every path that stores a stream's policies checks them, in the catalog, whoever calls.
- A stream stored with bad policies by an older engine is skipped by retention and
  compaction (logged and reported) while the others are maintained, and it can still be
  edited to valid values and deleted.
- Names, ACEs, numbers and headers have bounds, refused with a clear error at once.
"""

from __future__ import annotations

import logging
import time

import pytest

from engine import Cluster, Consumer, Principal, Producer, TopicPartition, errors, names, policies
from engine.auth import acl
from engine.client.producer import MAX_HEADERS
from engine.ops.maintenance import Maintenance
from engine.replication import DirectoryTarget
from engine.storage.batch import MAX_TIMESTAMP_MS
from tests.old_catalog import write_policies
from tests.timing import scaled

ROOT = Principal("root", superuser=True)
OLD = 1_000  # a create time long expired under any ttl


def produce_old(cluster: Cluster, topic: str, value: bytes = b"old") -> None:
    producer = Producer(cluster)
    producer.send(topic, value, key=b"k", timestamp_ms=OLD).get(scaled(10))
    producer.send(topic, value + b"2", key=b"k", timestamp_ms=OLD + 1).get(scaled(10))
    producer.close()


# --- names and ACEs --------------------------------------------------------------------------


def test_a_stream_path_has_at_most_1024_characters(cluster):
    longest = "/" + "a" * (names.MAX_STREAM_PATH - 1)
    cluster.create_stream(longest)
    started = time.monotonic()
    with pytest.raises(errors.InvalidName, match="at most 1,024"):
        cluster.create_stream("/" + "a" * 5_000_000)
    assert time.monotonic() - started < scaled(1)
    with pytest.raises(errors.InvalidName, match="at most 1,024"):
        cluster.create_stream(longest + "b")
    assert [s.path for s in cluster.streams()] == [longest]


def test_an_ace_has_at_most_4096_characters(cluster):
    ace = "u:" + "a" * (acl.MAX_LENGTH - 2)
    cluster.create_stream("/s", consume_perm=ace)
    with pytest.raises(errors.InvalidPolicy, match="at most 4,096") as caught:
        cluster.create_stream("/t", consume_perm=ace + "b")
    assert len(str(caught.value)) < 200  # the expression is not echoed back
    with pytest.raises(errors.InvalidPolicy, match="at most 4,096"):
        cluster.edit_stream("/s", admin_perm="u:x | " * 1000)
    assert cluster.stream("/s").policies["admin_perm"] == "u:<creator>"


# --- numbers in policies ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["9" * 5000, 2**70, "²", MAX_TIMESTAMP_MS // 1000 + 1],
    ids=["5000-digits", "2^70", "superscript", "past-9999"],
)
def test_a_bad_ttl_is_an_invalid_policy(cluster, value):
    with pytest.raises(errors.InvalidPolicy, match="'ttl'") as caught:
        cluster.create_stream("/s", ttl=value)
    assert len(str(caught.value)) < 200
    cluster.create_stream("/s", ttl=MAX_TIMESTAMP_MS // 1000)  # the largest is taken
    with pytest.raises(errors.InvalidPolicy, match="'ttl'"):
        cluster.edit_stream("/s", ttl=value)
    assert cluster.stream("/s").policies["ttl"] == MAX_TIMESTAMP_MS // 1000


def test_a_policy_named_path_is_an_unknown_policy(cluster):
    with pytest.raises(errors.InvalidPolicy, match="unknown policy 'path'"):
        cluster.create_stream("/s", **{"path": "/other"})
    cluster.create_stream("/s")
    with pytest.raises(errors.InvalidPolicy, match="unknown policy 'path'"):
        cluster.edit_stream("/s", **{"path": "/other"})
    assert [s.path for s in cluster.streams()] == ["/s"]


# --- the producer ----------------------------------------------------------------------------


def test_100000_headers_are_refused_at_once(cluster):
    cluster.create_stream("/s")
    cluster.create_topic("/s:t", 1)
    producer = Producer(cluster)
    headers = [("h", b"")] * 100_000
    started = time.monotonic()
    with pytest.raises(errors.InvalidArgument, match="at most 1,000 headers"):
        producer.send("/s:t", b"v", headers=headers)
    assert time.monotonic() - started < scaled(1)
    # a generator of headers is not read past the limit
    seen = []

    def endless():
        while True:
            seen.append(1)
            yield ("h", b"")

    with pytest.raises(errors.InvalidArgument, match="headers"):
        producer.send("/s:t", b"v", headers=endless())
    assert len(seen) == MAX_HEADERS + 1
    # the limit itself is fine, and so is a long header name up to the format's bound
    assert (
        producer.send("/s:t", b"v", headers=[("h", b"")] * MAX_HEADERS).get(scaled(10)).offset == 0
    )
    with pytest.raises(errors.InvalidArgument, match="65,535 bytes"):
        producer.send("/s:t", b"v", headers=[("h" * 70_000, b"")])
    with pytest.raises(errors.InvalidArgument, match="Unicode"):
        producer.send("/s:t", b"v", headers=[("\ud800", b"")])
    producer.close()


@pytest.mark.parametrize("ts", [2**63, 2**64, MAX_TIMESTAMP_MS + 1])
def test_a_timestamp_past_the_year_9999_is_refused_at_once(cluster, ts):
    cluster.create_stream("/s")
    cluster.create_topic("/s:t", 1)
    producer = Producer(cluster)
    with pytest.raises(errors.InvalidArgument, match="timestamp_ms"):
        producer.send("/s:t", b"v", timestamp_ms=ts)
    assert producer.send("/s:t", b"v", timestamp_ms=MAX_TIMESTAMP_MS).get(scaled(10)).offset == 0
    producer.close()


# --- every writer of policies is checked -----------------------------------------------------


def test_a_replicating_cluster_cannot_store_bad_policies(cluster, tmp_path):
    target = DirectoryTarget(str(cluster.path))
    try:
        bad = {**policies.DEFAULTS, "ttl": "forever", "consume_perm": "(((("}
        with pytest.raises(errors.InvalidPolicy):
            target.create_stream("/r", bad, "alice")
        with pytest.raises(errors.InvalidName):
            target.create_stream("/" + "a" * 2000, dict(policies.DEFAULTS), "alice")
        with pytest.raises(errors.InvalidArgument, match="creator"):
            target.create_stream("/r", dict(policies.DEFAULTS), "x" * 10_000)
        assert cluster.streams() == []
        target.create_stream("/r", {**policies.DEFAULTS, "ttl": 60}, "alice")
        assert cluster.stream("/r").policies["ttl"] == 60
    finally:
        target.close()


def test_the_catalog_checks_what_it_stores(cluster):
    catalog = cluster.catalog
    with pytest.raises(errors.InvalidPolicy):
        catalog.create_stream("/s", {"ttl": "forever"}, "alice")
    cluster.create_stream("/s")
    with pytest.raises(errors.InvalidPolicy):
        catalog.set_policies("/s", {**cluster.stream("/s").policies, "consume_perm": "(("})
    assert cluster.stream("/s").policies == policies.DEFAULTS


# --- a stream stored with bad policies (an old catalog) --------------------------------------


def test_retention_skips_a_bad_stream_and_maintains_the_others(cluster, caplog):
    for path in ("/bad", "/good"):
        cluster.create_stream(path, ttl=1, compact=True, min_compaction_lag_ms=0)
        cluster.create_topic(f"{path}:t", 1)
        produce_old(cluster, f"{path}:t")
    write_policies(cluster, "/bad", ttl="forever", consume_perm="((((")
    with caplog.at_level(logging.WARNING, logger="engine.ops.retention"):
        report = cluster.enforce_retention()
    assert "/good:t" in report.by_topic and report.messages_freed == 2
    assert "/bad:t" not in report.by_topic
    assert list(report.skipped_streams) == ["/bad"]
    assert "'ttl' must be an integer, got 'forever'" in report.skipped_streams["/bad"]
    assert "consume_perm" in report.skipped_streams["/bad"]
    assert "skips stream /bad" in caplog.text
    assert cluster.topic("/good:t").partitions[0].log_start_offset == 2
    assert cluster.topic("/bad:t").partitions[0].log_start_offset == 0


def test_compaction_skips_a_bad_stream_and_compacts_the_others(cluster):
    for path in ("/bad", "/good"):
        cluster.create_stream(path, ttl=0, compact=True)
        cluster.create_topic(f"{path}:t", 1)
        produce_old(cluster, f"{path}:t")
    write_policies(cluster, "/bad", min_compaction_lag_ms=[1])
    report = cluster.compact()
    assert report.messages_removed == 1 and list(report.by_topic) == ["/good:t"]
    assert list(report.skipped_streams) == ["/bad"]
    assert "min_compaction_lag_ms" in report.skipped_streams["/bad"]


def test_maintenance_reports_the_skipped_streams(cluster):
    cluster.create_stream("/bad", ttl=1)
    cluster.create_topic("/bad:t", 1)
    write_policies(cluster, "/bad", ttl="forever")
    worker = Maintenance(cluster)
    kept, compacted = worker.run_once()
    assert kept is not None and compacted is not None
    assert worker.last_error is None
    assert list(worker.skipped_streams) == ["/bad"]


def test_a_bad_stream_can_be_edited_to_valid_values_and_deleted(cluster):
    cluster.create_stream("/bad", ttl=1)
    cluster.create_topic("/bad:t", 1)
    produce_old(cluster, "/bad:t")
    write_policies(cluster, "/bad", ttl="forever", consume_perm="((((", stale_policy=1)
    # Producers and consumers get a clear error, not a TypeError from the middle.
    producer = Producer(cluster)
    with pytest.raises(errors.InvalidPolicy, match="stream /bad has an invalid stored policy"):
        producer.send("/bad:t", b"v")
    producer.close()
    consumer = Consumer(cluster)
    with pytest.raises(errors.AccessDenied, match="not a valid ACE"):
        consumer.assign([TopicPartition("/bad:t", 0)])
    consumer.close()
    # An edit must leave every policy valid: the bad ones must be replaced in it.
    with pytest.raises(errors.InvalidPolicy, match="'ttl'"):
        cluster.edit_stream("/bad", consume_perm="p")
    info = cluster.edit_stream("/bad", ttl=60, consume_perm="p")
    assert info.policies["ttl"] == 60 and info.policies["consume_perm"] == "p"
    assert "stale_policy" not in info.policies  # a name no engine knows is dropped
    assert policies.problem(info.policies) is None
    assert cluster.enforce_retention().skipped_streams == {}
    cluster.delete_stream("/bad")
    assert cluster.streams() == []


def test_a_bad_admin_ace_passes_super_users_only(cluster):
    cluster.create_stream("/bad")
    write_policies(cluster, "/bad", admin_perm="u:alice |")
    with pytest.raises(errors.AccessDenied, match="admin_perm is not a valid ACE"):
        cluster.edit_stream("/bad", admin_perm="p")
    with pytest.raises(errors.AccessDenied):
        cluster.delete_stream("/bad")
    root = cluster.as_principal(ROOT)
    assert root.edit_stream("/bad", admin_perm="u:alice").policies["admin_perm"] == "u:alice"
    root.delete_stream("/bad")
    assert cluster.streams() == []


def test_a_consumer_of_a_stream_with_a_bad_stored_ttl_gets_a_clear_error(cluster):
    cluster.create_stream("/bad", consume_perm="p")
    cluster.create_topic("/bad:t", partitions=1)
    write_policies(cluster, "/bad", ttl="forever")
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    with pytest.raises(errors.InvalidPolicy, match="stream /bad has an invalid stored policy"):
        consumer.assign([TopicPartition("/bad:t", 0)])
        consumer.poll(timeout_ms=100)
    consumer.close()
    cluster.edit_stream("/bad", ttl=0)  # fixed by its administrator: readable again
    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("/bad:t", 0)])
    assert consumer.poll(timeout_ms=100) == {}
    consumer.close()
