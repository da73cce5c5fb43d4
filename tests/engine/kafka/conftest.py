"""Fixtures of the facade's tests: a clean environment, the test cluster's address."""

from __future__ import annotations

import time

import pytest

from engine.kafka import bootstrap
from tests.timing import scaled


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    """Neither the developer's PLET_* variables nor a client left open by a failed test
    change a test."""
    monkeypatch.delenv("PLET_CLUSTER", raising=False)
    monkeypatch.delenv("PLET_DEFAULT_STREAM", raising=False)
    yield
    for entry in list(bootstrap._clusters.values()):
        entry[0].close()
    bootstrap._clusters.clear()


@pytest.fixture
def servers(cluster):
    """bootstrap_servers for the test's cluster (created by the `cluster` fixture)."""
    return f"file://{cluster.path.resolve()}"


def drain(consumer, want, timeout=10):
    """Poll until `want` records came back (or time runs out); the records, in order."""
    out = []
    deadline = time.monotonic() + scaled(timeout)
    while len(out) < want and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=100).values():
            out.extend(records)
    return out
