"""Another console's cluster in the terminal console: `c` opens it read-only through that
console's JSON API (console/remote.py), as the owner of the API token in
PLET_API_TOKEN_<NAME>; without the variable it is listed but cannot be chosen. The other
console is a real `plet web` in its own process, over https with a private CA's
certificate (tests/remote_console.py)."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Tree

from console.app import ConsoleApp
from console.remote import token_variable
from console.screens.clusters import ClustersScreen
from console.screens.remote_cluster import RemoteClusterScreen
from engine import Cluster, Producer
from engine.served_clusters import ServedCluster
from tests.remote_console import RemotePletWeb, make_pki

STREAM = "/ring"
TOPIC = f"{STREAM}:orders-in-eu"


@pytest.fixture(scope="module")
def eu(tmp_path_factory):
    root = tmp_path_factory.mktemp("tui-remote")
    pki = make_pki(root)
    with Cluster.open(root / "eu", name="eu") as cluster:
        cluster.add_user("admin", "eu-admin-password-1", admin=True)
        cluster.add_user("bob", "bob-password-1")
        cluster.create_stream(STREAM, consume_perm="u:bob")
        cluster.create_stream("/secret", consume_perm="u:admin")
        cluster.create_topic(TOPIC, partitions=1)
        cluster.create_topic("/secret:plans", partitions=1)
        producer = Producer(cluster)
        for i in range(3):
            producer.send(TOPIC, value=b'{"order": %d, "in": "eu"}' % i).get(10)
        producer.close()
        token = cluster.create_api_token("bob")
    remote = RemotePletWeb(root / "eu", "--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    try:
        yield ServedCluster("eu", url=remote.url, ca_file=str(pki.ca)), token
    finally:
        remote.stop()


def _rows(app) -> list[list[str]]:
    table = app.screen.query_one("#remote-messages", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


@pytest.mark.asyncio
async def test_c_opens_another_consoles_cluster_read_only(eu, cluster_path, until, monkeypatch):
    remote, token = eu
    monkeypatch.setenv(token_variable(remote), token)
    Cluster.open(cluster_path, name="here").close()
    here = ServedCluster("here", path=str(cluster_path.resolve()), main=True)
    app = ConsoleApp(cluster_path, clusters=[here, remote], refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.cluster is not None)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ClustersScreen))
        await pilot.press("down", "enter")
        await until(pilot, lambda: isinstance(app.screen, RemoteClusterScreen))
        screen = app.screen
        await until(pilot, lambda: screen.loaded_streams == [STREAM, "/secret"])
        status = screen.query_one("#remote-status")
        assert "as bob" in str(status.render())
        tree = screen.query_one(Tree)
        ring, secret = tree.root.children
        ring.expand()
        await until(pilot, lambda: len(ring.children) == 1)
        tree.select_node(ring.children[0])
        await until(pilot, lambda: len(_rows(app)) == 3)
        assert any('"in": "eu"' in cell for row in _rows(app) for cell in row)
        # bob's rights, not more: /secret's messages are not his to read
        secret.expand()
        await until(pilot, lambda: len(secret.children) == 1)
        tree.select_node(secret.children[0])
        await until(pilot, lambda: "answered 403" in str(status.render()))
        assert "eu" in app.sub_title
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RemoteClusterScreen))
        assert app.cluster.name == "here"  # this machine's cluster, as it was


@pytest.mark.asyncio
async def test_without_a_token_the_remote_is_listed_but_not_offered(
    eu, cluster_path, until, monkeypatch
):
    remote, _ = eu
    monkeypatch.delenv(token_variable(remote), raising=False)
    Cluster.open(cluster_path, name="here").close()
    here = ServedCluster("here", path=str(cluster_path.resolve()), main=True)
    app = ConsoleApp(cluster_path, clusters=[here, remote], refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.cluster is not None)
        await pilot.press("c")  # one cluster it can open: no switcher
        await pilot.pause(0.1)
        assert not isinstance(app.screen, ClustersScreen)
        screen = ClustersScreen(app.clusters, "here")
        app.push_screen(screen)
        await until(pilot, lambda: app.screen is screen)
        option = screen.query_one("#clusters-list").get_option("eu")
        assert option.disabled
        assert token_variable(remote) in str(option.prompt)


@pytest.mark.asyncio
async def test_a_refused_token_is_said_on_the_screen(eu, cluster_path, until, monkeypatch):
    remote, _ = eu
    monkeypatch.setenv(token_variable(remote), "plt_not-a-token")
    Cluster.open(cluster_path, name="here").close()
    here = ServedCluster("here", path=str(cluster_path.resolve()), main=True)
    app = ConsoleApp(cluster_path, clusters=[here, remote], refresh_s=60)
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: app.cluster is not None)
        app.action_switch_cluster("eu")
        await until(pilot, lambda: isinstance(app.screen, RemoteClusterScreen))
        status = app.screen.query_one("#remote-status")
        await until(pilot, lambda: "answered 401" in str(status.render()))
