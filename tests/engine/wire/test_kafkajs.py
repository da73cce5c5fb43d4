"""kafkajs (Node) against the listener: Kafka's admin semantics it depends on (a reset to
earliest commits -2, DeleteRecords inside a partition) and a consumer's disconnect. Needs node and the kafkajs package of
package.json (`make` installs it into node_modules)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[3]
CLIENT = Path(__file__).with_name("kafkajs_client.js")


@pytest.fixture(scope="module", autouse=True)
def _kafkajs_installed():
    # `make setup-test` installs both; a missing one is a set-up bug, never a skip
    assert shutil.which("node"), "node is not installed: run make setup-test"
    assert (ROOT / "node_modules" / "kafkajs").is_dir(), "kafkajs is missing: run npm ci"


def kafkajs(wire, scenario: str, topic: str) -> dict:
    """Runs one scenario of kafkajs_client.js; its JSON answer."""
    env = {
        **os.environ,
        "NODE_PATH": str(ROOT / "node_modules"),
        "KAFKAJS_NO_PARTITIONER_WARNING": "1",
    }
    done = subprocess.run(
        ["node", str(CLIENT), wire.bootstrap, scenario, topic],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_reset_offsets_to_earliest_commits_minus_two_and_the_group_reads_again(wire):
    got = kafkajs(wire, "resetEarliest", "js-reset")
    messages = [f"m{i}" for i in range(5)]
    assert got["first"] == messages
    assert got["fetched"] == [[0, "-2"]]  # stored as committed, as a Kafka broker does
    assert got["second"] == messages
    # the engine shows it as committed, and an engine member resets by its policy
    group = wire.cluster.group("js-reset")
    assert [(p.committed, p.lag) for p in group.partitions] == [(5, 0)]


def test_delete_records_moves_the_low_watermark_to_the_offset_asked(wire):
    got = kafkajs(wire, "deleteRecords", "js-deleted")
    assert got["offsets"] == [[0, "3", "5"]]
    assert got["values"] == ["m3", "m4"]
    assert wire.cluster.topic("/kafka:js-deleted").partitions[0].log_start_offset == 3


def test_an_idle_member_disconnects_within_its_fetch_wait(wire):
    wire.cluster.create_topic("/kafka:js-idle", partitions=1)
    started = time.monotonic()
    got = kafkajs(wire, "disconnectIdle", "js-idle")
    assert got["values"] == ["m0"]
    # kafkajs waits for its parked fetch (maxWaitTimeInMs 500): the listener answers it on
    # time and LeaveGroup at once
    assert got["disconnectMs"] < scaled(2) * 1000
    assert time.monotonic() - started < scaled(30)
