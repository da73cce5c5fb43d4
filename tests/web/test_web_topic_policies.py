"""The topic page's Policies: each policy a topic may override with its effective value
and where it comes from (topic, stream, default); the stream's topic_perm edits the
topic's overrides, checked as a stream's policies are (400 inline, never a 500)."""

from __future__ import annotations

import re
from html import unescape

from engine.policies import TOPIC_POLICIES, policy

HTMX = {"HX-Request": "true"}


def _text(answer) -> str:
    return answer.get_data(as_text=True)


def _rows(html: str) -> dict[str, tuple[str, str]]:
    """{policy: (effective value, source)} of the Policies table."""
    rows = re.findall(
        r'<tr data-policy="([a-z_]+)">.*?<td class="effective">(.*?)</td>\s*'
        r'<td class="source">(.*?)</td>',
        html,
        re.S,
    )
    return {name: (unescape(value), source) for name, value, source in rows}


def _save(client, name: str, overrides: dict[str, str], headers=None, **extra):
    data = {"csrf_token": client.csrf, "override": list(overrides), **overrides, **extra}
    return client.post(f"/topics/{name}/policies", data=data, headers=headers or {})


def test_the_page_shows_each_policy_its_value_and_where_it_comes_from(client, cluster):
    cluster.create_stream("/apps", ttl=90)
    cluster.create_topic("/apps:t", 1, policies={"compact": True})
    rows = _rows(_text(client.get("/topics/apps:t?tab=configs")))
    assert list(rows) == list(TOPIC_POLICIES)
    assert rows["compact"] == ("true", "topic")
    assert rows["ttl"] == ("90 s", "stream")  # a duration as the lists and forms show it
    assert rows["max_message_bytes"] == (str(policy("max_message_bytes").default), "default")


def test_an_override_is_set_and_unset(client, cluster):
    cluster.create_stream("/apps", ttl=90)
    cluster.create_topic("/apps:t", 1)
    answer = _save(client, "apps:t", {"ttl": "30", "retention_bytes": "1000"})
    assert answer.status_code == 303
    assert answer.headers["Location"].endswith("/topics/apps:t?tab=configs")  # back on its tab
    info = cluster.topic("/apps:t")
    assert info.overrides == {"ttl": 30, "retention_bytes": 1000}
    rows = _rows(_text(client.get("/topics/apps:t?tab=configs")))
    assert rows["ttl"] == ("30 s", "topic") and rows["retention_bytes"] == ("1000", "topic")
    # htmx: the form comes back saved; the unticked ttl goes back to the stream's
    html = _text(_save(client, "apps:t", {"retention_bytes": "1000"}, headers=HTMX))
    assert "Saved the topic's policies." in html
    assert _rows(html)["ttl"] == ("90 s", "stream")
    assert cluster.topic("/apps:t").overrides == {"retention_bytes": 1000}


def test_bad_values_answer_400_with_the_engines_message_inline(client, cluster):
    cluster.create_stream("/apps")
    cluster.create_topic("/apps:t", 1)
    limit = policy("max_message_bytes").max
    answer = _save(client, "apps:t", {"max_message_bytes": str(limit + 1), "ttl": "soon"})
    assert answer.status_code == 400
    html = unescape(_text(answer))
    assert "2 policies are invalid" in html
    assert f"policy 'max_message_bytes' must be from 1 to {limit}, got {limit + 1}" in html
    assert 'id="topic-policy-ttl-error"' in html and 'value="soon"' in html
    assert cluster.topic("/apps:t").overrides == {}
    # a policy of the whole stream, garbage names and a ticked box without a value
    for data in (
        {"default_partitions": "3"},
        {"no_such_policy": "1"},
        {"consume_perm": "p"},
    ):
        answer = _save(client, "apps:t", data)
        assert answer.status_code == 400, data
        assert "Not saved:" in _text(answer)
    answer = client.post(
        "/topics/apps:t/policies", data={"csrf_token": client.csrf, "override": "ttl"}
    )
    assert answer.status_code == 400
    assert cluster.topic("/apps:t").overrides == {}


def test_a_user_without_topic_perm_sees_them_read_only_and_is_refused(user_client, cluster):
    cluster.create_stream("/guarded", ttl=100, consume_perm="p")  # topic_perm: the creator
    cluster.create_topic("/guarded:t", 1)
    html = _text(user_client.get("/topics/guarded:t?tab=configs"))
    assert "not change them (needs topic_perm on /guarded" in html
    assert _rows(html)["ttl"] == ("100 s", "stream")
    assert 'name="override"' not in html and "Save topic policies" not in html
    answer = _save(user_client, "guarded:t", {"ttl": "1"})
    assert answer.status_code == 403
    assert "Not saved:" in _text(answer) and "topic_perm" in _text(answer)
    assert cluster.topic("/guarded:t").overrides == {}


def test_a_post_without_the_csrf_token_is_refused(client, cluster):
    cluster.create_stream("/apps")
    cluster.create_topic("/apps:t", 1)
    answer = client.post("/topics/apps:t/policies", data={"override": "ttl", "ttl": "1"})
    assert answer.status_code in (400, 403)
    assert cluster.topic("/apps:t").overrides == {}


def test_the_create_topic_form_sets_overrides_with_the_same_widget(client, cluster):
    cluster.create_stream("/apps", ttl=90)
    html = _text(client.get("/streams/apps"))
    form = re.search(r'<form id="create-topic".*?</form>', html, re.S).group(0)
    assert re.findall(r'name="override" value="([a-z_]+)"', form) == list(TOPIC_POLICIES)
    assert 'id="create-topic-ttl" name="ttl" value="90 s"' in form  # the stream's, to start from
    data = {"csrf_token": client.csrf, "name": "t", "override": ["compact"], "compact": "true"}
    answer = client.post("/streams/apps/~/topics", data={**data, "ttl": "5"})
    assert answer.status_code == 303
    assert cluster.topic("/apps:t").overrides == {"compact": True}  # ttl: not ticked
    # bad values and names: 400 inline, nothing created
    answer = client.post(
        "/streams/apps/~/topics", data={**data, "name": "u", "override": ["ttl"], "ttl": "-1"}
    )
    assert answer.status_code == 400
    assert 'id="create-topic-ttl-error">policy &#39;ttl&#39; must be at least 0' in _text(answer)
    answer = client.post(
        "/streams/apps/~/topics",
        data={**data, "name": "u", "override": ["default_partitions"], "default_partitions": "2"},
    )
    assert answer.status_code == 400
    assert "is a policy of the whole stream" in unescape(_text(answer))
    html = _text(
        client.post(
            "/streams/apps/~/topics",
            data={**data, "name": "u", "override": ["ttl"], "ttl": "soon"},
            headers=HTMX,
        )
    )
    assert 'id="create-topic-ttl-error"' in html and 'value="soon"' in html
    assert [t.topic for t in cluster.topics("/apps")] == ["t"]
