"""The metrics history (engine.ops.metrics): throughput minutes from the heat, lag gauges,
hour roll-ups, bounds, and replication's steady throughput, on real clusters."""

from __future__ import annotations

import time

import pytest

from engine import Cluster, Consumer, Producer, Replicator
from engine.clock import FakeClock, now_ms
from engine.errors import InvalidArgument
from engine.ops import metrics
from engine.ops.maintenance import Maintenance
from engine.records import TopicPartition
from tests.timing import scaled

MINUTE = 60_000


def _send(cluster: Cluster, topic: str, count: int, size: int = 10) -> None:
    producer = Producer(cluster)
    for _ in range(count):
        producer.send(topic, b"x" * size)
    producer.flush()
    producer.close()


@pytest.fixture
def clock() -> FakeClock:
    """The clusters' clock: a test moves it on to complete the minutes it wrote in."""
    return FakeClock(now_ms=now_ms())


@pytest.fixture
def cluster(cluster_path, clock):
    """A fresh cluster on the test's clock."""
    with Cluster.open(cluster_path, name="test", clock=clock) as c:
        yield c


def _later(clock: FakeClock, minutes: int) -> int:
    """Move the clock `minutes` on (the minutes written before are complete by then) and
    say when that is."""
    clock.advance(minutes * 60)
    return clock.now_ms()


def test_throughput_minutes_come_from_the_heat_per_cluster_stream_and_topic(cluster, clock):
    cluster.create_stream("/a")
    cluster.create_stream("/b")
    cluster.create_topic("/a:one", partitions=2)
    cluster.create_topic("/b:two")
    _send(cluster, "/a:one", 120, size=10)
    _send(cluster, "/b:two", 60, size=20)
    now = _later(clock, 2)
    report = metrics.record(cluster, now_ms=now)
    assert report.minutes == 1440  # a first record catches up on the day of heat

    def written(scope, name, metric="write_messages"):
        s = metrics.series(cluster, scope, name, metric, 3600, now_ms=now)
        return sum(v * s.resolution_s for _, v in s.recorded)

    assert written("cluster", "") == 180
    assert written("stream", "/a") == 120
    assert written("stream", "/b") == 60
    assert written("topic", "/a:one") == 120
    # bytes as the heat counts them (values and record overhead)
    assert (
        written("topic", "/b:two", "write_bytes") == cluster.heat(3600).topics["/b:two"].write_bytes
    )
    assert written("topic", "/b:two", "write_bytes") > 60 * 20
    # rates per second: the busy minute holds its count / 60, the quiet ones 0, not None
    series = metrics.series(cluster, "topic", "/b:two", "write_messages", 3600, now_ms=now)
    assert series.resolution_s == 60 and len(series.points) == 60
    assert series.peak == pytest.approx(1.0)
    assert all(v is not None for _, v in series.points)
    # recording again adds nothing twice
    assert metrics.record(cluster, now_ms=now).minutes == 0
    assert written("cluster", "") == 180
    assert cluster.busiest("topic", window_s=3600)[0][0] == "/a:one"


def test_reads_count_and_hours_sum_minutes_and_keep_the_highest_gauge(cluster, clock):
    cluster.create_stream("/s")
    cluster.create_topic("/s:t")
    _send(cluster, "/s:t", 50)
    reader = Consumer(cluster, "/s:t", group_id="g", auto_offset_reset="earliest")
    got = 0
    while got < 50:
        got += sum(len(r) for r in reader.poll(1000).values())
    reader.close()  # closing flushes the read heat and commits the offsets
    now = _later(clock, 2)
    metrics.record(cluster, now_ms=now)
    day = metrics.series(cluster, "cluster", "", "read_messages", 7 * 86400, now_ms=now)
    assert day.resolution_s == 3600
    assert sum(v * 3600 for _, v in day.recorded) == pytest.approx(50)
    # a gauge: lag 0 now, 30 a minute later; the hour keeps the highest
    assert metrics.series(cluster, "group", "g", "lag_messages", 3600, now_ms=now).latest == 0
    _send(cluster, "/s:t", 30)
    metrics.record(cluster, now_ms=now + MINUTE)
    lag = metrics.series(cluster, "group", "g", "lag_messages", 3600, now_ms=now + MINUTE)
    assert [v for _, v in lag.recorded][-2:] == [0, 30]
    hours = metrics.series(cluster, "group", "g", "lag_messages", 7 * 86400, now_ms=now + MINUTE)
    assert hours.peak == 30


def test_the_history_is_bounded_in_series_and_age(cluster, clock, monkeypatch):
    monkeypatch.setattr(metrics, "TOP_TOPICS", 2)
    cluster.create_stream("/s")
    for name, count in (("busy", 30), ("mid", 20), ("quiet", 10)):
        cluster.create_topic(f"/s:{name}")
        _send(cluster, f"/s:{name}", count)
    now = _later(clock, 2)
    metrics.record(cluster, now_ms=now)
    assert [n for n, _ in cluster.busiest("topic", limit=5)] == ["/s:busy", "/s:mid"]
    quiet = metrics.series(cluster, "topic", "/s:quiet", "write_messages", 3600, now_ms=now)
    assert quiet.peak == 0  # not among the busiest: no series, read as nothing written
    # two days on, the minutes are gone and the hours stay
    later = now + 2 * 86400 * 1000
    metrics.record(cluster, now_ms=later)
    old_minutes = metrics.series(cluster, "cluster", "", "write_messages", 86400, now_ms=now)
    assert old_minutes.points and old_minutes.recorded == []
    hours = metrics.series(cluster, "cluster", "", "write_messages", 7 * 86400, now_ms=later)
    assert sum(v * 3600 for _, v in hours.recorded) == pytest.approx(60)


