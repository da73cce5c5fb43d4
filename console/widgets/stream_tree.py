"""The tree of streams and their topics, on the left.

Nothing is listed whole: streams come a page at a time (offset paging, by path), a stream's
topics are read when it is expanded, a page at a time with keyset paging (`after=` the last
name shown), so opening a stream of a million topics costs one page. A "load more" node
fetches the next page. The search box narrows by stream path prefix (`/apps`), by topic
prefix within a stream (`/apps/sensors:car`) or by topic prefix everywhere (`car`); Enter on
a full topic name opens it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Input, Tree
from textual.widgets.tree import TreeNode

from console.events import Loaded, StreamSelected, TopicSelected
from engine import names

if TYPE_CHECKING:
    from console.app import ConsoleApp

STREAM_PAGE = 100
TOPIC_PAGE = 200
_SEARCH_DELAY_S = 0.3


@dataclass
class StreamNode:
    path: str
    topics: int
    loaded: bool = False


@dataclass(frozen=True)
class TopicNode:
    name: str  # the full name


@dataclass(frozen=True)
class MoreNode:
    stream: str | None  # None: more streams
    after: str | None = None  # topics: the last name shown, within the stream
    offset: int = 0  # streams: how many are shown
    restart: bool = False  # topics: list the stream again from its first topic


@dataclass(frozen=True)
class Search:
    stream_prefix: str | None
    topic_prefix: str | None
    open_stream: str | None  # expand this stream at once

    @classmethod
    def parse(cls, text: str) -> Search:
        text = text.strip()
        if not text:
            return cls(None, None, None)
        if text.startswith("/"):
            stream, sep, topic = text.partition(":")
            if sep:
                return cls(stream, topic or None, stream)
            return cls(stream, None, None)
        return cls(None, text, None)


class StreamTree(Vertical):
    """Search box and tree. Posts `StreamSelected` and `TopicSelected`."""

    # Reached from the search box only: the tree takes its own down arrow.
    BINDINGS = [Binding("down", "focus_tree", "To the tree", show=False)]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.search = Search(None, None, None)
        self._generation = 0
        self._timer: Timer | None = None
        self._reveal: str | None = None  # a topic to put the cursor on once it is listed
        self.loads = 0  # pages shown, for tests

    def compose(self) -> ComposeResult:
        yield Input(
            placeholder="search: /stream, /stream:topic, topic",
            id="tree-search",
            compact=True,
        )
        tree: Tree[Any] = Tree("cluster", id="stream-tree")
        tree.show_root = True
        tree.guide_depth = 2
        yield tree

    @property
    def tree(self) -> Tree[Any]:  # type: ignore[override]  # DOMNode.tree (a Rich tree of the DOM, for debugging) is not used here
        return self.query_one("#stream-tree", Tree)

    @property
    def console(self) -> ConsoleApp:
        return self.app  # type: ignore[return-value]  # mounted in ConsoleApp only

    # --- loading ----------------------------------------------------------------------

    def load(self, reveal: str | None = None) -> None:
        """Start again from the first page of streams (with the current search); with
        `reveal`, put the cursor back on that topic once it is listed again."""
        cluster = self.console.cluster
        if cluster is None:
            return
        if reveal is not None:
            self._reveal = reveal
        self._generation += 1
        tree = self.tree
        tree.reset(Text(cluster.name, style="bold"))
        tree.root.expand()
        self._load_streams(self._generation, 0)

    @work(thread=True, group="tree")
    def _load_streams(self, generation: int, offset: int) -> None:
        try:
            search = self.search
            cluster = self.console.cluster
            if cluster is None:
                return  # closed since the load began
            infos = cluster.streams(
                prefix=search.stream_prefix, limit=STREAM_PAGE + 1, offset=offset
            )
            rows = []
            for info in infos[:STREAM_PAGE]:
                count = info.topic_count
                if search.topic_prefix:
                    count = cluster.topic_count(info.path, prefix=search.topic_prefix)
                rows.append((info.path, count))
            data = ("streams", offset, rows, len(infos) > STREAM_PAGE)
            self.post_message(Loaded(generation, data))
        except Exception as exc:  # shown to the user
            self.post_message(Loaded(generation, error=exc))

    @work(thread=True, group="tree")
    def _load_stream_window(self, generation: int, stream: str) -> None:
        """Stream `stream` alone (beyond the pages of streams listed), to reveal a topic."""
        try:
            cluster = self.console.cluster
            if cluster is None:
                return  # closed since the load began
            found = cluster.streams(prefix=stream, limit=1)  # the path itself sorts first
            if not found or found[0].path != stream:
                return  # no such stream: nothing to show
            self.post_message(Loaded(generation, ("stream", stream, found[0].topic_count)))
        except Exception as exc:  # shown to the user
            self.post_message(Loaded(generation, error=exc))

    @work(thread=True, group="tree")
    def _load_window(self, generation: int, topic: str) -> None:
        """The stream's topics from `topic` on (a topic beyond the pages shown, to reveal)."""
        stream, _, short = topic.rpartition(":")
        try:
            cluster = self.console.cluster
            if cluster is None:
                return  # closed since the load began
            if cluster.topic_names(stream, prefix=short, limit=1) != [topic]:
                return  # no such topic (a name typed in the search box): nothing to show
            found = cluster.topic_names(
                stream, prefix=self.search.topic_prefix, limit=TOPIC_PAGE, after=short
            )
            data = ("window", stream, [topic, *found[: TOPIC_PAGE - 1]], len(found) >= TOPIC_PAGE)
            self.post_message(Loaded(generation, data))
        except Exception as exc:  # shown to the user
            self.post_message(Loaded(generation, error=exc))

    @work(thread=True, group="tree")
    def _load_topics(self, generation: int, stream: str, after: str | None) -> None:
        try:
            cluster = self.console.cluster
            if cluster is None:
                return  # closed since the load began
            found = cluster.topic_names(
                stream, prefix=self.search.topic_prefix, limit=TOPIC_PAGE + 1, after=after
            )
            data = ("topics", stream, found[:TOPIC_PAGE], len(found) > TOPIC_PAGE)
            self.post_message(Loaded(generation, data))
        except Exception as exc:  # shown to the user
            self.post_message(Loaded(generation, error=exc))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        if message.seq != self._generation:
            return
        if message.error is not None:
            self.notify(str(message.error), severity="error", timeout=6)
            return
        kind = message.data[0]
        if kind == "streams":
            _, offset, rows, more = message.data
            self._add_streams(offset, rows, more)
        elif kind == "stream":
            _, path, count = message.data
            root = self.tree.root
            root.remove_children()
            root.add_leaf(
                Text("… from the first stream", style="italic"), MoreNode(None, restart=True)
            )
            self._add_streams(0, [(path, count)], False)
        elif kind == "window":
            _, stream, found, more = message.data
            node = self._stream_node(stream)
            if node is not None:
                node.remove_children()
                node.add_leaf(
                    Text("… from the first topic", style="italic"),
                    MoreNode(stream, restart=True),
                )
                self._add_topics(stream, found, more)
        else:
            _, stream, found, more = message.data
            self._add_topics(stream, found, more)
        self.loads += 1

    def reveal(self, topic: str) -> None:
        """Open the topic's stream in the tree and put the cursor on the topic, scrolled
        into view. A topic beyond the pages shown (a stream of 100,000 topics) is listed
        with the page that follows it, under a node that lists the stream from its first
        topic again."""
        self._reveal = topic
        node = self._stream_node(topic.rpartition(":")[0])
        if node is None:
            # listed when the streams arrive (`_add_streams` opens its stream), or beyond
            # the pages of streams listed
            if any(isinstance(c.data, MoreNode) for c in self.tree.root.children):
                self._load_stream_window(self._generation, topic.rpartition(":")[0])
            return
        if not node.is_expanded:
            node.expand()  # its first page is read, then `_add_topics` reveals
        elif isinstance(node.data, StreamNode) and node.data.loaded and node.children:
            self._move_to_reveal(node)

    def _move_to_reveal(self, stream_node: TreeNode[Any]) -> None:
        for child in stream_node.children:
            if isinstance(child.data, TopicNode) and child.data.name == self._reveal:
                self._reveal = None
                self._place_cursor(child)
                return
        if self._reveal and any(isinstance(c.data, MoreNode) for c in stream_node.children):
            # beyond the pages listed: list it with the page after it (`_reveal` stays set
            # for `_add_topics` to find it there)
            self._load_window(self._generation, self._reveal)

    def _place_cursor(self, node: TreeNode[Any], tries: int = 20) -> None:
        """Cursor on `node`, scrolled into view. The tree numbers its lines when it renders:
        until the node has its line, try again after the next refresh."""
        tree = self.tree
        if tree.cursor_node is not node:
            tree.get_node_at_line(0)  # numbers the lines (a render may not have yet)
            tree.move_cursor(node)
        if tree.cursor_node is node:
            tree.scroll_to_node(node, animate=False)
        elif tries and node.tree is tree:
            tree.call_after_refresh(self._place_cursor, node, tries - 1)

    def _remove_more(self, parent: TreeNode[Any]) -> None:
        for child in list(parent.children):
            if isinstance(child.data, MoreNode) and not child.data.restart:
                child.remove()

    def _add_streams(self, offset: int, rows: list[tuple[str, int]], more: bool) -> None:
        root = self.tree.root
        self._remove_more(root)
        for path, count in rows:
            label = Text(path)
            label.append(f"  {count:,}", style="dim")
            node = root.add(label, StreamNode(path, count), allow_expand=count > 0)
            reveal = self._reveal and self._reveal.rpartition(":")[0] == path
            if path == self.search.open_stream or reveal:
                node.expand()
        if more:
            root.add_leaf(
                Text("… more streams", style="italic"), MoreNode(None, offset=offset + len(rows))
            )
        if not rows and offset == 0:
            root.add_leaf(Text("(no streams)", style="dim italic"))
        wanted = self._reveal.rpartition(":")[0] if self._reveal else None
        if wanted and more and self._stream_node(wanted) is None:
            self._load_stream_window(self._generation, wanted)  # beyond this page

    def _stream_node(self, stream: str) -> TreeNode[Any] | None:
        for node in self.tree.root.children:
            if isinstance(node.data, StreamNode) and node.data.path == stream:
                return node
        return None

    def _add_topics(self, stream: str, found: list[str], more: bool) -> None:
        node = self._stream_node(stream)
        if node is None:
            return
        self._remove_more(node)
        for name in found:
            node.add_leaf(name.rpartition(":")[2], TopicNode(name))
        if more and found:
            node.add_leaf(
                Text("… more topics", style="italic"),
                MoreNode(stream, after=found[-1].rpartition(":")[2]),
            )
        if self._reveal and self._reveal.rpartition(":")[0] == stream:
            self._move_to_reveal(node)

    # --- events -----------------------------------------------------------------------

    @on(Tree.NodeExpanded)
    def _expanded(self, event: Tree.NodeExpanded[Any]) -> None:
        data = event.node.data
        if isinstance(data, StreamNode) and not data.loaded:
            data.loaded = True
            self._load_topics(self._generation, data.path, None)

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected[Any]) -> None:
        data = event.node.data
        if isinstance(data, StreamNode):
            self.post_message(StreamSelected(data.path))
        elif isinstance(data, TopicNode):
            self.post_message(TopicSelected(data.name))
        elif isinstance(data, MoreNode):
            event.node.set_label(Text("… loading", style="italic"))
            if data.restart and data.stream is None:
                self.load()
            elif data.restart and data.stream is not None:
                parent = event.node.parent
                if parent is not None:
                    parent.remove_children()
                self._load_topics(self._generation, data.stream, None)
            elif data.stream is None:
                self._load_streams(self._generation, data.offset)
            else:
                self._load_topics(self._generation, data.stream, data.after)

    @on(Input.Changed, "#tree-search")
    def _search_changed(self, event: Input.Changed) -> None:
        # Wait for a pause in typing: each search is a round of catalog queries.
        if self._timer is not None:
            self._timer.stop()
        value = event.value
        self._timer = self.set_timer(_SEARCH_DELAY_S, lambda: self.apply_search(value))

    def apply_search(self, text: str) -> None:
        search = Search.parse(text)
        if search != self.search:
            self.search = search
            self.load()

    @on(Input.Submitted, "#tree-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if ":" in text:
            try:
                names.split_full_name(text)
            except ValueError:
                pass
            else:
                self.post_message(TopicSelected(text))
                return
        # The focus stays in the box (down arrow moves it to the tree): had it moved, the
        # next letters typed would be the app's keys ("v" cycles the view, "e" opens a dialog).
        self.apply_search(text)

    def action_focus_tree(self) -> None:
        self.tree.focus()
