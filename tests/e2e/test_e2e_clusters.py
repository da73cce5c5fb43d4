"""One console, many clusters, in a real browser: from the main cluster's replication graph to
dc2 (the shared server's second cluster, /c/dc2/), its own login, a topic there, and back
with the header's switcher."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from engine import Cluster, Producer
from tests.e2e.conftest import ADMIN, ADMIN_PASSWORD, shot

STREAM = "/e2e-to-dc2"
TOPIC = "/dc2-apps:orders"


@pytest.fixture(scope="module")
def linked(live_server):
    """The live server's cluster replicates STREAM to dc2; dc2 has a topic of its own."""
    home = live_server.cluster
    with Cluster.open(live_server.dc2_path) as dc2:
        dc2.create_stream("/dc2-apps")
        dc2.create_topic(TOPIC, partitions=1)
        producer = Producer(dc2)
        for i in range(3):
            producer.send(TOPIC, key=b"o-%d" % i, value=b'{"order": %d, "in": "dc2"}' % i)
        producer.flush()
        producer.close()
    home.create_stream(STREAM, ttl=0)
    home.add_replica(STREAM, live_server.dc2_path)
    yield
    # leave the shared server as it was for the other tests (its graph, its streams)
    home.remove_replica(STREAM, live_server.dc2_path)
    home.delete_stream(STREAM)
    with Cluster.open(live_server.dc2_path) as dc2:
        dc2.delete_stream("/dc2-apps")
        dc2.delete_stream(STREAM)


def test_switch_to_dc2_from_the_graph_and_browse_a_topic_there(admin_page, live_server, linked):
    page = admin_page
    page.goto(live_server.url + "/replication")
    graph = page.get_by_role("img", name="Replication graph")
    expect(graph).to_be_visible()
    expect(page.locator('[data-node="e2e"]')).to_have_count(1)  # this cluster: no link
    expect(page.get_by_role("link", name="Open e2e")).to_have_count(0)
    shot(page, "clusters-graph")
    page.get_by_role("link", name="Open dc2").click()
    # dc2 has its own users: the e2e login is no dc2 login
    page.wait_for_url(re.compile(r"/c/dc2/login\?next="))
    expect(page.locator("header .cluster-name")).to_have_text("dc2")
    page.get_by_label("Username").fill(ADMIN)
    page.get_by_label("Password").fill(ADMIN_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(live_server.url + "/c/dc2/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("dc2")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Streams").click()
    page.wait_for_url(live_server.url + "/c/dc2/streams")
    page.get_by_role("link", name="/dc2-apps", exact=True).click()
    page.get_by_role("link", name="orders", exact=True).click()
    page.wait_for_url(re.compile(r"/c/dc2/topics/dc2-apps:orders"))
    expect(page.get_by_text('"in": "dc2"').first).to_be_visible()
    shot(page, "clusters-dc2-topic")

    # the switcher goes back to the main cluster, still logged in there
    page.locator("header .cluster-switch summary").click()
    shot(page, "clusters-switcher")
    page.get_by_role("list", name="Clusters").get_by_role("link", name="e2e").click()
    page.wait_for_url(live_server.url + "/c/e2e/")
    expect(page.locator("header .cluster-name")).to_have_text("e2e")
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
