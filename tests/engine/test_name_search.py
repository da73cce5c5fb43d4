"""Finding streams and topics by any part of their names (Cluster.search, engine/name_search.py)
and listing the topics of every stream (Cluster.topic_listing), on real catalog files."""

from __future__ import annotations

import sqlite3

import pytest

from engine import Cluster, errors
from engine.auth.principal import Principal


@pytest.fixture
def cluster(tmp_path):
    with Cluster.open(tmp_path / "c", name="search") as c:
        c.create_stream("/apps/fleet", default_partitions=1)
        c.create_stream("/apps/sensors", default_partitions=2, consume_perm="u:alice")
        c.create_stream("/ops", consume_perm="u:bob", default_partitions=1)
        for name in ("car-17", "truck-0042", "fleet-status", "old-car-9"):
            c.create_topic(f"/apps/sensors:{name}")
        c.create_topic("/apps/fleet:positions")
        c.create_topic("/ops:fleet-audit")
        yield c


def test_a_middle_fragment_finds_topics_across_streams(cluster):
    found = cluster.search("uck-00")
    assert found.topics == ["/apps/sensors:truck-0042"]
    assert found.streams == []
    fleet = cluster.search("fleet")
    # by how they match (exact, prefix, contains), streams first within each
    assert fleet.streams == ["/apps/fleet"]
    assert fleet.topics == ["/apps/sensors:fleet-status", "/ops:fleet-audit"]
    assert [h.match for h in fleet.hits] == ["prefix", "prefix", "contains"]
    assert fleet.total == 3 and not fleet.capped and not fleet.more


def test_a_nul_in_the_text_finds_nothing(cluster):
    # FTS5 would read the NUL as the end of its query ("unterminated string"); no name
    # holds one, so nothing matches, in every stream or in one
    for text in ("car\x00", "c\x00ar-17", "\x00\x00\x00"):
        found = cluster.search(text)
        assert found.hits == [] and found.total == 0
        assert cluster.search(text, stream="/apps/sensors").hits == []
    assert cluster.search("car-17").topics == ["/apps/sensors:car-17"]


def test_ranking_exact_then_prefix_then_contains(cluster):
    assert cluster.search("car").topics == ["/apps/sensors:car-17", "/apps/sensors:old-car-9"]
    exact = cluster.search("CAR-17")  # case folded
    assert exact.hits[0].name == "/apps/sensors:car-17" and exact.hits[0].match == "exact"
    assert cluster.search("ops").hits[0].name == "/ops"  # `ops` is the name of /ops
    assert cluster.search("ops").hits[0].match == "exact"


def test_paging_and_one_stream(cluster):
    first = cluster.search("car", limit=1)
    assert first.topics == ["/apps/sensors:car-17"] and first.more
    second = cluster.search("car", limit=1, offset=1)
    assert second.topics == ["/apps/sensors:old-car-9"] and not second.more
    assert cluster.search("fleet", stream="/ops").topics == ["/ops:fleet-audit"]
    assert cluster.search("fleet", stream="/ops").streams == []


def test_ace_filtering_keeps_what_the_principal_may_read(cluster):
    alice = cluster.as_principal(Principal("alice"))
    # names are not secret: every stream is searched, as the listings do
    assert "/ops:fleet-audit" in alice.search("fleet").topics
    readable = alice.search("fleet", perm="consume_perm")
    assert "/ops:fleet-audit" not in readable.topics
    assert "/apps/sensors:fleet-status" in readable.topics
    bob = cluster.as_principal(Principal("bob"))
    assert "/ops:fleet-audit" in bob.search("fleet", perm="consume_perm").topics
    with pytest.raises(errors.InvalidArgument, match="perm must be one of"):
        cluster.search("fleet", perm="read")


def test_triggers_keep_the_index_right(cluster):
    assert cluster.search("zebra").hits == []
    cluster.create_topic("/apps/fleet:zebra-crossing")
    assert cluster.search("bra-cross").topics == ["/apps/fleet:zebra-crossing"]
    cluster.delete_topic("/apps/fleet:zebra-crossing")
    assert cluster.search("bra-cross").hits == []
    cluster.create_stream("/zoo/zebras")
    cluster.create_topic("/zoo/zebras:stripes")
    assert cluster.search("zebra").streams == ["/zoo/zebras"]
    cluster.delete_stream("/zoo/zebras")
    assert cluster.search("zebra").hits == []
    assert cluster.search("stripes").hits == []  # the stream's topics went with it


