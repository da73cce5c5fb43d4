"""The Policies tab: the stream's policies in a form. Each changed field is checked with the
engine's own validation before anything is saved; saving calls `edit_stream`, which checks
the admin ACE (an `AccessDenied` is shown and nothing changes).

With a topic open, the tab also shows each policy the topic may override with its
effective value and where it comes from (topic, stream, default), and a button that opens
the dialog editing the topic's overrides (console/screens/topic_policies.py), whose fields
are these same controls with the same checks (`policy_control`, `check_value`)."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from console.widgets.pane import Pane, note
from engine import StreamInfo, TopicInfo
from engine.auth.actions import Verdict
from engine.policies import POLICIES, Policy, form_text, policy, sources, validate
from engine.times import format_ms
from engine.units import format_bytes


def _field_id(name: str) -> str:
    return f"policy-{name.replace('_', '-')}"


def policy_control(row: Policy, field: str) -> Widget:
    """The control a policy's kind asks for (the stream's form and the topic's dialog)."""
    if row.kind == "bool":
        return Checkbox("", id=field, compact=True)
    if row.kind == "choice":
        return Select([(t, t) for t in row.choices], allow_blank=False, id=field, compact=True)
    return Input(id=field, compact=True)


def set_control(widget: Widget, name: str, value: Any) -> None:
    """Show policy `name`'s `value` in its control: a duration as the lists show it ("7 d",
    engine.policies.form_text), which the engine's validation reads back to the same value."""
    if isinstance(widget, Checkbox):
        widget.value = bool(value)
    elif isinstance(widget, Select):
        widget.value = value
    elif isinstance(widget, Input):
        widget.value = form_text(name, value)


def control_value(widget: Widget) -> Any:
    if isinstance(widget, Checkbox | Select):
        return widget.value
    if isinstance(widget, Input):
        return widget.value.strip()
    return None


def check_value(name: str, value: Any, base: dict[str, Any]) -> Any:
    """`value` of policy `name` as the engine stores it; `InvalidPolicy` (a ValueError)
    saying what is wrong, in the engine's words."""
    return validate({name: value}, base=base)[name]


def topic_policies_text(info: TopicInfo, stream_policies: dict[str, Any]) -> Text:
    """Each policy a topic may override: label, effective value, source (a table's lines)."""
    where = sources(stream_policies, info.overrides)
    text = Text()
    text.append(f"Topic {info.name}: effective policies (source)\n", style="bold")
    for name, source in where.items():
        style = "bold green" if source == "topic" else "" if source == "stream" else "dim"
        text.append(f"  {policy(name).label:<28} ")
        text.append(f"{form_text(name, info.policies.get(name)):<16} ", style=style)
        text.append(f"{source}\n", style=style)
    return text


class PoliciesPane(Pane):
    AUTO_REFRESH = False  # a refresh would overwrite what the user is typing
    GATES: ClassVar[dict[str, str]] = {
        "edit_stream": "policy-save",
        "edit_topic": "topic-policy-edit",
    }

    BINDINGS = [
        Binding("ctrl+s", "save", "Save"),
        Binding("ctrl+z", "revert", "Revert", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info: StreamInfo | None = None
        self.topic_info: TopicInfo | None = None
        self.may_edit_topic = False  # the console's user satisfies the stream's topic_perm
        self.may_edit: Verdict | None = None  # why (not), engine.auth.actions
        self.saves = 0  # successful saves, for tests

    def compose(self) -> ComposeResult:
        yield Static(id="policy-summary")
        topic_part = Static(id="topic-policies")
        edit = Button("Edit topic overrides", id="topic-policy-edit", compact=True)
        topic_part.display = edit.display = False  # shown with a topic open
        yield topic_part
        yield edit
        with VerticalScroll(id="policy-form"):
            # the engine's table: its labels, help and controls, in its order
            for row in POLICIES:
                field = _field_id(row.name)
                with Horizontal(classes="policy-row"):
                    yield Label(row.label, classes="policy-name", markup=False)
                    yield policy_control(row, field)
                    yield Static(row.hint, id=f"{field}-error", classes="policy-help", markup=False)
        yield Static(id="policy-error", classes="error")
        with Horizontal(classes="dialog-buttons"):
            yield Button("Save", id="policy-save", variant="primary", compact=True)
            yield Button("Revert", id="policy-revert", compact=True)

    def context_changed(self) -> None:
        note(self.query_one("#policy-error", Static), "")

    def fetch(self) -> tuple[StreamInfo | None, TopicInfo | None, Verdict | None]:
        stream = self.cluster.stream(self.stream) if self.stream else None
        topic = self.cluster.topic(self.topic) if self.topic and stream else None
        # whether to offer the overrides' edit (engine.auth.actions; the engine decides
        # when saving)
        may = self.console.allowed()("edit_topic", stream.path) if stream else None
        return stream, topic, may

    def show(self, data: tuple[StreamInfo | None, TopicInfo | None, Verdict | None]) -> None:
        info, topic, may_edit = data
        self.info, self.topic_info = info, topic
        summary = self.query_one("#policy-summary", Static)
        topic_part = self.query_one("#topic-policies", Static)
        topic_part.display = topic is not None
        self.may_edit = may_edit
        self.may_edit_topic = bool(may_edit)
        self.query_one("#topic-policy-edit").display = topic is not None and self.may_edit_topic
        if info is not None and topic is not None:
            text = topic_policies_text(topic, info.policies)
            if may_edit is not None and not may_edit:
                text.append(
                    f"You cannot change these ({may_edit.reason}; topic_perm is "
                    f"{info.policies.get('topic_perm')}).",
                    style="dim",
                )
            topic_part.update(text)
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
            set_control(self.query_one(f"#{_field_id(name)}"), name, value)
            self._field_note(name, None)

    def _field_note(self, name: str, error: str | None) -> None:
        widget = self.query_one(f"#{_field_id(name)}-error", Static)
        widget.set_class(error is not None, "error")
        note(widget, error if error is not None else policy(name).hint)

    def form_values(self) -> dict[str, Any]:
        return {
            row.name: control_value(self.query_one(f"#{_field_id(row.name)}")) for row in POLICIES
        }

    def changes(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The changed policies, checked; and an error per field that fails its check."""
        assert self.info is not None
        current = self.info.policies
        changed: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for name, value in self.form_values().items():
            try:
                checked = check_value(name, value, current)
            except ValueError as exc:
                errors[name] = str(exc)
                continue
            if checked != current.get(name):
                changed[name] = checked
        return changed, errors

    @on(Button.Pressed, "#policy-save")
    def action_save(self) -> None:
        if self.info is None or self.refused("edit_stream"):
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
        self.show((self.info, self.topic_info, self.may_edit))

    @on(Button.Pressed, "#topic-policy-edit")
    def edit_topic(self) -> None:
        """The dialog editing the open topic's overrides; the tab reloads once it saved."""
        from console.screens.topic_policies import TopicPoliciesScreen

        if self.info is None or self.topic_info is None or self.refused("edit_topic"):
            return

        def done(saved: bool | None) -> None:
            if saved:
                self.saves += 1
                self.reload()

        self.app.push_screen(TopicPoliciesScreen(self.topic_info, self.info.policies), done)
