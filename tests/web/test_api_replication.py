"""The JSON API's replication endpoints (web/api.py), through Flask's test client."""

from __future__ import annotations

import gzip
import json
from importlib.metadata import entry_points

import pytest
from click.testing import CliRunner

from engine import Cluster
from engine.cli import cli
from web import close_app, create_app


@pytest.fixture
def app(cluster):
    cluster.create_stream("/s")
    cluster.create_stream("/other")
    app = create_app(cluster_path=cluster.path, testing=True)
    yield app
    close_app(app)


def post(client, op, body=None, token=None, gzipped=False):
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body if body is not None else {}).encode()
    if gzipped:
        data = gzip.compress(data)
        headers["Content-Encoding"] = "gzip"
    return client.post(f"/api/v1/replication/{op}", data=data, headers=headers)


def test_401_without_a_token_or_with_a_wrong_one(app, cluster):
    client = app.test_client()
    for token in (None, "", "plr_not-a-token"):
        got = post(client, "info", token=token)
        assert got.status_code == 401
        assert got.json["error"] == "Unauthorized"
        assert got.headers["WWW-Authenticate"].startswith("Bearer")
    got = client.post("/api/v1/replication/info", headers={"Authorization": "Basic eDp5"})
    assert got.status_code == 401
    # Every operation, before anything is read or done.
    got = post(client, "create_stream", {"stream": "/x", "policies": {}, "creator": "u"})
    assert got.status_code == 401
    assert "/x" not in [s.path for s in cluster.streams()]


def test_403_for_a_token_of_another_stream(app, cluster):
    client = app.test_client()
    token = cluster.create_replication_token("/other")
    got = post(client, "stream_policies", {"stream": "/s"}, token=token)
    assert got.status_code == 403 and "/other" in got.json["message"]
    got = post(client, "stream_policies", {"stream": "/other"}, token=token)
    assert got.status_code == 200 and got.json["policies"]["ttl"] >= 0


def test_a_valid_token_runs_the_target_protocol(app, cluster):
    client = app.test_client()
    token = cluster.create_replication_token("/new")  # may be issued before the stream exists
    assert token.startswith("plr_") and len(token) > 40
    info = post(client, "info", token=token).json
    assert info == {
        "cluster_id": cluster.id,
        "name": cluster.name,
        "stream": "/new",
        "features": ["transactions", "checksums"],
    }
    assert post(client, "stream_policies", {"stream": "/new"}, token=token).json == {
        "policies": None
    }
    assert (
        post(
            client, "check_admin", {"stream": "/new", "user": "x", "groups": []}, token=token
        ).status_code
        == 404
    )
    policies = cluster.stream("/s").policies if hasattr(cluster.stream("/s"), "policies") else {}
    body = {"stream": "/new", "policies": dict(policies), "creator": "alice"}
    assert post(client, "create_stream", body, token=token).status_code == 200
    topics = {"stream": "/new", "topics": [["t", 2]]}
    assert post(client, "ensure_topics", topics, token=token, gzipped=True).status_code == 200
    assert post(client, "topic_partitions", {"stream": "/new"}, token=token).json == {
        "topics": {"t": 2}
    }
    got = post(client, "end_offsets", topics, token=token)
    assert sorted(map(tuple, got.json["ends"])) == [("t", 0, 0), ("t", 1, 0)]
    got = post(
        client,
        "batch_at",
        {"stream": "/new", "topic": "t", "partition": 0, "offset": 0},
        token=token,
    )
    assert got.json == {"batch": None}
    got = post(
        client,
        "apply",
        {"stream": "/new", "topic": "t", "partition": 0, "batches": []},
        token=token,
    )
    assert got.json == {"messages": 0, "bytes": 0, "done": 0, "conflict": None}
    upstream = {"stream": "/new", "source": "/x", "source_stream": "/s", "source_id": "u-1"}
    assert post(client, "add_upstream", upstream, token=token).status_code == 200
    assert [u.source_id for u in cluster.upstreams("/new")] == ["u-1"]
    # A compressed answer when asked for one and worth it.
    got = client.post(
        "/api/v1/replication/topic_partitions",
        data=json.dumps({"stream": "/new"}),
        headers={"Authorization": f"Bearer {token}", "Accept-Encoding": "gzip"},
    )
    assert got.status_code == 200 and got.json == {"topics": {"t": 2}}


def test_bad_requests_are_400_and_tokens_are_stored_hashed(app, cluster):
    client = app.test_client()
    token = cluster.create_replication_token("/s")
    assert post(client, "drop_everything", {"stream": "/s"}, token=token).status_code == 400
    got = client.post(
        "/api/v1/replication/info",
        data=b"\x1f\x8bnot gzip",
        headers={"Authorization": f"Bearer {token}", "Content-Encoding": "gzip"},
    )
    assert got.status_code == 400
    bad = {"stream": "/s", "topic": "t", "partition": 0, "batches": [[1, 2]]}
    assert post(client, "apply", bad, token=token).status_code == 400
    assert post(client, "stream_policies", {"stream": "no-slash"}, token=token).status_code == 400
    stored = cluster.catalog.query("SELECT token_hash FROM replication_tokens")
    assert token not in repr(stored) and len(stored) == 1
    assert client.get("/api/v1/replication/info").status_code == 405


def test_cli_token_and_the_lazy_web_command(cluster_path):
    with Cluster.open(cluster_path) as c:
        c.create_stream("/s")
    runner = CliRunner()
    got = runner.invoke(cli, ["replica", "token", "--cluster", str(cluster_path), "/s"])
    assert got.exit_code == 0, got.output
    token = got.output.strip()
    with Cluster.open(cluster_path) as c:
        app = create_app(cluster_path=c.path, testing=True)
        try:
            assert post(app.test_client(), "info", token=token).status_code == 200
        finally:
            close_app(app)
    assert entry_points(group="partitionlet.commands")["web"].value == "web.cli:web_command"
    got = runner.invoke(cli, ["web", "--help"])
    assert got.exit_code == 0 and "--port" in got.output and "--host" in got.output
