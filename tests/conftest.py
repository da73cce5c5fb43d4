"""Fixtures shared by every test folder: a fresh cluster directory on real SQLite files."""

from __future__ import annotations

import os
import sys

import pytest

# Spark workers and subprocess helpers must run this very interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture
def cluster_path(tmp_path):
    """Where a test's cluster lives (not created yet)."""
    return tmp_path / "cluster"


@pytest.fixture
def cluster(cluster_path):
    """A freshly created cluster with 4 volumes, closed after the test."""
    from engine import Cluster

    with Cluster.open(cluster_path, name="test") as c:
        yield c
