"""The many-topics case of `plet bench --topics N`: it really makes N topics and reports
their listing and reopening (the numbers themselves are for docs/BENCHMARKS.md)."""

from __future__ import annotations

from click.testing import CliRunner

from bench import topics
from bench.command import bench_command


def test_run_makes_every_topic_and_measures_pages(tmp_path):
    result = topics.run(tmp_path, 500)
    assert result.topics == 500
    assert result.topics_per_s > 0 and result.one_topic_per_s > 0
    assert set(result.page_ms) == {"first", "middle", "last", "prefix", "after a name"}
    assert "500 topics" in result.text()
    assert "| `Cluster.open` (target < 1 s) |" in result.markdown()
    # the floor is measured, positive, and bounds the best ratio below 1
    assert result.floor_us > 0
    assert 0 < result.best_ratio < 1
    assert "best possible ratio" in result.text()


def test_bench_command_runs_the_many_topics_case(tmp_path):
    out = CliRunner().invoke(
        bench_command,
        [
            "--quick",
            "--no-redis",
            "--sizes",
            "100",
            "--acks",
            "1",
            "--topics",
            "300",
            "--dir",
            str(tmp_path),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "many topics: 300 topics" in out.output
    assert "create by producing" in out.output
