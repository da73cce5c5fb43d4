"""`plet bench --wal N`: the WAL-size case runs both checkpoint policies and reports them."""

from __future__ import annotations

from bench import wal


def test_wal_case_measures_both_policies(tmp_path):
    results = wal.run(tmp_path, 3_000, acks_levels=(1,))
    assert [r.label for r in results] == [label for label, _, _ in wal.POLICIES]
    for r in results:
        assert r.messages == 3_000 and r.produce_per_s > 0 and r.consume_per_s > 0
        assert r.files == 5  # four volumes and the catalog
        assert r.peak_bytes >= r.idle_bytes > 0
        assert r.samples > 0
    table = wal.markdown(results)
    assert table.count("\n") == len(results) + 1
    assert "now: 4 MiB (acks=1: a thread's, 32 MiB in the writer), limit 8 MiB" in wal.text(results)
    assert list(tmp_path.iterdir()) == []  # each cluster removed after its case
