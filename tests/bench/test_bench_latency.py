"""`python -m bench.latency N`: produce-to-consume latency across processes."""

from __future__ import annotations

from bench import latency


def test_every_case_receives_every_message_and_the_table_compares_with_the_wire(monkeypatch):
    monkeypatch.setattr(latency, "RATE", 100)
    results = latency.run(20)
    assert [r.case for r in results] == [
        "embedded, producer in another process, doorbells",
        "embedded, producer in another process, looking at the files (before)",
        "embedded, producer in another process, doorbells, full rate",
        "embedded, one process",
        "over the wire (plet serve, confluent-kafka)",
    ]
    for r in results:
        assert len(r.ms) == 20, r.case
        assert all(0 <= ms < 60_000 for ms in r.ms)
    table = latency.markdown(results, 20)
    assert "| over the wire (plet serve, confluent-kafka) | 20 |" in table
    assert table.count("1.00x") >= 2  # the wire against itself
