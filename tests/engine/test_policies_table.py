"""One policy table: `engine.policies.POLICIES` holds every stream policy's name, type,
default, bounds, label and help, and validation takes its bounds from that same table.
(The web and terminal forms built from it are tested in tests/web/test_web_policy_form.py
and tests/console/test_tui_policy_form.py.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine import policies
from engine.errors import InvalidPolicy
from engine.policies import POLICIES, cli_help, policy, validate

# DESIGN.md, "Stream policies", in its order (and `compression`, `archive_after` and
# `archive_uri`, from its "History"; `mask` and `unmask_perm`, data masking, issue 27).
DESIGN_POLICIES = {
    "ttl": 604800,
    "default_partitions": 1,
    "auto_create": True,
    "compact": False,
    "min_compaction_lag_ms": 0,
    "delete_retention_ms": 86400000,
    "timestamp_type": "create",
    "max_message_bytes": 1048576,
    "retention_bytes": 0,
    "compression": "none",
    "archive_after": 0,
    "archive_uri": "",
    "mask": "",
    "produce_perm": "u:<creator>",
    "consume_perm": "u:<creator>",
    "unmask_perm": "u:<creator>",
    "topic_perm": "u:<creator>",
    "copy_perm": "u:<creator>",
    "admin_perm": "u:<creator>",
}


def test_the_table_holds_every_policy_of_the_design_with_its_default():
    assert [p.name for p in POLICIES] == list(DESIGN_POLICIES)
    assert {p.name: p.default for p in POLICIES} == DESIGN_POLICIES
    assert policies.DEFAULTS == DESIGN_POLICIES  # derived from the table, not a second list
    assert validate({}) == DESIGN_POLICIES
    for row in POLICIES:
        assert policy(row.name) is row
        assert row.label and row.help.endswith(".")
        assert isinstance(row.default, row.type)
    assert len({p.label for p in POLICIES}) == len(POLICIES)


@pytest.mark.parametrize("row", [p for p in POLICIES if p.kind == "int"], ids=lambda p: p.name)
def test_validation_refuses_exactly_outside_the_tables_bounds(row):
    assert validate({row.name: row.min})[row.name] == row.min
    assert validate({row.name: row.max})[row.name] == row.max
    assert validate({row.name: str(row.max)})[row.name] == row.max  # a form's text
    for outside in (row.min - 1, row.max + 1):
        with pytest.raises(InvalidPolicy, match=f"policy '{row.name}' must be"):
            validate({row.name: outside})


def test_a_changed_bound_in_the_table_is_what_validation_checks(monkeypatch):
    # The table is the only copy of the bounds: narrow one row and validation follows.
    narrowed = replace(policy("default_partitions"), max=5)
    monkeypatch.setitem(policies._BY_NAME, "default_partitions", narrowed)
    assert validate({"default_partitions": 5})["default_partitions"] == 5
    with pytest.raises(InvalidPolicy, match="must be from 1 to 5, got 6"):
        validate({"default_partitions": 6})
    assert narrowed.bounds == "A whole number from 1 to 5."


def test_choices_and_booleans_come_from_the_table():
    row = policy("timestamp_type")
    assert row.kind == "choice" and row.choices == ("create", "log_append")
    for choice in row.choices:
        assert validate({"timestamp_type": choice})["timestamp_type"] == choice
    with pytest.raises(InvalidPolicy, match="must be 'create' or 'log_append'"):
        validate({"timestamp_type": "append"})
    assert [p.name for p in POLICIES if p.kind == "bool"] == ["auto_create", "compact"]
    assert [p.name for p in POLICIES if p.kind == "ace"] == list(policies.ACE_POLICIES)


def test_unknown_policy_names_the_known_ones():
    with pytest.raises(InvalidPolicy, match="unknown policy 'nope'; known policies: admin_perm"):
        policy("nope")
    with pytest.raises(InvalidPolicy, match="unknown policy 'nope'"):
        validate({"nope": 1})


def test_cli_help_is_the_tables_hint_with_its_default():
    assert cli_help("ttl") == (
        "Seconds a message is kept, counted from its timestamp; 0 keeps forever. "
        "A whole number, 0 or more. Or a duration: 2d, 12h, 90m, 1h30m, 45s or 500ms. "
        "[default: 604800]"
    )
    assert cli_help("default_partitions").endswith("A whole number from 1 to 10,000. [default: 1]")
    assert cli_help("compact").endswith("[default: off]")
    assert cli_help("auto_create").endswith("[default: on]")
    # admin_perm says once what the engine checks it for
    admin = policy("admin_perm")
    assert cli_help("admin_perm") == f"{admin.help} [default: u:<creator>]"
    for duty in ("edit these policies", "delete the stream", "reset its groups' offsets"):
        assert duty in admin.help
    assert [policy(n).option for n in ("ttl", "min_compaction_lag_ms")] == [
        "--ttl",
        "--min-compaction-lag-ms",
    ]
    assert policy("timestamp_type").metavar == "create|log_append"


def test_durations_take_units_and_store_the_policys_own_unit():
    """TTL and archive_after are in seconds, the compaction times in milliseconds; a
    duration with units is taken for each and stored as a whole number of its unit."""
    assert validate({"ttl": "2d"})["ttl"] == 172_800
    assert validate({"archive_after": "1h30m"})["archive_after"] == 5_400
    assert validate({"min_compaction_lag_ms": "90m"})["min_compaction_lag_ms"] == 5_400_000
    assert validate({"delete_retention_ms": "500ms"})["delete_retention_ms"] == 500
    assert validate({"ttl": "600"})["ttl"] == 600  # a number is in the unit, as before
    with pytest.raises(InvalidPolicy, match="'500ms' is not a whole number of seconds"):
        validate({"ttl": "500ms"})
    with pytest.raises(InvalidPolicy, match="policy 'ttl' must be an integer, got 'soon'"):
        validate({"ttl": "soon"})
    with pytest.raises(InvalidPolicy, match="policy 'default_partitions' must be an integer"):
        validate({"default_partitions": "2d"})  # a count, not a duration
    with pytest.raises(InvalidPolicy, match="must be at least 0"):
        validate({"ttl": "-1"})


DURATIONS = [row for row in POLICIES if row.unit_ms]


@pytest.mark.parametrize("row", DURATIONS, ids=lambda row: row.name)
def test_a_duration_shown_by_a_form_reads_back_to_the_same_value(row):
    """What a form shows (`Policy.text`: the lists' units) is what `validate` stores again,
    from 0 to the bound, in every unit and between them."""
    day = 86_400_000 // row.unit_ms
    samples = [0, 1, 59, 60, 61, 999, 1_000, 1_001, 3_600, 5_400, day, 7 * day, 1_000 * day]
    samples += [row.default, row.max - 1, row.max]
    for value in samples:
        text = row.text(value)
        assert validate({row.name: text})[row.name] == value, (value, text)
    assert row.text(0) == "0"


def test_forms_show_durations_as_the_lists_do():
    assert policies.form_text("ttl", 604_800) == "7 d"  # `plet stream list` says "7 d" too
    assert policies.form_text("archive_after", 5_400) == "90 min"
    assert policies.form_text("delete_retention_ms", 86_400_000) == "1 d"
    assert policies.form_text("min_compaction_lag_ms", 1_500) == "1,500 ms"
    assert policies.form_text("ttl", 86_399) == "86,399 s"
    assert policies.form_text("max_message_bytes", 1_048_576) == "1048576"  # not a duration
    assert policies.form_text("compact", True) == "true"
    assert policies.form_text("no_such_policy", 5) == "5"
