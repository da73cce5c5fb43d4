"""`ConsoleApp`: the Textual terminal console (`plet tui`).

The engine is injected: pass an open `Cluster` as `cluster=` (tests do), or the app opens
the one at `cluster_path` in a worker and closes it on exit. With `clusters=` (the list of
engine.served_clusters, as `plet web` serves it), `c` switches to another of them: each is
opened once, when first shown, and kept open until exit (a worker may still be reading the
one left). Every engine call runs in a worker thread; results come back as events
(console.events), so the UI never waits on SQLite. The tree on the left picks a stream or topic; each tab is a `Pane` that shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.widgets import Footer, Header, Input, TabbedContent, TabPane

from console.commands import ConsoleCommands
from console.events import ClusterReady, StreamSelected, TopicSelected
from console.widgets.chart import WINDOWS, MetricChart, next_window, window_label
from console.widgets.groups import GroupsPane
from console.widgets.heat import HeatPane
from console.widgets.messages import MessagesPane
from console.widgets.pane import Pane
from console.widgets.partitions import PartitionsPane
from console.widgets.policies import PoliciesPane
from console.widgets.replays import ReplaysPane
from console.widgets.replication import ReplicationPane
from console.widgets.stream_tree import StreamTree
from console.widgets.transactions import TransactionsPane
from engine import Cluster
from engine.auth.actions import Allowed
from engine.errors import NotACluster
from engine.ops import check
from engine.served_clusters import ServedCluster

REFRESH_S = 3.0

PANES: dict[str, type[Pane]] = {
    "messages": MessagesPane,
    "partitions": PartitionsPane,
    "policies": PoliciesPane,
    "groups": GroupsPane,
    "replication": ReplicationPane,
    "heat": HeatPane,
    "replays": ReplaysPane,
    "transactions": TransactionsPane,
}


class ConsoleApp(App[None]):
    """Browse and administer the cluster at `cluster_path`; start on `topic` if given."""

    CSS_PATH = "app.tcss"
    TITLE = "Partitionlet"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    TABS: ClassVar[tuple[tuple[str, str], ...]] = tuple((name, name.capitalize()) for name in PANES)
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark,f1", "help", "Help"),
        Binding("slash", "search", "Search"),
        Binding("r,f5,ctrl+r", "refresh", "Refresh"),
        # The topic's keys live here, not on the Messages pane: after a topic is opened
        # from the tree, the tree keeps the focus and they must work at once. A focused
        # Input or TextArea still gets them as text (Textual drops a binding whose key the
        # focused widget consumes), and a dialog's screen does not see them at all.
        Binding("f", "follow", "Follow"),
        Binding("p", "produce", "Produce"),
        Binding("s", "seek", "Seek"),
        Binding("ctrl+f", "filter", "Filter", show=False),
        Binding("v", "cycle_view", "Text/JSON/hex"),
        Binding("w", "cycle_window", "Chart window"),
        Binding("e", "permissions", "Permissions", show=False),
        # the Groups pane's own `o` first; from anywhere else, the group selected there
        Binding("o", "reset_group", "Reset offsets", show=False),
        Binding("c", "switch_cluster", "Cluster"),  # shown when there are several
        *[
            Binding(str(i), f"show_tab('{name}')", title, show=False)
            for i, (name, title) in enumerate(TABS, start=1)
        ],
    ]

    def __init__(
        self,
        cluster_path: str | Path,
        topic: str | None = None,
        *,
        cluster: Cluster | None = None,
        refresh_s: float = REFRESH_S,
        clusters: Sequence[ServedCluster] = (),
        read_only: bool = False,
    ) -> None:
        super().__init__()
        # `plet tui --read-only`: offers no change (engine.auth.actions); a guard against
        # slips, not a wall: whoever can open the files can change them with `plet`
        self.read_only = read_only
        self.cluster_path = str(cluster_path)
        self.cluster: Cluster | None = cluster
        # the clusters `c` switches between; the opened ones by path (closed on exit; an
        # injected cluster is the caller's)
        self.clusters = list(clusters)
        self._opened: dict[str, Cluster] = {}
        self._given = cluster
        self.start_topic = topic
        self.refresh_s = refresh_s
        self.stream: str | None = None
        self.topic: str | None = None
        self.metrics_window = WINDOWS[0][0]  # the charts' window (MetricChart), `w` cycles

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            yield StreamTree(id="sidebar")
            with TabbedContent(initial="tab-messages", id="tabs"):
                for name, title in self.TABS:
                    with TabPane(title, id=f"tab-{name}"):
                        yield PANES[name](id=name)
        yield Footer()

    # --- the cluster ------------------------------------------------------------------

    def on_mount(self) -> None:
        self.sub_title = self.cluster_path
        if self.cluster is None:
            self._open_cluster(self.cluster_path)
        else:
            self.post_message(ClusterReady(self.cluster))
        self.set_interval(self.refresh_s, self._tick)

    @work(thread=True, group="cluster")
    def _open_cluster(self, path: str) -> None:
        try:
            cluster = self._opened.get(path)
            if cluster is None:
                if not Path(path).is_dir():
                    # Cluster.open would create an empty cluster: a typo must not do that.
                    raise NotACluster(f"no cluster at {path!r}: create one with 'plet init'")
                cluster = self._opened[path] = Cluster.open(path)
        except Exception as exc:  # shown to the user
            ready = ClusterReady(error=exc)
        else:
            ready = ClusterReady(cluster)
        if path == self.cluster_path:  # else a later switch overtook this one
            self.post_message(ready)

    def on_cluster_ready(self, message: ClusterReady) -> None:
        if message.error is not None:
            self.notify(str(message.error), severity="error", timeout=30)
            self.query_one(StreamTree).tree.reset(Text(f"error: {message.error}", style="red"))
            return
        self.cluster = message.cluster
        sound, health = check.health(self.cluster)
        self.sub_title = f"{self.cluster.name} · {self.cluster_path} · {health}"
        changes = self.allowed().changes
        if not changes:  # the header says so on every screen (the web's badge)
            self.title = f"{self.TITLE} · read-only ({changes.reason})"
        if not sound:
            self.notify(health, severity="warning", timeout=30)
        self.query_one(StreamTree).load()
        if self.start_topic:
            self.open_path(self.start_topic)
            # a stream (a followed link, console/widgets/replication.py) keeps its tab
            self.query_one("#msg-table" if ":" in self.start_topic else "#stream-tree").focus()
        else:
            self.query_one("#stream-tree").focus()
            self.active_pane().reload()

    def allowed(self) -> Allowed:
        """What the console's user may do (engine.auth.actions); asking about a stream or
        group reads the catalog, so do that in a worker."""
        assert self.cluster is not None
        return Allowed(self.cluster, read_only=self.read_only)

    def on_unmount(self) -> None:
        self.workers.cancel_all()
        for cluster in self._opened.values():
            if cluster is not self._given:
                cluster.close()

    def current_cluster(self) -> str | None:
        """The name (in `clusters`) of the cluster shown, if it is one of them."""
        here = str(Path(self.cluster_path).resolve())
        return next((c.name for c in self.clusters if c.path == here), None)

    def follow_link(self, target: str, stream: str) -> None:
        """Show `stream` of the cluster at `target` (a replication link's target), when it
        is one of `clusters`."""
        found = next((c for c in self.clusters if c.path == target), None)
        if found is None:
            self.notify(
                f"{target} is not one of this console's clusters (plet tui --also PATH)",
                severity="warning",
            )
            return
        self.switch_cluster(found.name, stream)

    def switch_cluster(self, name: str, open_path: str | None = None) -> None:
        """Show the cluster of `clusters` named `name`: the tree and every tab start again
        on it (on `open_path`, a stream or topic, if given, else nothing chosen); the others
        stay open for a switch back."""
        target = next((c for c in self.clusters if c.name == name), None)
        if target is not None and target.url is not None:
            self.show_remote(target)
            return
        if target is None or target.path is None:
            self.notify(f"no cluster {name!r} here", severity="error")
            return
        if name == self.current_cluster():
            if open_path is not None:
                self.open_path(open_path)
            return
        if self.cluster is not None:  # an injected one too, to be found again
            self._opened.setdefault(str(Path(self.cluster_path).resolve()), self.cluster)
        self.cluster_path, self.cluster, self.start_topic = target.path, None, open_path
        self.set_context(None, None)
        for pane in self.panes():
            pane.stale = True
        self.sub_title = f"{name} · opening…"
        self._open_cluster(target.path)

    def show_remote(self, target: ServedCluster) -> None:
        """Another console's cluster, read-only through its API (console/remote.py), over
        this one until Escape."""
        from console.remote import RemoteCluster, RemoteError
        from console.screens.remote_cluster import RemoteClusterScreen

        try:
            remote = RemoteCluster(target)
        except RemoteError as exc:
            self.notify(str(exc), severity="error")
            return
        title = self.sub_title

        def left(_: None) -> None:
            self.sub_title = title

        self.push_screen(RemoteClusterScreen(remote), left)

    # --- what is shown ----------------------------------------------------------------

    def panes(self) -> list[Pane]:
        return [self.query_one(f"#{name}", Pane) for name in PANES]

    def pane(self, name: str) -> Pane:
        return self.query_one(f"#{name}", PANES[name])

    def active_pane(self) -> Pane:
        active = self.query_one("#tabs", TabbedContent).active or "tab-messages"
        return self.pane(active.removeprefix("tab-"))

    def set_context(self, stream: str | None, topic: str | None) -> None:
        self.stream, self.topic = stream, topic
        self.sub_title = f"{self.cluster.name if self.cluster else ''} · {topic or stream or ''}"
        for pane in self.panes():
            pane.set_context(stream, topic)
        pane = self.active_pane()
        if pane.stale:
            pane.reload()

    def open_path(self, name: str) -> None:
        """Show a topic (a full name) or a stream."""
        if ":" in name:
            self.set_context(name.rpartition(":")[0], name)
            self.show_tab("messages")
            self.query_one(StreamTree).reveal(name)
        else:
            self.set_context(name, None)

    @on(TopicSelected)
    def _topic_selected(self, message: TopicSelected) -> None:
        self.open_path(message.topic)

    @on(StreamSelected)
    def _stream_selected(self, message: StreamSelected) -> None:
        self.set_context(message.stream, None)

    @on(TabbedContent.TabActivated, "#tabs")
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pane = self.active_pane()
        if pane.stale:
            pane.reload()

    def _tick(self) -> None:
        if self.cluster is None or not self.is_running or self.screen is not self.screen_stack[0]:
            return  # a dialog is open, or the app is closing (its widgets go one by one)
        try:
            pane = self.active_pane()
        except NoMatches:  # the tabs are being taken down as the app exits
            return
        if pane.AUTO_REFRESH:
            pane.reload(quiet=True)

    def show_tab(self, name: str) -> None:
        self.query_one("#tabs", TabbedContent).active = f"tab-{name}"

    # --- actions (keys and the command palette) ---------------------------------------

    def action_show_tab(self, name: str) -> None:
        self.show_tab(name)

    def action_search(self) -> None:
        self.query_one("#tree-search", Input).focus()

    def action_refresh(self) -> None:
        """Read the shown tab again; in the tree, read the tree again too (from its first
        page, the cursor back on the open topic)."""
        sidebar = self.query_one(StreamTree)
        if self.focused is not None and sidebar in self.focused.ancestors_with_self:
            sidebar.load(reveal=self.topic)
        self.active_pane().reload()

    def action_help(self) -> None:
        from console.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def action_permissions(self, user: str | None = None) -> None:
        """Effective permissions of a console user (console/screens/permissions.py)."""
        if self.cluster is None:
            self.notify("the cluster is not open yet", severity="warning")
            return
        from console.screens.permissions import PermissionsScreen

        self.push_screen(PermissionsScreen(self.cluster, user))

    def _messages(self) -> MessagesPane:
        self.show_tab("messages")
        return self.query_one("#messages", MessagesPane)

    def action_produce(self) -> None:
        self._messages().action_produce()

    def action_follow(self) -> None:
        self._messages().action_toggle_follow()

    def action_seek(self) -> None:
        self._messages().action_focus_seek()

    def action_filter(self) -> None:
        self._messages().action_focus_filter()

    def action_cycle_view(self) -> None:
        self._messages().action_cycle_view()

    def action_cycle_window(self) -> None:
        """The charts' window: 1 h, 6 h, 24 h, 7 d, then 1 h again."""
        self.metrics_window = next_window(self.metrics_window)
        for chart in self.query(MetricChart):
            chart.reload()
        self.notify(f"charts: last {window_label(self.metrics_window)}", timeout=2)

    def action_reset_group(self) -> None:
        self.show_tab("groups")
        self.query_one("#groups", GroupsPane).action_reset()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "switch_cluster":
            # no key, nor footer entry, with one cluster to open
            from console.remote import readable

            return sum(c.local or readable(c) for c in self.clusters) > 1
        return True

    def action_switch_cluster(self, name: str | None = None) -> None:
        """Switch to the cluster `name`, or choose one in a dialog."""
        if name is not None:
            self.switch_cluster(name)
            return
        from console.screens.clusters import ClustersScreen

        def chosen(picked: str | None) -> None:
            if picked is not None:
                self.switch_cluster(picked)

        self.push_screen(ClustersScreen(self.clusters, self.current_cluster()), chosen)

    def action_new_replay(self, kind: Any = None) -> None:
        self.show_tab("replays")
        self.query_one("#replays", ReplaysPane).action_new_replay(kind)
