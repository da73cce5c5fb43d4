"""Text typed into a text box stays text: the single-letter keys (`v` cycles the view, `e`
opens the permissions dialog, `f`, `p`, `s`, `o`, digits switch tabs) never fire while a
box has the focus, and Enter in a box (a search, seek, filter or query submitted) leaves the
focus there, so what is typed next is text too (issue 27: typing `vehicle-04213` after an
Enter switched the view to JSON and opened the permissions dialog)."""

from __future__ import annotations

import pytest
from textual.screen import Screen
from textual.widgets import Input

from console.screens.permissions import PermissionsScreen
from console.screens.produce import ProduceScreen
from console.screens.reset_offsets import ResetOffsetsScreen
from console.widgets.messages import MessagesPane
from console.widgets.stream_tree import StreamTree
from engine.policies import POLICIES

pytestmark = pytest.mark.asyncio

SIZE = (140, 44)
CLICKS = "/apps/clicks:web"
NAME = "vehicle-04213"  # v and e are keys; - and digits too (digits switch tabs)
_KEY_NAMES = {"-": "minus"}


async def _type(pilot, text: str) -> None:
    await pilot.press(*(_KEY_NAMES.get(ch, ch) for ch in text))


def _calm(app, screen: Screen, tab: str) -> None:
    """Nothing a key does happened: same screen and tab, text view, not following."""
    pane = app.query_one("#messages", MessagesPane)
    assert app.screen is screen, f"a key opened {type(app.screen).__name__}"
    assert app.query_one("#tabs").active == tab
    assert pane.view_mode == "text" and not pane.following


async def _type_submit_type(pilot, app, box: Input, tab: str) -> None:
    """Type the name into `box`, Enter, type it again: both times text in the box."""
    box.focus()
    await pilot.pause()
    screen = app.screen
    await _type(pilot, NAME)
    assert box.value == NAME
    _calm(app, screen, tab)
    await pilot.press("enter")
    await pilot.pause()
    assert box.has_focus, f"Enter moved the focus from #{box.id} to {app.focused!r}"
    await _type(pilot, NAME)
    assert box.value == NAME + NAME
    _calm(app, screen, tab)
    box.value = ""


async def test_the_tree_search_and_the_message_boxes_keep_what_is_typed(demo, make_app, until):
    app = make_app(topic=CLICKS)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        for box_id in ("#tree-search", "#msg-seek", "#msg-filter", "#msg-query"):
            await _type_submit_type(pilot, app, app.query_one(box_id, Input), "tab-messages")
        # the down arrow leaves a box for its list
        app.query_one("#msg-filter", Input).focus()
        await pilot.press("down")
        await until(pilot, lambda: app.focused is app.query_one("#msg-table"))
        app.query_one("#tree-search", Input).focus()
        await pilot.press("down")
        await until(pilot, lambda: app.focused is app.query_one(StreamTree).tree)


async def test_the_policy_form_keeps_what_is_typed(demo, make_app, until):
    app = make_app(topic=CLICKS)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        pane = app.query_one("#policies")
        await until(pilot, lambda: pane.loads >= 1)
        boxes = list(pane.query(Input))
        kinds = [row.kind for row in POLICIES if row.kind in ("int", "ace", "text")]
        assert len(boxes) == len(kinds)
        # one box of each kind, and the last one (the form's boxes share their handling;
        # typing into all of them took 44 s of the suite)
        picked = {kind: box for kind, box in zip(kinds, boxes, strict=True)}
        for box in [*picked.values(), boxes[-1]]:
            box.scroll_visible(animate=False)
            await _type_submit_type(pilot, app, box, "tab-policies")


async def test_the_dialogs_keep_what_is_typed(demo, make_app, until):
    app = make_app(topic=CLICKS)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one("#messages", MessagesPane)
        await until(pilot, lambda: pane.loads >= 1)
        for key, kind, boxes in (
            ("p", ProduceScreen, ("#produce-key", "#produce-partition")),
            ("e", PermissionsScreen, ("#perm-user", "#perm-prefix")),
        ):
            app.query_one("#msg-table").focus()
            await pilot.press(key)
            await until(pilot, lambda kind=kind: isinstance(app.screen, kind))
            dialog = app.screen
            for box_id in boxes:
                box = dialog.query_one(box_id, Input)
                box.value = ""
                box.focus()
                await pilot.pause()
                await _type(pilot, NAME)
                assert box.value == NAME
                assert app.screen is dialog
            await pilot.press("escape")
            await until(pilot, lambda dialog=dialog: app.screen is not dialog)
        _calm(app, app.screen, "tab-messages")
        # the reset dialog (from the Groups tab, `o`)
        await pilot.press("4")
        groups = app.query_one("#groups")
        await until(pilot, lambda: groups.loads >= 1 and groups.selected == "analytics")
        app.query_one("#group-table").focus()
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, ResetOffsetsScreen))
        dialog = app.screen
        for box_id in ("#reset-value", "#reset-partitions"):
            box = dialog.query_one(box_id, Input)
            box.focus()
            await pilot.pause()
            await _type(pilot, NAME)
            assert box.value == NAME
            assert app.screen is dialog
