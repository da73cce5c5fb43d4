"""The Streams list and the Stream page through Flask's test client: search, sort, paging,
creating streams and topics, editing policies (inline errors, ACE parse errors, a denied
edit), keyset paging of topics, replication links, and escaping of what users type."""

from __future__ import annotations

import re
from html import unescape

import pytest

HTMX = {"HX-Request": "true"}


def _text(answer) -> str:
    return answer.get_data(as_text=True)


def _paths(html: str) -> list[str]:
    """Stream paths in the list's rows, in order."""
    return re.findall(r'<td class="wrap"><a href="/streams/[^"]+">([^<]+)</a>', html)


def _topics(html: str) -> list[str]:
    """Topic names in the topics table, in order."""
    return re.findall(r'<input type="hidden" name="name" value="([^"]+)">', html)


@pytest.fixture
def many_streams(cluster):
    for i in range(25):
        cluster.create_stream(f"/apps/s-{i:02d}", ttl=3600 * (i + 1))
    cluster.create_stream("/ops/logs", compact=True, ttl=0)
    for i in range(3):
        cluster.create_topic(f"/ops/logs:t{i}", partitions=2)
    cluster.create_topic("/apps/s-03:a")
    return cluster


# --- the list ------------------------------------------------------------------------------


def test_list_shows_every_stream_with_its_facts(client, many_streams):
    html = _text(client.get("/streams?size=50"))
    assert _paths(html) == [f"/apps/s-{i:02d}" for i in range(25)] + ["/ops/logs"]
    assert "Streams 1–26 of 26." in html
    logs = html[html.index(">/ops/logs<") :]
    assert '<td class="num">3</td>' in logs  # topics
    assert '<td class="num">forever</td>' in logs and "<td>yes</td>" in logs  # TTL, compact
    assert '<th scope="col" aria-sort="ascending">Path' in html


def test_search_is_a_path_prefix_with_or_without_the_slash(client, many_streams):
    for query in ("ops", "/ops", "/ops/l"):
        assert _paths(_text(client.get(f"/streams?q={query}"))) == ["/ops/logs"]
    html = _text(client.get("/streams?q=/apps/s-1"))
    assert _paths(html) == [f"/apps/s-{i}" for i in range(10, 20)]
    assert "whose path starts with <code>/apps/s-1</code>" in html
    html = _text(client.get("/streams?q=nothing"))
    assert _paths(html) == [] and "No stream's path starts with <code>/nothing</code>" in html


def test_search_as_you_type_gets_the_list_alone(client, many_streams):
    html = _text(client.get("/streams?q=ops", headers=HTMX))
    assert "<html" not in html and 'id="stream-list"' not in html
    assert _paths(html) == ["/ops/logs"]
    page = _text(client.get("/streams"))
    search = re.search(r'<input type="search" name="q"[^>]*>', page).group(0)
    assert 'hx-trigger="input changed delay:300ms' in search
    assert 'hx-push-url="true"' in page and 'hx-target="#stream-list"' in page
    assert 'placeholder="Path prefix' in search


def test_paging_with_a_page_size_and_numbered_pages(client, many_streams):
    first = _text(client.get("/streams?size=20"))
    assert len(_paths(first)) == 20 and "Streams 1–20 of 26." in first
    assert 'href="/streams?size=20&amp;page=2"' in first or "page=2" in first
    assert 'aria-current="page">1<' in first
    second = _text(client.get("/streams?size=20&page=2"))
    assert _paths(second) == [f"/apps/s-{i:02d}" for i in range(20, 25)] + ["/ops/logs"]
    assert "Streams 21–26 of 26." in second and "Previous page" in second
    # a page past the end shows the last one; garbage falls back to the defaults
    assert _paths(_text(client.get("/streams?size=20&page=99"))) == _paths(second)
    assert len(_paths(_text(client.get("/streams?size=abc&page=-3")))) == 26


