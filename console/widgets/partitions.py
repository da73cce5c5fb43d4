"""The Partitions tab: the throughput history of the cluster and of the chosen topic or
stream (charts), each partition's chain of partitionlets (tier, volume or archive file,
offsets, size), and the cluster's volumes."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Static

from console.widgets.chart import MetricChart
from console.widgets.pane import Pane, fill_table, note
from console.widgets.table import Table
from engine import TopicInfo, VolumeInfo
from engine.client.transactions import Transactions
from engine.times import format_ms
from engine.units import format_bytes


def chain_text(info: TopicInfo, stable: dict[int, int] | None = None) -> Text:
    """Each partition as a line: its log end offset and last stable offset (LSO), then
    boxes, oldest partitionlet first; ● marks the active one."""
    text = Text()
    stable = stable or {}
    for part in info.partitions:
        text.append(f"p{part.partition:<3}", style="bold")
        end = part.log_end_offset
        lso = stable.get(part.partition, end)
        text.append(f" end {end:,} LSO {lso:,}", style="yellow" if lso < end else "dim")
        if not part.partitionlets:
            text.append(" (empty)", style="dim")
        for i, let in enumerate(part.partitionlets):
            text.append(" ── " if i else " ", style="dim")
            archived = let.tier == "archive"
            style = "bold green" if let.active else "magenta" if archived else "cyan"
            where = "archive" if archived else f"vol {let.volume}"
            text.append(f"[#{let.id} {where} ", style=style)
            text.append(f"{let.base_offset:,}..{let.last_offset:,} {format_bytes(let.bytes)}")
            text.append(" ●]" if let.active else "]", style=style)
        text.append("\n")
    return text


def _short_path(path: str, root: Path) -> str:
    """A volume inside the cluster directory by its relative path, others in full."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def file_text(file: str | None, root: Path) -> str:
    """An archived partitionlet's file: under the cluster directory by its relative path
    (the cluster's own archive/ folder), elsewhere its full URI; '-' when live."""
    if not file:
        return "-"
    if file.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        return _short_path(unquote(urlsplit(file).path), Path(root).resolve())
    return file


class PartitionsPane(Pane):
    def compose(self) -> ComposeResult:
        yield Static(id="part-summary")
        with Horizontal(id="part-cluster-charts", classes="chart-row"):
            yield MetricChart("Cluster writes", metric="write_messages", id="chart-cluster-write")
            yield MetricChart("Cluster reads", metric="read_messages", id="chart-cluster-read")
        with Horizontal(id="part-charts", classes="chart-row"):
            yield MetricChart("Writes", name=None, metric="write_messages", id="chart-write")
            yield MetricChart("Reads", name=None, metric="read_messages", id="chart-read")
        with VerticalScroll(id="part-chains-scroll"):
            yield Static(id="part-chains")
        table = Table(id="part-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(
            "P",
            "Partitionlet",
            "Tier",
            "Volume",
            "Base",
            "Last",
            "Active",
            "Messages",
            "Size",
            "First (UTC)",
            "Last (UTC)",
            "File",
        )
        yield table
        yield Static("Volumes", classes="section-title")
        volumes = Table(id="part-volumes", cursor_type="row")
        volumes.add_columns(
            "Volume", "Path", "File size", "Data", "Partitionlets", "Active", "Recent writes"
        )
        yield volumes

    def fetch(self) -> tuple[TopicInfo | None, list[VolumeInfo], dict[int, int]]:
        info = self.cluster.topic(self.topic) if self.topic else None
        stable = Transactions(self.cluster).stable_offsets(info) if info else {}
        return info, self.cluster.volumes(), stable

    def _show_charts(self) -> None:
        """Point the charts at the cluster and the chosen topic (else stream); each loads
        its series in its own worker."""
        for chart in self.query("#part-cluster-charts MetricChart").results(MetricChart):
            chart.reload()
        scope, name = ("topic", self.topic) if self.topic else ("stream", self.stream)
        row = self.query_one("#part-charts")
        row.display = name is not None
        if name is not None:
            self.query_one("#chart-write", MetricChart).show_series(f"{name} writes", scope, name)
            self.query_one("#chart-read", MetricChart).show_series(f"{name} reads", scope, name)

    def show(self, data: tuple[TopicInfo | None, list[VolumeInfo], dict[int, int]]) -> None:
        info, volumes, stable = data
        self._show_charts()
        summary = self.query_one("#part-summary", Static)
        rows = []
        if info is None:
            note(summary, "Pick a topic to see its partitions; the volumes are below.")
            self.query_one("#part-chains", Static).update("")
        else:
            note(
                summary,
                f"{info.name} · {info.partition_count} partitions · {info.messages:,} messages"
                f" · {format_bytes(info.bytes)}",
                "bold",
            )
            self.query_one("#part-chains", Static).update(chain_text(info, stable))
            for part in info.partitions:
                for i, let in enumerate(part.partitionlets):
                    rows.append(
                        (
                            let.id,
                            (
                                part.partition if i == 0 else "",
                                let.id,
                                let.tier,
                                "-" if let.tier == "archive" else let.volume,
                                f"{let.base_offset:,}",
                                f"{let.last_offset:,}",
                                "yes" if let.active else "no",
                                f"{let.messages:,}",
                                format_bytes(let.bytes),
                                format_ms(let.first_timestamp),
                                format_ms(let.last_timestamp),
                                Text(file_text(let.file, self.cluster.path)),
                            ),
                        )
                    )
        fill_table(self.query_one("#part-table", DataTable), rows)
        fill_table(
            self.query_one("#part-volumes", DataTable),
            (
                (
                    v.id,
                    (
                        v.id,
                        Text(_short_path(v.path, self.cluster.path))
                        + (Text(" damaged", style="bold red") if v.damage else Text("")),
                        format_bytes(v.bytes),
                        format_bytes(v.data_bytes),
                        v.partitionlets,
                        v.active_partitionlets,
                        format_bytes(v.recent_write_bytes),
                    ),
                )
                for v in volumes
            ),
        )
