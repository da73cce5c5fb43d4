"""A consumer group's permissions in the terminal console (issue 23): shown on the chosen
group, edited in a dialog by its creator (each ACE checked with the engine's parser, a bad
one shown and nothing saved), refused to anyone else. The console runs as alice or mallory
(a view of the cluster as that user), as the web console's requests do."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Static

from console.screens.group_perms import GroupPermsScreen
from engine import Consumer, OffsetAndMetadata, Principal, TopicPartition

pytestmark = pytest.mark.asyncio

SHARED = "u:<creator> | u:mallory"


@pytest.fixture
def dash(cluster):
    """alice's group `dash` on /a (hers alone)."""
    cluster.create_stream("/a", produce_perm="p", consume_perm="u:alice")
    cluster.create_topic("/a:t", 1)
    consumer = Consumer(
        cluster.as_principal(Principal("alice")), group_id="dash", enable_auto_commit=False
    )
    consumer.assign([TopicPartition("/a:t", 0)])
    consumer.commit({TopicPartition("/a:t", 0): OffsetAndMetadata(0)})
    consumer.close()
    return cluster


def _app(cluster, cluster_path, user):
    from console.app import ConsoleApp

    return ConsoleApp(cluster_path, cluster=cluster.as_principal(Principal(user)), refresh_s=60)


def _text(root, selector: str) -> str:
    return str(root.query_one(selector, Static).content)


def _rows(pane) -> list[list[str]]:
    table = pane.query_one("#group-perms", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def _groups_tab(app, pilot, until):
    await pilot.press("4")
    pane = app.query_one("#groups")
    await until(pilot, lambda: pane.perms is not None and pane.perms.group_id == "dash")
    return pane


async def test_the_creator_sees_and_edits_the_group_permissions(dash, cluster_path, until, click):
    app = _app(dash, cluster_path, "alice")
    async with app.run_test(size=(140, 50)) as pilot:
        pane = await _groups_tab(app, pilot, until)
        assert _rows(pane)[2] == ["describe_perm", "u:<creator>", "default", "yes"]
        assert "creator: alice" in _text(pane, "#group-perms-summary")
        assert "you may edit" in _text(pane, "#group-perms-summary")
        await click(pilot, "#group-perms-edit")
        assert isinstance(app.screen, GroupPermsScreen)
        dialog = app.screen
        dialog.query_one("#perm-join-perm", Input).value = "u:bob &"
        dialog.query_one("#perm-describe-perm", Input).value = SHARED
        await click(pilot, "#perms-save")
        # the engine's ACE message, caret and all; nothing saved
        assert "join_perm" in _text(dialog, "#perm-join-perm-error")
        assert "^" in _text(dialog, "#perm-join-perm-error")
        assert "nothing was saved" in _text(dialog, "#perms-error")
        assert isinstance(app.screen, GroupPermsScreen)
        assert dash.group_permissions("dash").aces["describe_perm"] == "u:<creator>"
        dialog.query_one("#perm-join-perm", Input).value = ""
        await click(pilot, "#perms-save")
        await until(pilot, lambda: not isinstance(app.screen, GroupPermsScreen))
        perms = dash.group_permissions("dash")
        assert perms.aces["describe_perm"] == SHARED and perms.sources["describe_perm"] == "group"
        assert perms.sources["join_perm"] == "default"
        await until(pilot, lambda: _rows(pane)[2] == ["describe_perm", SHARED, "group", "yes"])


async def test_a_user_without_the_right_sees_them_and_cannot_edit_them(
    dash, cluster_path, until, click
):
    dash.as_principal(Principal("alice")).set_group_permissions("dash", describe_perm=SHARED)
    before = dict(dash.group_permissions("dash").aces)
    app = _app(dash, cluster_path, "mallory")
    async with app.run_test(size=(140, 50)) as pilot:
        pane = await _groups_tab(app, pilot, until)
        assert _rows(pane)[0] == ["join_perm", "u:<creator>", "default", "no"]
        assert "its creator's to edit" in _text(pane, "#group-perms-summary")
        await click(pilot, "#group-perms-edit")
        await pilot.pause()
        assert not isinstance(app.screen, GroupPermsScreen)  # a notice instead
        # the dialog itself (as a stale screen would hold it): the engine refuses
        app.push_screen(GroupPermsScreen(pane.perms))
        await until(pilot, lambda: isinstance(app.screen, GroupPermsScreen))
        dialog = app.screen
        dialog.query_one("#perm-join-perm", Input).value = "p"
        await click(pilot, "#perms-save")
        await until(pilot, lambda: "may not set the permissions" in _text(dialog, "#perms-error"))
        assert isinstance(app.screen, GroupPermsScreen)
        assert dict(dash.group_permissions("dash").aces) == before
