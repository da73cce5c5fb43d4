"""Background maintenance of a long-lived process: retention and compaction on a timer,
and a record of the metrics history (engine.ops.metrics) every minute.

`Maintenance(cluster).start()` runs `enforce_retention`, `compact` and `archive` every `interval_s`
seconds in a thread of its own, never on the path of `send` or `poll`. A failing pass is
logged and the next one runs on time; a stream with invalid stored policies is skipped by
both passes (the others go on) and listed in `skipped_streams` for a console to show. Several processes may each run one on the same
cluster: every change is its own short transaction (engine.ops.retention).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from engine.errors import Closed, InvalidArgument
from engine.ops import balance, metrics, retention

T = TypeVar("T")

if TYPE_CHECKING:
    from engine.cluster import Cluster

log = logging.getLogger(__name__)


def _expire_producer_ids(cluster: Cluster) -> int:
    return cluster.expire_producer_ids()


def _finish_purges(cluster: Cluster) -> int:
    return cluster.finish_purges()


def _recover_transactions(cluster: Cluster) -> int:
    from engine.client.transactions import Transactions

    return Transactions(cluster).recover()


def _archive(cluster: Cluster) -> Any:
    from engine.ops import archive  # pyarrow: loaded by the first pass, not at import

    return archive.archive(cluster)


class Maintenance:
    """Runs retention and compaction of one cluster in a daemon thread.

    `run_once()` runs both passes now, in the calling thread, and returns their reports
    (None for a pass that failed). `last_retention`, `last_compaction` and `last_error`
    keep the latest outcomes for a console to show.
    """

    def __init__(
        self,
        cluster: Cluster,
        interval_s: float = 60,
        *,
        retention_enabled: bool = True,
        compaction_enabled: bool = True,
        archive_enabled: bool = True,
        metrics_enabled: bool = True,
    ) -> None:
        if (
            isinstance(interval_s, bool)
            or not isinstance(interval_s, int | float)
            or (interval_s <= 0)
        ):
            raise InvalidArgument(f"interval_s must be a positive number, got {interval_s!r}")
        self.cluster = cluster
        self.interval_s = float(interval_s)
        self.retention_enabled = retention_enabled
        self.compaction_enabled = compaction_enabled
        self.archive_enabled = archive_enabled
        self.metrics_enabled = metrics_enabled
        self.last_metrics: Any = None  # engine.ops.metrics.MetricsReport
        self.runs = 0
        self.last_retention: retention.RetentionReport | None = None
        self.last_compaction: retention.CompactionReport | None = None
        self.last_archive: Any = None  # engine.ops.archive.ArchiveReport
        self.last_error: BaseException | None = None
        self._stop = threading.Event()
        self._pass = threading.Lock()  # one pass at a time (the thread or run_once)
        self._thread: threading.Thread | None = None

    def start(self) -> Maintenance:
        """Start the thread; the first pass runs after one interval."""
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="plet-maintenance", daemon=True)
        self._thread.start()
        self.cluster.on_close(self.stop)  # its pass ends before the files close
        return self

    def stop(self, timeout: float | None = 30) -> None:
        """Stop the thread, waiting up to `timeout` seconds for a running pass to end."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None

    @property
    def skipped_streams(self) -> dict[str, str]:
        """Streams the last passes skipped (path -> what is wrong with their policies)."""
        found: dict[str, str] = {}
        for report in (self.last_retention, self.last_compaction):
            if report is not None:
                found.update(report.skipped_streams)
        return dict(sorted(found.items()))

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Maintenance:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def run_once(
        self,
    ) -> tuple[retention.RetentionReport | None, retention.CompactionReport | None]:
        """Enforce retention, then compact; errors are logged, not raised."""
        with self._pass:
            kept = compacted = None
            if self.retention_enabled:
                kept = self._guarded("retention", retention.enforce_retention)
                if kept is not None:
                    self.last_retention = kept
            if self.compaction_enabled:
                compacted = self._guarded("compaction", retention.compact)
                if compacted is not None:
                    self.last_compaction = compacted
            if self.archive_enabled:
                # after compaction: old sealed partitionlets to their Parquet files
                archived = self._guarded("archive", _archive)
                if archived is not None:
                    self.last_archive = archived
            # deleted topics whose space a full disk kept from being freed
            self._guarded("pending purges", _finish_purges)
            # copies left by a rebalance that died midway: they only cost disk space
            self._guarded("orphan clean-up", balance.clean_orphans)
            self._guarded("producer id expiry", _expire_producer_ids)
            # transactions a crash left decided, or open past their timeout
            self._guarded("transaction recovery", _recover_transactions)
            self.runs += 1
            return kept, compacted

    def _guarded(self, what: str, job: Callable[[Cluster], T]) -> T | None:
        if self.cluster.closed:
            return None
        try:
            report = job(self.cluster)
        except Exception as exc:  # a background job: log and try again next time
            if self.cluster.closed or isinstance(exc, Closed):
                return None
            self.last_error = exc
            log.exception(
                "%s of cluster %s failed; it runs again in %.0f s",
                what,
                self.cluster.path,
                self.interval_s,
            )
            return None
        log.debug("%s of cluster %s: %s", what, self.cluster.path, report)
        return report

    def record_metrics(self) -> None:
        """Add to the metrics history (engine.ops.metrics); errors are logged."""
        report = self._guarded("metrics", metrics.record)
        if report is not None:
            self.last_metrics = report

    def _loop(self) -> None:
        # The metrics history wants a record a minute, whatever the passes' interval.
        tick = min(self.interval_s, metrics.MINUTE_S) if self.metrics_enabled else self.interval_s
        next_pass = self.cluster.clock.monotonic() + self.interval_s
        if self.metrics_enabled:  # at once: the heat of the last day is there to catch up on
            self.record_metrics()
        while not self._stop.wait(tick):
            if self.cluster.closed:
                return
            if self.metrics_enabled:
                self.record_metrics()
            if self.cluster.clock.monotonic() >= next_pass:
                self.run_once()
                next_pass = self.cluster.clock.monotonic() + self.interval_s
