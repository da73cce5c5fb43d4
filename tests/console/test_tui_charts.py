"""The metrics history's charts (console/widgets/chart.py) in the Partitions, Groups and
Replication tabs, on a real cluster whose history was recorded, and the window key."""

from __future__ import annotations

import math

import pytest
from textual.widgets import DataTable

from console.widgets.chart import MetricChart, columns, plot
from engine import Cluster, Consumer, Producer, Replicator
from engine.clock import SYSTEM_CLOCK
from engine.ops import metrics
from engine.times import format_duration


def test_columns_keep_bursts_and_gaps():
    points = [(i, v) for i, v in enumerate([None, None, 0.0, 4.0, 1.0, None])]
    merged, per = columns(points, 3)
    assert (merged, per) == ([None, 4.0, 1.0], 2)  # a column is its highest point
    assert plot([None, 4.0, 2.0], 1) == [" █▄"]  # nothing recorded is blank


def _plot_lines(chart: MetricChart) -> list[str]:
    """The chart's drawn rows (between the title and the time axis)."""
    return str(chart.render()).split("\n")[1:-1]


@pytest.mark.asyncio
async def test_charts_show_the_recorded_history(cluster, tmp_path, monkeypatch, make_app, until):
    other = tmp_path / "dc2"
    Cluster.open(other, name="dc2").close()
    cluster.create_stream("/m")
    cluster.create_topic("/m:t", partitions=1)
    cluster.add_replica("/m", other, paused=True)
    producer = Producer(cluster)
    for _ in range(120):
        producer.send("/m:t", b"x" * 10)
    producer.flush()
    producer.close()
    reader = Consumer(cluster, "/m:t", group_id="g", auto_offset_reset="earliest")
    got = 0
    while got < 120:
        got += sum(len(r) for r in reader.poll(1000).values())
    reader.close()  # flushes the read heat
    cluster.reset_offsets("g", "/m:t", 90)  # a lag of 30
    # Three minutes on, this minute is complete: record it, and read it back, from then.
    later = SYSTEM_CLOCK.now_ms() + 3 * 60_000
    monkeypatch.setattr(SYSTEM_CLOCK, "now_ms", lambda: later)  # every cluster of the process
    cluster.record_metrics()  # the link's lag: 120, still paused
    cluster.resume_replica("/m", other)
    with Replicator(cluster) as replicator:
        assert replicator.run_once() == 120

    app = make_app(topic="/m:t")
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.press("2")
        charts = {
            c: app.query_one(f"#chart-{c}", MetricChart)
            for c in ("cluster-write", "cluster-read", "write", "read")
        }
        await until(pilot, lambda: all(c.loads >= 1 for c in charts.values()))
        for chart in charts.values():
            # 120 messages written and read in one minute, none since
            assert chart.series.peak == 2.0 and chart.series.latest == 0.0
            assert "latest 0.0 msg/s · peak 2.0 msg/s" in chart.summary()
            assert "█" in _plot_lines(chart)[0]  # the busy minute reaches the top
        assert charts["write"].series.scope == "topic"
        assert charts["write"].summary().startswith("/m:t writes")
        axis = str(charts["write"].render()).split("\n")[-1]
        width = charts["write"].size.width
        assert f"last 1 h, {format_duration(60 * math.ceil(60 / width))} per column" in axis

        await pilot.press("4")
        lag = app.query_one("#chart-group-lag", MetricChart)
        await until(pilot, lambda: lag.loads >= 1)
        assert lag.series.latest == 30 and "latest 30 msgs · peak 30 msgs" in lag.summary()
        # one reading, at the newest minute: every column before it is a gap
        top = _plot_lines(lag)[0]
        assert top.endswith("█") and top[:-1].strip() == ""

        await pilot.press("5")
        copied = app.query_one("#chart-repl-copied", MetricChart)
        link_lag = app.query_one("#chart-repl-lag", MetricChart)
        await until(pilot, lambda: copied.loads >= 1 and link_lag.loads >= 1)
        assert copied.series.name == metrics.replica_name("/m", cluster.replicas("/m")[0].target)
        assert copied.series.peak == 2.0 and "peak 2.0 msg/s" in copied.summary()
        assert link_lag.series.latest == 120
        labels = [str(c.label) for c in app.query_one("#repl-links", DataTable).columns.values()]
        assert "Msg/s (5 min)" in labels  # the steady rate, over 5 minutes

        before = link_lag.loads
        await pilot.press("w", "w", "w")  # 1 h -> 6 h -> 24 h -> 7 d
        await until(pilot, lambda: link_lag.loads >= before + 3)
        await until(pilot, lambda: link_lag.series.window_s == 604800)
        assert link_lag.series.resolution_s == 3600  # hours beyond a day
        axis = str(link_lag.render()).split("\n")[-1]
        per = math.ceil(168 / link_lag.size.width)
        assert f"last 7 d, {format_duration(3600 * per)} per column" in axis
        assert link_lag.series.latest == 120 and "█" in _plot_lines(link_lag)[0]  # its hour
