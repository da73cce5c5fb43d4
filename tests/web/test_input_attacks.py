"""Bad input against a live console (issue 12, findings 3 and 4, and the input limits), over
a real socket: a replication token that stores unusable policies or bytes, a stream stored
with bad policies by an older engine, and values past every bound from a plain user
(`alice`), through the forms and the JSON API. Each is a 400 that changes nothing, never a
500; what an older catalog holds is skipped by maintenance, shown, and can be fixed."""

from __future__ import annotations

import base64
import uuid

import pytest

from engine import Producer
from engine.ops.maintenance import Maintenance
from engine.storage import batch as codec
from tests.old_catalog import write_policies
from tests.timing import scaled
from web import state

TS = 1_700_000_000_000
BIG = "9" * 5000
PAST_INT64 = str(2**64)


@pytest.fixture
def shared(public_s):
    """`public_s` (/s:t with a message, group `g` committed on it), the group's ACEs public
    too; alice's API client."""
    live_web = public_s
    cluster = live_web.cluster
    perms = ("join_perm", "commit_perm", "describe_perm", "reset_perm", "delete_perm")
    cluster.set_group_permissions("g", **dict.fromkeys(perms, "p"))
    return live_web.api(cluster.create_api_token("alice"))


def messages_of(api) -> list[tuple[int, str]]:
    answer = api.get("/api/v1/topics/s:t/messages")
    assert answer.status_code == 200, answer.text[:300]
    return [(m["offset"], m["value"]) for m in answer.json()["messages"]]


# --- finding 3: a replication token creates a stream nobody can fix -------------------------


def test_replication_create_stream_with_bad_policies_is_a_400(live_web):
    cluster = live_web.cluster
    api = live_web.api(cluster.create_replication_token("/r"))
    answer = api.post(
        "/api/v1/replication/create_stream",
        json={
            "stream": "/r",
            "policies": {"ttl": "forever", "consume_perm": "(((("},
            "creator": "mallory",
        },
    )
    assert answer.status_code == 400, answer.text[:300]
    assert answer.json()["error"] == "InvalidPolicy"
    assert cluster.streams() == []
    answer = api.post(
        "/api/v1/replication/create_stream",
        json={"stream": "/r", "policies": {"ttl": 60}, "creator": "x" * 100_000},
    )
    assert answer.status_code == 400
    assert cluster.streams() == []


# --- finding 4: replicated bytes are trusted ------------------------------------------------


def _item(base: int, payload: bytes, **row: object) -> list:
    fields = {"count": 1, "first_ts": TS, "max_ts": TS, "ts_type": 0, "origin": str(uuid.uuid4())}
    fields.update(row)
    return [
        base,
        base,
        fields["count"],
        fields["first_ts"],
        fields["max_ts"],
        fields["ts_type"],
        fields["origin"],
        base64.b64encode(payload).decode(),
        TS,
    ]


@pytest.mark.parametrize(
    "item",
    [
        _item(1, b"garbage"),  # not a batch: every later read of the partition would fail
        _item(2**63 - 2, codec.encode([b"x"], [TS])),  # every later produce would fail
        _item(1, codec.encode([b"x"], [TS]), count=2),
        _item(1, codec.encode([b"x"], [TS]), first_ts=TS + 1),
        _item(1, codec.encode([b"x"], [TS]), ts_type=5),
        _item(1, codec.encode([b"x"], [TS]), origin="not-a-uuid"),
    ],
    ids=["not-a-batch", "offset-2^63-2", "count", "first-after-max", "ts-type", "origin"],
)
def test_replication_apply_of_bad_bytes_is_a_400_and_changes_nothing(live_web, shared, item):
    cluster = live_web.cluster
    api = live_web.api(cluster.create_replication_token("/s"))
    answer = api.post(
        "/api/v1/replication/apply",
        json={"stream": "/s", "topic": "t", "partition": 0, "batches": [item]},
    )
    assert answer.status_code == 400, answer.text[:300]
    assert "refused" in answer.json()["message"]
    assert cluster.topic("/s:t").partitions[0].log_end_offset == 1
    assert messages_of(shared) == [(0, "first")]  # the partition still reads
    produced = shared.post("/api/v1/topics/s:t/messages", json={"value": "later"})
    assert produced.status_code == 201 and produced.json()["offset"] == 1  # and takes writes
    assert messages_of(shared) == [(0, "first"), (1, "later")]


