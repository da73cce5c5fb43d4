"""The Heat tab: recent load per partition or volume as a heat map over time, with the
rates behind it in a table."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable, Select, Static

from console.display import fmt_rate
from console.widgets.heat_map import HeatData, HeatMapWidget
from console.widgets.pane import Pane, fill_table, note
from console.widgets.table import Table
from engine import errors
from engine.ops.heat import HeatMap, Load
from engine.records import TopicPartition
from engine.units import format_bytes

WINDOWS = ((60, "1 minute"), (300, "5 minutes"), (900, "15 minutes"), (3600, "1 hour"))
METRICS = (
    ("write_messages_per_s", "writes, msg/s", "msg/s"),
    ("read_messages_per_s", "reads, msg/s", "msg/s"),
    ("write_bytes_per_s", "writes, bytes/s", "B/s"),
    ("read_bytes_per_s", "reads, bytes/s", "B/s"),
)
TOP = 20


def heat_rows(
    heat: HeatMap, by: str, metric: str, topic: str | None = None, top: int = TOP
) -> list[tuple[str, list[float], Load]]:
    """(label, per-bucket values, window total) of the rows to draw, hottest first; a
    chosen topic's partitions come first."""
    if by == "volumes":
        return [
            (f"volume {v}", [getattr(b, metric) for b in series], heat.volumes[v])
            for v, series in sorted(heat.volume_series.items())
        ]
    ranked = sorted(heat.partitions.items(), key=lambda item: (-getattr(item[1], metric), item[0]))
    if topic is not None:
        ranked.sort(key=lambda item: item[0].topic != topic)  # stable: keeps the heat order
    rows = []
    for tp, total in ranked[:top]:
        series = heat.partition_series.get(tp, [])
        rows.append((f"{tp.topic}[{tp.partition}]", [getattr(b, metric) for b in series], total))
    return rows


class HeatPane(Pane):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.window = 300
        self.metric = METRICS[0][0]
        self.by = "partitions"
        self.heat: HeatMap | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-toolbar"):
            yield Select(
                [(label, s) for s, label in WINDOWS],
                value=300,
                allow_blank=False,
                id="heat-window",
                compact=True,
            )
            yield Select(
                [(label, m) for m, label, _ in METRICS],
                value=self.metric,
                allow_blank=False,
                id="heat-metric",
                compact=True,
            )
            yield Select(
                [("hottest partitions", "partitions"), ("volumes", "volumes")],
                value="partitions",
                allow_blank=False,
                id="heat-by",
                compact=True,
            )
        yield Static(id="heat-summary")
        yield HeatMapWidget(id="heat-map")
        table = Table(id="heat-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("Series", "Write msg/s", "Write B/s", "Read msg/s", "Read B/s")
        yield table

    def fetch(self) -> HeatMap:
        # Only the hottest rows by the metric shown (and the chosen topic's partitions):
        # cheap when 100,000 partitions are warm.
        include: list[TopicPartition] = []
        if self.topic is not None:
            try:
                info = self.cluster.topic(self.topic)
                include = [TopicPartition(self.topic, p.partition) for p in info.partitions]
            except errors.NotFound:
                pass
        by = self.metric.removesuffix("_per_s")
        return self.cluster.heat(self.window, top=TOP, by=by, include=include)

    def show(self, heat: HeatMap) -> None:
        self.heat = heat
        self._draw()

    def _draw(self) -> None:
        heat = self.heat
        if heat is None:
            return
        rows = heat_rows(heat, self.by, self.metric, self.topic)
        unit = next(u for m, _, u in METRICS if m == self.metric)
        total = heat.total
        note(
            self.query_one("#heat-summary", Static),
            f"window {heat.window_s} s in {heat.bucket_s} s buckets · cluster: "
            f"{fmt_rate(total.write_messages_per_s)} msg/s written, "
            f"{fmt_rate(total.read_messages_per_s)} msg/s read",
        )
        self.query_one("#heat-map", HeatMapWidget).data = HeatData(
            [(label, series) for label, series, _ in rows], heat.bucket_s, unit
        )
        fill_table(
            self.query_one("#heat-table", DataTable),
            (
                (
                    label,
                    (
                        Text(label),
                        fmt_rate(load.write_messages_per_s),
                        format_bytes(int(load.write_bytes_per_s)),
                        fmt_rate(load.read_messages_per_s),
                        format_bytes(int(load.read_bytes_per_s)),
                    ),
                )
                for label, _, load in rows
            ),
        )

    @on(Select.Changed, "#heat-window")
    def _window(self, event: Select.Changed) -> None:
        if isinstance(event.value, int) and event.value != self.window:
            self.window = event.value
            self.reload()

    @on(Select.Changed, "#heat-metric")
    def _metric(self, event: Select.Changed) -> None:
        if str(event.value) != self.metric:
            self.metric = str(event.value)
            self.reload()  # the hottest partitions depend on the metric

    @on(Select.Changed, "#heat-by")
    def _by(self, event: Select.Changed) -> None:
        self.by = str(event.value)
        self._draw()

    def context_changed(self) -> None:
        self._draw()  # marked stale too: shown again, it fetches the new topic's partitions
