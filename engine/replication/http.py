"""Replication over HTTP: the `Target` protocol carried as JSON between clusters.

A source cluster reaches a target cluster through the target's `plet web`, whose JSON API
has one endpoint per `Target` method under `/api/v1/replication/` (web/api.py). This module
holds both halves without importing any web library:

- `HttpTarget`, the client, built on `urllib.request`: every call is one POST of a gzip
  compressed JSON body (`apply` carries a whole run of batches of a partition, payloads in
  base64), with a timeout, and retried with bounded exponential backoff when the connection
  fails, times out or the server answers 5xx. Retrying is always safe: every method is
  idempotent on the target (`apply` skips batches it holds already, see
  engine.replication.directory), and a replicator resumes from the target's end offsets anyway.
  When the retries run out the call raises `TransportError`, and the replicator puts the
  link in state `broken` with that error until a later pass gets through. A link goes where
  it says: no proxy, no redirect (a 3xx is a `TransportError`, and the token never goes to
  another address); of an error answer only a Partitionlet error object's message is shown
  (capped), of anything else the status alone, since the other side may be no Partitionlet.
- `ReplicationService`, the server half: checks a request's token and runs the method on a
  `DirectoryTarget` of the local cluster. The web layer only moves bytes.

Authentication: the target issues a token per stream (`Cluster.create_replication_token`,
`plet replica token STREAM`) and keeps only its SHA-256; the source keeps the token with
the link and sends it as `Authorization: Bearer TOKEN`. A token opens only the stream it was
issued for (403 for any other); the target acts as its own cluster principal on behalf of
the token, so the source user's name means nothing there. Tokens are listed and revoked by
an id, the first hex digits of their hash (`Cluster.replication_tokens`,
`Cluster.revoke_replication_token`); a revoked token is refused (401) from the next request.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import json
import random
import re
import secrets
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from engine import errors, names
from engine.auth import logins
from engine.auth.logins import LoginLimiter
from engine.errors import (
    AccessDenied,
    InvalidArgument,
    PartitionletError,
    StorageError,
    UnknownStream,
    UnknownToken,
)
from engine.policies import MAX_PARTITIONS
from engine.replication.directory import DirectoryTarget
from engine.replication.protocol import (
    ApplyResult,
    TopicSpec,
    check_aborted,
    check_replica_batch,
)
from engine.storage.batch import MAX_OFFSET, MAX_TIMESTAMP_MS
from engine.storage.volume import ReplicaBatch

if TYPE_CHECKING:
    from engine.cluster import Cluster

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
# What of a target's error answer is read (its error object) and shown (its message).
MAX_ERROR_BODY_BYTES = 64 * 1024
MAX_MESSAGE_CHARS = 300
# A token is listed and revoked by the first hex digits of its SHA-256 (not a secret).
TOKEN_ID_CHARS = 12
_TOKEN_ID = re.compile(rf"[0-9a-f]{{{TOKEN_ID_CHARS}}}")
# A token's last use is written at most this often (a request must not always write).
LAST_USED_RESOLUTION_MS = 60_000

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


@dataclass(frozen=True)
class ReplicationTokenInfo:
    """A replication token as `Cluster.replication_tokens` lists it; never the token itself.
    `id` is the first TOKEN_ID_CHARS hex digits of its SHA-256."""

    id: str
    stream: str
    created_ms: int
    created_by: str
    last_used_ms: int | None  # the last request it opened, to the minute


def create_token(cluster: Cluster, stream: str) -> str:
    """Issue a token for replicating into `stream` of `cluster` (see the module doc)."""
    names.validate_stream_path(stream)
    try:
        row = cluster.catalog.stream(stream)
    except UnknownStream:
        # The source's add_replica will create it (autosetup): letting another cluster
        # create a stream here is a cluster administrator's act.
        if not cluster.is_administrator:
            raise AccessDenied(
                f"stream {stream} does not exist: only a cluster administrator may issue a "
                "token that lets another cluster create it (create the stream first)"
            ) from None
    else:
        cluster.authorize(row, "admin_perm")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    cluster.catalog.add_replication_token(hash_token(token), stream, cluster.principal.user)
    return token


def _administers(cluster: Cluster, stream: str) -> bool:
    """Whether the cluster's principal may manage the tokens of `stream`: an administrator,
    or whoever passes its admin_perm (who may issue them)."""
    if cluster.is_administrator:
        return True
    try:
        cluster.authorize(cluster.catalog.stream(stream), "admin_perm")
    except (UnknownStream, AccessDenied):
        return False
    return True


def tokens(cluster: Cluster, stream: str | None = None) -> list[ReplicationTokenInfo]:
    """The tokens issued here that the principal may manage, oldest first."""
    if stream is not None:
        names.validate_stream_path(stream)
    allowed: dict[str, bool] = {}
    out = []
    for token_hash, path, created_ms, created_by, used_ms in cluster.catalog.replication_tokens(
        stream
    ):
        if path not in allowed:
            allowed[path] = _administers(cluster, path)
        if allowed[path]:
            out.append(
                ReplicationTokenInfo(
                    token_hash[:TOKEN_ID_CHARS], path, created_ms, created_by, used_ms
                )
            )
    return out


def revoke_token(cluster: Cluster, token_id: str) -> None:
    """Forget the token `token_id` (as `tokens` lists it): refused from the next request."""
    if not isinstance(token_id, str) or not _TOKEN_ID.fullmatch(token_id):
        raise InvalidArgument(
            f"invalid token id {token_id!r}: {TOKEN_ID_CHARS} hex digits, as listed"
        )
    found = [
        (token_hash, path)
        for token_hash, path, *_ in cluster.catalog.replication_tokens()
        if token_hash.startswith(token_id)
    ]
    if not found:
        raise UnknownToken(f"no replication token {token_id} (plet replica tokens lists them)")
    for _, path in found:
        if not _administers(cluster, path):
            raise AccessDenied(
                f"user {cluster.principal.user!r} may not revoke token {token_id}: it opens "
                f"stream {path}, which needs its admin_perm or a cluster administrator"
            )
    cluster.catalog.delete_replication_tokens([token_hash for token_hash, _ in found])


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


# What this server understands beyond the first version of the format, in `info`'s answer:
# "transactions": batch items of 13 fields (the 9, then producer id, producer epoch, base
# sequence, marker) and apply's "aborted" ranges; "checksums": items of 14 fields (the 13,
# then the batch's CRC32C as stored at the source, which the server checks before it
# writes). A client sends them only to a server that says so; a server reads items of 9
# and 13 fields as ever.
FEATURES = ("transactions", "checksums")


def batch_to_json(b: ReplicaBatch) -> list[Any]:
    """A batch as a wire item: 9 fields, 13 with an idempotent producer's fields or as a
    transaction marker (to a server with the "transactions" feature only), 14 with its
    checksum (to a server with the "checksums" feature only)."""
    item: list[Any] = [
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
    if b.producer_id is not None or b.marker is not None or b.crc is not None:
        item += [b.producer_id, b.producer_epoch, b.base_seq, b.marker]
    if b.crc is not None:
        item.append(b.crc)
    return item


def batch_from_json(item: list[Any]) -> ReplicaBatch:
    """The `ReplicaBatch` of one wire item, its types checked; what the values mean (a
    real batch, offsets and times in range) is checked by the engine before anything is
    written (`check_replica_batch`, in `DirectoryTarget.apply`)."""
    if not isinstance(item, list) or len(item) not in (9, 13, 14):
        raise InvalidArgument("a replicated batch is a list of 9, 13 or 14 fields")
    base, last, count, first_ts, max_ts, ts_type, origin, payload, append_ms = item[:9]
    producer_id, epoch, base_seq, marker = item[9:13] if len(item) >= 13 else (None,) * 4
    crc = item[13] if len(item) == 14 else None
    if crc is not None and (isinstance(crc, bool) or not isinstance(crc, int)):
        raise InvalidArgument("bad replicated batch: its checksum is an integer")
    for value in (base, last, count, first_ts, max_ts, ts_type, append_ms):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument("bad replicated batch: offsets and times are integers")
    if not isinstance(origin, str) or not isinstance(payload, str):
        raise InvalidArgument("bad replicated batch: origin and payload are strings")
    try:
        raw = base64.b64decode(payload, validate=True)
    except ValueError:  # binascii.Error
        raise InvalidArgument("bad replicated batch: the payload is not base64") from None
    batch = ReplicaBatch(
        base, last, count, first_ts, max_ts, ts_type, origin, raw, append_ms,
        producer_id, epoch, base_seq, marker, crc,
    )  # fmt: skip
    check_replica_batch(batch)  # early: a bad item stops the request before any work
    return batch


def _error_class(name: str) -> type[errors.PartitionletError]:
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, errors.PartitionletError):
        return cls
    return TransportError


def _cap(text: str) -> str:
    """A message from elsewhere, on one line and at most MAX_MESSAGE_CHARS long."""
    text = " ".join(text.split())
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1] + "…"
    return text


def _error_object(detail: Any) -> tuple[type[errors.PartitionletError], str] | None:
    """(class, capped message) of a Partitionlet error answer, `{"error": "ClassName",
    "message": "..."}` with a class of engine/errors.py; None for anything else."""
    if not isinstance(detail, dict):
        return None
    name, message = detail.get("error"), detail.get("message")
    if not isinstance(name, str) or not isinstance(message, str):
        return None
    cls = _error_class(name)
    if cls is TransportError:
        return None
    return cls, _cap(message)


def _describe(exc: BaseException) -> str:
    """What went wrong with a request, for a link's error. An HTTP protocol error's text
    may quote what the other side sent (a status line, a header): its class only."""
    if isinstance(exc, http.client.HTTPException):
        return type(exc).__name__
    return _cap(f"{type(exc).__name__}: {exc}")


def _count(value: Any) -> int:
    """A non-negative integer of an answer (TypeError otherwise, see `_reading`)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError("not a count")
    return value


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follow no redirect: urllib then raises the 3xx as an HTTPError (see `_failure`)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# --- the client ----------------------------------------------------------------------------


