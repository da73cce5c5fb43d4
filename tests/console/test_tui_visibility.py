"""What the terminal console shows of streams its user may not consume (issue 23; docs/WEB.md,
"What users see"): run as a user (a view of the cluster as them), its Heat tab lists only
the topics of streams they may consume, and a chart of another's topic says why it is
empty; the cluster's totals stay."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from console.widgets.chart import MetricChart
from engine import Principal, Producer

pytestmark = pytest.mark.asyncio


@pytest.fixture
def two(cluster):
    cluster.create_stream("/a", produce_perm="u:alice", consume_perm="u:alice")
    cluster.create_stream("/m", produce_perm="u:mallory", consume_perm="u:mallory")
    cluster.create_topic("/a:secret", 1)
    cluster.create_topic("/m:x", 1)
    for user, topic in (("alice", "/a:secret"), ("mallory", "/m:x")):
        producer = Producer(cluster.as_principal(Principal(user)))
        for _ in range(10):
            producer.send(topic, value=b"v", partition=0)
        producer.flush()
        producer.close()
    return cluster


def _labels(pane) -> list[str]:
    table = pane.query_one("#heat-table", DataTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def test_the_heat_tab_shows_only_what_its_user_may_consume(two, cluster_path, until):
    from console.app import ConsoleApp

    app = ConsoleApp(cluster_path, cluster=two.as_principal(Principal("mallory")), refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.press("6")
        pane = app.query_one("#heat")
        await until(pilot, lambda: pane.loads >= 1)
        labels = " ".join(_labels(pane))
        assert "/m:x" in labels and "/a:secret" not in labels
        assert pane.heat.total.write_messages == 20  # the cluster's totals stay
        # a chart of alice's topic: the engine's refusal, not her series
        chart = pane.app.query(MetricChart).first()
        chart.show_series("/a:secret", "topic", "/a:secret")
        await until(pilot, lambda: chart.error is not None)
        assert "consume_perm" in str(chart.error)
