"""The overview page: the cluster's totals, its volumes and the live part htmx polls."""

from __future__ import annotations

import re

from engine import Producer


def _text(html: str, testid: str) -> str:
    match = re.search(rf'data-testid="{testid}">(.*?)</dd>', html, re.S)
    assert match, testid
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def test_overview_shows_the_totals_and_every_volume(client, cluster):
    cluster.create_stream("/a")
    cluster.create_stream("/b")
    producer = Producer(cluster, acks=1)
    for i in range(1200):
        producer.send(f"/a:t{i % 3}", value=b"x" * 10)
    producer.send("/b:z", value=b"y")
    producer.flush()
    producer.close()
    html = client.get("/").get_data(as_text=True)
    assert _text(html, "total-streams") == "2"
    assert _text(html, "total-topics") == "4"
    assert _text(html, "total-messages") == "1,201"
    assert cluster.totals().messages == 1201
    for volume in cluster.volumes():
        assert volume.path in html


def test_the_live_part_alone_for_htmx_and_the_whole_page_otherwise(client):
    part = client.get("/overview/live", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "Throughput" in part and "<html" not in part
    page = client.get("/overview/live").get_data(as_text=True)
    assert "<html" in page and "Totals" in page


def test_overview_shows_the_last_check(client, cluster):
    from engine.ops import check

    html = client.get("/").get_data(as_text=True)
    assert "never checked (plet check)" in html
    assert check.run(cluster).ok
    html = client.get("/").get_data(as_text=True)
    assert re.search(r"last check \d{4}-\d\d-\d\d [\d:]+Z: no problems", html)
    # a partition whose row no longer matches its batches: the check's problem is shown
    cluster.create_stream("/s")
    producer = Producer(cluster, acks=1)
    producer.send("/s:t", value=b"x")
    producer.flush()
    producer.close()
    (pl,) = cluster.partitionlets("/s:t")
    cluster.volume(pl.volume).recount(pl.id, 5, 5, 5, 0)  # counts nothing holds
    report = check.run(cluster)
    assert [p.check for p in report.problems] == ["counts"]
    html = client.get("/").get_data(as_text=True)
    assert "1 problem" in html and 'role="alert"' in html
    assert f"partitionlet {pl.id}: its row counts 5 batches" in html
