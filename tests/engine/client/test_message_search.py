"""Message search (engine.client.message_search): JMESPath queries over key, value, headers,
timestamp and offset, run to the end of a range in a thread with progress and cancel, on a
real cluster."""

from __future__ import annotations

import json
import time

import pytest

from engine import Principal, Producer, errors
from engine.client import message_search
from engine.client.browse import BadQuery, Seek
from engine.client.message_search import BadSearch, compile_query
from tests.timing import scaled

TOPIC = "/q/s:t"
T0 = 1_700_000_000_000


@pytest.fixture
def topic(cluster):
    """/q/s:t with 2 partitions and 60 messages: message i in partition i % 2 at T0 + i s,
    key k<i>, a JSON value {"user": {"id": i}, "name": ..., "tags": [...]}, header
    unit=C for even i (F otherwise); message 7 is plain text, message 8 has no value."""
    cluster.create_stream("/q/s", ttl=0)
    cluster.create_topic(TOPIC, partitions=2)
    producer = Producer(cluster, acks=1)
    for i in range(60):
        if i == 7:
            value = b"plain text, not json"
        elif i == 8:
            value = None
        else:
            doc = {"user": {"id": i}, "name": f"alpha{i}beta", "tags": ["red" if i % 3 else "blue"]}
            value = json.dumps(doc).encode()
        producer.send(
            TOPIC,
            key=f"k{i}".encode(),
            value=value,
            partition=i % 2,
            headers=[("unit", b"C" if i % 2 == 0 else b"F")],
            timestamp_ms=T0 + i * 1000,
        )
    producer.flush()
    producer.close()
    return TOPIC


def run(cluster, query: str, **kwargs) -> tuple[list[int], message_search.Progress]:
    job = message_search.search(cluster, TOPIC, query, **kwargs)
    assert job.wait(30)
    return sorted(int(r.key[1:]) for r in job.results()), job.progress


def test_json_path_equality_with_a_bare_number(cluster, topic):
    found, progress = run(cluster, "value.user.id == 42")
    assert found == [42]
    assert progress.state == "done"
    assert (progress.scanned, progress.covered, progress.total) == (60, 60, 60)
    assert progress.matches == 1 and progress.percent == 100


def test_header_with_a_double_quoted_string(cluster, topic):
    found, _ = run(cluster, 'headers.unit == "C" && value.user.id < `10`')
    assert found == [0, 2, 4, 6]


def test_key_offset_partition_and_timestamp(cluster, topic):
    assert run(cluster, "key == 'k5'")[0] == [5]
    # offsets count within a partition: offset 3 of partition 1 is message 7
    assert run(cluster, "partition == 1 && offset == 3")[0] == [7]
    assert run(
        cluster, "timestamp >= ms('2023-11-14T22:14:15Z') && timestamp < ms('2023-11-14T22:14:18Z')"
    )[0] == [
        (1_700_000_055_000 - T0) // 1000,
        (1_700_000_056_000 - T0) // 1000,
        (1_700_000_057_000 - T0) // 1000,
    ]


def test_or_not_contains_and_comparisons(cluster, topic):
    assert run(cluster, "value.user.id > 55 || key == 'k1'")[0] == [1, 56, 57, 58, 59]
    blue = run(cluster, 'contains(value.tags, "blue") && value.user.id < 10')[0]
    assert blue == [0, 3, 6, 9]
    assert run(cluster, "!(value.user.id >= 2) && value.user")[0] == [0, 1]


def test_text_values_and_null(cluster, topic):
    assert run(cluster, "contains(value, 'plain')")[0] == [7]
    assert run(cluster, "value == null")[0] == [8]


def test_regex_with_re2(cluster, topic):
    assert run(cluster, "re2_match(value.name, '^alpha1[0-2]beta$')")[0] == [10, 11, 12]
    # a number subject is matched as its text
    assert run(cluster, "re2_match(value.user.id, '^5[89]$')")[0] == [58, 59]


def test_catastrophic_pattern_runs_in_linear_time(cluster):
    """(a+)+$ against a long run of a's ending in b backtracks forever in Python's re;
    RE2 answers at once, so the search ends."""
    cluster.create_stream("/q/s", ttl=0)
    cluster.create_topic(TOPIC, partitions=1)
    with Producer(cluster, acks=1) as producer:
        for _ in range(20):
            producer.send(TOPIC, key=b"k0", value=json.dumps({"name": "a" * 50_000 + "b"}).encode())
    found, progress = run(cluster, "re2_match(value.name, '(a+)+$')")
    assert progress.state == "done" and progress.scanned == 20 and found == []
    found, progress = run(cluster, "re2_match(value.name, '(a+)+b$')")
    assert progress.matches == 20


@pytest.mark.parametrize(
    ("query", "says", "position"),
    [
        ("value.a ==", "ends too early", 10),
        ("value.a === 1", "column 11", 10),
        ("value.(a", "column 7", 6),
        ("", "write a query", None),
    ],
)
def test_a_query_that_does_not_parse_says_where(query, says, position):
    with pytest.raises(BadSearch) as caught:
        compile_query(query)
    assert says in caught.value.fields["query"]
    assert caught.value.position == position


def test_unknown_function_arity_and_bad_pattern_are_refused_before_searching(cluster, topic):
    for query, says in [
        ("nosuch(key)", "no function nosuch()"),
        ("re2_match(key)", "takes 2 argument"),
        ("re2_match(key, 'x(')", "not an RE2 pattern"),
    ]:
        with pytest.raises(BadSearch, match=r".*") as caught:
            message_search.search(cluster, TOPIC, query)
        assert says in caught.value.fields["query"]


