"""The `compression` policy (issue 15) in the terminal console's Policies tab, built from
`engine.policies.POLICIES`: a choice of the codecs, saved like any policy."""

from __future__ import annotations

import pytest
from textual.widgets import Select

from console.widgets.policies import PoliciesPane

pytestmark = pytest.mark.asyncio


async def test_the_policies_tab_chooses_a_codec(cluster, make_app, until, click):
    cluster.create_stream("/apps/sensors")
    app = make_app()
    async with app.run_test(size=(160, 60)) as pilot:
        app.open_path("/apps/sensors")
        await pilot.press("3")
        pane = app.query_one("#policies", PoliciesPane)
        await until(pilot, lambda: pane.loads >= 1)
        control = app.query_one("#policy-compression", Select)
        assert control.value == "none"
        control.value = "lz4"
        await click(pilot, "#policy-save")
        await until(pilot, lambda: pane.saves == 1)
        assert cluster.stream("/apps/sensors").policies["compression"] == "lz4"
