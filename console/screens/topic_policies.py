"""The dialog that edits a topic's own policy overrides: one row per policy a topic may
override (`engine.policies.TOPIC_POLICIES`), a tick for "the topic's own value" and the
same control as the stream's Policies form. Every ticked value is checked as a stream's
policy is (`check_value`, the engine's validation) before anything is saved; saving calls
`edit_topic` with the ticked values and None for the others (their override removed),
which checks the stream's topic_perm (a refusal is shown, nothing changes)."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Checkbox, Label, Static

from console.screens.saving import SavingDialog
from console.widgets.pane import note
from console.widgets.policies import check_value, control_value, policy_control, set_control
from engine import TopicInfo
from engine.policies import TOPIC_POLICIES, policy


def _field(name: str) -> str:
    return f"topic-policy-{name.replace('_', '-')}"


class TopicPoliciesScreen(SavingDialog):
    """Dismissed with True once saved, False when cancelled."""

    ERROR_ID = "topic-policies-error"
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    #topic-policies-dialog { height: auto; max-height: 90%; }
    #topic-policies-dialog VerticalScroll { height: auto; max-height: 30; }
    #topic-policies-dialog .topic-policy-row { height: auto; }
    #topic-policies-dialog .topic-policy-row Checkbox { width: 14; }
    #topic-policies-dialog .topic-policy-row Label { width: 26; }
    #topic-policies-dialog .topic-policy-row Input,
    #topic-policies-dialog .topic-policy-row Select { width: 24; }
    #topic-policies-dialog .topic-policy-help { width: 1fr; height: auto; }
    """

    def __init__(self, info: TopicInfo, stream_policies: dict[str, Any]) -> None:
        super().__init__()
        self.info = info
        self.stream_policies = stream_policies

    def compose(self) -> ComposeResult:
        with Vertical(id="topic-policies-dialog", classes="dialog"):
            yield Label(
                f"Policies of topic {self.info.name}: tick one to give the topic its own value",
                classes="dialog-title",
                markup=False,
            )
            with VerticalScroll():
                for name in TOPIC_POLICIES:
                    row = policy(name)
                    with Horizontal(classes="topic-policy-row"):
                        yield Checkbox("own", id=f"{_field(name)}-own", compact=True)
                        yield Label(row.label, markup=False)
                        yield policy_control(row, _field(name))
                        yield Static(
                            row.hint,
                            id=f"{_field(name)}-error",
                            classes="topic-policy-help",
                            markup=False,
                        )
            yield Static(
                "Unticked: the stream's value applies (its own, or the default).",
                id="topic-policies-error",
                classes="error",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save", id="topic-policies-save", variant="primary")
                yield Button("Cancel", id="topic-policies-cancel")

    def on_mount(self) -> None:
        for name in TOPIC_POLICIES:
            set_control(self.query_one(f"#{_field(name)}"), name, self.info.policies.get(name))
            self.query_one(f"#{_field(name)}-own", Checkbox).value = name in self.info.overrides

    def changes(self) -> tuple[dict[str, Any], dict[str, str]]:
        """{policy: checked value, or None to remove the override}, and the errors by field."""
        changes: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for name in TOPIC_POLICIES:
            if not self.query_one(f"#{_field(name)}-own", Checkbox).value:
                changes[name] = None
                continue
            value = control_value(self.query_one(f"#{_field(name)}"))
            try:
                changes[name] = check_value(name, value, self.stream_policies)
            except ValueError as exc:
                errors[name] = str(exc)
        return changes, errors

    @on(Button.Pressed, "#topic-policies-cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed, "#topic-policies-save")
    def save(self) -> None:
        changes, found = self.changes()
        for name in TOPIC_POLICIES:
            widget = self.query_one(f"#{_field(name)}-error", Static)
            widget.set_class(name in found, "error")
            note(widget, found.get(name, policy(name).hint))
        error = self.query_one("#topic-policies-error", Static)
        if found:
            note(error, f"fix {len(found)} field(s) first; nothing was saved")
            return
        cluster = self.app.cluster  # type: ignore[attr-defined]  # Screen.app is an App; here a ConsoleApp
        self.save_in_worker(lambda: cluster.edit_topic(self.info.name, **changes))
