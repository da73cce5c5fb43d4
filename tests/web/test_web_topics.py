"""The topic page: partitions, the message browser (seek, filter with a scan budget,
formats, pages, live tail), downloads and the produce form, through the Flask test client."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from engine import Consumer, Producer, TopicPartition
from engine.client import browse, rendering
from engine.units import format_bytes
from web import messages

TOPIC = "/apps/t:readings"
URL = "/topics/apps/t:readings"
HTMX = {"HX-Request": "true"}
T0 = 1_700_000_000_000  # the first message's timestamp


def after(positions: dict[int, int]) -> str:
    """A live tail's cursor at `positions` (what a page hands its poller)."""
    return browse.encode_cursor(TOPIC, True, positions)


def cursor_in(url: str, name: str, forward: bool) -> dict[int, int]:
    """The positions of the cursor argument `name` of a link."""
    raw = parse_qs(urlsplit(url).query)[name][0]
    return browse.decode_cursor(raw, TOPIC, forward, range(2))


@pytest.fixture
def topic(cluster):
    """/apps/t:readings with 2 partitions; partition 0 holds 30 messages, offsets 0..29,
    a second apart from T0 (key k<i>, value v<i>, header seq: <i>); partition 1 holds
    one JSON message and one that is not UTF-8."""
    cluster.create_stream("/apps/t", default_partitions=2, ttl=0)
    cluster.create_topic(TOPIC)
    producer = Producer(cluster, acks=1)
    for i in range(30):
        producer.send(
            TOPIC,
            value=f"v{i}".encode(),
            key=f"k{i}".encode(),
            partition=0,
            headers=[("seq", str(i).encode())],
            timestamp_ms=T0 + i * 1000,
        )
    producer.send(TOPIC, value=b'{"a":1,"b":[true,null]}', key=b"j", partition=1, timestamp_ms=T0)
    producer.send(TOPIC, value=b"\xff\xfe\x00bin", key=None, partition=1, timestamp_ms=T0 + 1)
    producer.flush()
    producer.close()
    return TOPIC


def text(answer) -> str:
    return answer.get_data(as_text=True)


def offsets(answer) -> list[tuple[int, int]]:
    """(partition, offset) of each message row, in page order."""
    rows = re.findall(
        r'<tr class="message" data-partition="(\d+)" data-offset="(\d+)">', text(answer)
    )
    return [(int(p), int(o)) for p, o in rows]