def test_path_descending_spans_every_page(client, many_streams):
    first = _paths(_text(client.get("/streams?size=20&order=desc")))
    second = _paths(_text(client.get("/streams?size=20&order=desc&page=2")))
    everything = [f"/apps/s-{i:02d}" for i in range(25)] + ["/ops/logs"]
    assert first + second == everything[::-1]


def test_sorting_by_size_or_topics_sorts_this_page_and_says_so(client, many_streams):
    html = _text(client.get("/streams?sort=topics&order=desc"))
    paths = _paths(html)
    assert paths[:2] == ["/ops/logs", "/apps/s-03"]
    assert "within this page only" in html
    assert 'aria-sort="descending">Topics' in html
    # by path, no such note
    assert "within this page only" not in _text(client.get("/streams"))


def test_hostile_search_text_is_escaped(client, many_streams):
    html = _text(client.get("/streams", query_string={"q": "<script>alert(1)</script>"}))
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    html = _text(client.get("/streams/ops/logs", query_string={"tq": '"><img src=x>'}))
    assert "<img src=x>" not in html and "&#34;&gt;&lt;img src=x&gt;" in html
    html = _text(client.get("/streams/ops/logs", query_string={"after": "<b>x</b>"}))
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html


# --- creating a stream -----------------------------------------------------------------


def test_create_stream_with_policies(client, cluster):
    answer = client.post(
        "/streams",
        data={
            "path": "/apps/new",
            "ttl": "3600",
            "default_partitions": "3",
            "auto_create": ["false"],
            "compact": ["false", "true"],
            "csrf_token": client.csrf,
        },
    )
    assert answer.status_code == 303 and answer.location.endswith("/streams/apps/new")
    info = cluster.stream("/apps/new")
    assert info.policies["ttl"] == 3600 and info.policies["default_partitions"] == 3
    assert info.policies["compact"] is True and info.policies["auto_create"] is False
    assert "Created stream /apps/new." in _text(client.get("/streams/apps/new"))


def test_create_stream_over_htmx_redirects_to_its_page(client, cluster):
    answer = client.post(
        "/streams", data={"path": "/x", "ttl": "0"}, headers={**HTMX, "X-CSRFToken": client.csrf}
    )
    assert answer.status_code == 204 and answer.headers["HX-Redirect"] == "/streams/x"
    assert cluster.stream("/x").policies["ttl"] == 0


def test_create_stream_with_a_bad_path_shows_the_error_inline(client, cluster):
    answer = client.post(
        "/streams", data={"path": "apps/no slash", "ttl": "-1", "csrf_token": client.csrf}
    )
    html = _text(answer)
    assert answer.status_code == 400
    path_input = re.search(r'<input type="text" id="create-path"[^>]*>', html).group(0)
    assert 'aria-invalid="true"' in path_input and 'value="apps/no slash"' in path_input
    assert 'id="create-path-error"' in html and "stream path" in html.lower()
    assert 'id="create-ttl-error"' in html and "must be at least 0" in html
    assert cluster.stream_count() == 0
    # the same over htmx: the form alone, swapped in place
    html = _text(
        client.post(
            "/streams", data={"path": "/a/../b"}, headers={**HTMX, "X-CSRFToken": client.csrf}
        )
    )
    assert html.lstrip().startswith("<form") and 'id="create-path-error"' in html


def test_create_an_existing_stream_says_so(client, cluster):
    cluster.create_stream("/dup")
    html = _text(client.post("/streams", data={"path": "/dup", "csrf_token": client.csrf}))
    assert 'id="create-path-error"' in html and "exists" in html


def test_a_post_without_csrf_token_changes_nothing(client, cluster):
    answer = client.post("/streams", data={"path": "/nope"})
    assert answer.status_code == 400
    assert cluster.stream_count() == 0


# --- the stream page -------------------------------------------------------------------


