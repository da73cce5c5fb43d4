"""The dialog that registers a schema for the current topic's values or keys (subject
`/stream:topic-value` or `-key`, docs/SCHEMAS.md), as the console's user: the registry's
ACE rules apply (produce_perm on the stream)."""

from __future__ import annotations

from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Select, Static, TextArea

from console.events import Loaded
from console.widgets.pane import note
from engine.client.schemas import AVRO, SCHEMA_TYPES, RegisteredSchema


class RegisterSchemaScreen(ModalScreen[RegisteredSchema | None]):
    """Dismissed with the registered schema, or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "register", "Register"),
    ]

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic
        self._seq = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="schema-dialog", classes="dialog"):
            yield Label(f"Register a schema for {self.topic}", classes="dialog-title", markup=False)
            yield Label("For")
            yield Select(
                [("values", "value"), ("keys", "key")],
                value="value",
                allow_blank=False,
                id="schema-part",
            )
            yield Label("Schema type")
            yield Select(
                [(t, t) for t in SCHEMA_TYPES], value=AVRO, allow_blank=False, id="schema-type"
            )
            yield Label("Schema (Avro JSON, .proto text or a JSON Schema)")
            yield TextArea(id="schema-text")
            yield Static(id="schema-error", classes="error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Register", id="schema-register", variant="primary")
                yield Button("Cancel", id="schema-cancel")

    def on_mount(self) -> None:
        self.query_one("#schema-text", TextArea).focus()

    @on(Button.Pressed, "#schema-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#schema-register")
    def action_register(self) -> None:
        part = self.query_one("#schema-part", Select).value
        kind = self.query_one("#schema-type", Select).value
        text = self.query_one("#schema-text", TextArea).text
        note(self.query_one("#schema-error", Static), "registering …")
        self._seq += 1
        self._register(self._seq, f"{self.topic}-{part}", str(kind), text)

    @work(thread=True, group="register-schema")
    def _register(self, seq: int, subject: str, kind: str, text: str) -> None:
        cluster: Any = self.app.cluster  # type: ignore[attr-defined]  # Screen.app is an App; here a ConsoleApp
        try:
            schema = cluster.schemas.register(subject, text, kind)
        except Exception as exc:  # shown in the dialog
            self.post_message(Loaded(seq, error=exc))
        else:
            self.post_message(Loaded(seq, schema))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        if message.seq != self._seq:
            return
        if message.error is not None:
            note(self.query_one("#schema-error", Static), f"error: {message.error}")
        else:
            self.dismiss(message.data)