def consume_all(cluster, name: str) -> list:
    consumer = Consumer(cluster, enable_auto_commit=False)
    try:
        tps = [TopicPartition(name, p.partition) for p in cluster.topic(name).partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        records = []
        for batch in consumer.poll(timeout_ms=500, max_records=100_000).values():
            records.extend(batch)
        return records
    finally:
        consumer.close()


# --- the page --------------------------------------------------------------------------------


def test_page_opens_on_its_messages_with_tabs(client, topic):
    answer = client.get(URL)
    assert answer.status_code == 200
    body = text(answer)
    assert "<h1>Topic <code>/apps/t:readings</code></h1>" in body
    assert 'role="tablist"' in body
    tabs = re.findall(
        r'<a role="tab" id="tab-(\w+)" href="([^"]+)"[^>]*aria-selected="(\w+)"', body
    )
    assert tabs == [
        ("messages", URL, "true"),
        ("partitions", URL + "?tab=partitions", "false"),
        ("consumers", URL + "?tab=consumers", "false"),
        ("configs", URL + "?tab=configs", "false"),
        ("schema", URL + "?tab=schema", "false"),
        ("charts", URL + "?tab=charts", "false"),
    ]
    assert 'role="tabpanel" id="tab-panel" aria-labelledby="tab-messages"' in body
    assert len(offsets(answer)) == 32  # the newest messages, on the page itself
    # the produce form is a click away: in the page, folded
    assert '<details class="produce-toggle" id="produce-toggle">' in body
    assert 'aria-label="Produce a message"' in body
    # the other tabs' panels are not read nor shown
    assert 'aria-label="Partitions"' not in body and 'aria-label="Policies"' not in body
    assert client.get(URL, query_string={"tab": "messages"}).status_code == 200


def test_a_tab_is_a_link_and_htmx_gets_its_panel(client, topic):
    answer = client.get(URL, query_string={"tab": "configs"})
    assert answer.status_code == 200
    body = text(answer)
    assert body.startswith("<!doctype html>")  # without JavaScript: the whole page
    assert 'aria-label="Policies"' in body and offsets(answer) == []
    assert 'id="tab-configs" href="/topics/apps/t:readings?tab=configs"' in body
    assert re.search(r'id="tab-configs"[^>]*aria-selected="true"', body)
    assert 'id="browser"' not in body
    partial = client.get(
        URL, query_string={"tab": "charts"}, headers={**HTMX, "HX-Target": "topic-tabs"}
    )
    body = text(partial)
    assert partial.status_code == 200
    assert body.lstrip().startswith('<div class="tabs" role="tablist"')
    assert 'hx-push-url="true"' in body and 'aria-labelledby="tab-charts"' in body
    assert 'aria-label="Throughput history"' in body and "<html" not in body
    # the message browser's own htmx requests still get the messages part alone
    browser = client.get(URL, headers={**HTMX, "HX-Target": "browser"})
    assert text(browser).lstrip().startswith("<form") and len(offsets(browser)) == 32
    missing = client.get(URL, query_string={"tab": "nope"})
    assert missing.status_code == 404 and "has no tab" in text(missing)


def test_the_schema_tab_shows_the_topic_schemas(client, topic):
    body = text(client.get(URL, query_string={"tab": "schema"}))
    assert 'id="schemas"' in body and "/apps/t:readings-value" in body


def test_the_consumers_tab_lists_the_groups_reading_the_topic(client, topic, cluster):
    consumer = Consumer(cluster, group_id="readers", enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        consumer.seek(TopicPartition(TOPIC, 0), 10)
        consumer.commit()
    finally:
        consumer.close()
    body = text(client.get(URL, query_string={"tab": "consumers"}))
    row = re.search(r'<tr data-group="readers">(.*?)</tr>', body, re.S).group(1)
    assert "p0: 10" in row
    assert '<td class="num" data-testid="topic-group-lag">20</td>' in row  # 30 - 10
    cluster.create_topic("/apps/t:other")
    empty = text(client.get("/topics/apps/t:other", query_string={"tab": "consumers"}))
    assert "No consumer group reads this topic yet" in empty


def test_page_shows_the_topic_its_partitions_and_their_chains(client, topic, cluster):
    answer = client.get(URL, query_string={"tab": "partitions"})
    assert answer.status_code == 200
    body = text(answer)
    assert "<h1>Topic <code>/apps/t:readings</code></h1>" in body
    assert 'aria-label="Partitions"' in body
    assert 'aria-label="Partitionlets of partition 0"' in body
    chain = cluster.topic(TOPIC).partitions[0].partitionlets
    assert f"volume {chain[0].volume}" in body
    assert "0..29" in body and "active" in body
    assert 'href="/streams/apps/t"' in body
    assert "/heat?topic=/apps/t:readings&amp;partition=0" in body
    # the newest messages first, across both partitions (the Messages tab)
    answer = client.get(URL)
    assert offsets(answer)[0] == (0, 29)
    assert len(offsets(answer)) == 32


def test_unknown_topic_is_404_and_a_bad_name_400(client, topic):
    assert client.get("/topics/apps/t:nope").status_code == 404
    assert client.get("/topics/apps/nope:readings").status_code == 404
    answer = client.get("/topics/apps/t:bad name!")
    assert answer.status_code == 400


def test_topics_index_is_not_needed(client):
    assert "topics.index" not in client.application.view_functions


# --- seeking ---------------------------------------------------------------------------------


def test_seek_by_offset_shows_that_offset_first(client, topic):
    answer = client.get(URL, query_string={"partition": "0", "offset": "7", "limit": "5"})
    assert answer.status_code == 200
    assert offsets(answer) == [(0, 7), (0, 8), (0, 9), (0, 10), (0, 11)]
    assert "Newer messages" in text(answer)


def test_an_offset_typed_in_the_form_wins_over_start_newest(client, topic):
    answer = client.get(URL, query_string={"partition": "0", "start": "newest", "offset": "28"})
    assert offsets(answer) == [(0, 28), (0, 29)]
    assert "Reached the end." in text(answer)


def test_the_largest_offset_is_past_the_end_not_an_error(client, topic):
    answer = client.get(URL, query_string={"partition": "0", "offset": str(2**63 - 1)})
    assert answer.status_code == 200
    assert "past the end of partition 0" in text(answer)


def test_offset_past_the_end_says_so(client, topic):
    answer = client.get(URL, query_string={"partition": "0", "offset": "500"})
    assert answer.status_code == 200
    assert offsets(answer) == []
    assert "past the end of partition 0" in text(answer)
    assert "No messages from offset 500 on in this partition." in text(answer)
    answer = client.get(URL, query_string={"time": "2100-01-01T00:00:00Z"})
    assert "No messages at or after 2100-01-01T00:00:00.000Z in this topic." in text(answer)


def test_seek_by_time_iso_and_datetime_local_and_epoch_ms(client, topic):
    iso = browse.iso_ms(T0 + 12_000)  # 2023-11-14T22:13:32.000Z
    for value in (iso, iso[:-5], iso.replace("Z", "+00:00"), str(T0 + 12_000)):
        answer = client.get(URL, query_string={"partition": "0", "time": value, "limit": "2"})
        assert answer.status_code == 200, value
        assert offsets(answer) == [(0, 12), (0, 13)], value
    # datetime-local has minutes only: 22:13 is before T0+12s, so the page starts earlier
    answer = client.get(URL, query_string={"partition": "0", "time": iso[:16], "limit": "1"})
    assert offsets(answer) == [(0, 0)]


def test_oldest_across_partitions_merges_by_time(client, topic):
    answer = client.get(URL, query_string={"start": "oldest", "limit": "4"})
    assert offsets(answer) == [(0, 0), (1, 0), (1, 1), (0, 1)]


@pytest.mark.parametrize(
    ("args", "field", "message"),
    [
        ({"offset": "-3"}, "offset", "whole number"),
        ({"offset": "abc"}, "offset", "whole number"),
        ({"offset": "\u00b2"}, "offset", "whole number"),  # "²".isdigit() is true
        ({"offset": "9" * 30}, "offset", "whole number"),
        ({"time": "9" * 30}, "time", "too far in the future"),
        ({"partition": "\u0661"}, "partition", "is not a partition"),  # Arabic-Indic 1
        ({"time": "yesterday"}, "time", "is not a time"),
        ({"time": "1960-01-01T00:00:00Z"}, "time", "before 1970"),
        ({"partition": "9"}, "partition", "choose 0 to 1 or all"),
        ({"partition": "x"}, "partition", "is not a partition"),
        ({"limit": "0"}, "limit", "show 1 to 500"),
        ({"limit": "100000"}, "limit", "show 1 to 500"),
        ({"format": "xml"}, "format", "show as one of"),
        ({"start": "middle"}, "start", "start at one of"),
        ({"cursor": "0:x"}, "cursor", "not a cursor this service wrote"),
        ({"cursor": browse.encode_cursor(TOPIC, False, {7: 1})}, "cursor", "not one of those"),
        ({"cursor": after({0: 1})}, "cursor", "continues a forward (oldest first) read"),
    ],
)
def test_bad_browser_input_is_a_400_with_the_message_by_its_field(
    client, topic, args, field, message
):
    answer = client.get(URL, query_string=args)
    assert answer.status_code == 400
    body = text(answer)
    assert f'id="browse-{field}-error"' in body
    assert message in body
    assert offsets(answer) == []
    # the page around it still renders
    assert 'role="tablist"' in body and 'aria-label="Produce a message"' in body
    # htmx gets the same message in the part it swaps, with a 200 so that it is shown
    partial = client.get(URL, query_string=args, headers=HTMX)
    assert partial.status_code == 200
    assert message in text(partial)
    assert "<html" not in text(partial)


# --- filters and the scan budget ---------------------------------------------------------------


def test_filter_by_key_value_and_header(client, topic):
    answer = client.get(URL, query_string={"key": "k2", "start": "oldest"})
    assert offsets(answer) == [(0, 2)] + [(0, i) for i in range(20, 30)]
    answer = client.get(URL, query_string={"value": "V1", "icase": "1", "partition": "0"})
    assert sorted(offsets(answer)) == [(0, 1)] + [(0, i) for i in range(10, 20)]
    assert "Scanned 30 messages" in text(answer)
    assert "11 matches" in text(answer)
    answer = client.get(URL, query_string={"value": "V1", "partition": "0"})
    assert offsets(answer) == []
    answer = client.get(URL, query_string={"header": "seq: 7"})
    assert offsets(answer) == [(0, 7)]
    # every field must match
    answer = client.get(URL, query_string={"key": "k1", "value": "v15"})
    assert offsets(answer) == [(0, 15)]
    # non-ASCII needles fold case too; binary values are searched as bytes
    answer = client.get(URL, query_string={"value": "BIN", "icase": "1"})
    assert offsets(answer) == [(1, 1)]


@pytest.fixture
def hosts(cluster):
    """/apps/t:logs, one partition: 12 messages, header host api-2 at offsets 3, 7 and 11
    (api-20 at 5), api-1 elsewhere, and one value that reads `host:api-2` as text."""
    name = "/apps/t:logs"
    cluster.create_stream("/apps/t", default_partitions=1, ttl=0)
    cluster.create_topic(name)
    producer = Producer(cluster, acks=1)
    for i in range(12):
        host = b"api-2" if i in (3, 7, 11) else b"api-20" if i == 5 else b"api-1"
        value = b"see host:api-2" if i == 0 else b"event %d" % i
        producer.send(name, value=value, headers=[("host", host)], timestamp_ms=T0 + i)
    producer.flush()
    producer.close()
    return "/topics/apps/t:logs"


def test_every_header_form_finds_the_same_messages(client, hosts):
    """`host: api-2`, `host=api-2` and `host:api-2` (once 0 matches) mean one thing."""
    for typed in ("host: api-2", "host=api-2", "host:api-2"):
        answer = client.get(hosts, query_string={"header": typed, "start": "oldest"})
        assert offsets(answer) == [(0, 3), (0, 7), (0, 11)], typed
    answer = client.get(hosts, query_string={"header": "host=api-2*", "start": "oldest"})
    assert offsets(answer) == [(0, 3), (0, 5), (0, 7), (0, 11)]
    # bare text in the header field is text in a header (not in the value of offset 0)
    answer = client.get(hosts, query_string={"header": "api-20", "start": "oldest"})
    assert offsets(answer) == [(0, 5)]
    # a filter that reads two ways is refused next to its field, not matched against nothing
    answer = client.get(hosts, query_string={"header": "host == api-2"})
    assert answer.status_code == 400
    assert offsets(answer) == []
    assert 'id="browse-header-error"' in text(answer)
    assert "two separators after the header name" in text(answer)
    assert 'aria-describedby="browse-header-error"' in text(answer)


def test_a_download_keeps_the_filter_grammar(client, hosts):
    answer = client.get(hosts + "/download", query_string={"header": "host:api-2"})
    assert [json.loads(x)["offset"] for x in text(answer).splitlines()] == [3, 7, 11]


def test_a_filter_scan_stops_at_its_budget_and_continues(client, topic, monkeypatch):
    monkeypatch.setattr(browse, "SCAN_CHUNK", 4)
    monkeypatch.setattr(messages, "SCAN_MESSAGES", 8)
    args = {"partition": "0", "start": "oldest", "key": "k25"}
    answer = client.get(URL, query_string=args)
    body = text(answer)
    assert offsets(answer) == []
    assert "Scanned 8 messages (partition 0: offsets 0..7), 0 matches." in body
    assert "Continue search" in body
    more = re.search(r'hx-get="([^"]*/more\?[^"]*)"', body).group(1).replace("&amp;", "&")
    assert cursor_in(more, "cursor", forward=True) == {0: 8}
    # continuing appends below the table (htmx) until the match turns up
    seen: list[tuple[int, int]] = []
    for _ in range(5):
        answer = client.get(more, headers=HTMX)
        assert answer.status_code == 200
        part = text(answer)
        assert part.lstrip().startswith('<div id="messages-more"')
        assert 'hx-swap-oob="beforeend:#message-rows"' in part
        seen += offsets(answer)
        found = re.search(r'hx-get="([^"]*/more\?[^"]*)"', part)
        if found is None:
            break
        more = found.group(1).replace("&amp;", "&")
    assert seen == [(0, 25)]


def test_a_scan_is_bounded_in_time(client, topic, monkeypatch):
    monkeypatch.setattr(messages, "SCAN_SECONDS", 0.0)
    monkeypatch.setattr(browse, "SCAN_CHUNK", 5)
    answer = client.get(URL, query_string={"partition": "0", "value": "nothing-like-it"})
    assert "Stopped to stay fast" in text(answer)
    assert "Scanned 5 messages" in text(answer)


def test_newest_pages_go_back_in_time_without_gaps(client, topic):
    args = {"partition": "0", "limit": "7"}
    answer = client.get(URL, query_string=args)
    seen = offsets(answer)
    assert seen == [(0, i) for i in range(29, 22, -1)]
    body = text(answer)
    while (found := re.search(r'hx-get="([^"]*/more\?[^"]*)"', body)) is not None:
        answer = client.get(found.group(1).replace("&amp;", "&"), headers=HTMX)
        body = text(answer)
        seen += offsets(answer)
    assert seen == [(0, i) for i in range(29, -1, -1)]
    assert "Reached the oldest message." in body


@pytest.mark.parametrize("start", ["oldest", "newest"])
def test_paging_all_partitions_sees_every_message_once(client, topic, cluster, start):
    answer = client.get(URL, query_string={"start": start, "limit": "4"})
    seen = offsets(answer)
    body = text(answer)
    while (found := re.search(r'hx-get="([^"]*/more\?[^"]*)"', body)) is not None:
        answer = client.get(found.group(1).replace("&amp;", "&"), headers=HTMX)
        body = text(answer)
        seen += offsets(answer)
    assert len(seen) == len(set(seen))
    assert set(seen) == {(r.partition, r.offset) for r in consume_all(cluster, TOPIC)}


def test_the_more_link_works_without_htmx_as_a_page(client, topic):
    answer = client.get(
        URL + "/more",
        query_string={
            "partition": "0",
            "limit": "5",
            "cursor": browse.encode_cursor(TOPIC, False, {0: 10}),
        },
    )
    assert answer.status_code == 200
    assert "<html" in text(answer)
    assert offsets(answer) == [(0, 9), (0, 8), (0, 7), (0, 6), (0, 5)]


# --- formats and escaping -----------------------------------------------------------------------


def test_json_format_pretty_prints_what_parses(client, topic):
    answer = client.get(URL, query_string={"partition": "1", "format": "json"})
    body = text(answer)
    assert '<pre class="value value-json">{\n  &#34;a&#34;: 1,' in body
    assert "(not JSON)" in body  # the binary value
    # a change of format re-renders only the browser for htmx
    partial = client.get(URL, query_string={"partition": "1", "format": "json"}, headers=HTMX)
    assert "<html" not in text(partial) and "value-json" in text(partial)


def test_hex_format_dumps_bytes(client, topic):
    answer = client.get(URL, query_string={"partition": "1", "format": "hex"})
    body = text(answer)
    assert "00000000  ff fe 00 62 69 6e" in body
    assert "00000000  7b 22 61 22 3a 31" in body


def test_text_format_shows_invalid_utf8_and_controls_as_text(client, topic):
    body = text(client.get(URL, query_string={"partition": "1"}))
    assert "\ufffd\ufffd\u2400bin" in body
    assert "not valid UTF-8" in body


def test_hostile_keys_values_and_headers_are_escaped(client, cluster, topic):
    evil = "<script>alert(1)</script>"
    img = "<img src=x onerror=alert(1)>"
    producer = Producer(cluster, acks=1)
    producer.send(
        TOPIC,
        key=evil.encode(),
        value=(img + "\"'&").encode(),
        partition=1,
        headers=[(evil, img.encode())],
    )
    producer.flush()
    producer.close()
    for fmt in messages.FORMATS:
        body = text(client.get(URL, query_string={"partition": "1", "format": fmt}))
        assert "<script>alert" not in body
        assert "<img src=x" not in body
    body = text(client.get(URL, query_string={"partition": "1"}))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "&lt;img src=x onerror=alert(1)&gt;&#34;&#39;&amp;" in body


def test_long_values_are_cut_with_an_expander(cluster, client, topic):
    producer = Producer(cluster, acks=1)
    producer.send(TOPIC, value=b"x" * (rendering.SHOW_BYTES + 10), partition=1)
    producer.flush()
    producer.close()
    body = text(client.get(URL, query_string={"partition": "1", "limit": "1"}))
    assert "<details" in body and "…" in body
    size = format_bytes(rendering.SHOW_BYTES + 10)
    assert f"Only the first part of {size} is shown" in body


# --- live tail ---------------------------------------------------------------------------------


def test_follow_adds_a_poller_that_asks_after_the_newest(client, topic):
    body = text(client.get(URL, query_string={"follow": "1"}))
    poller = re.search(r'<div id="tail"[^>]*hx-get="([^"]+)"[^>]*hx-trigger="every 1s"', body)
    assert poller is not None
    url = poller.group(1).replace("&amp;", "&")
    assert cursor_in(url, "after", forward=True) == {0: 30, 1: 2}


def test_tail_answers_204_until_a_message_arrives(client, cluster, topic):
    url = URL + "/tail"
    args = {"follow": "1", "after": after({0: 30, 1: 2})}
    assert client.get(url, query_string=args, headers=HTMX).status_code == 204
    producer = Producer(cluster, acks=1)
    producer.send(TOPIC, value=b"fresh", key=b"new", partition=1)
    producer.send(TOPIC, value=b"fresh0", key=b"new", partition=0)
    producer.flush()
    producer.close()
    answer = client.get(url, query_string=args, headers=HTMX)
    assert answer.status_code == 200
    body = text(answer)
    assert body.startswith('<div id="tail"')
    assert 'hx-swap-oob="afterbegin:#message-rows"' in body  # newest first: on top
    assert sorted(offsets(answer)) == [(0, 30), (1, 2)]
    poller = re.search(r'hx-get="([^"]+)"', body).group(1).replace("&amp;", "&")
    assert cursor_in(poller, "after", forward=True) == {0: 31, 1: 3}
    # the counts above the browser move too (out of band)
    assert '<dl class="facts topic-facts" id="topic-facts" hx-swap-oob="true">' in body
    # the partitions are another tab: not swapped into the Messages tab
    assert 'aria-label="Partitions"' not in body
    assert "<dt>Messages</dt><dd>34</dd>" in body


def test_tail_of_a_forward_view_appends_below_and_filters(client, cluster, topic):
    args = {
        "follow": "1",
        "start": "oldest",
        "partition": "0",
        "value": "keep",
        "after": after({0: 30}),
    }
    producer = Producer(cluster, acks=1)
    for value in (b"drop", b"keep-1", b"drop", b"keep-2"):
        producer.send(TOPIC, value=value, partition=0)
    producer.flush()
    producer.close()
    answer = client.get(URL + "/tail", query_string=args, headers=HTMX)
    assert 'hx-swap-oob="beforeend:#message-rows"' in text(answer)
    assert offsets(answer) == [(0, 31), (0, 33)]


def test_tail_stops_after_adding_many_rows(client, cluster, topic, monkeypatch):
    monkeypatch.setattr(messages, "TAIL_ROWS_MAX", 3)
    _send_values(cluster, b"a", b"b")
    args = {"follow": "1", "partition": "0", "after": after({0: 30}), "added": "1"}
    answer = client.get(URL + "/tail", query_string=args, headers=HTMX)
    body = text(answer)
    assert "Following stopped after 3 new messages" in body
    assert "every 1s" not in body
    assert offsets(answer) == [(0, 31), (0, 30)]


def _send_values(cluster, *values: bytes) -> None:
    producer = Producer(cluster, acks=1)
    for value in values:
        producer.send(TOPIC, value=value, partition=0)
    producer.flush()
    producer.close()


def test_tail_stops_with_a_message_on_bad_input(client, topic):
    answer = client.get(URL + "/tail", query_string={"after": "zz"}, headers=HTMX)
    assert answer.status_code == 200
    assert "Live tail stopped" in text(answer)
    assert "every 1s" not in text(answer)


# --- downloads ---------------------------------------------------------------------------------


def test_download_jsonl_parses_back_with_the_right_rows(client, topic, cluster):
    answer = client.get(
        URL + "/download", query_string={"file": "jsonl", "start": "oldest", "partition": "all"}
    )
    assert answer.status_code == 200
    assert (
        answer.headers["Content-Disposition"] == 'attachment; filename="apps_t_readings_all.jsonl"'
    )
    rows = [json.loads(line) for line in text(answer).splitlines()]
    assert len(rows) == 32
    assert [(r["partition"], r["offset"]) for r in rows[:2]] == [(0, 0), (0, 1)]
    first = rows[0]
    assert first["topic"] == TOPIC
    assert first["key"] == "k0" and first["key_encoding"] == "utf-8"
    assert first["value"] == "v0" and first["timestamp"] == T0
    assert first["timestamp_type"] == "create"
    assert first["time"] == browse.iso_ms(T0)
    assert first["headers"] == [{"name": "seq", "value": "0", "encoding": "utf-8"}]
    binary = rows[-1]
    assert binary["key"] is None and binary["key_encoding"] is None
    assert binary["value_encoding"] == "base64"
    assert base64.b64decode(binary["value"]) == b"\xff\xfe\x00bin"
    # the same messages as a consumer reads
    assert {(r["partition"], r["offset"]) for r in rows} == {
        (r.partition, r.offset) for r in consume_all(cluster, TOPIC)
    }


def test_download_csv_parses_back_and_honours_range_filter_and_max(client, topic):
    answer = client.get(
        URL + "/download",
        query_string={
            "file": "csv",
            "partition": "0",
            "offset": "3",
            "to_offset": "20",
            "value": "v1",
            "max": "4",
        },
    )
    assert answer.status_code == 200
    assert answer.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(text(answer))))
    assert [int(r["offset"]) for r in rows] == [10, 11, 12, 13]
    assert rows[0]["key"] == "k10" and rows[0]["value"] == "v10"
    assert json.loads(rows[0]["headers"]) == [{"name": "seq", "value": "10", "encoding": "utf-8"}]


