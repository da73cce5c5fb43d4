"""engine.wire.names: the three forms of a wire topic name, the short name of every full name
that has one, and the bounded listing of Metadata for all topics."""

from __future__ import annotations

import pytest

from engine import Cluster, errors
from engine.wire.names import WireNames, check_separator


@pytest.mark.parametrize(
    ("name", "stream", "topic"),
    [
        ("car-17", "/kafka", "car-17"),
        ("apps.sensors..car-17", "/apps/sensors", "car-17"),
        ("/apps/sensors:car-17", "/apps/sensors", "car-17"),
        ("kafka..t", "/kafka", "t"),  # the default stream by its short name too
        ("a.b.c..d..e", "/a/b/c", "d..e"),  # split at the first separator
        ("a...t", "/a", ".t"),
        ("..x", "/kafka", "..x"),  # a separator at the start: a plain name
        ("a-b_c.d", "/kafka", "a-b_c.d"),
    ],
)
def test_a_wire_name_means_one_stream_and_topic(name, stream, topic):
    assert WireNames("/kafka").split(name) == (stream, topic)


@pytest.mark.parametrize(
    ("name", "said"),
    [
        (".a..t", "the part before '..' must be a stream path"),  # an empty segment
        ("a..", "after '..', invalid topic name ''"),
        ("/a:b:c", "invalid topic name 'b:c'"),  # a second ':' is the topic's
        ("a b", "invalid topic name"),
    ],
)
def test_a_name_of_no_stream_is_refused_with_its_reason(name, said):
    with pytest.raises(errors.InvalidName, match=said):
        WireNames("/kafka").split(name)


@pytest.mark.parametrize(
    ("separator", "full", "short"),
    [
        ("..", "/kafka:t", "t"),
        ("..", "/apps/sensors:car-17", "apps.sensors..car-17"),
        ("..", "/a:.t", "a...t"),
        ("..", "/kafka:a..b", None),  # plain, it would name stream /a
        ("..", "/v1.2/x:t", None),  # a segment with '.': no short name
        ("..", "/a/" + "b" * 250 + ":t", None),  # over 249 characters
        ("__", "/apps/sensors:t", "apps.sensors__t"),
        ("__", "/a_:t", None),  # 'a___t' would be /a:_t
        ("__", "/a:_t", "a___t"),
        ("__", "/my__app:t", None),
        ("__", "/kafka:__consumer_offsets", "__consumer_offsets"),
        ("__", "/kafka:changelog__x", None),
        (None, "/apps/sensors:t", None),  # turned off: full names only
        (None, "/kafka:a..b", "a..b"),
    ],
)
def test_the_short_name_of_a_topic_reads_back_as_itself(separator, full, short):
    names = WireNames("/kafka", separator)
    assert names.short(full) == short
    assert names.shown(full) == (short or full)
    if short is not None:
        assert names.full(short) == full


@pytest.mark.parametrize("separator", ["", ".", "x", "::", "_" * 9, 3])
def test_a_separator_is_punctuation_clients_accept(separator):
    with pytest.raises(errors.InvalidArgument, match="stream separator"):
        check_separator(separator)


@pytest.fixture
def cluster(tmp_path):
    with Cluster.open(tmp_path / "c", name="names") as cluster:
        yield cluster


def test_the_listing_pages_every_stream_default_first_and_stops_at_its_bound(cluster):
    for stream, topics in {
        "/a": ["x", "y"],
        "/kafka": ["k1", "k2", "b..c"],
        "/v1.2": ["hidden"],  # no short names
        "/z/q": ["w"],
    }.items():
        cluster.create_stream(stream)
        for topic in topics:
            cluster.create_topic(f"{stream}:{topic}", partitions=2)
    names = WireNames("/kafka")
    everything = list(names.listing(cluster, 100))
    assert everything == [
        ("k1", "/kafka:k1", 2),
        ("k2", "/kafka:k2", 2),
        ("a..x", "/a:x", 2),
        ("a..y", "/a:y", 2),
        ("z.q..w", "/z/q:w", 2),
    ]
    assert list(names.listing(cluster, 3)) == everything[:3]
    assert list(names.listing(cluster, 0)) == []
    # from a cursor (the full name of the last one given) on
    assert list(names.listing(cluster, 100, after="/kafka:k1")) == everything[1:]
    assert list(names.listing(cluster, 100, after="/a:x")) == everything[3:]
    # without a separator, the default stream's only, and 'b..c' is a plain name again
    assert list(WireNames("/kafka", None).listing(cluster, 100)) == [
        ("b..c", "/kafka:b..c", 2),
        *everything[:2],
    ]


def test_the_listing_reads_the_catalog_a_page_at_a_time(cluster, monkeypatch):
    from engine.wire import names as wire_names

    monkeypatch.setattr(wire_names, "_PAGE", 3)
    pages, read = [], []
    real = cluster.topic_listing

    def counted(**kwargs):
        page = real(**kwargs)
        pages.append(len(page.entries))
        read.extend(e.stream for e in page.entries)
        return page

    monkeypatch.setattr(cluster, "topic_listing", counted)
    for stream in ("/kafka", "/s", "/r.1"):
        cluster.create_stream(stream)
        for i in range(7):
            cluster.create_topic(f"{stream}:t{i}", partitions=1)
    listed = [name for name, _, _ in WireNames("/kafka").listing(cluster, 10)]
    assert listed == [f"t{i}" for i in range(7)] + ["s..t0", "s..t1", "s..t2"]
    assert max(pages) == 3
    # the second time round, /kafka and /r.1 (no short names) are left at their first page,
    # not read through: /kafka 7 + 3 topics read (not 7 + 7), /r.1 2 + 3 (not 2 + 7)
    assert read.count("/kafka") == 10
    assert read.count("/r.1") == 5