def test_replication_throughput_is_steady_over_a_window_and_lag_has_a_history(tmp_path, clock):
    with Cluster.open(tmp_path / "a", clock=clock) as a, Cluster.open(tmp_path / "b") as b:
        a.create_stream("/r")
        a.create_topic("/r:t")
        a.add_replica("/r", tmp_path / "b", paused=True)
        _send(a, "/r:t", 90)
        now = clock.now_ms()
        metrics.record(a, now_ms=now)
        name = metrics.replica_name("/r", str(tmp_path / "b"))
        lag = metrics.series(a, "replica", name, "lag_messages", 3600, now_ms=now)
        assert lag.latest == 90
        a.resume_replica("/r", tmp_path / "b")
        assert Replicator(a).run_once() == 90
        (info,) = a.replicas("/r")
        # the burst of one run is far above the pace over five minutes
        assert info.last_run_rate_messages > info.throughput_messages > 0
        assert info.throughput_window_s == metrics.THROUGHPUT_WINDOW_S
        rates = metrics.steady_rates(a, now_ms=now + 1)
        assert rates[name][0] == pytest.approx(90 / 240, rel=0.3)
        copied = metrics.series(a, "replica", name, "copied_messages", 3600)
        assert sum(v * 60 for _, v in copied.recorded) == pytest.approx(90)
        metrics.record(a, now_ms=now + MINUTE)
        lag = metrics.series(a, "replica", name, "lag_messages", 3600, now_ms=now + MINUTE)
        assert [v for _, v in lag.recorded][-2:] == [90, 0]
        assert b.topic("/r:t").partitions[0].log_end_offset == 90


def test_bad_questions_get_clear_errors(cluster):
    with pytest.raises(InvalidArgument, match="scope must be one of"):
        cluster.metrics("volume")
    with pytest.raises(InvalidArgument, match="a group's metrics are lag_messages"):
        cluster.metrics("group", "g", metric="write_messages")
    with pytest.raises(InvalidArgument, match="window_s"):
        cluster.metrics(window_s=10)
    with pytest.raises(InvalidArgument, match="window_s"):
        cluster.metrics(window_s=True)


def test_the_maintenance_thread_records_at_once(cluster):
    cluster.create_stream("/s")
    cluster.create_topic("/s:t")
    _send(cluster, "/s:t", 5)
    with Maintenance(cluster, interval_s=3600) as maintenance:
        deadline = time.monotonic() + scaled(10)
        while maintenance.last_metrics is None and time.monotonic() < deadline:
            time.sleep(0.05)
    assert maintenance.last_metrics is not None and maintenance.last_metrics.minutes > 0
    assert cluster.metrics().points  # the last complete minutes are there
    assert TopicPartition("/s:t", 0) in cluster.heat(60).partitions


def test_a_user_sees_the_history_and_heat_of_what_they_may_consume(cluster, clock):
    from engine import Principal
    from engine.errors import AccessDenied

    cluster.create_stream("/a", consume_perm="u:alice")
    cluster.create_stream("/m", consume_perm="u:mallory")
    cluster.create_topic("/a:secret")
    cluster.create_topic("/m:x")
    _send(cluster, "/a:secret", 90)
    _send(cluster, "/m:x", 30)
    now = _later(clock, 2)
    metrics.record(cluster, now_ms=now)
    mallory = cluster.as_principal(Principal("mallory"))
    for scope, name in (("topic", "/a:secret"), ("stream", "/a")):
        with pytest.raises(AccessDenied, match="may not see the metrics of stream /a"):
            mallory.metrics(scope, name)
    assert mallory.metrics("topic", "/m:x").name == "/m:x"
    assert mallory.metrics("cluster").name == ""  # the totals stay everyone's
    assert [n for n, _ in mallory.busiest("topic")] == ["/m:x"]
    assert [n for n, _ in cluster.busiest("topic")] == ["/a:secret", "/m:x"]
    # heat: listed or not, whatever the call
    for heat in (
        mallory.heat(3600),
        mallory.heat(3600, top=10),
        mallory.heat(3600, top=10, columns=60),
        mallory.heat(3600, columns=60),
    ):
        assert set(heat.topics) == {"/m:x"}
        assert {tp.topic for tp in heat.partitions} == {"/m:x"}
        assert heat.total.write_messages == 120
    ids = {pl.id for pl in cluster.topic("/m:x").partitions[0].partitionlets}
    assert set(mallory.heat(3600).partitionlets) <= ids
    assert set(cluster.heat(3600).partitionlets) > set(mallory.heat(3600).partitionlets)
