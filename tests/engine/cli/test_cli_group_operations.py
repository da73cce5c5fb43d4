"""`plet group reset` per partition, with --to / --shift-by and --dry-run's preview table,
and `plet group delete`, through click's runner on a real cluster."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine import Cluster, Consumer, OffsetAndMetadata, Producer, TopicPartition
from engine.cli import cli

TOPIC = "/s:t"


@pytest.fixture
def seeded(cluster_path):
    """/s:t, 2 partitions of 10 messages; group dash committed 3 and 6, then left."""
    with Cluster.open(cluster_path) as c:
        c.create_stream("/s", ttl=0)
        c.create_topic(TOPIC, partitions=2)
        p = Producer(c, acks=1)
        for i in range(20):
            p.send(TOPIC, value=b"v%d" % i, partition=i % 2)
        p.close()
        consumer = Consumer(c, group_id="dash", enable_auto_commit=False)
        tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
        consumer.assign(tps)
        consumer.commit({tps[0]: OffsetAndMetadata(3), tps[1]: OffsetAndMetadata(6)})
        consumer.close()
    return str(cluster_path)


def run(*args, code=0):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    return result.output


def committed(path: str) -> dict[int, int]:
    data = json.loads(run("group", "describe", "dash", "--json", "--cluster", path))
    return {p["partition"]: p["committed"] for p in data["partitions"]}


def test_dry_run_prints_the_plan_and_changes_nothing(seeded):
    out = run(
        "group", "reset", "dash", "--topic", TOPIC, "--to", "shift:+5", "--dry-run",
        "--cluster", seeded,
    )  # fmt: skip
    lines = out.splitlines()
    assert lines[0].split() == [
        "TOPIC", "PARTITION", "CURRENT", "NEW", "OFFSET", "LOG", "START", "LOG", "END",
        "LAG", "BEFORE", "LAG", "AFTER",
    ]  # fmt: skip
    assert lines[1].split() == [TOPIC, "0", "3", "8", "0", "10", "7", "2"]
    assert lines[2].split() == [TOPIC, "1", "6", "10", "0", "10", "4", "0"]  # clamped
    assert "dry run: nothing changed" in out
    assert committed(seeded) == {0: 3, 1: 6}


def test_reset_one_partition_by_shift(seeded):
    out = run(
        "group", "reset", "dash", "--topic", TOPIC, "--shift-by", "-4", "--partition", "1",
        "--cluster", seeded,
    )  # fmt: skip
    assert len(out.splitlines()) == 2  # the header and partition 1
    assert committed(seeded) == {0: 3, 1: 2}
    run("group", "reset", "dash", TOPIC, "--to", "latest", "--partition", "0", "--cluster", seeded)
    assert committed(seeded) == {0: 10, 1: 2}
    run("group", "reset", "dash", "--topic", TOPIC, "--to", "4", "--cluster", seeded)
    assert committed(seeded) == {0: 4, 1: 4}
    run("group", "reset", "dash", "--topic", TOPIC, "--to", "2000-01-01", "--cluster", seeded)
    assert committed(seeded) == {0: 0, 1: 0}


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("--to", "shift:back"), 1, "shift:-N"),
        (("--to", "someday"), 2, "earliest, latest, an offset"),
        (("--to", "earliest", "--partition", "2"), 1, "partitions 0 to 1, not 2"),
        (("--shift-by", "x"), 2, "not a valid integer"),
        (("--to", "earliest", "--to-latest"), 2, "exactly one"),
        (("--to-latest", "--to-earliest", "--dry-run"), 2, "exactly one"),
        ((), 2, "exactly one"),
    ],
)
def test_bad_input_is_a_clear_error(seeded, args, code, message):
    out = run("group", "reset", "dash", "--topic", TOPIC, *args, "--cluster", seeded, code=code)
    assert message in out
    assert "Traceback" not in out
    assert committed(seeded) == {0: 3, 1: 6}


def test_topic_given_twice_or_not_at_all(seeded):
    out = run("group", "reset", "dash", "--to", "earliest", "--cluster", seeded, code=2)
    assert "give the topic once" in out
    out = run(
        "group", "reset", "dash", TOPIC, "--topic", TOPIC, "--to", "earliest",
        "--cluster", seeded, code=2,
    )  # fmt: skip
    assert "give the topic once" in out


def test_delete(seeded):
    out = run("group", "delete", "dash", "--cluster", seeded)
    assert "deleted group dash" in out
    assert "dash" not in run("group", "list", "--cluster", seeded)
    out = run("group", "delete", "dash", "--cluster", seeded, code=1)
    assert "does not exist" in out


def test_delete_refused_while_a_consumer_is_live(seeded):
    with Cluster.open(seeded) as c:
        consumer = Consumer(c, TOPIC, group_id="dash", enable_auto_commit=False)
        try:
            consumer.poll(timeout_ms=500)  # joins
            out = run("group", "delete", "dash", "--cluster", seeded, code=1)
            assert "live member" in out
            out = run("group", "reset", "dash", TOPIC, "--to", "earliest", "--dry-run",
                      "--cluster", seeded, code=1)  # fmt: skip
            assert "live member" in out
        finally:
            consumer.close()
    assert committed(seeded) == {0: 3, 1: 6}


def test_group_permissions_are_shown_and_set(seeded):
    """`plet group perm show/set/list` and `plet group limit`: the CLI opened without a
    user is an administrator, so it sets a prefix's rules and the limit too."""
    shown = json.loads(run("group", "perm", "show", "dash", "--json", "--cluster", seeded))
    assert shown["aces"]["join_perm"] == "u:<creator>"
    assert shown["sources"]["join_perm"] == "default"
    assert shown["creator"]  # whoever ran the seeding consumer
    out = run(
        "group", "perm", "set", "dash", "--describe", "u:<creator> | g:ops", "--cluster", seeded
    )
    assert "set describe_perm of group dash" in out
    run("group", "perm", "set", "--prefix", "da", "--join", "g:etl", "--cluster", seeded)
    shown = json.loads(run("group", "perm", "show", "dash", "--json", "--cluster", seeded))
    assert shown["aces"]["describe_perm"] == "u:<creator> | g:ops"
    assert (shown["aces"]["join_perm"], shown["sources"]["join_perm"]) == ("g:etl", "prefix da")
    listed = json.loads(run("group", "perm", "list", "--json", "--cluster", seeded))
    assert listed == [
        {"pattern": "da", "prefix": True, "aces": {"join_perm": "g:etl"}},
        {"pattern": "dash", "prefix": False, "aces": {"describe_perm": "u:<creator> | g:ops"}},
    ]
    table = run("group", "perm", "show", "dash", "--cluster", seeded)
    assert "describe_perm" in table and "prefix da" in table
    out = run("group", "perm", "set", "dash", "--describe", "u:", "--cluster", seeded, code=1)
    assert "describe_perm" in out
    run("group", "perm", "set", "dash", "--cluster", seeded, code=2)
    assert "200 groups" in run("group", "limit", "200", "--cluster", seeded)
