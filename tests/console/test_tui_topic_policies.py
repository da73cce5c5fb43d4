"""The Policies tab with a topic open: each policy the topic may override with its
effective value and source, and the dialog that edits the topic's overrides with the
stream form's controls and checks (console/screens/topic_policies.py)."""

from __future__ import annotations

import pytest
from textual.widgets import Checkbox, Input, Static

from console.app import ConsoleApp
from console.screens.topic_policies import TopicPoliciesScreen
from console.widgets.policies import PoliciesPane
from engine import Principal
from engine.policies import TOPIC_POLICIES, policy

pytestmark = pytest.mark.asyncio


def _text(root, selector: str) -> str:
    return str(root.query_one(selector, Static).content)


def _row(text: str, name: str) -> list[str]:
    """(value, source) of a policy's line in the tab's topic part."""
    label = policy(name).label
    line = next(line for line in text.splitlines() if line.strip().startswith(label))
    return line[len(label) + 2 :].split()


async def _open(app, pilot, until) -> PoliciesPane:
    await pilot.press("3")
    pane = app.query_one("#policies", PoliciesPane)
    await until(pilot, lambda: pane.topic_info is not None)
    return pane


async def test_the_tab_shows_sources_and_the_dialog_edits_overrides(
    cluster, make_app, until, click
):
    cluster.create_stream("/apps", ttl=90)
    cluster.create_topic("/apps:t", 1, policies={"compact": True})
    app = make_app(topic="/apps:t")
    async with app.run_test(size=(160, 60)) as pilot:
        pane = await _open(app, pilot, until)
        text = _text(app, "#topic-policies")
        assert len([line for line in text.splitlines()[1:] if line.strip()]) == len(TOPIC_POLICIES)
        assert _row(text, "compact") == ["true", "topic"]
        assert _row(text, "ttl") == ["90", "s", "stream"]  # a duration as the lists show it
        assert _row(text, "retention_bytes") == ["0", "default"]

        await click(pilot, "#topic-policy-edit")
        await until(pilot, lambda: isinstance(app.screen, TopicPoliciesScreen))
        screen = app.screen
        assert screen.query_one("#topic-policy-compact-own", Checkbox).value is True
        assert screen.query_one("#topic-policy-ttl-own", Checkbox).value is False
        assert screen.query_one("#topic-policy-ttl", Input).value == "90 s"
        # a bad value: the stream form's message, nothing saved
        screen.query_one("#topic-policy-ttl-own", Checkbox).value = True
        screen.query_one("#topic-policy-ttl", Input).value = "soon"
        limit = policy("max_message_bytes").max
        screen.query_one("#topic-policy-max-message-bytes-own", Checkbox).value = True
        screen.query_one("#topic-policy-max-message-bytes", Input).value = str(limit + 1)
        await click(pilot, "#topic-policies-save")
        await until(pilot, lambda: "fix 2 field" in _text(screen, "#topic-policies-error"))
        assert _text(screen, "#topic-policy-max-message-bytes-error") == (
            f"policy 'max_message_bytes' must be from 1 to {limit}, got {limit + 1}"
        )
        assert "ttl" in _text(screen, "#topic-policy-ttl-error")
        assert cluster.topic("/apps:t").overrides == {"compact": True}
        # fixed, and compact unticked: its override goes
        screen.query_one("#topic-policy-ttl", Input).value = "30"
        screen.query_one("#topic-policy-max-message-bytes-own", Checkbox).value = False
        screen.query_one("#topic-policy-compact-own", Checkbox).value = False
        await click(pilot, "#topic-policies-save")
        await until(pilot, lambda: not isinstance(app.screen, TopicPoliciesScreen))
        assert cluster.topic("/apps:t").overrides == {"ttl": 30}
        await until(
            pilot, lambda: _row(_text(app, "#topic-policies"), "ttl") == ["30", "s", "topic"]
        )
        assert _row(_text(app, "#topic-policies"), "compact") == ["false", "default"]
        assert pane.saves == 1


async def test_without_topic_perm_no_edit_is_offered_and_the_engine_refuses_one(
    cluster, cluster_path, until, click
):
    cluster.add_user("alice", "a-long-password-1")
    cluster.create_stream("/guarded", consume_perm="p")  # topic_perm: the creator
    cluster.create_topic("/guarded:t", 1)
    alice = cluster.as_principal(Principal("alice"))
    app = ConsoleApp(cluster_path, topic="/guarded:t", cluster=alice, refresh_s=60)
    async with app.run_test(size=(160, 60)) as pilot:
        pane = await _open(app, pilot, until)
        # the edit is not offered, and says why
        assert pane.query_one("#topic-policy-edit").display is False
        assert "You cannot change these (needs topic_perm on /guarded" in _text(
            app, "#topic-policies"
        )
        # offered anyway (as when the ACE changed meanwhile), the engine refuses it
        app.push_screen(TopicPoliciesScreen(pane.topic_info, pane.info.policies))
        await until(pilot, lambda: isinstance(app.screen, TopicPoliciesScreen))
        screen = app.screen
        screen.query_one("#topic-policy-ttl-own", Checkbox).value = True
        screen.query_one("#topic-policy-ttl", Input).value = "5"
        await click(pilot, "#topic-policies-save")
        await until(pilot, lambda: "error:" in _text(screen, "#topic-policies-error"))
        assert "topic_perm" in _text(screen, "#topic-policies-error")
        assert isinstance(app.screen, TopicPoliciesScreen)
        assert cluster.topic("/guarded:t").overrides == {}
