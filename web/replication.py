"""The replication page: the graph of clusters and links around this cluster, drawn as
SVG on the server, with a banner for conflicts and broken links, the table of this
cluster's links (pause, resume, remove) and a form to add one.

The graph holds this cluster, the targets of its links and the sources of its upstreams.
Cluster directories reached along links are opened briefly to read their own links as
their catalogs record them (nothing measured, nothing sent over a network), so a ring
A->B->C->A shows whole from A; only this cluster's own links have their lag measured.
An upstream's source is only shown: its address is what the source said it is.
Adding a link is for cluster administrators (engine.replication.check_may_add_link); the
others see why the form is not there. Administrators also list and revoke the replication
tokens this cluster issued.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, redirect, request, url_for

from engine import Cluster, errors, names
from engine import replication as engine_replication
from engine.cluster import CATALOG_FILE
from engine.replication import ReplicaInfo, UpstreamInfo, normalize_target
from web import graph as layout
from web.pages import cluster, render, wants_partial

replication = Blueprint("replication", __name__)

# How many other clusters the page opens to follow links (a bound on its cost).
MAX_CLUSTERS = 12
REFRESH_S = 5


@dataclass
class Node:
    key: str  # the cluster id, or the address when the cluster could not be asked
    name: str
    address: str
    cluster_id: str | None = None
    this: bool = False
    reachable: bool = True
    reason: str | None = None
    remote: bool = False  # an http(s) address: shown, not opened

    @property
    def short_id(self) -> str:
        return self.cluster_id[:8] if self.cluster_id else ""


@dataclass
class Link:
    """A link between two clusters of the graph; `measured` when its lag was measured now
    (this cluster's links), otherwise as the source's catalog recorded it."""

    source: str  # node keys
    target: str
    stream: str
    target_stream: str
    state: str
    lag_messages: int = 0
    lag_seconds: float = 0.0
    error: str | None = None
    conflict: list[dict[str, Any]] = field(default_factory=list)
    measured: bool = False


@dataclass
class Edge:
    source: str
    target: str
    links: list[Link]
    geometry: layout.EdgeGeometry

    @property
    def state(self) -> str:
        return layout.worst_state([link.state for link in self.links])

    @property
    def lag_messages(self) -> int:
        return sum(link.lag_messages for link in self.links if link.measured)

    @property
    def lag_seconds(self) -> float:
        return max((link.lag_seconds for link in self.links if link.measured), default=0.0)

    @property
    def measured(self) -> bool:
        return any(link.measured for link in self.links)

    @property
    def streams(self) -> list[str]:
        return sorted({link.stream for link in self.links})


@dataclass
class ReplicationGraph:
    nodes: list[Node]
    edges: list[Edge]
    layout: layout.GraphLayout
    own: list[ReplicaInfo]
    upstreams: list[UpstreamInfo]
    problems: list[tuple[Link, Node, Node]]  # broken and conflicting links, worst first

    def node(self, key: str) -> Node:
        return next(n for n in self.nodes if n.key == key)


def _is_url(address: str) -> bool:
    return address.lower().startswith(("http://", "https://"))


def _address_name(address: str) -> str:
    if _is_url(address):
        return urlsplit(address).netloc or address
    return Path(address).name or address


def build_graph(c: Cluster) -> ReplicationGraph:
    """This cluster's links (measured), its upstreams, and the links of the cluster
    directories around it (as recorded), as nodes, edges and their layout."""
    here = str(c.path.resolve())
    this = Node(c.id, c.name, here, c.id, this=True)
    nodes: dict[str, Node] = {c.id: this}
    key_of: dict[str, str] = {here: c.id}  # address -> node key
    own = engine_replication.links(c)
    ups = engine_replication.upstream_links(c)
    links: list[Link] = [
        Link(
            c.id,
            i.target,
            i.stream,
            i.target_stream,
            i.state,
            i.lag_messages,
            i.lag_seconds,
            i.error,
            list(i.conflict),
            True,
        )
        for i in own
    ]
    known_ids: dict[str, str] = {}  # address -> cluster id, as links recorded it
    queue: deque[str] = deque()
    for i in own:
        if i.target_id:
            known_ids.setdefault(i.target, i.target_id)
        queue.append(i.target)
    for u in ups:
        # An upstream's source address is whatever the source said it is (over HTTP,
        # whoever holds a token): it is shown, never opened on this host. Clusters are
        # followed along links only, which an administrator added.
        known_ids.setdefault(u.source, u.source_id)
    seen = {here}
    opened = 0
    while queue:
        address = queue.popleft()
        if address in seen:
            continue
        seen.add(address)
        node = Node(
            known_ids.get(address, address),
            _address_name(address),
            address,
            known_ids.get(address),
        )
        if _is_url(address):
            node.remote = True
        elif opened >= MAX_CLUSTERS:
            node.reason = "not opened: too many clusters to follow"
        else:
            opened += 1
            found = _peek(address, node)
            if found is not None and node.key not in nodes:
                for i in found[0]:
                    links.append(
                        Link(
                            node.key,
                            i.target,
                            i.stream,
                            i.target_stream,
                            i.state,
                            error=i.error,
                            conflict=list(i.conflict),
                        )
                    )
                    if i.target_id:
                        known_ids.setdefault(i.target, i.target_id)
                    queue.append(i.target)
                for u in found[1]:
                    known_ids.setdefault(u.source, u.source_id)
        if node.key in nodes:  # the same cluster under a second address
            key_of[address] = node.key
            continue
        nodes[node.key] = node
        key_of[address] = node.key
    # Targets are addresses until here: name them by node key.
    for link in links:
        link.target = key_of.get(link.target, known_ids.get(link.target, link.target))
        if link.target not in nodes:
            nodes[link.target] = Node(link.target, _address_name(link.target), link.target)
    # Upstreams whose source could not be asked still show, as an edge into this cluster.
    for u in ups:
        source = key_of.get(u.source, u.source_id)
        if not any(lk.source == source and lk.target == c.id for lk in links):
            if source not in nodes:
                nodes[source] = Node(source, _address_name(u.source), u.source, u.source_id)
            links.append(Link(source, c.id, u.source_stream, u.stream, "upstream"))
    order = [this] + sorted(
        (n for n in nodes.values() if not n.this), key=lambda n: (n.name, n.key)
    )
    pairs: dict[tuple[str, str], list[Link]] = {}
    for link in links:
        pairs.setdefault((link.source, link.target), []).append(link)
    geometry = layout.layout_graph([n.key for n in order], list(pairs))
    edges = [
        Edge(s, t, pairs[(s, t)], geometry.edges[(s, t)])
        for s, t in pairs
        if (s, t) in geometry.edges
    ]
    problems = [
        (link, nodes[link.source], nodes[link.target])
        for link in links
        if link.state in ("conflict", "broken")
    ]
    problems.sort(key=lambda p: (p[0].state != "conflict", not p[0].measured))
    return ReplicationGraph(order, edges, geometry, own, ups, problems)


def _peek(address: str, node: Node) -> tuple[list[ReplicaInfo], list[UpstreamInfo]] | None:
    """Open the cluster directory at `address` just long enough to read its links as its
    catalog records them; a directory that is missing or not a cluster is a broken node
    (never created: the catalog file must be there before it is opened)."""
    if not (Path(address) / CATALOG_FILE).is_file():
        node.reachable = False
        node.reason = f"no cluster at {address}"
        return None
    try:
        other = Cluster.open(address)
    except Exception as exc:  # noqa: BLE001 - whatever is wrong there, the page still shows
        node.reachable = False
        node.reason = f"{type(exc).__name__}: {exc}"
        return None
    try:
        node.key = node.cluster_id = other.id
        node.name = other.name
        return engine_replication.links(other, measure=False), engine_replication.upstream_links(
            other
        )
    except Exception as exc:  # noqa: BLE001
        node.reachable = False
        node.reason = f"{type(exc).__name__}: {exc}"
        return None
    finally:
        other.close()


# --- views ---------------------------------------------------------------------------------


def _live_context() -> dict[str, Any]:
    c = cluster()
    return {
        "graph": build_graph(c),
        "refresh_s": REFRESH_S,
        # Adding a link reaches outside the cluster: administrators only (the engine
        # checks it too); the others see why there is no form.
        "may_add_links": c.is_administrator,
        **_tokens_context(),
    }


def _tokens_context() -> dict[str, Any]:
    """The replication tokens this user may manage (all of them for an administrator;
    a stream's for whoever administers it), never the tokens themselves."""
    c = cluster()
    tokens = c.replication_tokens()
    return {"tokens": tokens, "show_tokens": c.is_administrator or bool(tokens)}


@replication.route("/replication")
def index():
    return render(
        "replication/index.html",
        "replication/_live.html",
        form={},
        form_errors={},
        **_live_context(),
    )


@replication.route("/replication/live")
def live():
    return render(
        "replication/index.html",
        "replication/_live.html",
        form={},
        form_errors={},
        **_live_context(),
    )


@replication.route("/replication/tokens/revoke", methods=["POST"])
def revoke_token():
    """Revoke a replication token by its id; the engine decides who may (errors answer
    400, 403 or 404 through web/errors.py)."""
    token_id = request.form.get("token_id", "").strip()
    cluster().revoke_replication_token(token_id)
    if not wants_partial():
        return redirect(url_for("replication.index"))
    return render(
        "replication/index.html",
        "replication/_tokens.html",
        revoked=token_id,
        **_tokens_context(),
    )


def _link_action(action) -> Any:
    stream = request.form.get("stream", "")
    target = request.form.get("target", "")
    action(stream, target)
    if not wants_partial():
        return redirect(url_for("replication.index"))  # a plain form post: back to the page
    return live()


@replication.route("/replication/pause", methods=["POST"])
def pause():
    return _link_action(cluster().pause_replica)


@replication.route("/replication/resume", methods=["POST"])
def resume():
    return _link_action(cluster().resume_replica)


@replication.route("/replication/remove", methods=["POST"])
def remove():
    return _link_action(cluster().remove_replica)


@replication.route("/replication/add", methods=["POST"])
def add():
    """Add a link; bad input comes back next to its field and adds nothing."""
    form = {
        "stream": request.form.get("stream", "").strip(),
        "target": request.form.get("target", "").strip(),
        "target_stream": request.form.get("target_stream", "").strip(),
        "paused": request.form.get("paused") in ("on", "1", "true", "yes"),
    }
    form_errors, status = _add_link(form)
    html = render(
        "replication/index.html",
        "replication/_add.html",
        form={} if not form_errors else form,
        form_errors=form_errors,
        added=None if form_errors else form,
        **_live_context(),
    )
    headers = {} if form_errors else {"HX-Trigger": "replication-changed"}
    if form_errors and request.headers.get("HX-Request"):
        status = 200  # htmx swaps only 2xx answers: the form with its errors must show
    return html, status, headers


def _add_link(form: dict[str, Any]) -> tuple[dict[str, str], int]:
    """The problems of the form by field (empty when the link was added) and the status."""
    c = cluster()
    try:
        # First, before the target is looked at: the refusal is the same for every target,
        # so it tells nothing about which paths or hosts exist.
        engine_replication.check_may_add_link(c)
    except errors.AccessDenied as exc:
        return {"form": str(exc)}, 403
    problems: dict[str, str] = {}
    try:
        names.validate_stream_path(form["stream"])
        c.stream(form["stream"])
    except (errors.InvalidName, errors.NotFound) as exc:
        problems["stream"] = str(exc) if form["stream"] else "Give the stream to replicate."
    if not form["target"]:
        problems["target"] = "Give a cluster directory or an http(s):// address."
    else:
        try:
            normalize_target(form["target"])
        except (errors.InvalidArgument, OSError) as exc:
            problems["target"] = str(exc)
    if form["target_stream"]:
        try:
            names.validate_stream_path(form["target_stream"])
        except errors.InvalidName as exc:
            problems["target_stream"] = str(exc)
    if problems:
        return problems, 400
    try:
        c.add_replica(
            form["stream"],
            os.path.expanduser(form["target"]),
            form["target_stream"] or None,
            paused=form["paused"],
        )
    except errors.AccessDenied as exc:
        return {"form": str(exc)}, 403
    except (errors.PartitionletError, OSError) as exc:
        text = f"{exc}"
        if form["target_stream"] and "remove that link first" in text:
            return {"target_stream": text}, 400
        return {"target": text}, 400
    return {}, 200
