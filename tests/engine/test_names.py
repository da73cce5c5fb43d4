"""Naming rules of DESIGN ("Topic names"), through engine.names and through the Cluster API.

A stream path is '/' followed by one or more segments of [A-Za-z0-9._-], none '.' or '..';
a topic name is 1 to 249 characters of [A-Za-z0-9._-], not '.' or '..'; the whole string
must match (no trailing newline); anything else is refused with InvalidName, never changed.
"""

from __future__ import annotations

import pytest

from engine import errors, names
from tests.timing import scaled

VALID_STREAMS = [
    "/a",
    "/apps/sensors",
    "/A/b/C",
    "/x.y/z_w/-v-",
    "/...",  # three dots is an ordinary segment
    "/a/.b/c.",
    "/0/1/2/3/4/5/6/7/8/9",
    "/" + "s" * 300,
]

INVALID_STREAMS = [
    "",
    "/",
    "//",
    "a",
    "apps/sensors",
    "/a/",
    "//a",
    "/a//b",
    "/.",
    "/..",
    "/a/.",
    "/a/..",
    "/a/./b",
    "/a/../b",
    "/../a",
    "/a b",
    "/a:b",
    "/a\n",
    "/a\r",
    "/a\t",
    "\n/a",
    " /a",
    "/a ",
    "/é",
    "/a*",
    "/a\x00",
    "/a\\b",
]

VALID_TOPICS = ["t", "car-17", "T.x_y-z", "...", ".a", "a.", "0", "x" * 249, "-_-"]

INVALID_TOPICS = [
    "",
    ".",
    "..",
    "x" * 250,
    "a/b",
    "a:b",
    "a b",
    "a\n",
    "a\r\n",
    "\na",
    "é",
    "a\x00",
    "a*",
    "a,b",
    " a",
]


# --- engine.names ----------------------------------------------------------------------


@pytest.mark.parametrize("path", VALID_STREAMS)
def test_valid_stream_path_is_returned_unchanged(path):
    assert names.validate_stream_path(path) == path


@pytest.mark.parametrize("path", INVALID_STREAMS)
def test_invalid_stream_path_is_refused(path):
    with pytest.raises(errors.InvalidName):
        names.validate_stream_path(path)


@pytest.mark.parametrize("name", VALID_TOPICS)
def test_valid_topic_name_is_returned_unchanged(name):
    assert names.validate_topic_name(name) == name


@pytest.mark.parametrize("name", INVALID_TOPICS)
def test_invalid_topic_name_is_refused(name):
    with pytest.raises(errors.InvalidName):
        names.validate_topic_name(name)


def test_topic_name_length_limit_is_249():
    assert names.MAX_TOPIC_NAME == 249
    assert names.validate_topic_name("a" * 249) == "a" * 249
    with pytest.raises(errors.InvalidName, match="249"):
        names.validate_topic_name("a" * 250)


@pytest.mark.parametrize("value", [None, 1, b"/a", ["/a"]])
def test_non_strings_are_refused(value):
    with pytest.raises(errors.InvalidName):
        names.validate_stream_path(value)
    with pytest.raises(errors.InvalidName):
        names.validate_topic_name(value)
    with pytest.raises(errors.InvalidName):
        names.split_full_name(value)
    with pytest.raises(errors.InvalidName):
        names.resolve(value, "/s")


def test_invalid_name_is_a_value_error():
    assert issubclass(errors.InvalidName, ValueError)
    assert issubclass(errors.InvalidName, errors.PartitionletError)


def test_split_full_name():
    assert names.split_full_name("/apps/sensors:car-17") == ("/apps/sensors", "car-17")
    assert names.split_full_name("/a:" + "t" * 249) == ("/a", "t" * 249)


@pytest.mark.parametrize(
    "full",
    [
        "apps/sensors:car-17",  # no leading '/'
        "/apps/sensors",  # no topic
        "/apps/sensors:",  # empty topic
        ":t",
        "/a:b:c",  # the stream part '/a:b' is not a stream path
        "/a/..:t",
        "/a:..",
        "/a:.",
        "/a:t\n",
        "/a\n:t",
        "/a:" + "t" * 250,
        "/a:t/u",
    ],
)
def test_split_full_name_refuses(full):
    with pytest.raises(errors.InvalidName):
        names.split_full_name(full)


def test_resolve():
    assert names.resolve("/apps/sensors:car-17") == "/apps/sensors:car-17"
    assert names.resolve("/apps/sensors:car-17", "/other") == "/apps/sensors:car-17"
    assert names.resolve("car-17", "/apps/sensors") == "/apps/sensors:car-17"
    assert names.full_name("/apps/sensors", "car-17") == "/apps/sensors:car-17"


