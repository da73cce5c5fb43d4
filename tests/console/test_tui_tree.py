"""The stream tree: keyboard navigation, lazy paged topics, search, and opening a topic."""

from __future__ import annotations

import pytest
from textual.widgets import Tree

from console.widgets.messages import MessagesPane
from console.widgets.stream_tree import TOPIC_PAGE, MoreNode, StreamNode, StreamTree, TopicNode

pytestmark = pytest.mark.asyncio


def _stream_node(app, path):
    tree = app.query_one("#stream-tree", Tree)
    nodes = [
        n for n in tree.root.children if isinstance(n.data, StreamNode) and n.data.path == path
    ]
    return nodes[0] if nodes else None  # None while the tree is being reloaded


def _topics(node):
    if node is None:
        return []
    return [c.data.name for c in node.children if isinstance(c.data, TopicNode)]


async def test_navigate_the_tree_with_keys_and_open_a_topic(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        tree_widget = app.query_one(StreamTree)
        await until(pilot, lambda: tree_widget.loads >= 1)
        tree = app.query_one("#stream-tree", Tree)
        labels = [str(n.label) for n in tree.root.children]
        assert [label.split()[0] for label in labels] == [
            "/apps/clicks",
            "/apps/profiles",
            "/apps/sensors",
            "/ops/logs",
        ]
        tree.focus()
        await pilot.press("down", "down", "down", "enter")  # /apps/sensors, opened
        await until(pilot, lambda: tree_widget.loads >= 2)
        sensors = _stream_node(app, "/apps/sensors")
        assert sensors.is_expanded
        assert _topics(sensors) == ["/apps/sensors:car-17", "/apps/sensors:car-42"]
        assert app.stream == "/apps/sensors" and app.topic is None

        await pilot.press("down", "down", "enter")  # car-42
        assert app.topic == "/apps/sensors:car-42"
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        assert len(pane.records) == 120  # 6 sensors x 20 readings
        assert {r.topic for r in pane.records.values()} == {"/apps/sensors:car-42"}


async def test_topics_come_a_page_at_a_time(cluster, make_app, until, monkeypatch):
    cluster.create_stream("/big")
    for i in range(2000):
        cluster.create_topic(f"/big:t-{i:05d}", partitions=1)
    limits = []
    real = type(cluster).topic_names

    def spy(self, stream, prefix=None, limit=None, offset=0, *, after=None):
        limits.append((limit, after))
        return real(self, stream, prefix, limit, offset, after=after)

    monkeypatch.setattr(type(cluster), "topic_names", spy)
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        tree_widget = app.query_one(StreamTree)
        await until(pilot, lambda: tree_widget.loads >= 1)
        node = _stream_node(app, "/big")
        assert "2,000" in str(node.label)
        node.expand()
        await until(pilot, lambda: tree_widget.loads >= 2)
        assert len(_topics(node)) == TOPIC_PAGE
        more = node.children[-1]
        assert isinstance(more.data, MoreNode) and more.data.after == "t-00199"

        tree = app.query_one("#stream-tree", Tree)
        tree.select_node(more)
        await until(pilot, lambda: tree_widget.loads >= 3)
        names = _topics(node)
        assert len(names) == 2 * TOPIC_PAGE
        assert names[TOPIC_PAGE] == "/big:t-00200"  # keyset paging continues after the last
        assert sum(isinstance(c.data, MoreNode) for c in node.children) == 1
        # Never the whole stream: every lookup asked for one page (+1 to see if more exist).
        assert limits == [(TOPIC_PAGE + 1, None), (TOPIC_PAGE + 1, "t-00199")]


async def test_search_narrows_the_tree_and_opens_a_full_name(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        tree_widget = app.query_one(StreamTree)
        await until(pilot, lambda: tree_widget.loads >= 1)
        await pilot.press("slash")
        await pilot.press(*"/ops")
        await until(
            pilot,
            lambda: (
                [n.data.path for n in tree_widget.tree.root.children if n.data] == ["/ops/logs"]
            ),
        )
        search = app.query_one("#tree-search")
        search.value = "/ops/logs:wor"
        await until(pilot, lambda: _topics(_stream_node(app, "/ops/logs")) == ["/ops/logs:worker"])

        search.value = "/apps/clicks:web"
        await pilot.press("enter")
        assert app.topic == "/apps/clicks:web"
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        assert len(pane.records) == 80


async def test_refresh_in_the_tree_shows_a_new_stream(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        tree_widget = app.query_one(StreamTree)
        await until(pilot, lambda: tree_widget.loads >= 1)
        demo.create_stream("/apps/new")
        tree_widget.tree.focus()
        await pilot.press("f5")
        await until(pilot, lambda: _stream_node(app, "/apps/new") is not None)