def test_download_until_a_time_and_newest(client, topic):
    answer = client.get(
        URL + "/download",
        query_string={
            "file": "jsonl",
            "partition": "0",
            "start": "oldest",
            "until": str(T0 + 4000),
        },
    )
    assert [json.loads(x)["offset"] for x in text(answer).splitlines()] == [0, 1, 2, 3, 4]
    answer = client.get(
        URL + "/download", query_string={"file": "jsonl", "partition": "0", "max": "3"}
    )
    assert [json.loads(x)["offset"] for x in text(answer).splitlines()] == [27, 28, 29]


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_a_filtered_download_from_newest_holds_the_matches_however_old(client, topic, kind):
    """Start at newest with a header filter: the matches lie before the last `max`
    offsets, which a download once read and filtered, returning an empty file."""
    answer = client.get(
        URL + "/download",
        query_string={"file": kind, "partition": "0", "header": "seq=1*", "max": "5"},
    )
    assert answer.status_code == 200
    if kind == "jsonl":
        offsets = [json.loads(x)["offset"] for x in text(answer).splitlines()]
    else:
        offsets = [int(r["offset"]) for r in csv.DictReader(io.StringIO(text(answer)))]
    # "seq=1*" matches the headers of offsets 1 and 10..19: the newest five of those, all
    # older than the last five offsets (25..29), which hold none
    assert offsets == [15, 16, 17, 18, 19]
    assert "X-Partitionlet-Partial" not in answer.headers
    # a value filter that matches many: the newest `max` of them, in offset order
    answer = client.get(
        URL + "/download",
        query_string={"file": "jsonl", "partition": "0", "value": "v1", "max": "4"},
    )
    assert [json.loads(x)["offset"] for x in text(answer).splitlines()] == [16, 17, 18, 19]