def test_stream_page_shows_facts_and_every_policy(client, cluster):
    cluster.create_stream("/apps/sensors", ttl=86400, default_partitions=2)
    cluster.create_topic("/apps/sensors:car-1")
    html = _text(client.get("/streams/apps/sensors"))
    assert "<h1>Stream <code>/apps/sensors</code></h1>" in html
    for name in (
        "ttl",
        "default_partitions",
        "auto_create",
        "compact",
        "min_compaction_lag_ms",
        "delete_retention_ms",
        "timestamp_type",
        "max_message_bytes",
        "produce_perm",
        "consume_perm",
        "topic_perm",
        "copy_perm",
        "admin_perm",
    ):
        assert f'id="policy-{name}" name="{name}"' in html, name
    assert 'name="ttl" value="1 d"' in html  # as the lists show it
    assert "car-1" in html and 'hx-get="/streams/apps/sensors/~/replicas"' in html


def test_unknown_and_invalid_streams(client):
    assert client.get("/streams/no/such").status_code == 404
    assert client.get("/streams/bad%20name").status_code == 400


def _policies(client, path: str, headers=None, **values):
    data = {k: v for k, v in values.items()}
    if headers is None:
        data["csrf_token"] = client.csrf
    return client.post(f"/streams{path}/~/policies", data=data, headers=headers or {})


def test_durations_are_taken_with_units(client, cluster):
    cluster.create_stream("/apps/logs")
    answer = _policies(client, "/apps/logs", ttl="2d", min_compaction_lag_ms="90m")
    assert answer.status_code == 303
    policies = cluster.stream("/apps/logs").policies
    assert policies["ttl"] == 172_800 and policies["min_compaction_lag_ms"] == 5_400_000
    answer = _policies(client, "/apps/logs", ttl="500ms")
    assert answer.status_code == 400
    assert "&#39;500ms&#39; is not a whole number of seconds" in _text(answer)
    assert cluster.stream("/apps/logs").policies["ttl"] == 172_800


def test_edit_policies_round_trip(client, cluster):
    cluster.create_stream("/apps/sensors")
    answer = _policies(
        client,
        "/apps/sensors",
        ttl="3600",
        compact=["false", "true"],
        auto_create=["false"],
        timestamp_type="log_append",
        max_message_bytes="2048",
        consume_perm="g:analysts | u:bob",
    )
    assert answer.status_code == 303
    policies = cluster.stream("/apps/sensors").policies
    assert policies["ttl"] == 3600 and policies["compact"] is True
    assert policies["auto_create"] is False and policies["timestamp_type"] == "log_append"
    assert (
        policies["max_message_bytes"] == 2048 and policies["consume_perm"] == "g:analysts | u:bob"
    )
    html = _text(client.get("/streams/apps/sensors"))
    assert "Saved the policies of /apps/sensors." in html
    assert 'name="ttl" value="1 h"' in html
    assert re.search(r'id="policy-compact" name="compact" value="true" checked', html)
    # a form that leaves a policy out leaves it alone
    assert _policies(client, "/apps/sensors", ttl="60").status_code == 303
    assert cluster.stream("/apps/sensors").policies["compact"] is True


def test_edit_policies_over_htmx_swaps_the_form(client, cluster):
    cluster.create_stream("/s")
    html = _text(_policies(client, "/s", headers={**HTMX, "X-CSRFToken": client.csrf}, ttl="5"))
    assert html.lstrip().startswith("<form") and "Saved the policies." in html
    assert cluster.stream("/s").policies["ttl"] == 5


def test_invalid_policy_shows_inline_errors_and_changes_nothing(client, cluster):
    cluster.create_stream("/s", ttl=100)
    answer = _policies(client, "/s", ttl="soon", default_partitions="0", max_message_bytes="7")
    html = _text(answer)
    assert answer.status_code == 400
    ttl = re.search(r'<input type="text" id="policy-ttl"[^>]*>', html).group(0)  # durations: text
    assert 'aria-invalid="true"' in ttl and 'value="soon"' in ttl  # what was typed, to fix
    assert 'id="policy-ttl-error">policy &#39;ttl&#39; must be an integer' in html
    assert 'id="policy-default_partitions-error"' in html
    assert "2 policies are invalid" in html
    assert "policy-max_message_bytes-error" not in html  # 7 bytes is valid
    assert cluster.stream("/s").policies["ttl"] == 100
    assert cluster.stream("/s").policies["max_message_bytes"] == 1048576  # nothing saved