def test_a_type_error_on_some_messages_is_counted_not_fatal(cluster, topic):
    # starts_with needs a string: on the text value it is fine, on the others not
    found, progress = run(cluster, "starts_with(value, 'plain')")
    assert found == [7]
    assert progress.state == "done"
    assert progress.errors == 59  # 58 JSON objects and one null
    assert "starts_with" in progress.first_error


def test_range_bounds_and_partitions(cluster, topic):
    found, progress = run(
        cluster, "value.user.id >= `0`", start=Seek.offset(5), end=Seek.offset(8), partitions=[0]
    )
    # partition 0 holds the even messages: offsets 5, 6, 7 are messages 10, 12, 14
    assert found == [10, 12, 14]
    assert (progress.total, progress.scanned) == (3, 3)
    found, _ = run(cluster, "key", start=Seek.time(T0 + 50_000), end=Seek.time(T0 + 53_000))
    assert found == [50, 51, 52]
    with pytest.raises(BadQuery):
        message_search.search(cluster, TOPIC, "key", partitions=[5])


def test_matches_kept_are_bounded_and_more_are_counted(cluster, topic):
    found, progress = run(cluster, "key", max_matches=5)
    assert len(found) == 5
    assert progress.matches == 60 and progress.kept == 5 and progress.more_matched
    assert "the first 5 kept" in progress.describe()


def test_progress_counts_as_it_goes_and_cancel_stops(cluster, topic, monkeypatch):
    monkeypatch.setattr(message_search, "CHUNK", 10)
    # 10 messages a second: the search cannot reach the end before it is cancelled
    job = message_search.search(cluster, TOPIC, "value.user.id >= `0`", max_rate=10)
    deadline = time.monotonic() + scaled(30)
    while job.progress.scanned < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = job.progress
    assert seen.running and 20 <= seen.scanned < 60
    assert seen.matches == len(job.results()) > 0
    job.cancel()
    assert job.wait(10)
    progress = job.progress
    assert progress.state == "cancelled"
    assert progress.scanned < 60 and "Cancelled" in progress.describe()


def test_scan_limit_stops_the_search(cluster, topic, monkeypatch):
    monkeypatch.setattr(message_search, "CHUNK", 10)
    _, progress = run(cluster, "key", max_scanned=20)
    assert progress.state == "stopped" and progress.scanned == 20


def test_permission_is_checked_before_the_search_starts(cluster, topic):
    stranger = Principal("mallory")
    with pytest.raises(errors.AccessDenied):
        message_search.search(cluster, TOPIC, "key", principal=stranger)


def test_wire_format_values_are_searched_decoded(cluster):
    cluster.create_stream("/q/s", ttl=0)
    cluster.create_topic(TOPIC, partitions=1)
    schema = json.dumps(
        {"type": "record", "name": "Reading", "fields": [{"name": "unit", "type": "string"}]}
    )
    registered = cluster.schemas.register("/q/s:t-value", schema, "AVRO")
    import io

    import fastavro

    parsed = fastavro.parse_schema(json.loads(schema))
    with Producer(cluster, acks=1) as producer:
        for unit in ("C", "F"):
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, {"unit": unit})
            producer.send(
                TOPIC,
                key=unit.encode(),
                value=b"\x00" + registered.id.to_bytes(4, "big") + buf.getvalue(),
            )
    found = message_search.search(cluster, TOPIC, "value.unit == 'F'")
    assert found.wait(30)
    assert [r.key for r in found.results()] == [b"F"]


def test_jobs_are_bounded_per_owner(cluster, topic):
    jobs = message_search.SearchJobs(per_owner=2)
    first = jobs.start("ann", cluster, TOPIC, "key", max_rate=1)
    second = jobs.start("ann", cluster, TOPIC, "key", max_rate=1)
    third = jobs.start("ann", cluster, TOPIC, "key", max_rate=1)
    assert first.wait(10) and first.progress.state == "cancelled"
    assert jobs.get("ann", first.id) is None
    assert jobs.get("ann", third.id) is third and jobs.get("bob", third.id) is None
    jobs.close()
    assert second.wait(10) and third.wait(10)


@pytest.mark.parametrize(
    ("query", "document", "expected"),
    [
        ("value.t == 1.5", {"value": {"t": 1.5}}, True),
        ("value.t > -2.25", {"value": {"t": -2}}, True),
        ("value.items[1] == 4", {"value": {"items": [3, 4]}}, True),  # an index stays one
        (
            "value.items[?p > 10] | length(@) == `1`",
            {"value": {"items": [{"p": 11}, {"p": 2}]}},
            True,
        ),
        ('headers.x == "a\\\\b"', {"headers": {"x": "a\\b"}}, True),
        ('headers.x == "it\'s `q`"', {"headers": {"x": "it's `q`"}}, True),
        ('headers."content-type" == "json"', {"headers": {"content-type": "json"}}, True),
        ('contains(value.tags, "red")', {"value": {"tags": ["red"]}}, True),
        ("value.user", {"value": {"user": {}}}, False),  # {} is false the JMESPath way
        ("value.n", {"value": {"n": 0}}, True),  # 0 is true
    ],
)
def test_numbers_and_strings_as_people_write_them(query, document, expected):
    assert compile_query(query).matches(document) is expected
