"""Logins over the wire under attack (issue 23): one address cannot try names at speed, a
flood of guesses from one address does not refuse another client's login, and a fleet of
64 clients of one user logging in at once all get in (a busy server is not a wrong
password; a password just checked is remembered)."""

from __future__ import annotations

import threading
import time

import pytest

from engine import Cluster
from engine.auth.logins import LoginLimiter
from engine.wire import KafkaServer
from tests.engine.wire.test_bad_input import Raw
from tests.engine.wire.test_connection_limits import ALICE, _login
from tests.timing import scaled

FAILURES = 10


@pytest.fixture
def server(tmp_path):
    with Cluster.open(tmp_path / "c", name="logins") as cluster:
        cluster.add_user(*ALICE)
        cluster.create_stream("/kafka")
        server = KafkaServer(
            cluster,
            listen=("127.0.0.1", 0),
            sasl=True,
            login_limiter=LoginLimiter(failures=FAILURES, window_s=60),
        ).start()
        try:
            yield server
        finally:
            server.close()


class _From(Raw):
    def __init__(self, address, source: str) -> None:
        import socket

        self.sock = socket.create_connection(address, timeout=20, source_address=(source, 0))
        self.correlation = 0


def _try(server, name, password, source="127.0.0.1") -> tuple[int, bytes]:
    raw = _From(server.address, source)
    try:
        return _login(raw, (name, password))
    finally:
        raw.close()


def test_names_tried_from_one_address_are_throttled_there_only(server):
    answers = [_try(server, f"user{i}", "Summer2024!") for i in range(30)]
    assert [error for error, _ in answers] == [58] * 30
    assert all(b"Authentication failed" in text for _, text in answers[:FAILURES])
    assert all(b"too many failed logins from 127.0.0.1" in text for _, text in answers[FAILURES:])
    # the right password from that address waits too; from another address it logs in
    assert b"too many failed logins" in _try(server, *ALICE)[1]
    assert _try(server, *ALICE, source="127.0.0.2")[0] == 0


def test_a_flood_of_guesses_does_not_refuse_another_clients_login(server):
    stop = threading.Event()
    guesses = [0]

    def guess(i: int) -> None:
        while not stop.is_set():
            try:
                _try(server, f"guess{i}", "wrong-guess-1", source="127.0.0.3")
            except OSError:
                pass  # closed on us: we try again
            guesses[0] += 1

    threads = [threading.Thread(target=guess, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + scaled(10)
        while guesses[0] < 64:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        start = time.monotonic()
        assert _try(server, *ALICE, source="127.0.0.4")[0] == 0
        assert time.monotonic() - start < scaled(2)
    finally:
        stop.set()
        for t in threads:
            t.join(30)


def test_64_clients_of_one_user_logging_in_at_once_all_get_in(server):
    clients = 64
    barrier = threading.Barrier(clients)
    errors: list[int | BaseException] = [-1] * clients

    def run(i: int) -> None:
        raw = Raw(server.address)
        try:
            barrier.wait()
            errors[i] = _login(raw)[0]
        except BaseException as exc:  # reported below
            errors[i] = exc
        finally:
            raw.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [0] * clients
    # and the name is not locked out afterwards
    assert _try(server, *ALICE)[0] == 0
