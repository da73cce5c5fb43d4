"""One console, many clusters (web/clusters.py): each cluster under /c/<name>/, the main one
at / too, logins kept per cluster, a switcher in the header, graph nodes that link."""

from __future__ import annotations

import re

import pytest
from werkzeug.test import Client

from engine import Cluster, Producer, errors
from engine.served_clusters import ServedCluster, served_clusters
from tests.web.conftest import ADMIN, ADMIN_PASSWORD

STREAM = "/ring"
TOPIC = f"{STREAM}:only-in-dc2"
DC2_PASSWORD = "dc2-admin-password"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def console(tmp_path):
    """dc1 (main) replicating /ring to dc2; dc2 holds a topic of its own and its own admin."""
    from web.clusters import Console

    dc1 = Cluster.open(tmp_path / "dc1", name="dc1")
    dc2 = Cluster.open(tmp_path / "dc2", name="dc2")
    dc1.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
    dc2.add_user(ADMIN, DC2_PASSWORD, admin=True)
    dc1.create_stream(STREAM)
    dc1.add_replica(STREAM, dc2.path)
    dc2.create_topic(TOPIC, partitions=1)
    producer = Producer(dc2)
    producer.send(TOPIC, value=b"hello from dc2").get(10)
    producer.close()
    dc1.close()
    dc2.close()
    console = Console(served_clusters(tmp_path / "dc1"), testing=True)
    yield console
    console.close()


def log_in(client: Client, prefix: str, password: str):
    page = client.get(f"{prefix}/login")
    token = _CSRF.search(page.get_data(as_text=True)).group(1)
    return client.post(
        f"{prefix}/login", data={"username": ADMIN, "password": password, "csrf_token": token}
    )


def test_each_cluster_is_served_under_its_name(console):
    client = Client(console)
    assert log_in(client, "/c/dc2", DC2_PASSWORD).status_code == 302
    page = client.get(f"/c/dc2/topics{TOPIC}")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "hello from dc2" in html
    # its own URLs carry the prefix (url_for sees SCRIPT_NAME)
    assert 'href="/c/dc2/streams"' in html
    assert client.get(f"/c/dc2/topics{TOPIC}").status_code == 200
    assert client.get("/c/nowhere/").status_code == 404


def test_a_login_on_dc1_does_not_log_in_to_dc2(console):
    client = Client(console)
    answer = log_in(client, "", ADMIN_PASSWORD)
    assert answer.status_code == 302
    assert client.get("/streams").status_code == 200
    assert client.get("/c/dc1/streams").status_code == 200  # the main cluster, named
    # dc2 has its own users: dc1's session is not a dc2 session
    denied = client.get(f"/c/dc2/topics{TOPIC}")
    assert denied.status_code == 302
    assert denied.headers["Location"].startswith("/c/dc2/login?next=/c/dc2/topics/ring")
    # nor is dc1's password dc2's
    assert log_in(client, "/c/dc2", ADMIN_PASSWORD).status_code == 401
    # logged in to both, logging out of dc2 leaves dc1 logged in
    assert log_in(client, "/c/dc2", DC2_PASSWORD).status_code == 302
    page = client.get("/c/dc2/streams").get_data(as_text=True)
    token = _CSRF.search(page).group(1)
    assert client.post("/c/dc2/logout", data={"csrf_token": token}).status_code == 302
    assert client.get("/c/dc2/streams").status_code == 302
    assert client.get("/streams").status_code == 200


def test_the_login_comes_back_to_the_page_of_the_cluster_asked_for(console):
    client = Client(console)
    where = client.get(f"/c/dc2/topics{TOPIC}").headers["Location"]
    page = client.get(where)
    token = _CSRF.search(page.get_data(as_text=True)).group(1)
    back = client.post(
        where, data={"username": ADMIN, "password": DC2_PASSWORD, "csrf_token": token}
    )
    assert back.status_code == 302
    assert back.headers["Location"] == f"/c/dc2/topics{TOPIC}"


def test_each_cluster_has_its_own_api_under_its_name(console, tmp_path):
    with Cluster.open(tmp_path / "dc2") as dc2:
        token = dc2.create_api_token(ADMIN, "tests")
    client = Client(console)
    auth = {"Authorization": f"Bearer {token}"}
    listed = client.get("/c/dc2/api/v1/streams", headers=auth)
    assert listed.status_code == 200
    assert {s["path"] for s in listed.get_json()["streams"]} == {STREAM}
    # dc2's token is no token of dc1's
    assert client.get("/api/v1/streams", headers=auth).status_code == 401


def test_the_header_switches_between_the_clusters(console):
    client = Client(console)
    log_in(client, "", ADMIN_PASSWORD)
    html = client.get("/").get_data(as_text=True)
    switch = html[html.index('data-testid="cluster-switch"') : html.index("</details>")]
    assert re.findall(r'<a href="([^"]+)"', switch) == ["/c/dc1/", "/c/dc2/"]
    assert 'href="/c/dc1/" aria-current="true"' in switch
    log_in(client, "/c/dc2", DC2_PASSWORD)
    html = client.get("/c/dc2/").get_data(as_text=True)
    assert 'href="/c/dc2/" aria-current="true"' in html


def test_the_replication_graph_links_to_the_served_cluster(console):
    client = Client(console)
    log_in(client, "", ADMIN_PASSWORD)
    html = client.get("/replication").get_data(as_text=True)
    assert '<a class="node-link" href="/c/dc2/" aria-label="Open dc2">' in html
    assert html.count('class="node-link"') == 1  # this cluster (dc1) links nowhere
    # the link's target stream opens in dc2
    assert f'<code><a href="/c/dc2/streams{STREAM}">{STREAM}</a></code>' in html


