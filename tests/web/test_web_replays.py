"""The replays pages: job forms with inline validation and permission checks, the job list
and page, cancelling, the page starting Spark ahead of the first job. The job's process
launch is faked here (no Spark; a standby runner is let go as it starts); the e2e test runs
a real job."""

from __future__ import annotations

import re
import time

import pytest

from engine import Producer
from spark_tasks import jobs
from tests.timing import scaled

SOURCE = "/apps/sensors:car-17"


@pytest.fixture
def sensors(cluster):
    """/apps/sensors (analysts may consume, not produce) with car-17, and /apps/out, where
    analysts may produce but not create topics, with the topic existing."""
    cluster.create_stream("/apps/sensors", consume_perm="g:analysts", ttl=0)
    cluster.create_topic(SOURCE, partitions=2)
    cluster.create_stream("/apps/out", produce_perm="g:analysts")
    cluster.create_topic("/apps/out:existing")
    cluster.create_stream("/secret/stuff")
    cluster.create_topic("/secret/stuff:t")
    producer = Producer(cluster)
    for i in range(5):
        producer.send(SOURCE, key=b"k", value=b"%d" % i)
    producer.flush()
    producer.close()
    return cluster


def post(client, kind: str, htmx: bool = False, **fields: str):
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(
        f"/replays/new/{kind}", data={**fields, "csrf_token": client.csrf}, headers=headers
    )


def field_error(html: str, kind: str, field: str) -> str | None:
    """The inline error shown next to `field` of the `kind` form, if any."""
    found = re.search(
        rf'id="job-form-{kind}-{field}"[^>]*aria-invalid="true"[^>]*>\s*'
        rf'<span id="job-form-{kind}-{field}-note" class="field-error">([^<]*)</span>',
        html,
    )
    return found.group(1) if found else None


def all_jobs(cluster) -> list[jobs.Job]:
    return jobs.list(cluster=cluster.path)


def test_replays_page_has_a_form_per_kind_and_no_polling_without_jobs(client, sensors):
    html = client.get("/replays").get_data(as_text=True)
    for kind in jobs.KINDS:
        assert f'aria-label="New {kind} job"' in html
        assert f"Start {kind} job" in html
    assert "No jobs yet" in html
    assert "every 1s" not in html
    assert "Administrators only" in html  # the custom form says so


@pytest.mark.parametrize(
    ("kind", "fields", "field", "message"),
    [
        ("copy", {"source": SOURCE}, "target", "needs target"),
        ("copy", {"target": "/apps/out:copy"}, "source", "needs source"),
        (
            "copy",
            {"source": SOURCE, "target": "/apps/out:c", "from_offset": "x"},
            "from_offset",
            "whole number",
        ),
        (
            "copy",
            {"source": SOURCE, "target": "/apps/out:c", "to_offset": "-3"},
            "to_offset",
            "whole number",
        ),
        (
            "copy",
            {"source": SOURCE, "target": "/apps/out:c", "from_time": "soon"},
            "from_time",
            "ISO 8601",
        ),
        ("copy", {"source": SOURCE, "target": SOURCE}, "target", "differ"),
        ("copy", {"source": "/apps/sensors:nope", "target": "/apps/out:c"}, "source", "nope"),
        (
            "copy",
            {"source": "no-slash", "target": "/apps/out:c"},
            "source",
            "invalid full topic name",
        ),
        ("copy", {"source": SOURCE, "target": "/nowhere:t"}, "target", "/nowhere"),
        ("materialize", {"source": SOURCE}, "target", "needs target"),
        ("window-counts", {"source": SOURCE, "window": "often"}, "window", "number and a unit"),
        ("window-counts", {"stream": "/apps/nope"}, "stream", "/apps/nope"),
        (
            "window-counts",
            {"stream": "/apps/sensors", "topic_pattern": "("},
            "topic_pattern",
            "regular expression",
        ),
        ("custom", {"source": SOURCE, "file": "/no/such/file.py"}, "file", "existing Python file"),
    ],
)
def test_bad_params_are_shown_inline_and_nothing_is_submitted(
    client, sensors, launches, kind, fields, field, message
):
    answer = post(client, kind, **fields)
    assert answer.status_code == 400
    error = field_error(answer.get_data(as_text=True), kind, field)
    assert error is not None and message in error.replace("&#39;", "'")
    assert all_jobs(sensors) == [] and launches == []


