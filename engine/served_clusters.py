"""Which clusters a console shows: `plet web` and `plet tui` list the same ones, in order:

1. the main cluster (`--cluster`);
2. the clusters named with `--also PATH` (each a cluster directory), then those of a
   clusters file (`--clusters FILE`, TOML, below);
3. unless turned off (`--no-linked`), the clusters the main one replicates to, directly or
   along their own links (engine.replication.walk, nothing measured): a directory this
   machine can open is served; a target that is the http(s) address of another `plet web`
   is served through that console (below) when the main cluster's own link to it holds
   its token and the address is https (or plain http on loopback), else it is a plain link
   to that console. Upstreams (clusters that replicate *into* the main one) are not
   followed: their address is whatever the source said it was; name them.

A clusters file lists clusters by name, each with a `path` (a directory, relative to the
file) or a `url` (another console):

    [[cluster]]
    name = "dc2"
    path = "../dc2"

    [[cluster]]
    name = "eu"
    url = "https://eu.example.com:5000"
    token_file = "eu.token"       # or token = "plr_..."; without one: a plain link
    ca_file = "private-ca.pem"    # optional: the CA that signed eu's certificate

A remote console with a token is served by this one under `/c/<name>/` (web/remote.py, a
reverse proxy to that one address): the token is the remote cluster's own, a replication
token it issued (`plet replica token STREAM`) or an API token of one of its administrators,
and proves to the remote console that this console is a proxy it may trust with the
`X-Forwarded-*` headers (web/proxied.py). It signs in no user: each user logs in to the
remote cluster with their own account there, on its login page under `/c/<name>/`. The
address must be https, its certificate verified (against `ca_file` when given, else the
system's CAs); plain http only on loopback or with `insecure = true` (the token and every
password then cross the network in clear); `insecure` never turns certificate checks off.
The url is the remote console's root (no path). `plet tui` shows such a cluster read-only
through that console's JSON API, with the user's own API token of it from the environment
(console/remote.py), never with this `token`.

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
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from engine.cluster import CATALOG_FILE, Cluster
from engine.errors import InvalidArgument, NotACluster, UnknownStream
from engine.replication import normalize_target, walk
from engine.replication.graph import UPSTREAM, ReplicationGraph
from engine.replication.targets import is_url
from engine.wire.auth import is_loopback as is_loopback_host

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_TOKEN = re.compile(r"[!-~]{1,4096}")  # sent in a header: printable ASCII only


@dataclass(frozen=True)
class ServedCluster:
    """One cluster of a console's list: a local directory (`path`) or a remote console
    (`url`): served through that console when `proxied` (it has a `token`), else a link."""

    name: str  # unique in the list, safe in a URL path
    path: str | None = None  # absolute cluster directory
    url: str | None = None  # another console's address
    cluster_id: str | None = None
    main: bool = False
    linked: bool = False  # found along replication links, not named
    # a remote console's token (never shown: kept out of repr), its CA, plain http allowed
    token: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    insecure: bool = False

    @property
    def local(self) -> bool:
        return self.path is not None

    @property
    def proxied(self) -> bool:
        """A remote console this console serves under `/c/<name>/` (web/remote.py)."""
        return self.url is not None and self.token is not None


def is_loopback(url: str) -> bool:
    """Whether an http(s) address names this machine (`localhost` or a loopback IP)."""
    return is_loopback_host(urlsplit(url).hostname or "")


def _proxy_refusal(url: str, insecure: bool) -> str | None:
    """Why a remote console at `url` cannot be served through this one (None: it can)."""
    parts = urlsplit(url)
    if parts.path not in ("", "/") or parts.query:
        return "the url of a console served here is its root, without a path"
    if parts.scheme == "http" and not insecure and not is_loopback(url):
        return (
            "plain http would carry the token and every password in clear: use https, or "
            "set insecure = true"
        )
    return None


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
        if not isinstance(entry, dict) or set(entry) - _KEYS:
            raise InvalidArgument(
                f"{where}: takes name, and path or url (with token or token_file, ca_file, "
                "insecure)"
            )
        name, place, url = entry.get("name"), entry.get("path"), entry.get("url")
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
            raise InvalidArgument(f"{where}: name must be 1-64 characters of A-Z a-z 0-9 . _ -")
        if (place is None) == (url is None):
            raise InvalidArgument(f"{where} ({name}): give either path or url")
        if url is not None:
            if not isinstance(url, str) or not is_url(url):
                raise InvalidArgument(f"{where} ({name}): url must be an http(s) address")
            found.append(_remote_entry(file, f"{where} ({name})", name, url, entry))
        else:
            if set(entry) & _REMOTE_KEYS:
                raise InvalidArgument(
                    f"{where} ({name}): {', '.join(sorted(set(entry) & _REMOTE_KEYS))} "
                    "go with a url only"
                )
            if not isinstance(place, str) or not place:
                raise InvalidArgument(f"{where} ({name}): path must be a directory")
            directory = (file.parent / Path(place).expanduser()).resolve()
            found.append(ServedCluster(name, path=str(directory)))
    return found


_REMOTE_KEYS = {"token", "token_file", "ca_file", "insecure"}
_KEYS = {"name", "path", "url"} | _REMOTE_KEYS


def _remote_entry(
    file: Path, where: str, name: str, url: str, entry: dict[str, object]
) -> ServedCluster:
    """A clusters file's remote console: a link, or with a token a console served here."""
    token, token_file = entry.get("token"), entry.get("token_file")
    ca_file, insecure = entry.get("ca_file"), entry.get("insecure", False)
    if token is not None and token_file is not None:
        raise InvalidArgument(f"{where}: give token or token_file, not both")
    if not isinstance(insecure, bool):
        raise InvalidArgument(f"{where}: insecure is true or false")
    if token_file is not None:
        if not isinstance(token_file, str) or not token_file:
            raise InvalidArgument(f"{where}: token_file must be a file name")
        try:
            token = (file.parent / Path(token_file).expanduser()).read_text("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"{where}: token_file: {exc}") from None
    if token is not None and (not isinstance(token, str) or not _TOKEN.fullmatch(token.strip())):
        raise InvalidArgument(f"{where}: a token is 1-4096 printable characters, no spaces")
    if token is None and (ca_file is not None or insecure):
        raise InvalidArgument(f"{where}: ca_file and insecure need a token (else: a link)")
    if ca_file is not None:
        if not isinstance(ca_file, str) or not ca_file:
            raise InvalidArgument(f"{where}: ca_file must be a file name")
        ca_file = str((file.parent / Path(ca_file).expanduser()).resolve())
        if not Path(ca_file).is_file():
            raise InvalidArgument(f"{where}: no ca_file at {ca_file}")
    address = normalize_target(url)
    if token is None:
        return ServedCluster(name, url=address)
    refusal = _proxy_refusal(address, insecure)
    if refusal is not None:
        raise InvalidArgument(f"{where}: {refusal}")
    return ServedCluster(name, url=address, token=token.strip(), ca_file=ca_file, insecure=insecure)


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
        tokens = _link_tokens(cluster, graph) if graph is not None else {}
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
            remote = ServedCluster(node.name, url=node.address, linked=True)
            token = tokens.get(node.address)
            if token is not None and _proxy_refusal(node.address, False) is None:
                remote = replace(remote, token=token)
            listing.add(remote, None)
        elif node.reachable and node.cluster_id is not None:
            listing.add(ServedCluster(node.name, path=node.address, linked=True), node.cluster_id)
    return listing.clusters


def _link_tokens(cluster: Cluster, graph: ReplicationGraph) -> dict[str, str]:
    """The tokens the main cluster's own links hold, by http(s) target: each was issued by
    that target's cluster, so it proves this console to that target's console too."""
    this = graph.nodes[0].key
    address_of = {node.key: node.address for node in graph.nodes}  # a key may be an id
    found: dict[str, str] = {}
    for link in graph.links:
        address = address_of.get(link.target, link.target)
        if link.source != this or link.state == UPSTREAM or not is_url(address):
            continue
        if address in found:
            continue
        try:
            stream_id = cluster.catalog.stream(link.stream).id
        except UnknownStream:
            continue  # removed since the walk
        token = cluster.catalog.replica_token(stream_id, address)
        if token is not None and _TOKEN.fullmatch(token):
            found[address] = token
    return found


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
        self.clusters.append(replace(entry, name=name, cluster_id=cluster_id))


def _open(path: str | os.PathLike[str]) -> Cluster:
    """The cluster at `path`, refusing a directory that holds none (never creating one)."""
    if not (Path(path) / CATALOG_FILE).is_file():
        raise NotACluster(f"no cluster at {os.fspath(path)!r}")
    return Cluster.open(path)


def by_name(clusters: Sequence[ServedCluster], name: str) -> ServedCluster | None:
    return next((c for c in clusters if c.name == name), None)


__all__ = [
    "ServedCluster",
    "by_name",
    "is_loopback",
    "read_clusters_file",
    "served_clusters",
    "url_name",
]
