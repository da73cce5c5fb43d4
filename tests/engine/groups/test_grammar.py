"""The reset-target and partition-list grammar (engine.groups.grammar): every form it
reads, and every bad input with the error a person sees."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine import errors
from engine.groups import grammar
from engine.groups.grammar import MAX_OFFSET, ResetTarget

MAY_1 = 1_714_521_600_000  # 2024-05-01T00:00:00Z


@pytest.mark.parametrize(
    ("to", "expected"),
    [
        ("earliest", ResetTarget("earliest")),
        ("latest", ResetTarget("latest")),
        (0, ResetTarget("offset", 0)),
        (42, ResetTarget("offset", 42)),
        (2**70, ResetTarget("offset", 2**70)),  # clamped to the log when planned
        ("shift:-5", ResetTarget("shift", -5)),
        ("shift:+7", ResetTarget("shift", 7)),
        ("shift:3", ResetTarget("shift", 3)),
        (datetime(2024, 5, 1, tzinfo=UTC), ResetTarget("time", MAY_1)),
        (datetime(2024, 5, 1), ResetTarget("time", MAY_1)),  # naive: UTC
        (ResetTarget("shift", -1), ResetTarget("shift", -1)),
    ],
)
def test_reset_target_reads_what_a_program_passes(to, expected):
    assert grammar.reset_target(to) == expected


@pytest.mark.parametrize(
    "to", [-1, True, 1.5, None, "Earliest", "shift:", "shift:x", "shift:--1", "111", b"latest"]
)
def test_reset_target_refuses_anything_else(to):
    with pytest.raises(errors.InvalidOffset, match="shift:-N"):
        grammar.reset_target(to)


def test_reset_target_refuses_a_shift_of_19_digits():
    with pytest.raises(errors.InvalidOffset, match="shift:-N"):
        grammar.reset_target("shift:" + "9" * 19)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("earliest", ResetTarget("earliest")),
        (" latest ", ResetTarget("latest")),
        ("0", ResetTarget("offset", 0)),
        ("42", ResetTarget("offset", 42)),
        (str(MAX_OFFSET), ResetTarget("offset", MAX_OFFSET)),
        (17, ResetTarget("offset", 17)),  # a JSON number
        ("shift:-100", ResetTarget("shift", -100)),
        ("2024-05-01", ResetTarget("time", MAY_1)),
        ("2024-05-01T00:00:00Z", ResetTarget("time", MAY_1)),
        ("2024-05-01T02:00:00+02:00", ResetTarget("time", MAY_1)),
    ],
)
def test_parse_target_reads_one_typed_value(text, expected):
    assert grammar.parse_target(text) == expected


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("someday", errors.InvalidArgument, "earliest, latest, an offset"),
        ("", errors.InvalidArgument, "earliest, latest, an offset"),
        ("٣", errors.InvalidArgument, "earliest, latest, an offset"),  # not ASCII digits
        ("shift:back", errors.InvalidOffset, "shift:-N"),
        (str(MAX_OFFSET + 1), errors.InvalidOffset, "from 0 to"),
        ("9" * 30, errors.InvalidOffset, "from 0 to"),
        (-1, errors.InvalidOffset, "from 0 to"),
        (True, errors.InvalidArgument, "to must be"),
        (None, errors.InvalidArgument, "to must be"),
        ([1], errors.InvalidArgument, "to must be"),
    ],
)
def test_parse_target_says_what_is_wrong(value, error, message):
    with pytest.raises(error, match=message):
        grammar.parse_target(value)


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        ("earliest", "ignored", ResetTarget("earliest")),
        ("latest", "", ResetTarget("latest")),
        ("offset", " 12 ", ResetTarget("offset", 12)),
        ("offset", str(MAX_OFFSET), ResetTarget("offset", MAX_OFFSET)),
        ("time", "2024-05-01", ResetTarget("time", MAY_1)),
        ("time", str(MAY_1), ResetTarget("time", MAY_1)),  # epoch ms
        ("shift", "-5", ResetTarget("shift", -5)),
        ("shift", "+7", ResetTarget("shift", 7)),
        ("shift", "3", ResetTarget("shift", 3)),
        ("shift", "9" * 18, ResetTarget("shift", 10**18 - 1)),
    ],
)
def test_form_target_reads_a_choice_and_its_value(kind, text, expected):
    assert grammar.form_target(kind, text) == expected


@pytest.mark.parametrize(
    ("kind", "text", "error", "message"),
    [
        ("offset", "", errors.InvalidOffset, "an offset is a whole number"),
        ("offset", "-1", errors.InvalidOffset, "an offset is a whole number"),
        ("offset", "ten", errors.InvalidOffset, "an offset is a whole number"),
        ("offset", "²", errors.InvalidOffset, "an offset is a whole number"),
        ("offset", str(MAX_OFFSET + 1), errors.InvalidOffset, "an offset is a whole number"),
        ("time", "yesterday", errors.InvalidArgument, "is not a time"),
        ("shift", "ten", errors.InvalidOffset, "a shift is a whole number"),
        ("shift", "+", errors.InvalidOffset, "a shift is a whole number"),
        ("shift", "--5", errors.InvalidOffset, "a shift is a whole number"),
        ("shift", "9" * 19, errors.InvalidOffset, "a shift is a whole number"),
        ("sometime", "", errors.InvalidArgument, "reset to one of earliest, latest"),
    ],
)
def test_form_target_says_what_is_wrong(kind, text, error, message):
    with pytest.raises(error, match=message):
        grammar.form_target(kind, text)


def test_every_form_kind_is_read():
    assert grammar.TARGET_KINDS == ("earliest", "latest", "offset", "time", "shift")
    assert [kind for kind, _ in grammar.TARGETS] == list(grammar.TARGET_KINDS)


def test_a_target_reads_back_as_the_engine_writes_it():
    assert str(ResetTarget("shift", -5)) == "shift:-5"
    assert str(ResetTarget("shift", 5)) == "shift:+5"
    assert str(ResetTarget("latest")) == "latest"
    assert grammar.reset_target(str(grammar.form_target("shift", "+3"))) == ResetTarget("shift", 3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("   ", None),
        ("0", [0]),
        ("0, 2, 4-6", [0, 2, 4, 5, 6]),
        ("3,1,1", [1, 3]),
        (" 5 - 7 ", [5, 6, 7]),
        ("2-2", [2]),
    ],
)
def test_parse_partitions_reads_numbers_and_ranges(text, expected):
    assert grammar.parse_partitions(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x", "partitions are numbers or ranges"),
        ("1-", "partitions are numbers or ranges"),
        ("0,,1", "partitions are numbers or ranges"),
        ("-1", "partitions are numbers or ranges"),
        ("٣", "partitions are numbers or ranges"),
        ("1234567", "partitions are numbers or ranges"),  # more than 6 digits
        ("3-1", "is empty or too wide"),
        ("0-100001", "is empty or too wide"),
        ("0," * 1001, "too long"),
    ],
)
def test_parse_partitions_says_what_is_wrong(text, message):
    with pytest.raises(errors.InvalidArgument, match=message):
        grammar.parse_partitions(text)


def test_check_partitions_of_a_topic():
    assert grammar.check_partitions(None, 3, "/s:t") == [0, 1, 2]
    assert grammar.check_partitions([2, 0, 2], 3, "/s:t") == [0, 2]
    assert grammar.check_partitions({1}, 3, "/s:t") == [1]


@pytest.mark.parametrize(
    ("partitions", "error", "message"),
    [
        ([3], errors.InvalidPartition, "/s:t has partitions 0 to 2, not 3"),
        ([-1], errors.InvalidPartition, "not -1"),
        (["0"], errors.InvalidPartition, "whole number"),
        ([True], errors.InvalidPartition, "whole number"),
        ([], errors.InvalidArgument, "at least one"),
        ("0", errors.InvalidArgument, "list of partition numbers"),
        (7, errors.InvalidArgument, "list of partition numbers"),
    ],
)
def test_check_partitions_says_what_is_wrong(partitions, error, message):
    with pytest.raises(error, match=message):
        grammar.check_partitions(partitions, 3, "/s:t")