def test_htmx_submit_with_errors_answers_the_form_alone(client, sensors, launches):
    answer = post(client, "copy", htmx=True, source=SOURCE)
    assert answer.status_code == 200
    html = answer.get_data(as_text=True)
    assert html.lstrip().startswith('<section class="card job-form" aria-label="New copy job"')
    assert field_error(html, "copy", "target")
    assert f'value="{SOURCE}"' in html  # what was typed stays
    assert launches == []


def test_submit_creates_a_job_and_goes_to_its_page(client, sensors, launches):
    answer = post(client, "window-counts", source=SOURCE, window="10 seconds", from_offset="1")
    assert answer.status_code == 303
    (job,) = all_jobs(sensors)
    assert answer.headers["Location"].endswith(f"/replays/{job.id}")
    assert job.kind == "window-counts" and job.state == jobs.QUEUED
    assert job.params["source"] == SOURCE and job.params["window"] == "10 seconds"
    assert job.params["from_offset"] == 1 and job.params["submitted_by"] == "admin"
    assert launches and launches[0][-2:] == [str(sensors.path.resolve()), str(job.id)]
    listing = client.get("/replays").get_data(as_text=True)
    assert 'data-testid="job-row"' in listing
    assert 'hx-trigger="every 1s"' in listing  # live while a job is queued
    assert f'aria-label="Progress of job {job.id}"' in listing


def test_htmx_submit_redirects_to_the_job_page(client, sensors, launches):
    answer = post(client, "copy", htmx=True, source=SOURCE, target="/apps/out:copy")
    assert answer.status_code == 200
    (job,) = all_jobs(sensors)
    assert answer.headers["HX-Redirect"] == f"/replays/{job.id}"


def test_times_from_the_form_are_utc(client, sensors, launches):
    post(client, "copy", source=SOURCE, target="/apps/out:c", from_time="2026-01-01T00:00:00")
    (job,) = all_jobs(sensors)
    assert job.params["from_time"] == 1_767_225_600_000


def test_custom_jobs_are_for_administrators_only(client, user_client, sensors, launches, tmp_path):
    script = tmp_path / "job.py"
    script.write_text("def transform(df):\n    return df\n")
    answer = post(user_client, "custom", source=SOURCE, file=str(script))
    assert answer.status_code == 403
    assert "Only administrators may run custom jobs" in answer.get_data(as_text=True)
    assert all_jobs(sensors) == [] and launches == []
    page = user_client.get("/replays").get_data(as_text=True)
    assert re.search(r"<button type=\"submit\" disabled>Start custom job</button>", page)
    assert post(client, "custom", source=SOURCE, file=str(script)).status_code == 303
    (job,) = all_jobs(sensors)
    assert job.kind == "custom" and job.params["file"] == str(script.resolve())


def test_plain_user_needs_consume_perm_on_the_source(user_client, sensors, launches):
    answer = post(user_client, "window-counts", source="/secret/stuff:t")
    assert answer.status_code == 400
    error = field_error(answer.get_data(as_text=True), "window-counts", "source")
    assert error and "may not consume from" in error
    answer = post(user_client, "window-counts", stream="/secret/stuff")
    assert "may not consume from" in field_error(
        answer.get_data(as_text=True), "window-counts", "stream"
    )
    assert all_jobs(sensors) == []
    assert post(user_client, "window-counts", source=SOURCE).status_code == 303
    assert [j.params["submitted_by"] for j in all_jobs(sensors)] == ["alice"]


