"""The Policies tab: the stream's policies in a form. Each changed field is checked with the
engine's own validation before anything is saved; saving calls `edit_stream`, which checks
the admin ACE (an `AccessDenied` is shown and nothing changes)."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from console.widgets.pane import Pane, note
from engine import StreamInfo
from engine.policies import POLICIES, policy, validate
from engine.times import format_ms
from engine.units import format_bytes


def _field_id(name: str) -> str:
    return f"policy-{name.replace('_', '-')}"


class PoliciesPane(Pane):
    AUTO_REFRESH = False  # a refresh would overwrite what the user is typing

    BINDINGS = [
        Binding("ctrl+s", "save", "Save"),
        Binding("ctrl+z", "revert", "Revert", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info: StreamInfo | None = None
        self.saves = 0  # successful saves, for tests

    def compose(self) -> ComposeResult:
        yield Static(id="policy-summary")
        with VerticalScroll(id="policy-form"):
            # the engine's table: its labels, help and controls, in its order
            for row in POLICIES:
                field = _field_id(row.name)
                with Horizontal(classes="policy-row"):
                    yield Label(row.label, classes="policy-name", markup=False)
                    if row.kind == "bool":
                        yield Checkbox("", id=field, compact=True)
                    elif row.kind == "choice":
                        yield Select(
                            [(t, t) for t in row.choices],
                            allow_blank=False,
                            id=field,
                            compact=True,
                        )
                    else:
                        yield Input(id=field, compact=True)
                    yield Static(row.hint, id=f"{field}-error", classes="policy-help", markup=False)
        yield Static(id="policy-error", classes="error")
        with Horizontal(classes="dialog-buttons"):
            yield Button("Save", id="policy-save", variant="primary", compact=True)
            yield Button("Revert", id="policy-revert", compact=True)

    def context_changed(self) -> None:
        note(self.query_one("#policy-error", Static), "")

    def fetch(self) -> StreamInfo | None:
        return self.cluster.stream(self.stream) if self.stream else None

    def show(self, info: StreamInfo | None) -> None:
        self.info = info
        summary = self.query_one("#policy-summary", Static)
        if info is None:
            note(summary, "Pick a stream (or one of its topics) to see its policies.")
            return
        note(
            summary,
            f"{info.path} · created by {info.creator} on {format_ms(info.created_ms)} · "
            f"{info.topic_count:,} topics · {info.messages:,} messages · {format_bytes(info.bytes)}",
            "bold",
        )
        known = {row.name for row in POLICIES}
        for name, value in info.policies.items():
            if name not in known:
                continue
            widget = self.query_one(f"#{_field_id(name)}")
            if isinstance(widget, Checkbox):
                widget.value = bool(value)
            elif isinstance(widget, Select):
                widget.value = value
            elif isinstance(widget, Input):
                widget.value = str(value)
            self._field_note(name, None)

    def _field_note(self, name: str, error: str | None) -> None:
        widget = self.query_one(f"#{_field_id(name)}-error", Static)
        widget.set_class(error is not None, "error")
        note(widget, error if error is not None else policy(name).hint)

    def form_values(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for row in POLICIES:
            widget = self.query_one(f"#{_field_id(row.name)}")
            if isinstance(widget, Checkbox | Select):
                out[row.name] = widget.value
            elif isinstance(widget, Input):
                out[row.name] = widget.value.strip()
        return out

    def changes(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The changed policies, checked; and an error per field that fails its check."""
        assert self.info is not None
        current = self.info.policies
        changed: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for name, value in self.form_values().items():
            try:
                checked = validate({name: value}, base=current)[name]
            except ValueError as exc:
                errors[name] = str(exc)
                continue
            if checked != current.get(name):
                changed[name] = checked
        return changed, errors

    @on(Button.Pressed, "#policy-save")
    def action_save(self) -> None:
        if self.info is None:
            return
        changed, errors = self.changes()
        for row in POLICIES:
            self._field_note(row.name, errors.get(row.name))
        error = self.query_one("#policy-error", Static)
        if errors:
            note(error, f"fix {len(errors)} field(s) first; nothing was saved")
            return
        if not changed:
            note(error, "nothing changed")
            return
        path = self.info.path
        note(error, "saving …")

        def save() -> str:
            self.cluster.edit_stream(path, **changed)
            return f"saved {', '.join(sorted(changed))} of {path}"

        self.act(save)

    def on_action_done(self, message: Any) -> None:
        if message.error is None:
            self.saves += 1
            note(self.query_one("#policy-error", Static), message.text)
        super().on_action_done(message)

    def show_error(self, error: BaseException) -> None:
        note(self.query_one("#policy-error", Static), f"error: {error}")
        super().show_error(error)

    @on(Button.Pressed, "#policy-revert")
    def action_revert(self) -> None:
        self.show(self.info)
