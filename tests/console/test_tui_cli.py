"""`plet tui`: the command, its help and errors, and the app it starts (which opens and
closes its own cluster when none is injected)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from console.app import ConsoleApp
from console.widgets.stream_tree import StreamTree
from engine import Cluster
from engine.cli import cli


def test_help_lists_the_options():
    result = CliRunner().invoke(cli, ["tui", "--help"])
    assert result.exit_code == 0, result.output
    assert "--cluster PATH" in result.output
    assert "--topic FULL_NAME" in result.output
    assert "terminal" in result.output
    listing = CliRunner().invoke(cli, ["--help"])
    assert " tui " in listing.output


def test_errors_before_the_screen_opens(tmp_path):
    missing = tmp_path / "nope"
    result = CliRunner().invoke(cli, ["tui", "--cluster", str(missing)])
    assert result.exit_code == 1
    assert "no cluster at" in result.output
    assert not missing.exists()  # a typo must not create a cluster
    Cluster.open(tmp_path / "c").close()
    result = CliRunner().invoke(cli, ["tui", "--cluster", str(tmp_path / "c"), "--topic", "car-17"])
    assert result.exit_code == 1
    assert "invalid full topic name" in result.output
    result = CliRunner().invoke(cli, ["tui"], env={"PLET_CLUSTER": ""})
    assert result.exit_code == 2


def test_the_command_builds_the_app(tmp_path, monkeypatch):
    Cluster.open(tmp_path / "c").close()
    started = []
    monkeypatch.setattr(ConsoleApp, "run", lambda self: started.append(self))
    result = CliRunner().invoke(
        cli, ["--cluster", str(tmp_path / "c"), "tui", "--topic", "/apps/sensors:car-17"]
    )
    assert result.exit_code == 0, result.output
    [app] = started
    assert app.cluster_path == str(tmp_path / "c")
    assert app.start_topic == "/apps/sensors:car-17"
    assert app.cluster is None  # it opens its own, in a worker
    assert app.read_only is False
    result = CliRunner().invoke(cli, ["--cluster", str(tmp_path / "c"), "tui", "--read-only"])
    assert result.exit_code == 0, result.output
    assert started[-1].read_only is True


@pytest.mark.asyncio
async def test_the_app_opens_and_closes_its_own_cluster(cluster_path, until):
    from engine.demo import seed

    with Cluster.open(cluster_path, name="own") as c:
        seed(c)
    app = ConsoleApp(cluster_path, refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.query_one(StreamTree).loads >= 1)
        opened = app.cluster
        assert opened is not None and opened.name == "own"
        assert "own" in app.sub_title
    assert opened.closed


@pytest.mark.asyncio
async def test_a_missing_cluster_is_an_error_on_screen(tmp_path, until):
    app = ConsoleApp(tmp_path / "missing")
    async with app.run_test(size=(140, 44)) as pilot:
        tree = app.query_one("#stream-tree")
        await until(pilot, lambda: "error" in str(tree.root.label))
        assert "no cluster at" in str(tree.root.label)
        assert app.cluster is None
    assert not (tmp_path / "missing").exists()


@pytest.mark.asyncio
async def test_the_header_shows_the_last_check(cluster_path, until):
    from engine.ops import check

    with Cluster.open(cluster_path, name="checked") as c:
        check.run(c, quick=True)
    app = ConsoleApp(cluster_path, refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.cluster is not None)
        assert "last quick check" in app.sub_title and "no problems" in app.sub_title
