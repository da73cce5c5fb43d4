"""A replay's progress never goes back, its rows read are those of its range, and its log
and result show times as ISO 8601 UTC with `Z`: the computations, without Spark."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

from spark_tasks import jobs, replays, run
from spark_tasks.progress import STEP_END, Progress
from tests.spark_tasks.test_job_state import _job

# The stages Spark reported for a copy replay, tick after tick, as a monitor saw them
# (stage id -> (tasks done, tasks)): its ratio of tasks went 0, 100, 33, 40, 17, 56, 78,
# 61, 58, 50, 100 % as Spark added stages (issue 27).
COPY_TICKS = [
    (0, {}),
    (0, {0: (1, 1)}),
    (0, {0: (1, 1), 1: (0, 2)}),
    (0, {0: (1, 1), 1: (1, 2), 2: (1, 2)}),
    (0, {0: (1, 1), 1: (2, 2), 2: (2, 2), 3: (0, 7)}),
    (1, {0: (1, 1), 1: (2, 2), 2: (2, 2), 3: (2, 7), 4: (0, 2)}),
    (1, {0: (1, 1), 1: (2, 2), 2: (2, 2), 3: (7, 7), 4: (1, 2)}),
    (1, {0: (1, 1), 1: (2, 2), 2: (2, 2), 3: (7, 7), 4: (2, 2), 5: (0, 4)}),
    (1, {0: (1, 1), 1: (2, 2), 2: (2, 2), 3: (7, 7), 4: (2, 2), 5: (3, 4), 6: (0, 6)}),
    (1, {0: (1, 1), 1: (2, 2), 2: (2, 2), 3: (7, 7), 4: (2, 2), 5: (4, 4), 6: (6, 6)}),
]


def test_progress_over_stages_spark_adds_never_goes_back():
    progress = Progress(replays.STEPS["copy"])
    seen = []
    for step, stages in COPY_TICKS:
        progress.begin(step)
        seen.append(progress.update(stages))
    assert seen == sorted(seen)  # never lower
    assert seen[0] == 0 and 0 < seen[1] < 0.5  # a first stage done is not the whole job
    assert seen[4] < 0.5 <= seen[5]  # the second step begins at half the bar
    assert seen[-1] < 1 and progress.label == "step 2 of 2: writing to the target"
    assert progress.finish() == 1.0


def test_a_step_holds_its_mark_when_spark_adds_a_stage_and_stops_short_of_its_end():
    progress = Progress(("only",))
    assert progress.update({0: (3, 4)}) == STEP_END * 3 / 4
    assert progress.update({0: (4, 4), 1: (0, 12)}) == STEP_END * 3 / 4  # 4 of 16: held
    assert progress.update({0: (4, 4), 1: (10, 12)}) == STEP_END * 14 / 16
    assert progress.update({0: (4, 4), 1: (12, 12)}) == STEP_END  # more stages may come
    progress.begin(3)  # past the last step: still the last
    assert progress.label == "step 1 of 1: only" and progress.value == STEP_END


def test_a_stage_counts_in_the_step_it_was_first_seen_in():
    progress = Progress(("a", "b"))
    progress.update({0: (0, 10)})
    progress.begin(1)
    # stage 0 (step a) ending does not fill step b
    assert progress.update({0: (10, 10), 1: (0, 10)}) == 0.5
    assert progress.update({0: (10, 10), 1: (5, 10)}) == 0.5 + STEP_END * 0.5 / 2


def test_the_job_progress_is_the_runners_else_tasks_of_an_older_runner():
    from web.replays import progress

    running = _job("running", tasks_done=3, tasks_total=4, first_task_ms=1, done_fraction=0.25)
    assert running.progress == 0.25 and progress(running) == (250, 1000)
    assert json.loads(json.dumps(running.to_dict()))["progress"] == 0.25
    older = _job("running", tasks_done=3, tasks_total=4, first_task_ms=1)
    assert older.progress == 0.75 and progress(older) == (3, 4)


def _node(node_id, name, rows=None):
    metrics = [] if rows is None else [{"name": "number of output rows", "value": rows}]
    return {"nodeId": node_id, "nodeName": name, "metrics": metrics}


def test_rows_read_are_those_after_the_offset_filter():
    # Spark's SQL graph of a replay's read: an archived file the range cuts (Parquet
    # scan, then the offset filter), archived files read whole, the data source's live
    # partitionlets; then a cache and a count
    nodes = [
        _node(0, "HashAggregate", "1"),
        _node(1, "InMemoryTableScan", "13,334"),
        _node(2, "Union"),
        _node(3, "Filter", "3,334"),
        _node(4, "ColumnarToRow", "10,000"),
        _node(5, "Scan parquet", "10,000"),
        _node(6, "ColumnarToRow", "9,000"),
        _node(7, "Scan parquet", "9,000"),
        _node(8, "BatchScan partitionlet", "1,000"),
    ]
    edges = [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (6, 2), (7, 6), (8, 2)]
    edges = [{"fromId": a, "toId": b} for a, b in edges]
    assert run.rows_in_range(nodes, edges) == 3_334 + 9_000 + 1_000
    assert run.rows_in_range([], []) == 0


def test_times_in_the_result_and_the_log_are_iso_utc_with_z():
    local = timezone(timedelta(hours=2))
    moment = datetime(2026, 11, 26, 10, 0, 0, 123000, tzinfo=UTC)
    naive_local = moment.astimezone().replace(tzinfo=None)  # what PySpark hands over
    row = {
        "window_start": naive_local,
        "at": moment.astimezone(local),
        "key": b"k1",
        "raw": b"\xff",
        "n": Decimal("1.5"),
        "nested": [{"day": moment.date()}],
    }
    assert replays.json_ready(row) == {
        "window_start": "2026-11-26T10:00:00.123Z",
        "at": "2026-11-26T10:00:00.123Z",
        "key": "k1",
        "raw": "/w==",
        "n": 1.5,
        "nested": [{"day": "2026-11-26"}],
    }
    text = jobs.params_text({"source": "/s:t", "from_time": 1_764_151_200_000, "from_offset": 3})
    assert json.loads(text) == {
        "source": "/s:t",
        "from_time": "2025-11-26T10:00:00.000Z",
        "from_offset": 3,
    }
    assert "datetime" not in text


# --- standby runners (no Spark: their processes are faked) ---------------------------------


class _FakeRunner:
    """A standby runner's Popen: its stdin collects what it is sent."""

    def __init__(self, argv, **kwargs):
        import io

        self.argv, self.ended = argv, None
        self.pid = 10_000_000 + len(_FakeRunner.made)
        self.stdin = io.BytesIO()
        self.stdin.close = lambda: setattr(self, "closed_with", self.stdin.getvalue())
        _FakeRunner.made.append(self)

    made: list = []

    def poll(self):
        return self.ended

    def wait(self):
        return 0


