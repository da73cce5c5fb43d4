"""A reset previewed in a real browser: the preview's new offsets are what Apply commits,
for the partitions chosen only; then the group is deleted after a confirmation."""

from __future__ import annotations

from playwright.sync_api import expect

from engine import Consumer, OffsetAndMetadata, Producer, TopicPartition
from tests.e2e.conftest import shot

STREAM = "/e2e/preview"
TOPIC = f"{STREAM}:payments"
GROUP = "e2e-preview"


def _seed(cluster) -> None:
    """3 partitions of 10 messages; the group read 5, 6 and 7 of them, and left."""
    cluster.create_stream(STREAM, default_partitions=3)
    cluster.create_topic(TOPIC)
    producer = Producer(cluster)
    for partition in (0, 1, 2):
        for i in range(10):
            producer.send(TOPIC, value=b"%d" % i, partition=partition)
    producer.flush()
    producer.close()
    consumer = Consumer(cluster, group_id=GROUP, enable_auto_commit=False)
    tps = [TopicPartition(TOPIC, p) for p in (0, 1, 2)]
    consumer.assign(tps)
    consumer.commit({tp: OffsetAndMetadata(5 + tp.partition) for tp in tps})
    consumer.close()


def test_preview_then_apply_commits_the_previewed_offsets(admin_page, live_server):
    cluster = live_server.cluster
    _seed(cluster)
    page = admin_page
    page.goto(f"{live_server.url}/groups/{GROUP}")
    form = page.get_by_role("region", name="Reset offsets")
    form.get_by_label("Partitions").fill("0, 2")
    form.get_by_label("Reset to").select_option("shift")
    form.get_by_label("Shift by").fill("-3")
    form.get_by_role("button", name="Preview").click()

    preview = form.get_by_role("region", name="Preview")
    expect(preview.get_by_test_id("preview-partition")).to_have_text(["0", "2"])
    expect(preview.get_by_test_id("preview-current")).to_have_text(["5", "7"])
    expect(preview.get_by_test_id("preview-new")).to_have_text(["2", "4"])
    expect(preview.get_by_test_id("preview-lag-after")).to_have_text(["8", "6"])
    shown = [int(t) for t in preview.get_by_test_id("preview-new").all_inner_texts()]
    assert [p.committed for p in cluster.group(GROUP).partitions] == [5, 6, 7]  # not yet
    shot(page, "group-reset-preview")

    page.once("dialog", lambda dialog: dialog.accept())
    preview.get_by_role("button", name="Apply").click()
    expect(form.get_by_role("status")).to_contain_text("Offsets reset")
    committed = {p.partition: p.committed for p in cluster.group(GROUP).partitions}
    assert [committed[0], committed[2]] == shown
    assert committed[1] == 6  # not chosen, not changed
    expect(page.get_by_role("region", name="Offsets").get_by_test_id("committed")).to_have_text(
        ["2", "6", "4"]
    )

    page.get_by_role("region", name="Delete group").get_by_role(
        "button", name="Delete group…"
    ).click()
    page.get_by_role("button", name="Yes, delete group").click()
    expect(page.get_by_role("status")).to_contain_text(f"Group {GROUP} deleted")
    assert GROUP not in [g.group_id for g in cluster.groups()]