def test_a_filtered_download_says_when_its_search_stopped_short(client, topic, monkeypatch):
    monkeypatch.setattr(messages, "EXPORT_SCAN_MESSAGES", 1)  # one chunk, then the budget is out
    monkeypatch.setattr(browse, "SCAN_CHUNK", 10)
    answer = client.get(
        URL + "/download",
        query_string={"file": "jsonl", "partition": "0", "value": "v1", "max": "100"},
    )
    assert answer.status_code == 200
    assert "stopped after 10 messages" in answer.headers["X-Partitionlet-Partial"]
    assert answer.headers["Content-Disposition"].endswith('_p0_partial.jsonl"')
    # the newest ten offsets (20..29) were searched: none holds "v1"
    assert text(answer) == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"file": "xml"}, "jsonl or csv"),
        ({"max": "0"}, "download 1 to"),
        ({"until": "soon"}, "is not a time"),
        ({"to_offset": "-1"}, "whole number"),
        ({"partition": "5"}, "is not a partition"),
    ],
)
def test_bad_download_input_is_a_400(client, topic, args, message):
    answer = client.get(URL + "/download", query_string=args)
    assert answer.status_code == 400
    assert message in text(answer)


# --- produce -----------------------------------------------------------------------------------


def test_produce_writes_the_message_and_shows_where(client, topic, cluster):
    answer = client.post(
        URL + "/produce",
        data={
            "key": "pk",
            "value": "hello",
            "headers": "unit=C\n\nsource = web form",
            "partition": "1",
        },
        headers={**HTMX, "X-CSRFToken": client.csrf},
    )
    assert answer.status_code == 200
    body = text(answer)
    assert "Written to partition 1 at offset 2" in body
    assert body.startswith('<section aria-label="Produce a message"')
    last = [r for r in consume_all(cluster, TOPIC) if r.partition == 1][-1]
    assert (last.offset, last.key, last.value) == (2, b"pk", b"hello")
    assert list(last.headers) == [("unit", b"C"), ("source", b"web form")]


