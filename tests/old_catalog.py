"""What a catalog written by an older engine may hold, made on purpose: tests of how the
engine copes with values it would refuse today."""

from __future__ import annotations

import json
import sqlite3
from typing import Any


def write_policies(cluster: Any, path: str, **bad: object) -> None:
    """Store `bad` policy values for stream `path` straight into the catalog file, as an
    engine without checks (before issue 12) would have left them."""
    stored = {**cluster.stream(path).policies, **bad}
    conn = sqlite3.connect(cluster.path / "catalog.db")
    try:
        with conn:
            conn.execute(
                "UPDATE streams SET policies = ? WHERE path = ?", (json.dumps(stored), path)
            )
    finally:
        conn.close()


def drop_scram_credentials(catalog_file: Any) -> None:
    """Remove the SCRAM credentials' table, as a catalog from before SCRAM lacks it (the
    cluster must be closed: opening it again adds the table back, empty)."""
    conn = sqlite3.connect(catalog_file)
    try:
        with conn:
            conn.execute("DROP TABLE scram_credentials")
    finally:
        conn.close()
