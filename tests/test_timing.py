"""The tests' own timing helpers (tests/timing.py): a deadline poll that returns what it
waited for or fails saying what it last saw, and the PLET_TEST_SLOWDOWN factor."""

from __future__ import annotations

import itertools

import pytest

from tests import timing
from tests.timing import scaled, wait_until


def test_wait_until_returns_the_first_true_value():
    counter = itertools.count()
    assert wait_until(lambda: next(counter) >= 3 and "ready", timeout=5, interval=0) == "ready"


def test_wait_until_fails_with_the_message_and_the_last_value():
    with pytest.raises(AssertionError, match=r"waiting for the answer; last value: \[\]"):
        wait_until(list, timeout=0.05, message="the answer")


def test_the_slowdown_factor_multiplies_timeouts(monkeypatch):
    monkeypatch.setenv("PLET_TEST_SLOWDOWN", "2.5")
    assert timing._slowdown() == 2.5
    monkeypatch.setenv("PLET_TEST_SLOWDOWN", "")
    assert timing._slowdown() == 1.0
    for bad in ("0", "-1", "fast"):
        monkeypatch.setenv("PLET_TEST_SLOWDOWN", bad)
        with pytest.raises(ValueError):
            timing._slowdown()
    assert scaled(4) == 4 * timing.SLOWDOWN
