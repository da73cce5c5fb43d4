"""The dialog that starts a replay job, with the fields of the chosen kind: copy,
materialize, window-counts or custom (spark_tasks.jobs.check_params has the rules)."""

from __future__ import annotations

from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from console.events import Loaded
from console.widgets.pane import note
from engine.errors import InvalidArgument
from spark_tasks import jobs

# field: (label, placeholder)
FIELDS: dict[str, tuple[str, str]] = {
    "source": ("Source topic", "/stream:topic"),
    "target": ("Target topic", "/stream:topic"),
    "output": ("Output directory (Parquet)", "/path/to/dir"),
    "window": ("Window", "1 minute"),
    "file": ("Python file", "/path/to/job.py"),
    "function": ("Function (DataFrame -> DataFrame)", "transform"),
    "from_offset": ("From offset", "every partition"),
    "to_offset": ("To offset (exclusive)", ""),
    "from_time": ("From time (UTC)", "2024-05-01T12:00:00Z or ms"),
    "to_time": ("To time (UTC, inclusive)", "2024-05-01T13:00:00Z or ms"),
    "master": ("Spark master", jobs.DEFAULT_MASTER),
    "isolation_level": ("Transactions", "read_committed (default) or read_uncommitted"),
}
RANGE = ("from_offset", "to_offset", "from_time", "to_time", "isolation_level", "master")
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "copy": ("source", "target", *RANGE),
    "materialize": ("source", "target", "output", *RANGE),
    "window-counts": ("source", "window", "output", *RANGE),
    "custom": ("source", "file", "function", "output", "target", *RANGE),
}
DEFAULTS = {"window": "1 minute", "function": "transform", "master": jobs.DEFAULT_MASTER}


def _fid(name: str) -> str:
    return name.replace("_", "-")


def collect(kind: str, raw: dict[str, str]) -> dict[str, Any]:
    """The job's parameters from the dialog's text fields (only the kind's, only filled)."""
    params: dict[str, Any] = {}
    for name in KIND_FIELDS[kind]:
        value = raw.get(name, "").strip()
        if not value:
            continue
        if name in ("from_offset", "to_offset"):
            if not value.isdigit():
                raise InvalidArgument(f"{FIELDS[name][0].lower()} must be a number, not {value!r}")
            params[name] = int(value)
        else:
            params[name] = value
    return params


class ReplayStartScreen(ModalScreen[int | None]):
    """Dismissed with the new job's id, or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self, cluster_path: str, topic: str | None = None, kind: str | None = None
    ) -> None:
        super().__init__()
        self.cluster_path = cluster_path
        self.topic = topic
        self.kind = kind if kind in KIND_FIELDS else "copy"
        self._seq = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="replay-dialog", classes="dialog"):
            yield Label("Start a replay job", classes="dialog-title")
            yield Select(
                [(k, k) for k in jobs.KINDS], value=self.kind, allow_blank=False, id="replay-kind"
            )
            with VerticalScroll(id="replay-fields"):
                for name, (label, placeholder) in FIELDS.items():
                    with Horizontal(id=f"replay-row-{_fid(name)}", classes="form-row"):
                        yield Label(label, classes="form-label")
                        value = DEFAULTS.get(name, "")
                        if name == "source" and self.topic:
                            value = self.topic
                        yield Input(value=value, placeholder=placeholder, id=f"replay-{_fid(name)}")
            yield Static(id="replay-error", classes="error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Start", id="replay-start", variant="primary")
                yield Button("Cancel", id="replay-dialog-cancel")

    def on_mount(self) -> None:
        self._show_fields()
        self._prewarm()

    @work(thread=True, group="replay-prewarm")
    def _prewarm(self) -> None:
        """Start Spark for the job while the user fills the dialog (`jobs.prewarm`: a
        standby runner, which stops when idle; `PLET_REPLAYS_WARM=0` turns it off), so that
        the first job starts as fast as the later ones."""
        jobs.prewarm(self.cluster_path)

    @on(Select.Changed, "#replay-kind")
    def _kind(self, event: Select.Changed) -> None:
        self.kind = str(event.value)
        self._show_fields()

    def _show_fields(self) -> None:
        for name in FIELDS:
            self.query_one(f"#replay-row-{_fid(name)}").display = name in KIND_FIELDS[self.kind]

    @on(Button.Pressed, "#replay-dialog-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#replay-start")
    def start(self) -> None:
        raw = {name: self.query_one(f"#replay-{_fid(name)}", Input).value for name in FIELDS}
        try:
            params = collect(self.kind, raw)
            jobs.check_params(self.kind, params)  # the same rules submit applies, at once
        except InvalidArgument as exc:
            note(self.query_one("#replay-error", Static), str(exc))
            return
        note(self.query_one("#replay-error", Static), "starting …")
        self._seq += 1
        self._submit(self._seq, self.kind, params)

    @work(thread=True, group="replay-submit")
    def _submit(self, seq: int, kind: str, params: dict[str, Any]) -> None:
        try:
            job_id = jobs.submit(self.cluster_path, kind, warm=True, **params)
        except Exception as exc:  # shown in the dialog
            self.post_message(Loaded(seq, error=exc))
        else:
            self.post_message(Loaded(seq, job_id))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        if message.seq != self._seq:
            return
        if message.error is not None:
            note(self.query_one("#replay-error", Static), f"error: {message.error}")
        else:
            self.dismiss(message.data)
