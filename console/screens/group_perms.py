"""The dialog that edits a consumer group's own permissions (engine.groups.perms): one ACE
per permission (join, commit, describe, reset, delete), blank for the default
(`u:<creator>`) or the prefix rule that applies. Every field is checked with the engine's
ACE parser before anything is saved (`ace_errors`, the same check and message as a
stream's ACEs); saving calls `set_group_permissions`, which lets only the group's creator
and administrators change it (a refusal is shown, nothing changes)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from console.screens.saving import SavingDialog
from console.widgets.pane import note
from engine.groups import GroupPermissions
from engine.groups.perms import PERMS, ace_errors


def _field(perm: str) -> str:
    return f"perm-{perm.replace('_', '-')}"


class GroupPermsScreen(SavingDialog):
    """Dismissed with True once saved, False when cancelled."""

    ERROR_ID = "perms-error"
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    #perms-dialog .perm-row { height: auto; }
    #perms-dialog .perm-row Label { width: 16; }
    #perms-dialog .perm-row Input { width: 1fr; }
    #perms-dialog .perm-error { height: auto; }
    """

    def __init__(self, perms: GroupPermissions) -> None:
        super().__init__()
        self.perms = perms

    def compose(self) -> ComposeResult:
        perms = self.perms
        with Vertical(id="perms-dialog", classes="dialog"):
            yield Label(
                f"Permissions of group {perms.group_id} (creator: {perms.creator or 'none yet'})",
                classes="dialog-title",
                markup=False,
            )
            for perm in PERMS:
                with Horizontal(classes="perm-row"):
                    yield Label(perm, markup=False)
                    yield Input(
                        perms.own(perm),
                        placeholder="" if perms.sources[perm] == "group" else perms.aces[perm],
                        id=_field(perm),
                        compact=True,
                    )
                yield Static("", id=f"{_field(perm)}-error", classes="perm-error error")
            yield Static(
                "Blank: the default (u:<creator>) or the prefix rule that applies. ACEs as a "
                "stream's: u:NAME, g:GROUP, p, with &, |, ! and parentheses.",
                id="perms-error",
                classes="error",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save", id="perms-save", variant="primary")
                yield Button("Cancel", id="perms-cancel")

    def values(self) -> dict[str, str]:
        return {p: self.query_one(f"#{_field(p)}", Input).value.strip() for p in PERMS}

    @on(Button.Pressed, "#perms-cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed, "#perms-save")
    def save(self) -> None:
        values = self.values()
        found = ace_errors(values)
        for perm in PERMS:
            note(self.query_one(f"#{_field(perm)}-error", Static), found.get(perm, ""))
        error = self.query_one("#perms-error", Static)
        if found:
            note(error, f"fix {len(found)} field(s) first; nothing was saved")
            return
        cluster = self.app.cluster  # type: ignore[attr-defined]  # Screen.app is an App; here a ConsoleApp
        self.save_in_worker(lambda: cluster.set_group_permissions(self.perms.group_id, **values))
