"""A large poll's records are made without the cyclic garbage collector walking them
(issue 13, item 6): with it, a poll of 100,000 records cost twice as much per record as a
poll of 500, because ConsumerRecords (NamedTuples) stay tracked and every collection of
the older generations walked all of them again."""

from __future__ import annotations

import gc
import types

import pytest

from engine import Consumer, Producer, TopicPartition, bulk

RECORDS = 20_000


@pytest.fixture
def topic(cluster):
    cluster.create_stream("/s", ttl=0)
    cluster.create_topic("/s:t", partitions=1)
    with Producer(cluster, acks=1, linger_ms=0) as producer:
        for i in range(RECORDS):
            producer.send("/s:t", value=b"%d" % i, headers=[("n", b"%d" % i)] if i % 2 else None)
        producer.flush()
    return "/s:t"


def _consumer(cluster, topic, **kwargs):
    consumer = Consumer(cluster, group_id=None, auto_offset_reset="earliest", **kwargs)
    consumer.assign([TopicPartition(topic, 0)])
    return consumer


class Collections:
    """The generations of the collections that run inside the `with` block."""

    def __init__(self) -> None:
        self.generations: list[int] = []

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.generations.append(info["generation"])

    def __enter__(self) -> Collections:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def _poll_all(consumer, max_records):
    got = consumer.poll(timeout_ms=1000, max_records=max_records)
    return [r for records in got.values() for r in records]


def test_a_large_poll_sets_off_no_collection_and_leaves_its_records_old(
    cluster, topic, monkeypatch
):
    consumer = _consumer(cluster, topic)
    try:
        gc.collect()
        with Collections() as seen:
            records = _poll_all(consumer, RECORDS)
        assert len(records) == RECORDS
        assert [r.offset for r in records] == list(range(RECORDS))
        assert records[-1].headers == [("n", b"%d" % (RECORDS - 1))]
        assert list(records[-2].headers) == []
        # One collection of the young generations before the records are made, none while
        # (the old code ran one every 700 records: about 30 here, some of them older ones).
        assert seen.generations == [1]
        assert gc.isenabled()
        # Made records sit in the oldest generation: no young collection walks them again.
        old = {id(o) for o in gc.get_objects(generation=2)}
        assert id(records[0]) in old and id(records[-1]) in old
        assert id(records[-1].headers) in old
        assert gc.get_count()[0] < 700
        # A poll of 500 is left as it was: the collector is neither paused nor forced (its
        # own thresholds may still run one, as for any other 500 objects: not asserted).
        other = _consumer(cluster, topic)
        calls = []
        spy = types.SimpleNamespace(
            **{name: getattr(gc, name) for name in dir(gc) if not name.startswith("_")}
        )
        for name in ("collect", "disable", "freeze"):
            setattr(spy, name, lambda *a, _name=name: calls.append(_name))
        monkeypatch.setattr(bulk, "gc", spy)
        try:
            small = _poll_all(other, 500)
        finally:
            other.close()
        assert len(small) == 500
        assert calls == []
    finally:
        consumer.close()


def test_a_deserializer_runs_inside_the_pause(cluster, topic):
    consumer = _consumer(cluster, topic, value_deserializer=lambda v: [v])
    try:
        gc.collect()
        with Collections() as seen:
            records = _poll_all(consumer, RECORDS)
        assert records[5].value == [b"5"]
        assert seen.generations == [1]
        assert id(records[-1]) in {id(o) for o in gc.get_objects(generation=2)}
    finally:
        consumer.close()


def test_the_collector_and_frozen_objects_stay_as_the_application_left_them(cluster, topic):
    consumer = _consumer(cluster, topic)
    gc.collect()
    gc.freeze()  # as a server does before forking
    frozen = gc.get_freeze_count()
    try:
        assert frozen > 0
        records = _poll_all(consumer, 5_000)
        assert len(records) == 5_000
        # None added, none thawed: gc.unfreeze() would empty the permanent generation. Not
        # an exact count: other threads of this process (servers of earlier tests) free
        # some frozen objects meanwhile, over a hundred on a busy machine.
        assert frozen // 2 < gc.get_freeze_count() <= frozen
        assert gc.isenabled()
        gc.disable()
        try:
            records = _poll_all(consumer, 5_000)
            assert len(records) == 5_000
            assert not gc.isenabled()  # an application's choice is kept
        finally:
            gc.enable()
    finally:
        gc.unfreeze()
        consumer.close()
