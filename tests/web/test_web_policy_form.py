"""The web console's policy forms are built from the engine's policy table: every policy
with the table's label and help, the control its kind asks for, and errors from the
validation that reads the table's bounds."""

from __future__ import annotations

import re
from html import unescape

from engine.policies import POLICIES, policy
from web.streams import CREATE_FIELDS


def _text(answer) -> str:
    return answer.get_data(as_text=True)


def _field(html: str, prefix: str, name: str) -> tuple[str, str, str]:
    """(label, control, hint) of one policy's cells in a form."""
    ident = re.escape(prefix + name)
    label = re.search(rf'<label for="{ident}">(.*?)</label>', html, re.S)
    control = re.search(rf'<(input|select)[^>]* id="{ident}"[^>]*>', html)
    hint = re.search(rf'<span class="muted" id="{ident}-hint">(.*?)</span>', html, re.S)
    assert label and control and hint, name
    return unescape(label.group(1)), control.group(0), unescape(hint.group(1))


def test_the_policies_form_shows_every_policy_of_the_table(client, cluster):
    cluster.create_stream("/apps/sensors", ttl=90)
    html = _text(client.get("/streams/apps/sensors"))
    form = re.search(r'<form id="policies-form".*?</form>', html, re.S).group(0)
    shown = re.findall(r'<label for="policy-([a-z_]+)">', form)
    assert shown == [p.name for p in POLICIES]  # all of them, in the table's order
    for row in POLICIES:
        label, control, hint = _field(form, "policy-", row.name)
        assert label == row.label
        assert hint == row.hint
        if row.kind == "bool":
            assert 'type="checkbox"' in control
        elif row.kind == "choice":
            options = re.search(rf'id="policy-{row.name}".*?</select>', form, re.S).group(0)
            assert re.findall(r'<option value="([^"]+)"', options) == list(row.choices)
        elif row.kind == "int" and row.unit_ms:  # a duration takes units: "2d"
            assert 'type="text"' in control and "inputmode" not in control
        elif row.kind == "int":
            assert 'inputmode="numeric"' in control
        elif row.kind == "text":
            assert 'class="uri"' in control and "inputmode" not in control
        else:
            assert 'class="ace"' in control
    # a duration shows as the lists show it (the engine reads it back)
    assert 'id="policy-ttl" name="ttl" value="90 s"' in form
    assert 'name="delete_retention_ms" value="1 d"' in form


def test_the_form_sent_back_unchanged_changes_no_duration(client, cluster):
    """What the form shows for every duration ("7 d", "1,500 ms") is what it saves."""
    cluster.create_stream(
        "/apps/logs", ttl=86_399, min_compaction_lag_ms=1_500, archive_after=5_400
    )
    before = cluster.stream("/apps/logs").policies
    html = _text(client.get("/streams/apps/logs"))
    form = re.search(r'<form id="policies-form".*?</form>', html, re.S).group(0)
    durations = [row.name for row in POLICIES if row.unit_ms]
    sent = {
        name: unescape(re.search(rf'id="policy-{name}" name="{name}" value="([^"]*)"', form)[1])
        for name in durations
    }
    assert sent == {
        "ttl": "86,399 s",
        "min_compaction_lag_ms": "1,500 ms",
        "delete_retention_ms": "1 d",
        "archive_after": "90 min",
    }
    answer = client.post("/streams/apps/logs/~/policies", data={"csrf_token": client.csrf, **sent})
    assert answer.status_code == 303
    assert cluster.stream("/apps/logs").policies == before


def test_the_admin_perm_help_is_the_tables(client, cluster):
    cluster.create_stream("/s")
    html = unescape(_text(client.get("/streams/s")))
    assert policy("admin_perm").help in html
    assert "reset its groups' offsets" in html


def test_the_create_form_shows_its_policies_from_the_table(client):
    html = _text(client.get("/streams"))
    form = re.search(r'<form id="create-stream".*?</form>', html, re.S).group(0)
    assert re.findall(r'<label for="create-([a-z_]+)">', form) == ["path", *CREATE_FIELDS]
    for name in CREATE_FIELDS:
        label, _, hint = _field(form, "create-", name)
        assert label == policy(name).label and hint.startswith(policy(name).hint)


def test_a_value_past_the_tables_bound_is_refused_next_to_its_field(client, cluster):
    cluster.create_stream("/s")
    row = policy("default_partitions")
    ok = client.post(
        "/streams/s/~/policies",
        data={"default_partitions": str(row.max), "csrf_token": client.csrf},
    )
    assert ok.status_code == 303
    assert cluster.stream("/s").policies["default_partitions"] == row.max
    bad = client.post(
        "/streams/s/~/policies",
        data={"default_partitions": str(row.max + 1), "csrf_token": client.csrf},
    )
    html = _text(bad)
    assert bad.status_code == 400
    error = re.search(r'id="policy-default_partitions-error">(.*?)</div>', html, re.S).group(1)
    assert unescape(error) == (
        f"policy 'default_partitions' must be from {row.min} to {row.max}, got {row.max + 1}"
    )
    assert cluster.stream("/s").policies["default_partitions"] == row.max
