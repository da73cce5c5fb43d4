"""Fetch sessions (KIP-227) on the listener: librdkafka consuming 200 partitions through
incremental fetches, and raw frames for the session's rules: what an incremental answer
carries, forgotten partitions, Kafka's errors, closing, eviction, the per-user bound, and a
session id guessed by another user."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import TopicPartition as CKTP
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka.protocol.consumer import FetchRequest, FetchResponse

from engine import Cluster, Producer
from engine.wire import KafkaServer, codes
from tests.engine.wire.group_client import GroupClient
from tests.timing import scaled

ALICE = ("alice", "correct horse battery")
MALLORY = ("mallory", "another long secret")
T = FetchRequest.FetchTopic
P = T.FetchPartition


def _fetch(
    client: GroupClient,
    session_id: int,
    epoch: int,
    parts: dict[tuple[str, int], int] | None = None,
    forgotten: dict[str, list[int]] | None = None,
) -> FetchResponse:
    """One Fetch v12, answered at once (max_wait_ms 0): `parts` maps (topic, partition) to
    the fetch offset."""
    by_topic: dict[str, list[P]] = {}
    for (topic, partition), offset in (parts or {}).items():
        by_topic.setdefault(topic, []).append(
            P(
                partition=partition,
                current_leader_epoch=-1,
                fetch_offset=offset,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=1 << 20,
            )
        )
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 24,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[T(topic=t, partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[
            FetchRequest.ForgottenTopic(topic=t, partitions=ps)
            for t, ps in (forgotten or {}).items()
        ],
        rack_id="",
    )
    return client.call(request, FetchResponse, 12)


def _answered(response: FetchResponse) -> dict[tuple[str, int], tuple[int, int, bool]]:
    """(topic, partition) -> (error, high watermark, has records) of an answer."""
    return {
        (t.topic, p.partition_index): (p.error_code, p.high_watermark, bool(p.records))
        for t in response.responses
        for p in t.partitions
    }


def _produce(cluster: Cluster, topic: str, partition: int, n: int = 1) -> None:
    with Producer(cluster, acks="all") as producer:
        for i in range(n):
            producer.send(topic, value=b"v%d" % i, partition=partition)


@pytest.fixture
def listener(tmp_path):
    """A factory of a SASL listener (alice and mallory may consume /kafka, topic t with
    three partitions) with the KafkaServer options asked for."""
    made: list[tuple[Cluster, KafkaServer]] = []

    def make(**kwargs) -> tuple[Cluster, KafkaServer]:
        cluster = Cluster.open(tmp_path / f"c{len(made)}", name="fsess")
        cluster.add_user(*ALICE)
        cluster.add_user(*MALLORY)
        cluster.create_stream("/kafka", consume_perm="u:alice | u:mallory")
        cluster.create_topic("/kafka:t", partitions=3)
        server = KafkaServer(cluster, listen=("127.0.0.1", 0), sasl=True, **kwargs).start()
        made.append((cluster, server))
        return cluster, server

    yield make
    for cluster, server in made:
        server.close()
        cluster.close()


def _wide(cluster: Cluster, partitions: int = 200) -> dict[tuple[int, int], bytes]:
    """Topic /kafka:wide with three messages in each partition; what was sent."""
    cluster.create_topic("/kafka:wide", partitions=partitions)
    sent = {(p, i): b"%d-%d" % (p, i) for p in range(partitions) for i in range(3)}
    with Producer(cluster, acks="all") as producer:
        for (p, _), value in sent.items():
            producer.send("/kafka:wide", value=value, partition=p)
    return sent


def _more(cluster: Cluster, sent: dict[tuple[int, int], bytes], first: int = 0) -> None:
    """A fourth message in every seventh partition of /kafka:wide from `first` (0-6), added
    to `sent`."""
    more = {(p, 3): b"%d-3" % p for p in range(first, 200, 7)}
    with Producer(cluster, acks="all") as producer:
        for (p, _), value in more.items():
            producer.send("/kafka:wide", value=value, partition=p)
    sent.update(more)


def test_kafka_python_consumer_of_200_partitions_fetches_incrementally(make_server):
    server = make_server()
    sent = _wide(server.cluster)
    host, port = server.address
    consumer = KafkaConsumer(
        bootstrap_servers=f"{host}:{port}",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    got: dict[tuple[int, int], bytes] = {}

    def read_until_all(deadline: float) -> None:
        while len(got) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    assert (r.partition, r.offset) not in got  # no message twice
                    got[(r.partition, r.offset)] = r.value

    try:
        consumer.assign([KTP("wide", p) for p in range(200)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + scaled(60)
        read_until_all(deadline)
        for first in range(5):  # rounds read by the session's incremental fetches
            _more(server.cluster, sent, first)
            read_until_all(deadline)
    finally:
        consumer.close()
    assert got == sent
    stats = server.fetch_sessions.stats()
    assert stats["created"] >= 1
    assert stats["incremental"] >= 5
    assert stats["incremental"] > stats["full"]
    assert (stats["not_found"], stats["invalid_epoch"]) == (0, 0)


def test_confluent_consumer_of_200_partitions_reads_everything(make_server):
    """librdkafka (2.16) has no fetch sessions: every fetch it sends is a full one without
    a session (id 0, epoch -1), answered in full."""
    server = make_server()
    cluster = server.cluster
    sent = _wide(cluster)
    host, port = server.address
    consumer = CKConsumer(
        {
            "bootstrap.servers": f"{host}:{port}",
            "group.id": "fsess",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    got: dict[tuple[int, int], bytes] = {}

    def read_until_all(deadline: float) -> None:
        while len(got) < len(sent) and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.5):
                assert m.error() is None, m.error()
                assert (m.partition(), m.offset()) not in got  # no message twice
                got[(m.partition(), m.offset())] = m.value()

    try:
        consumer.assign([CKTP("/kafka:wide", p, 0) for p in range(200)])
        deadline = time.monotonic() + scaled(60)
        read_until_all(deadline)
        _more(cluster, sent)
        read_until_all(deadline)
    finally:
        consumer.close()
    assert got == sent
    stats = server.fetch_sessions.stats()
    assert stats["sessionless"] > 0
    assert (stats["created"], stats["incremental"]) == (0, 0)


def test_incremental_answers_carry_only_what_changed(listener):
    cluster, server = listener()
    _produce(cluster, "/kafka:t", 0, 2)
    alice = GroupClient(server.address, *ALICE)
    full = _fetch(alice, 0, 0, {("t", 0): 0, ("t", 1): 0, ("t", 2): 0})
    assert full.error_code == 0
    assert full.session_id != 0
    assert _answered(full) == {
        ("t", 0): (0, 2, True),
        ("t", 1): (0, 0, False),
        ("t", 2): (0, 0, False),
    }
    sid = full.session_id
    # the client moved partition 0 to offset 2: nothing new anywhere, nothing answered
    quiet = _fetch(alice, sid, 1, {("t", 0): 2})
    assert (quiet.error_code, quiet.session_id, _answered(quiet)) == (0, sid, {})
    # new data in partition 1 (its fetch offset is the session's, 0): only it comes
    _produce(cluster, "/kafka:t", 1)
    news = _fetch(alice, sid, 2)
    assert _answered(news) == {("t", 1): (0, 1, True)}
    # partition 1 forgotten: its new data is not answered any more; partition 2's is
    _produce(cluster, "/kafka:t", 1)
    _produce(cluster, "/kafka:t", 2)
    after = _fetch(alice, sid, 3, forgotten={"t": [1]})
    assert _answered(after) == {("t", 2): (0, 1, True)}
    # an added partition is answered with its error (here: it does not exist); partition 2
    # moved on to its end (the session keeps the offsets the client last sent)
    added = _fetch(alice, sid, 4, {("t", 2): 1, ("t", 9): 0})
    assert _answered(added) == {("t", 9): (codes.UNKNOWN_TOPIC_OR_PARTITION, -1, False)}
    # forgetting every partition closes the session: the answer has none
    empty = _fetch(alice, sid, 5, forgotten={"t": [0, 2, 9]})
    assert (empty.error_code, empty.session_id) == (0, 0)
    assert _fetch(alice, sid, 6).error_code == codes.FETCH_SESSION_ID_NOT_FOUND
    alice.close()


def test_session_errors_and_close(listener):
    _, server = listener()
    alice = GroupClient(server.address, *ALICE)
    sid = _fetch(alice, 0, 0, {("t", 0): 0}).session_id
    assert sid != 0
    wrong = _fetch(alice, sid, 7)
    assert (wrong.error_code, wrong.session_id, wrong.responses) == (
        codes.INVALID_FETCH_SESSION_EPOCH,
        0,
        [],
    )
    assert _fetch(alice, sid, 1).error_code == 0  # the wrong epoch did not move it
    unknown = sid + 1 if sid < (1 << 31) - 1 else sid - 1
    assert _fetch(alice, unknown, 1).error_code == codes.FETCH_SESSION_ID_NOT_FOUND
    # epoch -1 closes the session it names; the fetch is answered in full, without one
    final = _fetch(alice, sid, -1, {("t", 0): 0})
    assert (final.error_code, final.session_id) == (0, 0)
    assert set(_answered(final)) == {("t", 0)}
    assert _fetch(alice, sid, 2).error_code == codes.FETCH_SESSION_ID_NOT_FOUND
    # a full fetch naming a session closes it and makes a new one
    first = _fetch(alice, 0, 0, {("t", 0): 0}).session_id
    second = _fetch(alice, first, 0, {("t", 0): 0}).session_id
    assert second not in (0, first)
    assert _fetch(alice, first, 1).error_code == codes.FETCH_SESSION_ID_NOT_FOUND
    assert _fetch(alice, second, 1).error_code == 0
    stats = server.fetch_sessions.stats()
    assert (stats["not_found"], stats["invalid_epoch"], stats["sessions"]) == (3, 1, 1)
    alice.close()


def test_another_user_cannot_use_or_close_a_session(listener):
    cluster, server = listener()
    alice = GroupClient(server.address, *ALICE)
    mallory = GroupClient(server.address, *MALLORY)
    sid = _fetch(alice, 0, 0, {("t", 0): 0}).session_id
    assert sid != 0
    _produce(cluster, "/kafka:t", 0)
    # mallory guessed the id: answered as an unknown one, whatever the epoch
    for epoch in (1, 2):
        stolen = _fetch(mallory, sid, epoch)
        assert (stolen.error_code, stolen.responses) == (codes.FETCH_SESSION_ID_NOT_FOUND, [])
    # a full fetch of mallory naming it (epoch -1 or 0) does not close alice's session
    assert _fetch(mallory, sid, -1, {("t", 1): 0}).error_code == 0
    assert _fetch(mallory, sid, 0, {("t", 1): 0}).error_code == 0
    mine = _fetch(alice, sid, 1)
    assert mine.error_code == 0
    assert _answered(mine) == {("t", 0): (0, 1, True)}
    alice.close()
    mallory.close()


def test_the_same_user_may_go_on_with_a_session_on_another_connection(listener):
    _, server = listener()
    first = GroupClient(server.address, *ALICE)
    second = GroupClient(server.address, *ALICE)
    sid = _fetch(first, 0, 0, {("t", 0): 0}).session_id
    assert sid != 0
    assert _fetch(second, sid, 1).error_code == 0  # the session is the user's, as in Kafka
    assert _fetch(first, sid, 2).error_code == 0
    second.close()
    first.close()


def test_a_session_goes_with_its_connection(listener):
    _, server = listener()
    alice = GroupClient(server.address, *ALICE)
    sid = _fetch(alice, 0, 0, {("t", 0): 0}).session_id
    assert server.fetch_sessions.stats()["sessions"] == 1
    alice.close()
    deadline = time.monotonic() + scaled(10)
    while server.fetch_sessions.stats()["sessions"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.fetch_sessions.stats()["sessions"] == 0
    again = GroupClient(server.address, *ALICE)
    assert _fetch(again, sid, 1).error_code == codes.FETCH_SESSION_ID_NOT_FOUND
    again.close()


def test_eviction_takes_the_smallest_session_no_larger_than_the_new_one(listener):
    _, server = listener(max_fetch_sessions=2)
    alice = GroupClient(server.address, *ALICE)
    mallory = GroupClient(server.address, *MALLORY)
    three = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    big = _fetch(alice, 0, 0, three).session_id
    small = _fetch(mallory, 0, 0, {("t", 0): 0}).session_id
    assert 0 not in (big, small)
    # full: a session of two partitions takes the place of the one of one partition
    middle = _fetch(mallory, 0, 0, {("t", 0): 0, ("t", 1): 0}).session_id
    assert middle != 0
    assert _fetch(mallory, small, 1).error_code == codes.FETCH_SESSION_ID_NOT_FOUND
    # a session of one partition is smaller than both: none is made (id 0, full fetches)
    none = _fetch(alice, 0, 0, {("t", 2): 0})
    assert (none.error_code, none.session_id) == (0, 0)
    assert set(_answered(none)) == {("t", 2)}
    assert _fetch(alice, big, 1).error_code == 0
    assert _fetch(mallory, middle, 1).error_code == 0
    assert server.fetch_sessions.stats()["evicted"] == 1
    alice.close()
    mallory.close()


def test_a_stale_session_is_evicted_first(listener, monkeypatch):
    _, server = listener(max_fetch_sessions=1)
    alice = GroupClient(server.address, *ALICE)
    big = _fetch(alice, 0, 0, {("t", 0): 0, ("t", 1): 0}).session_id
    # unused for longer than the eviction age: even a smaller new session takes its place
    monkeypatch.setattr(server.fetch_sessions, "eviction_age_s", 0.0)
    time.sleep(0.01)
    small = _fetch(alice, 0, 0, {("t", 0): 0}).session_id
    assert small not in (0, big)
    assert _fetch(alice, big, 1).error_code == codes.FETCH_SESSION_ID_NOT_FOUND
    alice.close()


def test_a_user_at_their_cap_replaces_their_own_oldest_session(listener):
    _, server = listener(max_fetch_sessions_per_user=2)
    alice = GroupClient(server.address, *ALICE)
    mallory = GroupClient(server.address, *MALLORY)
    theirs = _fetch(mallory, 0, 0, {("t", 0): 0}).session_id
    first, second, third = (_fetch(alice, 0, 0, {("t", 0): 0}).session_id for _ in range(3))
    assert 0 not in (theirs, first, second, third)
    assert _fetch(alice, first, 1).error_code == codes.FETCH_SESSION_ID_NOT_FOUND
    assert _fetch(alice, second, 1).error_code == 0
    assert _fetch(alice, third, 1).error_code == 0
    assert _fetch(mallory, theirs, 1).error_code == 0  # another user's never go
    alice.close()
    mallory.close()


def test_sessions_off_and_old_versions_answer_session_id_0(listener):
    _, server = listener(max_fetch_sessions=0)
    alice = GroupClient(server.address, *ALICE)
    response = _fetch(alice, 0, 0, {("t", 0): 0})
    assert (response.error_code, response.session_id) == (0, 0)
    assert server.fetch_sessions.stats()["created"] == 0
    alice.close()


def test_a_client_making_session_after_session_holds_at_most_its_cap(listener):
    _, server = listener(max_fetch_sessions_per_user=3)
    alice = GroupClient(server.address, *ALICE)
    for _ in range(40):  # a client that asks for a new session with every fetch
        assert _fetch(alice, 0, 0, {("t", 0): 0}).session_id != 0
    stats = server.fetch_sessions.stats()
    assert (stats["created"], stats["evicted"], stats["sessions"]) == (40, 37, 3)
    alice.close()
