"""The one table of Kafka topic config names and the policies they are
(engine.kafka_configs; issue 24, build 2's data): conversions both ways, sources, and the
configs accepted with no meaning here."""

from __future__ import annotations

import pytest

from engine import Cluster, kafka_configs, policies
from engine.errors import InvalidPolicy
from engine.kafka_configs import DEFAULT, STREAM, TOPIC, describe, to_policies, unset_policies

# Every topic config Kafka 4.x's broker lists for a topic (kafka-configs --describe --all).
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
}


def test_the_table_lists_kafkas_topic_configs_once_each_mapped_to_topic_policies():
    names = [c.name for c in kafka_configs.CONFIGS]
    assert set(names) == KAFKA_TOPIC_CONFIGS and len(names) == len(set(names))
    assert names == sorted(names)
    mapped = {p for c in kafka_configs.CONFIGS for p in c.policies}
    # every policy a topic may override is some Kafka config
    assert mapped == set(policies.TOPIC_POLICIES)
    for c in kafka_configs.CONFIGS:
        assert c.kafka_type in {"BOOLEAN", "STRING", "INT", "LONG", "DOUBLE", "LIST"}
        assert (c.read is None) == (not c.meaningful)
        assert c.meaningful or c.note


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({"cleanup.policy": "compact"}, {"compact": True, "ttl": 0, "retention_bytes": 0}),
        ({"cleanup.policy": "compact,delete"}, {"compact": True}),
        ({"cleanup.policy": "delete, compact"}, {"compact": True}),
        ({"cleanup.policy": "delete"}, {"compact": False}),
        (
            {"cleanup.policy": "compact", "retention.ms": "3600000"},
            {"compact": True, "ttl": 3600, "retention_bytes": 0},
        ),
        ({"retention.ms": "-1"}, {"ttl": 0}),
        ({"retention.ms": "1500"}, {"ttl": 2}),  # rounded up: never 0, which is forever
        ({"retention.ms": "1"}, {"ttl": 1}),
        ({"retention.bytes": "-1"}, {"retention_bytes": 0}),
        ({"retention.bytes": "0"}, {"retention_bytes": 1}),
        ({"retention.bytes": "1073741824"}, {"retention_bytes": 1073741824}),
        ({"max.message.bytes": "2097152"}, {"max_message_bytes": 2097152}),
        ({"message.timestamp.type": "LogAppendTime"}, {"timestamp_type": "log_append"}),
        ({"message.timestamp.type": "CreateTime"}, {"timestamp_type": "create"}),
        ({"min.compaction.lag.ms": "500"}, {"min_compaction_lag_ms": 500}),
        ({"delete.retention.ms": "0"}, {"delete_retention_ms": 0}),
        ({"compression.type": "zstd"}, {"compression": "zstd"}),
        ({"compression.type": "lz4"}, {"compression": "lz4"}),
        ({"compression.type": "gzip"}, {"compression": "zstd"}),
        ({"compression.type": "snappy"}, {"compression": "lz4"}),
        ({"compression.type": "producer"}, {"compression": "none"}),
        ({"compression.type": "uncompressed"}, {"compression": "none"}),
        ({"local.retention.ms": "-2"}, {"archive_after": 0}),
        ({"local.retention.ms": "86400000"}, {"archive_after": 86400}),
    ],
)
def test_kafka_configs_become_policy_overrides(configs, expected):
    assert to_policies(configs) == (expected, [])


def test_configs_with_no_meaning_here_are_accepted_and_named():
    got, ignored = to_policies(
        {
            "segment.bytes": "1048576",
            "segment.ms": "3600000",
            "min.insync.replicas": "2",
            "min.cleanable.dirty.ratio": "0.01",
            "retention.ms": "60000",
        }
    )
    assert got == {"ttl": 60}
    assert ignored == [
        "segment.bytes",
        "segment.ms",
        "min.insync.replicas",
        "min.cleanable.dirty.ratio",
    ]


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"no.such.config": "1"}, "unknown topic config 'no.such.config'"),
        ({"cleanup.policy": "forever"}, "cleanup.policy must be delete, compact or"),
        ({"cleanup.policy": ""}, "cleanup.policy must be"),
        ({"retention.ms": "-5"}, "retention.ms must be at least -1"),
        ({"retention.ms": "soon"}, "retention.ms must be a whole number"),
        ({"retention.bytes": "-2"}, "retention.bytes must be at least -1"),
        ({"max.message.bytes": "0"}, "config max.message.bytes='0': policy 'max_message_bytes'"),
        ({"message.timestamp.type": "logappendtime"}, "CreateTime or LogAppendTime"),
        ({"compression.type": "brotli"}, "compression.type must be one of"),
    ],
)
def test_a_bad_config_value_is_refused_naming_the_config(configs, message):
    with pytest.raises(InvalidPolicy, match=message):
        to_policies(configs)