def test_one_and_two_characters_are_refused_clearly(cluster):
    for text in ("c", "ca", "  ca  ", ""):
        with pytest.raises(errors.InvalidArgument, match="at least 3 characters"):
            cluster.search(text)
    with pytest.raises(errors.InvalidArgument, match="longer than"):
        cluster.search("x" * 500)
    with pytest.raises(errors.InvalidArgument):
        cluster.search("car", limit=-1)


def test_quotes_and_operators_are_plain_text(cluster):
    for text in ('"car', "car OR truck", "NEAR(a b)", "c*r", "col:umn"):
        assert cluster.search(text).hits == []


def test_an_old_catalog_gets_the_index_on_open(tmp_path):
    path = tmp_path / "old"
    with Cluster.open(path) as c:
        c.create_stream("/legacy")
        c.create_topic("/legacy:metrics-eu-west")
    conn = sqlite3.connect(path / "catalog.db")  # as an engine before the index left it
    with conn:
        for trigger in ("topic_added", "topic_deleted", "stream_added", "stream_deleted"):
            conn.execute(f"DROP TRIGGER topic_names_{trigger}")
        conn.execute("DROP TABLE topic_names")
        conn.execute("DROP INDEX topics_by_name")
    conn.close()
    with Cluster.open(path) as c:
        assert c.search("eu-we").topics == ["/legacy:metrics-eu-west"]
        assert c.search("legac").streams == ["/legacy"]
        c.create_topic("/legacy:metrics-us-east")  # and the triggers are back
        assert c.search("us-ea").topics == ["/legacy:metrics-us-east"]
        assert c.topic_listing(sort="name").entries[0].topic == "metrics-eu-west"


def test_many_matches_are_capped_and_said_so(tmp_path, monkeypatch):
    from engine import name_search

    monkeypatch.setattr(name_search, "MATCH_CAP", 5)
    with Cluster.open(tmp_path / "c") as c:
        c.create_stream("/s")
        for i in range(8):
            c.create_topic(f"/s:item-{i}")
        found = c.search("item")
        assert found.capped and found.total == 5 and len(found.hits) == 5


def test_topic_listing_sorts_and_pages_across_streams(cluster):
    def walk(**kw):
        names, after = [], None
        while True:
            page = cluster.topic_listing(limit=2, after=after, **kw)
            names += [e.name for e in page.entries]
            after = page.next_after
            if after is None:
                return names

    everything = walk(sort="name")
    assert everything == sorted(everything, key=lambda n: (n.split(":")[1], n))
    assert len(everything) == 6
    by_stream = walk(sort="stream")
    assert by_stream == sorted(by_stream, key=lambda n: tuple(n.split(":")))
    assert walk(sort="stream", descending=True) == by_stream[::-1]
    created = walk(sort="created")
    assert created[0] == "/apps/sensors:car-17" and created[-1] == "/ops:fleet-audit"
    cluster.add_partitions("/apps/fleet:positions", 5)
    assert walk(sort="partitions", descending=True)[0] == "/apps/fleet:positions"
    with pytest.raises(errors.InvalidArgument, match="sort must be one of"):
        cluster.topic_listing(sort="size")
    with pytest.raises(errors.InvalidArgument, match="not a cursor"):
        cluster.topic_listing(sort="name", after="garbage")


def test_auto_created_topics_are_found_and_counted_once(tmp_path):
    from engine import Producer

    with Cluster.open(tmp_path / "c") as c:
        c.create_stream("/auto", default_partitions=1)
        producer = Producer(c, acks=1)
        for name in ("alpha-one", "beta-two", "alpha-one"):
            producer.send(f"/auto:{name}", value=b"x")
        producer.flush()
        producer.close()
        assert c.topic_count("/auto") == 2  # the index's triggers are not topics
        assert c.search("ha-on").topics == ["/auto:alpha-one"]
