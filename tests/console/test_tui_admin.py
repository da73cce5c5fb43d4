"""Policies, Groups, Replication, Partitions and Heat tabs, with their dialogs."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Select, Static

from console.screens.reset_offsets import ResetOffsetsScreen
from console.widgets.groups import GroupsPane
from console.widgets.heat import HeatPane
from console.widgets.heat_map import HeatMapWidget
from console.widgets.partitions import PartitionsPane
from console.widgets.policies import PoliciesPane
from console.widgets.replication import ReplicationPane
from engine import Cluster, Consumer

pytestmark = pytest.mark.asyncio

CLICKS = "/apps/clicks:web"


def _text(root, selector: str) -> str:
    return str(root.query_one(selector, Static).content)


async def _open(app, pilot, until, path: str, tab: str, key: str):
    app.open_path(path)
    await pilot.press(key)
    pane = app.query_one(f"#{tab}")
    assert app.query_one("#tabs").active == f"tab-{tab}"
    await until(pilot, lambda: pane.loads >= 1)
    return pane


# --- policies ------------------------------------------------------------------------------


async def test_edit_a_policy_saves_through_edit_stream(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await _open(app, pilot, until, "/apps/sensors", "policies", "3")
        assert isinstance(pane, PoliciesPane)
        ttl = app.query_one("#policy-ttl", Input)
        assert ttl.value == "1 d"  # as the lists show it
        ttl.value = "2d"  # a duration with its unit, as every form takes one
        app.query_one("#policy-compact").value = True
        ttl.focus()
        await pilot.press("ctrl+s")
        await until(pilot, lambda: pane.saves == 1)
        policies = demo.stream("/apps/sensors").policies
        assert policies["ttl"] == 172_800 and policies["compact"] is True
        assert "saved compact, ttl" in _text(app, "#policy-error")


async def test_invalid_policies_show_errors_and_change_nothing(demo, make_app, until, click):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await _open(app, pilot, until, "/apps/sensors", "policies", "3")
        before = demo.stream("/apps/sensors").policies
        app.query_one("#policy-ttl", Input).value = "3600"  # valid, but not saved alone
        app.query_one("#policy-default-partitions", Input).value = "0"
        app.query_one("#policy-consume-perm", Input).value = "u:alice &"
        await click(pilot, "#policy-save")
        await until(pilot, lambda: "fix 2 field(s) first" in _text(app, "#policy-error"))
        assert "must be from 1 to" in _text(app, "#policy-default-partitions-error")
        assert "consume_perm" in _text(app, "#policy-consume-perm-error")
        assert app.query_one("#policy-default-partitions-error").has_class("error")
        assert demo.stream("/apps/sensors").policies == before
        assert pane.saves == 0


async def test_access_denied_is_shown_and_nothing_changes(cluster, make_app, until, click):
    cluster.create_stream("/locked", admin_perm="u:somebody-else")
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await _open(app, pilot, until, "/locked", "policies", "3")
        app.query_one("#policy-ttl", Input).value = "60"
        await click(pilot, "#policy-save")
        await until(pilot, lambda: "error:" in _text(app, "#policy-error"))
        assert "may not administer" in _text(app, "#policy-error")
        assert cluster.stream("/locked").policies["ttl"] == 604800
        assert pane.saves == 0


# --- groups --------------------------------------------------------------------------------


async def test_reset_a_group_to_earliest_then_to_an_offset(demo, make_app, until, click):
    app = make_app(refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await _open(app, pilot, until, CLICKS, "groups", "4")
        assert isinstance(pane, GroupsPane)
        assert app.query_one("#group-table", DataTable).row_count == 1
        assert pane.selected == "analytics"
        committed = {p.partition: p.committed for p in demo.group("analytics").partitions}
        assert committed == {0: 21, 1: 19}
        assert app.query_one("#group-partitions", DataTable).row_count == 2

        app.query_one("#group-table").focus()
        await pilot.press("o")
        assert isinstance(app.screen, ResetOffsetsScreen)
        await click(pilot, "#reset-apply")  # earliest is the default
        await until(pilot, lambda: not isinstance(app.screen, ResetOffsetsScreen))
        assert {p.partition: p.committed for p in demo.group("analytics").partitions} == {
            0: 0,
            1: 0,
        }
        await until(pilot, lambda: pane.groups["analytics"].lag == 80)

        await pilot.press("o")
        dialog = app.screen
        dialog.query_one("#reset-to", Select).value = "offset"
        dialog.query_one("#reset-value", Input).value = "not a number"
        await click(pilot, "#reset-apply")
        await until(pilot, lambda: "an offset is a whole number" in _text(dialog, "#reset-error"))
        dialog.query_one("#reset-value", Input).value = "30"
        await click(pilot, "#reset-apply")  # pressed again: once it can take the click
        await until(pilot, lambda: not isinstance(app.screen, ResetOffsetsScreen))
        # Clamped to each partition's end, as the engine does.
        assert {p.partition: p.committed for p in demo.group("analytics").partitions} == {
            0: 30,
            1: 30,
        }


async def test_reset_refused_while_the_group_has_live_members(demo, make_app, until, click):
    consumer = Consumer(demo, CLICKS, group_id="live", enable_auto_commit=False)
    consumer.poll(timeout_ms=1000)  # joins the group
    try:
        app = make_app()
        async with app.run_test(size=(140, 44)) as pilot:
            pane = await _open(app, pilot, until, CLICKS, "groups", "4")
            table = app.query_one("#group-table", DataTable)
            table.focus()
            table.move_cursor(row=1)
            await until(pilot, lambda: pane.selected == "live")
            assert app.query_one("#group-members", DataTable).row_count == 1
            await pilot.press("o")
            await click(pilot, "#reset-apply")
            await until(pilot, lambda: "live member" in _text(app.screen, "#reset-error"))
            assert isinstance(app.screen, ResetOffsetsScreen)
    finally:
        consumer.close()


# --- replication ---------------------------------------------------------------------------


async def test_replication_links_graph_cycle_and_pause(cluster, tmp_path, make_app, until):
    cluster.create_stream("/r")
    other_path = tmp_path / "dc2"
    with Cluster.open(other_path, name="dc2") as other:
        cluster.add_replica("/r", other_path)
        other.add_replica("/r", cluster.path)  # A <-> B: a cycle, as multi-master allows
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await _open(app, pilot, until, "/r", "replication", "5")
        assert isinstance(pane, ReplicationPane)
        assert app.query_one("#repl-links", DataTable).row_count == 1
        assert app.query_one("#repl-upstreams", DataTable).row_count == 1
        graph = _text(app, "#repl-graph")
        assert "2 stream(s), 2 link(s)" in graph
        links = [line.split() for line in graph.splitlines() if "──▶" in line]
        assert sorted((words[0], words[-1]) for words in links) == [
            ("dc2:/r", "test:/r"),
            ("test:/r", "dc2:/r"),
        ]
        cycles = [line for line in graph.splitlines() if line.strip().startswith("↻")]
        assert len(cycles) == 1  # one cycle, listed once
        assert cycles[0].split()[1::2] == ["test:/r", "dc2:/r", "test:/r"]  # from this stream
        ring = [line.strip() for line in graph.splitlines() if line.strip()[:1] in ("┌", "└")]
        assert ring[0].startswith("┌▶ test:/r ─in_sync─▶ dc2:/r ─┐")
        assert ring[1].startswith("└") and " in_sync " in ring[1]

        app.query_one("#repl-links").focus()
        before = pane.loads
        await pilot.press("space")
        await until(pilot, lambda: pane.loads > before)
        assert cluster.replicas("/r")[0].state == "paused"
        assert pane.links[str(other_path.resolve())].state == "paused"


# --- partitions and heat ---------------------------------------------------------------------


async def test_partitions_show_chains_and_volumes(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await _open(app, pilot, until, "/apps/sensors:car-17", "partitions", "2")
        assert isinstance(pane, PartitionsPane)
        info = demo.topic("/apps/sensors:car-17")
        chains = _text(app, "#part-chains")
        for part in info.partitions:
            let = part.partitionlets[-1]
            assert f"[#{let.id} vol {let.volume} 0..{let.last_offset}" in chains
        assert app.query_one("#part-table", DataTable).row_count == 3
        assert app.query_one("#part-volumes", DataTable).row_count == len(demo.volumes())


async def test_heat_map_draws_the_hottest_partitions(demo, make_app, until):
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        pane = await _open(app, pilot, until, "/apps/sensors:car-17", "heat", "6")
        assert isinstance(pane, HeatPane)
        rows = app.query_one("#heat-map", HeatMapWidget).data.rows
        labels = [label for label, _ in rows]
        assert labels[:3] == [f"/apps/sensors:car-17[{p}]" for p in range(3)]  # the topic first
        assert any(v > 0 for _, series in rows for v in series)
        app.query_one("#heat-by", Select).value = "volumes"
        volumes = [f"volume {v.id}" for v in demo.volumes()]
        heat_map = app.query_one("#heat-map", HeatMapWidget)
        await until(pilot, lambda: [label for label, _ in heat_map.data.rows] == volumes)
        rendered = str(app.query_one("#heat-map", HeatMapWidget).render())
        assert "scale idle" in rendered and "-5 min" in rendered
