"""The replication page in a real browser: a ring of three clusters, drawn and acted on."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from engine import Cluster, Producer
from tests.e2e.conftest import shot

STREAM = "/e2e-ring"


@pytest.fixture(scope="module")
def ring(live_server, tmp_path_factory):
    """The live server's cluster (e2e) -> e2e-r2 -> e2e-r3 -> e2e, on /e2e-ring."""
    root = tmp_path_factory.mktemp("ring")
    home = live_server.cluster
    r2 = Cluster.open(root / "r2", name="e2e-r2")
    r3 = Cluster.open(root / "r3", name="e2e-r3")
    home.create_stream(STREAM, ttl=0)
    producer = Producer(home)
    for i in range(10):
        producer.send(f"{STREAM}:t", value=f"m{i}".encode())
    producer.flush()
    producer.close()
    home.add_replica(STREAM, r2.path)
    r2.add_replica(STREAM, r3.path)
    r3.add_replica(STREAM, home.path)
    yield home, r2, r3
    # leave the shared server as it was for the other tests
    for source, target in ((home, r2), (r2, r3), (r3, home)):
        try:
            source.remove_replica(STREAM, target.path)
        except Exception:  # noqa: BLE001 - a test may have removed it already
            pass
    r2.close()
    r3.close()


def test_the_ring_shows_three_nodes_and_three_edges(admin_page, live_server, ring):
    page = admin_page
    page.goto(live_server.url + "/replication")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Replication")
    graph = page.get_by_role("img", name="Replication graph")
    expect(graph).to_be_visible()
    expect(page.locator("[data-node]")).to_have_count(3)
    expect(page.locator("[data-edge]")).to_have_count(3)
    for edge in ("e2e->e2e-r2", "e2e-r2->e2e-r3", "e2e-r3->e2e"):
        expect(page.locator(f'[data-edge="{edge}"]')).to_have_count(1)
    expect(page.locator('[data-node="e2e"] title')).to_contain_text("this cluster")
    expect(page.get_by_role("region", name="Links out").get_by_role("row")).to_have_count(2)
    shot(page, "replication")


def test_pause_and_resume_a_link_from_the_page(admin_page, live_server, ring):
    home, r2, _ = ring
    page = admin_page
    page.goto(live_server.url + "/replication")
    row = page.locator(f'tr[data-link="{STREAM} {r2.path.resolve()}"]')
    edge = page.locator('[data-edge="e2e->e2e-r2"]')
    expect(row.get_by_test_id("link-state")).to_have_text("in_sync")
    row.get_by_role("button", name="Pause").click()
    expect(row.get_by_test_id("link-state")).to_have_text("paused")
    expect(edge).to_have_attribute("data-state", "paused")
    assert home.replicas(STREAM)[0].state == "paused"
    shot(page, "replication-paused")
    row.get_by_role("button", name="Resume").click()
    expect(row.get_by_test_id("link-state")).to_have_text("in_sync")
    expect(edge).to_have_attribute("data-state", "in_sync")
    assert not home.replicas(STREAM)[0].paused


def test_adding_a_link_to_a_missing_cluster_shows_the_error_inline(
    admin_page, live_server, ring, tmp_path
):
    page = admin_page
    page.goto(live_server.url + "/replication")
    form = page.get_by_role("region", name="Add a link")
    form.get_by_label("Stream", exact=True).fill(STREAM)
    form.get_by_label("Target cluster").fill(str(tmp_path / "nowhere"))
    form.get_by_role("button", name="Add link").click()
    expect(form.locator("#link-target-error")).to_contain_text("no cluster at")
    expect(form.get_by_label("Target cluster")).to_have_attribute("aria-invalid", "true")
    assert len(ring[0].replicas(STREAM)) == 1
    shot(page, "replication-add-error")


def test_a_two_way_link_and_a_broken_one_are_impossible_to_miss(
    admin_page, live_server, ring, tmp_path
):
    home, r2, _ = ring
    r4 = Cluster.open(tmp_path / "r4", name="e2e-r4")
    r4.close()
    r2.add_replica(STREAM, home.path)  # e2e <-> e2e-r2 both ways
    home.add_replica(STREAM, tmp_path / "r4")
    (tmp_path / "r4").rename(tmp_path / "r4-away")  # the target is gone: a broken link
    try:
        page = admin_page
        page.goto(live_server.url + "/replication")
        expect(page.locator("[data-node]")).to_have_count(4)
        expect(page.locator("[data-edge]")).to_have_count(5)
        expect(page.locator('[data-edge="e2e-r2->e2e"]')).to_have_count(1)
        expect(page.locator('[data-edge="e2e->r4"]')).to_have_attribute("data-state", "broken")
        banner = page.get_by_role("region", name="Replication problems")
        expect(banner).to_contain_text("no cluster at")
        expect(banner).to_contain_text(STREAM)
        expect(page.locator('[data-node="r4"]')).to_contain_text("unreachable")
        shot(page, "replication-problems")
    finally:
        home.remove_replica(STREAM, tmp_path / "r4")
        r2.remove_replica(STREAM, home.path)
