"""The names engine modules and frontends reach the storage layer by (Cluster's docstring)."""

from __future__ import annotations

import gc
import threading
import time

import pytest

from engine import Cluster, Principal, Producer, errors
from engine.storage.catalog import Catalog
from engine.storage.volume import Volume
from tests.timing import scaled


@pytest.fixture
def cluster(tmp_path):
    with Cluster.open(tmp_path / "c", volumes=3) as c:
        c.create_stream("/s", consume_perm="u:alice")
        yield c


def test_storage_objects_are_typed_and_public(cluster):
    assert isinstance(cluster.catalog, Catalog)
    volumes = cluster.open_volumes()
    assert sorted(volumes) == [1, 2, 3] and all(isinstance(v, Volume) for v in volumes.values())
    volumes.clear()  # a copy: the cluster keeps its own
    assert cluster.volume(2) is cluster.open_volumes()[2]
    assert cluster.placement.choose() in (1, 2, 3)
    view = cluster.as_principal(Principal("bob", ()))
    assert view.catalog is cluster.catalog and view.appends is cluster.appends
    cluster.close()
    with pytest.raises(errors.Closed):
        view.check_open()


def test_authorize_takes_a_path_a_row_or_an_info(cluster):
    alice, bob = Principal("alice", ()), Principal("bob", ())
    cluster.authorize("/s", "consume_perm", alice)
    cluster.authorize(cluster.stream("/s"), "consume_perm", alice)
    cluster.authorize(cluster.catalog.stream("/s"), "consume_perm", alice)
    with pytest.raises(errors.AccessDenied, match="may not reset offsets on stream /s"):
        cluster.authorize("/s", "consume_perm", bob, what="reset offsets on")
    cluster.as_principal(alice).authorize("/s", "consume_perm")
    with pytest.raises(errors.UnknownStream):
        cluster.authorize("/missing", "consume_perm", alice)
    with pytest.raises(errors.InvalidArgument, match="perm must be one of"):
        cluster.authorize("/s", "consume", alice)


def test_metadata_watchers_hear_of_changes_and_are_held_weakly(cluster):
    heard = []

    class Watcher:
        def forget_metadata(self) -> None:
            heard.append(1)

    watcher = Watcher()
    cluster.watch_metadata(watcher)
    cluster.create_topic("/s:t", partitions=1)
    assert heard == [1]
    del watcher
    gc.collect()
    cluster.create_topic("/s:u", partitions=1)
    assert heard == [1]


def test_the_append_signal_wakes_a_waiting_reader(cluster):
    cluster.create_topic("/s:t", partitions=1)
    seq = cluster.appends.seq
    assert cluster.appends.wait(seq, 0.01) == seq  # nothing appended: times out
    woke = []

    def reader() -> None:
        start = time.monotonic()
        woke.append((cluster.appends.wait(seq, 10), time.monotonic() - start))

    thread = threading.Thread(target=reader)
    thread.start()
    producer = Producer(cluster)
    producer.send("/s:t", b"x").get(scaled(10))
    producer.close()
    thread.join(10)
    assert woke and woke[0][0] > seq and woke[0][1] < 5


def test_the_job_table(cluster):
    jobs = cluster.jobs
    assert jobs.newest(10) == []
    first = jobs.add("copy", '{"source": "/s:t"}', "queued", 1)
    second = jobs.add("custom", "{}", "queued", 2)
    assert [j.id for j in jobs.newest(10)] == [second, first]
    assert jobs.update(first, ("queued",), state="running", pid=7)
    assert not jobs.update(first, ("queued",), state="cancelled")  # not queued any more
    row = jobs.get(first)
    assert (row.state, row.pid, row.cancel_requested) == ("running", 7, False)
    with pytest.raises(ValueError, match="cannot set"):
        jobs.update(first, params="{}")
    assert jobs.get(999) is None
