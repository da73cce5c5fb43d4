"""Replay job states are an Enum (`spark_tasks.jobs.JobState`), a str enum: a job record
holds a member, whatever text it was read from, and it reads, prints and serialises as
its value."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_a_running_job_is_starting_spark_until_its_first_task():
    from web.replays import progress

    starting = _job("running", tasks_total=4)  # planned, but no task began yet
    assert starting.starting and starting.phase == jobs.PHASE_STARTING == "starting Spark"
    assert progress(starting) is None  # the indeterminate bar, not 0 of 4
    assert json.loads(json.dumps(starting.to_dict()))["phase"] == "starting Spark"
    begun = _job("running", tasks_total=4, first_task_ms=5)
    assert not begun.starting and begun.phase == "running" and progress(begun) == (0, 4)
    # progress reported by a runner that recorded no first task (an older one) ends it too
    assert not _job("running", tasks_done=1, tasks_total=4).starting
    assert _job("queued").phase == "queued" and _job("failed").phase == "failed"


# What a failed custom job's process wrote before its lines were tagged, as captured: the
# JVM's start lines, log4j warnings and errors with Java stack traces, a Python warning,
# Spark's progress bar (left unfinished by the failure) and the runner's traceback.
UNTAGGED = Path(__file__).with_name("failed_job_untagged.log")


def test_an_untagged_log_splits_by_text():
    log = jobs.split_log(UNTAGGED.read_text())
    assert log.job[:3] == (
        "job 1: custom {'source': '/h:events', 'file': '/tmp/h6/bad.py', 'master': 'local[1]', "
        "'conf': {'spark.driver.memory': '512m'}, 'function': 'transform'}",
        "progress monitor: timed out",
        "custom: building the frame",
    )
    # the failure's traceback is the job's, whole, though it followed a progress bar
    traceback = log.job[3:]
    assert traceback[0] == "Traceback (most recent call last):"
    assert traceback[-1] == "ZeroDivisionError: integer division or modulo by zero"
    assert any(
        line.startswith("pyspark.errors.exceptions.captured.PythonException") for line in traceback
    )
    assert (
        len(log.job) + len(log.spark)
        == len([x for x in UNTAGGED.read_text().splitlines() if x.strip()])  # none lost
    )
    assert not [line for line in log.job if "WARN" in line or line.startswith(("\tat ", "["))]
    for expected in (
        "WARNING: Using incubator modules: jdk.incubator.vector",
        'Setting default log level to "WARN".',
        "26/11/24 05:09:18 WARN NativeCodeLoader: Unable to load native-hadoop library for your "
        "platform... using builtin-java classes where applicable",
        "/tmp/h6/bad.py:5: UserWarning: this is a user warning",
        "  warnings.warn('this is a user warning', UserWarning)",
        "26/11/24 05:10:11 ERROR Executor: Exception in task 0.0 in stage 0.0 (TID 0)",
        "ZeroDivisionError: integer division or modulo by zero",  # of the task's failure
        "\tat java.base/java.lang.Thread.run(Thread.java:840)",
        "[Stage 0:>                                                          (0 + 1) / 1]",
    ):
        assert expected in log.spark


def test_the_runner_tags_the_jobs_lines_at_the_source():
    import io

    from spark_tasks.run import JobOutput

    file = io.StringIO()
    out = JobOutput(file)
    out.write("reading /h:events\nwrote 3 ")
    file.write("26/11/24 05:00:00 WARN TaskSetManager: Lost task 0.0\n")  # the JVM, meanwhile
    file.write("\tat org.apache.spark.scheduler.Task.run(Task.scala:147)\n")
    out.write("rows\n")
    file.write("[Stage 0:>              (0 + 2) / 2]")  # a bar the failure leaves unfinished
    out.write('Traceback (most recent call last):\n  File "x.py", line 1\nValueError: no\n')
    file.write('Setting default log level to "WARN".\n')
    file.write("WARN unrecognised but untagged: the job's, lest an error hide\n")
    log = jobs.split_log(file.getvalue())
    assert log.job == (
        "reading /h:events",
        "wrote 3 rows",
        "Traceback (most recent call last):",
        '  File "x.py", line 1',
        "ValueError: no",
        "WARN unrecognised but untagged: the job's, lest an error hide",
    )
    assert log.spark == (
        "26/11/24 05:00:00 WARN TaskSetManager: Lost task 0.0",
        "\tat org.apache.spark.scheduler.Task.run(Task.scala:147)",
        "[Stage 0:>              (0 + 2) / 2]",
        'Setting default log level to "WARN".',
    )


def test_job_log_reads_the_file_else_the_record(tmp_path):
    path = tmp_path / "job-1.log"
    path.write_text(f"{jobs.JOB_LINE_PREFIX}from the file\nSetting default log level to x\n")
    assert jobs.job_log(_job("running", log_path=str(path), log_tail="old")).job == (
        "from the file",
    )
    assert jobs.job_log(_job("failed", log_path=str(tmp_path / "gone"), log_tail="old")).job == (
        "old",
    )
    path.write_text("".join(f"{jobs.JOB_LINE_PREFIX}line {i}\n" for i in range(50)))
    assert jobs.job_log(_job("running", log_path=str(path)), lines=3).job == (
        "line 47",
        "line 48",
        "line 49",
    )
