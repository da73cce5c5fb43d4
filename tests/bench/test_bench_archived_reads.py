"""`plet bench --archived N` (bench.archived_reads): a small real run and what the command
makes of it. The shape of the output only, never a speed."""

from __future__ import annotations

import json

from click.testing import CliRunner

from bench import archived_reads, command
from bench.command import bench_command


def test_a_small_run_reads_every_way_archived_decoded_and_live(tmp_path):
    result = archived_reads.run(tmp_path, 6000, rounds=1, partitionlet_bytes=128 << 10)

    assert result.messages == 6000
    assert result.archived_partitionlets >= 2  # batches of a quarter of a partitionlet
    assert 0 <= result.live_tail < 6000
    assert [r.mode for r in result.reads] == ["poll", "poll_arrow", "poll_arrow_batches"]
    for r in result.reads:
        assert len(r.archived_s) == len(r.decoded_s) == len(r.live_s) == 1
        assert min(r.archived_s + r.decoded_s + r.live_s) > 0
    text = archived_reads.text(result)
    assert "6,000 messages of 100 B" in text and text.count("archived, decoded") == 3
    table = archived_reads.markdown(result).splitlines()
    assert table[2] == "| read | archived / live rows/s, per round | archived, decoded / live |"
    assert [row.split(" | ")[0] for row in table[4:]] == [
        "| `poll`",
        "| `poll_arrow`",
        "| `poll_arrow_batches`",
    ]


def test_the_command_runs_the_case_and_reports_it_in_every_output(tmp_path, monkeypatch):
    seen = {}

    def fake_run(workdir, messages):
        seen["workdir"], seen["messages"] = workdir, messages
        read = archived_reads.ArchivedRead("poll_arrow", messages, [0.5], [1.0], [0.25])
        return archived_reads.ArchivedReads(messages, 7, 12, [read])

    monkeypatch.setattr(command.archived_reads, "run", fake_run)
    json_file, md_file = tmp_path / "run.json", tmp_path / "run.md"
    result = CliRunner().invoke(
        bench_command,
        ["--quick", "--no-redis", "--sizes", "100", "--acks", "1", "--archived", "1k"]
        + ["--dir", str(tmp_path), "--json", str(json_file), "--markdown", str(md_file)],
        catch_exceptions=False,
    )

    assert result.exit_code == 0, result.output
    assert seen["messages"] == 1000 and seen["workdir"].name == "archived"
    assert "2,000 / 4,000 (0.50x)" in result.stdout  # archived / live rows/s
    assert "1,000 / 4,000 (0.25x)" in result.stdout  # decoded / live
    data = json.loads(json_file.read_text())["archived_reads"]
    assert data["archived_partitionlets"] == 7 and data["reads"][0]["live_s"] == [0.25]
    assert "| `poll_arrow` | 2,000 / 4,000 (0.50x) | 1,000 / 4,000 (0.25x) |" in (
        md_file.read_text()
    )