def test_plain_user_needs_produce_and_topic_perm_on_the_target(user_client, sensors, launches):
    # may consume /apps/sensors but not produce to it
    answer = post(user_client, "copy", source=SOURCE, target="/apps/sensors:copy")
    assert "may not produce to" in field_error(answer.get_data(as_text=True), "copy", "target")
    # may produce to /apps/out, but not create topics there (the job would)
    answer = post(user_client, "copy", source=SOURCE, target="/apps/out:new")
    error = field_error(answer.get_data(as_text=True), "copy", "target")
    assert "may not create or delete topics of" in error
    assert all_jobs(sensors) == [] and launches == []
    assert post(user_client, "copy", source=SOURCE, target="/apps/out:existing").status_code == 303


def test_plain_user_may_not_write_server_paths(user_client, sensors, launches, tmp_path):
    answer = post(user_client, "window-counts", source=SOURCE, output=str(tmp_path / "out"))
    assert answer.status_code == 400
    error = field_error(answer.get_data(as_text=True), "window-counts", "output")
    assert "Only administrators" in error
    assert all_jobs(sensors) == [] and launches == []


def test_cancel_a_queued_job(client, sensors, launches):
    post(client, "window-counts", source=SOURCE)
    (job,) = all_jobs(sensors)
    page = client.get(f"/replays/{job.id}").get_data(as_text=True)
    assert "Cancel job" in page and "hx-confirm=" in page
    assert 'hx-trigger="every 1s"' in page
    answer = client.post(f"/replays/{job.id}/cancel", data={"csrf_token": client.csrf})
    assert answer.status_code == 303
    assert jobs.status(job.id, cluster=sensors.path).state == jobs.CANCELLED
    page = client.get(f"/replays/{job.id}").get_data(as_text=True)
    assert "Cancel job" not in page and "every 1s" not in page
    assert 'data-testid="job-state">cancelled<' in page


def test_htmx_cancel_answers_the_live_part(client, sensors, launches):
    post(client, "window-counts", source=SOURCE)
    (job,) = all_jobs(sensors)
    answer = client.post(
        f"/replays/{job.id}/cancel", headers={"HX-Request": "true", "X-CSRFToken": client.csrf}
    )
    html = answer.get_data(as_text=True)
    assert html.lstrip().startswith('<div id="job-live"')
    assert ">cancelled<" in html


def test_only_the_submitter_or_an_admin_may_cancel(client, user_client, sensors, launches):
    post(client, "window-counts", source=SOURCE)
    (job,) = all_jobs(sensors)
    assert "Cancel job" not in user_client.get(f"/replays/{job.id}").get_data(as_text=True)
    answer = user_client.post(f"/replays/{job.id}/cancel", data={"csrf_token": user_client.csrf})
    assert answer.status_code == 403
    assert jobs.status(job.id, cluster=sensors.path).state == jobs.QUEUED


