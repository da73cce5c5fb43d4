"""The Replication tab: the stream's links out (state, lag, steady throughput, errors) and
in, the chosen link's history of copies and lag (charts), the replication graph drawn in text with its cycles, and pausing or resuming a link."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer
from textual.widgets import Button, DataTable, Static

from console.replication_graph import STATE_STYLES, Graph, crawl, draw
from console.widgets.chart import MetricChart
from console.widgets.pane import Pane, fill_table, note
from console.widgets.table import Table
from engine.ops.metrics import THROUGHPUT_WINDOW_S, replica_name
from engine.replication import LinkState


class ReplicationPane(Pane):
    BINDINGS = [Binding("space", "toggle_pause", "Pause/resume link")]
    # the links shown are the open stream's: its admin_perm decides
    GATES: ClassVar[dict[str, str]] = {"manage_replicas": "repl-toggle"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.links: dict[str, Any] = {}
        self.graph: Graph | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-toolbar"):
            yield Static(id="repl-summary")
            yield Button("Pause/resume", id="repl-toggle", compact=True)
        links = Table(id="repl-links", cursor_type="row", zebra_stripes=True)
        links.add_columns(
            "Target",
            "Target stream",
            "State",
            "Lag msgs",
            "Lag s",
            # ReplicaInfo.throughput_messages: the steady rate, not the last run's burst
            f"Msg/s ({THROUGHPUT_WINDOW_S // 60} min)",
            "Copied",
            "Error",
        )
        yield links
        with Horizontal(id="repl-charts", classes="chart-row"):
            yield MetricChart("Copies", "replica", None, "copied_messages", id="chart-repl-copied")
            yield MetricChart("Lag", "replica", None, "lag_messages", id="chart-repl-lag")
        yield Static("Upstreams (links into this stream)", classes="section-title")
        ups = Table(id="repl-upstreams", cursor_type="row")
        ups.add_columns("Source", "Source stream", "Source cluster")
        yield ups
        with ScrollableContainer(id="repl-graph-scroll"):
            yield Static(id="repl-graph")

    def fetch(self) -> tuple[list[Any], list[Any], Graph] | None:
        if self.stream is None:
            return None
        cluster = self.cluster
        return (
            cluster.replicas(self.stream),
            cluster.upstreams(self.stream),
            crawl(cluster, self.stream),
        )

    def show(self, data: tuple[list[Any], list[Any], Graph] | None) -> None:
        summary = self.query_one("#repl-summary", Static)
        if data is None:
            note(summary, "Pick a stream (or one of its topics) to see its replication.")
            fill_table(self.query_one("#repl-links", DataTable), [])
            fill_table(self.query_one("#repl-upstreams", DataTable), [])
            self.query_one("#repl-graph", Static).update("")
            self.links = {}
            self._show_charts()
            return
        links, ups, graph = data
        self.links = {r.target: r for r in links}
        self.graph = graph
        note(summary, f"{self.stream} · {len(links)} replica(s) · {len(ups)} upstream(s)", "bold")
        fill_table(
            self.query_one("#repl-links", DataTable),
            (
                (
                    r.target,
                    (
                        Text(r.target),
                        Text(r.target_stream),
                        Text(r.state, style=STATE_STYLES.get(r.state, "")),
                        f"{r.lag_messages:,}",
                        f"{r.lag_seconds:.1f}",
                        f"{r.throughput_messages:,.0f}",
                        f"{r.copied_messages:,}",
                        Text(r.error or _conflicts(r) or "-"),
                    ),
                )
                for r in links
            ),
        )
        fill_table(
            self.query_one("#repl-upstreams", DataTable),
            ((u.source, (Text(u.source), Text(u.source_stream), u.source_id)) for u in ups),
        )
        self.query_one("#repl-graph", Static).update(draw(graph))
        self._show_charts()

    @on(DataTable.RowHighlighted, "#repl-links")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_charts()

    def _show_charts(self) -> None:
        """Point the charts at the chosen link (each loads in its own worker)."""
        link = self.selected_link()
        name = replica_name(self.stream, link.target) if link and self.stream else None
        who = f"→ {link.target_stream}" if link else ""
        self.query_one("#chart-repl-copied", MetricChart).show_series(
            f"Copies {who}".strip(), "replica", name
        )
        self.query_one("#chart-repl-lag", MetricChart).show_series(
            f"Lag {who}".strip(), "replica", name
        )

    def selected_link(self) -> Any | None:
        table = self.query_one("#repl-links", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.links.get(key or "")

    @on(DataTable.RowSelected, "#repl-links")
    def _follow(self, event: DataTable.RowSelected) -> None:
        """Enter on a link: its target stream, in the target cluster, when this console
        lists that cluster (`c`'s list)."""
        link = self.links.get(event.row_key.value or "")
        if link is not None:
            self.console.follow_link(link.target, link.target_stream)

    @on(Button.Pressed, "#repl-toggle")
    def action_toggle_pause(self) -> None:
        link = self.selected_link()
        if link is None or self.stream is None:
            self.notify("Pick a link first.", severity="warning")
            return
        if self.refused("manage_replicas"):  # read-only; the engine checks admin_perm
            return
        stream, target, paused = self.stream, link.target, link.state == LinkState.PAUSED

        def toggle() -> str:
            if paused:
                self.cluster.resume_replica(stream, target)
                return f"resumed the link to {target}"
            self.cluster.pause_replica(stream, target)
            return f"paused the link to {target}"

        self.act(toggle)


def _conflicts(link: Any) -> str:
    return "; ".join(
        f"conflict {c.get('topic')} p{c.get('partition')} @{c.get('offset')}"
        for c in link.conflict or ()
    )