def test_ace_parse_error_points_at_the_bad_character(client, cluster):
    cluster.create_stream("/s")
    page = _text(_policies(client, "/s", admin_perm="u:al ice"))
    error = re.search(r'id="policy-admin_perm-error">(.*?)</div>', page, re.S).group(1)
    assert "unexpected &#39;ice&#39; at column 6" in error
    caret = re.search(r'<pre class="caret">(.*?)</pre>', error, re.S).group(1)
    line, mark = unescape(caret).split("\n")
    assert line.strip() == "'u:al ice'"
    assert mark.index("^") == line.index("'") + 6  # under the "i" of "ice", column 6
    assert cluster.stream("/s").policies["admin_perm"] == "u:<creator>"


def test_plain_user_is_denied_an_edit_and_nothing_changes(user_client, cluster):
    cluster.create_stream("/guarded", ttl=100)  # admin_perm u:<creator>: not alice
    page = _text(user_client.get("/streams/guarded"))
    assert "not change them (needs admin_perm on /guarded" in page
    assert ">Save policies</button>" not in page  # the reason on hover instead
    assert 'title="needs admin_perm on /guarded" data-denied="Save policies"' in page
    answer = _policies(user_client, "/guarded", ttl="1")
    assert answer.status_code == 403
    assert "Not saved:" in _text(answer) and "admin_perm" in _text(answer)
    html = _text(
        _policies(
            user_client, "/guarded", headers={**HTMX, "X-CSRFToken": user_client.csrf}, ttl="1"
        )
    )
    assert 'role="alert">Not saved:' in html
    assert cluster.stream("/guarded").policies["ttl"] == 100
    # the ACE lets her in: then she may
    cluster.edit_stream("/guarded", admin_perm="g:analysts")
    assert _policies(user_client, "/guarded", ttl="1").status_code == 303
    assert cluster.stream("/guarded").policies["ttl"] == 1


# --- topics ----------------------------------------------------------------------------


@pytest.fixture
def fleet(cluster):
    cluster.create_stream("/fleet", ttl=0)
    for i in range(120):
        cluster.create_topic(f"/fleet:car-{i:03d}")
    return cluster


def test_topics_page_by_name_with_after(client, fleet):
    html = _text(client.get("/streams/fleet"))
    assert _topics(html) == [f"car-{i:03d}" for i in range(50)]
    assert "Topics 1–50 of 120." in html
    assert 'href="/streams/fleet?after=car-049"' in html and "Last page of topics" in html
    html = _text(client.get("/streams/fleet?after=car-049", headers=HTMX))
    assert "<html" not in html
    assert _topics(html) == [f"car-{i:03d}" for i in range(50, 100)]
    assert "after <code>car-049</code>, of 120" in html and "First page of topics" in html
    html = _text(client.get("/streams/fleet?after=car-099"))
    assert _topics(html) == [f"car-{i:03d}" for i in range(100, 120)]
    assert "Next page of topics" not in html
    html = _text(client.get("/streams/fleet?last=1&tsize=20"))
    assert _topics(html) == [f"car-{i:03d}" for i in range(100, 120)]
    assert "Topics 101–120 of 120." in html


def test_topics_search_is_a_name_prefix(client, fleet):
    html = _text(client.get("/streams/fleet?tq=car-11", headers=HTMX))
    assert _topics(html) == [f"car-{i:03d}" for i in range(110, 120)]
    html = _text(client.get("/streams/fleet?tq=car-0&tsize=20"))
    assert _topics(html) == [f"car-{i:03d}" for i in range(20)]
    assert 'href="/streams/fleet?tq=car-0&amp;tsize=20&amp;after=car-019"' in html
    assert "Last page of topics" not in html  # a search is never counted
    assert "No topic's name contains" in _text(client.get("/streams/fleet?tq=zzz"))


