"""Replay jobs are processes of some 160 MB from their start: a user who is no
administrator has at most `jobs.MAX_JOBS_PER_USER` unfinished, the cluster at most
`jobs.MAX_JOBS`, checked before anything is recorded or started (issue 23: a non-admin's
replay jobs started a process each, with no cap). Through the live API, with the process
launch faked (the `launches` fixture: the jobs stay queued, their pid alive)."""

from __future__ import annotations

from spark_tasks import jobs

COPY = {"kind": "window-counts", "params": {"source": "/in:t"}}


def _set_up(live_web):
    cluster = live_web.cluster
    cluster.create_stream("/in", consume_perm="u:alice | u:bob")
    cluster.create_topic("/in:t", partitions=1)
    cluster.add_user("bob", "bob-password-12")
    return (
        live_web.api(cluster.create_api_token("alice")),
        live_web.api(cluster.create_api_token("bob")),
        live_web.api(cluster.create_api_token("admin")),
    )


def test_a_user_has_few_unfinished_jobs_and_the_cluster_a_few_more(live_web, launches):
    alice, bob, admin = _set_up(live_web)
    assert (jobs.MAX_JOBS_PER_USER, jobs.MAX_JOBS) == (2, 4)
    mine = [alice.post("/api/v1/jobs", json=COPY) for _ in range(2)]
    assert [r.status_code for r in mine] == [201, 201]
    refused = alice.post("/api/v1/jobs", json=COPY)
    assert refused.status_code == 429
    assert refused.json()["error"] == "TooManyJobs"
    assert "you have 2 replay jobs queued or running" in refused.json()["message"]
    assert refused.headers["Retry-After"] == "30"
    assert len(launches) == 2  # nothing was started for the refused one
    # another user has their own two; then the cluster's cap holds for everyone, admins too
    assert [bob.post("/api/v1/jobs", json=COPY).status_code for _ in range(2)] == [201, 201]
    for client in (bob, admin):
        full = client.post("/api/v1/jobs", json=COPY)
        assert full.status_code == 429
        assert "4 replay jobs are queued or running" in full.json()["message"]
    assert len(launches) == 4
    # a finished (cancelled) job frees its place
    assert alice.post(f"/api/v1/jobs/{mine[0].json()['id']}/cancel").status_code == 200
    again = alice.post("/api/v1/jobs", json=COPY)
    assert again.status_code == 201
    assert len(launches) == 5


def test_an_administrator_has_the_cluster_cap_only(live_web, launches):
    _alice, _bob, admin = _set_up(live_web)
    answers = [admin.post("/api/v1/jobs", json=COPY).status_code for _ in range(5)]
    assert answers == [201, 201, 201, 201, 429]


def test_concurrent_submits_cannot_pass_the_cap(live_web, launches):
    from concurrent.futures import ThreadPoolExecutor

    alice, _bob, _admin = _set_up(live_web)
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda _: alice.post("/api/v1/jobs", json=COPY), range(10)))
    assert sorted(a.status_code for a in answers) == [201] * 2 + [429] * 8
    assert len(launches) == 2


def test_the_replays_page_says_so_too(live_web, launches):
    _set_up(live_web)
    browser = live_web.browser("alice")
    for _ in range(2):
        assert (
            browser.post_form("/replays/new/window-counts", {"source": "/in:t"}).status_code == 303
        )
    refused = browser.post_form("/replays/new/window-counts", {"source": "/in:t"})
    assert refused.status_code == 429
    assert "you have 2 replay jobs queued or running" in refused.text
