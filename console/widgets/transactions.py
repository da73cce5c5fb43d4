"""The Transactions tab: the open transactions the console's user may see (their own; all
for an administrator) with their age, state, producer id and epoch and partitions, and `x`
to abort the highlighted one (Kafka's kafka-transactions.sh abort), after a confirm. The
engine's `Transactions` decides who sees and aborts what."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, DataTable, Static

from console.widgets.pane import Pane, fill_table, note
from console.widgets.table import Table
from engine.client.transactions import OpenTransactions, TransactionInfo, Transactions
from engine.times import format_duration


def _age(ms: int | None) -> str:
    return format_duration(None if ms is None else round(ms / 1000, 1))


class TransactionsPane(Pane):
    BINDINGS = [Binding("x", "abort_transaction", "Abort transaction")]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.open: dict[str, TransactionInfo] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-toolbar"):
            yield Static(id="txn-summary")
            yield Button("Abort transaction", id="txn-abort", variant="error", compact=True)
        table = Table(id="txn-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(
            "Transactional id", "State", "Age", "Timeout", "Producer id", "Epoch", "Partitions"
        )
        yield table

    def fetch(self) -> OpenTransactions:
        return Transactions(self.cluster).open()

    def show(self, found: OpenTransactions) -> None:
        self.open = {info.transactional_id: info for info, _ in found}
        note(
            self.query_one("#txn-summary", Static),
            f"{len(found)} open transaction(s), oldest first: each holds back the LSO of "
            "its partitions"
            if found
            else "No open transactions.",
        )
        fill_table(
            self.query_one("#txn-table", DataTable),
            (
                (
                    info.transactional_id,
                    (
                        Text(info.transactional_id),
                        info.kafka_state,
                        _age(age),
                        format_duration(info.timeout_ms / 1000),
                        info.producer_id,
                        info.epoch,
                        Text(", ".join(f"{t}[{p}]" for t, p in info.partitions) or "-"),
                    ),
                )
                for info, age in found
            ),
        )

    def selected(self) -> TransactionInfo | None:
        table = self.query_one("#txn-table", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.open.get(key or "")

    @on(Button.Pressed, "#txn-abort")
    def action_abort_transaction(self) -> None:
        info = self.selected()
        if info is None:
            self.notify("No open transaction to abort.", severity="warning")
            return
        if self.refused("abort_transaction"):
            return
        from console.screens.confirm import ConfirmScreen

        tid, cluster = info.transactional_id, self.cluster

        def abort() -> str:
            # the engine lists only what this user may abort; it refuses the rest
            Transactions(cluster).abort(tid)
            return f"aborted transaction {tid}; its producer is fenced"

        def done(yes: bool | None) -> None:
            if yes:
                self.act(abort)

        self.app.push_screen(
            ConfirmScreen(
                f"Abort transaction {tid}? Its messages are never shown to read_committed "
                "readers and its producer is fenced.",
                yes="Abort transaction",
            ),
            done,
        )
