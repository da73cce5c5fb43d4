"""The web console and its JSON API (Flask + htmx).

`create_app(cluster_path=...)` builds the app: one blueprint per resource (web/auth.py,
web/overview.py, web/streams.py, web/topics.py, web/groups.py, web/replication.py,
web/heat.py, web/replays.py, web/users.py, and the JSON API in web/api/), each page a template that includes the partial
templates (`_name.html`) its htmx requests get back alone (web/pages.py decides which).
Security (sessions, CSRF, headers) is set up in web/security.py; the logged-in user acts
as an engine `Principal`, so stream ACEs decide what they see and change. One app serves
one cluster; web/clusters.py's `Console` mounts several under `/c/<name>/` (`plet web`).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import Flask
from htmx_flask import Htmx

from engine.replication.http import ReplicationService

EXTENSION = "partitionlet"
SECRET_FILE = "web-secret"
# The largest request body any route reads (Flask's MAX_CONTENT_LENGTH, `plet web
# --max-request-bytes`), chunked or not; a route may ask for less (the registry's 2 MB)
# or, once the caller is known, more (replication's batches). 413 past it.
MAX_REQUEST_BYTES = 8 * 1024 * 1024


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


def _secret_key(cluster_path: str) -> bytes:
    """The key that signs session cookies, kept in the cluster directory (mode 0600) so
    that sessions survive a restart and every `plet web` of one cluster agrees."""
    path = Path(cluster_path) / SECRET_FILE
    if not path.exists():
        # Written whole to a private file, then linked into place: two servers starting at
        # once both end up with the one key that won, never with a half-written file.
        tmp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
        finally:
            tmp.unlink(missing_ok=True)
    return path.read_bytes()


def create_app(
    cluster_path: str | os.PathLike[str], *, testing: bool = False, **config: Any
) -> Flask:
    """The Flask app for the cluster directory `cluster_path` (which must exist).

    `config` goes into `app.config` (for example `WTF_CSRF_ENABLED=False` in a unit test).
    Close what the app holds with `close_app(app)`.
    """
    path = os.fspath(cluster_path)
    app = Flask(__name__)
    app.config["TESTING"] = testing
    app.config["JSON_SORT_KEYS"] = False
    app.config["SECRET_KEY"] = _secret_key(path)
    from web import allowed, clusters, filters, pages, security

    app.config.update(security.CONFIG_DEFAULTS)
    # werkzeug holds every body to it: a Content-Length past it is refused unread, and a
    # chunked body is counted as it is read (its LimitedStream), so memory stays bounded
    app.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
    app.config.update(config)
    app.extensions[EXTENSION] = WebState(path, ReplicationService(path))
    Htmx(app)

    security.init_app(app)
    filters.init_app(app)
    pages.init_app(app)
    clusters.init_app(app)
    allowed.init_app(app)  # what pages offer, and --read-only (web/allowed.py)

    # imported here, not at the top: the blueprints import this package (for state())
    from web.api import api
    from web.assets import assets
    from web.auth import auth
    from web.charts import charts
    from web.errors import register_error_handlers
    from web.groups import groups
    from web.heat import heat
    from web.imports import imports
    from web.overview import overview
    from web.replays import replays
    from web.replication import replication
    from web.search import search
    from web.search_messages import message_search_pages
    from web.streams import streams
    from web.topics import topics
    from web.transactions import transactions
    from web.users import users

    for blueprint in (
        assets,
        auth,
        overview,
        streams,
        topics,
        imports,
        search,
        message_search_pages,
        groups,
        transactions,
        replication,
        heat,
        replays,
        users,
        charts,
    ):
        app.register_blueprint(blueprint)
    app.register_blueprint(api, url_prefix="/api/v1")
    security.exempt(api)
    # the Confluent Schema Registry subset (docs/SCHEMAS.md): an API for Kafka clients,
    # authenticated by its Authorization header, never a cookie, so outside CSRF too
    from web.registry import registry
    from web.schemas import schemas

    app.register_blueprint(schemas)  # the topic page's Schemas part
    app.register_blueprint(registry, url_prefix="/registry")
    security.exempt(registry)
    register_error_handlers(app)
    from web.body_limit import BodyLimit

    app.wsgi_app = BodyLimit(  # type: ignore[method-assign]  # Flask's documented way to add middleware
        app.wsgi_app, lambda: app.config["MAX_CONTENT_LENGTH"]
    )
    return app


def state(app: Flask) -> WebState:
    return app.extensions[EXTENSION]


def close_app(app: Flask) -> None:
    """Stop the app's background workers and close its cluster."""
    searches = app.extensions.get("message_searches")  # web/search_messages.py
    if searches is not None:
        searches.close()  # their threads read the cluster: they end first
    writes = app.extensions.get("imports")  # web/imports.py
    if writes is not None:
        writes.close()  # their threads write to the cluster: they end first
    state(app).close()


__all__ = ["MAX_REQUEST_BYTES", "WebState", "close_app", "create_app", "state"]
