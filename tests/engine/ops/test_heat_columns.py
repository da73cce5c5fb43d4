"""`Cluster.heat(window, columns=N)`: the heat map in whole-bucket columns, served from a
per-volume cache of final columns (engine/ops/heat.py, `_Rollup`). Whatever the calls
before, a map must equal the plain per-bucket map summed into the same columns."""

from __future__ import annotations

import random

import pytest

from engine import Cluster, Producer, TopicPartition, errors
from engine.clock import FakeClock
from engine.clock import now_ms as clock_now_ms
from engine.storage.volume import HEAT_BUCKET_S

STREAM = "/hot"
BUCKET_MS = HEAT_BUCKET_S * 1000


@pytest.fixture
def clock():
    """The clusters' clock, frozen at a bucket's middle until a test moves it."""
    return FakeClock(now_ms=(clock_now_ms() // BUCKET_MS) * BUCKET_MS + BUCKET_MS // 2)


@pytest.fixture
def cluster(cluster_path, clock):
    """A fresh cluster on the test's clock."""
    with Cluster.open(cluster_path, name="test", clock=clock) as c:
        yield c


@pytest.fixture
def warm(cluster):
    """Four topics of three partitions, one message each (so every partition has a
    partitionlet on some volume)."""
    cluster.create_stream(STREAM, ttl=0)
    producer = Producer(cluster, acks=1)
    for t in range(4):
        cluster.create_topic(f"{STREAM}:t{t}", partitions=3)
        for p in range(3):
            producer.send(f"{STREAM}:t{t}", b"x", partition=p)
    producer.flush()
    producer.close()
    return cluster


def seed(cluster, first_bucket: int, last_bucket: int, rng: random.Random) -> None:
    """Random heat for every partitionlet in buckets first..last (some left empty)."""
    by_volume: dict[int, list] = {}
    for pl in cluster.partitionlets():
        for bucket in range(first_bucket, last_bucket + 1):
            if rng.random() < 0.5:
                continue
            wm = rng.randint(1, 50)
            rm = rng.randint(0, 30)
            by_volume.setdefault(pl.volume, []).append((bucket, pl.id, wm, wm * 7, rm, rm * 7))
    for volume_id, rows in by_volume.items():
        cluster.volume(volume_id).add_heat(rows)


def expected_columns(cluster, window_s: int, columns_map) -> tuple[dict, dict]:
    """The plain per-bucket map summed into `columns_map`'s columns: per volume and per
    partition, a list of [wm, wb, rm, rb] per column. The plain map is read over all the
    columns' buckets, which may begin before `window_s` (when the columns do not divide
    it: 7 columns of an hour are 7 x 52 buckets)."""
    starts = columns_map.buckets
    per = columns_map.bucket_s // HEAT_BUCKET_S
    plain = cluster.heat(max(window_s, len(starts) * columns_map.bucket_s))

    def column_of(bucket_ms: int) -> int | None:
        index = (bucket_ms // BUCKET_MS - starts[0] // BUCKET_MS) // per
        return index if 0 <= index < len(starts) else None

    def fold(series):
        out = [[0, 0, 0, 0] for _ in starts]
        for bucket_ms, load in zip(plain.buckets, series, strict=True):
            i = column_of(bucket_ms)
            if i is not None:
                cell = out[i]
                cell[0] += load.write_messages
                cell[1] += load.write_bytes
                cell[2] += load.read_messages
                cell[3] += load.read_bytes
        return out

    volumes = {v: fold(s) for v, s in plain.volume_series.items()}
    partitions = {tp: fold(s) for tp, s in plain.partition_series.items()}
    return volumes, partitions


def cells(series) -> list[list[int]]:
    return [[c.write_messages, c.write_bytes, c.read_messages, c.read_bytes] for c in series]


def check_same(cluster, window_s: int, columns: int) -> None:
    got = cluster.heat(window_s, columns=columns)
    assert len(got.buckets) <= columns
    volumes, partitions = expected_columns(cluster, window_s, got)
    assert {v: cells(s) for v, s in got.volume_series.items()} == volumes
    got_partitions = {tp: cells(s) for tp, s in got.partition_series.items()}
    # the plain map lists only partitions with heat; so does the columns map
    assert got_partitions == {tp: c for tp, c in partitions.items() if any(map(any, c))}
    for tp, series in got.partition_series.items():
        total = got.partitions[tp]
        assert total.write_messages == sum(c.write_messages for c in series)
        assert total.read_bytes == sum(c.read_bytes for c in series)
    # rates: a whole column is its buckets' seconds, the current one what it has covered
    assert all(s.seconds == got.bucket_s for s in got.volume_series[1][:-1])
    assert 0 < got.volume_series[1][-1].seconds <= got.bucket_s


def test_columns_sum_the_buckets_of_the_plain_map(warm, clock):
    now_bucket = clock.now_ms() // BUCKET_MS
    seed(warm, now_bucket - 400, now_bucket, random.Random(1))
    for window_s, columns in ((3600, 60), (900, 45), (300, 30), (3600, 7), (600, 600)):
        check_same(warm, window_s, columns)


def test_columns_that_do_not_divide_the_window_at_every_bucket(warm, clock):
    # 7 columns of an hour are 7 x 52 buckets: as the clock crosses a column, the span is
    # sometimes longer than the hour; the map must still be its buckets, summed
    now_bucket = clock.now_ms() // BUCKET_MS
    seed(warm, now_bucket - 420, now_bucket + 60, random.Random(5))
    for _ in range(55):
        check_same(warm, 3600, 7)
        clock.advance(ms=BUCKET_MS)


def test_the_cache_follows_the_clock_and_new_heat(warm, clock):
    rng = random.Random(2)
    now_bucket = clock.now_ms() // BUCKET_MS
    seed(warm, now_bucket - 400, now_bucket, rng)
    check_same(warm, 3600, 60)  # fills the cache
    for step in (1, 2, 5, 7, 13, 6, 1):
        # time moves on; the buckets since get heat, and so does the open one
        before = clock.now_ms() // BUCKET_MS
        clock.advance(ms=step * BUCKET_MS)
        seed(warm, before + 1, clock.now_ms() // BUCKET_MS, rng)
        check_same(warm, 3600, 60)
    # a pause longer than the window: the cache starts over
    clock.advance(ms=2 * 3600 * 1000)
    seed(warm, clock.now_ms() // BUCKET_MS - 50, clock.now_ms() // BUCKET_MS, rng)
    check_same(warm, 3600, 60)


def test_the_hottest_partitions_and_an_included_one(warm, clock):
    now_bucket = clock.now_ms() // BUCKET_MS
    seed(warm, now_bucket - 360, now_bucket, random.Random(3))
    check_same(warm, 3600, 60)
    every = warm.heat(3600, columns=60)
    ranked = sorted(every.partitions, key=lambda tp: -every.partitions[tp].read_bytes)
    assert every.partitions[ranked[2]].read_bytes > every.partitions[ranked[3]].read_bytes
    coldest = ranked[-1]
    got = warm.heat(3600, top=3, by="read_bytes", columns=60, include=[coldest])
    assert set(got.partitions) == {*ranked[:3], coldest}
    assert set(got.partition_series) == set(got.partitions)
    for tp in got.partitions:
        assert got.partitions[tp] == every.partitions[tp]
        assert got.partition_series[tp] == every.partition_series[tp]
    # volumes stay complete, and a topic adds up its listed partitions
    assert got.volumes == every.volumes and got.volume_series == every.volume_series
    for topic, load in got.topics.items():
        listed = [tp for tp in got.partitions if tp.topic == topic]
        assert load.write_messages == sum(got.partitions[tp].write_messages for tp in listed)


def test_a_deleted_topic_leaves_the_map(warm, clock):
    now_bucket = clock.now_ms() // BUCKET_MS
    seed(warm, now_bucket - 100, now_bucket, random.Random(4))
    first = warm.heat(3600, columns=60)
    assert TopicPartition(f"{STREAM}:t1", 0) in first.partitions
    warm.delete_topic(f"{STREAM}:t1")
    clock.advance(ms=BUCKET_MS)
    after = warm.heat(3600, columns=60)
    assert not any(tp.topic == f"{STREAM}:t1" for tp in after.partitions)
    assert not any(tp.topic == f"{STREAM}:t1" for tp in after.partition_series)
    check_same(warm, 3600, 60)


@pytest.mark.parametrize("bad", [0, -1, True, "60", 2.5])
def test_columns_is_checked(cluster, bad):
    with pytest.raises(errors.InvalidArgument, match="columns"):
        cluster.heat(300, columns=bad)


def check_hottest(cluster, top: int) -> None:
    """The ranked call (partition totals kept by the cache) against the full one, which
    check_same holds to the plain map: the same hottest totals, every listed one exact."""
    every = cluster.heat(3600, columns=60)
    for by, field in (("write_messages", "write_messages"), ("read_bytes", "read_bytes")):
        got = cluster.heat(3600, top=top, by=by, columns=60)
        values = sorted((getattr(load, field) for load in every.partitions.values()), reverse=True)
        assert (
            sorted((getattr(v, field) for v in got.partitions.values()), reverse=True)
            == (values[:top])
        )
        for tp, load in got.partitions.items():
            assert load == every.partitions[tp]
            assert got.partition_series[tp] == every.partition_series[tp]


def test_the_hottest_follow_the_clock_new_and_deleted_topics(warm, clock):
    rng = random.Random(6)
    now_bucket = clock.now_ms() // BUCKET_MS
    seed(warm, now_bucket - 400, now_bucket, rng)
    check_hottest(warm, 4)
    for step in (1, 3, 7, 2, 30):
        before = clock.now_ms() // BUCKET_MS
        clock.advance(ms=step * BUCKET_MS)
        seed(warm, before + 1, clock.now_ms() // BUCKET_MS, rng)
        check_hottest(warm, 4)
    warm.delete_topic(f"{STREAM}:t2")  # its partitionlets leave their volumes
    check_hottest(warm, 4)
    warm.create_topic(f"{STREAM}:new", partitions=2)
    producer = Producer(warm, acks=1)
    for p in range(2):
        producer.send(f"{STREAM}:new", b"x", partition=p)
    producer.close()
    now_bucket = clock.now_ms() // BUCKET_MS
    seed(warm, now_bucket - 5, now_bucket, rng)  # heat for the new ones, more for the rest
    check_hottest(warm, 4)
    assert any(tp.topic == f"{STREAM}:new" for tp in warm.heat(3600, columns=60).partitions)


def test_the_hottest_follow_a_partitionlet_that_moves(cluster_path, clock):
    from engine.ops import balance

    with Cluster.open(
        cluster_path, name="moves", partitionlet_bytes=4096, volumes=3, clock=clock
    ) as c:
        c.create_stream(STREAM, ttl=0)
        c.create_topic(f"{STREAM}:m", partitions=2)
        producer = Producer(c, acks=1)
        for n in range(400):  # several partitionlets a partition
            producer.send(f"{STREAM}:m", b"v" * 40, partition=n % 2)
        producer.close()
        now_bucket = clock.now_ms() // BUCKET_MS
        seed(c, now_bucket - 300, now_bucket, random.Random(7))
        check_hottest(c, 1)
        sealed = [pl for pl in c.partitionlets() if not pl.active]
        assert sealed
        pl = sealed[0]
        away = next(v for v in c.open_volumes() if v != pl.volume)
        assert balance.move(c, pl.id, away).to_volume == away
        check_hottest(c, 1)  # its heat stayed with the volume it left
        clock.advance(ms=3 * BUCKET_MS)
        seed(c, now_bucket + 1, clock.now_ms() // BUCKET_MS, random.Random(8))
        check_same(c, 3600, 60)
        check_hottest(c, 1)
