"""The group page's per-partition reset with a preview (Preview, then Apply exactly that),
shift-by, and deleting a group with a confirmation step."""

from __future__ import annotations

import json
import re

import pytest

from engine import Consumer, OffsetAndMetadata, Producer, TopicPartition

TOPIC = "/apps/ledger:eu"


@pytest.fixture
def seeded(cluster):
    """/apps/ledger:eu with 3 partitions of 10 messages, and the group `billing` that
    committed 4 in partition 0 and 7 in partition 1 (none in 2), then left."""
    cluster.create_stream("/apps/ledger", default_partitions=3)
    cluster.create_topic(TOPIC)
    producer = Producer(cluster)
    for partition in (0, 1, 2):
        for i in range(10):
            producer.send(TOPIC, value=b"v%d" % i, partition=partition)
    producer.flush()
    producer.close()
    consumer = Consumer(cluster, group_id="billing", enable_auto_commit=False)
    consumer.assign([TopicPartition(TOPIC, p) for p in (0, 1, 2)])
    consumer.commit(
        {
            TopicPartition(TOPIC, 0): OffsetAndMetadata(4),
            TopicPartition(TOPIC, 1): OffsetAndMetadata(7),
        }
    )
    consumer.close()
    return cluster


def committed(cluster) -> dict[int, int | None]:
    return {p.partition: p.committed for p in cluster.group("billing").partitions}


def cells(html: str, testid: str) -> list[str]:
    return re.findall(rf'data-testid="{testid}">([^<]*)<', html)


def post(client, action: str, **fields: str):
    data = {"topic": TOPIC, "to": "earliest", "csrf_token": client.csrf, "action": action}
    return client.post("/groups/billing", data={**data, **fields})


def plan_field(html: str) -> str:
    found = re.search(r'name="plan" value="([^"]*)"', html)
    assert found is not None
    return found.group(1).replace("&#34;", '"').replace("&quot;", '"')


def test_preview_shows_the_plan_per_partition_and_changes_nothing(client, seeded):
    answer = post(client, "preview", to="shift", shift="+5", partitions="0-1")
    assert answer.status_code == 200
    html = answer.get_data(as_text=True)
    assert cells(html, "preview-partition") == ["0", "1"]
    assert cells(html, "preview-current") == ["4", "7"]
    assert cells(html, "preview-new") == ["9", "10"]  # 7 + 5 clamped to the log end
    assert cells(html, "preview-lag-before") == ["6", "3"]
    assert cells(html, "preview-lag-after") == ["1", "0"]
    assert json.loads(plan_field(html)) == [[0, 4, 9], [1, 7, 10]]
    assert committed(seeded) == {0: 4, 1: 7}


def test_apply_sends_the_preview_back_and_applies_exactly_it(client, seeded):
    html = post(client, "preview", to="offset", offset="2", partitions="1").get_data(as_text=True)
    answer = post(client, "apply", to="offset", offset="2", partitions="1", plan=plan_field(html))
    assert answer.status_code == 200
    assert "Offsets reset" in answer.get_data(as_text=True)
    assert committed(seeded) == {0: 4, 1: 2}  # partition 0 untouched


def test_apply_refuses_when_the_log_moved_since_the_preview(client, seeded):
    html = post(client, "preview", to="latest").get_data(as_text=True)
    producer = Producer(seeded)
    producer.send(TOPIC, value=b"late", partition=2)
    producer.flush()
    producer.close()
    answer = post(client, "apply", to="latest", plan=plan_field(html))
    assert answer.status_code == 409
    text = answer.get_data(as_text=True)
    assert "moved since the preview" in text
    assert cells(text, "preview-new") == ["10", "10", "11"]  # the new preview is shown
    assert committed(seeded) == {0: 4, 1: 7}


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"to": "shift", "shift": "ten"}, "shift", "A shift is a whole number"),
        ({"to": "shift", "shift": "+"}, "shift", "A shift is a whole number"),
        ({"to": "shift", "shift": "9" * 30}, "shift", "A shift is a whole number"),
        ({"partitions": "0,x"}, "partitions", "partitions are numbers"),
        ({"partitions": "5-2"}, "partitions", "empty or too wide"),
        ({"partitions": "3"}, "partitions", "partitions 0 to 2, not 3"),
        ({"to": "shift", "shift": "-1", "partitions": "2"}, "shift", "no committed offset"),
    ],
)
def test_bad_preview_input_is_a_form_error(client, seeded, fields, field, message):
    answer = post(client, "preview", **fields)
    assert answer.status_code == 400
    html = answer.get_data(as_text=True)
    assert re.search(rf'id="reset-{field}"[^>]*aria-invalid="true"', html)
    assert message in html
    assert committed(seeded) == {0: 4, 1: 7}


