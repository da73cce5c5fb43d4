"""The metrics history in the catalog (table `metrics`): the SQL of engine.ops.metrics.

One row is one bucket of one series: a resolution (60 or 3600 seconds), a scope
("cluster", "stream", "topic", "group", "replica"), the series' name in that scope, a metric
and the bucket's start. Counters hold what was counted in the bucket; gauges the latest
reading (minutes) or the highest (hours). Which metric is which, how many series a minute
may add and how long rows are kept are engine.ops.metrics' rules; this module only stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.storage.catalog import Catalog

# (resolution, scope, name, metric, bucket_ms, value)
Row = tuple[int, str, str, str, int, float]


class MetricsTable:
    """The `metrics` table of one catalog (`catalog.metrics`): every method is one short
    statement or transaction, buckets are replaced whole (never added to twice), and
    times are given by the caller (engine.ops.metrics, from the cluster's clock). Any
    thread may call it."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def last_bucket(self, resolution: int, scope: str, metric: str) -> int | None:
        """The start of the newest bucket of (`scope`, `metric`) at `resolution`."""
        rows = self._catalog.query(
            "SELECT max(bucket_ms) FROM metrics WHERE resolution = ? AND scope = ? "
            "AND name = '' AND metric = ?",
            (resolution, scope, metric),
        )
        bucket: int | None = rows[0][0]
        return bucket

    def put(self, rows: list[Row]) -> None:
        """Store `rows`, replacing the buckets they name."""
        if not rows:
            return
        with self._catalog.write():
            self._catalog.conn.executemany(
                "INSERT OR REPLACE INTO metrics "
                "(resolution, scope, name, metric, bucket_ms, value) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )

    def roll_up(
        self, source: int, target: int, first_ms: int, last_ms: int, gauges: tuple[str, ...]
    ) -> None:
        """(Re)compute the `target`-second buckets from first_ms to last_ms (their starts)
        out of the `source`-second ones: counters summed, `gauges` at their highest."""
        marks = ",".join("?" * len(gauges))
        width = target * 1000
        with self._catalog.write():
            self._catalog.conn.execute(
                "INSERT OR REPLACE INTO metrics "
                "(resolution, scope, name, metric, bucket_ms, value) "
                f"SELECT ?, scope, name, metric, bucket_ms / ? * ?, "
                f"CASE WHEN metric IN ({marks}) THEN max(value) ELSE sum(value) END "
                "FROM metrics WHERE resolution = ? AND bucket_ms >= ? AND bucket_ms < ? "
                "GROUP BY scope, name, metric, bucket_ms / ?",
                (target, width, width, *gauges, source, first_ms, last_ms + width, width),
            )

    def prune(self, resolution: int, before_ms: int) -> int:
        """Delete the `resolution` buckets that start before `before_ms`."""
        with self._catalog.write():
            return self._catalog.conn.execute(
                "DELETE FROM metrics WHERE resolution = ? AND bucket_ms < ?",
                (resolution, before_ms),
            ).rowcount

    def series(
        self, resolution: int, scope: str, name: str, metric: str, first_ms: int, last_ms: int
    ) -> list[tuple[int, float]]:
        """(bucket_ms, value) of one series from first_ms to last_ms, oldest first."""
        return self._catalog.query(
            "SELECT bucket_ms, value FROM metrics WHERE resolution = ? AND scope = ? "
            "AND name = ? AND metric = ? AND bucket_ms BETWEEN ? AND ? ORDER BY bucket_ms",
            (resolution, scope, name, metric, first_ms, last_ms),
        )

    def sums(
        self, resolution: int, scope: str, metric: str, first_ms: int
    ) -> list[tuple[str, float]]:
        """(name, sum of values) of every series of (`scope`, `metric`) from first_ms on."""
        return self._catalog.query(
            "SELECT name, sum(value) FROM metrics WHERE resolution = ? AND scope = ? "
            "AND metric = ? AND bucket_ms >= ? GROUP BY name",
            (resolution, scope, metric, first_ms),
        )

    def top(
        self, resolution: int, scope: str, metric: str, first_ms: int, limit: int
    ) -> list[tuple[str, float]]:
        """The `limit` series of (`scope`, `metric`) with the largest sums from first_ms on."""
        return self._catalog.query(
            "SELECT name, sum(value) AS total FROM metrics WHERE resolution = ? AND scope = ? "
            "AND metric = ? AND bucket_ms >= ? GROUP BY name ORDER BY total DESC, name LIMIT ?",
            (resolution, scope, metric, first_ms, limit),
        )
