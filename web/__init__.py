"""The web console and its JSON API (Flask).

`create_app(cluster_path=...)` builds the app; today it serves the JSON API's replication
endpoints under `/api/v1/replication/` (web/api.py), which other clusters' replicators call
(engine/replication_http.py). The full console comes with issue 6.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from flask import Flask

from engine.replication_http import ReplicationService

EXTENSION = "partitionlet"


@dataclass
class WebState:
    """What the app holds open for its lifetime: the cluster (through the replication
    service) and, under `plet web`, the background workers."""

    cluster_path: str
    replication: ReplicationService
    workers: list[Any] = field(default_factory=list)

    @property
    def cluster(self):
        return self.replication.cluster

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers.clear()
        self.replication.close()


def create_app(
    cluster_path: str | os.PathLike[str], *, testing: bool = False, **config: Any
) -> Flask:
    """The Flask app for the cluster directory `cluster_path` (which must exist).

    `config` goes into `app.config`. Close what the app holds with `close_app(app)`.
    """
    app = Flask(__name__)
    app.config["TESTING"] = testing
    app.config["JSON_SORT_KEYS"] = False
    app.config.update(config)
    path = os.fspath(cluster_path)
    app.extensions[EXTENSION] = WebState(path, ReplicationService(path))

    from web.api import api

    app.register_blueprint(api, url_prefix="/api/v1")
    return app


def state(app: Flask) -> WebState:
    return app.extensions[EXTENSION]


def close_app(app: Flask) -> None:
    """Stop the app's background workers and close its cluster."""
    state(app).close()


__all__ = ["WebState", "close_app", "create_app", "state"]
