"""Replication over HTTP: the `Target` protocol carried as JSON between clusters.

A source cluster reaches a target cluster through the target's `plet web`, whose JSON API
has one endpoint per `Target` method under `/api/v1/replication/` (web/api.py). This module
holds both halves without importing any web library:

- `HttpTarget`, the client, built on `urllib.request`: every call is one POST of a gzip
  compressed JSON body (`apply` carries a whole run of batches of a partition, payloads in
  base64), with a timeout, and retried with bounded exponential backoff when the connection
  fails, times out or the server answers 5xx. Retrying is always safe: every method is
  idempotent on the target (`apply` skips batches it holds already, see
  engine/replication.py), and a replicator resumes from the target's end offsets anyway.
  When the retries run out the call raises `TransportError`, and the replicator puts the
  link in state `broken` with that error until a later pass gets through.
- `ReplicationService`, the server half: checks a request's token and runs the method on a
  `DirectoryTarget` of the local cluster. The web layer only moves bytes.

Authentication: the target issues a token per stream (`Cluster.create_replication_token`,
`plet replica token STREAM`) and keeps only its SHA-256; the source keeps the token with
the link and sends it as `Authorization: Bearer TOKEN`. A token opens only the stream it was
issued for (403 for any other); the target acts as its own cluster principal on behalf of
the token, so the source user's name means nothing there.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import json
import random
import secrets
import threading
import time
import urllib.error
import urllib.request
import zlib
from typing import TYPE_CHECKING, Any

from engine import errors, names
from engine.errors import AccessDenied, InvalidArgument, StorageError, UnknownStream
from engine.volume import ReplicaBatch

if TYPE_CHECKING:
    from engine.cluster import Cluster
    from engine.replication import ApplyResult

API_PREFIX = "/api/v1/replication"
TOKEN_PREFIX = "plr_"
DEFAULT_TIMEOUT_S = 15.0
DEFAULT_RETRIES = 4  # attempts after the first
DEFAULT_BACKOFF_S = 0.1  # doubles each retry, with jitter, up to MAX_BACKOFF_S
MAX_BACKOFF_S = 2.0
# A request body may not inflate beyond this (a gzip bomb stops here).
MAX_BODY_BYTES = 512 * 1024 * 1024
# Bodies smaller than this are sent as they are (compressing them costs more than it saves).
GZIP_MIN_BYTES = 1024

OPS = (
    "info",
    "stream_policies",
    "create_stream",
    "check_admin",
    "ensure_topics",
    "topic_partitions",
    "end_offsets",
    "batch_at",
    "apply",
    "merge_offsets",
    "add_upstream",
    "remove_upstream",
)


class TransportError(StorageError):
    """The target could not be reached, or answered something unusable, after retries."""


# --- tokens --------------------------------------------------------------------------------


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(cluster: Cluster, stream: str) -> str:
    """Issue a token for replicating into `stream` of `cluster` (see the module doc)."""
    names.validate_stream_path(stream)
    try:
        row = cluster._catalog.stream(stream)
    except UnknownStream:
        pass  # the source's add_replica will create it (autosetup)
    else:
        cluster._authorize(row, "admin_perm")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    cluster._catalog.add_replication_token(hash_token(token), stream)
    return token


# --- wire format ---------------------------------------------------------------------------


def encode_body(obj: Any) -> tuple[bytes, bool]:
    """JSON bytes of `obj`, gzip compressed when worth it; (body, compressed)."""
    raw = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    if len(raw) < GZIP_MIN_BYTES:
        return raw, False
    return gzip.compress(raw, compresslevel=1), True


def decode_body(body: bytes, encoding: str | None) -> Any:
    """The JSON object of a body, inflating a gzip one (at most MAX_BODY_BYTES)."""
    if encoding and encoding.lower() == "gzip":
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            body = inflater.decompress(body, MAX_BODY_BYTES)
        except zlib.error as exc:
            raise InvalidArgument(f"bad gzip body: {exc}") from exc
        if inflater.unconsumed_tail:
            raise InvalidArgument(f"request body inflates beyond {MAX_BODY_BYTES} bytes")
    elif encoding and encoding.lower() != "identity":
        raise InvalidArgument(f"unsupported content encoding {encoding!r}")
    return json.loads(body.decode("utf-8")) if body else {}


def batch_to_json(b: ReplicaBatch) -> list[Any]:
    return [
        b.base_offset,
        b.last_offset,
        b.count,
        b.first_ts,
        b.max_ts,
        b.ts_type,
        b.origin,
        base64.b64encode(b.payload).decode("ascii"),
        b.append_ms,
    ]


def batch_from_json(item: list[Any]) -> ReplicaBatch:
    if not isinstance(item, list) or len(item) != 9:
        raise InvalidArgument("a replicated batch is a list of 9 fields")
    base, last, count, first_ts, max_ts, ts_type, origin, payload, append_ms = item
    for value in (base, last, count, first_ts, max_ts, ts_type, append_ms):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument("bad replicated batch: offsets and times are integers")
    if not isinstance(origin, str) or not isinstance(payload, str):
        raise InvalidArgument("bad replicated batch: origin and payload are strings")
    if base < 0 or last < base or count < 1:
        raise InvalidArgument(f"bad replicated batch offsets {base}..{last}")
    return ReplicaBatch(
        base,
        last,
        count,
        first_ts,
        max_ts,
        ts_type,
        origin,
        base64.b64decode(payload, validate=True),
        append_ms,
    )


def _error_class(name: str) -> type[errors.PartitionletError]:
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, errors.PartitionletError):
        return cls
    return TransportError


# --- the client ----------------------------------------------------------------------------


class HttpTarget:
    """A target cluster behind its `plet web`, as a `engine.replication.Target`."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        backoff_s: float = DEFAULT_BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
    ) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.requests = 0  # HTTP requests sent, retries included
        self.retried = 0
        self.bytes_sent = 0
        # No proxy from the environment: a replication link goes where it says.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        info = self._call("info", {})
        self.cluster_id: str = info["cluster_id"]
        self.cluster_name: str | None = info.get("name")

    def close(self) -> None:
        pass  # urllib keeps no connection open between requests

    def _call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        body, compressed = encode_body(args)
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Accept-Encoding": "gzip",
        }
        if compressed:
            headers["Content-Encoding"] = "gzip"
        attempt = 0
        while True:
            request = urllib.request.Request(
                f"{self.url}{API_PREFIX}/{op}", data=body, headers=headers, method="POST"
            )
            self.requests += 1
            self.bytes_sent += len(body)
            try:
                with self._opener.open(request, timeout=self.timeout_s) as response:
                    data = response.read()
                    encoding = response.headers.get("Content-Encoding")
                    length = response.headers.get("Content-Length")
                # A cut connection can look like a short answer: only a whole one counts.
                if length is None or not length.isdigit() or int(length) != len(data) or not data:
                    raise http.client.IncompleteRead(data)
                answer = decode_body(data, encoding)
                if not isinstance(answer, dict):
                    raise ValueError("the answer is not a JSON object")
                return answer
            except urllib.error.HTTPError as exc:
                status = exc.code
                try:
                    detail = decode_body(exc.read(), exc.headers.get("Content-Encoding"))
                except Exception:  # noqa: BLE001 - an unreadable error body
                    detail = {}
                finally:
                    exc.close()
                if status < 500 or attempt >= self.retries:
                    raise self._failure(op, status, detail) from None
            except (OSError, http.client.HTTPException, ValueError) as exc:
                # Refused, reset, timed out, cut in the middle of a response, or garbage.
                if attempt >= self.retries:
                    raise TransportError(
                        f"{self.url}: {op} failed after {attempt + 1} attempts: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
            attempt += 1
            self.retried += 1
            delay = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
            time.sleep(delay * (0.5 + random.random() / 2))

    def _failure(self, op: str, status: int, detail: Any) -> errors.PartitionletError:
        if not isinstance(detail, dict):
            detail = {}
        message = str(detail.get("message") or f"HTTP {status}")
        if status == 401:
            return AccessDenied(f"{self.url}: {op}: token refused (401): {message}")
        if status == 403:
            return AccessDenied(f"{self.url}: {op}: {message}")
        cls = _error_class(str(detail.get("error") or ""))
        if cls is TransportError:
            return TransportError(f"{self.url}: {op}: HTTP {status}: {message}")
        return cls(message)

    # --- Target ----------------------------------------------------------------------------

    def stream_policies(self, stream: str) -> dict[str, Any] | None:
        return self._call("stream_policies", {"stream": stream})["policies"]

    def create_stream(self, stream: str, policies: dict[str, Any], creator: str) -> None:
        self._call("create_stream", {"stream": stream, "policies": policies, "creator": creator})

    def check_admin(self, stream: str, user: str, groups: tuple[str, ...]) -> None:
        self._call("check_admin", {"stream": stream, "user": user, "groups": list(groups)})

    def ensure_topics(self, stream: str, topics: list[tuple[str, int]]) -> None:
        self._call("ensure_topics", {"stream": stream, "topics": [list(t) for t in topics]})

    def topic_partitions(self, stream: str) -> dict[str, int]:
        return dict(self._call("topic_partitions", {"stream": stream})["topics"])

    def end_offsets(self, stream: str, topics: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        got = self._call("end_offsets", {"stream": stream, "topics": [list(t) for t in topics]})
        return {(name, p): end for name, p, end in got["ends"]}

    def batch_at(
        self, stream: str, topic: str, partition: int, offset: int
    ) -> tuple[int, int, str] | None:
        got = self._call(
            "batch_at",
            {"stream": stream, "topic": topic, "partition": partition, "offset": offset},
        )["batch"]
        return None if got is None else (got[0], got[1], got[2])

    def apply(
        self, stream: str, topic: str, partition: int, batches: list[ReplicaBatch]
    ) -> ApplyResult:
        from engine.replication import ApplyResult

        got = self._call(
            "apply",
            {
                "stream": stream,
                "topic": topic,
                "partition": partition,
                "batches": [batch_to_json(b) for b in batches],
            },
        )
        return ApplyResult(got["messages"], got["bytes"], got["done"], got["conflict"])

    def merge_offsets(self, stream: str, rows: list[tuple[str, str, int, int, str, int]]) -> int:
        got = self._call("merge_offsets", {"stream": stream, "rows": [list(r) for r in rows]})
        return got["changed"]

    def add_upstream(self, stream: str, source: str, source_stream: str, source_id: str) -> None:
        self._call(
            "add_upstream",
            {
                "stream": stream,
                "source": source,
                "source_stream": source_stream,
                "source_id": source_id,
            },
        )

    def remove_upstream(self, stream: str, source_id: str, source_stream: str) -> None:
        self._call(
            "remove_upstream",
            {"stream": stream, "source_id": source_id, "source_stream": source_stream},
        )


# --- the server half -----------------------------------------------------------------------


class Unauthorized(AccessDenied):
    """No token, or a token this cluster did not issue (HTTP 401)."""


def _str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise InvalidArgument(f"{key!r} must be a string")
    return value


def _int(args: dict[str, Any], key: str) -> int:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{key!r} must be a non-negative integer")
    return value


def _topic_list(args: dict[str, Any]) -> list[tuple[str, int]]:
    items = args.get("topics")
    if not isinstance(items, list):
        raise InvalidArgument("'topics' must be a list of [name, partitions]")
    out = []
    for item in items:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not isinstance(item[0], str)
            or isinstance(item[1], bool)
            or not isinstance(item[1], int)
            or item[1] < 0
        ):
            raise InvalidArgument("'topics' must be a list of [name, partitions]")
        names.validate_topic_name(item[0])
        out.append((item[0], item[1]))
    return out


class ReplicationService:
    """Runs replication requests against the local cluster at `path` (the web side).

    One `DirectoryTarget`, used by one request at a time (its appender caches active
    partitionlets); the target's append transaction is what makes concurrent sources safe.
    """

    def __init__(self, path: str) -> None:
        from engine.replication import DirectoryTarget

        self._target = DirectoryTarget(str(path))
        self.cluster = self._target.cluster
        self._lock = threading.Lock()

    def close(self) -> None:
        self._target.close()

    def authenticate(self, token: str | None) -> str:
        """The stream a token opens; `Unauthorized` for a missing or unknown token."""
        if not token:
            raise Unauthorized("a replication token is required (Authorization: Bearer ...)")
        stream = self.cluster._catalog.replication_token_stream(hash_token(token))
        if stream is None:
            raise Unauthorized("unknown replication token")
        return stream

    def handle(self, token: str | None, op: str, args: Any) -> dict[str, Any]:
        """Answer one request; raises `Unauthorized` (401), `AccessDenied` (403),
        `NotFound` (404), `InvalidArgument` and friends (400) or other engine errors."""
        allowed = self.authenticate(token)
        if op not in OPS:
            raise InvalidArgument(f"unknown replication operation {op!r}")
        if not isinstance(args, dict):
            raise InvalidArgument("the request body is a JSON object")
        if op == "info":
            return {
                "cluster_id": self.cluster.id,
                "name": self.cluster.name,
                "stream": allowed,
            }
        stream = _str(args, "stream")
        names.validate_stream_path(stream)
        if stream != allowed:
            raise AccessDenied(f"this token is for stream {allowed}, not {stream}")
        with self._lock:
            return getattr(self, f"_op_{op}")(stream, args)

    def _op_stream_policies(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"policies": self._target.stream_policies(stream)}

    def _op_create_stream(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        policies = args.get("policies")
        if not isinstance(policies, dict):
            raise InvalidArgument("'policies' must be an object")
        self._target.create_stream(stream, policies, _str(args, "creator"))
        return {}

    def _op_check_admin(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        # The token is the authority here: it was issued by someone allowed to administer
        # the stream (create_token checks admin_perm). It only needs the stream to exist.
        self._target.cluster._catalog.stream(stream)
        return {}

    def _op_ensure_topics(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        self._target.ensure_topics(stream, _topic_list(args))
        return {}

    def _op_topic_partitions(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"topics": self._target.topic_partitions(stream)}

    def _op_end_offsets(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        ends = self._target.end_offsets(stream, _topic_list(args))
        return {"ends": [[name, p, end] for (name, p), end in ends.items()]}

    def _op_batch_at(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        got = self._target.batch_at(
            stream, _str(args, "topic"), _int(args, "partition"), _int(args, "offset")
        )
        return {"batch": None if got is None else list(got)}

    def _op_apply(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        items = args.get("batches")
        if not isinstance(items, list):
            raise InvalidArgument("'batches' must be a list")
        batches = [batch_from_json(item) for item in items]
        result = self._target.apply(stream, _str(args, "topic"), _int(args, "partition"), batches)
        return {
            "messages": result.messages,
            "bytes": result.bytes,
            "done": result.done,
            "conflict": result.conflict,
        }

    def _op_merge_offsets(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        items = args.get("rows")
        if not isinstance(items, list):
            raise InvalidArgument("'rows' must be a list")
        rows = []
        for item in items:
            if not isinstance(item, list) or len(item) != 6:
                raise InvalidArgument(
                    "an offset row is [group, topic, partition, offset, meta, ms]"
                )
            group, topic, p, offset, meta, ms = item
            if not isinstance(group, str) or not isinstance(topic, str):
                raise InvalidArgument("an offset row's group and topic are strings")
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (p, offset, ms)):
                raise InvalidArgument("an offset row's partition, offset and time are integers")
            rows.append((group, topic, p, offset, meta if isinstance(meta, str) else "", ms))
        return {"changed": self._target.merge_offsets(stream, rows)}

    def _op_add_upstream(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        self._target.add_upstream(
            stream, _str(args, "source"), _str(args, "source_stream"), _str(args, "source_id")
        )
        return {}

    def _op_remove_upstream(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        self._target.remove_upstream(stream, _str(args, "source_id"), _str(args, "source_stream"))
        return {}


__all__ = [
    "API_PREFIX",
    "HttpTarget",
    "ReplicationService",
    "TransportError",
    "Unauthorized",
    "create_token",
    "hash_token",
]
