"""What the web console writes or reads as text the engine's way: sizes through
`engine.units.format_bytes`, produce-form headers through `engine.headers`."""

from __future__ import annotations

import re
from html import unescape

from engine import Consumer, TopicPartition
from engine.headers import FORM_HELP
from engine.units import format_bytes

HTMX = {"HX-Request": "true"}


def test_the_bytes_filter_is_the_engines(app):
    assert app.jinja_env.filters["bytes"] is format_bytes
    rendered = app.jinja_env.from_string("{{ 1048575 | bytes }} {{ none | bytes }}").render()
    assert rendered == "1.0 MiB -"


def test_the_produce_form_says_the_header_syntax_and_uses_it(client, cluster):
    cluster.create_stream("/apps")
    cluster.create_topic("/apps:t", partitions=1)
    page = client.get("/topics/apps:t").get_data(as_text=True)
    hint = re.search(r'<span class="muted" id="produce-headers-hint">(.*?)</span>', page)
    assert hint and unescape(hint.group(1)) == FORM_HELP == "name=value, one per line"
    assert 'aria-describedby="produce-headers-hint"' in page

    refused = client.post(
        "/topics/apps:t/produce",
        data={"value": "v", "headers": "unit=C\nsource: web"},
        headers={**HTMX, "X-CSRFToken": client.csrf},
    ).get_data(as_text=True)
    error = re.search(r'id="produce-headers-error">(.*?)</span>', refused).group(1)
    assert unescape(error) == (
        "line 2: header 'source: web' is not name=value: write it as 'source=web'"
    )
    assert cluster.topic("/apps:t").partitions[0].log_end_offset == 0

    client.post(
        "/topics/apps:t/produce",
        data={"value": "v", "headers": "unit=C\nsource = web"},
        headers={**HTMX, "X-CSRFToken": client.csrf},
    )
    consumer = Consumer(cluster, enable_auto_commit=False)
    tp = TopicPartition("/apps:t", 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    [record] = consumer.poll(timeout_ms=2000)[tp]
    consumer.close()
    assert list(record.headers) == [("unit", b"C"), ("source", b"web")]
