"""Consumer groups in a real browser: the list and a group's page, and an offset reset
made from the page that changes the lag shown."""

from __future__ import annotations

from playwright.sync_api import expect

from engine import Consumer, OffsetAndMetadata, Producer, TopicPartition
from tests.e2e.conftest import shot

STREAM = "/e2e/groups"
TOPIC = f"{STREAM}:orders"
GROUP = "e2e-reset"


def _seed_group(cluster) -> None:
    """A topic of 2 x 10 messages and a group, with no live member, that read 3 of each."""
    cluster.create_stream(STREAM, default_partitions=2)
    cluster.create_topic(TOPIC)
    producer = Producer(cluster)
    for partition in (0, 1):
        for i in range(10):
            producer.send(TOPIC, value=b"%d" % i, partition=partition)
    producer.flush()
    producer.close()
    consumer = Consumer(cluster, group_id=GROUP, enable_auto_commit=False)
    tps = [TopicPartition(TOPIC, p) for p in (0, 1)]
    consumer.assign(tps)
    consumer.commit({tp: OffsetAndMetadata(3) for tp in tps})
    consumer.close()


def test_groups_list_and_the_seeded_group_with_lag(admin_page, live_server):
    page = admin_page
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Consumer groups").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Consumer groups")
    groups = page.get_by_role("region", name="Groups")
    row = groups.get_by_role("row").filter(has=page.get_by_role("link", name="analytics"))
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("group-lag")).not_to_have_text("0")
    shot(page, "groups")
    row.get_by_role("link", name="analytics").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("analytics")
    offsets = page.get_by_role("region", name="Offsets")
    expect(offsets.get_by_test_id("offset-row")).to_have_count(2)  # /apps/clicks:web, 2 partitions
    expect(page.get_by_role("region", name="Reset offsets").get_by_label("Topic")).to_have_value(
        "/apps/clicks:web"
    )
    shot(page, "group")


def test_reset_offsets_from_the_page_changes_the_lag(admin_page, live_server):
    _seed_group(live_server.cluster)
    page = admin_page
    page.goto(f"{live_server.url}/groups/{GROUP}")
    summary = page.get_by_role("region", name="Summary")
    expect(summary.get_by_test_id("group-lag")).to_have_text("14")
    form = page.get_by_role("region", name="Reset offsets")
    expect(form.get_by_label("Topic")).to_have_value(TOPIC)

    # a bad offset: inline error, nothing changes
    form.get_by_label("Reset to").select_option("offset")
    form.get_by_label("Offset").fill("lots")
    page.once("dialog", lambda dialog: dialog.accept())
    form.get_by_role("button", name="Reset offsets").click()
    expect(form.get_by_label("Offset")).to_have_attribute("aria-invalid", "true")
    expect(form).to_contain_text("An offset is a whole number")
    expect(summary.get_by_test_id("group-lag")).to_have_text("14")

    # to offset 8 of every partition: lag 2 + 2
    form.get_by_label("Offset").fill("8")
    page.once("dialog", lambda dialog: dialog.accept())
    form.get_by_role("button", name="Reset offsets").click()
    expect(form.get_by_role("status")).to_contain_text("Offsets reset")
    expect(summary.get_by_test_id("group-lag")).to_have_text("4")
    committed = page.get_by_role("region", name="Offsets").get_by_test_id("committed")
    expect(committed).to_have_text(["8", "8"])
    shot(page, "group-reset")

    # to the earliest: lag 20
    form.get_by_label("Reset to").select_option("earliest")
    page.once("dialog", lambda dialog: dialog.accept())
    form.get_by_role("button", name="Reset offsets").click()
    expect(summary.get_by_test_id("group-lag")).to_have_text("20")
    info = live_server.cluster.group(GROUP)
    assert [p.committed for p in info.partitions] == [0, 0]
