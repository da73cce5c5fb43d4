"""Long-running commands stop on SIGTERM (a service manager's stop, `kill`) as on Ctrl-C,
in real processes: `plet consume --group --follow` commits and leaves its group at once
(before, SIGTERM left a dead member that blocked offset resets until its session ended),
`plet produce` flushes what it read and says how much it wrote. The exit code is the shell's for the signal."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from engine import Cluster, Producer
from tests.timing import scaled, wait_until

PLET = [sys.executable, "-m", "engine.cli"]


@pytest.fixture
def topic(cluster_path):
    with Cluster.open(cluster_path) as c:
        c.create_stream("/s", ttl=0)
        c.create_topic("/s:t", partitions=1)
        producer = Producer(c)
        producer.send("/s:t", b"first").get(scaled(10))
        producer.close()
    return str(cluster_path)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_following_group_consumer_commits_and_leaves_on_a_signal(topic, signum, code):
    follower = subprocess.Popen(
        [*PLET, "consume", "/s:t", "--group", "g", "--follow", "--cluster", topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == b"first\n"  # consumed, now following
        with Cluster.open(topic) as c:
            assert [m.member_id for m in c.group("g").members]  # a live member
            follower.send_signal(signum)
            _, err = follower.communicate(timeout=scaled(30))
            assert follower.returncode == code, err
            assert b"consumed 1 message" in err and b"Traceback" not in err
            group = c.group("g")
            assert group.members == [] and group.state == "Empty"
            assert [p.committed for p in group.partitions] == [1]
    finally:
        follower.kill()
        follower.wait()


def test_produce_flushes_what_it_read_on_sigterm(topic):
    producer = subprocess.Popen(
        [*PLET, "produce", "/s:t", "--cluster", topic],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert producer.stdin is not None
        producer.stdin.write(b"second\nthird\n")
        producer.stdin.flush()  # the pipe stays open: produce is still reading
        with Cluster.open(topic) as c:
            wait_until(lambda: c.topic("/s:t").partitions[0].log_end_offset == 3, scaled(30))
        producer.send_signal(signal.SIGTERM)
        assert producer.wait(timeout=scaled(30)) == 143
        assert producer.stderr is not None
        err = producer.stderr.read()
        assert b"produced 2 messages" in err and b"Traceback" not in err
    finally:
        producer.kill()
        producer.wait()
