"""The dialog that resets a consumer group's committed offsets on one topic, in all its
partitions or those listed: to the earliest or latest message, an offset, the first message
at or after a time, or the committed offset shifted by N. Preview shows per partition the
offset now and after and the lag before and after; Apply then commits exactly that plan (the
engine plans again and, if the log or the offsets moved, the dialog says so and shows the new
plan instead of applying). Reset without a preview applies at once, as before."""

from __future__ import annotations

from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, Select, Static

from console.messages import Loaded
from console.widgets.pane import note
from engine.errors import InvalidArgument, InvalidOffset
from engine.groups import TARGETS, form_target, parse_partitions
from engine.records import OffsetResetPlan


def _rows(plan: list[OffsetResetPlan]) -> list[tuple[int, int | None, int]]:
    return [(p.partition, p.current, p.new) for p in plan]


class ResetOffsetsScreen(ModalScreen[dict | None]):
    """Dismissed with {TopicPartition: new offset}, or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    #reset-values { height: auto; }
    #reset-values Input { width: 1fr; }
    #reset-plan { height: auto; max-height: 8; margin-top: 1; }
    """

    def __init__(self, group_id: str, topics: list[str], topic: str | None = None) -> None:
        super().__init__()
        self.group_id = group_id
        self.topics = topics
        self.topic = topic if topic in topics else (topics[0] if topics else None)
        self._seq = 0
        # The preview shown: (the arguments it was planned with, the plan).
        self.preview: tuple[tuple, list[OffsetResetPlan]] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="reset-dialog", classes="dialog"):
            yield Label(
                f"Reset offsets of group {self.group_id}", classes="dialog-title", markup=False
            )
            yield Label("Topic")
            yield Select(
                [(t, t) for t in self.topics],
                value=self.topic if self.topic else Select.NULL,
                id="reset-topic",
            )
            yield Label("Reset to")
            yield Select(
                [(f"{k}: {text}", k) for k, text in TARGETS],
                value="earliest",
                allow_blank=False,
                id="reset-to",
            )
            yield Label(
                "Offset, time or shift (for 'offset', 'time', 'shift'; a time without a zone "
                "is UTC) · Partitions (blank: all)"
            )
            with Horizontal(id="reset-values"):
                yield Input(id="reset-value", placeholder="42, 2024-05-01T12:00:00Z or -100")
                yield Input(id="reset-partitions", placeholder="all, or 0, 2, 5-7")
            plan: DataTable[str] = DataTable(id="reset-plan", cursor_type="row", show_cursor=False)
            plan.add_columns(
                "P", "Log start", "Log end", "Committed", "New", "Lag before", "Lag after"
            )
            yield plan
            yield Static(
                "The group must have no live members: stop its consumers first.",
                id="reset-error",
                classes="error",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Preview", id="reset-preview")
                yield Button("Reset", id="reset-apply", variant="warning")
                yield Button("Cancel", id="reset-cancel")

    @on(Button.Pressed, "#reset-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    def _arguments(self) -> tuple[str, Any, list[int] | None] | None:
        """(topic, to, partitions) from the fields, or None with the error shown."""
        error = self.query_one("#reset-error", Static)
        topic = self.query_one("#reset-topic", Select).value
        if not isinstance(topic, str):
            note(error, "pick a topic")
            return None
        kind = str(self.query_one("#reset-to", Select).value)
        try:
            to = form_target(kind, self.query_one("#reset-value", Input).value)
            partitions = parse_partitions(self.query_one("#reset-partitions", Input).value)
        except (InvalidArgument, InvalidOffset) as exc:
            note(error, str(exc))
            return None
        return topic, to, partitions

    @on(Button.Pressed, "#reset-preview")
    def preview_plan(self) -> None:
        args = self._arguments()
        if args is None:
            return
        note(self.query_one("#reset-error", Static), "planning …")
        self._seq += 1
        self._plan(self._seq, args)

    @on(Button.Pressed, "#reset-apply")
    def apply(self) -> None:
        args = self._arguments()
        if args is None:
            return
        note(self.query_one("#reset-error", Static), "resetting …")
        self._seq += 1
        shown = self.preview[1] if self.preview and self.preview[0] == args else None
        self._reset(self._seq, args, shown)

    @work(thread=True, group="reset")
    def _plan(self, seq: int, args: tuple) -> None:
        topic, to, partitions = args
        try:
            plan = self.app.cluster.plan_offset_reset(  # type: ignore[attr-defined]  # Screen.app is an App; here a ConsoleApp
                self.group_id, topic, to, partitions=partitions
            )
        except Exception as exc:  # shown in the dialog
            self.post_message(Loaded(seq, error=exc))
        else:
            self.post_message(Loaded(seq, ("plan", args, plan)))

    @work(thread=True, group="reset")
    def _reset(self, seq: int, args: tuple, shown: list[OffsetResetPlan] | None) -> None:
        topic, to, partitions = args
        cluster = self.app.cluster  # type: ignore[attr-defined]  # Screen.app is an App; here a ConsoleApp
        try:
            if shown is None:
                result = cluster.reset_offsets(self.group_id, topic, to, partitions=partitions)
            else:
                plan = cluster.plan_offset_reset(self.group_id, topic, to, partitions=partitions)
                if _rows(plan) != _rows(shown):
                    self.post_message(Loaded(seq, ("moved", args, plan)))
                    return
                result = cluster.apply_offset_reset(self.group_id, plan)
        except Exception as exc:  # shown in the dialog
            self.post_message(Loaded(seq, error=exc))
        else:
            self.post_message(Loaded(seq, ("done", result)))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        if message.seq != self._seq:
            return
        error = self.query_one("#reset-error", Static)
        if message.error is not None:
            note(error, f"error: {message.error}")
            return
        kind = message.data[0]
        if kind == "done":
            self.dismiss(message.data[1])
            return
        _, args, plan = message.data
        self.preview = (args, plan)
        self._show_plan(plan)
        self.query_one("#reset-apply", Button).label = "Apply"
        if kind == "moved":
            note(
                error,
                "the log or the offsets moved since the preview: nothing changed; "
                "check the new preview and apply again",
            )
        else:
            note(error, f"preview of {len(plan)} partition(s): Apply commits exactly this")

    def _show_plan(self, plan: list[OffsetResetPlan]) -> None:
        table = self.query_one("#reset-plan", DataTable)
        table.clear()
        for p in plan:
            table.add_row(
                p.partition,
                f"{p.log_start_offset:,}",
                f"{p.log_end_offset:,}",
                "-" if p.current is None else f"{p.current:,}",
                f"{p.new:,}",
                f"{p.lag_before:,}",
                f"{p.lag_after:,}",
                key=str(p.partition),
            )

    @on(Input.Changed)
    @on(Select.Changed)
    def _fields_changed(self) -> None:
        """A preview of other arguments must not be applied: Reset again."""
        if self.preview is not None:
            self.preview = None
            self.query_one("#reset-plan", DataTable).clear()
            self.query_one("#reset-apply", Button).label = "Reset"
