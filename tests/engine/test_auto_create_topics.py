"""`Cluster.auto_create_topics`: what the wire's Metadata requests create, many names at
once, one catalog transaction per stream (issue 28, item 1)."""

from __future__ import annotations

import pytest

from engine import errors
from engine.auth.principal import Principal


def test_the_names_of_auto_creating_streams_are_created_together(cluster, monkeypatch):
    cluster.create_stream("/a", default_partitions=3, ttl=0)
    cluster.create_stream("/b", auto_create=False, ttl=0)
    cluster.create_topic("/a:existing", 5)
    ensured = []
    real = cluster.catalog.ensure_topics

    def counted(stream_id, topics, partitions):
        ensured.append(list(topics))
        return real(stream_id, topics, partitions)

    monkeypatch.setattr(cluster.catalog, "ensure_topics", counted)
    counts = cluster.auto_create_topics(
        ["/a:x", "/a:y", "/a:x", "/a:existing", "/b:z", "/missing:w"]
    )
    assert counts == {"/a:existing": 5, "/a:x": 3, "/a:y": 3}
    assert ensured == [["existing", "x", "y"]]  # one transaction for the stream's names
    assert cluster.topic("/a:x").partition_count == 3
    with pytest.raises(errors.UnknownTopic):
        cluster.topic("/b:z")  # its stream does not auto-create


def test_a_principal_without_topic_perm_creates_nothing(cluster):
    cluster.create_stream("/a", topic_perm="u:alice", produce_perm="p", ttl=0)
    bob = cluster.as_principal(Principal("bob"))
    assert bob.auto_create_topics(["/a:t"]) == {}
    with pytest.raises(errors.UnknownTopic):
        cluster.topic("/a:t")
    alice = cluster.as_principal(Principal("alice"))
    assert alice.auto_create_topics(["/a:t"]) == {"/a:t": 1}


def test_a_name_that_is_not_a_full_name_is_refused(cluster):
    with pytest.raises(errors.InvalidName):
        cluster.auto_create_topics(["no-stream"])
