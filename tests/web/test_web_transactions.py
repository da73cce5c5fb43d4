"""Transactions in the web console (issue 25): the partition table's last stable offset
(LSO), the message browser's marks (aborted records, COMMIT and ABORT markers as rows of
their own) and the Transactions page listing open transactions, where an administrator
aborts one and a plain user is refused plainly."""

from __future__ import annotations

import re

import pytest

from tests.txn_data import three_transactions

TOPIC = "/s:t"


@pytest.fixture
def txns(cluster):
    cluster.create_stream("/s")
    cluster.create_topic(TOPIC)
    producers = three_transactions(cluster, TOPIC)
    yield producers
    for producer in producers.values():
        producer.close()


def _rows(html: str) -> list[str]:
    """Each message-table row as 'offset kind': kind is the value, 'aborted:value' or the
    marker ('COMMIT'/'ABORT')."""
    out = []
    for row in re.findall(r'<tr class="(message[^"]*|marker[^"]*)"(.*?)</tr>', html, re.S):
        cls, body = row
        offset = re.search(r'data-offset="(\d+)"', body).group(1)
        if cls.startswith("marker"):
            out.append(f"{offset} {re.search(r'(COMMIT|ABORT) marker', body).group(1)}")
        else:
            value = re.search(r'class="msg-value">.*?(c1|c2|x1|o1)', body, re.S).group(1)
            out.append(f"{offset} {'aborted:' if 'aborted-badge' in body else ''}{value}")
    return out


def test_the_partition_table_shows_the_lso_next_to_the_end_offset(client, txns):
    html = client.get("/topics/s:t?tab=partitions").get_data(as_text=True)
    assert ">LSO</th>" in html
    cells = re.search(r'<td class="num lso( lso-held)?">(\d+)</td>', html)
    assert cells.groups() == (" lso-held", "5")  # held back by the open transaction
    txns["o"].commit_transaction()
    html = client.get("/topics/s:t?tab=partitions").get_data(as_text=True)
    assert re.search(r'<td class="num lso">(\d+)</td>', html).group(1) == "7"  # end offset


def test_the_browser_marks_aborted_records_and_shows_markers_as_rows(client, txns):
    html = client.get("/topics/s:t?start=oldest").get_data(as_text=True)
    assert _rows(html) == ["0 c1", "1 c2", "2 aborted:x1", "3 COMMIT", "4 ABORT", "5 o1"]
    assert "producer id" in html and "epoch" in html
    newest = client.get("/topics/s:t?start=newest").get_data(as_text=True)
    assert _rows(newest) == ["5 o1", "4 ABORT", "3 COMMIT", "2 aborted:x1", "1 c2", "0 c1"]


def test_the_transactions_page_lists_open_ones_and_an_admin_aborts_one(client, txns, cluster):
    html = client.get("/transactions").get_data(as_text=True)
    assert 'href="/transactions"' in html  # in the navigation
    listed = re.findall(r'data-transactional-id="([^"]+)"', html)
    assert listed == ["o"]  # c and x are finished
    row = html[html.index('data-transactional-id="o"') :]
    assert "Ongoing" in row and "/s:t[0]" in row and "hx-confirm" in row
    answer = client.post(
        "/transactions/abort",
        data={"transactional_id": "o", "csrf_token": client.csrf},
        headers={"HX-Request": "true"},
    )
    assert answer.status_code == 200
    assert "No open transactions" in answer.get_data(as_text=True)
    # the aborted record is marked now, and the LSO is the end offset again
    html = client.get("/topics/s:t?start=oldest").get_data(as_text=True)
    assert _rows(html)[-2:] == ["5 aborted:o1", "6 ABORT"]
    html = client.get("/topics/s:t?tab=partitions").get_data(as_text=True)
    assert re.search(r'<td class="num lso">(\d+)</td>', html).group(1) == "7"


def test_a_plain_user_sees_none_of_others_and_is_refused_plainly(user_client, txns):
    html = user_client.get("/transactions").get_data(as_text=True)
    assert "No open transactions" in html
    answer = user_client.post(
        "/transactions/abort", data={"transactional_id": "o", "csrf_token": user_client.csrf}
    )
    assert answer.status_code == 403
    assert "may not abort transaction" in answer.get_data(as_text=True)


def _api(app, cluster):
    from tests.web.test_web_api import ADMIN, _client

    return _client(app, cluster.create_api_token(ADMIN, "txn tests"))


def test_the_api_marks_aborted_messages_and_lists_the_markers(app, cluster, txns):
    api = _api(app, cluster)
    body = api.get("/topics/s:t/messages").json
    assert [(m["offset"], m["value"], m["aborted"]) for m in body["messages"]] == [
        (0, "c1", False),
        (1, "c2", False),
        (2, "x1", True),
        (5, "o1", False),
    ]
    assert [(m["offset"], m["type"]) for m in body["markers"]] == [(3, "COMMIT"), (4, "ABORT")]
    assert all(m["producer_id"] >= 0 and m["producer_epoch"] == 0 for m in body["markers"])
    # read_committed: no aborted message, nothing at or past the open transaction (LSO 5)
    committed = api.get("/topics/s:t/messages?isolation_level=read_committed").json
    assert [m["value"] for m in committed["messages"]] == ["c1", "c2"]
    bad = api.get("/topics/s:t/messages?isolation_level=serializable")
    assert bad.status_code == 400 and "isolation_level" in bad.json["message"]


def test_searches_mark_the_matches_an_aborted_transaction_wrote(app, client, cluster, txns):
    from tests.web.test_web_message_search import finished

    api = _api(app, cluster)
    body = api.get("/topics/s:t/search", query_string={"q": "value != 'c2'"}).json
    assert [(m["value"], m["aborted"]) for m in body["matches"]] == [
        ("c1", False),
        ("x1", True),
        ("o1", False),
    ]
    page = client.get("/topics/s:t/search", query_string={"query": "value != 'c2'"})
    rows = finished(client, page.get_data(as_text=True))
    assert _rows(rows) == ["0 c1", "2 aborted:x1", "5 o1"]