@pytest.mark.parametrize("plan", ["", "not json", '[[0, 4, "x"]]', '{"a": 1}', "[[0, 4]]"])
def test_a_damaged_plan_is_refused(client, seeded, plan):
    answer = post(client, "apply", plan=plan)
    assert answer.status_code == 400
    assert "damaged" in answer.get_data(as_text=True)
    assert committed(seeded) == {0: 4, 1: 7}


def test_preview_and_apply_need_the_csrf_token(client, seeded):
    data = {"topic": TOPIC, "to": "earliest", "action": "apply", "plan": "[[0, 4, 0]]"}
    assert client.post("/groups/billing", data=data).status_code == 400
    assert (
        client.post("/groups/billing", data={"action": "delete", "confirm": "yes"}).status_code
        == 400
    )
    assert committed(seeded) == {0: 4, 1: 7}
    # the same with the token is done
    data = {"confirm": "yes", "csrf_token": client.csrf}
    assert client.post("/groups/billing", data={"action": "delete", **data}).status_code == 303
    assert seeded.groups() == []


def test_preview_refused_while_the_group_has_live_members(client, seeded):
    consumer = Consumer(seeded, TOPIC, group_id="billing", enable_auto_commit=False)
    try:
        consumer.poll(timeout_ms=500)  # joins the group
        answer = post(client, "preview")
        assert answer.status_code == 409
        assert "live member" in answer.get_data(as_text=True)
        page = client.get("/groups/billing").get_data(as_text=True)
        assert "cannot be deleted" in page and "Delete group…" not in page
        refused = client.post(
            "/groups/billing",
            data={"action": "delete", "confirm": "yes", "csrf_token": client.csrf},
        )
        assert refused.status_code == 409
        assert "live member" in refused.get_data(as_text=True)
    finally:
        consumer.close()
    assert committed(seeded) == {0: 4, 1: 7}


def test_delete_asks_first_then_deletes(client, seeded):
    page = client.get("/groups/billing").get_data(as_text=True)
    assert "Delete group…" in page
    ask = client.post("/groups/billing", data={"action": "delete", "csrf_token": client.csrf})
    assert ask.status_code == 200
    assert "Yes, delete group" in ask.get_data(as_text=True)
    assert committed(seeded) == {0: 4, 1: 7}  # asking changes nothing
    done = client.post(
        "/groups/billing", data={"action": "delete", "csrf_token": client.csrf, "confirm": "yes"}
    )
    assert done.status_code == 303
    assert done.headers["Location"].endswith("/groups?deleted=billing")
    assert "deleted" in client.get("/groups?deleted=billing").get_data(as_text=True)
    assert [g.group_id for g in seeded.groups()] == []
    assert client.get("/groups/billing").status_code == 404
    gone = client.post(
        "/groups/billing", data={"action": "delete", "csrf_token": client.csrf, "confirm": "yes"}
    )
    assert gone.status_code == 404


def test_a_group_id_with_slashes_is_reset_and_deleted_by_its_own_url(client, seeded):
    consumer = Consumer(seeded, group_id="ops/delete", enable_auto_commit=False)
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(9)})
    consumer.close()
    data = {"topic": TOPIC, "to": "earliest", "csrf_token": client.csrf, "action": "preview"}
    html = client.post("/groups/ops/delete", data=data).get_data(as_text=True)
    assert cells(html, "preview-current") == ["9", "-", "-"]
    data = {"action": "delete", "confirm": "yes", "csrf_token": client.csrf}
    assert client.post("/groups/ops/delete", data=data).status_code == 303
    assert [g.group_id for g in seeded.groups()] == ["billing"]
