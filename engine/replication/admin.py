"""Adding, pausing, resuming and removing links: what `Cluster.add_replica`,
`pause_replica`, `resume_replica` and `remove_replica` do, with who may do it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from engine import names
from engine.errors import AccessDenied, InvalidArgument, PartitionletError
from engine.replication.replicator import Replicator
from engine.replication.status import ReplicaInfo, find_link, replicas
from engine.replication.targets import is_url, open_target, split_target

if TYPE_CHECKING:
    from engine.cluster import Cluster

ADD_LINK_DENIED = (
    "only a cluster administrator may add a replica link: a link makes this cluster's "
    "server open another cluster directory or connect to another host. Ask an "
    "administrator to add it"
)


def check_may_add_link(cluster: Cluster) -> None:
    """`AccessDenied` unless the cluster's principal is a cluster administrator (DESIGN's
    security model: what reaches outside the cluster is an administrator's act)."""
    if not cluster.is_administrator:
        raise AccessDenied(f"{ADD_LINK_DENIED} (user {cluster.principal.user!r} is not one).")


def add_replica(
    cluster: Cluster,
    stream: str,
    target: str | os.PathLike[str],
    target_stream: str | None = None,
    paused: bool = False,
) -> ReplicaInfo:
    names.validate_stream_path(stream)
    target_stream = stream if target_stream is None else target_stream
    names.validate_stream_path(target_stream)
    catalog = cluster.catalog
    row = catalog.stream(stream)
    cluster.authorize(row, "copy_perm")
    # Before the target is even parsed: nothing is opened, resolved or sent, so the refusal
    # is the same whatever the target is, and says nothing about it.
    check_may_add_link(cluster)
    key, token = split_target(target)
    if token is None and is_url(key):
        # A link that exists already keeps its token (add_replica called again).
        token = catalog.replica_token(row.id, key)
    if not is_url(key) and Path(key) == cluster.path.resolve():
        raise InvalidArgument(
            f"a replica lives in another cluster: {key} is this cluster ({cluster.name})"
        )
    tgt = open_target(key, cluster.principal, token=token)
    try:
        if tgt.cluster_id == cluster.id:
            raise InvalidArgument(f"{key} is this cluster ({cluster.name}), not another one")
        if tgt.stream_policies(target_stream) is None:
            # MapR's autosetup: the replica gets the source's policies.
            tgt.create_stream(target_stream, row.policies, row.creator)
        else:
            tgt.check_admin(target_stream, cluster.principal.user, tuple(cluster.principal.groups))
        if not catalog.add_replica(row.id, key, target_stream, paused):
            existing = find_link(cluster, stream, key)
            if existing.target_stream != target_stream:
                raise InvalidArgument(
                    f"stream {stream} is replicated to {existing.target_stream} at {key} "
                    "already; remove that link first"
                )
        catalog.update_replica(row.id, key, target_id=tgt.cluster_id)
        if token is not None:
            catalog.set_replica_token(row.id, key, token)
        tgt.add_upstream(target_stream, str(cluster.path.resolve()), stream, cluster.id)
    finally:
        tgt.close()
    if not paused:
        with Replicator(cluster) as replicator:
            replicator.run_link(find_link(cluster, stream, key))
    for info in replicas(cluster, stream):
        if info.target == key:
            return info
    raise InvalidArgument(f"stream {stream} has no replica at {key}")


def pause_replica(cluster: Cluster, stream: str, target: str | os.PathLike[str]) -> None:
    link = find_link(cluster, stream, target)
    catalog = cluster.catalog
    cluster.authorize(catalog.stream_by_id(link.stream_id), "admin_perm")
    catalog.update_replica(link.stream_id, link.target, paused=1)


def resume_replica(cluster: Cluster, stream: str, target: str | os.PathLike[str]) -> None:
    """Resume a paused link; also clears a conflict (after the user resolved it) and the
    last error, so that the next run checks again."""
    link = find_link(cluster, stream, target)
    catalog = cluster.catalog
    row = catalog.stream_by_id(link.stream_id)
    cluster.authorize(row, "admin_perm")
    cluster.authorize(row, "copy_perm")
    catalog.update_replica(link.stream_id, link.target, paused=0, conflict=None, error=None)


def remove_replica(cluster: Cluster, stream: str, target: str | os.PathLike[str]) -> None:
    """Remove the link (the replica keeps what it received); the target forgets its
    upstream when it can be opened."""
    link = find_link(cluster, stream, target)
    catalog = cluster.catalog
    cluster.authorize(catalog.stream_by_id(link.stream_id), "admin_perm")
    token = catalog.replica_token(link.stream_id, link.target)
    catalog.remove_replica(link.stream_id, link.target)
    catalog.set_replica_token(link.stream_id, link.target, None)
    try:
        tgt = open_target(link.target, cluster.principal, token=token)
    except PartitionletError:
        return
    try:
        tgt.remove_upstream(link.target_stream, cluster.id, link.stream)
    finally:
        tgt.close()
