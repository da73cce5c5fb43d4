"""The effective permissions screen (console/screens/permissions.py): opened with `e`, it
shows a console user's answers per stream and policy in words, the ACE texts of the
highlighted stream, and an engine error (an unknown user) as text."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Static

from console.screens.permissions import PermissionsScreen
from engine import Principal

pytestmark = pytest.mark.asyncio


async def test_permissions_screen_shows_a_users_answers(cluster, make_app, until):
    cluster.add_user("alice", "a-long-password-1", groups=("dev",))
    cluster.as_principal(Principal("alice")).create_stream("/a/mine", copy_perm="!p")
    cluster.create_stream("/b/theirs", consume_perm="g:dev & !u:bob")
    app = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.cluster is not None)
        await pilot.press("e")
        screen = app.screen
        assert isinstance(screen, PermissionsScreen)
        await until(pilot, lambda: screen.loads >= 1)
        assert screen.query_one("#perm-user", Input).value == "alice"  # the only user
        table = screen.query_one("#perm-table", DataTable)
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows == [
            ["/a/mine", "alice", "✓ yes", "✓ yes", "✓ yes", "✓ yes", "✗ no", "✓ yes"],
            ["/b/theirs", cluster.principal.user, "✗ no", "✓ yes", "✗ no", "✗ no", "✗ no", "✗ no"],
        ]
        assert "alice (groups dev)" in str(screen.query_one("#perm-status", Static).content)
        table.move_cursor(row=1)
        detail = "consume_perm: g:dev & !u:bob  → yes"
        await until(pilot, lambda: detail in str(screen.query_one("#perm-detail", Static).content))

        screen.query_one("#perm-user", Input).value = "nobody"
        screen.query_one("#perm-user", Input).focus()
        await pilot.press("enter")
        await until(pilot, lambda: screen.loads >= 2)
        assert "no user 'nobody'" in str(screen.query_one("#perm-status", Static).content)
        assert table.row_count == 0
        await pilot.press("escape")
        assert not isinstance(app.screen, PermissionsScreen)
