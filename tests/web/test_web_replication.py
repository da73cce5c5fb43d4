"""The replication page (web/replication.py) over real cluster directories, and the engine
helpers it reads with (engine.replication.links, upstream_links)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from engine import Cluster, Producer, Replicator
from engine import replication as engine_replication

STREAM = "/ring"


def _produce(cluster: Cluster, topic: str, count: int) -> None:
    producer = Producer(cluster)
    for i in range(count):
        producer.send(f"{STREAM}:{topic}", value=f"m{i}".encode())
    producer.flush()
    producer.close()


@pytest.fixture
def ring(cluster, tmp_path):
    """`cluster` (test) -> dc2 -> dc3 -> test, on /ring, settled."""
    dc2 = Cluster.open(tmp_path / "dc2", name="dc2")
    dc3 = Cluster.open(tmp_path / "dc3", name="dc3")
    cluster.create_stream(STREAM, ttl=0)
    _produce(cluster, "a", 5)
    cluster.add_replica(STREAM, dc2.path)
    dc2.add_replica(STREAM, dc3.path)
    dc3.add_replica(STREAM, cluster.path)
    for c in (cluster, dc2, dc3, cluster):
        with Replicator(c) as r:
            r.run_once()
    yield cluster, dc2, dc3
    dc2.close()
    dc3.close()


def _page(client, url: str = "/replication") -> str:
    answer = client.get(url)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_data(as_text=True)


def _nodes(html: str) -> list[str]:
    return re.findall(r'data-node="([^"]+)"', html)


def _edges(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-edge="([^"]+)" data-state="([^"]+)"', html))


def _link_state(cluster: Cluster, target) -> str:
    [info] = [i for i in cluster.replicas(STREAM) if i.target == str(target.resolve())]
    return info.state


def steady(info):
    """A link's status without its rates over the last minutes."""
    return dataclasses.replace(info, throughput_messages=0.0, throughput_bytes=0.0)


def test_engine_links_list_every_link_of_every_stream(ring):
    test, dc2, _dc3 = ring
    test.create_stream("/other", ttl=0)
    test.add_replica("/other", dc2.path, paused=True)
    measured = engine_replication.links(test)
    assert [(i.stream, i.target) for i in measured] == [
        ("/other", str(dc2.path.resolve())),
        (STREAM, str(dc2.path.resolve())),
    ]
    assert [i.state for i in measured] == ["paused", "in_sync"]
    # the same links, measured alike; the steady rates slide with the clock between calls
    assert [steady(i) for i in measured] == [
        steady(i) for i in test.replicas("/other") + test.replicas(STREAM)
    ]
    # unmeasured: what the catalog recorded, nothing opened
    recorded = engine_replication.links(dc2, measure=False)
    assert [(i.stream, i.state, i.lag_messages) for i in recorded] == [(STREAM, "in_sync", 0)]
    [up] = engine_replication.upstream_links(test)
    assert (up.stream, up.source_id, up.source_stream) == (STREAM, ring[2].id, STREAM)
    assert [u.source_id for u in engine_replication.upstream_links(dc2)] == [test.id, test.id]


def test_a_ring_shows_three_nodes_and_three_edges_then_a_fourth_for_a_two_way_link(ring, client):
    test, dc2, dc3 = ring
    html = _page(client)
    assert sorted(_nodes(html)) == ["dc2", "dc3", "test"]
    assert _edges(html) == {
        "test->dc2": "in_sync",
        "dc2->dc3": "in_sync",
        "dc3->test": "in_sync",
    }
    assert 'role="img"' in html and "Replication graph: 3 clusters, 3 links" in html
    assert 'class="node node-this"' in html and dc2.id[:8] in html
    assert "<marker" in html and "marker-end=" in html
    assert "need attention" not in html
    # a two-way link: dc2 -> test as well; the two edges are curved and distinct
    dc2.add_replica(STREAM, test.path)
    html = _page(client, "/replication/live")
    assert len(_nodes(html)) == 3
    assert set(_edges(html)) == {"test->dc2", "dc2->test", "dc2->dc3", "dc3->test"}
    paths = dict(
        re.findall(
            r'data-edge="([^"]+)"[^>]*>\s*<title>.*?</title>\s*<path class="edge-hit" d="([^"]+)"',
            html,
            re.S,
        )
    )
    assert " Q" in paths["test->dc2"] and " Q" in paths["dc2->test"]
    assert paths["test->dc2"] != paths["dc2->test"]
    assert " Q" not in paths["dc2->dc3"]


