"""`plet bench` / `bench.command.bench_command`: options, output, exit codes.

The quick runs measure nothing worth keeping; these tests check the shape of what the
command produces (rows for every system, ratios, targets, files), never a speed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench import command, report
from bench.cases import QUICK_MESSAGES, Case, Result
from bench.command import bench_command, parse_count, parse_size

SIZES = (100, 1024)
RATIO = re.compile(r"^\d+\.\d+x$")


def _invoke(args: list[str]):
    return CliRunner().invoke(bench_command, args, catch_exceptions=False)


def _table_rows(stdout: str) -> dict[str, list[str]]:
    """The results table of the text report: case name -> the cells after it."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("case "))
    header = re.split(r"\s{2,}", lines[start].strip())
    out = {}
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        # the case name is the one left-aligned column; the others are right-aligned numbers
        cells = re.split(r"\s{2,}", line.rstrip())
        out[cells[0]] = cells[1:]
    assert header[0] == "case"
    return out


# --------------------------------------------------------------------------- full quick run


def test_quick_run_reports_every_system_with_ratios(tmp_path):
    json_file, md_file = tmp_path / "run.json", tmp_path / "run.md"
    work = tmp_path / "work"
    result = _invoke(
        ["--quick", "--dir", str(work), "--json", str(json_file), "--markdown", str(md_file)]
    )
    assert result.exit_code == 0, result.output

    data = json.loads(json_file.read_text())
    results = data["results"]
    assert {r["system"] for r in results} == {"partitionlet", "sqlite", "redis"}
    assert all(r["error"] is None for r in results), [r["error"] for r in results]
    assert all(r["messages"] == QUICK_MESSAGES and r["seconds"] > 0 for r in results)
    for size in SIZES:
        for system in ("partitionlet", "sqlite", "redis"):
            ops = {r["op"] for r in results if r["system"] == system and r["size"] == size}
            assert ops == {"produce", "consume"}, (system, size)
        acks = [
            r["params"]["acks"]
            for r in results
            if r["system"] == "partitionlet" and r["op"] == "produce" and r["size"] == size
        ]
        assert acks == [0, 1, "all"]
        # bytes are the values moved: size x messages, for every system and operation
        for r in results:
            if r["size"] == size:
                assert r["bytes"] == size * QUICK_MESSAGES, r["case"]

    # every Partitionlet result has a ratio to both peers, except acks=all to Redis (whose
    # AOF everysec makes no fsync-per-write promise); peers have none
    for r in results:
        if r["system"] == "partitionlet":
            assert set(r["ratios"]) == {"redis", "sqlite"}
            for peer, value in r["ratios"].items():
                if peer == "redis" and r["durability"] == "machine":
                    assert value is None, r["case"]
                    continue
                assert value is not None and value > 0, (r["case"], peer)
                peer_rate = next(
                    p["msg_per_s"]
                    for p in results
                    if p["system"] == peer
                    and p["op"] == r["op"]
                    and p["size"] == r["size"]
                    and (
                        r["op"] == "consume"
                        or p["durability"]
                        == ("machine" if r["durability"] == "machine" else "process")
                    )
                )
                assert value == pytest.approx(r["msg_per_s"] / peer_rate)
        else:
            assert r["ratios"] == {}
    assert [t["target"] for t in data["targets"]] == [t.label for t in report.TARGETS]
    # a smoke run judges no target: a few thousand messages say nothing of a rate
    assert all(t["met"] is None for t in data["targets"])
    assert all(t["actual"].endswith("(--quick: not judged)") for t in data["targets"])
    assert "NOT MET" not in result.stdout
    assert data["settings"]["messages"] == {"100": QUICK_MESSAGES, "1024": QUICK_MESSAGES}
    assert re.fullmatch(
        r"[\d.]+ before, [\d.]+ after \(1-minute average\)", data["machine"]["load"]
    )

    # the text report on stdout: one row per case, ratio cells on Partitionlet rows
    stdout = result.stdout
    assert "Machine" in stdout and "Targets (one process):" in stdout
    assert "÷ redis" in stdout and "÷ sqlite" in stdout
    rows = _table_rows(stdout)
    assert set(rows) == {r["case"] for r in results}
    for r in results:
        cells = rows[r["case"]]
        if r["system"] == "partitionlet":
            no_redis = r["durability"] == "machine"
            assert (cells[-2] == "—") if no_redis else RATIO.match(cells[-2]), cells
            assert RATIO.match(cells[-1]), cells
        else:
            assert len(cells) == 4, cells  # messages, seconds, msg/s, MB/s; no ratios
    # progress went to stderr, one line per case
    assert len(re.findall(r"^\[\s*\d+\] ", result.stderr, re.M)) == len(results)

    markdown = md_file.read_text()
    assert markdown.startswith("Measured ")
    assert "| case | messages | seconds | msg/s | MB/s | ÷ redis | ÷ sqlite |" in markdown
    assert "**Targets** (one process)" in markdown
    assert markdown.count("| partitionlet ") == 8  # 3 produce + 1 consume, per size

    # the work directory was made inside --dir and removed afterwards
    assert work.is_dir() and list(work.iterdir()) == []


