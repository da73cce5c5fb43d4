"""Another console's cluster, read through its JSON API (`/api/v1/`, docs/API.md): what
`plet tui` shows of a cluster this machine cannot open (a clusters-file `url`, or a link's
http(s) target), read-only.

The terminal acts as the owner of an API token of that cluster, the user's own: it is read
from the environment variable `PLET_API_TOKEN_<NAME>` (the cluster's name in the list,
upper case, other characters than letters and digits as `_`: `eu` -> `PLET_API_TOKEN_EU`),
never from the clusters file's `token` (that one proves a console to a console, and logs
nobody in). The address follows the clusters file's rules (engine.served_clusters): https
verified against the system's CAs or the entry's `ca_file`; plain http only on loopback or
with `insecure = true`. Calls block: run them in a worker.
"""

from __future__ import annotations

import json
import os
import re
import ssl
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import urllib3
from urllib3.exceptions import HTTPError

from engine.served_clusters import ServedCluster, is_loopback

TOKEN_VARIABLE = "PLET_API_TOKEN_{}"
TIMEOUT = urllib3.Timeout(connect=10.0, read=60.0)


class RemoteError(Exception):
    """The other console could not be asked, or refused: the message says which."""


def token_variable(cluster: ServedCluster) -> str:
    """The environment variable that holds the user's API token of `cluster`."""
    return TOKEN_VARIABLE.format(re.sub(r"[^A-Z0-9]", "_", cluster.name.upper()))


def readable(cluster: ServedCluster) -> bool:
    """Whether `plet tui` can show the remote `cluster`: its address allowed, a token set."""
    if cluster.url is None or not os.environ.get(token_variable(cluster)):
        return False
    return urlsplit(cluster.url).scheme == "https" or cluster.insecure or is_loopback(cluster.url)


class RemoteCluster:
    """A read-only view of the cluster at another console's `/api/v1/`. Thread-safe."""

    def __init__(self, cluster: ServedCluster) -> None:
        if not readable(cluster) or cluster.url is None:
            raise RemoteError(
                f"{cluster.name}: set {token_variable(cluster)} to an API token of that "
                "cluster (plet user token NAME there), on https or loopback"
            )
        self.name = cluster.name
        self.url = cluster.url
        self._token = os.environ[token_variable(cluster)].strip()
        parts = urlsplit(cluster.url)
        host, port = parts.hostname or "", parts.port
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=cluster.ca_file)
            self._pool: urllib3.HTTPConnectionPool = urllib3.HTTPSConnectionPool(
                host, port or 443, ssl_context=context, timeout=TIMEOUT, retries=False
            )
        else:
            self._pool = urllib3.HTTPConnectionPool(
                host, port or 80, timeout=TIMEOUT, retries=False
            )

    def close(self) -> None:
        self._pool.close()

    def get(self, path: str, **params: Any) -> Any:
        """The JSON answer of `GET /api/v1/<path>`; `RemoteError` with the reason."""
        target = "/api/v1/" + quote(path.lstrip("/"), safe="/:")
        query = {k: v for k, v in params.items() if v is not None}
        if query:
            target += "?" + urlencode(query)
        try:
            answer = self._pool.request(
                "GET",
                target,
                headers={"Authorization": f"Bearer {self._token}", "Accept": "application/json"},
                redirect=False,
            )
        except HTTPError as exc:
            raise RemoteError(f"{self.url} could not be asked: {exc}") from None
        try:
            body = json.loads(answer.data)
        except ValueError:
            body = None
        if answer.status != 200:
            message = body.get("message") if isinstance(body, dict) else None
            raise RemoteError(f"{self.url} answered {answer.status}: {message or answer.reason}")
        return body

    def who(self) -> str:
        me = self.get("me")
        return f"{me['name']}{' (admin)' if me.get('admin') else ''}"

    def streams(self, limit: int = 500) -> list[str]:
        return [s["path"] for s in self.get("streams", limit=limit)["streams"]]

    def topics(self, stream: str, limit: int = 500) -> list[dict[str, Any]]:
        path = f"streams/{stream.lstrip('/')}/topics"
        topics: list[dict[str, Any]] = self.get(path, limit=limit)["topics"]
        return topics

    def messages(self, topic: str, limit: int = 50) -> list[dict[str, Any]]:
        """The newest `limit` messages of `topic` (its partitions together), as the API
        pages them."""
        page = self.get(f"topics/{topic.lstrip('/')}/messages", start="newest", limit=limit)
        found: list[dict[str, Any]] = page["messages"]
        return found


__all__ = ["RemoteCluster", "RemoteError", "readable", "token_variable"]