def test_create_topic_and_errors_inline(client, cluster):
    cluster.create_stream("/s", default_partitions=2)
    html = _text(
        client.post(
            "/streams/s/~/topics",
            data={"name": "car-1", "partitions": ""},
            headers={**HTMX, "X-CSRFToken": client.csrf},
        )
    )
    assert "Created topic car-1." in html
    assert 'hx-swap-oob="innerHTML"' in html and "car-1" in html
    assert cluster.topic("/s:car-1").partition_count == 2
    answer = client.post(
        "/streams/s/~/topics",
        data={"name": "bad name", "partitions": "many", "csrf_token": client.csrf},
    )
    html = _text(answer)
    assert answer.status_code == 400
    assert 'id="topic-name-error"' in html and 'id="topic-partitions-error"' in html
    assert "whole number" in html
    answer = client.post("/streams/s/~/topics", data={"name": "car-1", "csrf_token": client.csrf})
    assert answer.status_code == 400 and "exists" in _text(answer)
    assert cluster.topic_count("/s") == 1
    answer = client.post(
        "/streams/s/~/topics", data={"name": "car-2", "partitions": "3", "csrf_token": client.csrf}
    )
    assert answer.status_code == 303
    assert cluster.topic("/s:car-2").partition_count == 3


def test_delete_topic_and_stream(client, fleet):
    html = _text(
        client.post(
            "/streams/fleet/~/topics/delete",
            data={"name": "car-000"},
            headers={**HTMX, "X-CSRFToken": client.csrf},
        )
    )
    assert "Deleted topic car-000." in html and _topics(html)[0] == "car-001"
    assert fleet.topic_count("/fleet") == 119
    page = _text(client.get("/streams/fleet"))
    assert 'hx-confirm="Delete stream /fleet with its 119 topics' in page
    answer = client.post("/streams/fleet/~/delete", headers={**HTMX, "X-CSRFToken": client.csrf})
    assert answer.status_code == 204 and answer.headers["HX-Redirect"] == "/streams"
    assert fleet.stream_count() == 0
    assert "Deleted stream /fleet." in _text(client.get("/streams"))


def test_plain_user_cannot_delete_a_stream(user_client, cluster):
    cluster.create_stream("/keep")
    answer = user_client.post("/streams/keep/~/delete", data={"csrf_token": user_client.csrf})
    assert answer.status_code == 403
    assert cluster.stream_count() == 1


# --- replication ----------------------------------------------------------------------


def test_replicas_fragment_lists_links_and_upstreams(client, cluster, tmp_path):
    from engine import Cluster

    cluster.create_stream("/s")
    html = _text(client.get("/streams/s/~/replicas", headers=HTMX))
    assert "No replicas" in html and "No upstreams" in html
    target = tmp_path / "dc2"
    Cluster.open(target, name="dc2").close()
    cluster.add_replica("/s", str(target))
    html = _text(client.get("/streams/s/~/replicas", headers=HTMX))
    assert str(target) in html and re.search(r'class="state state-[a-z_]+"', html)
    full = _text(client.get("/streams/s/~/replicas"))
    assert "<h1>Replication of <code>/s</code></h1>" in full


def test_plain_user_is_refused_topics_without_topic_perm(user_client, cluster):
    cluster.create_stream("/guarded")
    cluster.create_topic("/guarded:keep")
    answer = user_client.post(
        "/streams/guarded/~/topics", data={"name": "mine", "csrf_token": user_client.csrf}
    )
    assert answer.status_code == 403
    assert 'role="alert">' in _text(answer) and "topic_perm" in _text(answer)
    answer = user_client.post(
        "/streams/guarded/~/topics/delete",
        data={"name": "keep"},
        headers={**HTMX, "X-CSRFToken": user_client.csrf},
    )
    assert answer.headers.get("HX-Retarget") == "#flash" and "AccessDenied" in _text(answer)
    assert cluster.topic_names("/guarded") == ["/guarded:keep"]
