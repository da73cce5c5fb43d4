"""The Messages tab: the --topic start, seek by offset and time, filter, follow the tail,
the detail pane's views, and the produce dialog."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from textual.widgets import Checkbox, DataTable, Input, Select, Static, TextArea

from console.screens.produce import ProduceScreen
from console.widgets.messages import MessagesPane
from engine import Consumer, Producer, TopicPartition
from tests.timing import scaled

pytestmark = pytest.mark.asyncio

BASE_MS = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)
TOPIC = "/t:a"


@pytest.fixture
def history(cluster):
    """/t:a, one partition, 300 messages v0..v299 one second apart (kept forever)."""
    cluster.create_stream("/t", ttl=0)
    cluster.create_topic(TOPIC, partitions=1)
    producer = Producer(cluster, acks=1, linger_ms=5)
    for i in range(300):
        producer.send(
            TOPIC, value=f"v{i}".encode(), key=f"k{i % 7}".encode(), timestamp_ms=BASE_MS + i * 1000
        )
    producer.send(
        TOPIC,
        value=b'{"a": 1, "b": [true]}',
        key=b"json",
        headers=[("trace", b"abc-123")],
        timestamp_ms=BASE_MS + 300_000,
    )
    producer.flush()
    producer.close()
    return cluster


def _offsets(pane: MessagesPane) -> list[int]:
    return [r.offset for r in pane.records.values()]


def _text(app, selector: str) -> str:
    return str(app.query_one(selector, Static).content)


async def _loaded(pilot, until, pane: MessagesPane, before: int) -> None:
    await until(pilot, lambda: pane.loads > before)


async def test_topic_start_shows_the_newest_page_and_the_detail(demo, make_app, until):
    app = make_app(topic="/apps/sensors:car-17")
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        assert app.query_one("#tabs").active == "tab-messages"
        assert pane.topic == "/apps/sensors:car-17"
        assert app.query_one("#msg-table", DataTable).row_count == 120
        head = _text(app, "#msg-detail-head")
        first = pane.selected_record()
        assert first is not None
        assert f"partition {first.partition}  offset {first.offset}" in head
        assert "header unit:" in head
        # The tree shows where the topic is.
        tree = app.query_one("#stream-tree")
        await until(
            pilot,
            lambda: (
                tree.cursor_node is not None
                and tree.cursor_node.data is not None
                and getattr(tree.cursor_node.data, "name", None) == "/apps/sensors:car-17"
            ),
        )
        before = pane.loads
        app.query_one("#msg-partition", Select).value = 1
        await _loaded(pilot, until, pane, before)
        assert {r.partition for r in pane.records.values()} == {1}
        assert len(pane.records) == 40  # oil-pressure and fuel-level land in partition 1


async def test_seek_by_offset_time_and_name(history, make_app, until):
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        assert _offsets(pane) == list(range(300, 100, -1))  # the newest page of 200, newest first

        async def seek(text: str) -> None:
            before = pane.loads
            await pilot.press("s")
            seek_input = app.query_one("#msg-seek", Input)
            assert seek_input.has_focus
            seek_input.value = text
            await pilot.press("enter")
            await _loaded(pilot, until, pane, before)

        await seek("250")
        assert _offsets(pane) == list(range(250, 301))
        await seek("2024-05-01T12:00:10Z")
        assert _offsets(pane)[:2] == [10, 11] and len(pane.records) == 200
        await seek("earliest")
        assert _offsets(pane)[0] == 0
        assert "from offset" not in _text(app, "#msg-status")
        # A bad seek is an error on the status line, and the page stays as it was.
        before = _offsets(pane)
        await pilot.press("s")
        app.query_one("#msg-seek", Input).value = "yesterday-ish"
        await pilot.press("enter")
        await until(pilot, lambda: "error" in _text(app, "#msg-status"))
        assert _offsets(pane) == before


async def test_filter_matches_key_value_and_headers(history, make_app, until):
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        filt = app.query_one("#msg-filter", Input)
        for needle, expected in (
            ("v29", [*range(299, 289, -1), 29]),  # in values; the newest first
            ("ABC-123", [300]),  # in a header, ignoring case
            ("json", [300]),  # in a key
        ):
            before = pane.loads
            filt.value = needle
            filt.focus()
            await pilot.press("enter")
            await _loaded(pilot, until, pane, before)
            assert _offsets(pane) == expected, needle


async def test_every_header_form_finds_the_same_messages(cluster, make_app, until):
    """The filter box reads the one filter grammar: `host: api-2`, `host=api-2` and
    `host:api-2` (all once 0 matches here) find the header; what reads two ways is refused
    on the status line and the page stays."""
    cluster.create_stream("/h", ttl=0)
    cluster.create_topic("/h:logs", partitions=1)
    producer = Producer(cluster, acks=1)
    for i in range(9):
        host = b"api-2" if i % 4 == 1 else b"api-1"
        producer.send("/h:logs", value=f"event {i}".encode(), headers=[("host", host)])
    producer.flush()
    producer.close()
    app = make_app(topic="/h:logs")
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        filt = app.query_one("#msg-filter", Input)
        for needle in ("host: api-2", "host=api-2", "host:api-2", "HOST=API-2"):
            before = pane.loads
            filt.value = needle
            filt.focus()
            await pilot.press("enter")
            await _loaded(pilot, until, pane, before)
            assert _offsets(pane) == [5, 1], needle  # newest first
            assert "filter header " in _text(app, "#msg-status")
        assert "filter header HOST = API-2 (" in _text(app, "#msg-status")
        before = pane.loads
        filt.value = "api-1"
        filt.focus()
        await pilot.press("enter")
        await _loaded(pilot, until, pane, before)
        assert _offsets(pane) == [8, 7, 6, 4, 3, 2, 0]  # text anywhere
        filt.value = "12:00"
        filt.focus()
        await pilot.press("enter")
        await until(pilot, lambda: "error" in _text(app, "#msg-status"))
        assert "'12' is not a plain header name" in _text(app, "#msg-status")
        assert _offsets(pane) == [8, 7, 6, 4, 3, 2, 0]
        assert pane.needle == "api-1"


async def test_follow_shows_a_message_produced_meanwhile(history, make_app, until):
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        await pilot.press("f")
        await until(pilot, lambda: pane.following and pane.loads >= 2)
        assert "following: 0 new" in _text(app, "#msg-status")

        producer = Producer(history, acks=1)
        meta = producer.send(TOPIC, value=b"breaking news", key=b"live").get(timeout=scaled(10))
        producer.close()
        await until(pilot, lambda: pane.arrived == 1)
        record = pane.selected_record()  # the cursor follows the newest row
        assert record is not None and record.offset == meta.offset == 301
        assert record.value == b"breaking news"
        assert "following: 1 new" in _text(app, "#msg-status")

        await pilot.press("f")  # stop: later messages no longer appear
        assert not pane.following
        producer = Producer(history, acks=1)
        producer.send(TOPIC, value=b"unseen").get(timeout=scaled(10))
        producer.close()
        # nothing may arrive: time passes on purpose, three of the follower's polls (250 ms)
        await pilot.pause(scaled(0.75))
        assert pane.arrived == 1 and 302 not in _offsets(pane)


async def test_detail_views_text_json_and_hex(history, make_app, until):
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        table = app.query_one("#msg-table", DataTable)
        table.focus()
        table.move_cursor(row=0)  # the newest first
        await until(pilot, lambda: "header trace: abc-123" in _text(app, "#msg-detail-head"))
        # the table has a column of the headers, name=value
        headers = [str(label.label) for label in table.columns.values()].index("Headers")
        assert str(table.get_row_at(0)[headers]) == "trace=abc-123"
        assert str(table.get_row_at(1)[headers]) == ""  # one without
        assert pane.selected_record().key == b"json"
        assert _text(app, "#msg-detail-body") == '{"a": 1, "b": [true]}'
        await pilot.press("v")
        pretty = '{\n  "a": 1,\n  "b": [\n    true\n  ]\n}'
        await until(pilot, lambda: _text(app, "#msg-detail-body") == pretty)
        await pilot.press("v")
        hex_start = "00000000  7b 22 61 22 3a 20 31"
        await until(pilot, lambda: _text(app, "#msg-detail-body").startswith(hex_start))


async def test_produce_dialog_writes_to_the_engine(history, make_app, until, click):
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        await pilot.press("p")
        assert isinstance(app.screen, ProduceScreen)
        screen = app.screen

        # Bad input stays in the dialog with a message, and writes nothing.
        screen.query_one("#produce-headers", TextArea).text = "unit: C"  # not the syntax
        await click(pilot, "#produce-send")
        expected = "line 1: header 'unit: C' is not name=value: write it as 'unit=C'"
        await until(pilot, lambda: expected in _text(screen, "#produce-error"))
        assert history.topic(TOPIC).partitions[0].log_end_offset == 301
        screen.query_one("#produce-partition", Input).value = "7"
        screen.query_one("#produce-headers", TextArea).text = ""
        await click(pilot, "#produce-send")  # pressed again: once it can take the click
        await until(pilot, lambda: "error" in _text(screen, "#produce-error"))
        assert history.topic(TOPIC).partitions[0].log_end_offset == 301

        screen.query_one("#produce-key", Input).value = "user-9"
        screen.query_one("#produce-value", TextArea).text = "hello\nworld"
        screen.query_one("#produce-headers", TextArea).text = "source=tui\n\nn = 1"
        screen.query_one("#produce-partition", Input).value = "0"
        before = pane.loads
        await click(pilot, "#produce-send")
        await until(pilot, lambda: not isinstance(app.screen, ProduceScreen))
        await _loaded(pilot, until, pane, before)  # the page is read again and shows it
        assert 301 in _offsets(pane)

    consumer = Consumer(history, enable_auto_commit=False)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 301)
    records = consumer.poll(timeout_ms=1000)[tp]
    consumer.close()
    assert [(r.key, r.value, list(r.headers)) for r in records] == [
        (b"user-9", b"hello\nworld", [("source", b"tui"), ("n", b"1")])
    ]


async def test_produce_dialog_sends_a_tombstone(history, make_app, until, click):
    app = make_app(topic=TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        await pilot.press("p")
        screen = app.screen
        assert isinstance(screen, ProduceScreen)
        screen.query_one("#produce-key", Input).value = "user-3"
        screen.query_one("#produce-value", TextArea).text = "ignored when null"
        screen.query_one("#produce-null", Checkbox).value = True
        screen.query_one("#produce-partition", Input).value = "0"
        await click(pilot, "#produce-send")
        await until(pilot, lambda: not isinstance(app.screen, ProduceScreen))

    consumer = Consumer(history, enable_auto_commit=False)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 301)
    records = consumer.poll(timeout_ms=1000)[tp]
    consumer.close()
    assert [(r.key, r.value) for r in records] == [(b"user-3", None)]
