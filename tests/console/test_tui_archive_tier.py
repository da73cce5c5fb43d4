"""The Partitions tab shows each partitionlet's tier, size and archived file."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Static

from console.widgets.partitions import PartitionsPane
from engine import Producer
from engine.units import format_bytes

pytestmark = pytest.mark.asyncio

TOPIC = "/old/logs:app"
OLD_MS = 1_600_000_000_000


@pytest.fixture
def archived(cluster_path):
    from engine import Cluster

    with Cluster.open(cluster_path, name="test", partitionlet_bytes=1500) as cluster:
        cluster.create_stream("/old/logs", ttl=0, archive_after=60)
        cluster.create_topic(TOPIC, partitions=1)
        producer = Producer(cluster, acks=1)
        for i in range(200):
            producer.send(TOPIC, key=b"k%d" % i, value=b"line %d" % i, timestamp_ms=OLD_MS + i)
        producer.close()
        assert cluster.archive().archived
        yield cluster


async def test_partitions_show_an_archived_partitionlets_tier_size_and_file(
    archived, cluster_path, until
):
    from console.app import ConsoleApp

    infos = archived.partitionlets(TOPIC)
    old = next(p for p in infos if p.tier == "archive")
    live = next(p for p in infos if p.tier == "live")
    app = ConsoleApp(cluster_path, topic=TOPIC, cluster=archived, refresh_s=60.0)
    async with app.run_test(size=(200, 50)) as pilot:
        app.open_path(TOPIC)
        await pilot.press("2")
        pane = app.query_one("#partitions")
        assert isinstance(pane, PartitionsPane)
        await until(pilot, lambda: pane.loads >= 1)
        chains = str(app.query_one("#part-chains", Static).content)
        assert f"[#{old.id} archive {old.base_offset:,}..{old.last_offset:,}" in chains
        assert f"[#{live.id} vol {live.volume} " in chains
        table = app.query_one("#part-table", DataTable)
        row = [str(c) for c in table.get_row(str(old.id))]
        assert row[2:4] == ["archive", "-"]
        assert row[8] == format_bytes(old.bytes) and old.bytes > 0
        # the cluster's own archive folder: the file's path inside the cluster directory
        assert old.file.startswith("file://")
        assert row[-1] == old.file.split(str(cluster_path.resolve()) + "/", 1)[1]
        assert row[-1].startswith("archive/old/logs/app/0/")
        live_row = [str(c) for c in table.get_row(str(live.id))]
        assert live_row[2:4] == ["live", str(live.volume)] and live_row[-1] == "-"
