"""The effective permissions screen: for one console user, what each stream's ACE policies
let them do (`Cluster.effective_permissions`), a page of streams at a time.

The terminal console acts as whoever opened the cluster's files, a cluster administrator,
so any user may be shown; it starts on the console's own user when that is a console
user, else on the first one. The table says yes or no in words (with ✓/✗), the ACE texts
of the highlighted stream are shown under it, and `pagedown`/`pageup` turn the pages.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, Static

from console.events import Loaded
from console.widgets.table import Table
from engine import Cluster
from engine.auth.effective import ADMINISTRATOR, INVALID, READ_ONLY, EffectivePermissions

PAGE_SIZE = 100


def mark(allowed: bool, reason: str) -> Text:
    """A cell: the answer in words, with a sign and a colour that only repeat it."""
    text = Text("✓ yes", style="green") if allowed else Text("✗ no", style="red")
    if reason == ADMINISTRATOR:
        text.append(" (admin)", style="dim")
    elif reason == INVALID:
        text.append(" (invalid ACE)", style="dim")
    elif reason == READ_ONLY:
        text.append(" (read-only user)", style="dim")
    return text


def column_title(policy: str) -> str:
    return policy.removesuffix("_perm").capitalize()


class PermissionsScreen(ModalScreen[None]):
    """Dismissed with None. `loads` counts answers shown (tests wait on it)."""

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("pagedown", "page(1)", "Next page"),
        Binding("pageup", "page(-1)", "Previous page"),
    ]
    DEFAULT_CSS = """
    PermissionsScreen { align: center middle; }
    #perm-dialog { width: 95%; height: 90%; border: thick $primary; background: $surface;
                   padding: 0 1; }
    #perm-form { height: 3; }
    #perm-form Label { padding: 1 1 0 0; }
    #perm-user { width: 24; }
    #perm-prefix { width: 30; }
    #perm-table { height: 1fr; }
    #perm-status { height: 1; }
    #perm-detail { height: auto; max-height: 8; color: $text-muted; }
    """

    def __init__(self, cluster: Cluster, user: str | None = None) -> None:
        super().__init__()
        self.cluster = cluster
        self.user = user
        self.page_offset = 0
        self.result: EffectivePermissions | None = None
        self._seq = 0
        self.loads = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="perm-dialog", classes="dialog"):
            yield Static("Effective permissions", classes="section-title")
            with Horizontal(id="perm-form"):
                yield Label("User")
                yield Input(self.user or "", id="perm-user", placeholder="user name")
                yield Label("Path prefix")
                yield Input(id="perm-prefix", placeholder="/apps")
                yield Button("Show", id="perm-show", variant="primary")
            yield Static("", id="perm-status")
            yield Table(id="perm-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="perm-detail")

    def on_mount(self) -> None:
        if self.user is None:
            self._default_user()
        else:
            self.load()

    @work(thread=True, group="permissions")
    def _default_user(self) -> None:
        """The console's own user when it is a console user, else the first one (the
        answer comes back as request 0; loads are numbered from 1)."""
        try:
            names = [u.name for u in self.cluster.users()]
        except Exception as exc:  # shown to the user
            self.post_message(Loaded(0, error=exc))
            return
        own = self.cluster.principal.user
        self.post_message(Loaded(0, own if own in names else (names[0] if names else "")))

    def _start(self, name: str) -> None:
        if not name:
            self._status(Text("No console users yet: add one with 'plet user add'.", "yellow"))
            self.loads += 1
            return
        self.query_one("#perm-user", Input).value = name
        self.load()

    # --- loading ---------------------------------------------------------------------

    def load(self, offset: int = 0) -> None:
        self.user = self.query_one("#perm-user", Input).value.strip()
        prefix = self.query_one("#perm-prefix", Input).value  # the engine adds a leading "/"
        self.page_offset = offset
        self._seq += 1
        self._status(Text("loading…", "dim"))
        self._fetch(self._seq, self.user, prefix or None, offset)

    @work(thread=True, group="permissions")
    def _fetch(self, seq: int, user: str, prefix: str | None, offset: int) -> None:
        try:
            result = self.cluster.effective_permissions(
                user, prefix=prefix, limit=PAGE_SIZE, offset=offset
            )
        except Exception as exc:  # shown to the user; a worker must not kill the app
            self.post_message(Loaded(seq, error=exc))
        else:
            self.post_message(Loaded(seq, result))

    def on_loaded(self, message: Loaded) -> None:
        if message.seq == 0 and message.error is None:
            self._start(message.data)
            return
        if message.seq not in (0, self._seq):
            return  # an answer to an older request
        if message.error is not None:
            self._status(Text(f"error: {message.error}", "red"))
            self.query_one("#perm-table", DataTable).clear(columns=True)
            self.query_one("#perm-detail", Static).update("")
            self.loads += 1
            return
        self.show(message.data)

    def show(self, result: EffectivePermissions) -> None:
        self.result = result
        table = self.query_one("#perm-table", DataTable)
        table.clear(columns=True)
        table.add_columns("Stream", "Creator", *(column_title(p) for p in result.policies))
        for item in result.streams:
            table.add_row(
                item.stream,
                item.creator,
                *(mark(item.allowed[p], item.reasons[p]) for p in result.policies),
                key=item.stream,
            )
        who = f"{result.user} (groups {', '.join(result.groups) or 'none'})"
        if result.admin:
            who += ", an administrator: every ACE lets them through"
        if result.streams:
            first = result.offset + 1
            span = f"streams {first:,}–{first + len(result.streams) - 1:,} of {result.total:,}"
        else:
            span = "no streams" + (
                f" whose path starts with {result.prefix}" if result.prefix else ""
            )
        pages = " · pgdn/pgup: pages" if result.total > len(result.streams) else ""
        self._status(f"{who} · {span}{pages}")
        self._detail(0)
        self.loads += 1

    def _status(self, text: Text | str) -> None:
        self.query_one("#perm-status", Static).update(text)

    def _detail(self, row: int) -> None:
        """The ACE texts of the stream at `row`, one line per policy."""
        detail = self.query_one("#perm-detail", Static)
        if self.result is None or not 0 <= row < len(self.result.streams):
            detail.update("")
            return
        item = self.result.streams[row]
        lines = Text(f"{item.stream} (creator {item.creator})\n", style="bold")
        for policy in self.result.policies:
            lines.append(f"{policy}: ")
            lines.append(item.aces[policy] or "(none)")
            lines.append(f"  → {'yes' if item.allowed[policy] else 'no'}\n")
        detail.update(lines)

    # --- events and actions ----------------------------------------------------------

    @on(DataTable.RowHighlighted, "#perm-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail(event.cursor_row)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.load()

    @on(Button.Pressed, "#perm-show")
    def _pressed(self) -> None:
        self.load()

    def action_page(self, step: Any) -> None:
        if self.result is None:
            return
        offset = self.page_offset + int(step) * PAGE_SIZE
        if 0 <= offset < self.result.total:
            self.load(offset)

    def action_close(self) -> None:
        self.dismiss(None)
