"""Protobuf schema registrations through the live registry run at most
`engine.client.schemas.PROTOC_RUNS` protoc processes at once; the others wait their turn
or, past PROTOC_WAIT_S, are answered 503 "try again" (issue 23: 30 concurrent registrations
ran 25 protoc processes at once)."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from engine.client import schemas

ADMIN = ("admin", "admin-password-1")


def _protoc_children() -> int:
    """protoc processes this process started now (the live server runs in it)."""
    me = str(os.getpid())
    count = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            ppid = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if ppid == me and b"grpc_tools.protoc" in cmdline:
            count += 1
    return count


def _register(url: str, i: int) -> requests.Response:
    text = f'syntax = "proto3";\nmessage Order{i} {{ int64 id = 1; string item = 2; }}\n'
    return requests.post(
        f"{url}/registry/subjects/orders{i}-value/versions",
        json={"schema": text, "schemaType": "PROTOBUF"},
        auth=ADMIN,
        timeout=120,
    )


def test_concurrent_protobuf_registrations_run_few_protocs(live_web, monkeypatch):
    monkeypatch.setattr(schemas, "PROTOC_WAIT_S", 1.0)
    # Each compile holds its turn at least 0.4 s (a protoc as slow as on a busy machine), so
    # that in 1 s only a few of the 30 get a turn and the others surely wait too long; on
    # a quiet machine protoc alone is quick enough for all 30 to pass in 1 s.
    run_protoc = schemas._run_protoc

    def slow_protoc(*args):
        found = run_protoc(*args)
        time.sleep(0.4)
        return found

    monkeypatch.setattr(schemas, "_run_protoc", slow_protoc)
    assert _register(live_web.url, 0).status_code == 200  # the login is checked once, first
    most = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal most
        while not stop.is_set():
            most = max(most, _protoc_children())
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(30) as pool:
            answers = list(pool.map(lambda i: _register(live_web.url, i), range(1, 31)))
    finally:
        stop.set()
        watcher.join()
    assert 1 <= most <= schemas.PROTOC_RUNS
    statuses = [a.status_code for a in answers]
    assert set(statuses) == {200, 503}, statuses
    for answer in answers:
        if answer.status_code == 503:
            assert "try again" in answer.json()["message"]
            assert answer.headers["Retry-After"] == "2"
    # the server is not left busy: a registration now compiles at once
    start = time.monotonic()
    assert _register(live_web.url, 99).status_code == 200
    assert time.monotonic() - start < 10
