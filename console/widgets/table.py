"""`Table`: the DataTable every tab uses, with one repair.

Textual 8's DataTable measures the cells of added rows when it is next idle, but it may
paint those rows before that, with the old column widths, and keep the painted lines in
its cache after the widths grow (the cache key does not include them): a column then
stays cut ("billi" for "billing") until something else clears the cache. Dropping the
cache whenever the widths changed on idle fixes it.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.widgets import DataTable


class Table(DataTable[Any]):
    async def _on_idle(self, event: events.Idle) -> None:
        before = [column.content_width for column in self.columns.values()]
        await super()._on_idle(event)
        if before != [column.content_width for column in self.columns.values()]:
            self._clear_caches()
            self.refresh()
