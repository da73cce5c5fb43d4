"""The app as a whole: the command palette's entries, the help screen, tab keys and the
periodic refresh."""

from __future__ import annotations

import pytest
from textual.command import CommandPalette

from console.screens.help import HelpScreen
from console.widgets.groups import GroupsPane
from engine import Consumer, OffsetAndMetadata, TopicPartition

pytestmark = pytest.mark.asyncio


async def _palette(app, pilot, until, text: str) -> None:
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*text)


async def test_palette_opens_a_topic_by_name(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.query_one("#sidebar").loads >= 1)
        await _palette(app, pilot, until, "/ops/logs:wo")
        palette = app.screen

        def offered() -> list[str]:
            return [str(o.prompt) for o in palette.query_one("CommandList").options]

        await until(pilot, lambda: "Open topic /ops/logs:worker" in " ".join(offered()))
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.topic == "/ops/logs:worker")
        assert app.query_one("#tabs").active == "tab-messages"
        pane = app.query_one("#messages")
        await until(pilot, lambda: pane.loads >= 1)
        assert len(pane.records) == 20


async def test_palette_runs_actions(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.query_one("#sidebar").loads >= 1)
        await _palette(app, pilot, until, "replication")
        palette = app.screen
        await until(pilot, lambda: palette.query_one("CommandList").option_count >= 1)
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.query_one("#tabs").active == "tab-replication")

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("6")
        assert app.query_one("#tabs").active == "tab-heat"


async def test_the_shown_tab_refreshes_itself(demo, make_app, until):
    app = make_app(topic="/apps/clicks:web", refresh_s=0.3)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.press("4")
        pane = app.query_one("#groups", GroupsPane)
        await until(pilot, lambda: "analytics" in pane.groups)
        assert pane.groups["analytics"].lag == 40
        # Another client commits: the tab shows it without being asked.
        consumer = Consumer(demo, group_id="analytics", enable_auto_commit=False)
        tps = [TopicPartition("/apps/clicks:web", p) for p in (0, 1)]
        consumer.assign(tps)
        consumer.commit({tp: OffsetAndMetadata(30) for tp in tps})
        consumer.close(autocommit=False)
        await until(pilot, lambda: pane.groups["analytics"].lag == 20)
