"""The dialog that produces one message: key, value (or null, a tombstone), headers and
partition."""

from __future__ import annotations

from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Static, TextArea

from console.events import Loaded
from console.widgets.pane import note
from engine import RecordMetadata
from engine.client.producer import produce_one
from engine.client.schemas import RegisteredSchema, encode
from engine.errors import InvalidArgument
from engine.headers import FORM_HELP, parse_headers

_SCHEMA_SEQ = -1  # the Loaded message that brings the topic's schema


class ProduceScreen(ModalScreen[RecordMetadata | None]):
    """Dismissed with the message's `RecordMetadata`, or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "send", "Send"),
    ]

    def __init__(self, topic: str, partitions: int = 0) -> None:
        super().__init__()
        self.topic = topic
        self.partitions = partitions
        self._seq = 0
        self.schema: RegisteredSchema | None = None  # of the topic's values, once loaded

    def compose(self) -> ComposeResult:
        with Vertical(id="produce-dialog", classes="dialog"):
            yield Label(f"Produce to {self.topic}", classes="dialog-title", markup=False)
            yield Label("Key (empty: no key)")
            yield Input(id="produce-key")
            yield Label("Value")
            yield TextArea(id="produce-value")
            # a null value deletes the key in a compacted stream: not the same as empty
            yield Checkbox("Null value (a tombstone)", id="produce-null")
            # shown once a worker found a schema for the topic's values (docs/SCHEMAS.md)
            encode = Checkbox("Encode with schema", id="produce-encode")
            encode.display = False
            yield encode
            yield Label(f"Headers ({FORM_HELP})")
            yield TextArea(id="produce-headers")
            hint = f"0-{self.partitions - 1}, " if self.partitions else ""
            yield Label(f"Partition ({hint}empty: by key)")
            yield Input(id="produce-partition")
            yield Static(id="produce-error", classes="error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Send", id="produce-send", variant="primary")
                yield Button("Cancel", id="produce-cancel")

    def on_mount(self) -> None:
        self.query_one("#produce-key", Input).focus()
        self._load_schema()

    @work(thread=True, group="produce-schema")
    def _load_schema(self) -> None:
        cluster: Any = self.app.cluster  # type: ignore[attr-defined]  # Screen.app is an App; here a ConsoleApp
        try:
            schema = cluster.schemas.for_topic(self.topic)
        except Exception:  # no registry access: the dialog sends bytes as before
            schema = None
        if schema is not None:
            self.post_message(Loaded(_SCHEMA_SEQ, schema))

    @on(Button.Pressed, "#produce-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#produce-send")
    def action_send(self) -> None:
        error = self.query_one("#produce-error", Static)
        key_text = self.query_one("#produce-key", Input).value
        value = self.query_one("#produce-value", TextArea).text
        null = self.query_one("#produce-null", Checkbox).value
        encode = self.query_one("#produce-encode", Checkbox)
        schema = self.schema if encode.display and encode.value and not null else None
        partition_text = self.query_one("#produce-partition", Input).value.strip()
        try:
            headers = parse_headers(self.query_one("#produce-headers", TextArea).text)
            partition = None
            if partition_text:
                if not partition_text.isdigit():
                    raise InvalidArgument(f"partition must be a number, not {partition_text!r}")
                partition = int(partition_text)
        except InvalidArgument as exc:
            note(error, str(exc))
            return
        note(error, "sending …")
        self._seq += 1
        self._send(
            self._seq,
            key_text.encode() if key_text else None,
            None if null else value.encode(),
            headers,
            partition,
            schema,
        )

    @work(thread=True, group="produce")
    def _send(
        self,
        seq: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        partition: int | None,
        schema: RegisteredSchema | None = None,
    ) -> None:
        cluster: Any = self.app.cluster  # type: ignore[attr-defined]  # Screen.app is an App; here a ConsoleApp
        try:
            if schema is not None and value is not None:
                try:  # the value is JSON, written in the Confluent wire format
                    value = encode(cluster.schemas, schema, value.decode())
                except InvalidArgument as exc:
                    raise InvalidArgument(f"not valid for the schema: {exc}") from None
            meta = produce_one(
                cluster, self.topic, value=value, key=key, partition=partition, headers=headers
            )
        except Exception as exc:  # shown in the dialog
            self.post_message(Loaded(seq, error=exc))
        else:
            self.post_message(Loaded(seq, meta))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        if message.seq == _SCHEMA_SEQ:
            self.schema = message.data
            encode = self.query_one("#produce-encode", Checkbox)
            encode.label = f"Encode with schema {self.schema.subject} v{self.schema.version}"
            encode.display = True
            return
        if message.seq != self._seq:
            return
        if message.error is not None:
            note(self.query_one("#produce-error", Static), f"error: {message.error}")
        else:
            self.dismiss(message.data)
