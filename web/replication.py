"""The replication page: the graph of clusters and links around this cluster, drawn as
SVG on the server, with a banner for conflicts and broken links, the table of this
cluster's links (pause, resume, remove) and a form to add one.

The graph is the engine's walk (engine.replication.graph.walk: this cluster's links
measured, the clusters reached along links read as their catalogs recorded them, upstream
sources shown but never opened); this page lays it out (web/graph.py) and draws it.
Adding a link is for cluster administrators (engine.replication.check_may_add_link); the
others see why the form is not there. Administrators also list and revoke the replication
tokens this cluster issued.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, redirect, request, url_for

from engine import Cluster, errors, names
from engine.replication import (
    GraphLink,
    GraphNode,
    LinkState,
    ReplicaInfo,
    UpstreamInfo,
    check_may_add_link,
    normalize_target,
    walk,
)
from web import graph as layout
from web.pages import cluster, render, wants_partial

replication = Blueprint("replication", __name__)

REFRESH_S = 5
LINK_CHARTS = 12  # links charted on the page (each chart is a request of its own)
PROBLEMS = (LinkState.CONFLICT, LinkState.BROKEN)


@dataclass
class Edge:
    """The links from one cluster to another, drawn as one edge."""

    source: str  # node keys
    target: str
    links: list[GraphLink]
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
    nodes: list[GraphNode]
    edges: list[Edge]
    layout: layout.GraphLayout
    own: list[ReplicaInfo]
    upstreams: list[UpstreamInfo]
    problems: list[tuple[GraphLink, GraphNode, GraphNode]]  # broken and conflicting, worst first

    def node(self, key: str) -> GraphNode:
        return next(n for n in self.nodes if n.key == key)


def build_graph(c: Cluster) -> ReplicationGraph:
    """The engine's graph around this cluster, with its layout and its problems."""
    walked = walk(c)
    nodes = {n.key: n for n in walked.nodes}
    pairs: dict[tuple[str, str], list[GraphLink]] = {}
    for link in walked.links:
        pairs.setdefault((link.source, link.target), []).append(link)
    geometry = layout.layout_graph([n.key for n in walked.nodes], list(pairs))
    edges = [
        Edge(s, t, pairs[(s, t)], geometry.edges[(s, t)])
        for s, t in pairs
        if (s, t) in geometry.edges
    ]
    problems = [
        (link, nodes[link.source], nodes[link.target])
        for link in walked.links
        if link.state in PROBLEMS
    ]
    problems.sort(key=lambda p: (p[0].state != LinkState.CONFLICT, not p[0].measured))
    return ReplicationGraph(walked.nodes, edges, geometry, walked.own, walked.upstreams, problems)


# --- views ---------------------------------------------------------------------------------


def _live_context() -> dict[str, Any]:
    c = cluster()
    return {
        "graph": build_graph(c),
        "refresh_s": REFRESH_S,
        # Adding a link reaches outside the cluster: administrators only (the engine
        # checks it too); the others see why there is no form.
        "may_add_links": c.is_administrator,
        "link_charts": LINK_CHARTS,
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
        check_may_add_link(c)
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