def test_produce_stores_textarea_line_breaks_as_lf(client, topic, cluster):
    answer = client.post(
        URL + "/produce",
        data={"value": '{\r\n  "a": 1\r\n}', "partition": "1"},
        headers={**HTMX, "X-CSRFToken": client.csrf},
    )
    assert "Written to partition 1" in text(answer)
    last = [r for r in consume_all(cluster, TOPIC) if r.partition == 1][-1]
    assert last.value == b'{\n  "a": 1\n}'


def test_produce_a_tombstone_without_key_by_plain_post(client, topic, cluster):
    answer = client.post(
        URL + "/produce",
        data={"value": "ignored", "null_value": "1", "partition": "0", "csrf_token": client.csrf},
    )
    assert answer.status_code == 200
    assert "Written to partition 0 at offset 30" in text(answer)
    assert "<html" in text(answer)
    last = [r for r in consume_all(cluster, TOPIC) if r.partition == 0][-1]
    assert (last.offset, last.key, last.value) == (30, None, None)


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"partition": "7"}, "partition", "leave it empty or give 0 to 1"),
        ({"partition": "one"}, "partition", "is not a partition"),
        ({"headers": "good=1\nno equals here"}, "headers", "line 2: header &#39;no equals"),
        ({"headers": "=empty name"}, "headers", "has an empty name: write name=value"),
        ({"headers": "unit: C"}, "headers", "is not name=value: write it as &#39;unit=C&#39;"),
    ],
)
def test_produce_bad_input_is_shown_by_its_field_and_writes_nothing(
    client, topic, cluster, data, field, message
):
    before = len(consume_all(cluster, TOPIC))
    answer = client.post(
        URL + "/produce", data={"value": "x", **data}, headers={**HTMX, "X-CSRFToken": client.csrf}
    )
    assert answer.status_code == 200
    body = text(answer)
    assert f'aria-describedby="produce-{field}-error"' in body
    assert message in body
    assert len(consume_all(cluster, TOPIC)) == before
    plain = client.post(URL + "/produce", data={"value": "x", **data, "csrf_token": client.csrf})
    assert plain.status_code == 400


