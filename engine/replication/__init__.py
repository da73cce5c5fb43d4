"""Replication: copying streams to other clusters, with offsets and origins preserved.

A link goes from a stream of this cluster (the source) to a stream of another cluster (its
target, or replica). Links live in the source's catalog (`replicas`); the target records
its upstreams (`upstreams`). A `Replicator` moves, for every link out of its cluster, every
topic with its partition count, every batch exactly as stored (key, value, headers,
timestamps, timestamp type, offsets and origin) and the groups' committed offsets.

What a link has moved is not stored anywhere: it is the target partition's log end offset,
which lives in the target volume that holds the partition's active partitionlet and moves
only in the transaction that appends there (DESIGN, "one fact, one file"). So a replicator
killed at any moment resumes where the target says it stopped, and a batch that was applied
before it died is recognised when it comes again:

- a batch is read from the source starting at the target's log end offset, and appended at
  its own base offset with `Volume.append_replicated`, which compares, inside the target
  volume's write transaction, the batch with what the target holds at that offset: the same
  offsets and origin mean "applied already" (a retry, or a second route through a cycle),
  anything else is a conflict, and nothing is overwritten;
- every batch keeps the uuid of the cluster it was first written in (its `origin`); a batch
  whose origin is the target is never sent to it;
- before copying, the last batch both sides hold (at offset min(source end, target end) - 1)
  is compared; if the two differ, the partition was written in both clusters before they
  synced: the link goes to state `conflict`, naming topic, partition and offset, and that
  partition is left alone (both sides untouched) until the user resolves it and calls
  `resume_replica` (docs/REPLICATION.md).

Since every copy holds each message at the same offset and a target that has an offset
already is never sent it again, a message moves at most once into each other cluster, so
at most (clusters - 1) times whatever the graph, cycles included.

Transport: the replicator talks to a target through `Target` (a small interface keyed by
names, not ids, so that it can be carried over HTTP). `DirectoryTarget` opens another
cluster directory in this process; `engine.replication.http.HttpTarget` talks to the
`/api/v1/replication/` endpoints of the target's `plet web` with a per-link token.

Modules, lowest first (each imports only those above it, and `engine.cluster`):

- protocol.py   `Target`, `ApplyResult`, `check_replica_batch`: what a target must do
                and what a batch from another cluster must be;
- reading.py    a partition's stored batches as replication sends and compares them;
- directory.py  `DirectoryTarget`, a target cluster directory in this process;
- http.py       the same `Target` over HTTP: `HttpTarget` (client), `ReplicationService`
                (server half, run by `plet web`), replication tokens;
- targets.py    naming a target (`normalize_target`) and opening its transport;
- status.py     `LinkState`, `ReplicaInfo`, `UpstreamInfo`, a link's state and lag, the
                listings (`replicas`, `upstreams`, `links`, `upstream_links`);
- replicator.py `Replicator`;
- admin.py      adding, pausing, resuming and removing links;
- graph.py      the replication graph around a cluster or a stream (`walk`), which the web
                page and the terminal console draw.

`engine.cluster` does not import this package (this package opens clusters); the
replication methods of `Cluster` forward to the hooks registered below.
"""

from __future__ import annotations

from engine.cluster import register_replication
from engine.replication import http
from engine.replication.admin import (
    ADD_LINK_DENIED,
    add_replica,
    check_may_add_link,
    pause_replica,
    remove_replica,
    resume_replica,
)
from engine.replication.directory import DirectoryTarget
from engine.replication.graph import GraphLink, GraphNode, ReplicationGraph, walk
from engine.replication.protocol import ApplyResult, Target, check_replica_batch
from engine.replication.replicator import DEFAULT_MAX_BATCHES, Replicator
from engine.replication.status import (
    STATES,
    LinkState,
    ReplicaInfo,
    UpstreamInfo,
    links,
    replicas,
    upstream_links,
    upstreams,
)
from engine.replication.targets import normalize_target, open_target, split_target
from engine.storage.volume import ReplicaBatch


class _ClusterHooks:
    """The replication methods of `Cluster` (engine.cluster.ReplicationHooks)."""

    add_replica = staticmethod(add_replica)
    replicas = staticmethod(replicas)
    upstreams = staticmethod(upstreams)
    pause_replica = staticmethod(pause_replica)
    resume_replica = staticmethod(resume_replica)
    remove_replica = staticmethod(remove_replica)
    create_token = staticmethod(http.create_token)
    tokens = staticmethod(http.tokens)
    revoke_token = staticmethod(http.revoke_token)


register_replication(_ClusterHooks())

__all__ = [
    "ADD_LINK_DENIED",
    "DEFAULT_MAX_BATCHES",
    "STATES",
    "ApplyResult",
    "DirectoryTarget",
    "GraphLink",
    "GraphNode",
    "LinkState",
    "ReplicaBatch",
    "ReplicaInfo",
    "ReplicationGraph",
    "Replicator",
    "Target",
    "UpstreamInfo",
    "add_replica",
    "check_may_add_link",
    "check_replica_batch",
    "links",
    "normalize_target",
    "open_target",
    "pause_replica",
    "remove_replica",
    "replicas",
    "resume_replica",
    "split_target",
    "upstream_links",
    "upstreams",
    "walk",
]
