"""`plet bench --poll N`: the poll-size case reads each topic with every poll size and
reports time, collections and page faults per size."""

from __future__ import annotations

from bench import poll_size


def test_poll_size_case_reads_every_topic_with_every_size(tmp_path):
    results = poll_size.run(tmp_path, 2_400, sizes=(500, 1_200), rounds=2)
    assert [(r.headers, r.max_records) for r in results] == [
        (False, 500),
        (False, 1_200),
        (True, 500),
        (True, 1_200),
    ]
    for r in results:
        assert r.messages == 2_400 and r.seconds > 0 and r.per_s > 0
        assert len(r.collections) == 3
        assert r.faults >= 0
        assert r.faults_per_1000 == r.faults * 1000 / 2_400
    # polls of 1,200 records are bulk reads, each after one generation-1 collection (two
    # polls a read; other threads of the test process may set off more)
    assert results[1].collections[1] >= 2
    table = poll_size.markdown(results)
    assert table.count("\n") == len(results) + 1
    assert all(line.count("|") == 8 for line in table.splitlines())
    text = poll_size.text(results)
    assert "headers one header poll    1,200" in text and "faults/1k" in text
