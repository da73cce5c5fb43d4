"""Which clusters a console shows: `plet web` and `plet tui` list the same ones, in order:

1. the main cluster (`--cluster`);
2. the clusters named with `--also PATH` (each a cluster directory), then those of a
   clusters file (`--clusters FILE`, TOML, below);
3. unless turned off (`--no-linked`), the clusters the main one replicates to, directly or
   along their own links (engine.replication.walk, nothing measured): a directory this
   machine can open is served; a target that is the http(s) address of another `plet web`
   becomes a plain link to that console. Upstreams (clusters that replicate *into* the main
   one) are not followed: their address is whatever the source said it was; name them.

A clusters file lists clusters by name, each with a `path` (a directory, relative to the
file) or a `url` (another console, shown as a link):

    [[cluster]]
    name = "dc2"
    path = "../dc2"

    [[cluster]]
    name = "eu"
    url = "https://eu.example.com:5000"

Each cluster appears once (by cluster id, or by address for a remote console). Its `name`
is the one in the file, else the cluster's own name, made safe for a URL
([A-Za-z0-9._-]) and unique in the list (a clash gets the cluster id's first 8 characters).
The list is read when the console starts; a link added later shows after a restart.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.cluster import CATALOG_FILE, Cluster
from engine.errors import InvalidArgument, NotACluster
from engine.replication import normalize_target, walk
from engine.replication.graph import UPSTREAM
from engine.replication.targets import is_url

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclass(frozen=True)
class ServedCluster:
    """One cluster of a console's list: a local directory (`path`) or a remote console
    (`url`, shown as a link, never opened)."""

    name: str  # unique in the list, safe in a URL path
    path: str | None = None  # absolute cluster directory
    url: str | None = None  # another console's address
    cluster_id: str | None = None
    main: bool = False
    linked: bool = False  # found along replication links, not named

    @property
    def local(self) -> bool:
        return self.path is not None


def url_name(text: str) -> str:
    """`text` as a cluster's name in a URL: runs of other characters become `-`."""
    name = _UNSAFE.sub("-", text).strip("-")[:64]
    return name if name not in ("", ".", "..") else "cluster"


def read_clusters_file(path: str | os.PathLike[str]) -> list[ServedCluster]:
    """The clusters a clusters file names (not yet opened: no id, names as written)."""
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidArgument(f"clusters file {file}: {exc}") from None
    entries = data.get("cluster", [])
    unknown = set(data) - {"cluster"}
    if unknown or not isinstance(entries, list):
        raise InvalidArgument(
            f"clusters file {file}: expected [[cluster]] tables only, found {sorted(unknown)}"
        )
    found = []
    for i, entry in enumerate(entries, 1):
        where = f"clusters file {file}, cluster {i}"
        if not isinstance(entry, dict) or set(entry) - {"name", "path", "url"}:
            raise InvalidArgument(f"{where}: takes name, and path or url")
        name, place, url = entry.get("name"), entry.get("path"), entry.get("url")
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
            raise InvalidArgument(f"{where}: name must be 1-64 characters of A-Z a-z 0-9 . _ -")
        if (place is None) == (url is None):
            raise InvalidArgument(f"{where} ({name}): give either path or url")
        if url is not None:
            if not isinstance(url, str) or not is_url(url):
                raise InvalidArgument(f"{where} ({name}): url must be an http(s) address")
            found.append(ServedCluster(name, url=normalize_target(url)))
        else:
            if not isinstance(place, str) or not place:
                raise InvalidArgument(f"{where} ({name}): path must be a directory")
            directory = (file.parent / Path(place).expanduser()).resolve()
            found.append(ServedCluster(name, path=str(directory)))
    return found


def served_clusters(
    main: str | os.PathLike[str],
    also: Iterable[str | os.PathLike[str]] = (),
    clusters_file: str | os.PathLike[str] | None = None,
    *,
    linked: bool = True,
) -> list[ServedCluster]:
    """The clusters a console started on `main` shows (see the module's docstring), the
    main one first. Every other named directory must hold a cluster (none is created)."""
    named = [ServedCluster("", path=str(Path(p).expanduser().resolve())) for p in also]
    if clusters_file is not None:
        named += read_clusters_file(clusters_file)
    listing = _Listing()
    with Cluster.open(main) as cluster:  # the caller's to check (plet web makes its admin)
        here = str(cluster.path.resolve())
        listing.add(ServedCluster(cluster.name, path=here, main=True), cluster.id)
        graph = walk(cluster, measure=False) if linked else None
    for entry in named:
        if entry.path is None:
            listing.add(entry, None)
            continue
        with _open(entry.path) as cluster:
            listing.add(ServedCluster(entry.name or cluster.name, path=entry.path), cluster.id)
    # Targets of links only: the walk also shows the sources of upstream records, unasked.
    targets = {lk.target for lk in graph.links if lk.state != UPSTREAM} if graph else set()
    for node in graph.nodes[1:] if graph is not None else ():
        if node.key not in targets:
            continue
        if node.remote:
            listing.add(ServedCluster(node.name, url=node.address, linked=True), None)
        elif node.reachable and node.cluster_id is not None:
            listing.add(ServedCluster(node.name, path=node.address, linked=True), node.cluster_id)
    return listing.clusters


class _Listing:
    """Clusters in order, each once, with unique URL names."""

    def __init__(self) -> None:
        self.clusters: list[ServedCluster] = []
        self._seen: set[str] = set()

    def add(self, entry: ServedCluster, cluster_id: str | None) -> None:
        key = cluster_id or entry.url or entry.path or ""
        if key in self._seen:
            return
        self._seen.add(key)
        name = url_name(entry.name)
        taken = {c.name for c in self.clusters}
        if name in taken:
            name = f"{name}-{(cluster_id or str(len(self.clusters) + 1))[:8]}"
        n = 2
        base = name
        while name in taken:  # a clash even with the id's prefix: number it
            name, n = f"{base}-{n}", n + 1
        self.clusters.append(
            ServedCluster(name, entry.path, entry.url, cluster_id, entry.main, entry.linked)
        )


def _open(path: str | os.PathLike[str]) -> Cluster:
    """The cluster at `path`, refusing a directory that holds none (never creating one)."""
    if not (Path(path) / CATALOG_FILE).is_file():
        raise NotACluster(f"no cluster at {os.fspath(path)!r}")
    return Cluster.open(path)


def by_name(clusters: Sequence[ServedCluster], name: str) -> ServedCluster | None:
    return next((c for c in clusters if c.name == name), None)


__all__ = ["ServedCluster", "by_name", "read_clusters_file", "served_clusters", "url_name"]
