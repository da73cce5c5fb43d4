"""`Cluster`: one data directory, the one door to its catalog and volume files.

Layout of a cluster directory:

    catalog.db            metadata (engine.storage.catalog)
    volumes/vol-1.db ...  record batches (engine.storage.volume), one file per volume
    .open.lock            serializes the first open of a new directory between processes

Several processes may open the same directory at once: every fact lives in exactly one
SQLite file, writers begin with BEGIN IMMEDIATE, and cached metadata is dropped whenever
the catalog's topology version moves. A `Cluster` may be shared by threads; each thread
uses its own connections.
"""

from __future__ import annotations

import copy
import fcntl
import json
import logging
import os
import threading
import uuid
import weakref
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine import name_search, names, policies
from engine import policies as policy_table  # where a parameter is named `policies`
from engine.auth import acl, effective
from engine.auth import users as user_store
from engine.auth.effective import EffectivePermissions
from engine.auth.principal import Principal
from engine.auth.users import ApiTokenInfo, UserInfo
from engine.clock import SYSTEM_CLOCK, Clock
from engine.doorbell import WAKE_DIR, Doorbells
from engine.doorbell import supported as doorbell_supported
from engine.errors import (
    AccessDenied,
    Closed,
    CorruptFile,
    IllegalState,
    InvalidArgument,
    InvalidName,
    InvalidOffset,
    InvalidPartition,
    InvalidPolicy,
    NotACluster,
    StorageError,
    UnknownStream,
)
from engine.groups.admin import GroupAdmin
from engine.groups.grammar import ResetTo
from engine.groups.perms import GroupPermissions, GroupRule
from engine.name_search import SearchResult, TopicPage
from engine.ops import balance, metrics, retention
from engine.ops.balance import RebalanceReport
from engine.ops.heat import HeatMap, heat_map
from engine.ops.metrics import MetricSeries, MetricsReport
from engine.ops.retention import CompactionReport, RetentionReport
from engine.records import (
    ClusterTotals,
    GroupInfo,
    MemberInfo,
    OffsetResetPlan,
    PartitionInfo,
    PartitionletInfo,
    StreamInfo,
    TopicInfo,
    TopicPartition,
    VolumeInfo,
)
from engine.storage import scan
from engine.storage.appender import Appender
from engine.storage.catalog import Catalog, PartitionletRow, StreamRow, TopicRow
from engine.storage.jobs import JobTable as JobTable  # spark_tasks.jobs names it
from engine.storage.log import PartitionLog
from engine.storage.placement import Placement
from engine.storage.reader import BatchReader
from engine.storage.volume import ACTIVE, PartitionletState, Volume

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # engine.replication imports this module
    from engine.client.schemas import SchemaRegistry
    from engine.ops.archive import ArchiveReport
    from engine.ops.heat import ReadCounter
    from engine.replication import ReplicaInfo, UpstreamInfo
    from engine.replication.http import ReplicationTokenInfo

_log = logging.getLogger(__name__)

CATALOG_FILE = "catalog.db"
# A producer id unused this long is forgotten (Kafka's producer.id.expiration.ms, 1 day).
PRODUCER_ID_EXPIRY_MS = 86_400_000
VOLUME_DIR = "volumes"
LOCK_FILE = ".open.lock"

# A partitionlet rolls when it holds this many bytes or is this old (and not empty).
DEFAULT_PARTITIONLET_BYTES = 64 * 1024 * 1024
DEFAULT_PARTITIONLET_MS = 60 * 60 * 1000
MAX_VOLUMES = 256


class AppendSignal:
    """Wake-ups from producers to consumers of one cluster: a writer calls `notify()` after
    it appended; a consumer reads `seq`, finds nothing new, and calls `wait(seq, timeout)`,
    which returns at once if an append came in between. Appends of other processes ring
    this one's doorbell (engine.doorbell) once something here waits, and wake it the same
    way; where no doorbell can be made, waiters look at the files (engine.client.consumer)."""

    def __init__(self, path: Path | None = None) -> None:
        self._cond = threading.Condition()
        self._seq = 0
        # called after every append, outside the lock: wake-ups of waiters that are not
        # threads (the wire listener's parked fetches wait on its event loop)
        self._listeners: list[Callable[[], None]] = []
        self._doorbells = (
            Doorbells(path, self._woken) if path is not None and doorbell_supported() else None
        )

    @property
    def seq(self) -> int:
        return self._seq

    def notify(self) -> None:
        """An append was made here: wake this process's waiters and ring the others'."""
        self._woken()
        if self._doorbells is not None:
            self._doorbells.ring()

    def _woken(self) -> None:
        with self._cond:
            self._seq += 1
            self._cond.notify_all()
        for listener in self._listeners:
            listener()

    def listen(self, listener: Callable[[], None]) -> None:
        """Call `listener()` (from the appending thread, or the doorbell's for another
        process's append; it must not block) after every append."""
        with self._cond:
            self._listeners = [*self._listeners, listener]
        self._hear_others()

    def unlisten(self, listener: Callable[[], None]) -> None:
        with self._cond:
            self._listeners = [x for x in self._listeners if x != listener]

    def wait(self, seq: int, timeout: float) -> int:
        """Wait until an append happens after `seq` (or `timeout` seconds pass); returns
        the sequence number now."""
        self._hear_others()
        with self._cond:
            if self._seq == seq:
                self._cond.wait(timeout)
            return self._seq

    @property
    def hears_others(self) -> bool:
        """Whether other processes' appends wake this one (its doorbell is up)."""
        return self._doorbells is not None and self._doorbells.listening

    def _hear_others(self) -> None:
        if self._doorbells is not None and not self._doorbells.listening:
            self._doorbells.listen()

    def close(self) -> None:
        if self._doorbells is not None:
            self._doorbells.close()


class MetadataWatcher(Protocol):
    """What `Cluster.watch_metadata` takes: a producer, or anything that caches topics."""

    def forget_metadata(self) -> None: ...


