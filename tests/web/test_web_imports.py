"""Importing a file into a topic from the topic page (web/imports.py): the dry run, every
bad line listed with nothing written, the write with its progress, the produce permission,
and a download of one topic imported into another as it was (Flask test client, CSRF on)."""

from __future__ import annotations

import html
import io
import json
import re
import time

import pytest

from engine import Producer
from tests.readback import every_message

SOURCE = "/imp:source"
TARGET = "/imp:target"
HTMX = {"HX-Request": "true"}


@pytest.fixture
def topics(cluster):
    from engine.auth.principal import Principal

    ace = f"u:{Principal.current().user}"  # this test's own producer, not alice
    cluster.create_stream("/imp", ttl=0, default_partitions=2, produce_perm=ace, consume_perm=ace)
    cluster.create_topic(SOURCE)
    cluster.create_topic(TARGET)
    producer = Producer(cluster, acks=1)
    for i in range(12):
        producer.send(
            SOURCE,
            value=b"=v%d" % i if i % 5 == 0 else b"v%d" % i,
            key=None if i == 3 else b"k%d" % i,
            partition=i % 2,
            headers=[("seq", str(i).encode()), ("bin", b"\xff")],
            timestamp_ms=1_700_000_000_000 + i,
        )
    producer.send(SOURCE, value=None, key=b"gone", partition=1, timestamp_ms=1_700_000_000_100)
    producer.flush()
    producer.close()


def _text(answer) -> str:
    return html.unescape(answer.get_data(as_text=True))


def _post(client, data: bytes, filename: str, headers=None, **fields):
    form = {"csrf_token": client.csrf, "file": (io.BytesIO(data), filename), **fields}
    return client.post(
        "/topics/imp:target/import",
        data=form,
        content_type="multipart/form-data",
        headers=headers or {},
    )


def _wait(client, answer) -> str:
    """Poll the import's progress (as htmx does) until it ends; its last answer."""
    body = _text(answer)
    for _ in range(600):
        poll = re.search(r'hx-get="(/topics/imp:target/import/[^"]+)"', body)
        if poll is None:
            return body
        body = _text(client.get(poll.group(1), headers=HTMX))
    raise AssertionError("the import did not end")


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_a_download_imports_into_another_topic_as_it_was(client, cluster, topics, kind):
    download = client.get(
        "/topics/imp:source/download", query_string={"file": kind, "start": "oldest"}
    )
    assert download.status_code == 200
    data = download.get_data()
    dry = _post(client, data, f"export.{kind}", headers=HTMX, mode="dry")
    body = _text(dry)
    assert dry.status_code == 200
    assert f"Dry run: 13 messages into {TARGET}: 6 to partition 0, 7 to partition 1." in body
    assert "Nothing was written: press <em>Import</em> to write them." in body
    first = ["1", "2", "3"] if kind == "jsonl" else ["2", "3", "4"]  # CSV: line 1 is its header
    assert re.findall(r'<tr data-line="(\d+)">', body)[:3] == first
    assert "seq: 0<br>bin: \ufffd" in body
    assert every_message(cluster, TARGET) == []
    started = _post(client, data, f"export.{kind}", headers=HTMX, mode="write")
    assert started.status_code == 200
    done = _wait(client, started)
    assert f"Wrote 13 of 13 messages (100%) into {TARGET}" in done
    assert 'href="/topics/imp:target?start=newest">Show the newest messages' in done
    assert every_message(cluster, TARGET) == every_message(cluster, SOURCE)


