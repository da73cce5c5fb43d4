"""Replay job states are an Enum (`spark_tasks.jobs.JobState`), a str enum: a job record
holds a member, whatever text it was read from, and it reads, prints and serialises as
its value."""

from __future__ import annotations

import json

import pytest

from spark_tasks import jobs
from spark_tasks.jobs import Job, JobState


def _job(state: str, **fields) -> Job:
    values = dict(
        id=1,
        cluster="/c",
        kind="copy",
        params={},
        state=state,
        cancel_requested=False,
        pid=None,
        host=None,
        tasks_done=0,
        tasks_total=0,
        submitted_ms=0,
        started_ms=None,
        ended_ms=None,
        result=None,
        error=None,
        log_path=None,
        log_tail="",
    )
    values.update(fields)
    return Job(**values)


def test_the_states_and_which_are_final():
    assert [s.value for s in JobState] == ["queued", "running", "succeeded", "failed", "cancelled"]
    assert [s for s in JobState if s.final] == [
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.CANCELLED,
    ]
    # the module-level names are the members themselves, not a second set of strings
    assert (jobs.QUEUED, jobs.RUNNING, jobs.SUCCEEDED, jobs.FAILED, jobs.CANCELLED) == tuple(
        JobState
    )


@pytest.mark.parametrize("text", [s.value for s in JobState])
def test_a_record_read_as_text_holds_a_member(text):
    job = _job(text)
    assert job.state is JobState(text)
    assert job.done is job.state.final
    assert f"{job.state}" == str(job.state) == text  # what the CLI and pages print
    assert json.loads(json.dumps(job.to_dict()))["state"] == text  # what the API answers


def test_an_unknown_state_is_refused():
    with pytest.raises(ValueError, match="'paused' is not a valid JobState"):
        _job("paused")


def test_the_web_progress_bar_of_a_succeeded_job_is_full():
    from web.replays import progress

    assert progress(_job("succeeded")) == (1, 1)
    assert progress(_job("running", tasks_done=1, tasks_total=4)) == (1, 4)
    assert progress(_job("queued")) is None
