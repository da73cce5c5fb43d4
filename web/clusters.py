"""One console, many clusters: `Console` serves each local cluster of a list
(engine.served_clusters) with an app of its own (`create_app`, unchanged) under
`/c/<name>/`, and the main cluster at `/` too, so that older URLs keep working.

Mounting sets SCRIPT_NAME, so every `url_for` of an app is prefixed by itself. Each app
keeps its cluster's users, sessions and ACEs: its session cookie has a name of its own
(the main cluster keeps `plet_session`), so a user of two clusters logs in to each, and
logging in to or out of one leaves the other as it was. A remote console of the list (an
http(s) address) with a token is served under `/c/<name>/` too, through that console
(web/remote.py: its pages, its login, its cookies kept to that prefix); one without a
token is a link to it. Every console believes forwarded headers only from a proxy with a
token its main cluster issued (web/proxied.py, around the whole console).

Each app knows the list (`ServedList`, in its extensions) for the header's cluster switcher
and the replication page's links (`cluster_links`, `node_href`, `link_href`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask, current_app, request, url_for
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from engine.cluster import CATALOG_FILE
from engine.errors import NotACluster, PartitionletError
from engine.replication.targets import is_url
from engine.served_clusters import ServedCluster

MOUNT = "/c"
EXTENSION = "partitionlet-clusters"
MAIN_COOKIE = "plet_session"


@dataclass(frozen=True)
class ClusterLink:
    """A cluster as the header's switcher shows it."""

    name: str
    href: str
    current: bool
    remote: bool  # another console's address: a link out of this console
    proxied: bool = False  # another console's cluster, served here through that console


@dataclass(frozen=True)
class ServedList:
    """The console's clusters, as known to the app of the cluster named `this`."""

    clusters: tuple[ServedCluster, ...]
    this: str

    def root(self) -> str:
        """The console's own root (SCRIPT_NAME without this app's mount): the main app
        answers both at `/` and at `/c/<its name>/`."""
        script_root = request.script_root
        mount = f"{MOUNT}/{self.this}"
        return script_root[: -len(mount)] if script_root.endswith(mount) else script_root

    def href(self, cluster: ServedCluster) -> str:
        if cluster.url is not None and not cluster.proxied:
            return cluster.url + "/"
        return f"{self.root()}{MOUNT}/{cluster.name}/"

    def by_url(self, url: str) -> ServedCluster | None:
        """The remote console at `url` when this console serves it."""
        return next((c for c in self.clusters if c.proxied and c.url == url), None)


def cookie_name(cluster: ServedCluster) -> str:
    """The session cookie of a cluster's app: one per cluster, so logins stay apart."""
    return MAIN_COOKIE if cluster.main else f"{MAIN_COOKIE}_{cluster.name}"