def test_a_file_with_a_bad_line_writes_nothing_and_lists_every_one(client, cluster, topics):
    lines = [
        json.dumps({"value": "ok", "partition": 0}),
        "{oops",
        json.dumps({"value": "x", "partition": 2}),  # the topic has 2
        json.dumps({"value": "x", "key_encoding": "base64", "key": "!!"}),
    ]
    answer = _post(client, "\n".join(lines).encode(), "bad.jsonl", headers=HTMX, mode="write")
    body = _text(answer)
    assert answer.status_code == 200  # htmx swaps only 2xx answers
    assert "Nothing written: 3 lines refused." in body
    assert re.findall(r'<li data-line="(\d+)">', body) == ["2", "3", "4"]
    assert "line 3: partition 2: /imp:target has partitions 0 to 1" in body
    assert "line 4: key is not valid base64" in body
    assert every_message(cluster, TARGET) == []
    # without htmx: the import page with the same, and a 400
    plain = _post(client, "\n".join(lines).encode(), "bad.jsonl", mode="write")
    assert plain.status_code == 400 and "<h1>Import into" in _text(plain)
    assert every_message(cluster, TARGET) == []


def test_the_form_is_on_the_messages_tab_and_bad_requests_say_why(client, cluster, topics):
    page = _text(client.get("/topics/imp:target"))
    assert '<details class="produce-toggle" id="import-toggle">' in page
    assert 'action="/topics/imp:target/import"' in page and 'enctype="multipart/form-data"' in page
    answer = _post(client, b'{"value": "x"}', "notes.txt", headers=HTMX)
    assert "is not named .jsonl or .csv: choose its format" in _text(answer)
    answer = _post(client, b'{"value": "x"}', "notes.txt", headers=HTMX, format="jsonl")
    assert "Dry run: 1 message into /imp:target: 1 by key or round-robin." in _text(answer)
    assert "Messages without a timestamp get the time they are written." in _text(answer)
    no_token = client.post(
        "/topics/imp:target/import",
        data={"file": (io.BytesIO(b'{"value": "x"}'), "a.jsonl"), "mode": "write"},
        content_type="multipart/form-data",
    )
    assert no_token.status_code == 400
    assert client.get("/topics/imp:target/import/1-nope").status_code == 404
    assert every_message(cluster, TARGET) == []


def test_a_user_without_produce_perm_is_refused_before_anything(user_client, cluster, topics):
    answer = _post(user_client, b'{"value": "x"}', "a.jsonl", mode="write")
    assert answer.status_code == 403
    assert "Access denied" in _text(answer) and "produce_perm" in _text(answer)
    assert every_message(cluster, TARGET) == []


def test_the_progress_moves_while_a_big_file_is_written(client, cluster, topics, monkeypatch):
    import threading

    from engine.client import imports as engine_imports

    monkeypatch.setattr(engine_imports, "CHUNK", 100)
    release = threading.Event()
    moved = engine_imports.ImportJob._progress

    def held(job, written):  # the write waits after its first chunk until the test has looked
        moved(job, written)
        release.wait(30)

    monkeypatch.setattr(engine_imports.ImportJob, "_progress", held)
    data = "".join(json.dumps({"value": f"m{i}", "partition": i % 2}) + "\n" for i in range(2000))
    started = _post(client, data.encode(), "big.jsonl", headers=HTMX, mode="write")
    body = _text(started)
    assert re.search(r'<progress max="2000" value="(0|100)"', body)
    assert 'hx-trigger="every 1000ms"' in body  # htmx polls it
    poll = re.search(r'hx-get="(/topics/imp:target/import/[^"]+)"', body).group(1)
    deadline = time.monotonic() + 30
    midway = ""
    while "Wrote 100 of" not in midway and time.monotonic() < deadline:
        midway = _text(client.get(poll, headers=HTMX))  # the first chunk is being written
    assert "Wrote 100 of 2,000 messages (5%)…" in midway
    assert 'hx-trigger="every 1000ms"' in midway
    plain = client.get(poll)  # without JavaScript: the page, with a link to refresh it
    assert "<h1>Import into" in _text(plain) and f'href="{poll}">Refresh</a>' in _text(plain)
    # one import at a time per user
    second = _post(client, b'{"value": "x"}', "more.jsonl", headers=HTMX, mode="write")
    assert "your previous import is still being written" in _text(second)
    release.set()
    done = _wait(client, started)
    assert "Wrote 2,000 of 2,000 messages (100%)" in done and "hx-trigger" not in done
    assert len(every_message(cluster, TARGET)) == 2000
