"""`engine.policies.sources`: where each of a topic's policies comes from, as both consoles
show it (the topic's own override, its stream's value set away from the default, or the
default)."""

from __future__ import annotations

from engine.policies import DEFAULT, STREAM, TOPIC, TOPIC_POLICIES, validate
from engine.policies import sources as policy_sources


def test_topic_then_stream_then_default():
    stream = validate({"ttl": 90, "compact": True})
    got = policy_sources(stream, {"compact": False, "retention_bytes": 10})
    assert list(got) == list(TOPIC_POLICIES)
    assert got["compact"] == TOPIC  # overridden, even back to the default's value
    assert got["retention_bytes"] == TOPIC
    assert got["ttl"] == STREAM
    assert got["max_message_bytes"] == DEFAULT


def test_a_stream_value_equal_to_the_default_is_the_default():
    stream = validate({"ttl": validate({})["ttl"]})
    assert set(policy_sources(stream, {}).values()) == {DEFAULT}
