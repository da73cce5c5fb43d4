"""SVG snapshots of the main layouts (pytest-textual-snapshot's `snap_compare`, stored by
syrupy in __snapshots__/): fixed data, fixed size, fixed principal, and whatever follows
the clock or the files pinned here (message timestamps, a stream's creation time, volume
sizes, heat, the replay job), since a snapshot cannot mask anything. After a deliberate
change of a layout, `pytest tests/console --snapshot-update` rewrites them."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from textual.widgets import Input, TextArea

from console.app import ConsoleApp
from console.screens.help import HelpScreen
from console.screens.produce import ProduceScreen
from console.widgets.chart import MetricChart
from engine import Cluster, OffsetAndMetadata, Principal, Producer, TopicPartition, VolumeInfo
from engine.ops.heat import HeatMap, Load
from tests.timing import scaled

BASE_MS = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)
EVENTS = "/snap/orders:events"
SIZE = (140, 44)


@pytest.fixture
def snap(tmp_path, monkeypatch, record_job):
    """A small cluster with fixed content, its creation times, volumes and heat pinned (they
    follow files and the clock)."""
    import random

    import engine.storage.placement
    from engine.clock import SYSTEM_CLOCK

    # Placement breaks ties between equally cold volumes at random; fix the draw.
    monkeypatch.setattr(engine.storage.placement, "random", random.Random(7))
    with Cluster.open(tmp_path / "snap", name="snap", principal=Principal("tester")) as cluster:
        # The catalog stamps streams and topics with the clock; the Policies tab shows a
        # stream's creation time.
        with monkeypatch.context() as clock:
            clock.setattr(SYSTEM_CLOCK, "now_ms", lambda: BASE_MS)
            cluster.create_stream("/snap/orders", ttl=0, default_partitions=2)
            cluster.create_stream("/snap/metrics", ttl=3600, compact=True)
            cluster.create_topic(EVENTS)
            cluster.create_topic("/snap/orders:audit", partitions=1)
            cluster.create_topic("/snap/metrics:cpu", partitions=1)
        producer = Producer(cluster, acks=1)
        statuses = ("new", "paid", "shipped")
        for i in range(12):
            value = f'{{"order":{100 + i},"status":"{statuses[i % 3]}"}}'.encode()
            producer.send(
                EVENTS,
                value=value,
                key=f"o-{i % 4}".encode(),
                partition=i % 2,
                headers=[("src", b"web")],
                timestamp_ms=BASE_MS + i * 60_000,
            ).get(timeout=scaled(10))  # one batch per message: the same bytes on every run
        producer.close()
        cluster.reset_offsets("billing", EVENTS, 3)
        from engine import Consumer

        consumer = Consumer(cluster, group_id="billing", enable_auto_commit=False)
        consumer.assign([TopicPartition(EVENTS, 1)])
        consumer.commit({TopicPartition(EVENTS, 1): OffsetAndMetadata(5)})
        consumer.close(autocommit=False)
        volumes = [
            VolumeInfo(v, str(cluster.path / f"volumes/vol-{v}.db"), 40960 * v, 512 * v, v, v, 0)
            for v in range(1, 5)
        ]
        monkeypatch.setattr(cluster, "volumes", lambda: volumes)
        record_job(
            cluster.path,
            "copy",
            {"source": EVENTS, "target": "/snap/orders:replayed", "from_offset": 2},
            "succeeded",
            BASE_MS,
            tasks_done=2,
            tasks_total=2,
            result={"messages": 8, "target": "/snap/orders:replayed"},
            started_ms=BASE_MS + 1_000,
            ended_ms=BASE_MS + 21_000,
        )
        monkeypatch.setattr(cluster, "heat", lambda window_s=300, **ranking: _heat())
        yield cluster


def _heat() -> HeatMap:
    buckets = [BASE_MS + i * 10_000 for i in range(30)]
    heat = HeatMap(300, 10, buckets)
    for p in range(2):
        series = [Load(write_messages=(i * (p + 1)) % 7, write_bytes=100 * i) for i in range(30)]
        tp = TopicPartition(EVENTS, p)
        heat.partition_series[tp] = series
        heat.partitions[tp] = _total(series)
    for v in range(1, 5):
        heat.volume_series[v] = [Load(write_messages=(i + v) % 5) for i in range(30)]
        heat.volumes[v] = _total(heat.volume_series[v])
    return heat


def _total(series: list[Load]) -> Load:
    # As engine.ops.heat sums a window: the rates of the totals are over the whole window.
    total = Load(seconds=len(series) * 10)
    for load in series:
        total = total + load
    return total


async def settle(pilot, quiet_s: float = 0.3, timeout: float = 10.0) -> None:
    """Let the screen settle: widgets finish their layout over a few frames (a table sizes
    its columns when the app is idle, which takes a while on a busy machine), so wait until
    the screen has not changed for `quiet_s`. Cursors stop blinking first, so that the
    snapshot does not catch one half of the blink or the other."""
    app = pilot.app
    for widget in app.screen.query("Input, TextArea"):
        assert isinstance(widget, Input | TextArea)
        widget.cursor_blink = False
    screen = app.export_screenshot()
    quiet_since = time.monotonic()
    deadline = quiet_since + scaled(timeout)
    while time.monotonic() - quiet_since < quiet_s and time.monotonic() < deadline:
        await pilot.pause(0.05)
        again = app.export_screenshot()
        if again != screen:
            screen, quiet_since = again, time.monotonic()


# Each tab (a pane of the same id) and the key that shows it; Messages shows at start.
TABS = {
    "messages": None,
    "partitions": "2",
    "policies": "3",
    "groups": "4",
    "heat": "6",
    "replays": "7",
}
DIALOGS = {"produce": ("p", ProduceScreen), "help": ("question_mark", HelpScreen)}


@pytest.mark.parametrize("layout", [*TABS, *DIALOGS])
def test_layout(layout, snap, until, snap_compare):
    app = ConsoleApp(snap.path, topic=EVENTS, cluster=snap, refresh_s=600)

    async def run_before(pilot) -> None:
        messages = app.query_one("#messages")
        sidebar = app.query_one("#sidebar")
        await until(pilot, lambda: messages.loads >= 1 and sidebar.loads >= 1)
        if layout in DIALOGS:
            key, screen = DIALOGS[layout]
            await pilot.press(key)
            await until(pilot, lambda: isinstance(app.screen, screen))
        elif TABS[layout] is not None:
            await pilot.press(TABS[layout])
            pane = app.query_one(f"#{layout}")
            await until(pilot, lambda: pane.loads >= 1)
            # its charts load their series in workers of their own (none is recorded here)
            charts = [c for c in pane.query(MetricChart) if c.series_name is not None]
            await until(pilot, lambda: all(c.loads >= 1 for c in charts))
            if layout == "groups":  # the chosen group's permissions load in a worker too
                await until(pilot, lambda: pane.selected is None or pane.perms is not None)
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