def test_produce_too_large_is_shown_at_the_value(client, cluster):
    cluster.create_stream("/apps/small", max_message_bytes=10)
    cluster.create_topic("/apps/small:t", partitions=1)
    answer = client.post(
        "/topics/apps/small:t/produce",
        data={"value": "x" * 50},
        headers={**HTMX, "X-CSRFToken": client.csrf},
    )
    body = text(answer)
    assert 'aria-describedby="produce-value-error"' in body
    assert "larger than max_message_bytes=10" in body


def test_produce_without_csrf_token_is_refused(client, topic, cluster):
    before = len(consume_all(cluster, TOPIC))
    answer = client.post(URL + "/produce", data={"value": "x"})
    assert answer.status_code == 400
    assert len(consume_all(cluster, TOPIC)) == before


# --- permissions -------------------------------------------------------------------------------


def test_a_user_without_consume_perm_sees_the_partitions_and_a_403(user_client, topic):
    answer = user_client.get(URL)
    assert answer.status_code == 403
    body = text(answer)
    assert 'role="tablist"' in body
    assert "Access denied" in body and "consume_perm" in body
    assert offsets(answer) == []
    assert "v29" not in body
    partial = user_client.get(URL, headers=HTMX)
    assert partial.status_code == 200 and "Access denied" in text(partial)
    partitions = user_client.get(URL, query_string={"tab": "partitions"})
    assert partitions.status_code == 200 and 'aria-label="Partitions"' in text(partitions)
    download = user_client.get(URL + "/download", query_string={"file": "jsonl"})
    assert download.status_code == 403
    assert "v1" not in text(download)
    tail = user_client.get(URL + "/tail", query_string={"after": after({0: 0})}, headers=HTMX)
    assert "Live tail stopped" in text(tail) and "consume_perm" in text(tail)
    more = user_client.get(URL + "/more", query_string={"cursor": after({0: 5})}, headers=HTMX)
    assert "Access denied" in text(more)


