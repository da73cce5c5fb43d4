"""engine.times, the one grammar of a time written as text: ISO 8601 or epoch
milliseconds, UTC when it names no zone, from 1970 to the end of the year 9999."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from engine import times
from engine.errors import InvalidArgument
from engine.storage.batch import MAX_TIMESTAMP_MS

NOON = 1_714_564_800_000  # 2024-05-01T12:00:00Z


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2024-05-01T12:00:00Z", NOON),
        ("2024-05-01T12:00:00+00:00", NOON),
        ("2024-05-01T14:00:00+02:00", NOON),
        ("2024-05-01T12:00:00", NOON),  # no zone: UTC
        ("2024-05-01T12:00", NOON),  # what a datetime-local input sends
        ("2024-05-01 12:00:00", NOON),
        ("  2024-05-01T12:00:00Z ", NOON),
        ("2024-05-01T12:00:00.123Z", NOON + 123),
        ("2024-05-01T12:00:00.1239Z", NOON + 123),  # microseconds: floored to the ms
        ("2024-05-01", NOON - 12 * 3600 * 1000),  # a date: its midnight UTC
        (str(NOON), NOON),
        ("0", 0),
        ("1970-01-01T00:00:00Z", 0),
        (str(MAX_TIMESTAMP_MS), MAX_TIMESTAMP_MS),
        ("9999-12-31T23:59:59.999", MAX_TIMESTAMP_MS),
    ],
)
def test_parse_time(new_york, text, ms):
    assert times.parse_time(text) == ms


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("yesterday", "is not a time"),
        ("", "is not a time"),
        ("12:00", "is not a time"),
        ("2024-13-01", "is not a time"),
        ("\u0661\u0662", "is not a time"),  # Arabic-Indic digits are no epoch ms
        ("-1", "before 1970"),
        ("1969-12-31T23:59:59.999Z", "before 1970"),
        ("1970-01-01T00:00:00+01:00", "before 1970"),
        ("9" * 30, "too far in the future"),
        ("-" + "9" * 30, "before 1970"),
        (str(MAX_TIMESTAMP_MS + 1), "too far in the future"),
        ("9999-12-31T23:00:00-05:00", "too far in the future"),  # the year 10000 in UTC
    ],
)
def test_bad_times_are_refused_with_a_clear_message(text, message):
    with pytest.raises(InvalidArgument, match=message) as caught:
        times.parse_time(text)
    assert isinstance(caught.value, ValueError)  # web forms catch ValueError
    if message == "is not a time":
        assert "a time without a zone is UTC" in str(caught.value)


def test_datetimes(new_york):
    naive = datetime(2024, 5, 1, 12)
    assert times.utc(naive) == datetime(2024, 5, 1, 12, tzinfo=UTC)
    aware = datetime(2024, 5, 1, 14, tzinfo=timezone(timedelta(hours=2)))
    assert times.utc(aware) is aware
    assert times.datetime_ms(naive) == NOON
    assert times.datetime_ms(aware) == NOON
    assert times.to_datetime(NOON) == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert times.to_datetime(MAX_TIMESTAMP_MS) == datetime(9999, 12, 31, 23, 59, 59, 999000, UTC)
    # exact, where `timestamp() * 1000` in floats is off by one
    moment = datetime(4165, 12, 10, 15, 50, 47, 441000, UTC)
    assert int(moment.timestamp() * 1000) == 69_297_263_447_440
    assert times.datetime_ms(moment) == 69_297_263_447_441
    assert times.parse_time(moment.isoformat()) == 69_297_263_447_441
    assert times.to_datetime(times.datetime_ms(moment)) == moment
    with pytest.raises(InvalidArgument, match="before 1970"):
        times.datetime_ms(datetime(1969, 12, 31))
    with pytest.raises(InvalidArgument, match="before 1970"):
        times.to_datetime(-1)
    with pytest.raises(InvalidArgument, match="too far in the future"):
        times.to_datetime(MAX_TIMESTAMP_MS + 1)


# --- times and durations shown to people (every frontend's one formatter) -------------------


@pytest.mark.parametrize(
    ("ms", "kwargs", "shown"),
    [
        (NOON + 123, {}, "2024-05-01 12:00:00.123Z"),
        (NOON + 7, {}, "2024-05-01 12:00:00.007Z"),
        (NOON + 999, {"seconds": True}, "2024-05-01 12:00:00Z"),  # cut, never rounded up
        (0, {}, "1970-01-01 00:00:00.000Z"),
        (MAX_TIMESTAMP_MS, {}, "9999-12-31 23:59:59.999Z"),
        (None, {}, "-"),
        (-1, {}, "-"),  # Kafka's "no timestamp"
    ],
)
def test_format_ms_is_utc_to_the_millisecond(ms, kwargs, shown):
    assert times.format_ms(ms, **kwargs) == shown


def test_a_shown_time_reads_back_as_the_same_instant():
    for ms in (0, NOON + 123, 1_700_000_000_001, MAX_TIMESTAMP_MS):
        assert times.parse_time(times.format_ms(ms)) == ms
        assert times.parse_time(times.iso_ms(ms)) == ms
    assert times.iso_ms(NOON + 5) == "2024-05-01T12:00:00.005Z"


@pytest.mark.parametrize(
    ("seconds", "kwargs", "shown"),
    [
        (7 * 86400, {}, "7 d"),
        (36 * 3600, {}, "36 h"),
        (3600, {}, "1 h"),
        (300, {}, "5 min"),
        (90, {}, "90 s"),
        (1, {}, "1 s"),
        (400 * 86400, {}, "400 d"),
        (100_000_001, {}, "100,000,001 s"),
        (12.34, {}, "12.3 s"),
        (60.0, {}, "1 min"),  # a float that is whole
        (1234.56, {}, "1,234.6 s"),
        (0, {}, "0 s"),
        (0, {"zero": "forever"}, "forever"),  # a TTL of 0
        (None, {}, "-"),
    ],
)
def test_format_duration_uses_the_largest_whole_unit(seconds, kwargs, shown):
    assert times.format_duration(seconds, **kwargs) == shown


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        (604_800_000, "7 d"),
        (5_400_000, "90 min"),
        (1_000, "1 s"),
        (1_500, "1,500 ms"),
        (1, "1 ms"),
        (0, "0 s"),
    ],
)
def test_format_duration_ms_is_exact_and_reads_back(ms, shown):
    assert times.format_duration_ms(ms) == shown
    assert times.parse_duration(shown, 1) == ms


@pytest.mark.parametrize(
    ("text", "unit_ms", "value"),
    [
        ("600", 1_000, 600),  # a whole number is in the policy's own unit
        ("600", 1, 600),
        ("2d", 1_000, 172_800),
        ("90m", 1_000, 5_400),
        ("1h30m", 1_000, 5_400),
        ("1.5h", 1, 5_400_000),
        ("500ms", 1, 500),
        ("2 weeks", 1_000, 1_209_600),
        ("7 d", 1_000, 604_800),  # what format_duration shows reads back
        ("5 min", 1_000, 300),
        (" 45S ", 1_000, 45),
        ("100,000,001 s", 1_000, 100_000_001),  # thousands grouped, as shown
        ("1,500 ms", 1, 1_500),
        ("253,402,300,799,999 ms", 1, 253_402_300_799_999),  # exact, no float on the way
    ],
)
def test_parse_duration_takes_a_number_or_numbers_with_units(text, unit_ms, value):
    assert times.parse_duration(text, unit_ms) == value


@pytest.mark.parametrize(
    ("text", "unit_ms", "message"),
    [
        ("soon", 1_000, "'soon' is not a duration: give a whole number, or numbers with units"),
        ("2x", 1_000, "'x' is not a unit of time"),
        ("500ms", 1_000, "'500ms' is not a whole number of seconds"),
        ("1.0001s", 1, "is not a whole number of milliseconds"),
        ("-5", 1_000, "is not a duration"),
        ("", 1_000, "is not a duration"),
        ("5 5", 1_000, "is not a duration"),
    ],
)
def test_parse_duration_says_what_it_takes(text, unit_ms, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        times.parse_duration(text, unit_ms)
