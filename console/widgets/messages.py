"""The Messages tab: a page of a topic's messages (partition, offset, time, key, value),
seek by offset or time, a filter, following the tail, a query search (engine.client.message_search:
runs to the end in a worker, matches and progress shown as they come, Escape cancels),
and a detail pane that shows the whole value as text, JSON or hex with its headers."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Checkbox, DataTable, Input, Select, Static
from textual.worker import get_current_worker

from console import browse, values
from console.events import RecordsArrived
from console.widgets.pane import Pane, note
from console.widgets.table import Table
from engine import ConsumerRecord
from engine.client import message_search
from engine.client.browse import Marker, TransactionMarks
from engine.client.schemas import SchemaDecoder
from engine.times import format_ms

MAX_ROWS = 1000  # rows kept while following; the oldest go first
_KEY_WIDTH = 24
_HEADERS_WIDTH = 30
_VALUE_WIDTH = 80


def _row_key(record: ConsumerRecord) -> str:
    return f"{record.partition}:{record.offset}"


def _order(record: ConsumerRecord) -> tuple[int, int, int]:
    return (record.timestamp, record.partition, record.offset)


def _cells(record: ConsumerRecord, decoder: Any = None, aborted: bool = False) -> tuple[Any, ...]:
    value = Text(values.preview(record.value, _VALUE_WIDTH, decoder))
    if aborted:  # written by a transaction that was aborted: read_committed never sees it
        value = Text.assemble(("aborted ", "bold red"), (value.plain, "strike dim"))
    return (
        record.partition,
        record.offset,
        format_ms(record.timestamp),
        Text(values.preview(record.key, _KEY_WIDTH, decoder)),
        Text(values.headers_preview(record.headers, _HEADERS_WIDTH)),
        value,
    )


def _marker_cells(marker: Marker) -> tuple[Any, ...]:
    """A transaction marker (control record): it takes an offset and holds no message."""
    style = "bold green" if marker.commit else "bold magenta"
    return (
        marker.partition,
        marker.offset,
        "",
        Text(""),
        Text(""),
        Text.assemble(
            (f"{marker.kind} marker", style),
            (f" producer id {marker.producer_id}, epoch {marker.epoch}", "dim"),
        ),
    )


class SearchProgress(Message):
    """A search's progress and the matches found since the last (from its worker)."""

    def __init__(
        self,
        seq: int,
        progress: message_search.Progress | None,
        records: list[ConsumerRecord],
        error: BaseException | None = None,
    ) -> None:
        super().__init__()
        self.seq = seq
        self.progress = progress
        self.records = records
        self.error = error


SEARCH_POLL_S = 0.25  # how often a running search's progress is shown
SEARCH_RATE = message_search.MAX_RATE  # messages a second (read when a search starts)


def _prefetch(decoder: SchemaDecoder, records: list[Any]) -> None:
    """Read the schemas `records` name (in a worker: the UI thread then decodes with
    them without touching the catalog)."""
    decoder.prefetch(
        data for r in records if isinstance(r, ConsumerRecord) for data in (r.key, r.value)
    )


