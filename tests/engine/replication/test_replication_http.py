"""Replication over HTTP (issue 4, "Transport"): a replicator talks to another cluster's
`plet web` app, served here from a thread on 127.0.0.1."""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import replace

import pytest
from werkzeug.serving import make_server

from engine import Cluster, Consumer, Producer, Replicator, TopicPartition, errors
from engine.replication.http import HttpTarget, TransportError
from tests.timing import scaled
from web import close_app, create_app

logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log


@contextmanager
def served(path, port: int = 0):
    """The web app of the cluster at `path`, served from a thread; yields its port."""
    app = create_app(cluster_path=path, testing=True)
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
        close_app(app)


def contents(cluster: Cluster, stream: str = "/s") -> list[tuple]:
    """Every message of the stream, in (topic, partition, offset) order, with its fields;
    a list, so that a duplicate would show."""
    tps = [
        TopicPartition(info.name, p.partition)
        for info in cluster.topics(stream)
        for p in info.partitions
    ]
    consumer = Consumer(cluster, enable_auto_commit=False)
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    got = []
    deadline = time.monotonic() + scaled(20)
    while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=50, max_records=10_000).values():
            got += [
                (r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                for r in records
            ]
    consumer.close()
    return sorted(got)


def produce(cluster: Cluster, topic: str, count: int, tag: str) -> None:
    producer = Producer(cluster, default_stream="/s", linger_ms=0)
    for i in range(count):
        producer.send(
            topic,
            value=f"{tag}-{i}".encode() * 3,
            key=f"k{i % 11}".encode(),
            headers=[("from", tag.encode())],
            timestamp_ms=1_700_000_000_000 + i,
        )
        if i % 10 == 9:
            producer.flush()  # many small batches: many requests
    producer.flush()
    producer.close()


def settle(cluster: Cluster, rounds: int = 50, **options) -> int:
    total = 0
    with Replicator(cluster, **options) as replicator:
        for _ in range(rounds):
            moved = replicator.run_once()
            total += moved
            link_errors = [r.error for r in cluster.replicas("/s") if r.error]
            if not moved and not link_errors:
                return total
    raise AssertionError(f"replication did not settle: {cluster.replicas('/s')}")


@pytest.fixture
def pair(tmp_path):
    """(a, b): two clusters; b's web app is served while the test runs."""
    with Cluster.open(tmp_path / "a", name="a") as a, Cluster.open(tmp_path / "b", name="b") as b:
        a.create_stream("/s", default_partitions=3, ttl=0)
        a.create_topic("/s:t1", partitions=3)
        a.create_topic("/s:t2", partitions=1)
        yield a, b


def test_replication_over_http_converges_with_offsets_preserved(pair):
    a, b = pair
    produce(a, "t1", 120, "a")
    produce(a, "t2", 35, "a")
    consumer = Consumer(a, "/s:t1", group_id="g", auto_offset_reset="earliest")
    consumer.poll(timeout_ms=500, max_records=40)
    consumer.commit()
    committed = {tp: consumer.committed(tp) for tp in consumer.assignment()}
    consumer.close()
    with served(b.path) as port:
        token = b.create_replication_token("/s")
        info = a.add_replica("/s", f"http://{token}@127.0.0.1:{port}/")
        # The token is kept with the link, never in its name.
        assert info.target == f"http://127.0.0.1:{port}"
        assert token not in repr(a.replicas("/s"))
        settle(a)
        assert contents(b) == contents(a)
        assert len(contents(b)) == 155
        for info in b.topics("/s"):
            for p in info.partitions:
                mine = a.topic(info.name).partitions[p.partition]
                assert p.log_end_offset == mine.log_end_offset
        consumer_b = Consumer(b, enable_auto_commit=False, group_id="g")
        assert {tp: consumer_b.committed(tp) for tp in committed} == committed
        consumer_b.close()
        [link] = a.replicas("/s")
        assert link.state == "in_sync" and link.error is None
        assert link.target_id == b.id and link.copied_messages == 155
        assert [u.source_id for u in b.upstreams("/s")] == [a.id]
        # Follows: more messages, a new topic.
        produce(a, "t3", 20, "later")
        assert settle(a) == 20
        assert contents(b) == contents(a)
        # Removing the link tells the target and forgets the token.
        a.remove_replica("/s", f"http://127.0.0.1:{port}")
        assert a.replicas("/s") == [] and b.upstreams("/s") == []


def test_tokens_are_required_and_scoped_to_their_stream(pair):
    a, b = pair
    b.create_stream("/other")
    with served(b.path) as port:
        url = f"http://127.0.0.1:{port}"
        with pytest.raises(errors.InvalidArgument, match="token"):
            a.add_replica("/s", url)
        with pytest.raises(errors.AccessDenied, match="401"):
            a.add_replica("/s", f"http://nonsense@127.0.0.1:{port}")
        other = b.create_replication_token("/other")
        with pytest.raises(errors.AccessDenied, match="/other"):
            a.add_replica("/s", f"http://{other}@127.0.0.1:{port}")
        assert a.replicas("/s") == []
        # A token stored only as a hash on the target.
        row = b.catalog.replication_tokens()
        assert other not in repr(row) and {r[1] for r in row} == {"/other"}
        # The client itself: no retries on 401.
        with pytest.raises(errors.AccessDenied):
            HttpTarget(url, "wrong", retries=3)


def test_an_http_target_stopped_for_a_while_breaks_the_link_then_catches_up(pair):
    a, b = pair
    produce(a, "t1", 30, "a")
    with served(b.path) as port:
        token = b.create_replication_token("/s")
        a.add_replica("/s", f"http://{token}@127.0.0.1:{port}")
        assert len(contents(b)) == 30
    produce(a, "t1", 40, "while-down")
    with Replicator(a) as replicator:
        assert replicator.run_once() == 0
    [link] = a.replicas("/s")
    assert link.state == "broken"
    assert "TransportError" in link.error and "after" in link.error
    with served(b.path, port):
        assert settle(a) == 40
        [link] = a.replicas("/s")
        assert link.state == "in_sync" and link.error is None
        assert contents(b) == contents(a)


class FlakyProxy:
    """A loopback TCP proxy that cuts connections at random: before forwarding anything,
    after the request reached the server (the answer is lost), or in the middle of the
    answer. Listens on 127.0.0.1 only and stops by itself after `max_connections` or
    `max_seconds`."""

    def __init__(self, upstream_port: int, *, drop: float, seed: int = 7) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.drop = drop
        self.random = random.Random(seed)
        self.max_connections = 5000
        self.deadline = time.monotonic() + scaled(120)
        self.connections = 0
        self.cut = {"before": 0, "after_request": 0, "mid_answer": 0}
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.listener.close()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            if self.connections >= self.max_connections or time.monotonic() > self.deadline:
                break
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            self.connections += 1
            with self.lock:
                mode = None
                if self.random.random() < self.drop:
                    # Mostly after the request: the case where a retry meets its own batch.
                    mode = self.random.choice(
                        ["before", "after_request", "after_request", "mid_answer"]
                    )
                    self.cut[mode] += 1
            threading.Thread(target=self._serve, args=(client, mode), daemon=True).start()
        self.stopped.set()

    def _serve(self, client: socket.socket, mode: str | None) -> None:
        client.settimeout(10)
        try:
            if mode == "before":
                return
            with socket.create_connection(self.upstream, timeout=10) as server:
                pump = threading.Thread(target=self._pump, args=(client, server), daemon=True)
                pump.start()
                answer = b""
                while True:
                    data = server.recv(65536)
                    if not data:
                        break
                    answer += data
                if mode == "after_request":
                    return  # the server did the work; the client never hears of it
                if mode == "mid_answer":
                    client.sendall(answer[: max(1, len(answer) // 2)])
                    return
                client.sendall(answer)
        except OSError:
            pass
        finally:
            try:
                client.shutdown(socket.SHUT_RDWR)  # wakes the pump blocked on it
            except OSError:
                pass
            client.close()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass


def test_a_proxy_that_drops_connections_still_delivers_everything_exactly_once(pair):
    a, b = pair
    produce(a, "t1", 300, "a")
    produce(a, "t2", 100, "a")
    with served(b.path) as port:
        token = b.create_replication_token("/s")
        proxy = FlakyProxy(port, drop=0.3)
        try:
            url = f"http://{token}@127.0.0.1:{proxy.port}"
            try:
                a.add_replica("/s", url, paused=True)
            except TransportError:
                a.add_replica("/s", url, paused=True)  # the first try may be cut 5 times
            a.resume_replica("/s", url)
            # Small runs of batches: many requests, many of them cut.
            with Replicator(a, max_batches=4) as replicator:
                for _ in range(200):
                    replicator.run_once()
                    [link] = a.replicas("/s")
                    if link.state == "in_sync":
                        break
            assert link.state == "in_sync", link
        finally:
            proxy.stop()
        assert sum(proxy.cut.values()) >= 10, proxy.cut
        assert proxy.cut["after_request"] >= 1, proxy.cut
        got = contents(b)
        assert got == contents(a) and len(got) == 400  # whole, once each, same offsets
        assert len({(t, p, o) for t, p, o, *_ in got}) == 400


def test_topic_overrides_and_their_edits_replicate_over_http(pair):
    a, b = pair
    a.edit_topic("/s:t1", compact=True, retention_bytes=4096)
    produce(a, "t1", 5, "a")
    with served(b.path) as port:
        token = b.create_replication_token("/s")
        a.add_replica("/s", f"http://{token}@127.0.0.1:{port}/")
        settle(a)
        assert b.topic("/s:t1").overrides == {"compact": True, "retention_bytes": 4096}
        assert b.topic("/s:t2").overrides == {}
        a.edit_topic("/s:t1", compact=None)
        a.edit_topic("/s:t2", ttl=60)
        settle(a)
        assert b.topic("/s:t1").overrides == {"retention_bytes": 4096}
        assert b.topic("/s:t2").overrides == {"ttl": 60}


def test_a_batch_altered_on_its_way_is_refused_whole_and_not_retried(pair):
    a, b = pair
    produce(a, "t2", 35, "a")
    row = a.catalog.topic("/s", "t2")
    [pl] = a.catalog.chain(row.id, 0)
    batches = a.volume(pl.volume_id).replica_batches(pl.id, 0, 10)
    assert batches and all(batch.crc is not None for batch in batches)
    last = batches[-1]
    altered = replace(last, payload=last.payload[:-1] + bytes([last.payload[-1] ^ 1]))
    b.create_stream("/s", ttl=0)
    b.create_topic("/s:t2", partitions=1)
    with served(b.path) as port:
        token = b.create_replication_token("/s")
        target = HttpTarget(f"http://127.0.0.1:{port}", token)
        assert target.checksums  # the server says it checks them
        with pytest.raises(errors.CorruptBatch, match="CRC32C"):
            target.apply("/s", "t2", 0, [*batches[:-1], altered])
        assert target.requests == 2  # info, then apply once: not retried
        assert b.topic("/s:t2").partitions[0].log_end_offset == 0
        assert target.apply("/s", "t2", 0, batches).done == len(batches)
        assert b.topic("/s:t2").partitions[0].log_end_offset == 35
        target.close()
