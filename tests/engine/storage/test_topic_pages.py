"""Pages of topics(): every (limit, offset) gives exactly the slice of the ordered names,
whether the page is read from the front of the name index or, past the middle, from its
end; after= pages by name."""

from __future__ import annotations

import pytest


@pytest.fixture
def stream(cluster):
    cluster.create_stream("/s")
    for i in range(37):
        cluster.create_topic(f"/s:t{i:03d}")
    return cluster


def test_every_page_is_the_right_slice(stream):
    names = [f"t{i:03d}" for i in range(37)]
    for limit in (1, 5, 10, 50):
        for offset in range(40):
            got = [t.topic for t in stream.topics("/s", limit=limit, offset=offset)]
            assert got == names[offset : offset + limit], (limit, offset)
    assert [t.topic for t in stream.topics("/s", offset=30)] == names[30:]


def test_after_pages_by_name(stream):
    assert stream.topic_names("/s", limit=3, after="t010") == ["/s:t011", "/s:t012", "/s:t013"]
    assert stream.topic_names("/s", after="t036") == []
    assert stream.topic_names("/s", prefix="t01", after="t015") == [
        f"/s:t01{i}" for i in range(6, 10)
    ]