def test_replication_apply_to_a_partition_the_topic_lacks_is_a_400(live_web, shared):
    cluster = live_web.cluster
    api = live_web.api(cluster.create_replication_token("/s"))
    good = _item(0, codec.encode([b"x"], [TS]))
    for partition in (1, 2**64):
        answer = api.post(
            "/api/v1/replication/apply",
            json={"stream": "/s", "topic": "t", "partition": partition, "batches": [good]},
        )
        assert answer.status_code == 400, answer.text[:300]
    assert [p.partition for p in cluster.topic("/s:t").partitions] == [0]


# --- a stream stored with bad policies (a catalog written before the fix) -------------------


def test_a_bad_stored_stream_is_skipped_shown_and_can_be_fixed(live_web):
    cluster = live_web.cluster
    for path in ("/bad", "/good"):
        cluster.create_stream(path, ttl=1)
        cluster.create_topic(f"{path}:t", partitions=1)
        producer = Producer(cluster)
        producer.send(f"{path}:t", b"old", timestamp_ms=1000).get(scaled(10))
        producer.close()
    write_policies(cluster, "/bad", ttl="forever", consume_perm="((((", admin_perm="u:alice |")

    # One pass: the good stream's expired message is removed, the bad stream is named.
    report = cluster.enforce_retention()
    assert report.messages_freed == 1 and list(report.by_topic) == ["/good:t"]
    assert list(report.skipped_streams) == ["/bad"]
    assert cluster.topic("/good:t").partitions[0].log_start_offset == 1

    # The console's maintenance status shows it.
    worker = Maintenance(cluster)
    state(live_web.app).workers.append(worker)
    worker.run_once()
    admin = live_web.browser("admin")
    overview = admin.get("/")
    assert overview.status_code == 200
    assert 'data-testid="maintenance-skipped"' in overview.text
    assert "<code>/bad</code>" in overview.text and "forever" in overview.text
    page = admin.get("/streams/bad")
    assert page.status_code == 200 and 'data-testid="stored-problem"' in page.text

    # The form sends every field; alice is named by the unreadable admin_perm, but an ACE
    # that does not parse lets no plain user through. An administrator fixes it.
    stored = cluster.stream("/bad").policies
    form = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in stored.items()}
    form.update(ttl="60", consume_perm="p", admin_perm="u:alice")
    alice = live_web.browser("alice")
    refused = alice.post_form("/streams/bad/~/policies", form)
    assert refused.status_code == 403 and "not a valid ACE" in refused.text
    saved = admin.post_form("/streams/bad/~/policies", form)
    assert saved.status_code == 303, saved.text[:500]
    fixed = cluster.stream("/bad").policies
    assert (fixed["ttl"], fixed["consume_perm"], fixed["admin_perm"]) == (60, "p", "u:alice")
    assert cluster.enforce_retention().skipped_streams == {}
    # ... and then it can be deleted (by alice now, whom the fixed ACE names).
    assert alice.post_form("/streams/bad/~/delete").status_code == 303
    assert [s.path for s in cluster.streams()] == ["/good"]


# --- limits: a plain user through the forms and the API -------------------------------------


def test_a_huge_stream_path_is_a_400(live_web, shared):
    answer = shared.post("/api/v1/streams", json={"path": "/" + "a" * 5_000_000})
    assert answer.status_code == 400 and "at most 1,024" in answer.json()["message"]
    alice = live_web.browser("alice")
    answer = alice.post_form("/streams", {"path": "/" + "a" * 100_000})
    assert answer.status_code == 400 and "at most 1,024" in answer.text
    assert [s.path for s in live_web.cluster.streams()] == ["/s"]
    assert len(alice.get("/streams").content) < 200_000