class HttpTarget:
    """A target cluster behind its `plet web`, as an `engine.replication.protocol.Target`."""

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
        # A replication link goes where it says: no proxy from the environment, and no
        # redirect (a 3xx is an answer, and the token never travels to another address).
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
        info = self._call("info", {})
        with self._reading("info"):
            cluster_id = info["cluster_id"]
            name = info.get("name")
            if not isinstance(cluster_id, str) or not cluster_id:
                raise TypeError("cluster_id")
        self.cluster_id: str = cluster_id
        self.cluster_name: str | None = name if isinstance(name, str) else None
        features = info.get("features")
        # a server before transactions takes neither producer fields nor markers
        self.transactions = isinstance(features, list) and "transactions" in features
        # a server before checksums takes no checksum (it computes its own)
        self.checksums = isinstance(features, list) and "checksums" in features

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
                    data = response.read(MAX_BODY_BYTES + 1)
                    encoding = response.headers.get("Content-Encoding")
                    length = response.headers.get("Content-Length")
                if len(data) > MAX_BODY_BYTES:
                    raise ValueError(f"an answer larger than {MAX_BODY_BYTES} bytes")
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
                    detail = decode_body(
                        exc.read(MAX_ERROR_BODY_BYTES), exc.headers.get("Content-Encoding")
                    )
                except Exception:  # noqa: BLE001 - an unreadable (or cut) error body
                    detail = {}
                finally:
                    exc.close()
                if status < 500 or attempt >= self.retries:
                    raise self._failure(op, status, detail) from None
            except (OSError, http.client.HTTPException, ValueError) as exc:
                # Refused, reset, timed out, cut in the middle of a response, or garbage.
                if attempt >= self.retries:
                    raise TransportError(
                        f"{self.url}: {op} failed after {attempt + 1} attempts: {_describe(exc)}"
                    ) from exc
            attempt += 1
            self.retried += 1
            delay = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
            time.sleep(delay * (0.5 + random.random() / 2))

    def _failure(self, op: str, status: int, detail: Any) -> errors.PartitionletError:
        """The error of a non-2xx answer. Only a Partitionlet error object (an `error` that
        names a class of engine/errors.py, and a `message`) is believed, and its message
        shown, capped; of anything else only the status is told, never the body: a link
        may point at a server that is no Partitionlet, and its answers are not ours to
        show."""
        if 300 <= status < 400:
            return TransportError(
                f"{self.url}: {op}: HTTP {status}, a redirect; a replication link follows "
                "none (its token stays here): give the target's own address"
            )
        known = _error_object(detail)
        if status == 401:
            return AccessDenied(f"{self.url}: {op}: token refused (401)")
        if status == 403:
            reason = known[1] if known else "HTTP 403"
            return AccessDenied(f"{self.url}: {op}: {reason}")
        if known is None:
            return TransportError(
                f"{self.url}: {op}: HTTP {status} (not a Partitionlet answer; body not shown)"
            )
        cls, message = known
        return cls(message)

    @contextmanager
    def _reading(self, op: str) -> Iterator[None]:
        """Turn an answer of the wrong shape into a TransportError (a target that is no
        Partitionlet may answer 200 with anything); its content is not shown."""
        try:
            yield
        except PartitionletError:
            raise
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise TransportError(
                f"{self.url}: {op}: the answer is not a Partitionlet target's (not shown)"
            ) from None

    # --- Target ----------------------------------------------------------------------------
    # Each answer is checked for its shape (`_reading`): the replicator must get a
    # PartitionletError, not a KeyError, from a target that answers something else.

    def stream_policies(self, stream: str) -> dict[str, Any] | None:
        got = self._call("stream_policies", {"stream": stream})
        with self._reading("stream_policies"):
            policies = got["policies"]
            if policies is not None and not isinstance(policies, dict):
                raise TypeError("policies")
            return policies

    def create_stream(self, stream: str, policies: dict[str, Any], creator: str) -> None:
        self._call("create_stream", {"stream": stream, "policies": policies, "creator": creator})

    def check_admin(self, stream: str, user: str, groups: tuple[str, ...]) -> None:
        self._call("check_admin", {"stream": stream, "user": user, "groups": list(groups)})

    def ensure_topics(self, stream: str, topics: list[TopicSpec]) -> None:
        # [name, partitions] for a topic without overrides, as servers before them read it
        items = [[n, p, own] if own else [n, p] for n, p, own in topics]
        self._call("ensure_topics", {"stream": stream, "topics": items})

    def topic_partitions(self, stream: str) -> dict[str, int]:
        got = self._call("topic_partitions", {"stream": stream})
        with self._reading("topic_partitions"):
            return {str(name): _count(count) for name, count in dict(got["topics"]).items()}

    def end_offsets(self, stream: str, topics: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        got = self._call("end_offsets", {"stream": stream, "topics": [list(t) for t in topics]})
        with self._reading("end_offsets"):
            return {(str(name), _count(p)): _count(end) for name, p, end in got["ends"]}

    def batch_at(
        self, stream: str, topic: str, partition: int, offset: int
    ) -> tuple[int, int, str] | None:
        answer = self._call(
            "batch_at",
            {"stream": stream, "topic": topic, "partition": partition, "offset": offset},
        )
        with self._reading("batch_at"):
            got = answer["batch"]
            return None if got is None else (_count(got[0]), _count(got[1]), str(got[2]))

    def apply(
        self,
        stream: str,
        topic: str,
        partition: int,
        batches: list[ReplicaBatch],
        aborted: list[tuple[int, int, int]] | None = None,
    ) -> ApplyResult:
        args: dict[str, Any] = {"stream": stream, "topic": topic, "partition": partition}
        items = len(batches)
        kept = list(range(items))
        if not self.checksums:
            batches = [replace(b, crc=None) for b in batches]
        if self.transactions:
            if aborted:
                args["aborted"] = [list(r) for r in aborted]
        else:
            # An older server: batches as they were before transactions, markers left out
            # (gaps there, as that server's own readers expect).
            kept = [i for i, b in enumerate(batches) if b.marker is None]
            batches = [
                replace(batches[i], producer_id=None, producer_epoch=None, base_seq=None)
                for i in kept
            ]
            if not batches:
                return ApplyResult(done=items)
        args["batches"] = [batch_to_json(b) for b in batches]
        got = self._call("apply", args)
        with self._reading("apply"):
            conflict = got["conflict"]
            if conflict is not None and not isinstance(conflict, dict):
                raise TypeError("conflict")
            done = _count(got["done"])
            if not self.transactions:
                # counted in the caller's items: the markers before the first batch not done
                done = kept[done] if done < len(kept) else items
            return ApplyResult(_count(got["messages"]), _count(got["bytes"]), done, conflict)

    def merge_offsets(self, stream: str, rows: list[tuple[str, str, int, int, str, int]]) -> int:
        got = self._call("merge_offsets", {"stream": stream, "rows": [list(r) for r in rows]})
        with self._reading("merge_offsets"):
            return _count(got["changed"])

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


# Bounds of the integers a request carries: a token holder must not make the server loop
# over 2^64 partitions or store an offset no produce can follow.
_BOUNDS = {"partition": MAX_PARTITIONS - 1, "offset": MAX_OFFSET, "ms": MAX_TIMESTAMP_MS}
# A committed offset's metadata string, at most (Kafka's offset.metadata.max.bytes).
MAX_OFFSET_METADATA = 4096


def _bounded(value: Any, what: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise InvalidArgument(f"{what} must be an integer from 0 to {high:,}")
    return value


def _int(args: dict[str, Any], key: str) -> int:
    return _bounded(args.get(key), repr(key), _BOUNDS[key])


def _topic_list(args: dict[str, Any]) -> list[tuple[str, int]]:
    items = args.get("topics")
    if not isinstance(items, list):
        raise InvalidArgument("'topics' must be a list of [name, partitions]")
    out = []
    for item in items:
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
            raise InvalidArgument("'topics' must be a list of [name, partitions]")
        names.validate_topic_name(item[0])
        out.append((item[0], _bounded(item[1], "a topic's partition count", MAX_PARTITIONS)))
    return out


def _topic_specs(args: dict[str, Any]) -> list[TopicSpec]:
    """ensure_topics' topics: [name, partitions] or [name, partitions, {own policies}]."""
    items = args.get("topics")
    if not isinstance(items, list):
        raise InvalidArgument("'topics' must be a list of [name, partitions, policies]")
    out = []
    for item in items:
        own = item[2] if isinstance(item, list) and len(item) == 3 else {}
        if not isinstance(own, dict):
            raise InvalidArgument("a topic's policies must be an object")
        head = item[:2] if isinstance(item, list) and len(item) == 3 else item
        name, count = _topic_list({"topics": [head]})[0]
        out.append((name, count, own))
    return out


class ReplicationService:
    """Runs replication requests against the local cluster at `path` (the web side).

    One `DirectoryTarget`, used by one request at a time (its appender caches active
    partitionlets); the target's append transaction is what makes concurrent sources safe.
    """

    def __init__(self, path: str) -> None:
        self._target = DirectoryTarget(str(path))
        self.cluster = self._target.cluster
        self._lock = threading.Lock()

    def close(self) -> None:
        self._target.close()

    def authenticate(
        self, token: str | None, address: str | None = None, limiter: LoginLimiter | None = None
    ) -> str:
        """The stream a token opens; `Unauthorized` for a missing or unknown token. With
        the client's `address`, an unknown token counts against it in `limiter` (default:
        this process's, engine.auth.logins), and `LoginThrottled` is raised while the
        address must wait: tokens are guessed no faster than passwords."""
        if not token:
            raise Unauthorized("a replication token is required (Authorization: Bearer ...)")
        if address is None:
            stream = self._stream_of(token)
        else:
            stream = logins.replication_stream(
                self._stream_of, token, address, limiter or logins.LIMITER
            )
        if stream is None:
            raise Unauthorized("unknown replication token")
        return stream

    def _stream_of(self, token: str) -> str | None:
        token_hash = hash_token(token)
        catalog = self.cluster.catalog
        found = catalog.replication_token(token_hash)
        if found is None:
            return None
        stream, last_used = found
        now = self.cluster.clock.now_ms()
        if last_used is None or now - last_used >= LAST_USED_RESOLUTION_MS:
            try:
                catalog.touch_replication_token(token_hash, now)
            except PartitionletError:
                pass  # advisory: a busy catalog must not fail the request
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
                "features": list(FEATURES),
            }
        stream = _str(args, "stream")
        names.validate_stream_path(stream)
        if stream != allowed:
            raise AccessDenied(f"this token is for stream {allowed}, not {stream}")
        with self._lock:
            handler: Callable[[str, dict[str, Any]], dict[str, Any]] = getattr(self, f"_op_{op}")
            return handler(stream, args)

    def _op_stream_policies(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"policies": self._target.stream_policies(stream)}

    def _op_create_stream(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        policies = args.get("policies")
        if not isinstance(policies, dict):
            raise InvalidArgument("'policies' must be an object")
        # The target's catalog checks the path and every policy, as for any other writer:
        # a bad one is a 400 and no stream is made.
        self._target.create_stream(stream, policies, _str(args, "creator"))
        return {}

    def _op_check_admin(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        # The token is the authority here: it was issued by someone allowed to administer
        # the stream (create_token checks admin_perm). It only needs the stream to exist.
        self._target.check_stream(stream)
        return {}

    def _op_ensure_topics(self, stream: str, args: dict[str, Any]) -> dict[str, Any]:
        self._target.ensure_topics(stream, _topic_specs(args))
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
        aborted = args.get("aborted")
        if aborted is not None:
            check_aborted(aborted)
        result = self._target.apply(
            stream, _str(args, "topic"), _int(args, "partition"), batches, aborted
        )
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
            if isinstance(meta, str) and len(meta) > MAX_OFFSET_METADATA:
                raise InvalidArgument(
                    f"an offset's metadata is at most {MAX_OFFSET_METADATA:,} characters"
                )
            rows.append(
                (
                    group,
                    topic,
                    _bounded(p, "an offset row's partition", _BOUNDS["partition"]),
                    _bounded(offset, "an offset row's offset", MAX_OFFSET),
                    meta if isinstance(meta, str) else "",
                    _bounded(ms, "an offset row's time", MAX_TIMESTAMP_MS),
                )
            )
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
    "MAX_MESSAGE_CHARS",
    "HttpTarget",
    "ReplicationService",
    "ReplicationTokenInfo",
    "TransportError",
    "Unauthorized",
    "create_token",
    "hash_token",
    "revoke_token",
    "tokens",
]
