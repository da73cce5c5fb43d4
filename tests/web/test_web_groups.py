"""The consumer groups pages: list and group with lag, and resetting offsets from the form."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from engine import Consumer, OffsetAndMetadata, Producer, TopicPartition

TOPIC = "/apps/orders:eu"
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z: message i of a partition is at T0 + i s


@pytest.fixture
def seeded(cluster):
    """/apps/orders:eu with 2 partitions of 10 messages each (timestamps T0 + i s), and the
    group `billing` that committed 4 of partition 0 and 7 of partition 1, then left."""
    cluster.create_stream("/apps/orders", default_partitions=2, ttl=0)  # keep T0 messages
    cluster.create_topic(TOPIC)
    producer = Producer(cluster)
    for partition in (0, 1):
        for i in range(10):
            producer.send(TOPIC, value=b"v%d" % i, partition=partition, timestamp_ms=T0 + i * 1000)
    producer.flush()
    producer.close()
    consumer = Consumer(cluster, group_id="billing", enable_auto_commit=False)
    tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    consumer.assign(tps)
    consumer.commit({tps[0]: OffsetAndMetadata(4), tps[1]: OffsetAndMetadata(7)})
    consumer.close()
    return cluster


def committed(cluster, group_id: str = "billing") -> dict[int, int | None]:
    return {p.partition: p.committed for p in cluster.group(group_id).partitions}


def cells(html: str, testid: str) -> list[str]:
    return re.findall(rf'data-testid="{testid}">([^<]*)<', html)


def reset(client, to: str, group_id: str = "billing", **fields: str):
    data = {"topic": TOPIC, "to": to, "csrf_token": client.csrf, **fields}
    return client.post(f"/groups/{group_id}", data=data)


def test_list_shows_groups_with_state_members_topics_and_lag(client, seeded):
    page = client.get("/groups")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'href="/groups/billing"' in html
    assert "Empty" in html
    assert TOPIC in html
    assert cells(html, "group-lag") == ["9"]  # (10 - 4) + (10 - 7)
    assert 'hx-trigger="every 3s"' in html  # it refreshes itself


def test_htmx_refresh_of_the_list_gets_the_partial(client, seeded):
    part = client.get("/groups", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "<html" not in part
    assert cells(part, "group-lag") == ["9"]


def test_group_page_shows_offsets_and_lag_per_partition(client, seeded):
    page = client.get("/groups/billing")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert cells(html, "committed") == ["4", "7"]
    assert cells(html, "lag") == ["6", "3"]
    assert cells(html, "group-lag") == ["9"]
    assert "No live members" in html
    assert html.count('href="/topics/apps/orders:eu"') == 2  # each partition's topic page
    assert f'<option value="{TOPIC}" selected>' in html
    assert "hx-confirm=" in html


def test_unknown_group_is_404(client, seeded):
    assert client.get("/groups/nobody").status_code == 404


def test_reset_to_earliest_and_latest(client, seeded):
    answer = reset(client, "earliest")
    assert answer.status_code == 200
    assert committed(seeded) == {0: 0, 1: 0}
    html = answer.get_data(as_text=True)
    assert "Offsets reset" in html
    assert cells(html, "committed") == ["0", "0"]
    reset(client, "latest")
    assert committed(seeded) == {0: 10, 1: 10}


def test_reset_to_an_offset(client, seeded):
    assert reset(client, "offset", offset="5").status_code == 200
    assert committed(seeded) == {0: 5, 1: 5}


def test_reset_to_a_time(client, seeded):
    # naive means UTC: the first message at or after T0 + 3 s is offset 3
    assert reset(client, "time", time="2026-01-01T00:00:03").status_code == 200
    assert committed(seeded) == {0: 3, 1: 3}
    moment = datetime.fromtimestamp((T0 + 6000) / 1000, UTC).isoformat()
    assert reset(client, "time", time=moment).status_code == 200
    assert committed(seeded) == {0: 6, 1: 6}
    assert reset(client, "time", time="2026-01-01T00:00:04Z").status_code == 200
    assert committed(seeded) == {0: 4, 1: 4}
    # the time field is text in UTC ISO form, not the browser's local date picker
    page = client.get("/groups/billing").get_data(as_text=True)
    field = re.search(r'<input id="reset-time"[^>]*>', page).group(0)
    assert 'type="text"' in field and 'placeholder="2024-05-01T12:00:00Z"' in field


def test_htmx_reset_answers_the_form_and_triggers_the_table_refresh(client, seeded):
    answer = client.post(
        "/groups/billing",
        data={"topic": TOPIC, "to": "latest"},
        headers={"HX-Request": "true", "X-CSRFToken": client.csrf},
    )
    assert answer.status_code == 200
    assert answer.headers["HX-Trigger"] == "offsets-reset"
    html = answer.get_data(as_text=True)
    assert html.lstrip().startswith('<section aria-label="Reset offsets"')
    assert "Offsets reset" in html
    assert committed(seeded) == {0: 10, 1: 10}


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"to": "offset", "offset": "-1"}, "offset", "whole number"),
        ({"to": "offset", "offset": "ten"}, "offset", "whole number"),
        ({"to": "offset", "offset": ""}, "offset", "whole number"),
        ({"to": "time", "time": "yesterday"}, "time", "ISO 8601"),
        ({"to": "time", "time": ""}, "time", "ISO 8601"),
        ({"to": "sometime"}, "to", "Choose earliest"),
        ({"to": "earliest", "topic": "/apps/orders:other"}, "topic", "Choose one of the group"),
    ],
)
def test_bad_input_is_shown_inline_and_changes_nothing(client, seeded, fields, field, message):
    data = {"topic": TOPIC, "csrf_token": client.csrf, **fields}
    answer = client.post("/groups/billing", data=data)
    assert answer.status_code == 400
    html = answer.get_data(as_text=True)
    assert f'id="reset-{field}"' in html
    assert re.search(rf'id="reset-{field}"[^>]*aria-invalid="true"', html)
    assert message in html
    assert committed(seeded) == {0: 4, 1: 7}


def test_reset_is_refused_while_a_member_is_live(client, seeded):
    member = Consumer(seeded, TOPIC, group_id="billing", enable_auto_commit=False)
    try:
        member.poll(timeout_ms=2000)  # joins the group
        assert seeded.group("billing").members
        answer = reset(client, "earliest")
        assert answer.status_code == 409
        html = answer.get_data(as_text=True)
        assert "live member" in html and "stop its consumers" in html
        assert 'role="alert"' in html
        assert committed(seeded) == {0: 4, 1: 7}
        live = client.get("/groups/billing").get_data(as_text=True)
        assert member.assignment() and "No live members" not in live
    finally:
        member.close()


def test_plain_user_may_neither_see_nor_reset_anothers_group(user_client, seeded):
    """billing is the cluster owner's (its creator): its describe_perm and reset_perm are
    `u:<creator>`, so a plain user neither sees nor resets it (issue 23)."""
    assert user_client.get("/groups/billing").status_code == 403
    assert "billing" not in user_client.get("/groups").get_data(as_text=True)
    answer = reset(user_client, "earliest")
    assert answer.status_code == 403
    html = answer.get_data(as_text=True)
    assert "may not describe consumer group" in html
    assert committed(seeded) == {0: 4, 1: 7}


def test_reset_needs_the_csrf_token(client, seeded):
    answer = client.post("/groups/billing", data={"topic": TOPIC, "to": "earliest"})
    assert answer.status_code == 400
    assert committed(seeded) == {0: 4, 1: 7}


def test_hostile_group_ids_and_odd_characters_are_escaped(client, cluster):
    cluster.create_stream("/s")
    cluster.create_topic("/s:t")
    group_id = "<script>alert(1)</script> a/b"
    consumer = Consumer(cluster, group_id=group_id, enable_auto_commit=False)
    consumer.assign([TopicPartition("/s:t", 0)])
    consumer.commit({TopicPartition("/s:t", 0): OffsetAndMetadata(0)})
    consumer.close()
    listing = client.get("/groups").get_data(as_text=True)
    assert "<script>alert(1)" not in listing
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listing
    page = client.get("/groups/%3Cscript%3Ealert(1)%3C/script%3E%20a/b")
    assert page.status_code == 200
    assert "<script>alert(1)" not in page.get_data(as_text=True)
