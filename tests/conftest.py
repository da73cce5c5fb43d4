"""Fixtures shared by every test folder: a fresh cluster directory on real SQLite files."""

from __future__ import annotations

import os
import sys

import pytest

# Spark workers and subprocess helpers must run this very interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# No standby replay runners (spark_tasks.jobs.Standbys: a Spark started ahead of the next
# job) behind the consoles' submits: a test that wants one turns them on.
os.environ.setdefault("PLET_REPLAYS_WARM", "0")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """pytest-timeout's limit (pyproject's `timeout`) scales with PLET_TEST_SLOWDOWN
    (tests/timing.py) like every other timeout of the tests; its PYTEST_TIMEOUT variable
    comes before the ini value, a --timeout option before both."""
    from tests.timing import SLOWDOWN

    ini = config.getini("timeout")
    if SLOWDOWN != 1 and ini and "PYTEST_TIMEOUT" not in os.environ:
        os.environ["PYTEST_TIMEOUT"] = str(float(ini) * SLOWDOWN)


@pytest.fixture(autouse=True, scope="session")
def cheap_password_hashes():
    """Password hashes made in the test processes cost scrypt N=2^10 instead of 2^15 (a
    user or a login: 1-2 ms instead of ~180 ms, which was minutes of the suite: every web
    test adds two users and logs in). Each hash records its own cost, so hashes verify
    either way, and `plet` run as a child process hashes at the real cost.
    tests/engine/auth/test_users.py checks the real parameters."""
    from engine.auth import users

    real = users._SCRYPT_N
    users._SCRYPT_N = 2**10
    yield real
    users._SCRYPT_N = real


@pytest.fixture
def cluster_path(tmp_path):
    """Where a test's cluster lives (not created yet)."""
    return tmp_path / "cluster"


@pytest.fixture
def cluster(cluster_path):
    """A freshly created cluster with 4 volumes, closed after the test."""
    from engine import Cluster

    with Cluster.open(cluster_path, name="test") as c:
        yield c


@pytest.fixture
def live_web(tmp_path):
    """A live web console (tests/live.py) over a fresh cluster with users `admin` and
    `alice`: `live_web.url`, `.cluster`, `.browser(name)` (logged in through the form),
    `.api(token)`. Attack tests go through it, over a real socket."""
    with live_module().serve(tmp_path / "live") as server:
        yield server


def live_module():
    """tests/live.py as a module (tests is not a package; pytest imports by path). Test
    files that need its `serve` with other settings call this too."""
    import sys
    from importlib import util
    from pathlib import Path

    name = "plet_tests_live"
    if name not in sys.modules:
        spec = util.spec_from_file_location(name, Path(__file__).with_name("live.py"))
        module = util.module_from_spec(spec)
        sys.modules[name] = module  # before running it: its dataclasses look themselves up
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def new_york():
    """The process runs in America/New_York, so code that read a zone-less time as local
    time would pick another instant than UTC (DESIGN: a time without a zone is UTC)."""
    import time

    old = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


# The order of `make test`'s groups: tests/spark_tasks (~10 min of test time) first, so it
# runs beside the short files, and tests/e2e (~7 min) last. Playwright's sync API leaves
# an event loop running in its worker's main thread until the session ends, and every
# Textual test that runs after it in that worker fails ("Runner.run() cannot be called from
# a running event loop"), so nothing may follow it. The Makefile passes
# --no-loadscope-reorder so that xdist keeps this order (it would sort the groups by their
# number of tests).
FIRST_GROUPS = ("spark_tasks",)
LAST_GROUPS = ("e2e",)
LONG_GROUPS = FIRST_GROUPS + LAST_GROUPS


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups from the markers
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test` runs two workers, `--dist loadgroup`): a file's tests
    stay in one worker, and so do all end-to-end tests and all Spark tests, so that their
    session-scoped console, browser and SparkSession start once; Spark first, e2e last."""
    root = config.rootpath / "tests"
    groups = {}
    for item in items:
        try:
            path = item.path.relative_to(root)
        except ValueError:
            continue
        together = path.parts[0] in LONG_GROUPS
        groups[item] = path.parts[0] if together else str(path)
        item.add_marker(pytest.mark.xdist_group(groups[item]))

    def rank(item: pytest.Item) -> int:
        group = groups.get(item, "")
        return 0 if group in FIRST_GROUPS else 2 if group in LAST_GROUPS else 1

    items.sort(key=rank)  # stable: files keep their order within each rank


class _FakeJobProcess:
    """What `spark_tasks.jobs.submit` gets instead of a Popen: a live pid (ours), so that
    the job stays queued, as if its runner had not started yet."""

    pid = os.getpid()

    def wait(self) -> int:
        return 0


@pytest.fixture
def launches(monkeypatch):
    """Replay jobs submitted for real (checks, record) but with their process launch faked,
    so no Spark starts; the list collects each launch's argv."""
    from spark_tasks import jobs

    started: list[list[str]] = []

    def popen(argv, **kwargs):
        started.append(argv)
        return _FakeJobProcess()

    monkeypatch.setattr(jobs.subprocess, "Popen", popen)
    return started
