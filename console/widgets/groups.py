"""The Groups tab: consumer groups with state and lag; the chosen group's lag history (a
chart), its members with their assignment, its committed offsets per partition and its
permissions (each ACE, where it comes from, whether the console's user passes it); a dialog
to reset its offsets (with a preview), one to edit its permissions (its creator and
administrators), and deleting a group with no live members after a confirmation."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, DataTable, Static

from console.events import GroupPermsLoaded
from console.widgets.chart import MetricChart
from console.widgets.pane import Pane, fill_table, note
from console.widgets.table import Table
from engine import TopicPartition
from engine.groups import GroupPermissions
from engine.records import GroupInfo
from engine.times import format_ms


class GroupsPane(Pane):
    GATES: ClassVar[dict[str, str]] = {
        "reset_offsets": "group-reset",
        "delete_group": "group-delete",
        "edit_group_permissions": "group-perms-edit",
    }
    # Not `r`: that refreshes, whatever has the focus.
    BINDINGS = [
        Binding("o", "reset", "Reset offsets"),
        Binding("delete", "delete_group", "Delete group"),
        Binding("a", "edit_perms", "Permissions"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups: dict[str, GroupInfo] = {}
        self.selected: str | None = None
        # the selected group's permissions, loaded in a worker when the selection changes
        self.perms: GroupPermissions | None = None
        self._perms_seq = 0
        self._reset_pending = False  # `o` came before the tab's first read: open it then

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-toolbar"):
            yield Static(id="group-summary")
            yield Button("Reset offsets…", id="group-reset", compact=True)
            yield Button("Delete group…", id="group-delete", compact=True)
            yield Button("Permissions…", id="group-perms-edit", compact=True)
        groups = Table(id="group-table", cursor_type="row", zebra_stripes=True)
        groups.add_columns(
            "Group", "State", "Generation", "Strategy", "Members", "Partitions", "Lag"
        )
        yield groups
        yield MetricChart("Lag", "group", None, "lag_messages", id="chart-group-lag")
        yield Static("Members", classes="section-title")
        members = Table(id="group-members", cursor_type="row")
        members.add_columns("Member", "Client", "Host", "Assignment", "Last heartbeat (UTC)")
        yield members
        yield Static("Committed offsets", classes="section-title")
        parts = Table(id="group-partitions", cursor_type="row")
        parts.add_columns("Topic", "P", "Committed", "Log end", "Lag", "Member")
        yield parts
        yield Static("Permissions", classes="section-title")
        yield Static(id="group-perms-summary")
        perms = Table(id="group-perms", cursor_type="row")
        perms.add_columns("Permission", "ACE", "From", "You")
        yield perms

    def fetch(self) -> list[GroupInfo]:
        return self.cluster.groups()

    def show(self, groups: list[GroupInfo]) -> None:
        self.groups = {g.group_id: g for g in groups}
        note(
            self.query_one("#group-summary", Static),
            f"{len(groups)} group(s) · total lag {sum(g.lag for g in groups):,}"
            if groups
            else "No consumer groups yet.",
        )
        fill_table(
            self.query_one("#group-table", DataTable),
            (
                (
                    g.group_id,
                    (
                        Text(g.group_id),
                        g.state,
                        g.generation,
                        g.protocol or "-",
                        len(g.members),
                        len(g.partitions),
                        f"{g.lag:,}",
                    ),
                )
                for g in groups
            ),
        )
        if self.selected not in self.groups:
            self.selected = groups[0].group_id if groups else None
        self._show_group()
        if self._reset_pending:
            self._reset_pending = False
            self.action_reset()

    @on(DataTable.RowHighlighted, "#group-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value if event.row_key is not None else None
        if key in self.groups and key != self.selected:
            self.selected = key
            self._show_group()

    def gate_target(self) -> str | None:
        return self.selected if self.selected in self.groups else None

    def _show_group(self) -> None:
        info = self.groups.get(self.selected or "")
        self._load_perms(info.group_id if info else None)
        if self.verdicts_for != self.gate_target():
            self.load_gates()  # a group newly picked (a refresh asks anyway)
        self.query_one("#chart-group-lag", MetricChart).show_series(
            f"{self.selected} lag" if info else "Lag", "group", self.selected if info else None
        )
        members = info.members if info else []
        parts = info.partitions if info else []
        fill_table(
            self.query_one("#group-members", DataTable),
            (
                (
                    m.member_id,
                    (
                        Text(m.member_id),
                        Text(m.client_id),
                        Text(m.host),
                        Text(
                            ", ".join(f"{tp.topic}[{tp.partition}]" for tp in m.assignment) or "-"
                        ),
                        format_ms(m.last_heartbeat_ms),
                    ),
                )
                for m in members
            ),
        )
        owner = {tp: m.member_id for m in members for tp in m.assignment}
        fill_table(
            self.query_one("#group-partitions", DataTable),
            (
                (
                    f"{p.topic}:{p.partition}",
                    (
                        Text(p.topic),
                        p.partition,
                        "-" if p.committed is None else f"{p.committed:,}",
                        f"{p.log_end_offset:,}",
                        f"{p.lag:,}",
                        Text(owner.get(TopicPartition(p.topic, p.partition), "-")),
                    ),
                )
                for p in parts
            ),
        )

    def _load_perms(self, group_id: str | None) -> None:
        self._perms_seq += 1
        if group_id is None:
            self._show_perms(None)
        else:  # with every refresh too: a few reads of one group
            self._fetch_perms(self._perms_seq, group_id)

    @work(thread=True, group="group-perms")
    def _fetch_perms(self, seq: int, group_id: str) -> None:
        try:
            perms = self.cluster.group_permissions(group_id)
        except Exception as exc:  # shown in the summary; a worker must not kill the app
            self.post_message(GroupPermsLoaded(seq, error=exc))
        else:
            self.post_message(GroupPermsLoaded(seq, perms))

    @on(GroupPermsLoaded)
    def _perms_loaded(self, message: GroupPermsLoaded) -> None:
        message.stop()
        if message.seq != self._perms_seq:
            return
        if message.error is not None:
            self.perms = None
            note(self.query_one("#group-perms-summary", Static), f"error: {message.error}")
            self.query_one("#group-perms", DataTable).clear()
            return
        self._show_perms(message.data)

    def _show_perms(self, perms: GroupPermissions | None) -> None:
        self.perms = perms
        summary = self.query_one("#group-perms-summary", Static)
        table = self.query_one("#group-perms", DataTable)
        if perms is None:
            note(summary, "")
            table.clear()
            return
        creator = perms.creator or "none yet (whoever may consume all its topics)"
        edit = "you may edit them (a)" if perms.editable else "its creator's to edit"
        note(summary, f"creator: {creator} · {edit}")
        fill_table(
            table,
            (
                (
                    perm,
                    (
                        perm,
                        Text(ace),
                        perms.sources[perm],
                        "yes" if perm in perms.allowed else "no",
                    ),
                )
                for perm, ace in perms.aces.items()
            ),
        )

    @on(Button.Pressed, "#group-perms-edit")
    def action_edit_perms(self) -> None:
        perms = self.perms
        if perms is None or perms.group_id != self.selected:
            self.notify("Pick a group first.", severity="warning")
            return
        if self.refused("edit_group_permissions"):
            return
        if not perms.editable:
            self.notify(
                f"Only the creator of {perms.group_id} ({perms.creator or 'none yet'}) or an "
                "administrator may change its permissions.",
                severity="warning",
            )
            return
        from console.screens.group_perms import GroupPermsScreen

        group_id = perms.group_id

        def done(saved: bool | None) -> None:
            if saved:
                self.notify(f"saved the permissions of {group_id}")
                self._load_perms(group_id)

        self.app.push_screen(GroupPermsScreen(perms), done)

    @on(Button.Pressed, "#group-reset")
    def action_reset(self) -> None:
        info = self.groups.get(self.selected or "")
        if info is None and self.loads == 0:
            # `o` (or the palette) before the tab has read its groups: once it has
            self._reset_pending = True
            return
        if info is None:
            self.notify("Pick a group first.", severity="warning")
            return
        if self.refused("reset_offsets"):
            return
        from console.screens.reset_offsets import ResetOffsetsScreen

        # the group's own topics first, one of them chosen; the open topic stays offered
        # (a group may be moved onto a topic it has not read yet)
        topics = sorted({p.topic for p in info.partitions})
        chosen = self.topic if self.topic in topics else (topics[0] if topics else self.topic)
        if self.topic and self.topic not in topics:
            topics.append(self.topic)

        def done(result: Any) -> None:
            if result:
                moved = ", ".join(f"p{tp.partition}→{o}" for tp, o in sorted(result.items()))
                self.notify(f"reset {info.group_id}: {moved}")
                self.reload(quiet=True)

        self.app.push_screen(ResetOffsetsScreen(info.group_id, topics, chosen), done)

    @on(Button.Pressed, "#group-delete")
    def action_delete_group(self) -> None:
        info = self.groups.get(self.selected or "")
        if info is None:
            self.notify("Pick a group first.", severity="warning")
            return
        if self.refused("delete_group"):
            return
        if info.members:
            self.notify(
                f"{info.group_id} has {len(info.members)} live member(s): stop its consumers "
                "first.",
                severity="warning",
            )
            return
        from console.screens.confirm import ConfirmScreen

        group_id = info.group_id
        topics = len({p.topic for p in info.partitions})

        def delete() -> str:
            self.cluster.delete_group(group_id)
            return f"deleted group {group_id}"

        def done(yes: bool | None) -> None:
            if yes:
                self.act(delete)  # the engine refuses if a consumer joined meanwhile

        self.app.push_screen(
            ConfirmScreen(
                f"Delete group {group_id}? Its committed offsets in {len(info.partitions)} "
                f"partition(s) of {topics} topic(s) go.",
                yes="Delete group",
            ),
            done,
        )