def test_a_5000_digit_ttl_is_a_400(live_web, shared):
    answer = shared.post("/api/v1/streams", json={"path": "/x", "policies": {"ttl": BIG}})
    assert answer.status_code == 400 and answer.json()["error"] == "InvalidPolicy"
    answer = shared.patch("/api/v1/streams/s", json={"policies": {"ttl": BIG}})
    assert answer.status_code == 400 and answer.json()["error"] == "InvalidPolicy"
    alice = live_web.browser("alice")
    answer = alice.post_form("/streams", {"path": "/x", "ttl": BIG})
    assert answer.status_code == 400 and "5,000 digits" in answer.text
    answer = alice.post_form("/streams/s/~/policies", {"ttl": BIG})
    assert answer.status_code == 400 and "5,000 digits" in answer.text
    assert [s.path for s in live_web.cluster.streams()] == ["/s"]
    assert live_web.cluster.stream("/s").policies["ttl"] == 0


@pytest.mark.parametrize(
    "url",
    [
        f"/api/v1/topics/s:t/messages?offset={PAST_INT64}",
        f"/api/v1/topics/s:t/messages?time={PAST_INT64}",
        f"/api/v1/topics/s:t/messages?time={2**63 - 1}",
        "/api/v1/topics/s:t/messages?time=9999-12-31T23:59:59-05:00",
        f"/api/v1/streams?offset={PAST_INT64}",
        f"/api/v1/streams/s/topics?offset={PAST_INT64}",
    ],
)
def test_api_offsets_and_times_past_their_range_are_a_400(shared, url):
    answer = shared.get(url)
    assert answer.status_code == 400, answer.text[:300]
    assert answer.json()["error"] == "InvalidArgument"


@pytest.mark.parametrize("to", [2**64, PAST_INT64, BIG])
def test_api_reset_to_an_offset_or_time_past_int64_is_a_400(live_web, shared, to):
    answer = shared.post("/api/v1/groups/g/reset", json={"topic": "/s:t", "to": to})
    assert answer.status_code == 400, answer.text[:300]
    assert live_web.cluster.group("g").partitions[0].committed == 1


@pytest.mark.parametrize(
    "url",
    [
        f"/topics/s:t?start=time&time={2**63 - 1}",
        "/topics/s:t?start=time&time=9999-12-31T23:00:00-05:00",
        f"/topics/s:t/download?start=oldest&until={2**63 - 1}",
    ],
)
def test_web_offsets_and_times_past_their_range_are_a_400(live_web, shared, url):
    answer = live_web.browser("alice").get(url)
    assert answer.status_code == 400, answer.text[:300]


@pytest.mark.parametrize("offset", [PAST_INT64, BIG])
def test_web_reset_to_an_offset_past_int64_is_a_400(live_web, shared, offset):
    alice = live_web.browser("alice")
    answer = alice.post_form("/groups/g", {"topic": "/s:t", "to": "offset", "offset": offset})
    assert answer.status_code == 400, answer.text[:300]
    assert "An offset is a whole number" in answer.text
    assert live_web.cluster.group("g").partitions[0].committed == 1


def test_a_policy_named_path_is_a_400(live_web, shared):
    answer = shared.post("/api/v1/streams", json={"path": "/x", "policies": {"path": "/y"}})
    assert answer.status_code == 400 and "unknown policy 'path'" in answer.json()["message"]
    answer = shared.patch("/api/v1/streams/s", json={"policies": {"path": "/y", "ttl": 5}})
    assert answer.status_code == 400 and "unknown policy 'path'" in answer.json()["message"]
    # The policies form reads the policies it shows: a `path` field is no policy there.
    alice = live_web.browser("alice")
    assert alice.post_form("/streams/s/~/policies", {"path": "/y"}).status_code == 303
    assert [s.path for s in live_web.cluster.streams()] == ["/s"]
    assert live_web.cluster.stream("/s").policies["ttl"] == 0


def test_100000_headers_are_a_400(live_web, shared):
    headers = [{"key": "h", "value": ""}] * 100_000
    answer = shared.post("/api/v1/topics/s:t/messages", json={"value": "v", "headers": headers})
    assert answer.status_code == 400, answer.text[:300]
    assert "at most 1,000 headers" in answer.json()["message"]
    alice = live_web.browser("alice")
    answer = alice.post_form("/topics/s:t/produce", {"value": "v", "headers": "h=v\n" * 100_000})
    assert answer.status_code == 400 and "at most 1,000 headers" in answer.text
    assert messages_of(shared) == [(0, "first")]