def test_plet_bench_runs_through_the_cli_group(tmp_path):
    from engine.cli import cli

    json_file = tmp_path / "run.json"
    result = CliRunner().invoke(
        cli,
        ["bench", "--quick", "--no-redis", "--sizes", "100", "--acks", "1,all"]
        + ["--dir", str(tmp_path), "--json", str(json_file), "--keep"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    data = json.loads(json_file.read_text())
    cases = [r["case"] for r in data["results"]]
    assert cases == [
        "partitionlet produce 100 B acks=1",
        "partitionlet produce 100 B acks=all linger_ms=5",
        "partitionlet consume 100 B poll max_records=500",
        "sqlite produce 100 B synchronous=NORMAL, 10,000 rows/txn",
        "sqlite produce 100 B synchronous=FULL, 10,000 rows/txn",
        "sqlite consume 100 B SELECT cursor",
    ]
    assert "Redis peer disabled (--no-redis)." in data["notes"]
    for r in data["results"]:
        if r["system"] == "partitionlet":
            assert r["ratios"]["redis"] is None and r["ratios"]["sqlite"] > 0
    # the Redis targets cannot be judged without Redis
    judged = {t["target"]: t["met"] for t in data["targets"]}
    assert judged["produce 100 B, acks=1 vs Redis Streams"] is None
    # --keep leaves the work directory, with the cluster in it
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(command.WORKDIR_PREFIX)]
    assert len(kept) == 1 and (kept[0] / "partitionlet").is_dir()
    assert f"work directory kept: {kept[0]}" in result.stderr


# --------------------------------------------------------------------------- exit codes


def _failing_run(monkeypatch, system: str):
    """Make the command run one fake case of `system` that raises."""

    def boom(ctx):
        raise RuntimeError("the disk caught fire")

    def provider(ctx):
        return [Case(system, "produce", 100, "acks=1", "process", 10, boom, {"acks": 1})]

    real = command.run_benchmark
    monkeypatch.setattr(
        command, "run_benchmark", lambda settings, progress: real(settings, [provider], progress)
    )


def test_a_failed_case_gives_exit_code_1(tmp_path, monkeypatch):
    _failing_run(monkeypatch, "partitionlet")
    md_file = tmp_path / "run.md"
    result = _invoke(["--quick", "--dir", str(tmp_path), "--markdown", str(md_file)])
    assert result.exit_code == 1
    assert "ERROR RuntimeError: the disk caught fire" in result.stderr
    assert "error: 1 case(s) failed" in result.stderr
    assert "partitionlet produce 100 B acks=1: RuntimeError: the disk caught fire" in result.stdout
    # the report is still written, errors included
    assert "**Errors**" in md_file.read_text()


def test_no_partitionlet_case_gives_exit_code_1(tmp_path, monkeypatch):
    monkeypatch.setattr(
        command,
        "run_benchmark",
        lambda settings, progress: command.Run(settings, {"cpu": "test"}),
    )
    result = _invoke(["--quick", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "error: no Partitionlet case ran" in result.stderr


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sizes", "0"], "a message size must be 1 B to 1 MiB"),
        (["--sizes", "2MiB"], "a message size must be 1 B to 1 MiB"),
        (["--sizes", "big"], "'big' is not a size"),
        (["--sizes", "100,,1k"], "is not a comma-separated list"),
        (["--acks", "2"], "acks must be 0, 1 or 'all'"),
        (["--acks", ""], "is not a comma-separated list"),
        (["--messages", "0"], "the message count must be at least 1"),
        (["--messages", "lots"], "'lots' is not a message count"),
        (["--messages", "-5"], "is not a message count"),
        (["--quick", "--messages", "10"], "--quick and --messages cannot be used together"),
        (["--max-records", "0"], "0 is not in the range x>=1"),
        (["--json", "no/such/dir/run.json"], "does not exist"),
        (["--bogus"], "No such option"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)

    def must_not_run(*args, **kwargs):
        raise AssertionError("the benchmark ran despite a usage error")

    monkeypatch.setattr(command, "run_benchmark", must_not_run)
    result = _invoke(args)
    assert result.exit_code == 2, result.output
    assert "Usage:" in result.stderr
    assert message in result.stderr
    assert list(tmp_path.iterdir()) == []  # no work directory was made


def test_output_file_that_is_a_directory_is_refused(tmp_path):
    result = _invoke(["--markdown", str(tmp_path)])
    assert result.exit_code == 2
    assert "Invalid value for '--markdown'" in result.stderr
    assert "is a directory" in result.stderr


def test_dir_that_is_a_file_is_refused(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    result = _invoke(["--quick", "--dir", str(file)])
    assert result.exit_code == 2
    assert "Invalid value for '--dir'" in result.stderr


def test_help_lists_the_options():
    result = _invoke(["--help"])
    assert result.exit_code == 0
    for option in ("--quick", "--messages", "--sizes", "--acks", "--dir", "--no-redis"):
        assert option in result.stdout
    assert "--json" in result.stdout and "--markdown" in result.stdout


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("text", "size"),
    [("100", 100), ("1024", 1024), ("1KiB", 1024), ("1k", 1024), ("4 kib", 4096)]
    + [("1MiB", 1024 * 1024), ("100B", 100)],
)
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "count"),
    [("2000", 2000), ("1_000_000", 1_000_000), ("200k", 200_000), ("1M", 1_000_000)],
)
def test_parse_count(text, count):
    assert parse_count(text) == count


def test_sizes_and_acks_lists_drop_repeats_and_keep_order():
    assert command._sizes("1KiB, 100, 1024") == (1024, 100)
    assert command._acks("all,1,-1,0") == ("all", 1, 0)


def test_default_work_directory_avoids_tmpfs(tmp_path, monkeypatch):
    ram = tmp_path / "ram"
    ram.mkdir()
    monkeypatch.setattr(command.tempfile, "gettempdir", lambda: str(ram))

    def mount_of(path, mounts=None):
        if Path(path).resolve() == ram.resolve():
            return ("tmpfs", str(ram), "tmpfs")
        return ("/dev/sda1", "/", "ext4")

    monkeypatch.setattr(report, "mount_of", mount_of)
    assert command.on_ram(ram)
    base = command.default_base()
    assert base != ram and not command.on_ram(base)


def test_make_workdir_is_fresh_each_time(tmp_path):
    first, second = command.make_workdir(tmp_path), command.make_workdir(tmp_path)
    assert first != second
    assert first.parent == second.parent == tmp_path
    assert first.name.startswith(command.WORKDIR_PREFIX) and list(first.iterdir()) == []


def test_quick_measurement_settings(tmp_path, monkeypatch):
    """--quick, --sizes and --acks become the run's Settings (and --max-records has a default)."""
    seen = {}

    def fake_run(settings, progress):
        seen["settings"] = settings
        run = command.Run(settings, {"cpu": "test"})
        run.results = [
            Result("partitionlet", "produce", 100, "acks=1", "process", 5, 5, 0.5, 500, {"acks": 1})
        ]
        return run

    monkeypatch.setattr(command, "run_benchmark", fake_run)
    result = _invoke(["--quick", "--sizes", "100", "--acks", "1", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    settings = seen["settings"]
    assert settings.sizes == (100,) and settings.acks == (1,)
    assert settings.messages_for(100) == QUICK_MESSAGES and settings.redis is True
    assert settings.consume_max_records == 500  # the Consumer's default max_poll_records
    assert not settings.workdir.exists()  # removed after the run
    assert "partitionlet produce 100 B acks=1" in result.stdout


def test_max_records_and_no_redis_reach_the_settings(tmp_path, monkeypatch):
    seen = {}

    def fake_run(settings, progress):
        seen["settings"] = settings
        return command.Run(settings, {"cpu": "test"})

    monkeypatch.setattr(command, "run_benchmark", fake_run)
    _invoke(["-n", "20k", "--max-records", "2000", "--no-redis", "--dir", str(tmp_path)])
    settings = seen["settings"]
    assert settings.consume_max_records == 2000 and settings.redis is False
    assert settings.messages == {100: 20_000, 1024: 20_000}


def test_the_latency_case_reaches_the_output_json_and_markdown(tmp_path, monkeypatch):
    """`--latency N` runs bench.latency in the work directory (its own test runs it for
    real: tests/bench/test_bench_latency.py) and reports it in all three outputs."""
    from bench import latency

    seen = {}

    def fake_run(n, workdir):
        seen["n"], seen["workdir"] = n, workdir
        return [latency.Latencies("over the wire (plet serve, confluent-kafka)", [1.0, 2.0, 3.0])]

    monkeypatch.setattr(command.latency, "run", fake_run)
    json_file, md_file = tmp_path / "run.json", tmp_path / "run.md"
    result = _invoke(
        ["--quick", "--no-redis", "--sizes", "100", "--acks", "1", "--latency", "3"]
        + ["--dir", str(tmp_path), "--json", str(json_file), "--markdown", str(md_file)]
    )
    assert result.exit_code == 0, result.output
    assert seen["n"] == 3 and seen["workdir"].name == "latency"
    assert "over the wire (plet serve, confluent-kafka): p50 2.00 ms" in result.stdout
    (row,) = json.loads(json_file.read_text())["latency"]
    assert row == {
        "case": "over the wire (plet serve, confluent-kafka)",
        "received": 3,
        "p50_ms": 2.0,
        "p99_ms": 3.0,
        "max_ms": 3.0,
    }
    assert "| over the wire (plet serve, confluent-kafka) | 3 | 2.00 |" in md_file.read_text()
