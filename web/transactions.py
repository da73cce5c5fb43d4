"""The Transactions page: the open transactions the user may see (their own; all for an
administrator) with their age, state, producer id and epoch and partitions, refreshed every
few seconds, and a button that aborts one (Kafka's kafka-transactions.sh abort) for its
owner or an administrator. The engine's `Transactions` decides who sees and aborts what."""

from __future__ import annotations

from flask import Blueprint, redirect, request, url_for

from engine import errors
from engine.client.transactions import Transactions
from web.pages import cluster, render, user, wants_partial

transactions = Blueprint("transactions", __name__)


def _page(aborted: str | None = None):
    txns = Transactions(cluster())
    return render(
        "transactions/index.html",
        "transactions/_list.html",
        open=txns.open(),
        me=user().name,
        admin=cluster().is_administrator,
        aborted=aborted,
    )


@transactions.route("/transactions")
def index():
    return _page()


@transactions.route("/transactions/abort", methods=["POST"])
def abort():
    tid = request.form.get("transactional_id", "")
    txns = Transactions(cluster())
    if not any(info.transactional_id == tid for info, _ in txns.open()):
        if cluster().is_administrator:  # sees every id: the one reason is that it is not open
            state = txns.describe(tid).state  # NotFound (404) for an unknown id
            raise errors.IllegalState(
                f"transaction {tid!r} is not open ({state}): there is nothing to abort"
            )
        # the engine shows a user only their own ids: say plainly why nothing happens
        raise errors.AccessDenied(
            f"user {user().name!r} may not abort transaction {tid!r}: only its owner or an "
            "administrator may abort an open transaction (or it is no longer open)"
        )
    txns.abort(tid)
    if wants_partial():
        return _page(aborted=tid)
    return redirect(url_for("transactions.index"), 303)
