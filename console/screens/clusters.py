"""The cluster switcher (`c`, or "Switch cluster" in the palette): the clusters this console
shows (engine.served_clusters, the same list as `plet web`'s), the open one marked; Enter
switches. Another console's cluster opens read-only through that console's API when the
user's API token of it is set (console/remote.py, console/screens/remote_cluster.py); else it
is listed, disabled, with the variable to set."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from console.remote import readable, token_variable
from engine.served_clusters import ServedCluster


class ClustersScreen(ModalScreen[str | None]):
    """Dismissed with the chosen cluster's name, or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    ClustersScreen { align: center middle; }
    #clusters-dialog { width: 80; height: auto; max-height: 80%; border: thick $primary;
                       background: $surface; padding: 0 1; }
    #clusters-list { height: auto; max-height: 20; }
    """

    def __init__(self, clusters: Sequence[ServedCluster], current: str | None) -> None:
        super().__init__()
        self.clusters = list(clusters)
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="clusters-dialog"):
            yield Label("Switch to a cluster (Enter), Escape to stay")
            yield OptionList(*[self._option(c) for c in self.clusters], id="clusters-list")

    def _option(self, cluster: ServedCluster) -> Option:
        label = Text(cluster.name, style="bold")
        if cluster.name == self.current:
            label.append("  (open)", style="green")
        if cluster.path is not None:
            where, disabled = cluster.path, False
        elif readable(cluster):
            where, disabled = f"{cluster.url}  another console, read-only", False
        else:
            where = f"{cluster.url}  another console (set {token_variable(cluster)} to read it)"
            disabled = True
        label.append(f"  {where}", style="dim")
        return Option(label, id=cluster.name, disabled=disabled)

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.focus()
        names = [c.name for c in self.clusters]
        if self.current in names:
            options.highlighted = names.index(self.current)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