class Cluster:
    """An open cluster directory. Use `Cluster.open(path)`; close it (or use `with`).

    Applications call the methods below (streams, topics, groups, users, ...). Engine
    modules (client, ops, auth, replication) reach the storage layer through these typed
    names only, never through a private field; every SQL statement and file stays in
    engine.storage:

    - `catalog` -> `Catalog`: the metadata file; `catalog.accounts` and
      `catalog.groups` are its users/sessions/tokens and group tables;
    - `volume(volume_id)` -> `Volume`, `open_volumes()` -> {volume id: `Volume`}: the
      volume files;
    - `jobs` -> `JobTable`: the replay job records (spark_tasks.jobs keeps them);
    - `placement` -> `Placement`: which volume takes the next partitionlet;
    - `appender()` -> a new `Appender` (one per writing thread), `partition_log(...)` -> a
      new `PartitionLog` (one per reader), both built from this cluster's parts;
    - `clock` -> `Clock`: where every engine object made on it reads the time;
    - `authorize(stream, perm, principal=None, what=None)`: the stream's ACE check;
    - `appends` -> `AppendSignal`: writers wake waiting consumers, here and (through the
      doorbells, engine.doorbell) in other processes;
    - `watch_metadata(watcher)`: `watcher.forget_metadata()` runs when this object changes
      topics or policies;
    - `check_open()`: raise `errors.Closed` once the cluster is closed.

    Spark reads volume files through `scan_plan(...)` (`engine.storage.scan`,
    docs/SPARK.md).
    """

    def __init__(
        self,
        path: Path,
        catalog: Catalog,
        volumes: dict[int, Volume],
        settings: dict[str, str],
        principal: Principal,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.path = path
        # Where every engine object made on this cluster reads the time (a FakeClock in tests).
        self.clock: Clock = clock
        self.id: str = settings["cluster_id"]
        self.name: str = settings["name"]
        self.principal = principal
        self.partitionlet_bytes = int(settings["partitionlet_bytes"])
        self.partitionlet_ms = int(settings["partitionlet_ms"])
        self._cat = catalog
        self._vols = volumes
        self._closed = False
        # Storage is built from the parts it uses, never from the Cluster itself; new
        # partitionlets go to the volumes that can be used.
        self._placement = Placement(
            {vid: vol for vid, vol in volumes.items() if vol.damage is None}, clock
        )
        self.appends = AppendSignal(path)
        # Producers of this object drop their cached topics and policies at once when it
        # changes them (other processes' changes arrive through the catalog's topology
        # version, which each producer's sender checks), so `send` checks nothing.
        self._watchers: weakref.WeakSet[MetadataWatcher] = weakref.WeakSet()
        # Streams' policy sets parsed from their stored JSON, by text: a topic's row comes
        # with its stream's text, and most streams share a few texts, so topic() parses none.
        self._parsed_policies: dict[str, dict[str, Any]] = {}
        # Set on a view made by as_principal: the cluster whose files it shares.
        self._view_of: Cluster | None = None
        # True when opened without principal=: the library acts as whoever can write the
        # files (the file system is the boundary), a cluster administrator (is_administrator).
        self._own_principal = False
        # Background workers' stop methods, called before the files close (`on_close`).
        self._close_hooks: list[weakref.WeakMethod[Callable[[], None]] | Callable[[], None]] = []

    # --- opening and closing --------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        volumes: int | Sequence[str | os.PathLike[str]] = 4,
        principal: Principal | None = None,
        partitionlet_bytes: int | None = None,
        partitionlet_ms: int | None = None,
        clock: Clock | None = None,
    ) -> Cluster:
        """Open the cluster at `path`, creating the directory and its files if missing.

        `volumes` is the number of volume files of a new cluster, or their paths (absolute,
        or relative to the cluster directory) to spread them over disks; it is ignored for
        an existing cluster. `partitionlet_bytes` and `partitionlet_ms` set when the active
        partitionlet of a partition rolls; given for an existing cluster, they change it.
        """
        clock = clock or SYSTEM_CLOCK
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise NotACluster(f"{root} is a file, not a cluster directory")
        volume_paths = _volume_paths(volumes)
        for value, what in (
            (partitionlet_bytes, "partitionlet_bytes"),
            (partitionlet_ms, "partitionlet_ms"),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidArgument(f"{what} must be a positive integer, got {value!r}")
        catalog_path = root / CATALOG_FILE
        if root.is_dir() and not catalog_path.exists():
            _refuse_foreign(root)  # before the lock file: leave a foreign directory as it is
        root.mkdir(parents=True, exist_ok=True)
        with open(root / LOCK_FILE, "a") as lock:
            # Only the first open of a directory does real work here; the lock keeps two
            # processes from creating two catalogs (or two cluster ids) at once.
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not catalog_path.exists():
                    _refuse_foreign(root)
                    catalog = Catalog(catalog_path, clock)
                    catalog.initialize(
                        {
                            "cluster_id": str(uuid.uuid4()),
                            "name": name or root.resolve().name,
                            "partitionlet_bytes": str(
                                partitionlet_bytes or DEFAULT_PARTITIONLET_BYTES
                            ),
                            "partitionlet_ms": str(partitionlet_ms or DEFAULT_PARTITIONLET_MS),
                            "created_ms": str(clock.now_ms()),
                        }
                    )
                    (root / VOLUME_DIR).mkdir(exist_ok=True)
                    catalog.add_volumes(volume_paths)
                else:
                    Catalog.verify(catalog_path)
                    catalog = Catalog(catalog_path, clock)
                    catalog.ensure_schema()
                settings = catalog.settings()
                for key, value in (
                    ("partitionlet_bytes", partitionlet_bytes),
                    ("partitionlet_ms", partitionlet_ms),
                ):
                    if value is not None and settings.get(key) != str(value):
                        catalog.set_setting(key, str(value))
                        settings[key] = str(value)
                vols = {}
                names = _damage_names(settings["name"], catalog)
                for volume_id, vpath in catalog.volumes():
                    full = Path(vpath) if os.path.isabs(vpath) else root / vpath
                    full.parent.mkdir(parents=True, exist_ok=True)
                    vol = Volume(volume_id, full, clock, names)
                    vols[volume_id] = vol
                    if not full.exists():
                        if catalog.volume_in_use(volume_id):
                            # never made again: a new file would hand out its offsets twice
                            vol.damage = (
                                f"volume {volume_id} ({full}) is missing but holds "
                                "partitionlets: restore the file (or mount its disk) and "
                                "open the cluster again"
                            )
                            continue
                        vol.initialize(settings["cluster_id"])
                    else:
                        vol.damage = vol.header_problem()
                        if vol.damage is not None and not catalog.volume_in_use(volume_id):
                            # too short, but it holds nothing: another process's new one
                            # (SQLite writes its header next), safe to make
                            vol.damage = None
                        if vol.damage is None:
                            try:
                                vol.ensure_schema()
                            except CorruptFile as exc:
                                vol.damage = str(exc)
            except BaseException:
                if "catalog" in locals():
                    catalog.close()
                for vol in locals().get("vols", {}).values():
                    vol.close()
                raise
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        try:
            for vol in vols.values():
                if vol.damage is None:
                    vol.check(settings["cluster_id"])
                if vol.damage is not None:  # the other volumes are served
                    _log.warning("%s; its partitions cannot be read or written", vol.damage)
        except BaseException:
            catalog.close()
            for vol in vols.values():
                vol.close()
            raise
        opened = cls(root, catalog, vols, settings, principal or Principal.current(), clock)
        opened._own_principal = principal is None
        opened.finish_purges()  # a delete that a full disk interrupted (one query if none)
        return opened

    def as_principal(self, principal: Principal) -> Cluster:
        """A view of this open cluster that acts as `principal` in every ACE check (and
        is the default principal of producers and consumers made on it).

        The view shares this cluster's connections, so it costs nothing to make: the web
        console makes one per request for the logged-in user. Closing the view leaves the
        cluster open; closing the cluster closes its views too.
        """
        self.check_open()
        if not isinstance(principal, Principal):
            raise TypeError(f"a Principal is required, not {type(principal).__name__}")
        view = copy.copy(self)
        view.principal = principal
        view._view_of = self._view_of or self
        view._own_principal = False  # a view acts for someone else, whoever opened it
        return view

    @property
    def is_administrator(self) -> bool:
        """Whether this cluster's principal is a cluster administrator: a `superuser`
        (the web console's administrators), or the library's own principal (opened without
        `principal=`: the file system is the boundary there). What reaches outside the
        cluster, such as a replica link, needs one."""
        return bool(self.principal.superuser) or self._own_principal

    def check_may_change(self, what: str, principal: Principal | None = None) -> None:
        """Raise `AccessDenied` when `principal` (default: the cluster's) is read-only (a
        console user with the read-only flag, `plet user edit --read-only`): they read what
        their ACEs allow and change nothing, whatever the ACEs or the admin flag say. Every
        change of the cluster checks it (ACE checks other than consume_perm do it first),
        so the consoles, the JSON API and the wire listener refuse alike. `what` words the
        refusal ("create streams")."""
        who = principal or self.principal
        if who.read_only:
            raise AccessDenied(f"user {who.user!r} is read-only: they may not {what}")

    def on_close(self, stop: Any) -> None:
        """Have `close()` call `stop` (a background worker's stop, which waits for the
        worker's current pass) before it closes the files: closing an SQLite connection
        while another thread is inside a statement on it crashes the interpreter. A bound
        method is held weakly, so a worker that is gone is not kept or called."""
        root = self._view_of or self
        hook = weakref.WeakMethod(stop) if hasattr(stop, "__self__") else stop
        with _CLOSE_HOOKS_LOCK:
            # the workers that are gone leave, so a long-lived process does not pile them up
            root._close_hooks = [
                h
                for h in root._close_hooks
                if not (isinstance(h, weakref.WeakMethod) and h() is None)
            ]
            root._close_hooks.append(hook)

    def close(self) -> None:
        self._closed = True
        if self._view_of is not None:
            return
        with _CLOSE_HOOKS_LOCK:
            hooks, self._close_hooks = self._close_hooks, []
        for hook in reversed(hooks):
            stop = hook() if isinstance(hook, weakref.WeakMethod) else hook
            if stop is not None:
                stop()
        self.appends.close()
        self.catalog.close()
        for vol in self._vols.values():
            vol.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Cluster {self.name!r} {self.id} at {str(self.path)!r}>"

    def check_open(self) -> None:
        """Raise `errors.Closed` when this cluster (or the one it is a view of) is closed."""
        if self._closed or (self._view_of is not None and self._view_of._closed):
            raise Closed(f"cluster {self.path} is closed")

    # --- the storage layer, for engine modules (see the class docstring) -------------------

    @property
    def catalog(self) -> Catalog:
        """The catalog file (engine.storage.catalog)."""
        return self._cat

    def volume(self, volume_id: int) -> Volume:
        """The open volume file `volume_id` (engine.storage.volume); KeyError if none."""
        return self._vols[volume_id]

    def reader(self, pl: PartitionletRow) -> BatchReader:
        """What reads partitionlet `pl`'s batches: its volume, or for an archived one an
        `engine.storage.archive.ArchiveReader` (the same reading methods)."""
        if pl.archive_file is None:
            return self._vols[pl.volume_id]
        from engine.storage import archive

        return archive.reader(self.path, pl)

    def open_volumes(self) -> dict[int, Volume]:
        """Every open volume file, by id (a copy: the cluster's own map stays as it is);
        not the damaged ones (`damaged_volumes`)."""
        return {vid: vol for vid, vol in self._vols.items() if vol.damage is None}

    def damaged_volumes(self) -> dict[int, str]:
        """{volume id: what is wrong} of the volumes that could not be opened (missing,
        a damaged header, unreadable): their partitions raise `errors.DamagedPartition`
        when read or written, the others are served."""
        return {vid: vol.damage for vid, vol in self._vols.items() if vol.damage is not None}

    @property
    def jobs(self) -> JobTable:
        """The replay job records (engine.storage.jobs), which spark_tasks.jobs keeps."""
        return self._cat.jobs

    @property
    def schemas(self) -> SchemaRegistry:
        """The schema registry (engine.client.schemas, docs/SCHEMAS.md): Avro, Protobuf
        and JSON Schema texts by subject and global id, guarded by the streams' ACEs."""
        self.check_open()
        from engine.client.schemas import SchemaRegistry

        return SchemaRegistry(self)

    @property
    def placement(self) -> Placement:
        """Where new partitionlets go (engine.storage.placement)."""
        return self._placement

    def appender(self) -> Appender:
        """A new `Appender` (engine.storage.appender) on this cluster's files, for one
        writing thread, rolling partitionlets at this cluster's size and age."""
        return Appender(
            self._cat,
            self._vols,
            self._placement,
            roll_bytes=self.partitionlet_bytes,
            roll_ms=self.partitionlet_ms,
            clock=self.clock,
        )

    def partition_log(
        self,
        topic_id: int,
        partition: int,
        topic: str,
        counter: ReadCounter | None = None,
        *,
        committed: bool = False,
    ) -> PartitionLog:
        """A new `PartitionLog` (engine.storage.log) of one partition, for one reader;
        `counter` counts what it reads as heat (engine.ops.heat); `committed` reads as
        Kafka's read_committed (up to the last stable offset, no aborted transaction)."""
        return PartitionLog(
            self._cat, self.reader, topic_id, partition, topic, counter, committed=committed
        )

    def watch_metadata(self, watcher: MetadataWatcher) -> None:
        """Call `watcher.forget_metadata()` whenever this object changes topics, partitions
        or policies; held weakly, so a watcher that goes away needs no unregistering."""
        self._watchers.add(watcher)

    # --- streams --------------------------------------------------------------------------

    def create_stream(self, path: str, /, **stream_policies: Any) -> StreamInfo:
        """Create the stream `path` with `stream_policies` (the others take their defaults).
        `path` is positional only, so a policy named "path" is refused as unknown."""
        self.check_open()
        names.validate_stream_path(path)
        self.check_may_change("create streams")
        checked = policies.validate(stream_policies)
        self._check_reach(checked, policies.DEFAULTS)
        self.catalog.create_stream(path, checked, self.principal.user)
        self._metadata_changed()
        return self.stream(path)

    def edit_stream(self, path: str, /, **stream_policies: Any) -> StreamInfo:
        """Change some policies of the stream; the others keep their values. The result is
        checked whole, so a stored bad value (an old catalog) must be replaced in the edit."""
        self.check_open()
        names.validate_stream_path(path)
        row = self.catalog.stream(path)
        self.authorize(row, "admin_perm")
        checked = policies.validate(stream_policies, base=row.policies)
        self._check_reach(checked, row.policies)
        self.catalog.set_policies(path, checked)
        self._metadata_changed()
        return self.stream(path)

    def _check_reach(self, new: Mapping[str, Any], old: Mapping[str, Any]) -> None:
        """AccessDenied unless a cluster administrator sets a policy that makes the cluster
        write outside its directory (`archive_uri`; DESIGN, security model)."""
        for name, value in new.items():
            if policies.reaches_outside(name, old.get(name), value) and not self.is_administrator:
                raise AccessDenied(
                    f"only a cluster administrator may set {name} (it makes this cluster "
                    f"write outside its directory); user {self.principal.user!r} is not one"
                )

    def delete_stream(self, path: str) -> None:
        """Delete the stream with all its topics, messages and committed offsets."""
        self.check_open()
        names.validate_stream_path(path)
        self.authorize(self.catalog.stream(path), "admin_perm")
        self._purge(self.catalog.delete_stream(path))
        self._metadata_changed()

    def stream(self, path: str) -> StreamInfo:
        self.check_open()
        names.validate_stream_path(path)
        return self._stream_info(self.catalog.stream(path))

    def streams(
        self, prefix: str | None = None, limit: int | None = None, offset: int = 0
    ) -> list[StreamInfo]:
        """Streams ordered by path; `prefix` keeps those whose path starts with it."""
        self.check_open()
        _check_paging(limit, offset)
        return [self._stream_info(row) for row in self.catalog.streams(prefix, limit, offset)]

    def stream_count(self, prefix: str | None = None) -> int:
        self.check_open()
        return self.catalog.stream_count(prefix)

    def _stream_info(self, row: StreamRow) -> StreamInfo:
        messages, nbytes = self.catalog.archived_usage(row.id)
        for vol in self.open_volumes().values():
            m, b = vol.stream_usage(row.id)
            messages += m
            nbytes += b
        return StreamInfo(
            row.path,
            dict(row.policies),
            row.creator,
            row.created_ms,
            row.topic_count,
            nbytes,
            messages,
        )

    # --- topics ---------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        policies: Mapping[str, Any] | None = None,
    ) -> TopicInfo:
        """Create the topic `name` (a full name); `partitions` defaults to the stream's
        `default_partitions`; `policies` are the topic's own overrides of its stream's
        (those `engine.policies.TOPIC_POLICIES` names; None values are left out)."""
        self.check_open()
        stream_path, topic = names.split_full_name(name)
        row = self.catalog.stream(stream_path)
        self.authorize(row, "topic_perm")
        count = row.policies["default_partitions"] if partitions is None else partitions
        _check_partition_count(count)
        own = policy_table.validate_overrides(policies or {})
        self.catalog.create_topics(
            row.id, [(topic, count)], exist_ok=False, overrides={topic: own} if own else None
        )
        self._metadata_changed()
        return self.topic(name)

    def auto_create_topics(self, full_names: Sequence[str]) -> dict[str, int]:
        """Create the topics of `full_names` that do not exist, as a first produce would:
        in streams whose `auto_create` policy allows it and whose topic_perm this cluster's
        principal passes, with the stream's `default_partitions`, in one catalog
        transaction per stream (a wire client's Metadata request may name thousands).
        Returns the partition count of every name that exists afterwards; the others (a
        stream missing, not auto-creating or not allowed) are left out, for the caller to
        ask about one by one. Raises `InvalidName` for a name that is not a full name."""
        self.check_open()
        by_stream: dict[str, list[str]] = defaultdict(list)
        for full in full_names:
            stream_path, topic = names.split_full_name(full)
            by_stream[stream_path].append(topic)
        counts: dict[str, int] = {}
        created = False
        for stream_path, topics in by_stream.items():
            try:
                row = self.catalog.stream(stream_path)
                if not row.policies.get("auto_create"):
                    continue
                self.authorize(row, "topic_perm", what="create topics (auto-create) in")
            except (UnknownStream, AccessDenied):
                continue
            partitions = row.policies["default_partitions"]
            found, _ = self.catalog.ensure_topics(row.id, sorted(set(topics)), partitions)
            for topic, ensured in found.items():
                counts[names.full_name(stream_path, topic)] = ensured.partitions
                created = created or ensured.created
        if created:
            self._metadata_changed()
        return counts

    def edit_topic(self, name: str, /, **topic_policies: Any) -> TopicInfo:
        """Change the topic's own overrides of its stream's policies; None removes one (the
        stream's value applies again). Needs the stream's `topic_perm`, as creating does.
        `name` is positional only, so a policy named "name" is refused as unknown."""
        self.check_open()
        row = self._topic_row(name)
        self.authorize(
            self.catalog.stream_by_id(row.stream_id), "topic_perm", what="edit topics of"
        )
        own = policy_table.validate_overrides(topic_policies, base=row.overrides)
        self.catalog.set_topic_policies(row.id, own)
        self._metadata_changed()
        return self.topic(name)

    def delete_topic(self, name: str) -> None:
        """Delete the topic with its messages and committed offsets."""
        self.check_open()
        row = self._topic_row(name)
        self.authorize(self.catalog.stream_by_id(row.stream_id), "topic_perm")
        self._purge(self.catalog.delete_topic(row))
        self._metadata_changed()

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow the topic to `count` partitions in all (never fewer)."""
        self.check_open()
        row = self._topic_row(name)
        self.authorize(
            self.catalog.stream_by_id(row.stream_id),
            "topic_perm",
            what="add partitions to topics of",
        )
        _check_partition_count(count)
        if count < row.partitions:
            raise InvalidPartition(
                f"topic {row.full_name} has {row.partitions} partitions; the count can only "
                f"grow, not shrink to {count}"
            )
        if count > row.partitions:
            self.catalog.set_partitions(row.id, count)
            self._metadata_changed()
        return self.topic(name)

    def topic(self, name: str) -> TopicInfo:
        self.check_open()
        return self._topic_infos([self._topic_row(name)])[0]

    def partition_count(self, name: str) -> int:
        """How many partitions the topic `name` has (`UnknownTopic` if none): one catalog
        row, where `topic()` describes every partition's partitionlets and offsets."""
        self.check_open()
        return self._topic_row(name).partitions

    def topics(
        self,
        stream: str,
        prefix: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        *,
        after: str | None = None,
    ) -> list[TopicInfo]:
        """Topics of `stream` ordered by name; `prefix` keeps names that start with it.

        Page with `offset`, or with `after` (the last name of the previous page, within the
        stream), which costs the same on every page of a stream of millions."""
        return self._topic_infos(self._topic_page(stream, prefix, limit, offset, after))

    def topic_names(
        self,
        stream: str,
        prefix: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        *,
        after: str | None = None,
    ) -> list[str]:
        """Full names of the topics of `stream`, ordered; cheaper than `topics()`, which
        also reads every partition's offsets."""
        return [t.full_name for t in self._topic_page(stream, prefix, limit, offset, after)]

    def _topic_page(
        self, stream: str, prefix: str | None, limit: int | None, offset: int, after: str | None
    ) -> list[TopicRow]:
        self.check_open()
        names.validate_stream_path(stream)
        _check_paging(limit, offset)
        row = self.catalog.stream(stream)
        return self.catalog.topics(row.id, prefix, limit, offset, after)

    def topic_count(self, stream: str, prefix: str | None = None) -> int:
        self.check_open()
        names.validate_stream_path(stream)
        return self.catalog.topic_count(self.catalog.stream(stream).id, prefix)

    def search(
        self,
        text: str,
        *,
        limit: int = 50,
        offset: int = 0,
        stream: str | None = None,
        perm: str | None = None,
    ) -> SearchResult:
        """Streams and topics whose names contain `text` anywhere (case folded), across all
        streams (or the topics of `stream`): the exact name first, then names starting with
        it, then the rest; streams before topics; then by name (engine/name_search.py).

        `text` needs 3 characters or more (`InvalidArgument` otherwise: the trigram index
        answers nothing shorter). Names are not secret, as in `streams()` and `topics()`,
        so every stream is searched; `perm` (an ACE such as "consume_perm") keeps only
        the streams, and their topics, that this cluster's principal satisfies it on."""
        self.check_open()
        _check_paging(limit, offset)
        if not isinstance(text, str):
            raise InvalidArgument(f"the search text must be a string, got {text!r}")
        text = text.strip()
        if len(text) < name_search.MIN_CHARS:
            raise InvalidArgument(
                f"type at least {name_search.MIN_CHARS} characters to search names "
                f"(got {text!r}): names are found by any {name_search.MIN_CHARS} "
                "characters in a row"
            )
        if len(text) > name_search.MAX_TEXT:
            raise InvalidArgument(
                f"the search text is longer than {name_search.MAX_TEXT} characters, "
                "longer than any name"
            )
        if perm is not None and perm not in _PERM_VERBS:
            raise InvalidArgument(f"perm must be one of {', '.join(_PERM_VERBS)}, not {perm!r}")
        stream_id = None
        if stream is not None:
            names.validate_stream_path(stream)
            stream_id = self.catalog.stream(stream).id
        stream_rows, topic_rows, capped = self.catalog.search_names(
            text, name_search.MATCH_CAP, stream_id
        )
        if stream_id is not None:
            stream_rows = []
        hits = [
            name_search.SearchHit(
                "stream",
                r.path,
                r.path,
                None,
                name_search.match_kind(r.path, text),
                None,
                r.created_ms,
            )
            for r in stream_rows
        ] + [
            name_search.SearchHit(
                "topic",
                r.full_name,
                r.stream,
                r.name,
                name_search.match_kind(r.name, text),
                r.partitions,
                r.created_ms,
            )
            for r in topic_rows
        ]
        if perm is not None:
            allowed: dict[str, bool] = {}
            for path in {h.stream for h in hits}:
                try:
                    self.authorize(path, perm)
                    allowed[path] = True
                except (AccessDenied, UnknownStream):
                    allowed[path] = False
            hits = [h for h in hits if allowed[h.stream]]
        hits.sort(key=name_search.rank_key)
        return name_search.SearchResult(
            text, hits[offset : offset + limit], len(hits), capped, limit, offset
        )

    def topic_listing(
        self,
        *,
        sort: str = "name",
        descending: bool = False,
        after: str | None = None,
        limit: int = 50,
    ) -> TopicPage:
        """A page of the topics of every stream, in `sort` order ("name", "stream",
        "partitions" or "created"), after the cursor `after` (a previous page's
        `next_after`). Keyset paging: every page costs the same at a million topics. Names
        are not secret (as `topics()`): no ACE is checked."""
        self.check_open()
        if sort not in name_search.LISTING_SORTS:
            raise InvalidArgument(
                f"sort must be one of {', '.join(name_search.LISTING_SORTS)}, not {sort!r}"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidArgument(f"limit must be a whole number from 1 to 1000, got {limit!r}")
        key = None if after is None else _listing_key(sort, after)
        rows = self.catalog.topic_listing(sort, bool(descending), key, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        entries = [
            name_search.TopicEntry(r.full_name, r.stream, r.name, r.partitions, r.created_ms)
            for r in rows
        ]
        next_after = None
        if more:
            last = rows[-1]
            next_after = {
                "name": f"{last.name}~{last.stream_id}",
                "partitions": f"{last.partitions}~{last.id}",
                "created": str(last.id),
                "stream": f"{last.stream}~{last.name}",
            }[sort]
        return name_search.TopicPage(entries, sort, bool(descending), next_after)

    def _topic_row(self, name: str) -> TopicRow:
        stream_path, topic = names.split_full_name(name)
        return self.catalog.topic(stream_path, topic)

    def _topic_infos(self, rows: list[TopicRow]) -> list[TopicInfo]:
        chains: dict[tuple[int, int], list[PartitionletRow]] = defaultdict(list)
        for pl in self.catalog.chains([r.id for r in rows]):
            chains[(pl.topic_id, pl.partition)].append(pl)
        states = self._partitionlet_states([pl for chain in chains.values() for pl in chain])
        starts = self.catalog.log_starts([r.id for r in rows])
        infos = []
        parsed = self._parsed_policies
        for row in rows:
            parts = []
            for number in range(row.partitions):
                lets = [
                    self._partitionlet_info(row.full_name, pl, states.get(pl.id))
                    for pl in chains.get((row.id, number), ())
                ]
                parts.append(
                    _partition_info(row.full_name, number, lets, starts.get((row.id, number), 0))
                )
            text = row.stream_policies_json
            stream_set = parsed.get(text)
            if stream_set is None:
                if len(parsed) >= _PARSED_POLICIES:
                    parsed.clear()
                stream_set = parsed[text] = json.loads(text)
            own = row.overrides
            infos.append(
                TopicInfo(
                    row.full_name,
                    row.stream,
                    row.name,
                    parts,
                    row.created_ms,
                    policy_table.effective(stream_set, own),  # a copy: the cache stays
                    own,
                )
            )
        return infos

    def _partitionlet_states(self, pls: list[PartitionletRow]) -> dict[int, PartitionletState]:
        by_volume: dict[int, list[int]] = defaultdict(list)
        for pl in pls:
            by_volume[pl.volume_id].append(pl.id)
        states: dict[int, PartitionletState] = {}
        for volume_id, ids in by_volume.items():
            if self._vols[volume_id].damage is None:  # a damaged one's are not known
                states.update(self._vols[volume_id].states(ids))
        return states

    def _partitionlet_info(
        self, topic: str, pl: PartitionletRow, state: PartitionletState | None
    ) -> PartitionletInfo:
        if pl.archive_file is not None:
            from engine.storage import archive  # pyarrow: loaded when an archive is met

            return PartitionletInfo(
                pl.id, topic, pl.partition, pl.volume_id, pl.base_offset,
                (pl.end_offset or pl.base_offset) - 1, False, pl.archive_bytes or 0,
                pl.archive_messages or 0, pl.first_ts, pl.max_ts, pl.created_ms,
                "archive", archive.file_uri(self.path, pl.archive_file),
            )  # fmt: skip
        damage = self._vols[pl.volume_id].damage if pl.volume_id in self._vols else None
        if damage is not None:  # what the catalog knows: the range, and a sealed one's size
            end = pl.end_offset
            if end is None:
                end = max(pl.base_offset, pl.reached_offset or 0)
            return PartitionletInfo(
                pl.id, topic, pl.partition, pl.volume_id, pl.base_offset, end - 1, pl.active,
                pl.bytes, end - pl.base_offset, pl.first_ts, pl.max_ts, pl.created_ms,
                damage=damage,
            )  # fmt: skip
        if state is None:  # created in the catalog, nothing appended yet
            end = pl.end_offset if pl.end_offset is not None else pl.base_offset
            return PartitionletInfo(
                pl.id,
                topic,
                pl.partition,
                pl.volume_id,
                pl.base_offset,
                end - 1,
                pl.active,
                0,
                0,
                None,
                None,
                pl.created_ms,
            )
        end = state.next_offset if pl.end_offset is None else pl.end_offset
        return PartitionletInfo(
            pl.id,
            topic,
            pl.partition,
            pl.volume_id,
            pl.base_offset,
            end - 1,
            pl.active and state.state == ACTIVE,
            state.bytes,
            state.messages,
            state.first_ts,
            state.max_ts,
            state.created_ms,
        )

    # --- partitionlets and volumes --------------------------------------------------------

    def partitionlets(self, topic: str | None = None) -> list[PartitionletInfo]:
        """Every partitionlet (of one topic, when given), by topic, partition and offset."""
        self.check_open()
        if topic is not None:
            row = self._topic_row(topic)
            rows, topic_names = self.catalog.chains([row.id]), {row.id: row.full_name}
        else:
            rows = self.catalog.all_partitionlets()
            topic_names = {}
            for topic_id in {pl.topic_id for pl in rows}:
                t = self.catalog.topic_by_id(topic_id)
                if t is not None:
                    topic_names[topic_id] = t.full_name
        states = self._partitionlet_states(rows)
        return [
            self._partitionlet_info(topic_names[pl.topic_id], pl, states.get(pl.id))
            for pl in rows
            if pl.topic_id in topic_names
        ]

    def totals(self) -> ClusterTotals:
        """Streams, topics, messages and bytes of the whole cluster."""
        self.check_open()
        streams, topics = self.catalog.totals()
        messages, data = self.catalog.archived_usage()
        for vol in self.open_volumes().values():
            m, b = vol.usage_totals()
            messages += m
            data += b
        return ClusterTotals(streams, topics, messages, data)

    def volumes(self) -> list[VolumeInfo]:
        self.check_open()
        infos = []
        damaged = self.damaged_volumes()
        placed = Counter(self.catalog.partitionlet_volumes().values()) if damaged else Counter()
        for volume_id, vol in sorted(self._vols.items()):
            if vol.damage is not None:
                infos.append(
                    VolumeInfo(
                        volume_id, str(vol.path), vol.file_bytes(), 0, placed[volume_id], 0, 0,
                        vol.damage,
                    )
                )  # fmt: skip
                continue
            data_bytes, count, active = vol.sizes()
            infos.append(
                VolumeInfo(
                    volume_id,
                    str(vol.path),
                    vol.file_bytes(),
                    data_bytes,
                    count,
                    active,
                    vol.recent_write_bytes(),
                )
            )
        return infos

    def heat(
        self,
        window_s: int = 300,
        *,
        top: int | None = None,
        by: str = "messages",
        include: Sequence[TopicPartition] = (),
        columns: int | None = None,
    ) -> HeatMap:
        """Messages and bytes written and read per second over the last `window_s`
        seconds, per volume, topic, partition and partitionlet, and per time bucket.
        With `top`, only the `top` hottest partitions by `by` ("messages", "bytes",
        "write_messages", ...) and those in `include` are listed, with their topics, and
        no partitionlets: what a console shows, fast when 100,000 partitions are warm.
        With `columns`, the series have at most that many entries of whole buckets each
        (`bucket_s` is then a column's length), served mostly from a cache: a heat map."""
        self.check_open()
        return heat_map(self, window_s, top, by, include, columns)

    # --- metrics history (engine/ops/metrics.py) ------------------------------------------

    def record_metrics(self) -> MetricsReport:
        """Add to the metrics history every minute of throughput completed since the last
        record, the consumer groups' and replication links' lag now, and the hours' roll-ups;
        drop what is older than the history keeps. `plet web` and `plet replicate` do it
        every minute (engine.ops.maintenance)."""
        self.check_open()
        return metrics.record(self)

    def metrics(
        self,
        scope: str = "cluster",
        name: str = "",
        *,
        metric: str = "write_messages",
        window_s: int = 3600,
    ) -> MetricSeries:
        """One series of the metrics history over the last `window_s` seconds, a point per
        minute (windows of up to a day) or hour: `scope` "cluster" (no name), "stream" (a
        path), "topic" (a full name) with `metric` write_messages, write_bytes,
        read_messages or read_bytes (per second); "group" (a group id) with lag_messages;
        "replica" (`engine.ops.metrics.replica_name(stream, target)`) with copied_messages,
        copied_bytes (per second), lag_messages or lag_seconds.

        A stream's or topic's series needs its consume permission, a group's the group's
        describe_perm (AccessDenied; administrators pass): a topic's load is its
        consumers' to see (docs/WEB.md, "What users see")."""
        self.check_open()
        found = metrics.series(self, scope, name, metric, window_s)
        self._check_measure(scope, found.name)
        return found

    def _check_measure(self, scope: str, name: str) -> None:
        if self.is_administrator:
            return
        if scope in ("stream", "topic"):
            stream = names.split_full_name(name)[0] if scope == "topic" else name
            try:
                self.authorize(stream, "consume_perm", what="see the metrics of")
            except UnknownStream:
                return  # nothing to hide: the series is empty
        elif scope == "group":
            GroupAdmin(self).access.check(name, "describe_perm", "see the metrics of")

    def _may_measure(self, scope: str, name: str) -> bool:
        try:
            self._check_measure(scope, name)
        except (AccessDenied, InvalidName):
            return False
        return True

    def busiest(
        self, scope: str, *, metric: str = "write_messages", window_s: int = 3600, limit: int = 10
    ) -> list[tuple[str, float]]:
        """The names of `scope`'s series (streams, topics, groups, links) with the most
        `metric` in the metrics history's last `window_s` seconds, with the average rate
        (counters) or the sum of readings (gauges), most first."""
        self.check_open()
        if self.is_administrator:
            return metrics.busiest(self, scope, metric, window_s, limit)
        # what this principal may see of them (`metrics`), the busiest first
        found = metrics.busiest(self, scope, metric, window_s, max(limit, 1000))
        return [(n, v) for n, v in found if self._may_measure(scope, n)][:limit]

    # --- consumer groups ------------------------------------------------------------------

    def groups(self) -> list[GroupInfo]:
        """Every group that has members or committed offsets, by id."""
        return GroupAdmin(self).groups()

    def group(self, group_id: str) -> GroupInfo:
        """Members, assignment, committed offsets and lag of a group."""
        return GroupAdmin(self).group(group_id)

    def group_kinds(self, group_id: str) -> frozenset[str]:
        """Who the group's live members are: "engine" (`engine.Consumer`s), "wire" (Kafka
        clients of a `plet serve` listener, published with `publish_group`); empty when it
        has none. Each kind refuses to join a group the other holds (docs/WIRE.md)."""
        return GroupAdmin(self).kinds(group_id)

    def publish_group(
        self,
        group_id: str,
        members: Sequence[MemberInfo],
        *,
        protocol: str,
        generation: int,
        session_ms: int,
    ) -> None:
        """Make a Kafka wire listener's members of a group the engine's: replaces, in one
        catalog transaction, every wire member of the group with `members` (their rows in
        the group, the partitions of their `assignment` as owned by them, and the group's
        assignment, `generation` and `protocol`, the clients' assignor). An empty `members`
        withdraws them. A member is live while `last_heartbeat_ms + session_ms` is not past,
        the rule engine consumers follow, so the publisher refreshes them (publishing again)
        more often than `session_ms`; `cluster.group()`, `plet group describe`, the consoles
        and `reset_offsets` see them. Partitions of topics that no longer exist are left
        out (and partitions past their count). Raises IllegalState while engine consumers
        are live members of the group."""
        GroupAdmin(self).publish(group_id, members, protocol, generation, session_ms)

    def reset_offsets(
        self,
        group_id: str,
        topic: str,
        to: ResetTo,
        *,
        partitions: Sequence[int] | None = None,
    ) -> dict[TopicPartition, int]:
        """Set the group's committed offsets in every partition of `topic` (or those of
        `partitions`) to "earliest", "latest", an offset, the first message at or after a
        time, or the committed offset shifted by N ("shift:-N", "shift:+N"); offsets and
        shifts are clamped to what the partition holds. A naive datetime is UTC
        (DESIGN.md: a time without a zone is UTC), not the machine's local time. The group
        must have no live members (as Kafka requires), so nobody commits over the reset.
        Applies exactly what `plan_offset_reset` gives, in one transaction."""
        plans = self.plan_offset_reset(group_id, topic, to, partitions=partitions)
        return self.apply_offset_reset(group_id, plans)

    def plan_offset_reset(
        self,
        group_id: str,
        topic: str,
        to: ResetTo,
        *,
        partitions: Sequence[int] | None = None,
    ) -> list[OffsetResetPlan]:
        """What `reset_offsets` with the same arguments would do, per partition (in
        partition order), without changing anything: a preview. Raises as it does (live
        members, admin_perm, a bad target or partition; a shift where the group has no
        committed offset)."""
        return GroupAdmin(self).plan_reset(group_id, topic, to, partitions)

    def apply_offset_reset(
        self, group_id: str, plans: Sequence[OffsetResetPlan]
    ) -> dict[TopicPartition, int]:
        """Commit exactly the new offsets of `plans` (from `plan_offset_reset`), in one
        transaction. Raises IllegalState, changing nothing, when the group has live members
        or a partition's committed offset is no longer the plan's `current`, and
        InvalidOffset when a new offset is now outside the log (retention moved its start):
        plan again then."""
        return GroupAdmin(self).apply_reset(group_id, plans)

    def delete_group(self, group_id: str) -> None:
        """Remove a group: its committed offsets, assignment and expired members. Refused
        (IllegalState) while it has live members, engine consumers or Kafka clients of a
        wire listener; needs admin_perm on every stream it has offsets in."""
        GroupAdmin(self).delete(group_id)

    def delete_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, bool]:
        """Remove the group's committed offsets of these partitions (Kafka's OffsetDelete),
        except in topics its live members read: {partition: True if removed (or there was
        none), False if kept because a live member reads its topic}. Needs the group's
        delete_perm; an unknown group raises UnknownGroup."""
        return GroupAdmin(self).delete_offsets(group_id, partitions)

    def group_permissions(self, group_id: str) -> GroupPermissions:
        """Who may join, commit into, describe, reset and delete the group: its creator,
        each permission's ACE and where it comes from, and what this cluster's principal
        may do (engine.groups.perms; docs/WIRE.md, "Group permissions")."""
        return GroupAdmin(self).permissions(group_id)

    def set_group_permissions(
        self, group_id: str, *, prefix: bool = False, **aces: str | None
    ) -> None:
        """Set ACEs of a group (`join_perm="g:etl"`, ...; "" is the default again,
        `u:<creator>`), or of every group id starting with `group_id` (`prefix`, an
        administrator's). A group's rules are its creator's or an administrator's."""
        GroupAdmin(self).access.set_rules(group_id, prefix, aces)

    def group_permission_rules(self) -> list[GroupRule]:
        """Every group permission rule set (by group id or prefix), by pattern."""
        return GroupAdmin(self).access.rules()

    def authorize_group(
        self, group_id: str, perm: str, *, topics: Sequence[str] = (), claim: bool = True
    ) -> None:
        """Raise AccessDenied unless this cluster's principal passes `perm` of the group.
        For "join_perm" and "commit_perm", a group without a creator becomes the
        principal's: creating one needs the consume permission of one of `topics` (full
        names it subscribes to or commits), under the per-user group limit. With `claim`
        false the permission is only checked (a member's heartbeat: it joined already)."""
        GroupAdmin(self).authorize(group_id, perm, topics, claim=claim)

    def set_group_limit(self, limit: int) -> None:
        """How many groups one user may create (an administrator's setting; default 1,000)."""
        GroupAdmin(self).access.set_limit(limit)

    # --- idempotent producers (engine.storage.producers; docs/ARCHITECTURE.md) ------------

    def init_producer_id(self) -> tuple[int, int]:
        """A new producer id, and its epoch (0), issued to this cluster's principal: what
        an idempotent producer (`Producer.send_batch(idempotent=...)`, Kafka's
        InitProducerId) writes its batches with. Every process that opens the cluster
        knows it, until it is unused for `PRODUCER_ID_EXPIRY_MS`."""
        self.check_open()
        self.check_may_change("produce")
        row = self.catalog.producers.issue(self.principal.user, self.clock.now_ms())
        return row.id, row.epoch

    def producer_epoch(self, producer_id: int) -> int | None:
        """The epoch of a producer id that this cluster issued to this principal; None when
        it did not (made up, another user's, or expired). Using it counts as a use for its
        expiry, recorded at most once a minute."""
        self.check_open()
        row = self.catalog.producers.get(producer_id)
        if row is None or row.principal != self.principal.user:
            return None
        now = self.clock.now_ms()
        if now - row.last_used_ms > 60_000:
            self.catalog.producers.touch(producer_id, now)
        return row.epoch

    def expire_producer_ids(self) -> int:
        """Forget the producer ids unused for `PRODUCER_ID_EXPIRY_MS` (Kafka's
        `producer.id.expiration.ms`); returns how many. Maintenance calls it."""
        self.check_open()
        return self.catalog.producers.expire(self.clock.now_ms() - PRODUCER_ID_EXPIRY_MS)

    # --- scan plans (engine.storage.scan; docs/SPARK.md) -----------------------------------

    def scan_ranges(
        self,
        topics: Sequence[str],
        *,
        starting: scan.OffsetSpec = "earliest",
        ending: scan.OffsetSpec = "latest",
        starting_timestamp: int | None = None,
        ending_timestamp: int | None = None,
        principal: Principal | None = None,
        isolation_level: str = "read_uncommitted",
    ) -> dict[TopicPartition, tuple[int, int]]:
        """The offsets [start, end) to scan in every partition of `topics` (full names),
        clamped to what the partition holds. `starting` and `ending` are "earliest",
        "latest", or {TopicPartition: offset, "earliest" or "latest"} (a partition left out
        starts at the earliest and ends at the latest). `starting_timestamp` moves the
        start up to the first message at or after it, `ending_timestamp` the end down to
        it (ms since the epoch; Kafka's meaning). With `isolation_level="read_committed"`
        a partition ends at its last stable offset (Kafka's), not its log end offset.
        Needs consume_perm on every stream, as this cluster's principal or `principal`."""
        self.check_open()
        return scan.ranges(
            self._cat,
            self.reader,
            topics,
            check=self._consume_check(principal),
            now_ms=self.clock.now_ms(),
            starting=starting,
            ending=ending,
            starting_timestamp=starting_timestamp,
            ending_timestamp=ending_timestamp,
            isolation_level=isolation_level,
        )

    def scan_plan(
        self,
        ranges: Mapping[TopicPartition, tuple[int, int]],
        *,
        principal: Principal | None = None,
        isolation_level: str = "read_uncommitted",
    ) -> list[scan.ScanTask]:
        """One `ScanTask` per partitionlet that meets a range [start, end) of `ranges`
        (as `scan_ranges` gives them, or a streaming reader's own), in topic, partition and
        offset order; `engine.storage.scan.read(task)` reads one without opening the
        cluster. With `isolation_level="read_committed"` no range goes past its partition's
        last stable offset and the tasks leave aborted transactions out (`ScanTask.skip`).
        Needs consume_perm on every stream."""
        self.check_open()
        return scan.plan(
            self._cat,
            self.path,
            self._vols,
            ranges,
            check=self._consume_check(principal),
            now_ms=self.clock.now_ms(),
            isolation_level=isolation_level,
        )

    def _consume_check(self, principal: Principal | None) -> scan.ConsumeCheck:
        def check(row: StreamRow) -> None:
            self.authorize(row, "consume_perm", principal)

        return check

    # --- maintenance ----------------------------------------------------------------------

    def enforce_retention(self) -> RetentionReport:
        """Drop partitionlets whose messages have all expired (the streams' `ttl`)."""
        self.check_open()
        self.check_may_change("enforce retention")
        return retention.enforce_retention(self)

    def compact(self) -> CompactionReport:
        """Keep the latest message per key in the partitionlets of compacted streams."""
        self.check_open()
        self.check_may_change("compact")
        return retention.compact(self)

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Delete the messages of a partition below `before_offset` (Kafka's DeleteRecords):
        its log start moves to exactly that offset, and every reader (consumers, the wire
        listener, scans, `topic()`) starts there. Storage goes a partitionlet at a time:
        the sealed ones, live or archived, that lie wholly below it are dropped now, one
        that straddles it when it is sealed and retention runs. Returns the log start
        after it (never lower than before); an offset past the log end offset is refused.
        Needs the stream's `topic_perm`, as deleting its topics does."""
        self.check_open()
        row = self._topic_row(topic)
        self.authorize(
            self.catalog.stream_by_id(row.stream_id), "topic_perm", what="delete records of"
        )
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise InvalidPartition(f"a partition is an int, not {partition!r}")
        if not 0 <= partition < row.partitions:
            raise InvalidPartition(
                f"topic {row.full_name} has partitions 0 to {row.partitions - 1}, not {partition}"
            )
        if (
            isinstance(before_offset, bool)
            or not isinstance(before_offset, int)
            or before_offset < 0
        ):
            raise InvalidOffset(f"before_offset must be an offset >= 0, got {before_offset!r}")
        end = self.partition_log(row.id, partition, row.full_name).end_offset()
        if before_offset > end:
            raise InvalidOffset(
                f"{row.full_name} partition {partition} ends at offset {end}: cannot delete "
                f"records below {before_offset}"
            )
        return retention.delete_records(self, row.id, row.full_name, partition, before_offset)

    def archive(self, stream: str | None = None) -> ArchiveReport:
        """Move sealed partitionlets older than their stream's `archive_after` to the
        archive tier (one Parquet file each; docs/ARCHIVE.md), of one stream or of all;
        report what moved."""
        self.check_open()
        self.check_may_change("archive")
        from engine.ops import archive

        if stream is not None:
            names.validate_stream_path(stream)
            self.catalog.stream(stream)  # UnknownStream if there is none
        return archive.archive(self, stream)

    def rebalance(self, *, dry_run: bool = False, max_moves: int | None = None) -> RebalanceReport:
        """Move sealed partitionlets between volumes to even out bytes and heat; report
        what moved (or, with `dry_run`, what would)."""
        self.check_open()
        if not dry_run:
            self.check_may_change("move partitionlets")
        return balance.rebalance(self, dry_run=dry_run, max_moves=max_moves)

    # --- replication (engine.replication) ------------------------------------------------
    # engine.replication is built on this class (it opens other cluster directories), so
    # this module does not import it: these methods forward to what it registered
    # (`register_replication`, below) when it was imported; engine/__init__ imports it.

    def add_replica(
        self,
        stream: str,
        target: str | os.PathLike[str],
        target_stream: str | None = None,
        paused: bool = False,
    ) -> ReplicaInfo:
        """Replicate `stream` to `target` (another cluster's directory): create the target
        stream with the same policies when missing, copy what exists (unless `paused`),
        and let `engine.Replicator` follow. Needs a cluster administrator
        (`is_administrator`: the link makes this cluster reach another directory or host),
        copy_perm here and admin_perm on an existing target stream. Returns the link's
        `ReplicaInfo`."""
        self.check_open()
        return _replication().add_replica(self, stream, target, target_stream, paused)

    def replicas(self, stream: str) -> list[ReplicaInfo]:
        """The links out of `stream` (`ReplicaInfo`: target, target_stream, state, lag,
        error, conflict, throughput)."""
        self.check_open()
        return _replication().replicas(self, stream)

    def upstreams(self, stream: str) -> list[UpstreamInfo]:
        """The links into `stream` (`UpstreamInfo`: source, source_stream, source_id)."""
        self.check_open()
        return _replication().upstreams(self, stream)

    def pause_replica(self, stream: str, target: str | os.PathLike[str]) -> None:
        self.check_open()
        _replication().pause_replica(self, stream, target)

    def resume_replica(self, stream: str, target: str | os.PathLike[str]) -> None:
        """Resume a paused link, or re-check one in conflict after it was resolved."""
        self.check_open()
        _replication().resume_replica(self, stream, target)

    def remove_replica(self, stream: str, target: str | os.PathLike[str]) -> None:
        self.check_open()
        _replication().remove_replica(self, stream, target)

    def create_replication_token(self, stream: str) -> str:
        """Issue a token with which another cluster may replicate into `stream` of this one
        over HTTP (through `plet web`); only its SHA-256 is stored. Needs admin_perm on the
        stream when it exists, a cluster administrator when it does not (the token lets the
        other cluster create it). The source gives it as `https://TOKEN@host:port`."""
        self.check_open()
        return _replication().create_token(self, stream)

    def replication_tokens(self, stream: str | None = None) -> list[ReplicationTokenInfo]:
        """The replication tokens issued here (`ReplicationTokenInfo`: id, stream,
        created_ms, created_by, last_used_ms; never the token), of one stream when given.
        A cluster administrator sees all; others, those of the streams they administer."""
        self.check_open()
        return _replication().tokens(self, stream)

    def revoke_replication_token(self, token_id: str) -> None:
        """Revoke the token `token_id` (as `replication_tokens` lists it): the target's API
        refuses it (401) from the next request on. Needs admin_perm on its stream, or a
        cluster administrator."""
        self.check_open()
        _replication().revoke_token(self, token_id)

    # --- console users (engine/users.py) --------------------------------------------------

    def add_user(
        self,
        name: str,
        password: str,
        *,
        groups: tuple[str, ...] | list[str] | str = (),
        admin: bool = False,
        read_only: bool = False,
    ) -> UserInfo:
        """Add a console user (`UserInfo`); an admin passes every ACE, a read-only user is
        refused every change (`check_may_change`)."""
        self.check_open()
        self.check_may_change("add users")
        return user_store.add_user(
            self, name, password, groups=groups, admin=admin, read_only=read_only
        )

    def user(self, name: str) -> UserInfo:
        self.check_open()
        return user_store.user(self, name)

    def users(self) -> list[UserInfo]:
        self.check_open()
        return user_store.users(self)

    def set_password(self, name: str, password: str) -> None:
        self.check_open()
        self._check_account_change(name, "set the password of")
        user_store.set_password(self, name, password)

    def _check_account_change(self, name: str, what: str) -> None:
        """A read-only user still keeps their own account (password, API tokens): it is no
        change of the cluster, and a password must be changeable when it leaked."""
        if name != self.principal.user:
            self.check_may_change(f"{what} other users")

    def edit_user(
        self,
        name: str,
        *,
        groups: tuple[str, ...] | list[str] | str | None = None,
        admin: bool | None = None,
        read_only: bool | None = None,
    ) -> UserInfo:
        """Change a user's groups, admin flag and read-only flag (None: keep)."""
        self.check_open()
        self.check_may_change("edit users")
        return user_store.edit_user(self, name, groups=groups, admin=admin, read_only=read_only)

    def delete_user(self, name: str) -> None:
        self.check_open()
        self.check_may_change("delete users")
        user_store.delete_user(self, name)

    def authenticate(self, name: str, password: str) -> UserInfo | None:
        """The `UserInfo` when `password` is the user's, else None; throttled per name
        (`errors.LoginThrottled`) and bounded in hashes at once (`errors.Busy`)."""
        self.check_open()
        return user_store.authenticate(self, name, password)

    def create_session(self, name: str, *, lifetime_s: float | None = None) -> str:
        """A new web console session of user `name` (its id, for the cookie)."""
        self.check_open()
        if lifetime_s is None:
            lifetime_s = user_store.SESSION_LIFETIME_S
        return user_store.create_session(self, name, lifetime_s=lifetime_s)

    def session_user(self, session_id: str, *, idle_s: float | None = None) -> UserInfo | None:
        """The `UserInfo` of a live session, or None once it ended."""
        self.check_open()
        if idle_s is None:
            idle_s = user_store.SESSION_IDLE_S
        return user_store.session_user(self, session_id, idle_s=idle_s)

    def end_session(self, session_id: str) -> None:
        self.check_open()
        user_store.end_session(self, session_id)

    def end_sessions(self, name: str) -> int:
        """End every web console session of user `name`."""
        self.check_open()
        return user_store.end_sessions(self, name)

    def create_api_token(
        self, name: str, label: str = "", *, expires_in: float | timedelta | str | None = None
    ) -> str:
        """A new API token for user `name`, returned once; only its hash is kept.
        `expires_in`: seconds, a timedelta or text such as "30d"; None: never."""
        self.check_open()
        self._check_account_change(name, "make API tokens of")
        return user_store.create_api_token(self, name, label, expires_in=expires_in)

    def api_tokens(self, name: str | None = None) -> list[ApiTokenInfo]:
        self.check_open()
        return user_store.api_tokens(self, name)

    def revoke_api_token(self, name: str, token_id: str) -> None:
        self.check_open()
        self._check_account_change(name, "revoke API tokens of")
        user_store.revoke_api_token(self, name, token_id)

    def user_for_token(self, token: str) -> UserInfo | None:
        """The `UserInfo` an API token belongs to, or None (`errors.TokenExpired` once it
        expired)."""
        self.check_open()
        return user_store.user_for_token(self, token)

    def effective_permissions(
        self, user: str, *, prefix: str | None = None, limit: int = 100, offset: int = 0
    ) -> EffectivePermissions:
        """A page of what console user `user` (with their groups and admin flag) may do on
        each stream, by path: `EffectivePermissions` of `StreamPermissions` (allowed, ACE
        text and reason per ACE policy). A cluster administrator may ask about anyone, a
        user about themselves; anyone else gets `AccessDenied` (engine/auth/effective.py)."""
        self.check_open()
        return effective.effective_permissions(
            self, user, prefix=prefix, limit=limit, offset=offset
        )

    # --- access control -------------------------------------------------------------------

    def may_consume(self, stream: str | StreamRow | StreamInfo) -> bool:
        """Whether this cluster's principal may read `stream`'s contents and what measures
        them (its topics' load and metrics history): an administrator, or whoever passes
        its consume_perm (docs/WEB.md, "What users see"). False for a stream that does
        not exist."""
        if self.is_administrator:
            return True
        try:
            self.authorize(stream, "consume_perm")
        except (AccessDenied, UnknownStream):
            return False
        return True

    def may_unmask(self, stream: str | StreamRow | StreamInfo) -> bool:
        """Whether this cluster's principal sees `stream`'s messages unmasked (its `mask`
        policy, engine.masking): an administrator (the library's own principal too: the
        files are the boundary there), or whoever passes its unmask_perm. False for a
        stream that does not exist."""
        if self.is_administrator:
            return True
        try:
            self.authorize(stream, "unmask_perm")
        except (AccessDenied, UnknownStream):
            return False
        return True

    def authorize(
        self,
        stream: str | StreamRow | StreamInfo,
        perm: str,
        principal: Principal | None = None,
        what: str | None = None,
    ) -> None:
        """Raise `AccessDenied` unless `principal` (default: the cluster's) satisfies the
        ACE `perm` (produce_perm, consume_perm, unmask_perm, topic_perm, copy_perm,
        admin_perm) of `stream`: a stream path (`errors.UnknownStream` if there is none), or a stream as
        the catalog or `stream()` gives it. `what` words the refusal ("reset offsets on")."""
        if perm not in _PERM_VERBS:
            raise InvalidArgument(f"perm must be one of {', '.join(_PERM_VERBS)}, not {perm!r}")
        if isinstance(stream, str):
            self.check_open()
            names.validate_stream_path(stream)
            stream = self._cat.stream(stream)
        who = principal or self.principal
        if perm not in effective.READS:  # every other ACE policy guards a change
            self.check_may_change(f"{what or _PERM_VERBS[perm]} stream {stream.path}", who)
        ace = stream.policies.get(perm)
        try:
            allowed = acl.check(ace, who, stream.creator, policy=perm)
        except InvalidPolicy as exc:
            # A stored ACE that does not parse (an old catalog): nobody but a super user
            # passes it, so an administrator can still repair or delete the stream.
            if getattr(who, "superuser", False):
                return
            raise AccessDenied(
                f"user {who.user!r} may not {what or _PERM_VERBS[perm]} stream {stream.path}: "
                f"its stored {perm} is not a valid ACE ({exc}); an administrator must edit it"
            ) from None
        if not allowed:
            verb = what or _PERM_VERBS[perm]
            raise AccessDenied(
                f"user {who.user!r} may not {verb} stream {stream.path}: {perm} is "
                f"{ace!r} (creator {stream.creator!r})"
            )

    # --- internals shared by producers and consumers ---------------------------------------

    def _metadata_changed(self) -> None:
        for watcher in list(self._watchers):
            watcher.forget_metadata()

    def _purge(self, pls: list[PartitionletRow]) -> None:
        """Free the space of a deleted topic's or stream's partitionlets (the catalog
        recorded them as pending in the delete's transaction): what cannot be freed now
        (a full disk) stays pending, so the delete has happened for every user anyway."""
        if pls:
            self.finish_purges()

    def pending_purges(self) -> int:
        """How many partitionlets of deleted topics and streams still hold space (a full
        disk kept their purge from finishing; `finish_purges` tries again)."""
        self.check_open()
        return len(self.catalog.pending_purges())

    def finish_purges(self) -> int:
        """Free the space of deleted topics and streams that is still pending: purge their
        partitionlets from the volumes and delete their archive files. What fails (a full
        disk) stays pending for the next call; opening the cluster, the next delete and
        the maintenance pass call it. Returns how many partitionlets are still pending."""
        self.check_open()
        pending = self.catalog.pending_purges()
        if not pending:
            return 0
        by_volume: dict[int, list[int]] = defaultdict(list)
        files: dict[int, str] = {}
        for pl_id, volume_id, archive_file in pending:
            if archive_file is not None:
                files[pl_id] = archive_file
            by_volume[volume_id].append(pl_id)
        done: list[int] = []
        for volume_id, ids in by_volume.items():
            try:
                vol = self._vols.get(volume_id)
                if vol is not None and vol.damage is not None:
                    continue  # stays pending until the file is back (`plet check` says so)
                if vol is not None:  # a volume removed from the cluster holds nothing
                    vol.purge(ids)
                for pl_id in ids:
                    name = files.get(pl_id)
                    if name is not None:
                        from engine.storage import archive  # pyarrow: loaded when needed

                        archive.delete(self.path, name)
                    done.append(pl_id)
            except StorageError as exc:
                log.warning(
                    "the space of %d deleted partitionlets on volume %d is not freed yet "
                    "(tried again later): %s",
                    len(ids),
                    volume_id,
                    exc,
                )
        try:
            self.catalog.purged(done)
        except StorageError as exc:  # purged already: the next call purges them again
            log.warning("could not record freed partitionlets: %s", exc)
        return len(pending) - len(done)


_PERM_VERBS = {
    "produce_perm": "produce to",
    "consume_perm": "consume from",
    "unmask_perm": "see the masked fields of",
    "topic_perm": "create or delete topics of",
    "copy_perm": "copy (replicate) the whole of",
    "admin_perm": "administer",
}


class ReplicationHooks(Protocol):
    """What the replication methods of `Cluster` forward to: engine.replication, which
    imports this module (it opens other cluster directories) and so registers itself here
    instead of being imported by it."""

    def add_replica(
        self,
        cluster: Cluster,
        stream: str,
        target: str | os.PathLike[str],
        target_stream: str | None,
        paused: bool,
    ) -> ReplicaInfo: ...

    def replicas(self, cluster: Cluster, stream: str) -> list[ReplicaInfo]: ...

    def upstreams(self, cluster: Cluster, stream: str) -> list[UpstreamInfo]: ...

    def pause_replica(
        self, cluster: Cluster, stream: str, target: str | os.PathLike[str]
    ) -> None: ...

    def resume_replica(
        self, cluster: Cluster, stream: str, target: str | os.PathLike[str]
    ) -> None: ...

    def remove_replica(
        self, cluster: Cluster, stream: str, target: str | os.PathLike[str]
    ) -> None: ...

    def create_token(self, cluster: Cluster, stream: str) -> str: ...

    def tokens(self, cluster: Cluster, stream: str | None) -> list[ReplicationTokenInfo]: ...

    def revoke_token(self, cluster: Cluster, token_id: str) -> None: ...


_CLOSE_HOOKS_LOCK = threading.Lock()
_replication_hooks: ReplicationHooks | None = None


# Parsed stream policy sets a Cluster keeps (a bound: streams may differ in every one).
_PARSED_POLICIES = 1024


def register_replication(hooks: ReplicationHooks) -> None:
    """Called once by engine.replication when it is imported."""
    global _replication_hooks
    _replication_hooks = hooks


def _replication() -> ReplicationHooks:
    if _replication_hooks is None:  # only if engine.cluster were loaded without `engine`
        raise IllegalState("engine.replication is not loaded: import engine")
    return _replication_hooks


def _refuse_foreign(root: Path) -> None:
    # Our own names are not foreign: another process may be creating this cluster now.
    ours = {
        LOCK_FILE,
        VOLUME_DIR,
        WAKE_DIR,
        CATALOG_FILE,
        f"{CATALOG_FILE}-wal",
        f"{CATALOG_FILE}-shm",
        f"{CATALOG_FILE}-journal",
    }
    others = sorted(p.name for p in root.iterdir() if p.name not in ours)
    if others:
        raise NotACluster(
            f"{root} is not empty and has no {CATALOG_FILE}: it is not a Partitionlet "
            f"cluster (found {', '.join(others[:5])})"
        )


def _volume_paths(volumes: int | Sequence[str | os.PathLike[str]]) -> list[str]:
    if isinstance(volumes, bool):
        raise InvalidArgument(f"volumes must be a count or a list of paths, got {volumes!r}")
    if isinstance(volumes, int):
        if not 1 <= volumes <= MAX_VOLUMES:
            raise InvalidArgument(f"volumes must be from 1 to {MAX_VOLUMES}, got {volumes}")
        return [f"{VOLUME_DIR}/vol-{i}.db" for i in range(1, volumes + 1)]
    paths = [os.fspath(p) for p in volumes]
    if not paths or len(set(paths)) != len(paths):
        raise InvalidArgument("volumes must name at least one file, each once")
    return paths


def _check_partition_count(count: object) -> None:
    if (
        isinstance(count, bool)
        or not isinstance(count, int)
        or not 1 <= count <= (policies.MAX_PARTITIONS)
    ):
        raise InvalidPartition(
            f"a partition count must be from 1 to {policies.MAX_PARTITIONS}, got {count!r}"
        )


def _listing_key(sort: str, after: object) -> tuple[Any, ...]:
    """The index key a `topic_listing` cursor stands for (`~` is in no name or path)."""
    parts = after.split("~") if isinstance(after, str) else []
    try:
        if sort == "created" and len(parts) == 1:
            return (int(parts[0]),)
        if sort == "name" and len(parts) == 2:
            return (parts[0], int(parts[1]))
        if sort == "partitions" and len(parts) == 2:
            return (int(parts[0]), int(parts[1]))
        if sort == "stream" and len(parts) == 2:
            return (parts[0], parts[1])
    except ValueError:
        pass
    raise InvalidArgument(f"not a cursor of the {sort!r} order: {after!r}")


def _check_paging(limit: object, offset: object) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidArgument(f"limit must be a non-negative integer or None, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidArgument(f"offset must be a non-negative integer, got {offset!r}")


def _partition_info(
    topic: str, number: int, lets: list[PartitionletInfo], moved_start: int = 0
) -> PartitionInfo:
    """A partition's info; `moved_start` is where DeleteRecords moved its log start."""
    if not lets:
        return PartitionInfo(topic, number, moved_start, moved_start, None, None, 0, [])
    firsts = [p.first_timestamp for p in lets if p.first_timestamp is not None]
    lasts = [p.last_timestamp for p in lets if p.last_timestamp is not None]
    return PartitionInfo(
        topic,
        number,
        max(lets[0].base_offset, moved_start),
        lets[-1].last_offset + 1,
        min(firsts) if firsts else None,
        max(lasts) if lasts else None,
        sum(p.bytes for p in lets),
        lets,
    )


def _damage_names(cluster_name: str, catalog: Catalog) -> Callable[[int], tuple[str, str | None]]:
    """What a volume's error about a damaged batch names (engine.storage.volume.Names):
    this cluster, and the topic of a topic id, read from the catalog when it happens."""

    def names(topic_id: int) -> tuple[str, str | None]:
        row = catalog.topic_by_id(topic_id)
        return cluster_name, row.full_name if row is not None else None

    return names
