"""Replays in a real browser: a real window-counts Spark job started from its form on the
seeded /apps/sensors topic, watched until its progress bar reaches 100% (the only web test
that runs Spark: a local Spark start takes 10-20 s)."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from spark_tasks import jobs
from tests.e2e.conftest import shot
from tests.timing import scaled

SOURCE = "/apps/sensors:car-17"
JOB_TIMEOUT_MS = int(scaled(180_000))


def test_bad_params_show_inline_errors(admin_page, live_server):
    page = admin_page
    page.goto(live_server.url + "/replays")
    form = page.get_by_role("region", name="New copy job")
    form.get_by_label("Source topic").fill(SOURCE)
    form.get_by_role("button", name="Start copy job").click()
    target = form.get_by_label("Target topic")
    expect(target).to_have_attribute("aria-invalid", "true")
    expect(form).to_contain_text("a copy job needs target")
    expect(form.get_by_label("Source topic")).to_have_value(SOURCE)
    expect(page).to_have_url(re.compile(r"/replays$"))
    shot(page, "replays-form-error")


def test_window_counts_job_runs_to_100_percent(admin_page, live_server):
    page = admin_page
    page.goto(live_server.url + "/replays")
    form = page.get_by_role("region", name="New window-counts job")
    form.get_by_label("Source topic").fill(SOURCE)
    form.get_by_label("Window").fill("10 minutes")
    form.get_by_role("button", name="Start window-counts job").click()
    expect(page).to_have_url(re.compile(r"/replays/\d+$"))
    job_id = int(page.url.rsplit("/", 1)[1])
    bar = page.get_by_role("progressbar", name=f"Progress of job {job_id}")
    expect(bar).to_be_visible()
    # the indeterminate bar (no value) and its words while Spark starts (10-20 s)
    expect(page.get_by_test_id("job-pct")).to_have_text(
        "starting Spark", timeout=int(scaled(60_000))
    )
    shot(page, "replay-job-running")

    state = page.get_by_test_id("job-state")
    expect(state).to_have_text("succeeded", timeout=JOB_TIMEOUT_MS)
    expect(page.get_by_test_id("job-pct")).to_have_text("100 %")
    value, maximum = bar.get_attribute("value"), bar.get_attribute("max")
    assert value is not None and value == maximum
    result = page.get_by_role("region", name="Result")
    expect(result.get_by_role("columnheader", name="window_start")).to_be_visible()
    expect(result).to_contain_text(SOURCE)
    log = page.get_by_role("region", name="Log")
    own = log.get_by_label("Job output")
    expect(own).to_contain_text(f"job {job_id} succeeded")
    expect(own).to_contain_text(f"reading {SOURCE}")
    expect(own).not_to_contain_text("WARN")  # Spark's lines are behind the toggle
    expect(log.get_by_label("Spark output")).to_have_count(0)
    log.get_by_role("link", name="Show Spark output").click()
    expect(log.get_by_label("Spark output")).to_contain_text('Setting default log level to "WARN"')
    expect(log.get_by_label("Job output")).to_contain_text(f"job {job_id} succeeded")
    expect(log.get_by_role("link", name="Hide Spark output")).to_be_visible()
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
    shot(page, "replay-job")

    job = jobs.status(job_id, cluster=live_server.cluster_path)
    assert job.state == jobs.SUCCEEDED
    assert sum(row["messages"] for row in job.result["rows"]) == sum(
        p.log_end_offset for p in live_server.cluster.topic(SOURCE).partitions
    )

    page.get_by_role("link", name="All replays").click()
    row = page.get_by_test_id("job-row").filter(
        has=page.get_by_role("link", name=f"#{job_id}", exact=True)
    )
    expect(row.get_by_test_id("job-state")).to_have_text("succeeded")
    expect(row.get_by_role("progressbar")).to_have_attribute("value", value)
    shot(page, "replays")
