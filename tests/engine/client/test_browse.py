"""The browse service (engine.client.browse): seek, filter, pages with a scan budget and a
cursor that never skips or repeats a message, exports and THE JSON shape of a record, on a
real cluster."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import threading
import time

import pytest

from engine import Cluster, Principal, Producer, errors
from engine.client import browse
from engine.client.browse import (
    BACKWARD,
    FORWARD,
    NEWEST,
    OLDEST,
    BadQuery,
    Browser,
    Budget,
    Filter,
    Query,
    Seek,
)
from engine.records import ConsumerRecord
from tests.timing import scaled

TOPIC = "/b/s:t"
T0 = 1_700_000_000_000


@pytest.fixture
def topic(cluster):
    """/b/s:t with 3 partitions: 40 messages, message i in partition i % 3 at T0 + i s,
    key k<i>, value v<i>, header seq=<i>; every 10th value says "hit"."""
    cluster.create_stream("/b/s", ttl=0)
    cluster.create_topic(TOPIC, partitions=3)
    producer = Producer(cluster, acks=1)
    for i in range(40):
        value = f"v{i} hit" if i % 10 == 0 else f"v{i}"
        producer.send(
            TOPIC,
            key=f"k{i}".encode(),
            value=value.encode(),
            partition=i % 3,
            headers=[("seq", str(i).encode())],
            timestamp_ms=T0 + i * 1000,
        )
    producer.flush()
    producer.close()
    return TOPIC


def numbers(records: list[ConsumerRecord]) -> list[int]:
    return [int(r.key[1:]) for r in records]


def read_all(cluster, query: Query) -> tuple[list[ConsumerRecord], int]:
    """Every page of `query`, following its cursor; (records, pages)."""
    got: list[ConsumerRecord] = []
    pages = 0
    with Browser(cluster, query.topic, query.partitions) as browser:
        while True:
            page = browser.page(query)
            pages += 1
            got.extend(page.records)
            if not page.more:
                return got, pages
            assert pages < 1000
            query = Query(
                query.topic,
                query.partitions,
                query.seek,
                query.direction,
                query.filter,
                query.limit,
                query.budget,
                cursor=page.cursor,
            )


def test_forward_pages_merge_partitions_by_time_and_see_every_message_once(cluster, topic):
    got, pages = read_all(cluster, Query(topic, seek=OLDEST, limit=7))
    assert numbers(got) == list(range(40))  # by timestamp across the three partitions
    assert pages == 6


def test_newest_pages_go_back_in_time_without_gaps(cluster, topic):
    page = browse.browse(cluster, Query(topic, limit=5))
    assert not page.forward and numbers(page.records) == [39, 38, 37, 36, 35]
    got, _ = read_all(cluster, Query(topic, limit=6))
    assert numbers(got) == list(range(39, -1, -1))


def test_seek_by_offset_time_and_backward_from_a_position(cluster, topic):
    page = browse.browse(cluster, Query(topic, (0,), Seek.offset(5), limit=3))
    assert numbers(page.records) == [15, 18, 21]  # offsets 5, 6, 7 of partition 0
    page = browse.browse(cluster, Query(topic, seek=Seek.time(T0 + 20_500), limit=4))
    assert numbers(page.records) == [21, 22, 23, 24]
    # backward from a position: what lies before it, newest first
    page = browse.browse(cluster, Query(topic, seek=Seek.time(T0 + 20_500), direction=BACKWARD))
    assert numbers(page.records) == list(range(20, -1, -1))
    assert browse.browse(cluster, Query(topic, seek=OLDEST, direction=BACKWARD)).records == []


def test_a_seek_outside_the_offsets_says_so(cluster, topic):
    page = browse.browse(cluster, Query(topic, (1,), Seek.offset(99)))
    assert page.records == [] and page.notes == (
        "Offset 99 is past the end of partition 1 (its log end offset is 13): nothing there yet.",
    )


def test_filters_key_value_header_text_and_case(cluster, topic):
    def found(f: Filter) -> list[int]:
        return sorted(numbers(browse.browse(cluster, Query(topic, filter=f, limit=50)).records))

    assert found(Filter(value="hit")) == [0, 10, 20, 30]
    assert found(Filter(key="k3")) == [3] + list(range(30, 40))
    assert found(Filter(header="seq=7")) == [7]
    assert found(Filter(header="seq: 7")) == [7]  # as a page shows a header
    assert found(Filter(value="HIT")) == []
    assert found(Filter(value="HIT", ignore_case=True)) == [0, 10, 20, 30]
    assert found(Filter(text="SEQ", ignore_case=True)) == list(range(40))  # a header's name
    assert found(Filter(text="k12")) == [12]
    assert found(Filter(key="k1", value="hit")) == [10]


def test_a_filter_scan_stops_at_its_budget_and_continues_without_skip_or_repeat(cluster, topic):
    tiny = Budget(messages=4, seconds=60)
    page = browse.browse(
        cluster, Query(topic, seek=OLDEST, filter=Filter(value="hit"), budget=tiny)
    )
    assert page.budget_exhausted and page.more and page.scanned < 40
    # Each page merges by time what it found; pages cut short by the budget follow the
    # partitions' scan, so the promise is every match exactly once, in some page.
    got, pages = read_all(
        cluster, Query(topic, seek=OLDEST, filter=Filter(value="hit"), budget=tiny)
    )
    assert sorted(numbers(got)) == [0, 10, 20, 30] and len(got) == 4 and pages >= 3
    got, _ = read_all(cluster, Query(topic, filter=Filter(value="hit"), budget=tiny, limit=1))
    assert sorted(numbers(got)) == [0, 10, 20, 30] and len(got) == 4


def test_a_scan_is_bounded_in_time(cluster, topic):
    page = browse.browse(
        cluster, Query(topic, seek=OLDEST, filter=Filter(value="absent"), budget=Budget(seconds=0))
    )
    assert page.budget_exhausted and page.more and page.records == []


def test_cursors_are_url_safe_and_a_forged_one_is_a_clear_error(cluster, topic):
    page = browse.browse(cluster, Query(topic, seek=OLDEST, limit=5))
    assert re.fullmatch(r"[A-Za-z0-9_-]+", page.cursor)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", page.tail)

    def refused(cursor: str, **kw) -> str:
        query = Query(kw.pop("topic", topic), seek=OLDEST, cursor=cursor, **kw)
        with pytest.raises(BadQuery) as caught:
            browse.browse(cluster, query)
        assert set(caught.value.fields) == {"cursor"}
        return caught.value.fields["cursor"]

    assert "not a cursor" in refused("0:12,1:40")
    assert "not a cursor" in refused("!!!")
    assert "not a cursor" in refused("x" * 200_000)
    forged = base64.urlsafe_b64encode(b'{"v":1,"d":"f","t":"00000000","p":{"0":1}}').decode()
    assert "another topic" in refused(forged)
    assert "forward (oldest first)" in refused(page.cursor, direction=BACKWARD)
    assert "partition 1 is not one" in refused(page.cursor, partitions=(0,))
    body = json.loads(base64.urlsafe_b64decode(page.cursor + "=="))
    for bad in ({"0": -1}, {"0": "1"}, {"x": 1}, {"0": True}, [1]):
        raw = json.dumps(body | {"p": bad}).encode()
        assert refused(base64.urlsafe_b64encode(raw).decode())
    # a forged position past the end is clamped, not an error
    raw = json.dumps(body | {"p": {"0": 10**12}}).encode()
    again = browse.browse(
        cluster, Query(topic, seek=OLDEST, cursor=base64.urlsafe_b64encode(raw).decode())
    )
    assert 0 not in {r.partition for r in again.records}


def test_a_tail_cursor_finds_what_arrives_later(cluster, topic):
    page = browse.browse(cluster, Query(topic, limit=3))
    producer = Producer(cluster, acks=1)
    producer.send(TOPIC, key=b"k40", value=b"new", partition=2, timestamp_ms=T0 + 40_000)
    producer.flush()
    producer.close()
    later = browse.browse(cluster, Query(topic, direction=FORWARD, cursor=page.tail))
    assert numbers(later.records) == [40] and not later.more


def test_follow_hands_over_new_records_until_cancelled(cluster, topic):
    page = browse.browse(cluster, Query(topic, limit=1))
    seen: list[ConsumerRecord] = []
    arrived = threading.Event()

    def on_records(records, marks):
        assert not marks.aborted and not marks.markers  # no transaction wrote them
        seen.extend(records)
        arrived.set()

    worker = threading.Thread(
        target=browse.follow,
        args=(cluster, topic, page.tail),
        kwargs={
            "filter": Filter(value="new"),
            "on_records": on_records,
            "cancelled": arrived.is_set,
            "poll_ms": 20,
        },
    )
    worker.start()
    producer = Producer(cluster, acks=1)
    producer.send(TOPIC, key=b"k40", value=b"old", partition=0)
    producer.send(TOPIC, key=b"k41", value=b"new", partition=1)
    producer.flush()
    producer.close()
    worker.join(timeout=scaled(10))
    assert not worker.is_alive() and numbers(seen) == [41]


def test_follow_hands_over_a_marker_a_poll_passed_with_the_next_record(cluster):
    """A transaction commits after its last record was handed over, and a poll finds only
    its marker (and moves past it): the marker comes with the next record, before it."""
    cluster.create_stream("/b/x", ttl=0)
    cluster.create_topic("/b/x:t", partitions=1)
    txn = Producer(cluster, transactional_id="tx")
    txn.init_transactions()
    txn.begin_transaction()
    txn.send("/b/x:t", b"in the transaction", partition=0).get(timeout=scaled(10))
    page = browse.browse(cluster, Query("/b/x:t", seek=OLDEST, direction=FORWARD))
    assert [r.value for r in page.records] == [b"in the transaction"]  # on screen
    polls = 0
    arrived: list[tuple[list[ConsumerRecord], browse.TransactionMarks]] = []

    def cancelled() -> bool:  # asked at the start of every poll, and after its page
        nonlocal polls
        polls += 1
        return bool(arrived)

    worker = threading.Thread(
        target=browse.follow,
        args=(cluster, "/b/x:t", page.tail),
        kwargs={
            "on_records": lambda r, m: arrived.append((r, m)),
            "cancelled": cancelled,
            "poll_ms": 10,
        },
    )
    worker.start()
    txn.commit_transaction()  # the marker at offset 1
    seen = polls
    deadline = time.monotonic() + scaled(10)
    while polls < seen + 4 and time.monotonic() < deadline:
        time.sleep(0.01)  # polls that find the marker alone
    assert polls >= seen + 4 and not arrived
    plain = Producer(cluster, acks=1)
    plain.send("/b/x:t", b"after", partition=0).get(timeout=scaled(10))  # offset 2
    plain.close()
    worker.join(timeout=scaled(10))
    txn.close()
    assert not worker.is_alive()
    [(records, marks)] = arrived
    assert [(r.offset, r.value) for r in records] == [(2, b"after")]
    assert [(m.offset, m.commit) for m in marks.markers] == [(1, True)]


def test_reading_needs_consume_perm(cluster_path, topic):
    with Cluster.open(cluster_path, principal=Principal("mallory")) as other:
        with pytest.raises(errors.AccessDenied):
            browse.browse(other, Query(TOPIC))
        with pytest.raises(errors.AccessDenied):
            browse.export(other, Query(TOPIC), 10)


def test_a_partition_the_topic_lacks_is_a_bad_query(cluster, topic):
    with pytest.raises(BadQuery) as caught:
        browse.browse(cluster, Query(topic, (3,)))
    assert "choose 0 to 2" in caught.value.fields["partition"]


def test_parse_query_names_every_bad_field(cluster, topic):
    info = cluster.topic(topic)
    query = browse.parse_query({"offset": "4", "partition": "1", "key": " k "}, info)
    assert query.seek == Seek.offset(4) and query.partitions == (1,) and query.forward
    assert query.filter == Filter(key=" k ")  # matched as typed
    assert browse.parse_query({}, info, default_start="oldest").seek == OLDEST
    assert browse.parse_query({}, info).seek == NEWEST
    with pytest.raises(BadQuery) as caught:
        browse.parse_query(
            {"partition": "3", "offset": "-1", "time": "soon", "limit": "0", "start": "x"}, info
        )
    assert set(caught.value.fields) == {"partition", "offset", "time", "limit", "start"}
    with pytest.raises(BadQuery):
        browse.parse_query({"direction": "sideways"}, info)


def test_seek_parse_is_the_one_box_grammar():
    assert Seek.parse("") == NEWEST and Seek.parse("latest") == NEWEST
    assert Seek.parse(" earliest ") == OLDEST
    assert Seek.parse("42") == Seek.offset(42)
    assert Seek.parse("2023-11-14T22:13:20") == Seek.time(T0)  # no zone: UTC
    with pytest.raises(errors.InvalidArgument):
        Seek.parse("-3")


def test_record_json_is_one_shape():
    record = ConsumerRecord(
        "/s:t", 2, 7, T0, 1, None, b"\xff\x00", [("unit", b"C"), ("raw", b"\xfe"), ("n", None)]
    )
    assert browse.record_json(record) == {
        "topic": "/s:t",
        "partition": 2,
        "offset": 7,
        "timestamp": T0,
        "timestamp_type": "log_append",
        "time": "2023-11-14T22:13:20.000Z",
        "key": None,
        "key_encoding": None,
        "value": base64.b64encode(b"\xff\x00").decode(),
        "value_encoding": "base64",
        "headers": [
            {"name": "unit", "value": "C", "encoding": "utf-8"},
            {"name": "raw", "value": base64.b64encode(b"\xfe").decode(), "encoding": "base64"},
            {"name": "n", "value": None, "encoding": None},
        ],
    }
    text = browse.record_json(record._replace(key=b"k\xc3\xa9", timestamp_type=0))
    assert (text["key"], text["key_encoding"], text["timestamp_type"]) == ("ké", "utf-8", "create")


def test_export_streams_a_range_as_json_lines_and_safe_csv(cluster, topic):
    query = Query(topic, (0,), Seek.offset(2))
    records = list(browse.export(cluster, query, 100, to_offset=4))
    assert [r.offset for r in records] == [2, 3, 4]
    records = list(browse.export(cluster, query, 100, until_ms=T0 + 12_000))
    assert numbers(records) == [6, 9, 12]
    assert numbers(browse.export(cluster, Query(topic, (0,)), 2)) == [36, 39]  # the newest
    lines = b"".join(browse.jsonl_lines(records)).decode().splitlines()
    assert [json.loads(line) for line in lines] == [browse.record_json(r) for r in records]
    hostile = ConsumerRecord("/s:t", 0, 0, T0, 0, b"=1+1", b"@SUM(A1)", [])
    rows = list(csv.DictReader(io.StringIO(b"".join(browse.csv_lines([hostile])).decode())))
    assert (rows[0]["key"], rows[0]["value"]) == ("'=1+1", "'@SUM(A1)")
    kept = b"".join(browse.csv_lines([hostile], formulas=True)).decode()
    assert list(csv.DictReader(io.StringIO(kept)))[0]["key"] == "=1+1"


def test_pages_seek_back_below_what_the_consumer_read_ahead(cluster):
    cluster.create_stream("/b/r", ttl=0)
    cluster.create_topic("/b/r:t", partitions=1)
    producer = Producer(cluster, acks=1)
    for i in range(100):
        producer.send("/b/r:t", value=b"%d" % i)
        producer.flush()  # a batch per message
    producer.close()
    with Browser(cluster, "/b/r:t") as browser:
        page = browser.page(Query("/b/r:t", seek=Seek.offset(50), limit=5))
        assert [r.offset for r in page.records] == [50, 51, 52, 53, 54]
        page = browser.page(Query("/b/r:t", seek=Seek.offset(10), limit=5))
        assert [r.offset for r in page.records] == [10, 11, 12, 13, 14]
        page = browser.page(Query("/b/r:t", limit=100))
        assert [r.offset for r in page.records] == list(range(99, -1, -1))


def test_a_filtered_export_holds_what_the_filter_selects(cluster, topic, monkeypatch):
    """Matches ("hit": messages 0 and 30 in partition 0, 10 in 1, 20 in 2) are counted
    before the export streams them, wherever they lie."""
    hits = Filter(value="hit")
    with Browser(cluster, topic) as browser:
        forward = Query(topic, filter=hits, seek=Seek.parse("oldest"))
        plan = browser.export_plan(forward, 3)
        assert not plan.partial and plan.scanned > 0
        assert numbers(browser.export(forward, 3, plan=plan)) == [0, 30, 10]
        newest = Query(topic, filter=hits)
        # the last matches of each partition, however far back (not the last offsets),
        # partition by partition up to the count
        assert numbers(browser.export(newest, 1)) == [30]
        assert numbers(browser.export(newest, 2)) == [0, 30]
        assert numbers(browser.export(newest, 4)) == [0, 30, 10, 20]
        # the count stops at its budget, and the plan says so
        monkeypatch.setattr(browse, "SCAN_CHUNK", 2)
        plan = browser.export_plan(forward, 3, budget=browse.Budget(1, 60.0))
        assert plan.partial and plan.scanned == 2
        assert numbers(browser.export(forward, 3, plan=plan)) == [0]
