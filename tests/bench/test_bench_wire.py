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
    "embedded consume of wire batches",  # what confluent-kafka wrote, read back embedded
]


def test_wire_case_delivers_and_reads_back_every_message(tmp_path):
    lines = []
    run = wire.run(tmp_path, MESSAGES, progress=lines.append, multi=0, wide=0)

    assert [r.name for r in run.results] == CASES
    for r in run.results:
        assert r.error is None, f"{r.name}: {r.error}"
        assert r.expected == r.messages == MESSAGES, r.name
        assert r.value_bytes == MESSAGES * wire.SIZE, r.name
        assert r.seconds > 0 and r.msg_per_s > 0, r.name
        if r.client == "embedded":
            assert r.server_cpu_s is None
            # a read of the wire's batches has its ratio to the read of the engine's
            if r.op.endswith("of wire batches"):
                assert run.ratio(r) is not None and run.ratio(r) > 0, r.name
            else:
                assert run.ratio(r) is None, r.name
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
    assert len(lines) == 7  # one progress line per step

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


# the cases with more partitions (issue 24), after the single-partition ones
PARTITION_CASES = [
    "embedded produce 16x1KiB acks=1",
    "embedded consume 16x1KiB",
    "embedded consume 1000p",
]
WIRE_PARTITION_CASES = [
    "confluent-kafka produce 16x1KiB acks=1",
    "confluent-kafka consume 16x1KiB",
    "embedded consume of wire batches",
    "embedded consume 16x1KiB of wire batches",
    "kafka-python (sessions) consume 1000p",
    "kafka-python (no sessions) consume 1000p",
]


def test_cases_with_more_partitions_deliver_and_read_back_every_message(tmp_path):
    run = wire.run(tmp_path, 1000, kcat=False, multi=3000, wide=2000)

    names = [r.name for r in run.results]
    assert names == [*CASES[:3], *PARTITION_CASES, *CASES[3:6], *WIRE_PARTITION_CASES]
    by_name = {r.name: r for r in run.results}
    for name in PARTITION_CASES + WIRE_PARTITION_CASES:
        r = by_name[name]
        assert r.error is None, f"{name}: {r.error}"
        size = 1024 if "16x1KiB" in name else wire.SIZE
        expected = 3000 if "16x1KiB" in name else 1000 if "wire batches" in name else 2000
        assert r.expected == r.messages == expected, name
        assert r.value_bytes == expected * size, name
        if r.client != "embedded":
            assert r.server_cpu_s is not None and r.server_cpu_s > 0, name
        if r.client != "embedded" or name.endswith("of wire batches"):
            assert run.ratio(r) is not None and run.ratio(r) > 0, name
    assert run.log_end_offsets["multi"] == 3000  # over 16 partitions, as acknowledged
    sessions = by_name["kafka-python (sessions) consume 1000p"].settings
    assert sessions.startswith("fetch sessions;")
    without = by_name["kafka-python (no sessions) consume 1000p"].settings
    assert without.startswith("no fetch sessions (max_fetch_sessions=0);")


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
        name.removesuffix(" acks=1").removesuffix(" acks=all")
        for name in [*CASES[:3], *PARTITION_CASES, *CASES[3:8], *WIRE_PARTITION_CASES]
    ]
    # N messages of 100 B, N/5 of 1 KiB over 16 partitions, a read of 1,000 partitions
    # holding N/10 (at least one each); the embedded reads of what the wire wrote
    assert [r["messages"] for r in data["results"]] == [2000] * 3 + [400, 400, 1000] + [
        2000
    ] * 5 + [400, 400, 2000, 400, 1000, 1000]
    assert all(r["ok"] for r in data["results"])
    assert "| confluent-kafka consume | 2,000 |" in out_md.read_text()
    assert list(work.iterdir()) == []  # the work directory is removed after the run
