"""A cluster of another console, in a real browser: this console's cluster replicates to
another `plet web` (its own process, cluster `eu`, over https with a private CA's
certificate); the graph's node opens eu under this console's /c/<name>/ (web/remote.py),
eu's own login signs the user in there, a topic of eu shows its messages, and the
switcher comes back to this console, still signed in here."""

from __future__ import annotations

import re
import threading

import pytest
from playwright.sync_api import expect

from engine import Cluster, Producer
from tests.e2e.conftest import ADMIN, ADMIN_PASSWORD, PAGE_TIMEOUT_MS, LiveServer, log_in, shot
from tests.remote_console import RemotePletWeb, make_pki

STREAM = "/ring"
TOPIC = f"{STREAM}:orders-in-eu"
EU_PASSWORD = "eu-admin-password-1"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """This console (cluster `home`, linked to eu over https with eu's token) on a free
    port; eu served by its own `plet web`."""
    from werkzeug.serving import make_server

    from engine.served_clusters import served_clusters
    from web.clusters import Console

    root = tmp_path_factory.mktemp("remote-e2e")
    pki = make_pki(root)
    with Cluster.open(root / "eu", name="eu") as eu:
        eu.add_user(ADMIN, EU_PASSWORD, admin=True)
        eu.create_stream(STREAM)
        eu.create_topic(TOPIC, partitions=1)
        producer = Producer(eu)
        for i in range(3):
            producer.send(TOPIC, key=b"o-%d" % i, value=b'{"order": %d, "in": "eu"}' % i).get(10)
        producer.close()
        token = eu.create_replication_token(STREAM)
    remote = RemotePletWeb(root / "eu", "--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    console = server = None
    cluster = Cluster.open(root / "home", name="home")
    try:
        cluster.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
        cluster.create_stream(STREAM)
        with pytest.MonkeyPatch.context() as env:
            # eu's CA as this process's only CA: the link and the console verify eu with it
            env.setenv("SSL_CERT_FILE", str(pki.ca))
            target = remote.url.replace("https://", f"https://{token}@")
            cluster.add_replica(STREAM, target, paused=True)
            console = Console(served_clusters(root / "home"))
        server = make_server("127.0.0.1", 0, console, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield LiveServer(f"http://127.0.0.1:{server.server_port}", root / "home", cluster)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        if console is not None:
            console.close()
        cluster.close()
        remote.stop()


def test_open_the_remote_from_the_graph_sign_in_there_and_browse_a_topic(page, home):
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    log_in(page, home)
    page.goto(home.url + "/replication")
    expect(page.get_by_role("img", name="Replication graph")).to_be_visible()
    # the link's replica stream opens here too, under eu's mount
    expect(page.locator("tr[data-link] a", has_text=STREAM)).to_have_attribute(
        "href", re.compile(r"^/c/127\.0\.0\.1-\d+/streams/ring$")
    )
    page.get_by_role("link", name=re.compile(r"^Open 127\.0\.0\.1")).click()
    # eu's own login page, under this console's address: eu's users, not this one's
    page.wait_for_url(re.compile(r"^" + re.escape(home.url) + r"/c/127\.0\.0\.1-\d+/login\?next="))
    mount = re.search(r"/c/[^/]+", page.url).group(0)
    expect(page.locator("header .cluster-name")).to_have_text("eu")
    page.get_by_label("Username").fill(ADMIN)
    page.get_by_label("Password").fill(EU_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{home.url}{mount}/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("eu")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Streams").click()
    page.wait_for_url(f"{home.url}{mount}/streams")
    page.get_by_role("link", name=STREAM, exact=True).click()
    page.get_by_role("link", name="orders-in-eu", exact=True).click()
    page.wait_for_url(re.compile(re.escape(f"{mount}/topics/ring:orders-in-eu")))
    expect(page.get_by_text('"in": "eu"').first).to_be_visible()
    shot(page, "remote-console-topic")

    # eu's switcher leads back to this console's clusters, where the user is still signed in
    page.locator("header .cluster-switch summary").click()
    page.get_by_role("list", name="Clusters").get_by_role("link", name="other clusters").click()
    page.wait_for_url(home.url + "/")
    expect(page.locator("header .cluster-name")).to_have_text("home")
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    # and this console's switcher lists eu, served here
    page.locator("header .cluster-switch summary").click()
    clusters = page.get_by_role("list", name="Clusters")
    expect(clusters.get_by_role("link", name=re.compile(r"^127\.0\.0\.1-"))).to_have_attribute(
        "href", f"{mount}/"
    )
