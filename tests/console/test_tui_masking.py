"""Data masking in the terminal console: a stream's `mask` policy hides its fields from a
user without `unmask_perm` (engine.masking, applied by the browse service the Messages tab
reads through), and the status line says so; the stream's owner sees the data."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Static

from console.app import ConsoleApp
from console.widgets.messages import MessagesPane
from engine import Principal, Producer
from engine.masking import MARKER

pytestmark = pytest.mark.asyncio

TOPIC = "/pay:orders"
SECRET = "4111-1111"


@pytest.fixture
def masked(cluster):
    cluster.create_stream("/pay", consume_perm="p", mask="value.card.number, headers.token")
    cluster.create_topic(TOPIC, partitions=1)
    with Producer(cluster) as producer:
        order = {"id": 7, "card": {"number": SECRET, "exp": "12/30"}}
        producer.send(TOPIC, json.dumps(order).encode(), headers=[("token", b"t0p")])
    return cluster


def _text(app, selector: str) -> str:
    return str(app.query_one(selector, Static).content)


async def _shown(cluster, cluster_path, until) -> tuple[str, str, str]:
    """(detail head, detail body, status line) of the topic's one message."""
    app = ConsoleApp(cluster_path, topic=TOPIC, cluster=cluster, refresh_s=60.0)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1 and "7" in _text(app, "#msg-detail-body"))
        return (
            _text(app, "#msg-detail-head"),
            _text(app, "#msg-detail-body"),
            _text(app, "#msg-status"),
        )


async def test_a_viewer_sees_the_fields_masked_and_told_why(masked, cluster_path, until):
    viewer = masked.as_principal(Principal("bob"))
    head, body, status = await _shown(viewer, cluster_path, until)
    assert SECRET not in body and MARKER in body and "12/30" in body
    assert "t0p" not in head and MARKER in head
    assert "masked: value.card.number, headers.token (no unmask permission)" in status


async def test_the_owner_sees_the_data(masked, cluster_path, until):
    head, body, status = await _shown(masked, cluster_path, until)
    assert SECRET in body and "t0p" in head
    assert "masked" not in status
