"""Snapshots of the main layouts, as text (see conftest.screen_text): fixed data, fixed
size, fixed principal; what follows the clock is either fixed here (message timestamps,
heat) or masked (a stream's creation time). PLET_UPDATE_SNAPSHOTS=1 rewrites them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from console.app import ConsoleApp
from console.screens.help import HelpScreen
from console.screens.produce import ProduceScreen
from engine import Cluster, OffsetAndMetadata, Principal, Producer, TopicPartition, VolumeInfo
from engine.heat import HeatMap, Load

pytestmark = pytest.mark.asyncio

BASE_MS = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)
EVENTS = "/snap/orders:events"
CREATED = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC ·"


@pytest.fixture
def snap(tmp_path, monkeypatch, record_job):
    """A small cluster with fixed content, its volumes and heat pinned (they follow files
    and the clock)."""
    import random

    import engine.partitionlet

    # Placement breaks ties between equally cold volumes at random; fix the draw.
    monkeypatch.setattr(engine.partitionlet, "random", random.Random(7))
    with Cluster.open(tmp_path / "snap", name="snap", principal=Principal("tester")) as cluster:
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
            ).get(timeout=10)  # one batch per message: the same bytes on every run
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
    # As engine.heat sums a window: the rates of the totals are over the whole window.
    total = Load(seconds=len(series) * 10)
    for load in series:
        total = total + load
    return total


async def test_main_layouts(snap, until, snapshot):
    app = ConsoleApp(snap.path, topic=EVENTS, cluster=snap, refresh_s=600)
    async with app.run_test(size=(140, 44)) as pilot:
        messages = app.query_one("#messages")
        await until(pilot, lambda: messages.loads >= 1 and app.query_one("#sidebar").loads >= 1)
        await snapshot(pilot, "messages")
        for key, tab, masks in (
            ("2", "partitions", ()),
            ("3", "policies", (CREATED,)),
            ("4", "groups", ()),
            ("6", "heat", ()),
            ("7", "replays", ()),
        ):
            await pilot.press(key)
            pane = app.query_one(f"#{tab}")
            await until(pilot, lambda pane=pane: pane.loads >= 1)
            await snapshot(pilot, tab, masks)


async def test_dialog_layouts(snap, until, snapshot):
    app = ConsoleApp(snap.path, topic=EVENTS, cluster=snap, refresh_s=600)
    async with app.run_test(size=(140, 44)) as pilot:
        messages = app.query_one("#messages")
        await until(pilot, lambda: messages.loads >= 1)
        await pilot.press("p")
        assert isinstance(app.screen, ProduceScreen)
        await snapshot(pilot, "produce")
        await pilot.press("escape")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await snapshot(pilot, "help")
