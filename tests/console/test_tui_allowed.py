"""Actions only where allowed in the terminal console (engine.auth.actions, `Pane.GATES`):
a limited user's Groups tab disables Reset offsets and Delete group (the reason as the
buttons' tooltip) and their keys say why instead of opening a dialog; the produce button
follows produce_perm; `plet tui --read-only` offers no change at all."""

from __future__ import annotations

import pytest
from textual.widgets import Button

from console.screens.reset_offsets import ResetOffsetsScreen
from engine import Consumer, OffsetAndMetadata, Principal, TopicPartition

pytestmark = pytest.mark.asyncio


@pytest.fixture
def shared(cluster):
    """Group `g` on /a: everyone may see it (describe_perm p), only alice reset or delete
    it (she created it); /a's messages everyone may read, only alice write."""
    cluster.create_stream("/a", produce_perm="u:alice", consume_perm="p")
    cluster.create_topic("/a:t", 1)
    alice = cluster.as_principal(Principal("alice"))
    consumer = Consumer(alice, group_id="g", enable_auto_commit=False)
    consumer.assign([TopicPartition("/a:t", 0)])
    consumer.commit({TopicPartition("/a:t", 0): OffsetAndMetadata(0)})
    consumer.close()
    alice.set_group_permissions("g", describe_perm="p")
    return cluster


def _app(cluster, cluster_path, user, **kwargs):
    from console.app import ConsoleApp

    view = cluster.as_principal(Principal(user))
    return ConsoleApp(cluster_path, cluster=view, refresh_s=60, **kwargs)


async def _gated(app, pilot, until, pane_id: str, where: str):
    """The tab once it knows what the user may do on `where`."""
    pane = app.query_one(f"#{pane_id}")
    await until(pilot, lambda: pane.verdicts_for == where and pane.verdicts)
    return pane


def _said(app) -> list[str]:
    """What the app tells the user from now on (its notifications)."""
    said: list[str] = []
    app.notify = lambda message, **kwargs: said.append(message)
    return said


def _button(pane, selector: str) -> Button:
    return pane.query_one(selector, Button)


async def test_a_limited_user_cannot_reset_or_delete_the_group(shared, cluster_path, until):
    app = _app(shared, cluster_path, "viewer")
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.press("4")
        pane = await _gated(app, pilot, until, "groups", "g")
        said = _said(app)
        for selector, reason in (
            ("#group-reset", "needs reset_perm on group g"),
            ("#group-delete", "needs delete_perm on group g"),
            ("#group-perms-edit", "needs the group's creator or a cluster administrator"),
        ):
            assert _button(pane, selector).disabled
            assert _button(pane, selector).tooltip == f"Not allowed: {reason}"
        await pilot.press("o")  # the key says why instead of opening the dialog
        await pilot.pause()
        assert not isinstance(app.screen, ResetOffsetsScreen)
        assert said == ["Not allowed: needs reset_perm on group g"]
        pane.query_one("#group-table").focus()  # the pane's own key
        await pilot.press("delete")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]  # no confirmation opened
        assert said[-1] == "Not allowed: needs delete_perm on group g"
        assert [g.group_id for g in shared.groups()] == ["g"]


async def test_the_groups_creator_may_and_the_produce_button_follows_produce_perm(
    shared, cluster_path, until
):
    app = _app(shared, cluster_path, "alice", topic="/a:t")
    async with app.run_test(size=(140, 50)) as pilot:
        messages = await _gated(app, pilot, until, "messages", "/a:t")
        assert not _button(messages, "#msg-produce").disabled
        await pilot.press("4")
        pane = await _gated(app, pilot, until, "groups", "g")
        assert not _button(pane, "#group-reset").disabled
        assert not _button(pane, "#group-delete").disabled
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, ResetOffsetsScreen))
    viewer = _app(shared, cluster_path, "viewer", topic="/a:t")
    async with viewer.run_test(size=(140, 50)) as pilot:
        messages = await _gated(viewer, pilot, until, "messages", "/a:t")
        assert _button(messages, "#msg-produce").disabled
        assert _button(messages, "#msg-produce").tooltip == "Not allowed: needs produce_perm on /a"


async def test_a_read_only_console_offers_no_change(shared, cluster_path, until):
    app = _app(shared, cluster_path, "alice", topic="/a:t", read_only=True)
    async with app.run_test(size=(140, 50)) as pilot:
        messages = await _gated(app, pilot, until, "messages", "/a:t")
        assert _button(messages, "#msg-produce").tooltip == "Not allowed: read-only console"
        assert "read-only" in app.title
        await pilot.press("4")
        pane = await _gated(app, pilot, until, "groups", "g")
        assert _button(pane, "#group-reset").disabled and _button(pane, "#group-delete").disabled
        await pilot.press("o")
        await pilot.pause()
        assert not isinstance(app.screen, ResetOffsetsScreen)
