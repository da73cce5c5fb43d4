"""The topic page's partitions show each partitionlet's tier, size and archived file."""

from __future__ import annotations

import html
import re

from engine import Producer
from engine.units import format_bytes

TOPIC = "/old/logs:app"
OLD_MS = 1_600_000_000_000


def test_the_partitions_view_shows_tier_size_and_file(cluster, client):
    cluster.partitionlet_bytes = 1500  # roll small: several partitionlets
    cluster.create_stream("/old/logs", ttl=0, archive_after=60)
    cluster.create_topic(TOPIC, partitions=1)
    producer = Producer(cluster, acks=1)
    for i in range(200):
        producer.send(TOPIC, key=b"k%d" % i, value=b"line %d" % i, timestamp_ms=OLD_MS + i)
    producer.close()
    assert cluster.archive().archived
    infos = cluster.partitionlets(TOPIC)
    old = next(p for p in infos if p.tier == "archive")
    live = next(p for p in infos if p.tier == "live")

    page = client.get("/topics/old/logs:app?tab=partitions")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    items = {
        int(m.group(1)): m.group(0)
        for m in re.finditer(
            r'<li class="partitionlet[^"]*" title="partitionlet (\d+),.*?</li>', text, re.S
        )
    }
    archived = items[old.id]
    assert 'data-tier="archive"' in archived
    assert '<span class="tier">archive</span>' in archived
    assert "volume" not in archived
    assert html.escape(format_bytes(old.bytes)) in archived
    assert (
        f'<span class="mono pl-file" title="archived file">{html.escape(old.file)}</span>'
        in archived
    )
    assert old.file.startswith("file://") and old.file.endswith(".parquet")
    current = items[live.id]
    assert '<span class="tier">live</span>' in current
    assert f"volume {live.volume}" in current and "pl-file" not in current
