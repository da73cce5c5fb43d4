"""`bootstrap_servers` -> the cluster directory, and the one `Cluster` per directory that
all facade clients of a process share.

A Partitionlet cluster is a directory, not a network address: it is named by a `file:` URL
in `bootstrap_servers`, else (broker addresses only, kafka-python's default included) by
`PLET_CLUSTER`. Sharing one opened `Cluster` per directory keeps one set of catalog and
volume connections however many clients a program makes; the last client to close
closes it.
"""

from __future__ import annotations

import os
import threading
from typing import Any
from urllib.parse import unquote, urlparse

from engine import errors as engine_errors
from engine.cluster import Cluster
from engine.kafka.errors import KafkaConfigurationError, NoBrokersAvailable

ENV_CLUSTER = "PLET_CLUSTER"

_clusters: dict[str, list[Any]] = {}  # real path -> [Cluster, number of clients]
_clusters_lock = threading.Lock()


def _servers(bootstrap_servers: Any) -> list[str]:
    if isinstance(bootstrap_servers, str):
        entries = bootstrap_servers.split(",")
    elif isinstance(bootstrap_servers, list | tuple | set | frozenset):
        entries = []
        for entry in bootstrap_servers:
            if not isinstance(entry, str):
                raise KafkaConfigurationError(
                    f"bootstrap_servers entries must be strings, got {entry!r}"
                )
            entries.extend(entry.split(","))
    else:
        raise KafkaConfigurationError(
            f"bootstrap_servers must be a string or a list of strings, got {bootstrap_servers!r}"
        )
    return [e.strip() for e in entries if e.strip()]


def _file_url_path(url: str) -> str:
    """'file:///abs/dir' -> '/abs/dir'; 'file:rel/dir' -> 'rel/dir'."""
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise KafkaConfigurationError(
            f"bootstrap server {url!r} names host {parsed.netloc!r}: write "
            "'file:///absolute/path/to/cluster' (three slashes) or 'file:relative/path'"
        )
    path = unquote(parsed.path)
    if not path:
        raise KafkaConfigurationError(f"bootstrap server {url!r} names no directory")
    return path


def cluster_path(bootstrap_servers: Any = "localhost") -> str:
    """The cluster directory named by `bootstrap_servers`, else by `PLET_CLUSTER`."""
    servers = _servers(bootstrap_servers)
    paths = {_file_url_path(s) for s in servers if s.lower().startswith("file:")}
    if len(paths) > 1:
        raise KafkaConfigurationError(
            f"bootstrap_servers names several clusters ({', '.join(sorted(paths))}); a client "
            "works on one"
        )
    if paths:
        return paths.pop()
    env = os.environ.get(ENV_CLUSTER, "").strip()
    if env:
        return _file_url_path(env) if env.lower().startswith("file:") else env
    raise NoBrokersAvailable(
        f"bootstrap_servers={bootstrap_servers!r} names no Partitionlet cluster: pass "
        f"bootstrap_servers='file:///path/to/cluster' or set {ENV_CLUSTER}=/path/to/cluster"
    )


def acquire(bootstrap_servers: Any) -> tuple[str, Cluster]:
    """(key, the shared Cluster) for a new client; give both to `release` when it closes.
    A directory that does not exist raises `NoBrokersAvailable`: a typo must not create
    an empty cluster."""
    path = cluster_path(bootstrap_servers)
    if not os.path.isdir(path):
        raise NoBrokersAvailable(
            f"no Partitionlet cluster at {path}: the directory does not exist (create it "
            f"with `plet init --cluster {path}` or engine.Cluster.open)"
        )
    key = os.path.realpath(path)
    with _clusters_lock:
        entry = _clusters.get(key)
        if entry is None or entry[0].closed:
            try:
                cluster = Cluster.open(key)
            except engine_errors.PartitionletError as exc:
                raise NoBrokersAvailable(f"cannot open the cluster at {path}: {exc}") from exc
            entry = _clusters[key] = [cluster, 0]
        entry[1] += 1
        return key, entry[0]


def release(key: str, cluster: Cluster) -> None:
    """One client fewer on `cluster`; the last one closes it."""
    with _clusters_lock:
        entry = _clusters.get(key)
        if entry is None or entry[0] is not cluster:
            return  # the shared cluster was closed under its clients and opened anew
        entry[1] -= 1
        if entry[1] <= 0:
            del _clusters[key]
            entry[0].close()
