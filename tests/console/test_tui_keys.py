"""Keys right after opening a topic from the tree (the tree keeps the focus): produce,
follow, the tab digits and refresh work at once; a digit typed into the seek box stays
there. Also: the newest page lists the newest first, and a seek does not carry over to the
next topic opened."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.widgets import Input, TextArea

from console.screens.produce import ProduceScreen
from console.widgets.messages import MessagesPane
from console.widgets.stream_tree import StreamTree, TopicNode
from engine import Producer
from tests.timing import scaled

pytestmark = pytest.mark.asyncio

SIZE = (120, 36)
CAR = "/apps/sensors:car-17"
WEB = "/apps/clicks:web"


def _topic_node(app, name: str) -> Any:
    sidebar = app.query_one(StreamTree)
    stream = sidebar._stream_node(name.rpartition(":")[0])
    if stream is None:
        return None
    for child in stream.children:
        if isinstance(child.data, TopicNode) and child.data.name == name:
            return child
    return None


async def _open_from_tree(app, pilot, until, name: str) -> MessagesPane:
    """Open the topic as a user does: cursor onto it in the tree, Enter."""
    sidebar = app.query_one(StreamTree)
    await until(pilot, lambda: sidebar.loads >= 1)
    tree = sidebar.tree
    tree.focus()
    stream = sidebar._stream_node(name.rpartition(":")[0])
    assert stream is not None

    def cursor_on(node) -> Callable[[], bool]:
        def moved() -> bool:
            # The tree numbers its lines when it renders: under load, moving may need a
            # render first, so keep asking until the cursor is there.
            if tree.cursor_node is not node:
                tree.move_cursor(node)
            return tree.cursor_node is node

        return moved

    if not stream.is_expanded:
        await until(pilot, cursor_on(stream))
        await pilot.press("space")  # expand the stream: its topics are read
    await until(pilot, lambda: _topic_node(app, name) is not None)
    await until(pilot, cursor_on(_topic_node(app, name)))
    pane = app.query_one("#messages", MessagesPane)
    before = pane.loads
    await pilot.press("enter")
    await until(pilot, lambda: app.topic == name and pane.loads > before)
    assert tree.has_focus  # the tree keeps the focus: the keys below must work anyway
    return pane


async def test_p_at_once_opens_the_produce_dialog_on_key(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await _open_from_tree(app, pilot, until, CAR)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ProduceScreen))
        screen = app.screen
        assert screen.topic == CAR
        key = screen.query_one("#produce-key", Input)
        assert key.has_focus
        await pilot.press(*"k1")  # typing goes to the key
        assert key.value == "k1"
        assert screen.query_one("#produce-value", TextArea).text == ""


async def test_f_toggles_follow_from_the_tree(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        pane = await _open_from_tree(app, pilot, until, CAR)
        assert not pane.following
        await pilot.press("f")
        await until(pilot, lambda: pane.following)
        await pilot.press("f")
        await until(pilot, lambda: not pane.following)


async def test_digit_switches_tab_from_the_tree(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await _open_from_tree(app, pilot, until, CAR)
        await pilot.press("2")
        await until(pilot, lambda: app.query_one("#tabs").active == "tab-partitions")
        await pilot.press("1")
        await until(pilot, lambda: app.query_one("#tabs").active == "tab-messages")


async def test_r_refreshes_the_shown_tab_from_the_tree(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        pane = await _open_from_tree(app, pilot, until, CAR)
        producer = Producer(demo, acks=1)
        meta = producer.send(CAR, value=b"fresh", key=b"new").get(timeout=scaled(10))
        producer.close()
        before = pane.loads
        await pilot.press("r")
        await until(pilot, lambda: pane.loads > before)
        assert f"{meta.partition}:{meta.offset}" in pane.records
        # The tree, read again, still has the cursor on the open topic.
        tree = app.query_one(StreamTree).tree
        await until(
            pilot,
            lambda: (
                tree.cursor_node is not None and getattr(tree.cursor_node.data, "name", None) == CAR
            ),
        )


async def test_digits_typed_into_the_seek_box_stay_there(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await _open_from_tree(app, pilot, until, CAR)
        await pilot.click("#msg-seek")
        seek = app.query_one("#msg-seek", Input)
        await until(pilot, lambda: seek.has_focus)
        await pilot.press("1", "2")
        assert seek.value == "12"
        assert app.query_one("#tabs").active == "tab-messages"
        await pilot.press(*"frpv")  # the topic's letter keys are text here too
        assert seek.value == "12frpv"
        assert not isinstance(app.screen, ProduceScreen)


async def test_newest_lists_the_highest_offset_first(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        pane = await _open_from_tree(app, pilot, until, WEB)
        await until(pilot, lambda: len(pane.records) == 80)
        shown = list(pane.records.values())
        stamps = [r.timestamp for r in shown]
        assert stamps == sorted(stamps, reverse=True)
        # Row 0 of the table, where the cursor starts, is the newest message.
        newest = max(shown, key=lambda r: (r.timestamp, r.offset))
        assert pane.selected_record() == newest
        partition = newest.partition
        offsets = [r.offset for r in shown if r.partition == partition]
        assert offsets == sorted(offsets, reverse=True)


async def test_a_seek_does_not_carry_over_to_the_next_topic(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        pane = await _open_from_tree(app, pilot, until, CAR)
        await pilot.click("#msg-seek")
        seek = app.query_one("#msg-seek", Input)
        await until(pilot, lambda: seek.has_focus)
        await pilot.press("1", "0")
        before = pane.loads
        await pilot.press("enter")
        await until(pilot, lambda: pane.loads > before)
        assert "from offset 10" in str(app.query_one("#msg-status").content)
        assert min(r.offset for r in pane.records.values()) == 10

        pane = await _open_from_tree(app, pilot, until, WEB)
        assert seek.value == ""
        assert pane.seek.kind == "newest"
        assert "newest" in str(app.query_one("#msg-status").content)
        assert len(pane.records) == 80  # the whole topic: the newest page, not from 10 on
