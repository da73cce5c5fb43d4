"""Producer ids are the cluster's (issues 23 and 25): a batch with a producer id it did not
issue to the user (made up, or another user's) is refused with UNKNOWN_PRODUCER_ID and
stored nowhere, and another user's producers cannot make the victim's sequence be
forgotten (it is the stored batches), so the victim's resend is recognised and stored once."""

from __future__ import annotations

import pytest
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from engine import Cluster, Consumer, TopicPartition
from engine.wire import KafkaServer, codes
from tests.engine.wire.test_bad_input import Raw, _batch, _produce
from tests.engine.wire.test_connection_limits import _login

ALICE = ("alice", "correct horse battery")
MALLORY = ("mallory", "another long secret")


@pytest.fixture
def server(tmp_path):
    with Cluster.open(tmp_path / "c", name="idem") as cluster:
        cluster.add_user(*ALICE)
        cluster.add_user(*MALLORY)
        cluster.create_stream("/kafka", produce_perm="u:alice | u:mallory")
        cluster.create_topic("/kafka:t", partitions=1)
        server = KafkaServer(cluster, listen=("127.0.0.1", 0), sasl=True).start()
        try:
            yield cluster, server
        finally:
            server.close()


def _as(server, user) -> Raw:
    raw = Raw(server.address)
    assert _login(raw, user)[0] == 0
    raw.correlation = 2
    return raw


def _init_producer_id(raw: Raw) -> int:
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
    response = raw.call(request, 1, InitProducerIdResponse)
    assert response.error_code == 0
    return response.producer_id


def _values(cluster) -> list[bytes]:
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition("/kafka:t", 0)])
        records = consumer.poll(timeout_ms=2000)
        return [r.value for rs in records.values() for r in rs]
    finally:
        consumer.close()


def test_made_up_and_other_users_producer_ids_are_refused(server):
    cluster, srv = server
    alice, mallory = _as(srv, ALICE), _as(srv, MALLORY)
    try:
        pid = _init_producer_id(alice)
        made_up = _batch(b"x", producer_id=123456789, epoch=0, sequence=0)
        assert _produce(mallory, "t", made_up)[0] == codes.UNKNOWN_PRODUCER_ID
        stolen = _batch(b"y", producer_id=pid, epoch=0, sequence=0)
        assert _produce(mallory, "t", stolen)[0] == codes.UNKNOWN_PRODUCER_ID
        wrong_epoch = _batch(b"z", producer_id=pid, epoch=3, sequence=0)
        assert _produce(alice, "t", wrong_epoch)[0] == codes.INVALID_PRODUCER_EPOCH
        assert _values(cluster) == []
    finally:
        alice.close()
        mallory.close()


def test_another_users_batches_cannot_evict_the_victims_sequence(server):
    cluster, srv = server
    alice, mallory = _as(srv, ALICE), _as(srv, MALLORY)
    try:
        pid = _init_producer_id(alice)
        mine = _batch(b"victim", producer_id=pid, epoch=0, sequence=0)
        assert _produce(alice, "t", mine) == (0, 0)
        # more one-message batches than the table holds, with made-up and real ids
        for i in range(60):
            fake = _batch(b"f", producer_id=10_000 + i, epoch=0, sequence=0)
            assert _produce(mallory, "t", fake)[0] == codes.UNKNOWN_PRODUCER_ID
            own = _batch(b"m", producer_id=_init_producer_id(mallory), epoch=0, sequence=0)
            assert _produce(mallory, "t", own)[0] == 0
        # the victim's retry (its answer was lost) is recognised: stored once
        assert _produce(alice, "t", mine) == (0, 0)
        assert _values(cluster).count(b"victim") == 1
    finally:
        alice.close()
        mallory.close()
