"""The CLI's group, heat, retention and compaction commands through click's runner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine import Cluster, Consumer, Producer
from engine.cli import cli


@pytest.fixture
def seeded(cluster_path):
    with Cluster.open(cluster_path) as c:
        c.create_stream("/s", ttl=0, compact=True, min_compaction_lag_ms=0)
        c.create_topic("/s:t", partitions=2)
        p = Producer(c, acks=1)
        for i in range(20):
            p.send("/s:t", key=b"k%d" % (i % 3), value=b"v%d" % i, partition=i % 2)
        p.close()
        consumer = Consumer(
            c, "/s:t", group_id="dash", auto_offset_reset="earliest", enable_auto_commit=False
        )
        got = 0
        while got < 20:
            got += sum(len(r) for r in consumer.poll(timeout_ms=200).values())
        consumer.commit()
        consumer.close()
    return str(cluster_path)


def run(*args, code=0):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    return result.output


def test_group_list_and_describe(seeded):
    out = run("group", "list", "--cluster", seeded)
    assert "dash" in out and "Empty" in out
    data = json.loads(run("group", "describe", "dash", "--json", "--cluster", seeded))
    assert data["lag"] == 0
    assert sorted((p["partition"], p["committed"]) for p in data["partitions"]) == [
        (0, 10),
        (1, 10),
    ]
    out = run("group", "describe", "nobody", "--cluster", seeded, code=1)
    assert "does not exist" in out


def test_group_reset(seeded):
    out = run("group", "reset", "dash", "/s:t", "--to-earliest", "--cluster", seeded)
    assert "NEW OFFSET" in out
    data = json.loads(run("group", "describe", "dash", "--json", "--cluster", seeded))
    assert [p["committed"] for p in data["partitions"]] == [0, 0]
    run("group", "reset", "dash", "/s:t", "--to-offset", "4", "--cluster", seeded)
    data = json.loads(run("group", "describe", "dash", "--json", "--cluster", seeded))
    assert data["lag"] == 12
    run("group", "reset", "dash", "/s:t", "--to-time", "2000-01-01T00:00:00Z", "--cluster", seeded)
    data = json.loads(run("group", "describe", "dash", "--json", "--cluster", seeded))
    assert data["lag"] == 20
    out = run("group", "reset", "dash", "/s:t", "--cluster", seeded, code=2)
    assert "exactly one" in out
    run(
        "group",
        "reset",
        "dash",
        "/s:t",
        "--to-latest",
        "--to-offset",
        "1",
        "--cluster",
        seeded,
        code=2,
    )


def test_heat(seeded):
    data = json.loads(run("heat", "--json", "--window", "60", "--cluster", seeded))
    assert sum(v["write_messages"] for v in data["volumes"].values()) == 20
    assert sum(p["write_messages"] for p in data["partitions"]) == 20
    out = run("heat", "--cluster", seeded)
    assert "WRITE MSG/S" in out and "/s:t" in out
    refused = run("heat", "--window", "1", "--cluster", seeded, code=2)  # a bad option value
    assert "'--window': 1 is not in the range 10<=x<=86400" in refused


def test_compact_and_retention(seeded):
    out = run("compact", "--cluster", seeded)
    assert "removed 14 messages" in out  # 20 messages, 3 keys over 2 partitions: 6 remain
    out = run("retention", "--cluster", seeded)
    assert "dropped 0 partitionlets" in out
