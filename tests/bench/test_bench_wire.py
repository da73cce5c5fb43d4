"""`plet bench --wire N`: confluent-kafka and kcat against a real `plet serve` process, the
embedded API beside them; every message delivered and read back, the report complete."""

from __future__ import annotations

import json

from click.testing import CliRunner

from bench import wire
from bench.command import bench_command

# More than one produce request's worth (a 1 MiB batch holds about 9,000 records of 100 B),
# so a server that acknowledged a request without writing it shows up as a short count.
MESSAGES = 20_000

CASES = [
    "embedded produce acks=1",
    "embedded produce acks=all",
    "embedded consume",
    "confluent-kafka produce acks=1",
    "confluent-kafka produce acks=all",
    "confluent-kafka consume",
    "kcat produce acks=1",
    "kcat consume",
]


def test_wire_case_delivers_and_reads_back_every_message(tmp_path):
    lines = []
    run = wire.run(tmp_path, MESSAGES, progress=lines.append)

    assert [r.name for r in run.results] == CASES
    for r in run.results:
        assert r.error is None, f"{r.name}: {r.error}"
        assert r.expected == r.messages == MESSAGES, r.name
        assert r.value_bytes == MESSAGES * wire.SIZE, r.name
        assert r.seconds > 0 and r.msg_per_s > 0, r.name
        if r.client == "embedded":
            assert r.server_cpu_s is None and run.ratio(r) is None
        else:
            # the server process worked in every wire case, and each has its ratio
            assert r.server_cpu_s is not None and r.server_cpu_s > 0, r.name
            assert run.ratio(r) is not None and run.ratio(r) > 0, r.name
    # what the stopped server's cluster holds: every acknowledged message, no more
    assert run.log_end_offsets == {
        "produce-acks1": MESSAGES,
        "produce-acksall": MESSAGES,
        "kcat-acks1": MESSAGES,
    }
    assert run.server.split()[1:3] == ["serve", "--cluster"]
    assert len(lines) == 6  # one progress line per step

    report = wire.text(run)
    assert "Errors" not in report
    for name in CASES:
        assert name in report
    assert "confluent-kafka produce acks=1: >= 250,000 msg/s" in report
    assert "confluent-kafka consume: >= 500,000 msg/s" in report
    table = wire.markdown(run)
    assert table.count("\n| ") == len(CASES) + 1  # the rule row and one row per case
    data = run.to_json()
    assert [t["case"] for t in data["targets"]] == [
        "confluent-kafka produce acks=1",
        "confluent-kafka consume",
    ]
    assert data["settings"]["producer"]["linger.ms"] == wire.PRODUCER_SETTINGS["linger.ms"]
    assert all(item["ok"] for item in data["results"])
    # the work directory keeps only what the run made; the server is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "embedded",
        "kcat.out",
        "serve.log",
        "served",
        "values.txt",
    ]


def test_plet_bench_wire_option_adds_the_case_to_every_output(tmp_path):
    out_json = tmp_path / "run.json"
    out_md = tmp_path / "run.md"
    work = tmp_path / "work"
    work.mkdir()
    result = CliRunner().invoke(
        bench_command,
        [
            "--quick",
            "--sizes",
            "100",
            "--acks",
            "1",
            "--no-redis",
            "--dir",
            str(work),
            "--wire",
            "2000",
            "--json",
            str(out_json),
            "--markdown",
            str(out_md),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "Kafka wire listener: 2,000 messages of 100 B" in result.output
    data = json.loads(out_json.read_text())["wire"]
    assert data["messages"] == 2000
    assert [r["client"] + " " + r["op"] for r in data["results"]] == [
        " ".join(name.split()[:2]) for name in CASES
    ]
    assert all(r["messages"] == 2000 and r["ok"] for r in data["results"])
    assert "| confluent-kafka consume | 2,000 |" in out_md.read_text()
    assert list(work.iterdir()) == []  # the work directory is removed after the run
