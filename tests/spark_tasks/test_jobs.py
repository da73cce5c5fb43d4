"""Replay jobs: every kind computed on the shared session, and real job processes end to end
(submitted, watched, finished, cancelled) through the job API and `plet replay`."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from engine import Cluster, Principal, Producer, errors
from spark_tasks import jobs, session
from tests.timing import scaled

pytestmark = pytest.mark.timeout(scaled(600))

T0 = 1_700_000_000_000
# Job processes on the small test machine: one core and little memory each.
SMALL = {"spark.driver.memory": "512m", "spark.sql.shuffle.partitions": "2"}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    path = tmp_path_factory.mktemp("jobs") / "cluster"
    with Cluster.open(path, name="jobs") as c:
        c.create_stream("/h", ttl=0)
        c.create_topic("/h:events", partitions=2)
        producer = Producer(c, acks=1)
        for i in range(200):
            # keys k0..k9; the value grows with i, so the latest per key is known
            producer.send(
                "/h:events",
                key=b"k%d" % (i % 10),
                value=b"%04d" % i,
                partition=i % 2,
                timestamp_ms=T0 + i * 1000,  # one message a second, 200 s
            )
        producer.flush()
        producer.close()
    return str(path)


def test_materialize_and_window_counts_and_custom(spark, history, tmp_path):
    from spark_tasks import replays

    out = tmp_path / "latest"
    result = replays.materialize(spark, history, {"source": "/h:events", "output": str(out)})
    assert result["keys"] == 10
    latest = {bytes(r.key): bytes(r.value) for r in spark.read.parquet(str(out)).collect()}
    assert latest == {b"k%d" % k: b"%04d" % (190 + k) for k in range(10)}

    result = replays.window_counts(
        spark, history, {"source": "/h:events", "window": "1 minute", "from_offset": 0}
    )
    assert sum(r["messages"] for r in result["rows"]) == 200
    assert sum(r["bytes"] for r in result["rows"]) == 200 * (2 + 4)
    assert all(r["topic"] == "/h:events" for r in result["rows"])
    assert result["windows"] == len(result["rows"]) >= 4

    script = tmp_path / "job.py"
    script.write_text(
        "def transform(df):\n    return df.groupBy('partition').count().orderBy('partition')\n"
    )
    result = replays.custom(
        spark, history, {"source": "/h:events", "file": str(script), "function": "transform"}
    )
    assert [r["count"] for r in result["rows"]] and sum(r["count"] for r in result["rows"]) == 200
    result = replays.custom(
        spark,
        history,
        {
            "source": "/h:events",
            "file": str(script),
            "function": "transform",
            "from_time": T0 + 100_000,
        },
    )
    assert sum(r["count"] for r in result["rows"]) == 100


def test_submit_checks_parameters(history, tmp_path):
    with pytest.raises(Exception, match="unknown job kind"):
        jobs.submit(history, "nope", source="/h:events")
    with pytest.raises(Exception, match="target"):
        jobs.submit(history, "copy", source="/h:events")
    with pytest.raises(Exception, match="Python file"):
        jobs.submit(history, "custom", source="/h:events", file=str(tmp_path / "none.py"))
    with pytest.raises(Exception, match="ISO"):
        jobs.submit(history, "copy", source="/h:events", target="/h:x", from_time="yesterday")


def plet(*args: str) -> subprocess.CompletedProcess:
    """`plet ARGS` in a child process, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )


