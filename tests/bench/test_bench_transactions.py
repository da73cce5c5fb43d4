"""`python -m bench.transactions`: transactional produce against plain, embedded (the wire
cases start `plet serve` and are run by hand, docs/BENCHMARKS.md)."""

from __future__ import annotations

import re

from bench import transactions


def test_repeated_embedded_runs_print_a_ratio_a_run_and_their_median(capsys):
    transactions.main(["--runs", "2", "20000"])
    out = capsys.readouterr().out
    rows = re.findall(r"^\| (\d) \| ([\d,]+) \| ([\d,]+) \| ([\d.]+)x \| ([\d.]+)x \|$", out, re.M)
    assert [r[0] for r in rows] == ["1", "2"]
    for _, plain, txn, ratio, _ in rows:
        plain_rate, txn_rate = (int(v.replace(",", "")) for v in (plain, txn))
        assert abs(txn_rate / plain_rate - float(ratio)) < 0.01
    (median,) = re.findall(r"^median ratio ([\d.]+)x$", out, re.M)
    # of two runs, their mean (the runs' ratios are printed rounded to two places)
    assert abs(float(median) - sum(float(r[3]) for r in rows) / 2) <= 0.006


def test_interleaved_rounds_print_both_rates_and_their_ratio(capsys):
    plain, txn, ratios = transactions.interleaved(2, chunk=10_000)
    assert plain > 0 and txn > 0 and len(ratios) == 2
    # the whole ratio lies within the rounds' (a sum's ratio is between its parts')
    assert min(ratios) - 1e-9 <= txn / plain <= max(ratios) + 1e-9
    transactions.main(["--interleaved", "1"])
    out = capsys.readouterr().out
    (line,) = re.findall(
        r"^plain acks=all ([\d,]+) msg/s, 10,000/transaction ([\d,]+) msg/s: ([\d.]+)x", out, re.M
    )
    rates = [int(v.replace(",", "")) for v in line[:2]]
    assert abs(rates[1] / rates[0] - float(line[2])) < 0.01
