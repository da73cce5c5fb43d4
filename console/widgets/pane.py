"""`Pane`: what every tab's content shares: the current stream and topic, and loading
from the engine in worker threads without ever blocking the UI."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.containers import Vertical
from textual.widgets import Button, DataTable, Static

from console.events import ActionDone, GatesLoaded, Loaded
from engine.auth.actions import ACTIONS, Verdict

if TYPE_CHECKING:
    from console.app import ConsoleApp
    from engine import Cluster


class Pane(Vertical):
    """A tab's content. `reload()` asks the engine (in a thread) through `fetch()`, and
    `show()` gets the answer on the UI thread; answers to older requests are dropped."""

    # Whether the app's periodic refresh reloads this pane while it is shown.
    AUTO_REFRESH = True
    # The changes this tab offers: action (engine.auth.actions) -> its button's id. A
    # button the user may not use is disabled, the reason its tooltip; its key says why.
    GATES: ClassVar[dict[str, str]] = {}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.stream: str | None = None
        self.topic: str | None = None
        self._seq = 0
        self.stale = True
        self._last_error: str | None = None
        self.loads = 0  # answers shown, for tests that wait for a load to land
        self.verdicts: dict[str, Verdict] = {}  # GATES' answers for `_verdicts_for`
        self.verdicts_for: str | None = None
        self._gate_seq = 0

    @property
    def console(self) -> ConsoleApp:
        return self.app  # type: ignore[return-value]  # panes are mounted in ConsoleApp only

    @property
    def cluster(self) -> Cluster:
        return self.console.cluster  # type: ignore[return-value]  # shown only while one is open

    def set_context(self, stream: str | None, topic: str | None) -> None:
        if (stream, topic) != (self.stream, self.topic):
            self.stream, self.topic = stream, topic
            self.stale = True
            self.context_changed()

    def context_changed(self) -> None:
        """Called on the UI thread when the stream or topic changes (before a reload)."""

    def reload(self, quiet: bool = False) -> None:
        """Fetch again; `quiet` for the periodic refresh (no "loading" state)."""
        if self.console.cluster is None:
            return
        self.stale = False
        self._seq += 1
        self._fetch_in_thread(self._seq, self.fetch)
        self.load_gates()

    def fetch(self) -> Any:
        """Runs in a worker thread: the engine calls whose result `show` displays."""
        return None

    def show(self, data: Any) -> None:
        """On the UI thread: display what `fetch` returned."""

    def show_error(self, error: BaseException) -> None:
        self.notify(str(error) or type(error).__name__, severity="error", timeout=6)

    @work(thread=True, group="load")
    def _fetch_in_thread(self, seq: int, fetch: Callable[[], Any]) -> None:
        try:
            data = fetch()
        except Exception as exc:  # shown to the user; a worker must not kill the app
            self.post_message(Loaded(seq, error=exc))
        else:
            self.post_message(Loaded(seq, data))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        if message.seq != self._seq:
            return  # an answer to an older request
        if message.error is not None:
            # The periodic refresh would repeat the same complaint every few seconds.
            text = str(message.error)
            if text != self._last_error:
                self._last_error = text
                self.show_error(message.error)
        else:
            self._last_error = None
            self.show(message.data)
        self.loads += 1

    # --- what the user may do here (engine.auth.actions) ---------------------------------

    def gate_target(self) -> str | None:
        """Where the GATES' actions apply: the open topic, else the stream (a group's tab
        names its group)."""
        return self.topic or self.stream

    def load_gates(self) -> None:
        """Ask (in a thread: it reads the catalog) what the user may do here."""
        if not self.GATES or self.console.cluster is None:
            return
        self._gate_seq += 1
        self._fetch_gates(self._gate_seq, self.gate_target())

    @work(thread=True, group="gates")
    def _fetch_gates(self, seq: int, where: str | None) -> None:
        allowed = self.console.allowed()
        verdicts = {}
        for action in self.GATES:
            if where is None and ACTIONS[action].scope != "cluster":
                verdicts[action] = allowed.changes  # nothing picked: the console's answer
                continue
            try:
                verdicts[action] = allowed(action, where)
            except Exception:  # the engine decides when the change is made
                continue
        self.post_message(GatesLoaded(seq, verdicts, where))

    def on_gates_loaded(self, message: GatesLoaded) -> None:
        message.stop()
        if message.seq != self._gate_seq:
            return
        self.verdicts = message.data
        self.verdicts_for = message.where
        for action, button_id in self.GATES.items():
            verdict = self.verdicts.get(action)
            reason = verdict.reason if verdict is not None and not verdict else None
            for button in self.query(f"#{button_id}").results(Button):
                button.disabled = reason is not None
                button.tooltip = None if reason is None else f"Not allowed: {reason}"

    def refused(self, action: str) -> bool:
        """Whether the user may not do `action` here; if so, say why. Until the worker has
        answered, the console's own answer (read-only or not) decides: the engine checks
        the rest when the change is made."""
        verdict = self.verdicts.get(action) if self.verdicts_for == self.gate_target() else None
        if verdict is None:
            verdict = self.console.allowed().changes
        if verdict:
            return False
        self.notify(f"Not allowed: {verdict.reason}", severity="warning")
        return True

    @work(thread=True, group="act")
    def act(self, action: Callable[[], str]) -> None:
        """Run a change in a thread; its text (or error) comes back as `ActionDone`."""
        try:
            text = action()
        except Exception as exc:  # shown to the user
            self.post_message(ActionDone(error=exc))
        else:
            self.post_message(ActionDone(text))

    def on_action_done(self, message: ActionDone) -> None:
        message.stop()
        if message.error is not None:
            self.show_error(message.error)
        else:
            if message.text:
                self.notify(message.text)
            self.reload(quiet=True)


def fill_table(
    table: DataTable, rows: Iterable[tuple[Hashable, Sequence[Any]]], *, keep_cursor: bool = True
) -> None:
    """Show `rows` (key, cells) in `table`, keeping the cursor on the same key.

    When the keys are those shown already (a periodic refresh, usually), the cells are
    updated in place: no flicker, and the cursor and scroll position stay."""
    shown = [(str(key), cells) for key, cells in rows]
    current = [key.value for key in table.rows]
    if current == [key for key, _ in shown]:
        for key, cells in shown:
            for column, cell in zip(table.columns, cells, strict=False):
                if table.get_cell(key, column) != cell:
                    table.update_cell(key, column, cell, update_width=True)
        return
    old_key = None
    if keep_cursor and table.row_count:
        try:
            old_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:  # no valid cursor
            old_key = None
    table.clear()
    index = 0
    for i, (key, cells) in enumerate(shown):
        table.add_row(*cells, key=key)
        if key == old_key:
            index = i
    if table.row_count:
        table.move_cursor(row=index, animate=False)


def note(widget: Static, text: str, style: str = "") -> None:
    """Set a Static to plain text (never markup: names and messages may hold brackets)."""
    widget.update(Text(text, style=style))