def test_jobs_end_to_end_and_cancel(history, tmp_path):
    """A copy job submitted through the job API and a slow custom job started with `plet
    replay`, cancelled as soon as its tasks run: two job processes at once."""
    slow = tmp_path / "slow.py"
    slow.write_text(
        "import time\n"
        "from pyspark.sql import functions as F\n\n"
        "def transform(df):\n"
        "    nap = F.udf(lambda v: time.sleep(2) or 1, 'int')\n"
        "    return df.repartition(4).select(nap('value').alias('x'))\n"
    )
    copy_id = jobs.submit(
        history,
        "copy",
        source="/h:events",
        target="/h:copy",
        from_offset=50,
        master="local[1]",
        conf=SMALL,
    )
    cli = plet(
        "replay",
        "custom",
        "--cluster",
        history,
        "--source",
        "/h:events",
        "--file",
        str(slow),
        "--master",
        "local[1]",
        "--conf",
        "spark.driver.memory=512m",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--json",
    )
    assert cli.returncode == 0, cli.stderr
    slow_id = json.loads(cli.stdout)["id"]
    assert jobs.status(slow_id, cluster=history).params["conf"] == SMALL

    # The slow job runs; cancel it once its first task runs.
    deadline = time.monotonic() + scaled(240)
    while time.monotonic() < deadline:
        job = jobs.status(slow_id, cluster=history)
        if job.state == jobs.RUNNING and job.first_task_ms and job.tasks_done < job.tasks_total:
            break
        assert not job.done, job
        time.sleep(0.2)
    assert job.state == jobs.RUNNING and job.tasks_done < job.tasks_total
    listed = {j.id: j for j in jobs.list(cluster=history)}
    assert {copy_id, slow_id} <= set(listed)
    jobs.cancel(slow_id, cluster=history)
    cancelled = jobs.wait(slow_id, cluster=history, timeout=scaled(120))
    assert cancelled.state == jobs.CANCELLED, cancelled.log_tail
    assert cancelled.ended_ms and cancelled.result is None

    copied = jobs.wait(copy_id, cluster=history, timeout=scaled(300))
    assert copied.state == jobs.SUCCEEDED, copied.log_tail
    assert copied.result == {"messages": 100, "target": "/h:copy"}
    assert copied.tasks_total and copied.tasks_done == copied.tasks_total
    assert copied.started_ms <= copied.ended_ms and "succeeded" in copied.log_tail
    # Spark's first task began after the runner claimed the job: the "starting Spark" phase
    assert copied.started_ms < copied.first_task_ms <= copied.ended_ms
    assert not copied.starting and copied.phase == "succeeded"
    # The job's own lines, tagged at the source, apart from what Spark's JVM wrote
    log = jobs.job_log(copied)
    assert log.job[0].startswith(f"job {copy_id}: copy")
    assert "reading /h:events" in log.job and "wrote 100 messages to /h:copy" in log.job
    assert f'job {copy_id} succeeded: {{"messages": 100, "target": "/h:copy"}}' in log.job
    assert "Spark started: its first task is running" in log.job
    assert not [line for line in log.job if " WARN " in line or "log level" in line]
    assert any(line.startswith('Setting default log level to "WARN"') for line in log.spark)
    with Cluster.open(history) as c:
        info = c.topic("/h:copy")
        assert [p.log_end_offset for p in info.partitions] == [50, 50]

    # its runner, done, left the class-data archive its JVM mapped or wrote (spark_tasks.session)
    deadline = time.monotonic() + scaled(120)
    while jobs._pid_alive(copied.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session.archive_path().exists()

    out = plet("replay", "status", str(copy_id), "--cluster", history)
    assert out.returncode == 0 and "succeeded" in out.stdout and "100" in out.stdout
    out = plet("replay", "list", "--cluster", history)
    assert "cancelled" in out.stdout and "custom" in out.stdout


def test_plet_replay_submits_what_its_options_say(history, launches, tmp_path):
    # the job's process is faked: test_jobs_end_to_end_and_cancel runs `plet replay` for real
    from click.testing import CliRunner

    from engine.cli import cli

    args = ["replay", "window-counts", "--cluster", history, "--source", "/h:events"]
    args += ["--window", "100 seconds", "--output", str(tmp_path / "counts"), "--json"]
    args += ["--master", "local[1]", "--conf", "spark.driver.memory=512m", "--to-offset", "9"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    job = jobs.status(json.loads(result.output)["id"], cluster=history)
    assert job.kind == "window-counts" and len(launches) == 1
    assert job.params == {
        "source": "/h:events",
        "window": "100 seconds",
        "output": str(tmp_path / "counts"),
        "master": "local[1]",
        "conf": {"spark.driver.memory": "512m"},
        "to_offset": 9,
    }
    jobs.cancel(job.id, cluster=history)  # queued: cancelled at once, never run


def test_a_warm_submit_hands_the_next_job_to_a_runner_started_before_it(history, monkeypatch):
    monkeypatch.setenv(jobs.WARM_ENV, "1")  # tests/conftest.py turns standby runners off
    common = {"source": "/h:events", "master": "local[1]", "conf": SMALL}
    try:
        first = jobs.submit(history, "copy", target="/h:warm1", warm=True, **common)
        standby = jobs.standby_log(history, "local[1]", SMALL)
        assert standby is not None and standby.name.startswith("standby-")
        deadline = time.monotonic() + scaled(240)  # its Spark up (else no next one starts)
        while jobs.READY_LINE not in standby.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.2)
        second = jobs.submit(history, "copy", target="/h:warm2", warm=True, **common)
        assert not standby.exists()  # renamed: the second job's log
        following = jobs.standby_log(history, "local[1]", SMALL)
        assert following not in (None, standby)  # the next
    finally:
        jobs.close_standbys()
    assert jobs.standby_log(history, "local[1]", SMALL) is None
    # let go while its Spark starts, the next one stops at once (its log goes with it)
    deadline = time.monotonic() + scaled(20)
    while following.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not following.exists()
    done = [jobs.wait(j, cluster=history, timeout=scaled(300)) for j in (first, second)]
    assert [j.state for j in done] == [jobs.SUCCEEDED] * 2, done[1].log_tail
    assert [j.result["messages"] for j in done] == [200, 200]
    log = jobs.job_log(done[1])
    assert Path(done[1].log_path).name == f"job-{second}.log"
    # the standby's own lines first: Spark started before the job came
    assert log.job[0].startswith("Spark ready in ") and log.job[1].startswith(f"job {second}: copy")
    assert done[1].progress == 1.0 and done[1].step == "step 2 of 2: writing to the target"


class _Runner:
    """A job process as `jobs.submit` and its standbys see it, not started: its argv and
    what was written to its stdin are kept."""

    pid = os.getpid()  # alive, so that its job stays queued

    def __init__(self, argv, **kwargs):
        self.argv = argv
        self.stdin = io.BytesIO()
        self.given = b""
        close = self.stdin.close

        def keep_and_close():
            self.given = self.stdin.getvalue()
            close()

        self.stdin.close = keep_and_close

    def poll(self):
        return None

    def wait(self):
        return 0


def test_a_jobs_rows_are_bounded_by_its_sources_messages(tmp_path):
    with Cluster.open(tmp_path / "c") as c:
        c.create_stream("/s", ttl=0)
        c.create_topic("/s:a", partitions=2)
        c.create_topic("/s:b", partitions=1)
        producer = Producer(c, acks=1)
        for i in range(50):
            producer.send("/s:a" if i < 30 else "/s:b", b"v", partition=i % 2 if i < 30 else 0)
        producer.close()
        c.delete_records("/s:a", 0, 5)  # gone from the log: no longer read
        assert jobs.rows_at_most(c, {"source": "/s:a"}) == 25
        # a stream's count, whatever its pattern picks: an upper bound (it still counts
        # the records deleted from inside a partitionlet)
        assert jobs.rows_at_most(c, {"stream": "/s", "topic_pattern": "a"}) == 50
        assert jobs.rows_at_most(c, {"source": "/s:nothing"}) is None
        assert jobs.rows_at_most(c, {"stream": "/nothing"}) is None
        assert jobs.is_short(c, {"source": "/s:a"})
        assert not jobs.is_short(c, {"source": "/s:nothing"})  # unknown: not short


def test_short_jobs_go_to_a_standby_and_long_ones_start_their_own(history, monkeypatch):
    # a standby's JIT stops at C1, which costs a long job more than it saves (SHORT_ROWS)
    runners: list[_Runner] = []

    def popen(argv, **kwargs):
        runners.append(_Runner(argv, **kwargs))
        return runners[-1]

    monkeypatch.setattr(jobs.subprocess, "Popen", popen)
    monkeypatch.setenv(jobs.WARM_ENV, "1")
    common = {"source": "/h:events", "master": "local[1]", "conf": SMALL}
    try:
        jobs.prewarm(history, "local[1]", SMALL)
        standby = runners[0]
        assert standby.argv[2:4] == ["spark_tasks.run", "--standby"]
        monkeypatch.setattr(jobs, "SHORT_ROWS", 200)  # /h:events holds 200: not short now
        long = jobs.submit(history, "copy", target="/h:long", warm=True, **common)
        assert runners[1].argv[2:] == ["spark_tasks.run", str(Path(history).resolve()), str(long)]
        assert standby.given == b"" and jobs.standby_log(history, "local[1]", SMALL) is not None
        monkeypatch.setattr(jobs, "SHORT_ROWS", 201)
        short = jobs.submit(history, "copy", target="/h:short", warm=True, **common)
        assert standby.given == f"{short}\n".encode() and len(runners) == 2
    finally:
        jobs.close_standbys()
    for job_id in (long, short):  # queued, their runners never started: cancelled at once
        assert jobs.cancel(job_id, cluster=history).state == jobs.CANCELLED


def test_cancel_queued_and_unknown(history):
    with pytest.raises(jobs.UnknownJob):
        jobs.status(10_000 + uuid.uuid4().int % 1000, cluster=history)
    # A job cancelled before its process claims it never runs.
    with Cluster.open(history) as cluster:
        params = json.dumps({"source": "/h:events", "target": "/h:x"})
        job_id = cluster.jobs.add("copy", params, jobs.QUEUED, 0)
    assert jobs.cancel(job_id, cluster=history).state == jobs.CANCELLED
    from spark_tasks import run

    assert run.main([history, str(job_id)]) == 0  # the runner sees it and does nothing
    assert jobs.status(job_id, cluster=history).state == jobs.CANCELLED


def test_a_job_whose_process_died_is_failed(history):
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with Cluster.open(history) as cluster:
        job_id = cluster.jobs.add("copy", "{}", jobs.RUNNING, 0)
        cluster.jobs.update(job_id, pid=dead.pid, host=socket.gethostname())
    job = jobs.status(job_id, cluster=history)
    assert job.state == jobs.FAILED and "died" in job.error


# --- who may submit what (no Spark: the job process launch is faked) -----------------------

ALICE = Principal("alice", ("analysts",))
BOB = Principal("bob")
ROOT = Principal("root", superuser=True)
READER = Principal("reader", ("analysts",), superuser=True, read_only=True)


@pytest.fixture
def guarded(tmp_path):
    """/in (analysts consume), /out (analysts produce, nobody but its creator creates
    topics) with an existing topic, and /secret (its creator only)."""
    path = tmp_path / "guarded"
    with Cluster.open(path) as c:
        c.create_stream("/in", consume_perm="g:analysts", ttl=0)
        c.create_topic("/in:t", partitions=1)
        c.create_stream("/out", produce_perm="g:analysts")
        c.create_topic("/out:existing")
        c.create_stream("/secret")
        c.create_topic("/secret:t")
    return path


def recorded(path) -> list:
    with Cluster.open(path) as c:
        return c.jobs.newest(100)


@pytest.mark.parametrize(
    ("kind", "params", "principal", "message"),
    [
        ("window-counts", {"source": "/secret:t"}, ALICE, "may not consume from stream /secret"),
        ("window-counts", {"stream": "/secret"}, ALICE, "may not consume from stream /secret"),
        ("copy", {"source": "/in:t", "target": "/in:c"}, ALICE, "may not produce to stream /in"),
        ("copy", {"source": "/in:t", "target": "/out:new"}, ALICE, "may not create or delete"),
        ("window-counts", {"source": "/in:nope"}, ALICE, "nope"),
        ("custom", {"source": "/in:t", "file": __file__}, ALICE, "Only administrators may run"),
        ("window-counts", {"source": "/in:t", "output": "/tmp/x"}, ALICE, "may set output"),
        ("window-counts", {"source": "/in:t", "master": "local[1]"}, ALICE, "may set master"),
        ("window-counts", {"source": "/in:t", "conf": {"a": "b"}}, ALICE, "may set conf"),
        ("window-counts", {"source": "/in:t"}, BOB, "may not consume from stream /in"),
        # a read-only user, even an administrator, starts no job (it writes its result)
        ("window-counts", {"source": "/in:t"}, READER, "is read-only: they may not start jobs"),
    ],
)
def test_submit_refuses_what_its_principal_may_not_do(
    guarded, launches, kind, params, principal, message
):
    with pytest.raises((errors.AccessDenied, errors.NotFound), match=re.escape(message)):
        jobs.submit(guarded, kind, principal=principal, **params)
    assert recorded(guarded) == [] and launches == []


def test_submit_as_a_principal_records_who_asked(guarded, launches):
    job_id = jobs.submit(guarded, "copy", principal=ALICE, source="/in:t", target="/out:existing")
    job = jobs.status(job_id, cluster=guarded)
    assert job.params[jobs.SUBMITTED_BY] == "alice" and len(launches) == 1
    with Cluster.open(guarded, principal=ALICE) as alice, Cluster.open(guarded) as own:
        assert jobs.may_see(alice, job) and jobs.may_cancel(alice, job)
        assert jobs.may_cancel(own, job)  # the library's own principal administers
    with Cluster.open(guarded, principal=BOB) as bob:
        assert not jobs.may_see(bob, job) and not jobs.may_cancel(bob, job)
    with Cluster.open(guarded, principal=READER) as reader:  # sees all, cancels nothing
        assert jobs.may_see(reader, job) and not jobs.may_cancel(reader, job)


def test_administrators_and_the_library_itself_pass(guarded, launches, tmp_path):
    script = tmp_path / "job.py"
    script.write_text("def transform(df):\n    return df\n")
    custom = {"source": "/secret:t", "file": str(script), "output": str(tmp_path / "o")}
    jobs.submit(guarded, "custom", principal=ROOT, **custom)
    jobs.submit(guarded, "custom", **custom)  # plet replay, the terminal console
    assert len(recorded(guarded)) == 2 and len(launches) == 2


def test_refusals_name_every_reason_with_its_parameter(guarded):
    params = {"source": "/secret:t", "target": "/in:c", "output": "/tmp/x", "master": None}
    with Cluster.open(guarded, principal=ALICE) as alice:
        found = jobs.refusals(alice, "materialize", params)
        assert [(r.param, type(r.error)) for r in found] == [
            ("output", errors.AccessDenied),
            ("source", errors.AccessDenied),
            ("target", errors.AccessDenied),
        ]
        assert jobs.refusals(alice, "copy", {"source": "/in:t", "target": "/out:existing"}) == []
        same = jobs.refusals(alice, "copy", {"source": "/in:t", "target": "/in:t"})
        assert [r.param for r in same] == ["target"]  # may not produce to /in either
        odd = jobs.refusals(alice, "copy", {"source": 7, "target": "/out:existing"})
        assert [(r.param, type(r.error)) for r in odd] == [("source", errors.InvalidArgument)]


def test_a_stored_ace_that_does_not_parse_refuses_all_but_administrators(guarded, launches):
    from tests.old_catalog import write_policies

    with Cluster.open(guarded) as c:
        write_policies(c, "/in", consume_perm="((((")
    with pytest.raises(errors.AccessDenied, match="not a valid ACE"):
        jobs.submit(guarded, "window-counts", principal=ALICE, source="/in:t")
    assert launches == []
    jobs.submit(guarded, "window-counts", principal=ROOT, source="/in:t")
    assert len(launches) == 1


def test_a_topic_pattern_that_is_no_regular_expression_is_refused(guarded, launches):
    with pytest.raises(errors.InvalidArgument, match="topic_pattern is not a regular expression"):
        jobs.submit(guarded, "window-counts", stream="/secret", topic_pattern="(")
    assert launches == []


def test_a_masked_stream_is_replayed_only_by_who_may_unmask_it(guarded, launches):
    # a replay reads the data itself (engine.masking): the mask would not hold in its results
    with Cluster.open(guarded) as c:
        c.edit_stream("/in", mask="value.card")
    with pytest.raises(errors.AccessDenied, match="only who may unmask the stream"):
        jobs.submit(guarded, "window-counts", principal=ALICE, source="/in:t")
    assert launches == []
    with Cluster.open(guarded) as c:
        c.edit_stream("/in", unmask_perm="g:analysts")
    jobs.submit(guarded, "window-counts", principal=ALICE, source="/in:t")
    jobs.submit(guarded, "window-counts", principal=ROOT, stream="/in")
    assert len(launches) == 2
