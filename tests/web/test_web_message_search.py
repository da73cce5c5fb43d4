"""The web console's message search (web/search_messages.py): a query box on the message
browser, a bookmarkable search page that runs to the end with progress, matches added as
they come, Cancel, form errors for garbage, and jobs kept per user."""

from __future__ import annotations

import json
import re
import time

import pytest

from engine import Producer
from engine.client import message_search
from tests.timing import scaled
from web import search_messages

TOPIC = "/web/s:readings"
PATH = "/topics/web/s:readings"


@pytest.fixture
def topic(cluster):
    """300 JSON readings in 2 partitions: reading i has {"user": {"id": i}} and header
    unit=C for even i, F for odd."""
    cluster.create_stream("/web/s", ttl=0)
    cluster.create_topic(TOPIC, partitions=2)
    with Producer(cluster, acks=1) as producer:
        for i in range(300):
            producer.send(
                TOPIC,
                key=f"k{i}".encode(),
                value=json.dumps({"user": {"id": i}, "temp": i % 40}).encode(),
                partition=i % 2,
                headers=[("unit", b"C" if i % 2 == 0 else b"F")],
            )
    return TOPIC


def finished(client, html: str) -> str:
    """The search page `html` and every progress part it polls for (following each next
    URL) until the search stops polling, joined: all the rows it showed."""
    url = _polling(html)
    deadline = time.monotonic() + scaled(20)
    while url is not None:
        assert time.monotonic() < deadline, "the search kept polling"
        time.sleep(0.05)  # a poll interval
        part = client.get(url, headers={"HX-Request": "true"}).get_data(as_text=True)
        html += part
        url = _polling(part)
    return html


def _polling(html: str) -> str | None:
    found = re.search(r'hx-get="([^"]+)" hx-trigger="every', html)
    return None if found is None else found.group(1).replace("&amp;", "&")


def progress_url(html: str) -> str:
    return re.search(r'hx-get="([^"]+)" hx-trigger="every', html).group(1).replace("&amp;", "&")


def test_the_browser_has_a_query_box_leading_to_the_search(client, topic):
    page = client.get(PATH).get_data(as_text=True)
    assert 'aria-label="Search messages with a query"' in page
    assert f'action="{PATH}/search"' in page and 'name="query"' in page


def test_a_search_runs_to_the_end_and_shows_every_match(client, topic):
    page = client.get(
        f"{PATH}/search", query_string={"query": 'value.user.id >= 290 && headers.unit == "C"'}
    )
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'role="status"' in html and 'aria-label="Search progress"' in html
    rows = finished(client, html)
    offsets = sorted(int(o) for o in re.findall(r'data-partition="0" data-offset="(\d+)"', rows))
    # even readings 290..298 are offsets 145..149 of partition 0
    assert offsets == [145, 146, 147, 148, 149]
    assert "Scanned 300 of 300 offsets (100%), 5 matches" in rows
    assert "Reached the end." in rows


def test_the_search_page_is_bookmarkable_and_keeps_its_form(client, topic):
    html = client.get(
        f"{PATH}/search", query_string={"query": "key == 'k7'", "partition": "1", "from": "2"}
    ).get_data(as_text=True)
    assert 'value="key == &#39;k7&#39;"' in html
    assert '<option value="1" selected>' in html
    assert 'value="2"' in html
    rows = finished(client, html)
    assert 'data-partition="1" data-offset="3"' in rows


@pytest.mark.parametrize(
    ("args", "field", "says"),
    [
        ({"query": "value.user.id =="}, "query", "ends too early"),
        ({"query": "value.(a"}, "query", "column 7"),
        ({"query": "nosuch(key)"}, "query", "no function nosuch()"),
        ({"query": "re2_match(key, '(')"}, "query", "not an RE2 pattern"),
        ({"query": "key", "partition": "9"}, "partition", "not a partition"),
        ({"query": "key", "from": "yesterday-ish"}, "from", "seek to an offset"),
        ({"query": "x" * 5000}, "query", "at most 4,000 characters"),
    ],
)
def test_garbage_is_a_form_error_never_a_500(client, topic, args, field, says):
    page = client.get(f"{PATH}/search", query_string=args)
    assert page.status_code == 400
    html = page.get_data(as_text=True)
    assert f'id="search-{field}-error"' in html
    assert says in html.replace("&#39;", "'")
    assert 'hx-trigger="every' not in html  # nothing started


def test_cancel_stops_a_running_search(client, topic, monkeypatch):
    monkeypatch.setattr(message_search, "CHUNK", 10)
    monkeypatch.setattr(search_messages, "MAX_RATE", 20)  # 300 messages take 15 s
    html = client.get(f"{PATH}/search", query_string={"query": "value.user.id >= `0`"}).get_data(
        as_text=True
    )
    job_id = re.search(r"/search/([0-9a-f-]+)\?", progress_url(html)).group(1)
    answer = client.post(
        f"{PATH}/search/{job_id}/cancel", headers={"X-CSRFToken": client.csrf, "HX-Request": "true"}
    )
    assert answer.status_code == 200
    part = answer.get_data(as_text=True)
    assert 'data-state="cancelled"' in part and "Cancelled." in part
    assert "Scanned 300 of 300" not in part


def test_cancel_needs_the_csrf_token(client, topic):
    html = client.get(f"{PATH}/search", query_string={"query": "key"}).get_data(as_text=True)
    job_id = re.search(r"/search/([0-9a-f-]+)", html).group(1)
    assert client.post(f"{PATH}/search/{job_id}/cancel").status_code == 400


def test_jobs_are_per_user_and_bounded(client, user_client, cluster, topic, monkeypatch):
    monkeypatch.setattr(search_messages, "MAX_RATE", 1)
    ids = []
    for _ in range(message_search.JOBS_PER_OWNER + 1):
        html = client.get(f"{PATH}/search", query_string={"query": "key"}).get_data(as_text=True)
        ids.append(re.search(r"/search/([0-9a-f-]+)\?", html).group(1))
    # the oldest was ended and forgotten; another user cannot see the admin's jobs
    gone = client.get(f"{PATH}/search/{ids[0]}").get_data(as_text=True)
    assert "no longer kept" in gone
    assert "no longer kept" in user_client.get(f"{PATH}/search/{ids[-1]}").get_data(as_text=True)
    assert 'data-state="running"' in client.get(f"{PATH}/search/{ids[-1]}").get_data(as_text=True)
    for job in client.application.extensions["message_searches"].of("admin"):
        job.cancel()


def test_a_user_without_the_consume_permission_is_denied(user_client, cluster):
    cluster.create_stream("/web/p", consume_perm="u:nobody", ttl=0)
    cluster.create_topic("/web/p:t", partitions=1)
    page = user_client.get("/topics/web/p:t/search", query_string={"query": "key"})
    assert page.status_code == 403
    assert "Access denied" in page.get_data(as_text=True)
