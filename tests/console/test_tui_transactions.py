"""Transactions in the terminal console (issue 25): the partitions view shows each
partition's last stable offset (LSO) next to its end offset, the message browser marks
aborted records and shows COMMIT and ABORT markers as rows of their own, and the
Transactions tab lists open transactions with their age and aborts one after a confirm."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Static

from console.screens.confirm import ConfirmScreen
from engine import Cluster, Principal
from engine.client.transactions import Transactions
from tests.timing import scaled
from tests.txn_data import three_transactions

pytestmark = pytest.mark.asyncio

TOPIC = "/s:t"


@pytest.fixture
def txns(cluster):
    cluster.create_stream("/s")
    cluster.create_topic(TOPIC, partitions=1)
    producers = three_transactions(cluster, TOPIC)
    yield producers
    for producer in producers.values():
        producer.close()


def _rows(table: DataTable) -> list[str]:
    return [f"{table.get_row_at(i)[1]} {table.get_row_at(i)[5]}" for i in range(table.row_count)]


async def test_messages_show_marks_and_the_partitions_view_the_lso(txns, make_app, until, cluster):
    c, x = (Transactions(cluster).describe(tid).producer_id for tid in ("c", "x"))
    app = make_app(TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages")
        await until(pilot, lambda: pane.loads >= 1)
        rows = _rows(app.query_one("#msg-table", DataTable))
        # newest first; the value cell says "aborted" and markers are rows with no message
        assert rows == [
            "5 o1",
            f"4 ABORT marker producer id {x}, epoch 0",
            f"3 COMMIT marker producer id {c}, epoch 0",
            "2 aborted x1",
            "1 c2",
            "0 c1",
        ]
        assert "p0 0..6 LSO 5" in str(app.query_one("#msg-status", Static).content)
        await pilot.press("2")
        parts = app.query_one("#partitions")
        await until(pilot, lambda: parts.loads >= 1)
        assert "p0   end 6 LSO 5" in str(app.query_one("#part-chains", Static).content)


async def test_the_transactions_tab_lists_open_ones_and_aborts_after_a_confirm(
    txns, make_app, until, click, cluster
):
    app = make_app(TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.press("8")
        pane = app.query_one("#transactions")
        await until(pilot, lambda: pane.loads >= 1)
        table = app.query_one("#txn-table", DataTable)
        assert table.row_count == 1
        tid, state, age, timeout, *_, partitions = (str(c) for c in table.get_row_at(0))
        assert (tid, state, timeout, partitions) == ("o", "Ongoing", "1 min", "/s:t[0]")
        assert age.endswith("s")
        table.focus()
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await click(pilot, "#confirm-yes")
        await until(pilot, lambda: table.row_count == 0)
        assert "No open transactions" in str(app.query_one("#txn-summary", Static).content)
    assert Transactions(cluster).describe("o").state == "complete_abort"


async def test_a_plain_user_sees_only_their_own_transactions(txns, cluster_path, until):
    from console.app import ConsoleApp

    with Cluster.open(cluster_path, principal=Principal("bob")) as bob:
        app = ConsoleApp(cluster_path, cluster=bob, refresh_s=60)
        async with app.run_test(size=(140, 44)) as pilot:
            await pilot.press("8")
            pane = app.query_one("#transactions")
            await until(pilot, lambda: pane.loads >= 1)
            assert app.query_one("#txn-table", DataTable).row_count == 0
            await pilot.press("x")  # nothing to abort: said, not a crash
            assert not isinstance(app.screen, ConfirmScreen)


async def test_following_shows_a_marker_that_arrives_after_its_records(
    txns, make_app, until, cluster
):
    """o1 is on screen when its transaction commits: the COMMIT marker comes in with the
    next message, in its place between them."""
    from engine import Producer

    o = Transactions(cluster).describe("o").producer_id
    app = make_app(TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages")
        await until(pilot, lambda: pane.loads >= 1)
        await pilot.press("f")
        await until(pilot, lambda: pane.following and pane.loads >= 2)
        txns["o"].commit_transaction()  # COMMIT 6
        plain = Producer(cluster)
        plain.send(TOPIC, b"p", partition=0).get(timeout=scaled(30))  # 7
        plain.close()
        await until(pilot, lambda: pane.arrived == 1)
        rows = _rows(app.query_one("#msg-table", DataTable))
        assert rows[:3] == ["7 p", f"6 COMMIT marker producer id {o}, epoch 0", "5 o1"]


async def test_a_search_marks_the_matches_an_aborted_transaction_wrote(txns, make_app, until):
    from tests.console.test_tui_message_search import _search

    app = make_app(TOPIC)
    async with app.run_test(size=(140, 44)) as pilot:
        pane = app.query_one("#messages")
        await until(pilot, lambda: pane.loads >= 1)
        await _search(pilot, app, "value != 'c2'")
        await until(
            pilot,
            lambda: pane.search_progress is not None and pane.search_progress.state == "done",
        )
        assert sorted(_rows(app.query_one("#msg-table", DataTable))) == [
            "0 c1",
            "2 aborted x1",
            "5 o1",
        ]
