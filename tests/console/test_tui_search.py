"""The command palette finds streams and topics by any part of their names, in any stream
(Cluster.search), and jumps to the one chosen."""

from __future__ import annotations

import pytest
from textual.command import CommandPalette

pytestmark = pytest.mark.asyncio


async def test_palette_finds_a_topic_by_a_middle_fragment(cluster, make_app, until):
    cluster.create_stream("/plant/north", default_partitions=1)
    cluster.create_stream("/plant/south", default_partitions=1)
    cluster.create_topic("/plant/north:boiler-temp-7")
    cluster.create_topic("/plant/south:pump-pressure")
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.query_one("#sidebar").loads >= 1)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"ler-tem")
        palette = app.screen

        def offered() -> str:
            return " ".join(str(o.prompt) for o in palette.query_one("CommandList").options)

        await until(pilot, lambda: "Open topic /plant/north:boiler-temp-7" in offered())
        assert "pump-pressure" not in offered()
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.topic == "/plant/north:boiler-temp-7")
        assert app.query_one("#tabs").active == "tab-messages"
