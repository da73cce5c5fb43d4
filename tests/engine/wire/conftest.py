"""Live listeners for the wire tests: `wire`, a real KafkaServer on a real cluster directory
on a free loopback port, shared by the tests of one module, and `make_server`, listeners of
one test with the options it asks for (real clients connect to them over real sockets)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest

from engine import Cluster
from engine.wire import KafkaServer


@dataclass
class Wire:
    cluster: Cluster
    server: KafkaServer

    @property
    def bootstrap(self) -> str:
        host, port = self.server.address
        return f"{host}:{port}"


@pytest.fixture(scope="module")
def wire(tmp_path_factory):
    path = tmp_path_factory.mktemp("wire") / "cluster"
    with Cluster.open(path, name="wire") as cluster:
        # The default stream exists from the start, as after any client's first produce:
        # the tests sharing this cluster run in any order (tests that watch it being
        # created on first use have clusters of their own).
        cluster.create_stream("/kafka")
        server = KafkaServer(cluster, listen=("127.0.0.1", 0)).start()
        try:
            yield Wire(cluster, server)
        finally:
            server.close()


ALICE = ("alice", "correct horse battery")


@pytest.fixture
def make_server(tmp_path):
    """A factory of live listeners, `make_server(**KafkaServer options)`, each on a cluster
    of its own with the user alice (`ALICE`) and the topic /kafka:t (one partition); with
    `sasl=True` only alice may produce to and consume /kafka. Closed after the test."""
    servers: list[KafkaServer] = []
    clusters: list[Cluster] = []

    def make(**kwargs) -> KafkaServer:
        cluster = Cluster.open(tmp_path / f"c{len(clusters)}", name="listener")
        clusters.append(cluster)
        cluster.add_user(*ALICE)
        if kwargs.get("sasl"):
            cluster.create_stream("/kafka", produce_perm="u:alice", consume_perm="u:alice")
        else:
            cluster.create_stream("/kafka")
        cluster.create_topic("/kafka:t", partitions=1)
        server = KafkaServer(cluster, listen=("127.0.0.1", 0), **kwargs).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()
    for cluster in clusters:
        cluster.close()


def run_async(coroutine):
    """`asyncio.run(coroutine)` in a thread of its own: the thread running the tests may
    already run an event loop (Playwright's sync API keeps one for its browser fixture)."""
    result = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coroutine)
        except BaseException as exc:  # handed to the test's thread
            result["error"] = exc

    thread = threading.Thread(target=target, name="aiokafka-test")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]
