"""Another console's cluster, read-only (`c` on a cluster of another console, when its API
token is set: console/remote.py): its streams and their topics in a tree, the newest
messages of the chosen topic in a table. Nothing here changes that cluster; Escape goes
back to this machine's cluster."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, Tree

from console.remote import RemoteCluster, RemoteError

MESSAGES = 50


class RemoteClusterScreen(Screen[None]):
    """Shows `remote` (closed when the screen is)."""

    BINDINGS = [
        Binding("escape", "leave", "Back"),
        Binding("r", "reload", "Refresh"),
    ]
    DEFAULT_CSS = """
    #remote-tree { width: 40; border-right: solid $primary; }
    #remote-status { height: 1; padding: 0 1; background: $boost; }
    #remote-messages { height: 1fr; }
    """

    def __init__(self, remote: RemoteCluster) -> None:
        super().__init__()
        self.remote = remote
        self.topic: str | None = None
        self.loaded_streams: list[str] = []
        self.rows: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Label(
            f"{self.remote.name} at {self.remote.url} (read-only, through its API)",
            id="remote-status",
        )
        with Horizontal():
            tree: Tree[str] = Tree(self.remote.name, id="remote-tree")
            tree.show_root = False
            yield tree
            with Vertical():
                table: DataTable[Any] = DataTable(id="remote-messages", cursor_type="row")
                table.add_columns("Partition", "Offset", "Timestamp", "Key", "Value")
                yield table
        yield Footer()

    def on_mount(self) -> None:
        self.app.sub_title = f"{self.remote.name} · another console, read-only"
        self.query_one(Tree).focus()
        self.load_streams()

    def status(self, text: str, error: bool = False) -> None:
        self.query_one("#remote-status", Label).update(
            Text(text, style="bold red" if error else "")
        )

    @work(thread=True, exclusive=True, group="remote-tree")
    def load_streams(self) -> None:
        try:
            who = self.remote.who()
            streams = self.remote.streams()
        except RemoteError as exc:
            self.app.call_from_thread(self.status, str(exc), True)
            return
        self.app.call_from_thread(self._show_streams, who, streams)

    def _show_streams(self, who: str, streams: list[str]) -> None:
        tree = self.query_one(Tree)
        tree.clear()
        for path in streams:
            tree.root.add(path, data=path, allow_expand=True)
        self.loaded_streams = streams
        self.status(
            f"{self.remote.name} at {self.remote.url} as {who} (read-only, through its API): "
            f"{len(streams)} streams"
        )

    @on(Tree.NodeExpanded)
    def _expanded(self, event: Tree.NodeExpanded[str]) -> None:
        node = event.node
        if node.parent is tree_root(node) and not node.children and node.data:
            self.load_topics(node.data)

    @work(thread=True, group="remote-topics")
    def load_topics(self, stream: str) -> None:
        try:
            topics = self.remote.topics(stream)
        except RemoteError as exc:
            self.app.call_from_thread(self.status, str(exc), True)
            return
        self.app.call_from_thread(self._show_topics, stream, topics)

    def _show_topics(self, stream: str, topics: list[dict[str, Any]]) -> None:
        node = next((n for n in self.query_one(Tree).root.children if n.data == stream), None)
        if node is None:
            return
        for topic in topics:
            node.add_leaf(f"{topic['topic']}  ({topic['messages']:,})", data=topic["name"])

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected[str]) -> None:
        if event.node.data and ":" in event.node.data:
            self.topic = event.node.data
            self.load_messages(event.node.data)

    def action_reload(self) -> None:
        if self.topic is not None:
            self.load_messages(self.topic)
        else:
            self.load_streams()

    @work(thread=True, exclusive=True, group="remote-messages")
    def load_messages(self, topic: str) -> None:
        try:
            rows = self.remote.messages(topic, MESSAGES)
        except RemoteError as exc:
            self.app.call_from_thread(self.status, str(exc), True)
            return
        self.app.call_from_thread(self._show_messages, topic, rows)

    def _show_messages(self, topic: str, rows: list[dict[str, Any]]) -> None:
        if topic != self.topic:
            return  # another topic was chosen since
        table = self.query_one("#remote-messages", DataTable)
        table.clear()
        for r in rows:
            table.add_row(
                str(r["partition"]),
                str(r["offset"]),
                str(r.get("timestamp", "")),
                _text(r.get("key")),
                _text(r.get("value")),
            )
        self.rows = rows
        self.status(f"{topic} in {self.remote.name}: the newest {len(rows)} messages")

    def action_leave(self) -> None:
        self.dismiss(None)

    def on_unmount(self) -> None:
        self.remote.close()


def tree_root(node: Any) -> Any:
    while node.parent is not None:
        node = node.parent
    return node


def _text(value: object) -> Text:
    """A key or value as the API gave it (text, or base64 for binary), on one line."""
    shown = "" if value is None else str(value)
    return Text(shown.replace("\n", " ")[:200])


__all__ = ["RemoteClusterScreen"]
