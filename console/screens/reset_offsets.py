"""The dialog that resets a consumer group's committed offsets on one topic: to the earliest
or latest message, an offset, or the first message at or after a time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from console.messages import Loaded
from console.widgets.pane import note
from engine import times
from engine.errors import InvalidArgument

TARGETS = (
    ("earliest", "the oldest message"),
    ("latest", "after the newest message"),
    ("offset", "an offset (clamped to what exists)"),
    ("time", "the first message at or after a time"),
)


def parse_target(kind: str, text: str) -> str | int | datetime:
    """The `to` of `Cluster.reset_offsets` for a choice of TARGETS and its value."""
    text = text.strip()
    if kind in ("earliest", "latest"):
        return kind
    if kind == "offset":
        if not text.isdigit():
            raise InvalidArgument(f"an offset is a number >= 0, not {text!r}")
        return int(text)
    return times.to_datetime(times.parse_time(text))


class ResetOffsetsScreen(ModalScreen[dict | None]):
    """Dismissed with {TopicPartition: new offset}, or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, group_id: str, topics: list[str], topic: str | None = None) -> None:
        super().__init__()
        self.group_id = group_id
        self.topics = topics
        self.topic = topic if topic in topics else (topics[0] if topics else None)
        self._seq = 0

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
            yield Label("Offset or time (for 'offset' and 'time'; a time without a zone is UTC)")
            yield Input(id="reset-value", placeholder="42 or 2024-05-01T12:00:00Z")
            yield Static(
                "The group must have no live members: stop its consumers first.",
                id="reset-error",
                classes="error",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Reset", id="reset-apply", variant="warning")
                yield Button("Cancel", id="reset-cancel")

    @on(Button.Pressed, "#reset-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#reset-apply")
    def apply(self) -> None:
        error = self.query_one("#reset-error", Static)
        topic = self.query_one("#reset-topic", Select).value
        if not isinstance(topic, str):
            note(error, "pick a topic")
            return
        kind = str(self.query_one("#reset-to", Select).value)
        try:
            to = parse_target(kind, self.query_one("#reset-value", Input).value)
        except InvalidArgument as exc:
            note(error, str(exc))
            return
        note(error, "resetting …")
        self._seq += 1
        self._reset(self._seq, topic, to)

    @work(thread=True, group="reset")
    def _reset(self, seq: int, topic: str, to: Any) -> None:
        try:
            result = self.app.cluster.reset_offsets(self.group_id, topic, to)  # type: ignore[attr-defined]
        except Exception as exc:  # shown in the dialog
            self.post_message(Loaded(seq, error=exc))
        else:
            self.post_message(Loaded(seq, result))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        if message.seq != self._seq:
            return
        if message.error is not None:
            note(self.query_one("#reset-error", Static), f"error: {message.error}")
        else:
            self.dismiss(message.data)
