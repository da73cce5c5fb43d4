"""The web console case of `plet bench --web N`: it builds (then reuses) a stream of N
topics and times every Streams page with the Flask test client (the numbers themselves are
for docs/BENCHMARKS.md; nothing here is timed)."""

from __future__ import annotations

from click.testing import CliRunner

from bench import web
from bench.command import bench_command


def test_run_builds_the_cluster_once_and_times_every_page(tmp_path):
    result = web.run(60, cache=tmp_path, rounds=2)
    assert result.topics == 60
    names = [p.name for p in result.pages]
    assert names[:6] == [
        "streams list",
        "streams: last page",
        "streams: path descending",
        "streams search",
        "streams, sorted by size",
        "stream page (first topics)",
    ]
    assert "topics: middle page" in names and "topics: last page" in names
    assert all(len(p.ms) == 2 and p.median > 0 for p in result.pages)
    assert "stream of 60 topics and 40 other streams" in result.text()
    assert "| stream page (first topics) | `/streams/fleet` |" in result.markdown()

    built = tmp_path / f"web-60-{web.STREAMS}" / web.DONE
    stamp = built.stat().st_mtime_ns
    web.run(60, cache=tmp_path, rounds=1)  # reused, not rebuilt
    assert built.stat().st_mtime_ns == stamp


def test_bench_command_runs_the_web_case(tmp_path, monkeypatch):
    monkeypatch.setattr(web, "SCRATCH", tmp_path / "scratch")
    out = CliRunner().invoke(
        bench_command,
        ["--quick", "--no-redis", "--sizes", "100", "--acks", "1", "--web", "40"]
        + ["--dir", str(tmp_path)],
    )
    assert out.exit_code == 0, out.output
    assert "web console: server time per page, stream of 40 topics" in out.output
    assert (tmp_path / "scratch" / f"web-40-{web.STREAMS}" / web.DONE).exists()
