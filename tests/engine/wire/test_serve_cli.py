"""`plet serve` as a real process: serves kafka-python, stops cleanly on SIGTERM; refuses a
non-loopback address without --insecure."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

from kafka import KafkaProducer

from engine import Cluster, Consumer, TopicPartition
from tests.timing import scaled


def _plet(*args):
    return [sys.executable, "-m", "engine.cli", *args]


def test_plet_serve_serves_and_stops_on_sigterm(tmp_path):
    path = tmp_path / "c"
    Cluster.open(path, name="cli").close()
    proc = subprocess.Popen(
        _plet("serve", "--cluster", str(path), "--listen", "127.0.0.1:0"),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        match = re.search(r"on 127\.0\.0\.1:(\d+) ", line)
        assert match, line
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{match.group(1)}")
        producer.send("cli-topic", value=b"over the wire").get(timeout=scaled(30))
        producer.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=scaled(30)) == 0
        assert "stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Cluster.open(path) as cluster:
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("/kafka:cli-topic", 0)])
        records = consumer.poll(timeout_ms=2000)
        consumer.close()
    assert [r.value for rs in records.values() for r in rs] == [b"over the wire"]


def test_plet_serve_refuses_a_public_address_without_insecure(tmp_path):
    path = tmp_path / "c"
    Cluster.open(path, name="cli").close()
    done = subprocess.run(
        _plet("serve", "--cluster", str(path), "--listen", "0.0.0.0:0"),
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert done.returncode == 1
    assert "insecure" in done.stderr