class Console:
    """The WSGI app of a console over `clusters` (the main one first): an app per local
    cluster (`apps`, by name), mounted under `/c/<name>`; the main one also at `/`.
    `config` goes to every app (`create_app`). A cluster found along links that cannot be
    opened now is left out (`skipped`, with why). Close it with `close()`."""

    def __init__(self, clusters: Sequence[ServedCluster], **config: Any) -> None:
        from web import MAX_REQUEST_BYTES, close_app, create_app
        from web.allowed import READ_ONLY
        from web.proxied import ProxyTrust
        from web.remote import RemoteConsole

        if not clusters or not clusters[0].main or clusters[0].path is None:
            raise ValueError("the first cluster must be the main, local one")
        self.apps: dict[str, Flask] = {}
        # remote consoles served through this one (web/remote.py), by name
        self.remotes: dict[str, RemoteConsole] = {}
        # (cluster, why) of linked clusters that could not be opened: left out, not fatal
        self.skipped: list[tuple[ServedCluster, str]] = []
        try:
            for cluster in clusters:
                if cluster.proxied:
                    self.remotes[cluster.name] = RemoteConsole(
                        cluster,
                        max_body=config.get("MAX_CONTENT_LENGTH", MAX_REQUEST_BYTES),
                        read_only=bool(config.get(READ_ONLY)),
                    )
                if cluster.path is None:
                    continue
                settings = {"SESSION_COOKIE_NAME": cookie_name(cluster), **config}
                try:
                    if not (Path(cluster.path) / CATALOG_FILE).is_file():
                        # gone since it was listed: create_app would make an empty one
                        raise NotACluster(f"no cluster at {cluster.path}")
                    self.apps[cluster.name] = create_app(cluster.path, **settings)
                except (PartitionletError, OSError) as exc:
                    if not cluster.linked:
                        raise  # named on purpose: the user must hear of it
                    self.skipped.append((cluster, str(exc) or type(exc).__name__))
        except BaseException:
            for app in self.apps.values():
                close_app(app)
            for remote in self.remotes.values():
                remote.close()
            raise
        skipped = {c.name for c, _ in self.skipped}
        self.clusters = tuple(c for c in clusters if c.name not in skipped)
        for name, app in self.apps.items():
            app.extensions[EXTENSION] = ServedList(self.clusters, name)
        self.main = self.apps[self.clusters[0].name]
        mounts: dict[str, Any] = {f"{MOUNT}/{name}": app for name, app in self.apps.items()}
        mounts.update({f"{MOUNT}/{name}": remote for name, remote in self.remotes.items()})
        # forwarded headers are believed from a console with this cluster's token only
        self._dispatch = ProxyTrust(DispatcherMiddleware(self.main, mounts), self.main)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        return self._dispatch(environ, start_response)

    def close(self) -> None:
        from web import close_app

        for app in self.apps.values():
            close_app(app)
        for remote in self.remotes.values():
            remote.close()


def served_list(app: Flask | None = None) -> ServedList | None:
    """The list of the console this app is part of (None: an app served alone)."""
    found: ServedList | None = (app or current_app).extensions.get(EXTENSION)
    return found


def cluster_links() -> list[ClusterLink]:
    """The switcher's entries, this cluster's marked current (empty for an app alone)."""
    served = served_list()
    if served is None:
        return []
    links = [
        ClusterLink(
            c.name,
            served.href(c),
            c.name == served.this,
            c.url is not None and not c.proxied,
            c.proxied,
        )
        for c in served.clusters
    ]
    outer = proxied_from()
    if outer is not None:  # served through another console: a way back to its clusters
        links.append(ClusterLink("other clusters", outer, False, False, True))
    return links


def proxied_from() -> str | None:
    """The root of the console that serves this request through itself (web/proxied.py
    believed its headers), else None."""
    from web.proxied import PROXIED_ENVIRON

    mount = request.environ.get(PROXIED_ENVIRON)
    if mount is None:
        return None
    return str(mount).rstrip("/").rpartition(MOUNT + "/")[0] + "/"


def node_href(node: Any) -> str | None:
    """Where a node of the replication graph (engine GraphNode) links: the served
    cluster's pages, another console's address, or nowhere (this cluster, or one that is
    not served here)."""
    if node.this:
        return None
    served = served_list()
    if node.remote:
        through = served.by_url(node.address) if served is not None else None
        return served.href(through) if served and through else f"{node.address}/"
    if served is None:
        return None
    for cluster in served.clusters:
        if (
            cluster.local
            and cluster.cluster_id is not None
            and cluster.cluster_id == node.cluster_id
        ):
            return served.href(cluster)
    return None


def link_href(target: str, endpoint: str, **values: Any) -> str | None:
    """The page `endpoint` (with `values`) in the cluster at a link's `target`: in this
    console when it serves that directory, on another console's address (the same app, so
    the same routes), or None."""
    path = url_for(endpoint, **values)[len(request.script_root) :]
    served = served_list()
    if is_url(target):
        through = served.by_url(target) if served is not None else None
        return served.href(through).rstrip("/") + path if served and through else target + path
    if served is None:
        return None
    for cluster in served.clusters:
        if cluster.path == target:
            return served.href(cluster).rstrip("/") + path
    return None


def init_app(app: Flask) -> None:
    app.add_template_global(cluster_links)
    app.add_template_global(node_href)
    app.add_template_global(link_href)


__all__ = [
    "MOUNT",
    "ClusterLink",
    "Console",
    "ServedList",
    "cluster_links",
    "cookie_name",
    "link_href",
    "node_href",
    "proxied_from",
]