def test_job_page_shows_progress_result_table_and_escaped_log(client, sensors, launches):
    post(client, "window-counts", source=SOURCE)
    (job,) = all_jobs(sensors)
    jobs.update(sensors.path, job.id, state=jobs.RUNNING, tasks_done=1, tasks_total=4)
    html = client.get(f"/replays/{job.id}", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert f'<progress value="1" max="4" aria-label="Progress of job {job.id}">' in html
    assert "25 %" in html
    # the runner's bar, which never goes back, and its step
    step = "step 2 of 2: counting"
    jobs.update(sensors.path, job.id, tasks_done=1, tasks_total=9, progress=0.5, step=step)
    html = client.get(f"/replays/{job.id}", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert f'<progress value="500" max="1000" aria-label="Progress of job {job.id}">' in html
    assert f'data-testid="job-step">{step}<' in html and "1 of 9 tasks" in html
    result = {
        "windows": 2,
        "window": "1 minute",
        "rows": [
            {"window_start": "2026-01-01 00:00:00", "topic": SOURCE, "messages": 3},
            {"window_start": "2026-01-01 00:01:00", "topic": SOURCE, "messages": 2},
        ],
    }
    jobs.update(
        sensors.path,
        job.id,
        state=jobs.SUCCEEDED,
        tasks_done=4,
        result=result,
        started_ms=1_000,
        ended_ms=13_500,
        log_tail="done <script>alert(1)</script>",
    )
    html = client.get(f"/replays/{job.id}").get_data(as_text=True)
    assert 'data-testid="job-state">succeeded<' in html
    assert 'data-testid="job-pct">100 %<' in html
    assert "every 1s" not in html and "Cancel job" not in html
    assert '<th scope="col">window_start</th>' in html
    assert html.count("<td>2026-01-01 00:0") == 2
    assert "12.5 s" in html
    assert "done &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html


def test_failed_job_shows_its_error(client, sensors, launches):
    post(client, "window-counts", source=SOURCE)
    (job,) = all_jobs(sensors)
    jobs.update(sensors.path, job.id, state=jobs.FAILED, error="ValueError: <bad>", ended_ms=1)
    html = client.get(f"/replays/{job.id}").get_data(as_text=True)
    assert "ValueError: &lt;bad&gt;" in html
    assert 'data-testid="job-state">failed<' in html


def test_result_and_log_are_hidden_from_users_who_may_not_read_the_source(
    client, user_client, sensors, launches
):
    post(client, "window-counts", source="/secret/stuff:t")
    (job,) = all_jobs(sensors)
    jobs.update(sensors.path, job.id, state=jobs.SUCCEEDED, result={"windows": 7}, log_tail="x")
    html = user_client.get(f"/replays/{job.id}").get_data(as_text=True)
    assert 'aria-label="Result"' not in html and 'aria-label="Log"' not in html
    assert 'aria-label="Result"' in client.get(f"/replays/{job.id}").get_data(as_text=True)


def test_unknown_job_and_kind_are_404(client, sensors):
    assert client.get("/replays/999").status_code == 404
    assert post(client, "explode", source=SOURCE).status_code == 404


def test_a_stored_ace_that_does_not_parse_lets_only_administrators_through(
    client, user_client, sensors, launches
):
    from tests.old_catalog import write_policies

    write_policies(sensors, "/apps/sensors", consume_perm="((((")
    answer = post(user_client, "window-counts", source=SOURCE)
    assert answer.status_code == 400
    error = field_error(answer.get_data(as_text=True), "window-counts", "source")
    assert error and "not a valid ACE" in error
    assert all_jobs(sensors) == [] and launches == []
    assert post(client, "window-counts", source=SOURCE).status_code == 303


def test_the_replays_page_starts_spark_for_the_first_job(client, sensors, monkeypatch):
    # the page asks for it as it loads (htmx), so Spark is up when the user submits
    html = client.get("/replays").get_data(as_text=True)
    assert 'hx-post="/replays/warm" hx-trigger="load"' in html
    monkeypatch.setenv(jobs.WARM_ENV, "1")  # tests/conftest.py turns standby runners off
    try:
        answer = client.post("/replays/warm", headers={"X-CSRFToken": client.csrf})
        assert answer.status_code == 204
        standby = jobs.standby_log(sensors.path)
        assert standby is not None and standby.exists()  # a real runner, starting Spark
        client.post("/replays/warm", headers={"X-CSRFToken": client.csrf})
        assert jobs.standby_log(sensors.path) == standby  # one is enough
    finally:
        jobs.close_standbys()
    # let go while its Spark starts, it stops at once (its log goes with it)
    deadline = time.monotonic() + scaled(20)
    while standby.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not standby.exists()


def test_a_read_only_console_starts_no_spark(app, client, sensors, monkeypatch):
    app.config["READ_ONLY"] = True
    monkeypatch.setenv(jobs.WARM_ENV, "1")
    assert "/replays/warm" not in client.get("/replays").get_data(as_text=True)
    answer = client.post("/replays/warm", headers={"X-CSRFToken": client.csrf})
    assert answer.status_code == 403 and jobs.standby_log(sensors.path) is None