def test_lag_shows_on_the_edge_and_in_the_table(ring, client):
    test, dc2, _ = ring
    test.pause_replica(STREAM, dc2.path)
    _produce(test, "a", 7)
    html = _page(client)
    assert _edges(html)["test->dc2"] == "paused"
    assert "paused · 7 msg" in html
    row = re.search(r'<tr data-link="/ring [^"]*dc2">(.*?)</tr>', html, re.S).group(1)
    assert ">paused<" in row and '<td class="num">7</td>' in row


def test_pause_resume_and_remove_change_the_link_in_the_engine(ring, client):
    test, dc2, _ = ring
    form = {"stream": STREAM, "target": str(dc2.path), "csrf_token": client.csrf}
    htmx = {"HX-Request": "true"}
    answer = client.post("/replication/pause", data=form, headers=htmx)
    assert answer.status_code == 200
    assert _link_state(test, dc2.path) == "paused"
    assert _edges(answer.get_data(as_text=True))["test->dc2"] == "paused"
    answer = client.post("/replication/resume", data=form, headers=htmx)
    assert _link_state(test, dc2.path) == "in_sync"
    assert _edges(answer.get_data(as_text=True))["test->dc2"] == "in_sync"
    # a plain form post (no htmx) goes back to the page
    answer = client.post("/replication/remove", data=form)
    assert answer.status_code == 302 and answer.headers["Location"].endswith("/replication")
    assert test.replicas(STREAM) == []
    assert "test->dc2" not in _edges(_page(client))
    # removing it again: the engine's message, in the flash area for htmx
    answer = client.post("/replication/remove", data=form, headers=htmx)
    assert answer.headers.get("HX-Retarget") == "#flash"
    assert "has no replica" in answer.get_data(as_text=True)


def test_actions_need_the_csrf_token(ring, client):
    test, dc2, _ = ring
    answer = client.post("/replication/pause", data={"stream": STREAM, "target": str(dc2.path)})
    assert answer.status_code == 400
    assert _link_state(test, dc2.path) == "in_sync"


def test_a_plain_user_is_refused_by_the_engine_and_told_so(ring, user_client):
    test, dc2, _ = ring
    answer = user_client.post(
        "/replication/pause",
        data={"stream": STREAM, "target": str(dc2.path), "csrf_token": user_client.csrf},
        headers={"HX-Request": "true"},
    )
    assert answer.headers.get("HX-Retarget") == "#flash"
    assert "AccessDenied" in answer.get_data(as_text=True)
    assert _link_state(test, dc2.path) == "in_sync"


def test_a_broken_link_shows_in_the_banner_and_as_a_broken_node(ring, client, tmp_path):
    test, dc2, _ = ring
    dc2.close()
    (tmp_path / "dc2").rename(tmp_path / "dc2-away")
    html = _page(client)
    banner = re.search(r'<section class="replication-problems".*?</section>', html, re.S)
    assert banner is not None
    assert "broken" in banner.group(0) and "no cluster at" in banner.group(0)
    assert "/ring" in banner.group(0)
    assert _edges(html)["test->dc2"] == "broken"
    assert 'node-broken" data-node="dc2"' in html
    assert ">unreachable<" in html
    assert "dc2->dc3" not in _edges(html)  # dc2's own links cannot be read now


def test_a_conflict_names_topic_partition_and_offset_in_the_banner(cluster, client, tmp_path):
    other = Cluster.open(tmp_path / "dc2", name="dc2")
    try:
        cluster.create_stream(STREAM, ttl=0)
        cluster.add_replica(STREAM, other.path)
        _produce(cluster, "t", 3)
        _produce(other, "t", 2)  # the same partition, written in both before a sync
        with Replicator(cluster) as r:
            r.run_once()
        html = _page(client)
        assert _edges(html)["test->dc2"] == "conflict"
        banner = re.search(r'<section class="replication-problems".*?</section>', html, re.S)
        assert banner is not None
        assert "topic <code>/ring:t</code> partition 0 offset 0" in banner.group(0)
        assert "CONFLICT" in html and "edge-warning" in html
    finally:
        other.close()