def test_a_job_goes_to_the_waiting_runner_and_a_dead_one_is_passed_over(tmp_path, monkeypatch):
    from spark_tasks.jobs import Standbys

    monkeypatch.setattr(jobs.subprocess, "Popen", _FakeRunner)
    _FakeRunner.made = []
    (tmp_path / "jobs").mkdir()
    standbys, setup = Standbys(), ("local[2]", "{}")
    assert standbys.hand_over(str(tmp_path), setup, 1, tmp_path / "jobs" / "job-1.log") is None
    first = _FakeRunner.made[0]  # started for the next job
    assert first.argv[3:] == ["--standby", str(tmp_path), "local[2]", "{}"]
    standby_log = standbys.log_of(str(tmp_path), setup)
    standby_log.write_text("Spark ready\n")
    got = standbys.hand_over(str(tmp_path), setup, 2, tmp_path / "jobs" / "job-2.log")
    assert got is first and first.closed_with == b"2\n"
    assert (tmp_path / "jobs" / "job-2.log").read_text() == "Spark ready\n"
    second = _FakeRunner.made[1]
    second.ended = 1  # it died waiting: the job starts cold, and a new one waits
    assert standbys.hand_over(str(tmp_path), setup, 3, tmp_path / "jobs" / "job-3.log") is None
    assert len(_FakeRunner.made) == 3 and standbys.log_of(str(tmp_path), setup) is not None
    # a job that comes while the runner's Spark still starts (a form submitted as it
    # opened) goes to it, and no next runner starts beside it (the next prewarm starts one)
    third = _FakeRunner.made[2]
    assert standbys.hand_over(str(tmp_path), setup, 4, tmp_path / "jobs" / "job-4.log") is third
    assert len(_FakeRunner.made) == 3 and standbys.log_of(str(tmp_path), setup) is None
    standbys.ensure(str(tmp_path), setup)
    assert len(_FakeRunner.made) == 4 and standbys.log_of(str(tmp_path), setup) is not None
    standbys.close()
    assert standbys.log_of(str(tmp_path), setup) is None