def test_an_app_served_alone_shows_the_plain_badge(client):
    html = client.get("/").get_data(as_text=True)
    assert 'data-testid="cluster-switch"' not in html
    assert 'class="cluster-name"' in html


def test_a_linked_cluster_gone_since_it_was_listed_is_left_out(tmp_path):
    import shutil

    from web.clusters import Console

    with Cluster.open(tmp_path / "dc1", name="dc1") as dc1, Cluster.open(tmp_path / "dc2") as dc2:
        dc1.create_stream(STREAM)
        dc1.add_replica(STREAM, dc2.path)
    listed = served_clusters(tmp_path / "dc1")
    assert [c.name for c in listed] == ["dc1", "dc2"]
    shutil.rmtree(tmp_path / "dc2")
    console = Console(listed, testing=True)
    try:
        assert [c.name for c in console.clusters] == ["dc1"]
        assert [(c.name, why) for c, why in console.skipped] == [
            ("dc2", f"no cluster at {tmp_path / 'dc2'}")
        ]
        assert list(console.apps) == ["dc1"]
    finally:
        console.close()
    assert not (tmp_path / "dc2").exists()  # never made again
    # a cluster named on purpose is not left out silently
    with pytest.raises(errors.NotACluster, match="no cluster at"):
        Console([listed[0], ServedCluster("dc2", path=str(tmp_path / "dc2"))])


@pytest.fixture
def fake_server(monkeypatch):
    """`plet web`'s server faked: it stops at once; the list collects what it served."""
    import werkzeug.serving

    served = []

    class Server:
        server_port = 5999

        def serve_forever(self):
            raise KeyboardInterrupt

        def server_close(self):
            pass

    def make_server(host, port, app, threaded):
        served.append(app)
        return Server()

    monkeypatch.setattr(werkzeug.serving, "make_server", make_server)
    monkeypatch.delenv("PLET_ADMIN_PASSWORD", raising=False)
    return served


def test_plet_web_serves_the_named_and_linked_clusters_and_makes_their_admins(
    tmp_path, fake_server
):
    """The command's wiring: which clusters, their first passwords."""
    from click.testing import CliRunner

    from engine.cli import cli
    from web import state
    from web.clusters import Console

    served = fake_server
    with Cluster.open(tmp_path / "dc1", name="dc1") as dc1, Cluster.open(tmp_path / "dc2") as dc2:
        dc1.create_stream(STREAM)
        dc1.add_replica(STREAM, dc2.path)
    Cluster.open(tmp_path / "dc3", name="dc3").close()
    file = tmp_path / "clusters.toml"
    file.write_text(
        '[[cluster]]\nname = "eu"\nurl = "https://eu.example.com"\n\n'
        '[[cluster]]\nname = "us"\nurl = "https://us.example.com"\ntoken = "plr_us-secret"\n'
    )
    args = ["web", "--cluster", str(tmp_path / "dc1"), "--no-replicate"]
    result = CliRunner().invoke(cli, [*args, "--also", str(tmp_path / "dc3"), "--clusters", file])
    assert result.exit_code == 0, result.output
    [console] = served
    assert isinstance(console, Console)
    assert [c.name for c in console.clusters] == ["dc1", "dc3", "eu", "us", "dc2"]
    assert list(console.apps) == ["dc1", "dc3", "dc2"]
    assert list(console.remotes) == ["us"]  # served through its console (web/remote.py)
    for name in ("dc1", "dc2", "dc3"):
        assert f"http://127.0.0.1:5999/c/{name}/" in result.output
    assert "https://eu.example.com/  (another console" in result.output
    assert (
        "http://127.0.0.1:5999/c/us/  (through the console at https://us.example.com/"
        in result.output
    )
    assert "us-secret" not in result.output
    passwords = dict(re.findall(r"(dc\d)\s.*log in as admin / (\S+)", result.output))
    assert set(passwords) == {"dc2", "dc3"}  # dc1's is printed above, as before
    with Cluster.open(tmp_path / "dc2") as dc2:
        assert dc2.authenticate("admin", passwords["dc2"]) is not None
    assert all(state(app).cluster.closed for app in console.apps.values())


def test_plet_web_leaves_out_a_linked_cluster_it_cannot_open(tmp_path, fake_server, monkeypatch):
    from click.testing import CliRunner

    from engine.auth import users
    from engine.cli import cli

    with Cluster.open(tmp_path / "dc1", name="dc1") as dc1, Cluster.open(tmp_path / "dc2") as dc2:
        dc1.create_stream(STREAM)
        dc1.add_replica(STREAM, dc2.path)
    real = users.ensure_admin

    def ensure_admin(cluster, password=None):
        if cluster.name == "dc2":  # say, a directory this user may read but not write
            raise errors.StorageError("attempt to write a readonly database")
        return real(cluster, password)

    monkeypatch.setattr(users, "ensure_admin", ensure_admin)
    args = ["web", "--cluster", str(tmp_path / "dc1"), "--no-replicate"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    [console] = fake_server
    assert [c.name for c in console.clusters] == ["dc1"]
    assert "not serving dc2" in result.output
    # named on purpose (--also), it is an error
    result = CliRunner().invoke(cli, [*args, "--also", str(tmp_path / "dc2"), "--no-linked"])
    assert result.exit_code == 1
    assert "readonly database" in result.output