def test_add_a_link_from_the_form(cluster, client, tmp_path):
    other = Cluster.open(tmp_path / "dc2", name="dc2")
    other.close()
    cluster.create_stream(STREAM, ttl=0)
    answer = client.post(
        "/replication/add",
        data={
            "stream": STREAM,
            "target": str(tmp_path / "dc2"),
            "target_stream": "/copy",
            "paused": "on",
            "csrf_token": client.csrf,
        },
        headers={"HX-Request": "true"},
    )
    assert answer.status_code == 200
    assert answer.headers.get("HX-Trigger") == "replication-changed"
    assert "Added:" in answer.get_data(as_text=True)
    [info] = cluster.replicas(STREAM)
    assert (info.target_stream, info.state) == ("/copy", "paused")


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"stream": "", "target": "/x"}, "stream", "Give the stream"),
        ({"stream": "/nope", "target": "/x"}, "stream", "nope"),
        ({"stream": "bad name", "target": "/x"}, "stream", "bad name"),
        ({"stream": STREAM, "target": ""}, "target", "Give a cluster directory"),
        ({"stream": STREAM, "target": "MISSING"}, "target", "no cluster at"),
        ({"stream": STREAM, "target": "http://"}, "target", "no host"),
        ({"stream": STREAM, "target": "DC2", "target_stream": "no-slash"}, "target_stream", ""),
    ],
)
def test_add_with_bad_input_shows_the_error_next_to_its_field(
    cluster, client, tmp_path, fields, field, message
):
    Cluster.open(tmp_path / "dc2", name="dc2").close()
    cluster.create_stream(STREAM, ttl=0)
    data = dict(fields)
    data["target"] = {"MISSING": str(tmp_path / "missing"), "DC2": str(tmp_path / "dc2")}.get(
        data["target"], data["target"]
    )
    answer = client.post(
        "/replication/add",
        data={**data, "csrf_token": client.csrf},
        headers={"HX-Request": "true"},
    )
    html = answer.get_data(as_text=True)
    assert answer.status_code == 200 and "HX-Trigger" not in answer.headers
    error = re.search(rf'<span class="field-error" id="link-{field}-error">(.*?)</span>\n', html)
    assert error is not None and message in error.group(1), html
    assert f'id="link-{field}"' in html and 'aria-invalid="true"' in html
    assert cluster.replicas(STREAM) == []
    assert not (tmp_path / "missing").exists()  # nothing created on the way
    # without htmx: the whole page, with the error, as a 400
    answer = client.post("/replication/add", data={**data, "csrf_token": client.csrf})
    assert answer.status_code == 400
    assert message in answer.get_data(as_text=True)


def test_the_page_with_no_links_says_how_to_add_one(client):
    html = _page(client)
    assert _nodes(html) == ["test"] and _edges(html) == {}
    assert "No stream of this cluster is replicated yet" in html
    assert 'aria-label="Add a link"' in html
    assert 'hx-trigger="every 5s, replication-changed from:body"' in html


def test_the_page_charts_the_first_twelve_links_and_says_where_the_rest_are(
    cluster, client, tmp_path
):
    from web.replication import LINK_CHARTS

    dc2 = Cluster.open(tmp_path / "dc2", name="dc2", volumes=1)
    try:
        for i in range(LINK_CHARTS + 1):
            cluster.create_stream(f"/s{i:02d}")
            cluster.add_replica(f"/s{i:02d}", dc2.path)
        html = _page(client)
    finally:
        dc2.close()
    slots = re.findall(r'class="chart-slot" id="chart-(link-\d+)"', html)
    assert slots == [f"link-{n}" for n in range(1, LINK_CHARTS + 1)]
    charted = re.findall(r"Loading the chart of (/s\d\d) to ", html)
    assert charted == [f"/s{i:02d}" for i in range(LINK_CHARTS)]
    assert f"The first {LINK_CHARTS} links are charted" in html
