"""End-to-end fixtures: the web console served from a thread over a seeded cluster (and a
second, empty cluster `dc2` under /c/dc2/, web/clusters.py), and Playwright driving Debian's
Chromium (Playwright's own browsers cannot be downloaded here).

Every test gets a page logged in as the administrator; `shot(page, name)` saves a
screenshot under tests/artifacts/screenshots/ (ignored by git) for people to look at.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.timing import scaled

CHROMIUM = os.environ.get("PLET_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"
ADMIN = "admin"
ADMIN_PASSWORD = "admin-password-1"
USER = "alice"
USER_PASSWORD = "alice-password-1"
# Playwright's waits scale with PLET_TEST_SLOWDOWN (tests/timing.py): a page's actions and
# waits 15 s, an `expect` 10 s (Playwright's own default, 5 s, is short on a busy machine)
PAGE_TIMEOUT_MS = int(scaled(15_000))
expect.set_options(timeout=int(scaled(10_000)))


@dataclass
class LiveServer:
    url: str
    cluster_path: Path
    cluster: object  # an engine Cluster of the test process, for setting up and checking
    dc2_path: Path | None = None  # a second cluster served at /c/dc2/ (same admin password)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    args = dict(browser_type_launch_args)
    args["executable_path"] = CHROMIUM
    # Chromium refuses its sandbox as root (CI runs as root)
    args["args"] = [*args.get("args", []), "--no-sandbox"]
    return args


@pytest.fixture(scope="session")
def live_server(tmp_path_factory):
    """One console for the whole e2e session, over a cluster seeded with engine.demo (at /
    and /c/e2e/), and an empty cluster dc2 with its own administrator (at /c/dc2/), as
    `plet web --also DC2` serves them."""
    from werkzeug.serving import make_server

    from engine import Cluster
    from engine.demo import seed
    from engine.served_clusters import served_clusters
    from web.clusters import Console

    root = tmp_path_factory.mktemp("e2e")
    path = root / "cluster"
    cluster = Cluster.open(path, name="e2e")
    seed(cluster)
    cluster.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
    cluster.add_user(USER, USER_PASSWORD, groups=("analysts",))
    with Cluster.open(root / "dc2", name="dc2") as dc2:
        dc2.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
    console = Console(served_clusters(path, also=[root / "dc2"], linked=False))
    server = make_server("127.0.0.1", 0, console, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="e2e-web", daemon=True)
    thread.start()
    try:
        yield LiveServer(f"http://127.0.0.1:{server.server_port}", path, cluster, root / "dc2")
    finally:
        server.shutdown()
        server.server_close()
        console.close()
        cluster.close()


def log_in(page, server: LiveServer, name: str = ADMIN, password: str = ADMIN_PASSWORD):
    page.goto(server.url + "/login")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/login" not in url)
    return page


@pytest.fixture
def admin_page(page, live_server):
    """A browser page logged in as the administrator."""
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    return log_in(page, live_server)


def shot(page, name: str) -> Path:
    """Save a full-page screenshot as tests/artifacts/screenshots/NAME.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def open_produce(page):
    """Unfold the topic page's produce form (a click away on its Messages tab) and return
    its region."""
    page.locator("#produce-toggle > summary").click()
    produce = page.get_by_role("region", name="Produce a message")
    expect(produce).to_be_visible()
    return produce


def htmx_settled(page) -> None:
    """Wait until no htmx request, swap or settle is under way. What htmx swaps in gets its
    hx- behaviour when it settles (20 ms after the swap, later on a busy machine): a change
    made to it before then sends nothing."""
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
    )
