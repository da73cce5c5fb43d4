"""Switching clusters in the terminal console: `c` (a dialog) and the palette, over the list
`plet tui` builds (engine.served_clusters: here dc1 and dc2, which dc1 replicates to)."""

from __future__ import annotations

import pytest
from textual.command import CommandPalette

from console.app import ConsoleApp
from console.screens.clusters import ClustersScreen
from console.widgets.stream_tree import StreamTree
from engine import Cluster
from engine.served_clusters import served_clusters


@pytest.fixture
def two(tmp_path):
    """dc1 with /shared replicated to dc2; dc2 also holds /only-dc2."""
    with (
        Cluster.open(tmp_path / "dc1", name="dc1") as dc1,
        Cluster.open(tmp_path / "dc2", name="dc2") as dc2,
    ):
        dc1.create_stream("/shared")
        dc1.add_replica("/shared", dc2.path)
        dc2.create_stream("/only-dc2")
        dc2.create_topic("/only-dc2:t")
    return tmp_path / "dc1", served_clusters(tmp_path / "dc1")


def streams(app: ConsoleApp) -> list[str]:
    tree = app.query_one(StreamTree).tree
    return [n.data.path for n in tree.root.children if n.data is not None]


@pytest.mark.asyncio
async def test_c_switches_to_another_cluster_and_back_by_the_palette(two, until):
    path, clusters = two
    app = ConsoleApp(path, clusters=clusters, refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: streams(app) == ["/shared"])
        first = app.cluster
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ClustersScreen))
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.cluster is not None and app.cluster.name == "dc2")
        await until(pilot, lambda: streams(app) == ["/only-dc2", "/shared"])
        assert app.current_cluster() == "dc2"
        second = app.cluster
        assert "dc2" in app.sub_title
        assert app.cluster_path == str((path.parent / "dc2").resolve())
        # a topic of dc2 opens in dc2
        app.open_path("/only-dc2:t")
        await until(pilot, lambda: app.topic == "/only-dc2:t")

        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"switch cluster")
        palette = app.screen

        def offered() -> list[str]:
            return [str(o.prompt) for o in palette.query_one("CommandList").options]

        await until(pilot, lambda: any("Switch cluster: dc1" in o for o in offered()))
        assert not any("Switch cluster: dc2" in o for o in offered())  # the open one
        await pilot.press("enter")
        await until(pilot, lambda: app.cluster is first)  # opened once, kept for the way back
        await until(pilot, lambda: streams(app) == ["/shared"])
        assert app.topic is None
    assert first.closed and second.closed


@pytest.mark.asyncio
async def test_with_one_cluster_c_does_nothing(cluster_path, until):
    Cluster.open(cluster_path, name="alone").close()
    app = ConsoleApp(cluster_path, clusters=served_clusters(cluster_path), refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.query_one(StreamTree).loads >= 1)
        await pilot.press("c")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, ClustersScreen)
        assert app.cluster.name == "alone"


@pytest.mark.asyncio
async def test_enter_on_a_link_follows_it_to_the_target_cluster(two, until):
    path, clusters = two
    app = ConsoleApp(path, clusters=clusters, refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: streams(app) == ["/shared"])
        app.open_path("/shared")
        app.show_tab("replication")
        pane = app.query_one("#replication")
        await until(pilot, lambda: pane.loads >= 1 and pane.links)
        table = app.query_one("#repl-links")
        table.focus()
        await pilot.press("enter")
        await until(pilot, lambda: app.cluster is not None and app.cluster.name == "dc2")
        await until(pilot, lambda: app.stream == "/shared")
        assert app.query_one("#tabs").active == "tab-replication"
        await until(pilot, lambda: pane.loads >= 2 and not pane.links)  # dc2's: no links out


def test_plet_tui_lists_the_clusters_as_plet_web_does(two, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from engine.cli import cli

    path, _ = two
    Cluster.open(tmp_path / "dc4", name="dc4").close()
    started = []
    monkeypatch.setattr(ConsoleApp, "run", lambda self: started.append(self))
    args = ["tui", "--cluster", str(path), "--also", str(tmp_path / "dc4")]
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert CliRunner().invoke(cli, [*args, "--no-linked"]).exit_code == 0
    linked, named = started
    assert [c.name for c in linked.clusters] == ["dc1", "dc4", "dc2"]
    assert [c.name for c in named.clusters] == ["dc1", "dc4"]