def test_a_user_without_produce_perm_gets_the_error_inline(user_client, topic, cluster):
    before = len(consume_all(cluster, TOPIC))
    answer = user_client.post(
        URL + "/produce", data={"value": "x"}, headers={**HTMX, "X-CSRFToken": user_client.csrf}
    )
    assert answer.status_code == 200
    assert "AccessDenied" in text(answer) and "produce_perm" in text(answer)
    plain = user_client.post(URL + "/produce", data={"value": "x", "csrf_token": user_client.csrf})
    assert plain.status_code == 403
    assert len(consume_all(cluster, TOPIC)) == before


def test_a_user_granted_consume_perm_reads(user_client, topic, cluster):
    cluster.edit_stream("/apps/t", consume_perm="g:analysts")
    answer = user_client.get(URL, query_string={"partition": "0", "limit": "3"})
    assert answer.status_code == 200
    assert offsets(answer) == [(0, 29), (0, 28), (0, 27)]


def test_deeply_nested_json_is_shown_as_text(client, cluster, topic):
    producer = Producer(cluster, acks=1)
    producer.send(TOPIC, value=b"[" * 5000 + b"]" * 5000, partition=1)
    producer.flush()
    producer.close()
    answer = client.get(URL, query_string={"partition": "1", "format": "json", "limit": "1"})
    assert answer.status_code == 200
    assert "(not JSON)" in text(answer)