@pytest.mark.parametrize(
    ("name", "default_stream"),
    [
        ("car-17", None),  # a short name needs a default stream
        ("car 17", "/apps"),
        ("car-17\n", "/apps"),
        ("..", "/apps"),
        ("car-17", "apps"),  # a bad default stream
        ("car-17", "/apps/"),
        ("car-17", "/apps\n"),
        ("/apps:car 17", "/apps"),
        ("/apps\n:car", None),
    ],
)
def test_resolve_refuses(name, default_stream):
    with pytest.raises(errors.InvalidName):
        names.resolve(name, default_stream)


# --- through the Cluster API -------------------------------------------------------------


@pytest.mark.parametrize("path", INVALID_STREAMS)
def test_cluster_refuses_invalid_stream_path(cluster, path):
    with pytest.raises(errors.InvalidName):
        cluster.create_stream(path)
    assert cluster.streams() == []


@pytest.mark.parametrize("path", VALID_STREAMS)
def test_cluster_keeps_valid_stream_path_exactly(cluster, path):
    cluster.create_stream(path)
    assert cluster.stream(path).path == path
    assert [s.path for s in cluster.streams()] == [path]


def test_cluster_stream_paths_are_case_sensitive(cluster):
    cluster.create_stream("/Apps")
    cluster.create_stream("/apps")
    assert sorted(s.path for s in cluster.streams()) == ["/Apps", "/apps"]


@pytest.mark.parametrize("topic", INVALID_TOPICS)
def test_cluster_refuses_invalid_topic_name(cluster, topic):
    cluster.create_stream("/s")
    with pytest.raises(errors.InvalidName):
        cluster.create_topic(f"/s:{topic}")
    assert cluster.topic_count("/s") == 0
    assert cluster.topics("/s") == []


@pytest.mark.parametrize("topic", VALID_TOPICS)
def test_cluster_keeps_valid_topic_name_exactly(cluster, topic):
    cluster.create_stream("/s")
    cluster.create_topic(f"/s:{topic}")
    info = cluster.topic(f"/s:{topic}")
    assert info.name == f"/s:{topic}"
    assert [t.name for t in cluster.topics("/s")] == [f"/s:{topic}"]


def test_cluster_topic_names_are_case_sensitive(cluster):
    cluster.create_stream("/s")
    cluster.create_topic("/s:Topic")
    cluster.create_topic("/s:topic")
    assert [t.name for t in cluster.topics("/s")] == ["/s:Topic", "/s:topic"]


@pytest.mark.parametrize(
    "full", ["s:t", "/s", "/s:", "/s:t\n", "/s/..:t", "/s:..", "/s:" + "t" * 250, "/s :t"]
)
def test_cluster_refuses_invalid_full_names(cluster, full):
    cluster.create_stream("/s")
    with pytest.raises(errors.InvalidName):
        cluster.create_topic(full)
    with pytest.raises(errors.InvalidName):
        cluster.topic(full)
    assert cluster.topic_count("/s") == 0


def test_cluster_lookups_refuse_invalid_names(cluster):
    with pytest.raises(errors.InvalidName):
        cluster.stream("/a/../b")
    with pytest.raises(errors.InvalidName):
        cluster.delete_stream("/a\n")
    with pytest.raises(errors.InvalidName):
        cluster.delete_topic("/a:b c")
    with pytest.raises(errors.InvalidName):
        cluster.topics("not-a-path")


def test_producer_refuses_invalid_names_at_send(cluster):
    from engine import Producer

    cluster.create_stream("/s")
    producer = Producer(cluster, acks=1, default_stream="/s")
    try:
        for bad in ["t\n", "..", "a b", "/s:t\n", "/s/:t", "x" * 250]:
            with pytest.raises(errors.InvalidName):
                producer.send(bad, value=b"v")
        producer.flush()
    finally:
        producer.close()
    assert cluster.topic_count("/s") == 0


def test_producer_without_default_stream_refuses_short_names(cluster):
    from engine import Producer

    producer = Producer(cluster, acks=1)
    try:
        with pytest.raises(errors.InvalidName):
            producer.send("t", value=b"v")
    finally:
        producer.close()


def test_producer_short_name_resolves_against_default_stream(cluster):
    from engine import Producer

    cluster.create_stream("/apps/sensors")
    producer = Producer(cluster, acks=1, default_stream="/apps/sensors")
    try:
        meta = producer.send("car-17", value=b"v").get(timeout=scaled(10))
    finally:
        producer.close()
    assert meta.topic == "/apps/sensors:car-17"
    assert cluster.topic("/apps/sensors:car-17").name == "/apps/sensors:car-17"


def test_consumer_refuses_invalid_topic_names(cluster):
    from engine import Consumer

    cluster.create_stream("/s")
    with pytest.raises(errors.InvalidName):
        Consumer(cluster, "/s:bad name")
