"""Search finds a topic by a middle fragment among 1,000,000 (issue 16, item 1): the
header's search box, typed into as a user would, shows the topic live; its full results
page is bookmarkable. The million topics are made once per session straight through the
catalog's bulk path (`create_topics`, as bench/search.py does), not by producing."""

from __future__ import annotations

import re
import threading

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ADMIN, ADMIN_PASSWORD, PAGE_TIMEOUT_MS, LiveServer, log_in

MILLION = 1_000_000


@pytest.fixture(scope="session")
def million_server(tmp_path_factory):
    from werkzeug.serving import make_server

    from bench.search import seed
    from engine import Cluster
    from web import close_app, create_app

    path = tmp_path_factory.mktemp("e2e-million") / "cluster"
    cluster = Cluster.open(path, name="million")
    seed(cluster, MILLION)
    cluster.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
    app = create_app(path)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="e2e-million", daemon=True)
    thread.start()
    try:
        yield LiveServer(f"http://127.0.0.1:{server.server_port}", path, cluster)
    finally:
        server.shutdown()
        server.server_close()
        close_app(app)
        cluster.close()


def test_search_finds_a_topic_by_a_middle_fragment_among_a_million(page, million_server):
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    log_in(page, million_server)
    assert million_server.cluster.totals().topics >= MILLION
    box = page.get_by_role("searchbox", name="Find")
    box.press_sequentially("0512345", delay=30)  # the middle of car-0512345
    live = page.locator("#search-live")
    expect(live.get_by_role("link", name="/fleet:car-0512345")).to_be_visible()
    box.press("Enter")  # the full, bookmarkable results page
    page.wait_for_url(re.compile(r"/search\?q=0512345$"))
    expect(page.get_by_role("link", name="/fleet:car-0512345")).to_be_visible()
    page.get_by_role("link", name="/fleet:car-0512345").click()
    page.wait_for_url(re.compile(r"/topics/fleet:car-0512345$"))
