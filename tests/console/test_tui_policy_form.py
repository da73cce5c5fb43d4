"""The terminal console's forms say what the engine's tables say: the Policies tab shows
every policy of `engine.policies.POLICIES` with its label and help and checks values
against the table's bounds; the produce dialog takes headers in the one `name=value`
syntax, one per line; sizes are `engine.units.format_bytes`."""

from __future__ import annotations

import pytest
from textual.widgets import Checkbox, Input, Label, Select, Static, TextArea

from console.screens.produce import ProduceScreen
from console.widgets.policies import PoliciesPane
from engine.headers import FORM_HELP
from engine.policies import POLICIES, policy
from engine.units import format_bytes

pytestmark = pytest.mark.asyncio


def _text(root, selector: str) -> str:
    return str(root.query_one(selector, Static).content)


def _id(name: str) -> str:
    return "#policy-" + name.replace("_", "-")


async def test_the_policies_tab_shows_every_policy_of_the_table(cluster, make_app, until, click):
    cluster.create_stream("/apps/sensors", ttl=90)
    app = make_app()
    async with app.run_test(size=(160, 60)) as pilot:
        app.open_path("/apps/sensors")
        await pilot.press("3")
        pane = app.query_one("#policies", PoliciesPane)
        await until(pilot, lambda: pane.loads >= 1)
        rows = list(pane.query(".policy-row"))
        assert len(rows) == len(POLICIES)
        for row, expected in zip(rows, POLICIES, strict=True):
            assert str(row.query_one(Label).content) == expected.label
            assert _text(app, _id(expected.name) + "-error") == expected.hint
            control = app.query_one(_id(expected.name))
            kind = {"bool": Checkbox, "choice": Select}.get(expected.kind, Input)
            assert isinstance(control, kind), expected.name
        assert "reset its groups' offsets" in _text(app, "#policy-admin-perm-error")
        # durations show as the lists show them, and read back unchanged (saved below)
        shown = {
            row.name: app.query_one(_id(row.name), Input).value for row in POLICIES if row.unit_ms
        }
        assert shown == {
            "ttl": "90 s",
            "min_compaction_lag_ms": "0",
            "delete_retention_ms": "1 d",
            "archive_after": "0",
        }
        info = cluster.stream("/apps/sensors")
        assert format_bytes(info.bytes) in _text(app, "#policy-summary")

        # a value past the table's bound is refused by the field, nothing is saved
        limit = policy("max_message_bytes").max
        app.query_one("#policy-max-message-bytes", Input).value = str(limit + 1)
        await click(pilot, "#policy-save")
        await until(pilot, lambda: "fix 1 field" in _text(app, "#policy-error"))
        assert _text(app, "#policy-max-message-bytes-error") == (
            f"policy 'max_message_bytes' must be from 1 to {limit}, got {limit + 1}"
        )
        app.query_one("#policy-max-message-bytes", Input).value = str(limit)
        await click(pilot, "#policy-save")  # pressed again: once it can take the click
        await until(pilot, lambda: pane.saves == 1)
        saved = cluster.stream("/apps/sensors").policies
        assert saved["max_message_bytes"] == limit
        assert (saved["ttl"], saved["delete_retention_ms"]) == (90, 86_400_000)  # as they were
        assert app.query_one("#policy-ttl", Input).value == "90 s"
        # a saved field shows its help again
        assert _text(app, "#policy-max-message-bytes-error") == policy("max_message_bytes").hint


async def test_the_produce_dialog_takes_one_header_a_line(cluster, make_app, until, click):
    cluster.create_stream("/apps")
    cluster.create_topic("/apps:t", partitions=1)
    app = make_app(topic="/apps:t")
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages")
        await until(pilot, lambda: pane.loads >= 1)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ProduceScreen))
        screen = app.screen
        labels = [str(label.content) for label in screen.query(Label)]
        assert f"Headers ({FORM_HELP})" in labels
        screen.query_one("#produce-value", TextArea).text = "v"
        screen.query_one("#produce-headers", TextArea).text = "unit=C\nsource: tui"
        await click(pilot, "#produce-send")
        expected = "line 2: header 'source: tui' is not name=value: write it as 'source=tui'"
        await until(pilot, lambda: _text(screen, "#produce-error") == expected)
        assert cluster.topic("/apps:t").partitions[0].log_end_offset == 0