class MessagesPane(Pane):
    AUTO_REFRESH = False  # a reload would move the user's page; following keeps it live
    GATES: ClassVar[dict[str, str]] = {"produce": "msg-produce"}
    # The keys (f, p, s, ctrl+f, v) are the app's: they must work while the tree has the
    # focus. They call the actions below. Escape (within the pane) cancels a search.
    # Enter in the seek, filter or query box leaves the focus there: moved to the table,
    # the next letters typed would be those keys ("v" cycles the view, "e" opens a dialog).
    # The down arrow moves it to the table (the table and the partition list take their own).
    BINDINGS = [
        Binding("escape", "cancel_search", "Cancel search", show=False),
        Binding("down", "focus_table", "To the table", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.seek = browse.LATEST
        self.needle = ""
        self.partition: int | None = None
        self.following = False
        self.view_mode = values.VIEW_MODES[0]
        self.records: dict[str, ConsumerRecord] = {}
        self.markers: dict[str, Marker] = {}  # transaction markers shown among the records
        self.partition_count = 0
        self.arrived = 0  # messages added while following, for the status line and tests
        self._page: browse.Page | None = None
        self._follow_seq = 0
        # values in the Confluent wire format show decoded; made and filled by workers
        self.decoder: SchemaDecoder | None = None
        # the query search: its job (set by the worker), its last progress, its answers' seq
        self.search_job: message_search.SearchJob | None = None
        self.search_progress: message_search.Progress | None = None
        self.searching = False
        self._search_seq = 0

    def compose(self) -> ComposeResult:
        with Horizontal(id="msg-toolbar"):
            seek = Input(placeholder="seek: offset or time", id="msg-seek", compact=True)
            # the placeholder is short; the tooltip gives the grammar (engine.times)
            seek.tooltip = (
                "An offset, earliest, latest or a time: ISO 8601 such as "
                "2024-05-01T12:00:00Z (a time without a zone is UTC)"
            )
            yield seek
            needle = Input(placeholder="filter: text or host: api-2", id="msg-filter", compact=True)
            # the one filter grammar (engine.client.filters), any case
            needle.tooltip = (
                "Text found anywhere (key, value, headers), or a header: host: api-2, "
                "host=api-2 or host:api-2 (* is any text); quote text with ':' or '=' to "
                "find it as it is; docs/FILTERS.md"
            )
            yield needle
            query = Input(placeholder="query: value.id == 42 (Enter)", id="msg-query", compact=True)
            query.tooltip = (
                "A JMESPath query over key, value, headers, timestamp, offset and partition, "
                "searched to the end of the topic (Escape cancels); docs/SEARCH.md"
            )
            yield query
            yield Select[int](
                [], prompt="all partitions", allow_blank=True, id="msg-partition", compact=True
            )
            yield Checkbox("Follow", id="msg-follow", compact=True)
            yield Button("Produce…", id="msg-produce", compact=True)
        yield Static(id="msg-status")
        table = Table(id="msg-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("P", "Offset", "Time (UTC)", "Key", "Headers", "Value")
        yield table
        with Vertical(id="msg-detail"):
            yield Static(id="msg-detail-head")
            with VerticalScroll(id="msg-detail-scroll"):
                yield Static(id="msg-detail-body")

    # --- loading ----------------------------------------------------------------------

    def context_changed(self) -> None:
        self._stop_follow()
        self._stop_search()
        self.query_one("#msg-query", Input).value = ""
        self.decoder = None  # schemas registered since are read again
        # Another topic starts at the default view: a seek or filter typed for the last one
        # means nothing here (an offset of one topic is not a position in another).
        self.seek = browse.LATEST
        self.needle = ""
        self.query_one("#msg-seek", Input).value = ""
        self.query_one("#msg-filter", Input).value = ""
        self.partition = None
        self.partition_count = 0
        self.query_one("#msg-partition", Select).set_options([])
        self._clear()
        if self.topic is None:
            note(self.query_one("#msg-status", Static), "Pick a topic in the tree (/ searches).")

    def _clear(self) -> None:
        self.records = {}
        self.markers = {}
        self._page = None
        self.query_one("#msg-table", DataTable).clear()
        self._show_detail(None)

    def reload(self, quiet: bool = False) -> None:
        if self.topic is None:
            self.stale = False
            return
        if not quiet:
            note(self.query_one("#msg-status", Static), f"reading {self.topic} …", "italic")
        super().reload(quiet)

    def fetch(self) -> browse.Page:
        assert self.topic is not None
        page = browse.read_page(
            self.cluster,
            self.topic,
            seek=self.seek,
            partition=self.partition,
            needle=self.needle,
        )
        if self.decoder is None:
            self.decoder = SchemaDecoder(self.cluster.schemas, topic=self.topic, load=False)
        _prefetch(self.decoder, page.records)
        return page

    def show(self, page: browse.Page) -> None:
        self._stop_follow()
        self._stop_search()
        self.arrived = 0
        table = self.query_one("#msg-table", DataTable)
        table.clear()
        self.records = {}
        self.markers = {}
        # The newest page lists the newest first (the page itself is oldest first).
        # The page is in display order: newest first from the newest, else oldest first.
        for row in page.rows:
            key = f"{row.partition}:{row.offset}"
            if isinstance(row, Marker):
                self.markers[key] = row
                table.add_row(*_marker_cells(row), key=key)
                continue
            self.records[key] = row
            table.add_row(*_cells(row, self.decoder, page.marks.is_aborted(row)), key=key)
        if len(page.partitions) != self.partition_count:
            self.partition_count = len(page.partitions)
            self.query_one("#msg-partition", Select).set_options(
                [(f"partition {p.partition}", p.partition) for p in page.partitions]
            )
        if table.row_count:
            # Row 0 is the newest (newest first) or the first at the seek position.
            table.move_cursor(row=0, animate=False)
        if self.following:
            self._start_follow(page)
        # The cursor may not move (row 0 before and after): show the detail explicitly.
        self._show_detail(self.selected_record())
        self._page = page
        self._status()

    @property
    def newest_first(self) -> bool:
        """Whether the rows are newest first: the newest page, and following (which reads
        from there). Pages from a seek position read forwards, oldest first."""
        return self.seek == browse.LATEST

    def _status(self) -> None:
        if self.search_progress is not None:
            self._search_status()
            return
        page = self._page
        if page is None:
            return
        parts = [f"{len(self.records):,} shown, {browse.describe_seek(self.seek)}"]
        if self.needle:
            shown = browse.describe_filter(self.needle)
            parts.append(f"filter {shown} ({page.scanned:,} scanned)")
        if page.truncated:
            parts.append("scan limit reached")
        if page.masked:
            parts.append(f"masked: {page.masked} (no unmask permission)")
        if self.following:
            parts.append(f"following: {self.arrived:,} new")
        parts.append(browse.describe_partitions(page.partitions, page.stable))
        note(self.query_one("#msg-status", Static), " · ".join(parts))

    def show_error(self, error: BaseException) -> None:
        note(self.query_one("#msg-status", Static), f"error: {error}", "bold red")
        super().show_error(error)

    # --- following the tail -----------------------------------------------------------

    def _start_follow(self, page: browse.Page) -> None:
        self._follow_seq += 1
        self._follow(self._follow_seq, page, self.needle)

    def _stop_follow(self) -> None:
        self._follow_seq += 1  # arrivals of the old follower are dropped
        self.workers.cancel_group(self, "follow")

    @work(thread=True, group="follow", exclusive=True)
    def _follow(self, seq: int, page: browse.Page, needle: str) -> None:
        worker = get_current_worker()
        try:
            browse.follow(
                self.cluster,
                page,
                needle=needle,
                on_records=lambda records, marks: self._arrived(seq, records, marks),
                cancelled=lambda: worker.is_cancelled,
            )
        except Exception as exc:  # the cluster closed, access was revoked ...
            if not worker.is_cancelled:
                self.post_message(RecordsArrived(seq, [exc]))

    def _arrived(self, seq: int, records: list[Any], marks: TransactionMarks) -> None:
        """(In the follower's worker thread.)"""
        if self.decoder is not None:
            _prefetch(self.decoder, records)
        self.post_message(RecordsArrived(seq, records, marks))

    def on_records_arrived(self, message: RecordsArrived) -> None:
        message.stop()
        if message.seq != self._follow_seq or not self.following:
            return
        table = self.query_one("#msg-table", DataTable)
        marks = message.marks
        for record in message.records:
            if isinstance(record, BaseException):
                self.show_error(record)
                return
            key = _row_key(record)
            if key in self.records:
                continue
            self.records[key] = record
            table.add_row(*_cells(record, self.decoder, marks.is_aborted(record)), key=key)
            self.arrived += 1
        placed = True  # rows are appended: in place unless a marker or newest first
        for marker in marks.markers:
            key = f"{marker.partition}:{marker.offset}"
            if key not in self.markers:
                self.markers[key] = marker
                table.add_row(*_marker_cells(marker), key=key)
                placed = False
        if table.row_count > MAX_ROWS:
            oldest = sorted(self.records, key=lambda k: _order(self.records[k]))
            for key in oldest[: table.row_count - MAX_ROWS]:
                del self.records[key]
                table.remove_row(key)
        newest_first = self.newest_first
        if newest_first or not placed:
            # Sort the new rows into place, the newest on top when newest first (the first
            # two cells are the partition and the offset, the row's key).
            table.sort(key=lambda row: self._row_order(f"{row[0]}:{row[1]}"), reverse=newest_first)
            self.records = {
                row.key.value or "": self.records[row.key.value or ""]
                for row in table.ordered_rows
                if row.key.value in self.records
            }
        table.move_cursor(row=0 if newest_first else table.row_count - 1, animate=False)
        self._show_detail(self.selected_record())
        self._status()

    def _row_order(self, key: str) -> tuple[int, int, int]:
        """A row's place by time: a marker's is just after the record of its partition
        before it (a marker has no timestamp of its own)."""
        record = self.records.get(key)
        if record is not None:
            return _order(record)
        marker = self.markers[key]
        before = [
            r.timestamp
            for r in self.records.values()
            if r.partition == marker.partition and r.offset < marker.offset
        ]
        return (max(before, default=0), marker.partition, marker.offset)

    # --- the query search -------------------------------------------------------------

    def start_search(self, text: str) -> None:
        """Search the topic (the partition chosen, else all) for `text` to the end, in a
        worker; the table shows the matches as they come."""
        if self.topic is None:
            self.notify("Pick a topic first.", severity="warning")
            return
        try:
            query = message_search.compile_query(text)  # no I/O: a bad query is said at once
        except message_search.BadSearch as exc:
            self.search_progress = None
            note(self.query_one("#msg-status", Static), f"query: {exc.fields['query']}", "bold red")
            return
        if self.following:
            self.query_one("#msg-follow", Checkbox).value = False
        self._stop_follow()
        self._stop_search()
        self._clear()
        self._search_seq += 1
        self.searching = True
        self.search_progress = None
        note(self.query_one("#msg-status", Static), f"searching {self.topic} …", "italic")
        partitions = None if self.partition is None else [self.partition]
        self._search(self._search_seq, self.topic, query, partitions)

    def _stop_search(self) -> None:
        self._search_seq += 1  # answers of the old search are dropped
        job = self.search_job
        if job is not None:
            job.cancel()  # sets a flag: never blocks
        self.search_job = None
        self.searching = False
        self.search_progress = None

    def action_cancel_search(self) -> None:
        job = self.search_job
        if job is not None and self.searching:
            job.cancel()  # the worker posts the cancelled progress

    @work(thread=True, group="search", exclusive=True)
    def _search(self, seq: int, topic: str, query: Any, partitions: list[int] | None) -> None:
        worker = get_current_worker()
        try:
            job = message_search.search(
                self.cluster, topic, query, partitions=partitions, max_rate=SEARCH_RATE
            )
        except Exception as exc:  # denied, the topic went away ...
            self.post_message(SearchProgress(seq, None, [], exc))
            return
        self.search_job = job
        if seq != self._search_seq:  # another search or view came first
            job.cancel()
            job.wait(5)
            return
        decoder = SchemaDecoder(self.cluster.schemas, topic=topic, load=False)
        self.decoder = decoder
        shown = 0
        while True:
            ended = job.wait(SEARCH_POLL_S)
            if worker.is_cancelled or seq != self._search_seq:
                job.cancel()
                ended = job.wait(5)
            progress = job.progress
            records = job.results(shown)
            shown += len(records)
            _prefetch(decoder, records)
            self.post_message(SearchProgress(seq, progress, records))
            if ended or worker.is_cancelled or seq != self._search_seq:
                return

    def on_unmount(self) -> None:
        # the search's thread reads the cluster, which the app closes next: end it first
        job = self.search_job
        if job is not None:
            job.cancel()
            job.wait(5)

    @on(SearchProgress)
    def _search_answered(self, message: SearchProgress) -> None:
        message.stop()
        if message.seq != self._search_seq:
            return
        if message.error is not None:
            self.searching = False
            self.show_error(message.error)
            return
        table = self.query_one("#msg-table", DataTable)
        first = table.row_count == 0
        job = self.search_job
        for record in message.records:
            key = _row_key(record)
            if key in self.records:
                continue
            self.records[key] = record
            aborted = job is not None and job.is_aborted(record)
            table.add_row(*_cells(record, self.decoder, aborted), key=key)
        if first and table.row_count:
            table.move_cursor(row=0, animate=False)
            self._show_detail(self.selected_record())
        self.search_progress = message.progress
        if message.progress is not None and not message.progress.running:
            self.searching = False
            self.search_job = None
        self._search_status()

    def _search_status(self) -> None:
        progress = self.search_progress
        if progress is None:
            return
        text = f"query {self.query_one('#msg-query', Input).value.strip()!r}: {progress.describe()}"
        if progress.running:
            text += " Escape cancels."
        note(self.query_one("#msg-status", Static), text)

    @on(Input.Submitted, "#msg-query")
    def _query_submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self._stop_search()
            self.reload()
            return
        self.start_search(event.value)

    # --- the detail pane --------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#msg-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value if event.row_key is not None else None
        self._show_detail(self.records.get(key or ""))

    def _show_detail(self, record: ConsumerRecord | None) -> None:
        head = self.query_one("#msg-detail-head", Static)
        body = self.query_one("#msg-detail-body", Static)
        if record is None:
            note(head, "")
            note(body, "")
            return
        text = Text()
        kind = "log-append time" if record.timestamp_type == 1 else "create time"
        text.append(f"partition {record.partition}  offset {record.offset}  ", style="bold")
        text.append(f"{format_ms(record.timestamp)} ({kind})  ")
        text.append(f"view: {self.view_mode} (v)\n", style="dim")
        text.append("key: ", style="bold")
        text.append(values.preview(record.key, 100, self.decoder))
        for name, value in record.headers or ():
            text.append("\n")
            text.append(f"header {name}: ", style="bold")
            text.append(values.preview(value, 100))
        head.update(text)
        body.update(Text(values.render(record.value, self.view_mode, self.decoder)))

    def selected_record(self) -> ConsumerRecord | None:
        table = self.query_one("#msg-table", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.records.get(key or "")

    # --- controls ---------------------------------------------------------------------

    @on(Input.Submitted, "#msg-seek")
    def _seek_submitted(self, event: Input.Submitted) -> None:
        try:
            self.seek = browse.parse_seek(event.value)
        except ValueError as exc:
            self.show_error(exc)
            return
        if self.following and self.seek != browse.LATEST:
            self.query_one("#msg-follow", Checkbox).value = False
        self.reload()

    @on(Input.Submitted, "#msg-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        needle = event.value.strip()
        try:
            browse.describe_filter(needle)  # a filter that reads two ways is refused here
        except ValueError as exc:
            self.show_error(exc)
            return
        self.needle = needle
        self.reload()

    @on(Select.Changed, "#msg-partition")
    def _partition_changed(self, event: Select.Changed) -> None:
        value = event.value
        chosen = value if isinstance(value, int) else None
        if chosen != self.partition:
            self.partition = chosen
            self.reload()

    @on(Checkbox.Changed, "#msg-follow")
    def _follow_changed(self, event: Checkbox.Changed) -> None:
        if event.value == self.following:
            return
        self.following = event.value
        if self.following:
            # Following starts from the newest page, as `tail -f` does.
            self.seek = browse.LATEST
            self.query_one("#msg-seek", Input).value = ""
            self.reload()
        else:
            self._stop_follow()
            self._status()

    @on(Button.Pressed, "#msg-produce")
    def _produce_pressed(self) -> None:
        self.action_produce()

    def action_toggle_follow(self) -> None:
        box = self.query_one("#msg-follow", Checkbox)
        box.value = not box.value

    def action_focus_table(self) -> None:
        self.query_one("#msg-table", DataTable).focus()

    def action_focus_seek(self) -> None:
        self.query_one("#msg-seek", Input).focus()

    def action_focus_filter(self) -> None:
        self.query_one("#msg-filter", Input).focus()

    def action_cycle_view(self) -> None:
        modes = values.VIEW_MODES
        self.view_mode = modes[(modes.index(self.view_mode) + 1) % len(modes)]
        self._show_detail(self.selected_record())

    def action_produce(self) -> None:
        if self.topic is None:
            self.notify("Pick a topic first.", severity="warning")
            return
        if self.refused("produce"):
            return
        from console.screens.produce import ProduceScreen

        def produced(meta: Any) -> None:
            if meta is None:
                return
            self.notify(
                f"produced to {meta.topic} partition {meta.partition} at offset {meta.offset}"
            )
            if not self.following:
                self.reload(quiet=True)

        self.app.push_screen(ProduceScreen(self.topic, self.partition_count), produced)

    def action_register_schema(self) -> None:
        """Register a schema for this topic's values or keys (the command palette)."""
        if self.topic is None:
            self.notify("Pick a topic first.", severity="warning")
            return
        if self.refused("register_schema"):
            return
        from console.screens.register_schema import RegisterSchemaScreen

        def registered(schema: Any) -> None:
            if schema is None:
                return
            self.notify(f"registered {schema.label}")
            self.decoder = None  # read the schemas again
            if not self.following:
                self.reload(quiet=True)

        self.app.push_screen(RegisterSchemaScreen(self.topic), registered)
