"""The terminal's reset dialog with a per-partition preview (Apply commits exactly it, or
says the log moved) and shift-by; deleting a group after a confirmation."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Select, Static

from console.screens.confirm import ConfirmScreen
from console.screens.reset_offsets import ResetOffsetsScreen
from engine import Consumer, Producer

pytestmark = pytest.mark.asyncio

CLICKS = "/apps/clicks:web"


def _text(root, selector: str) -> str:
    return str(root.query_one(selector, Static).content)


def _committed(cluster) -> dict[int, int | None]:
    return {p.partition: p.committed for p in cluster.group("analytics").partitions}


async def _dialog(app, pilot, until, path: str = CLICKS):
    """The reset dialog of group analytics, opened with `o` from the Groups tab while
    `path` is open."""
    app.open_path(path)
    await pilot.press("4")
    pane = app.query_one("#groups")
    await until(pilot, lambda: pane.loads >= 1 and pane.selected == "analytics")
    app.query_one("#group-table").focus()
    await pilot.press("o")
    assert isinstance(app.screen, ResetOffsetsScreen)
    return app.screen


def _plan_cells(dialog) -> list[list[str]]:
    table = dialog.query_one("#reset-plan", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_preview_then_apply_commits_exactly_the_preview(demo, make_app, until, click):
    assert _committed(demo) == {0: 21, 1: 19}
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        dialog = await _dialog(app, pilot, until)
        dialog.query_one("#reset-to", Select).value = "shift"
        dialog.query_one("#reset-value", Input).value = "-25"
        dialog.query_one("#reset-partitions", Input).value = "1"
        await click(pilot, "#reset-preview")
        await until(pilot, lambda: dialog.query_one("#reset-plan", DataTable).row_count == 1)
        # partition 1 (38 messages): 19 - 25 clamped to the log start 0; lag 19 -> 38
        assert _plan_cells(dialog) == [["1", "0", "38", "19", "0", "19", "38"]]
        assert "Apply commits exactly this" in _text(dialog, "#reset-error")
        assert _committed(demo) == {0: 21, 1: 19}  # a preview changes nothing
        shown = dialog.preview[1]
        await click(pilot, "#reset-apply")
        await until(pilot, lambda: not isinstance(app.screen, ResetOffsetsScreen))
        assert _committed(demo) == {0: 21, 1: 0}
        assert [p.new for p in shown] == [0]


async def test_apply_after_the_log_moved_shows_the_new_preview(demo, make_app, until, click):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        dialog = await _dialog(app, pilot, until)
        dialog.query_one("#reset-to", Select).value = "latest"
        await click(pilot, "#reset-preview")
        await until(pilot, lambda: dialog.query_one("#reset-plan", DataTable).row_count == 2)
        producer = Producer(demo)
        producer.send(CLICKS, value=b"late", partition=0)
        producer.flush()
        producer.close()
        await click(pilot, "#reset-apply")
        await until(pilot, lambda: "moved since the preview" in _text(dialog, "#reset-error"))
        assert isinstance(app.screen, ResetOffsetsScreen)
        assert _committed(demo) == {0: 21, 1: 19}
        assert [row[4] for row in _plan_cells(dialog)] == ["43", "38"]
        await click(pilot, "#reset-apply")  # the new preview, unchanged since: applied
        await until(pilot, lambda: not isinstance(app.screen, ResetOffsetsScreen))
        assert _committed(demo) == {0: 43, 1: 38}


async def test_bad_shift_and_partition_are_shown_and_change_nothing(demo, make_app, until, click):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        dialog = await _dialog(app, pilot, until)
        dialog.query_one("#reset-to", Select).value = "shift"
        dialog.query_one("#reset-value", Input).value = "back a bit"
        await click(pilot, "#reset-preview")
        await until(pilot, lambda: "a shift is a whole number" in _text(dialog, "#reset-error"))
        dialog.query_one("#reset-value", Input).value = "-1"
        dialog.query_one("#reset-partitions", Input).value = "7"
        await click(pilot, "#reset-preview")  # pressed again: once it can take the click
        await until(pilot, lambda: "partitions 0 to 1, not 7" in _text(dialog, "#reset-error"))
        assert dialog.query_one("#reset-plan", DataTable).row_count == 0
        assert _committed(demo) == {0: 21, 1: 19}


async def test_delete_a_group_after_confirming(demo, make_app, until, click):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        app.open_path(CLICKS)
        await pilot.press("4")
        pane = app.query_one("#groups")
        await until(pilot, lambda: pane.loads >= 1 and pane.selected == "analytics")
        await click(pilot, "#group-delete")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("escape")  # cancelled: nothing happens
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert [g.group_id for g in demo.groups()] == ["analytics"]
        await click(pilot, "#group-delete")  # pressed again: once it can take the click
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await click(pilot, "#confirm-yes")
        await until(pilot, lambda: "analytics" not in pane.groups)
        assert demo.groups() == []


async def test_delete_refused_while_the_group_has_live_members(demo, make_app, until, click):
    consumer = Consumer(demo, CLICKS, group_id="analytics", enable_auto_commit=False)
    consumer.poll(timeout_ms=1000)  # joins the group
    try:
        app = make_app()
        async with app.run_test(size=(140, 44)) as pilot:
            app.open_path(CLICKS)
            await pilot.press("4")
            pane = app.query_one("#groups")
            await until(pilot, lambda: pane.loads >= 1 and pane.selected == "analytics")
            await click(pilot, "#group-delete")
            assert not isinstance(app.screen, ConfirmScreen)  # refused before asking
            assert [g.group_id for g in demo.groups()] == ["analytics"]
    finally:
        consumer.close()


async def test_the_reset_dialog_chooses_one_of_the_groups_topics(demo, make_app, until):
    """With another topic open, the dialog offers it too, but chooses the group's own."""
    app = make_app(refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        dialog = await _dialog(app, pilot, until, "/apps/sensors:car-17")
        await until(pilot, lambda: dialog.query("#reset-topic"))
        choice = dialog.query_one("#reset-topic", Select)
        assert choice.value == CLICKS
        assert [value for _, value in choice._options if value != Select.NULL] == [
            CLICKS,
            "/apps/sensors:car-17",
        ]


async def test_o_resets_the_selected_group_from_anywhere(demo, make_app, until):
    app = make_app(refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        app.open_path(CLICKS)
        await pilot.press("4")
        pane = app.query_one("#groups")
        await until(pilot, lambda: pane.loads >= 1 and pane.selected == "analytics")
        await pilot.press("1")  # another tab; the focus leaves the Groups pane
        app.query_one("#stream-tree").focus()
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, ResetOffsetsScreen))
        assert app.screen.group_id == "analytics"


async def test_o_before_the_groups_tab_was_ever_read_opens_the_dialog(demo, make_app, until):
    """`o` (or the palette's "Reset group offsets") from the tree, the Groups tab never
    shown: the dialog opens once the tab has read its groups, on the first one."""
    app = make_app(topic=CLICKS, refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.query_one("#messages").loads >= 1)
        assert app.query_one("#groups").loads == 0
        app.query_one("#stream-tree").focus()
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, ResetOffsetsScreen))
        assert app.screen.group_id == "analytics"
