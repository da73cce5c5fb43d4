"""The Messages tab's query search: a JMESPath query searched to the end in a worker, the
matches and the progress shown as they come, Escape cancelling, a bad query said at once."""

from __future__ import annotations

import json

import pytest
from textual.widgets import DataTable, Input, Static

from console.widgets import messages as messages_widget
from console.widgets.messages import MessagesPane
from engine import Producer

pytestmark = pytest.mark.asyncio

TOPIC = "/t:readings"


@pytest.fixture
def readings(cluster):
    """/t:readings, 2 partitions, 2,000 JSON messages {"user": {"id": i}}, header unit C
    for even i, F for odd."""
    cluster.create_stream("/t", ttl=0)
    cluster.create_topic(TOPIC, partitions=2)
    with Producer(cluster, acks=1, linger_ms=5) as producer:
        for i in range(2000):
            producer.send(
                TOPIC,
                key=f"k{i}".encode(),
                value=json.dumps({"user": {"id": i}}).encode(),
                headers=[("unit", b"C" if i % 2 == 0 else b"F")],
            )
    return cluster


def _status(app) -> str:
    return str(app.query_one("#msg-status", Static).content)


async def _search(pilot, app, text: str) -> None:
    box = app.query_one("#msg-query", Input)
    box.value = text
    box.focus()
    await pilot.press("enter")


async def test_a_query_searches_to_the_end_and_shows_the_matches(readings, make_app, until):
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(160, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        await _search(pilot, app, 'value.user.id > 1990 && headers.unit == "C"')
        await until(
            pilot,
            lambda: pane.search_progress is not None and pane.search_progress.state == "done",
        )
        keys = sorted(r.key.decode() for r in pane.records.values())
        assert keys == ["k1992", "k1994", "k1996", "k1998"]
        assert app.query_one("#msg-table", DataTable).row_count == 4
        status = _status(app)
        assert "Scanned 2,000 of 2,000 offsets (100%), 4 matches" in status
        assert "Reached the end." in status
        assert not pane.searching


async def test_a_bad_query_is_said_with_its_column(readings, make_app, until):
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(160, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        rows = app.query_one("#msg-table", DataTable).row_count
        await _search(pilot, app, "value.user.id ==")
        await until(pilot, lambda: "query:" in _status(app))
        assert "ends too early (column 17)" in _status(app)
        assert not pane.searching and pane.search_job is None
        assert app.query_one("#msg-table", DataTable).row_count == rows  # the page stays


async def test_escape_cancels_a_running_search(readings, make_app, until, monkeypatch):
    # 100 s to the end: still running when Escape comes, however slow the machine (at 200 a
    # second, a crowded machine reached the end first)
    monkeypatch.setattr(messages_widget, "SEARCH_RATE", 20)
    monkeypatch.setattr(messages_widget.message_search, "CHUNK", 50)
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(160, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        await _search(pilot, app, "value.user.id >= `0`")
        await until(
            pilot,
            lambda: pane.search_progress is not None and pane.search_progress.scanned > 0,
        )
        assert pane.searching and "Escape cancels" in _status(app)
        app.query_one("#msg-table", DataTable).focus()
        await pilot.press("escape")
        await until(
            pilot,
            lambda: pane.search_progress is not None and pane.search_progress.state == "cancelled",
        )
        assert pane.search_progress.scanned < 2000
        assert "Cancelled." in _status(app)
        assert not pane.searching
