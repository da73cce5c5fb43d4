"""A modal dialog that saves in a worker thread and closes when the engine took it, or
shows the engine's refusal in its error line (the group-permission and topic-override
dialogs)."""

from __future__ import annotations

from collections.abc import Callable

from textual import work
from textual.screen import ModalScreen
from textual.widgets import Static

from console.events import Loaded
from console.widgets.pane import note


class SavingDialog(ModalScreen[bool]):
    """Subclasses set `ERROR_ID`, the id of their error line, and call `save_in_worker(call)`."""

    ERROR_ID = ""

    def __init__(self) -> None:
        super().__init__()
        self._seq = 0  # answers of an earlier save are ignored

    def save_in_worker(self, call: Callable[[], object]) -> None:
        note(self.query_one(f"#{self.ERROR_ID}", Static), "saving …")
        self._seq += 1
        self._save(self._seq, call)

    @work(thread=True, group="save")
    def _save(self, seq: int, call: Callable[[], object]) -> None:
        try:
            call()
        except Exception as exc:  # shown in the dialog: a refusal, the object deleted meanwhile
            self.post_message(Loaded(seq, error=exc))
        else:
            self.post_message(Loaded(seq, True))

    def on_loaded(self, message: Loaded) -> None:
        message.stop()
        if message.seq != self._seq:
            return
        if message.error is not None:
            note(self.query_one(f"#{self.ERROR_ID}", Static), f"error: {message.error}")
            return
        self.dismiss(True)
