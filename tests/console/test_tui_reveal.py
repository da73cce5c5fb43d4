"""The command palette opens a topic and reveals it in the tree: its stream opened, the
cursor on it and scrolled into view, also when the topic lies beyond the pages the tree has
listed (the tree reads a stream's topics a page at a time)."""

from __future__ import annotations

import pytest
from textual.command import CommandPalette

from console.widgets import stream_tree
from console.widgets.stream_tree import MoreNode, StreamTree, TopicNode

pytestmark = pytest.mark.asyncio

FLEET = "/iot/fleet"
PAGE = 20  # the tree's page of topics, made small: 80 topics are four pages


def _vehicle(i: int) -> str:
    return f"{FLEET}:vehicle-{i:06d}"


@pytest.fixture
def fleet(cluster, monkeypatch):
    monkeypatch.setattr(stream_tree, "TOPIC_PAGE", PAGE)
    cluster.create_stream(FLEET, default_partitions=1)
    for i in range(80):
        cluster.create_topic(_vehicle(i))
    return cluster


async def _open_with_palette(app, pilot, until, topic: str) -> None:
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*topic)
    palette = app.screen

    def offered() -> list[str]:
        return [str(o.prompt) for o in palette.query_one("CommandList").options]

    await until(pilot, lambda: offered() == [f"Open topic {topic}"])
    await pilot.press("down", "enter")
    await until(pilot, lambda: app.topic == topic)


def _cursor_shows(tree, topic: str) -> bool:
    """The cursor is on `topic` and its line is within the tree's visible lines."""
    node = tree.cursor_node
    if node is None or not isinstance(node.data, TopicNode) or node.data.name != topic:
        return False
    top = tree.scroll_offset.y
    return top <= tree.cursor_line < top + tree.scrollable_content_region.height


async def test_the_palette_reveals_a_topic_beyond_the_pages_listed(fleet, make_app, until):
    app = make_app()
    async with app.run_test(size=(120, 20)) as pilot:
        sidebar = app.query_one(StreamTree)
        await until(pilot, lambda: sidebar.loads >= 1)
        tree = sidebar.tree
        await _open_with_palette(app, pilot, until, _vehicle(18))  # the first page, below the fold
        await until(pilot, lambda: _cursor_shows(tree, _vehicle(18)))
        assert tree.scroll_offset.y > 0  # scrolled to it

        await _open_with_palette(app, pilot, until, _vehicle(63))  # the fourth page
        await until(pilot, lambda: _cursor_shows(tree, _vehicle(63)))
        stream = sidebar._stream_node(FLEET)
        shown = [c.data.name for c in stream.children if isinstance(c.data, TopicNode)]
        assert shown == [_vehicle(i) for i in range(63, 80)]  # from it to the end
        first = stream.children[0]
        assert isinstance(first.data, MoreNode) and first.data.restart

        # "… from the first topic" lists the stream from its start again
        tree.focus()
        tree.select_node(first)
        await until(
            pilot,
            lambda: (
                [c.data.name for c in stream.children if isinstance(c.data, TopicNode)]
                == [_vehicle(i) for i in range(PAGE)]
            ),
        )
        more = stream.children[-1]
        assert isinstance(more.data, MoreNode) and more.data.after == "vehicle-000019"


async def test_the_palette_reveals_a_topic_of_a_stream_beyond_the_streams_listed(
    cluster, make_app, until, monkeypatch
):
    monkeypatch.setattr(stream_tree, "STREAM_PAGE", 3)
    for i in range(6):
        cluster.create_stream(f"/s{i}", default_partitions=1)
    cluster.create_topic("/s5:far")
    app = make_app()
    async with app.run_test(size=(120, 20)) as pilot:
        sidebar = app.query_one(StreamTree)
        await until(pilot, lambda: sidebar.loads >= 1)
        assert sidebar._stream_node("/s5") is None  # on the second page of streams
        tree = sidebar.tree
        await _open_with_palette(app, pilot, until, "/s5:far")
        await until(pilot, lambda: _cursor_shows(tree, "/s5:far"))
        first = tree.root.children[0]
        assert isinstance(first.data, MoreNode) and first.data.restart
        tree.select_node(first)  # "… from the first stream"
        await until(pilot, lambda: sidebar._stream_node("/s0") is not None)
