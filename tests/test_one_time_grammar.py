"""One time string means one instant in every frontend (DESIGN.md, "Times, headers and
records in text": a time written without a zone is UTC). The process runs in
America/New_York, so a frontend that read a zone-less time as local time would pick
messages hours later."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from click.testing import CliRunner

from engine import Consumer, OffsetAndMetadata, Producer, TopicPartition
from engine.cli import cli
from tests.web.conftest import ADMIN, ADMIN_PASSWORD, login

TOPIC = "/apps/t:hourly"
URL = "/topics/apps/t:hourly"
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z; message i is at T0 + i hours
HOUR = 3_600_000
WHEN = "2026-01-01T03:00:00"  # no zone: UTC, so message 3 (local New York time: 8)
EXPECTED = 3


@pytest.fixture
def hourly(cluster, new_york):
    """TOPIC, one partition of 12 messages an hour apart from T0, and the group `g` that
    committed offset 11 and left."""
    cluster.create_stream("/apps/t", default_partitions=1, ttl=0)  # keep 2026 messages
    cluster.create_topic(TOPIC)
    producer = Producer(cluster, acks=1)
    for i in range(12):
        producer.send(TOPIC, value=b"v%d" % i, partition=0, timestamp_ms=T0 + i * HOUR)
    producer.flush()
    producer.close()
    commit(cluster, 11)
    return cluster


@pytest.fixture
def app(hourly):
    """The web console over `hourly`, with an administrator."""
    from web import close_app, create_app

    hourly.add_user(ADMIN, ADMIN_PASSWORD, admin=True)
    app = create_app(hourly.path, testing=True)
    yield app
    close_app(app)


@pytest.fixture
def client(app):
    """A test client logged in as the administrator; `client.csrf` is its CSRF token."""
    client = app.test_client()
    client.csrf = login(client, ADMIN, ADMIN_PASSWORD)
    return client


def commit(cluster, offset: int) -> None:
    consumer = Consumer(cluster, group_id="g", enable_auto_commit=False)
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(offset)})
    consumer.close()


def committed(cluster) -> int | None:
    (partition,) = cluster.group("g").partitions
    return partition.committed


def plet(*args: object) -> str:
    result = CliRunner().invoke(
        cli, [str(a) for a in args], env={"PLET_CLUSTER": None}, catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_zone_less_time_is_the_same_utc_instant_everywhere(hourly, client, app):
    # plet consume --from-time
    out = plet("consume", TOPIC, "--from-time", WHEN, "--format", "json", "--cluster", hourly.path)
    assert json.loads(out.splitlines()[0])["offset"] == EXPECTED

    # the web console's message browser
    page = client.get(URL, query_string={"time": WHEN})
    assert page.status_code == 200
    assert f'data-partition="0" data-offset="{EXPECTED}"' in page.get_data(as_text=True)
    assert f'data-offset="{EXPECTED - 1}"' not in page.get_data(as_text=True)

    # the JSON API's time parameter
    token = hourly.create_api_token(ADMIN, "tests")
    bearer = {"Authorization": f"Bearer {token}"}
    api = app.test_client()
    answer = api.get(f"/api/v1{URL}/messages", query_string={"time": WHEN}, headers=bearer)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert min(m["offset"] for m in answer.json["messages"]) == EXPECTED

    # Cluster.reset_offsets with a naive datetime
    hourly.reset_offsets("g", TOPIC, datetime(2026, 1, 1, 3))
    assert committed(hourly) == EXPECTED

    # plet group reset --to-time
    commit(hourly, 11)
    plet("group", "reset", "g", TOPIC, "--to-time", WHEN, "--cluster", hourly.path)
    assert committed(hourly) == EXPECTED

    # the web console's reset form
    commit(hourly, 11)
    data = {"topic": TOPIC, "to": "time", "time": WHEN, "csrf_token": client.csrf}
    assert client.post("/groups/g", data=data).status_code == 200
    assert committed(hourly) == EXPECTED

    # the JSON API's reset
    commit(hourly, 11)
    answer = api.post("/api/v1/groups/g/reset", json={"topic": TOPIC, "to": WHEN}, headers=bearer)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert committed(hourly) == EXPECTED

    # the terminal console's seek and reset inputs
    from console import browse
    from engine.groups.grammar import form_target

    assert browse.parse_seek(WHEN) == browse.Seek("time", T0 + EXPECTED * HOUR)
    commit(hourly, 11)
    hourly.reset_offsets("g", TOPIC, form_target("time", WHEN))
    assert committed(hourly) == EXPECTED

    # a Spark replay's range
    from spark_tasks import jobs

    assert jobs._time_ms(WHEN, "from_time") == T0 + EXPECTED * HOUR