def test_deleting_configs_removes_the_overrides_they_stand_for():
    overrides = {"compact": True, "ttl": 0, "retention_bytes": 0, "max_message_bytes": 10}
    assert unset_policies(["cleanup.policy"], overrides) == {
        "compact": None,
        "ttl": None,
        "retention_bytes": None,
    }
    # a ttl of its own (not cleanup.policy's 0) stays
    assert unset_policies(["cleanup.policy"], {"compact": True, "ttl": 60}) == {"compact": None}
    assert unset_policies(["retention.ms", "max.message.bytes", "segment.ms"], overrides) == {
        "ttl": None,
        "max_message_bytes": None,
    }
    with pytest.raises(InvalidPolicy, match="unknown topic config"):
        unset_policies(["nope"], {})


def test_describe_shows_values_both_ways_with_their_sources():
    stream = policies.validate({"ttl": 3600, "compression": "lz4"})
    overrides = {"compact": True, "ttl": 0, "retention_bytes": 0, "max_message_bytes": 2048}
    effective = policies.effective(stream, overrides)
    got = {
        e.name: e
        for e in describe(effective, overrides, stream, context={"partitionlet_bytes": 300})
    }
    assert set(got) == KAFKA_TOPIC_CONFIGS
    assert (got["cleanup.policy"].value, got["cleanup.policy"].source) == ("compact", TOPIC)
    assert (got["retention.ms"].value, got["retention.ms"].source) == ("-1", TOPIC)
    assert (got["retention.bytes"].value, got["retention.bytes"].source) == ("-1", TOPIC)
    assert (got["max.message.bytes"].value, got["max.message.bytes"].source) == ("2048", TOPIC)
    assert (got["compression.type"].value, got["compression.type"].source) == ("lz4", STREAM)
    assert (got["message.timestamp.type"].value, got["message.timestamp.type"].source) == (
        "CreateTime",
        DEFAULT,
    )
    assert got["segment.bytes"].value == "300" and not got["segment.bytes"].policies
    assert got["segment.ms"].value == "604800000" and got["segment.ms"].is_default
    assert "no meaning here" in got["preallocate"].documentation
    assert "compact policy" in got["cleanup.policy"].documentation
    # compaction with a ttl of the stream's: Kafka's compact,delete
    both = describe(policies.effective(stream, {"compact": True}), {"compact": True}, stream)
    assert {e.name: e.value for e in both}["cleanup.policy"] == "compact,delete"
    only = describe(stream, names=["retention.ms", "no.such"])
    assert [(e.name, e.value, e.source) for e in only] == [("retention.ms", "3600000", STREAM)]


def test_every_meaningful_config_reads_back_what_it_shows():
    """to_policies(describe(...)) gives back the same policies: a client that reads a
    topic's configs and writes them again changes nothing."""
    cases = [
        {"compact": True, "ttl": 0, "retention_bytes": 0},
        {"compact": True, "ttl": 60, "retention_bytes": 5000},
        {"ttl": 0, "retention_bytes": 0, "compact": False},
        {"timestamp_type": "log_append", "compression": "zstd", "archive_after": 3600},
        {"max_message_bytes": 100, "min_compaction_lag_ms": 5, "delete_retention_ms": 0},
    ]
    for overrides in cases:
        effective = policies.effective(policies.validate({}), overrides)
        shown = {e.name: e.value for e in describe(effective, overrides) if e.policies}
        back, _ = to_policies(shown)
        assert policies.effective(policies.validate({}), back) == effective, overrides


def test_a_topic_created_from_kafka_configs_behaves_as_they_say(cluster_path):
    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream("/kafka", ttl=3600)
        own, ignored = to_policies({"cleanup.policy": "compact", "segment.bytes": "1024"})
        info = cluster.create_topic("/kafka:changelog", 1, own)
        assert ignored == ["segment.bytes"]
        assert (info.policies["compact"], info.policies["ttl"]) == (True, 0)
        shown = {
            e.name: e
            for e in describe(info.policies, info.overrides, cluster.stream("/kafka").policies)
        }
        assert (shown["cleanup.policy"].value, shown["cleanup.policy"].source) == ("compact", TOPIC)
        info = cluster.edit_topic(
            "/kafka:changelog", **unset_policies(["cleanup.policy"], info.overrides)
        )
        assert info.overrides == {} and info.policies["ttl"] == 3600
