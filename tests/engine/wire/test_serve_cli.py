"""`plet serve` as a real process: serves kafka-python, stops cleanly on SIGTERM; refuses a
non-loopback address without --insecure; its limit options reach the listener, are checked
and shown with their defaults."""

from __future__ import annotations

import inspect
import re
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from kafka import KafkaProducer

from engine import Cluster, Consumer, TopicPartition
from engine.cli import cli
from tests.engine.wire.test_bad_input import RECORD_LIST_TOO_LARGE, Raw, _batch, _produce
from tests.engine.wire.test_connection_limits import _closed_by_server
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


def _serving(path, *options):
    """`plet serve` with `options` as a process, and its port (once it listens)."""
    proc = subprocess.Popen(
        _plet("serve", "--cluster", str(path), "--listen", "127.0.0.1:0", *options),
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline()
    match = re.search(r"on 127\.0\.0\.1:(\d+) ", line)
    if match is None:
        proc.kill()
        proc.wait()
    assert match, line
    return proc, int(match.group(1))


def test_plet_serve_limits_reach_the_listener(tmp_path):
    """Small limits given as options bite: a third connection from one address is closed at
    once, a half frame within the frame timeout, a batch inflating past the decompression
    cap is refused, while a normal produce is served."""
    path = tmp_path / "c"
    with Cluster.open(path, name="cli") as cluster:
        cluster.create_stream("/kafka")
        cluster.create_topic("/kafka:t", partitions=1)
    proc, port = _serving(
        path,
        "--max-connections-per-address",
        "2",
        "--frame-timeout-s",
        "1",
        "--max-decompressed-bytes",
        "1MiB",
    )
    address = ("127.0.0.1", port)
    socks: list[socket.socket] = []
    try:
        raw = Raw(address)
        raw.sock.settimeout(scaled(5))
        socks.append(raw.sock)
        assert _produce(raw, "t", _batch(b"normal"))[0] == 0
        bomb = _batch(b"\0" * (2 * 1024 * 1024), compression=1)  # gzip: a few KiB
        assert len(bomb) < 64 * 1024
        assert _produce(raw, "t", bomb)[0] == RECORD_LIST_TOO_LARGE
        second = socket.create_connection(address, timeout=10)
        third = socket.create_connection(address, timeout=10)
        socks += [second, third]
        assert _closed_by_server(third, scaled(5))
        assert not _closed_by_server(second, 0.2)
        second.sendall(struct.pack(">i", 1000) + b"\0" * 500)  # half a frame, then nothing
        start = time.monotonic()
        assert _closed_by_server(second, scaled(10))
        assert 0.5 < time.monotonic() - start < scaled(5)
        assert _produce(raw, "t", _batch(b"still served"))[0] == 0
    finally:
        for sock in socks:
            sock.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=scaled(30))


@pytest.mark.parametrize(
    ("options", "code", "message"),
    [
        (("--max-connections", "0"), 2, "0 is not in the range x>=1"),
        (("--frame-timeout-s", "-1"), 2, "x>0"),
        (("--max-bytes-per-user", "12XB"), 2, "expected a size like"),
        (("--max-frame-bytes", "100"), 2, "at least 1,024 bytes"),
        (
            ("--min-session-timeout-ms", "5000", "--max-session-timeout-ms", "1000"),
            1,
            "error: min_session_timeout_ms (5000) is above max_session_timeout_ms (1000)",
        ),
    ],
)
def test_plet_serve_refuses_bad_limits(tmp_path, options, code, message):
    path = tmp_path / "c"
    Cluster.open(path, name="cli").close()
    done = subprocess.run(
        _plet("serve", "--cluster", str(path), "--listen", "127.0.0.1:0", *options),
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert done.returncode == code, done.stderr
    assert message in " ".join(done.stderr.split())


def test_plet_web_kafka_limits_need_kafka(tmp_path):
    path = tmp_path / "c"
    Cluster.open(path, name="cli").close()
    done = subprocess.run(
        _plet("web", "--cluster", str(path), "--kafka-max-connections", "5"),
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert done.returncode == 2
    assert "need --kafka HOST:PORT" in done.stderr


def test_the_help_shows_the_listeners_defaults():
    """`plet serve --help` shows KafkaServer's defaults."""
    from engine.wire import server

    shown = CliRunner().invoke(cli, ["serve", "--help"], terminal_width=200).output
    shown = " ".join(shown.split())
    defaults = inspect.signature(server.KafkaServer).parameters
    for name in (
        "max_fetch_wait_ms",
        "max_rebalance_timeout_ms",
        "min_session_timeout_ms",
        "max_session_timeout_ms",
        "max_connections_per_address",
        "max_connections_per_user",
        "login_timeout_s",
        "frame_timeout_s",
        "idle_timeout_s",
        "max_listed_topics",
    ):
        flag = "--" + name.replace("_", "-")
        assert re.search(rf"{flag} .*?\[default: {defaults[name].default}[;\]]", shown), name
    for name, mib in (
        ("max_frame_bytes", 100),
        ("max_bytes_before_login", 32),
        ("max_bytes_per_user", 256),
        ("max_decompressed_bytes", 64),
    ):
        assert defaults[name].default == mib * 1024 * 1024
        assert re.search(rf"--{name.replace('_', '-')} .*?\[default: {mib}MiB\]", shown), name
    assert "half the open-file limit" in shown
