"""A real KafkaServer on a real cluster directory, on a free loopback port, shared by the
tests of one module (real clients connect to it over real sockets)."""

from __future__ import annotations

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
        server = KafkaServer(cluster, listen=("127.0.0.1", 0)).start()
        try:
            yield Wire(cluster, server)
        finally:
            server.close()
