"""The catalog: the SQLite file that holds a cluster's metadata.

It holds streams, topics, the chain of partitionlets of every partition, committed group
offsets and cluster settings. It never holds a partition's next offset: that fact lives
only in the volume of the partition's active partitionlet (DESIGN, "Durability"), so no
commit ever has to span two files.

Thread-safety: a `Catalog` may be shared by threads; each thread gets its own connection.
Writers use BEGIN IMMEDIATE. Any process may write at any time.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from engine import names
from engine import policies as stream_policies

# `now_ms` is for the group offset statements, which engine.storage's group module takes over.
from engine.clock import SYSTEM_CLOCK, Clock
from engine.errors import (
    CorruptFile,
    NotACluster,
    StreamExists,
    TopicExists,
    UnknownStream,
    UnknownTopic,
)
from engine.storage.accounts import Accounts
from engine.storage.connection import (
    BUSY_TIMEOUT_MS,
    ThreadConnections,
    integrity,
    read_transaction,
    reindex,
    translate,
    write_transaction,
)
from engine.storage.groups import GROUP_SCHEMA, GroupStore
from engine.storage.jobs import JobTable
from engine.storage.metrics import MetricsTable
from engine.storage.producers import PRODUCER_SCHEMA, ProducerIds
from engine.storage.transactions import TRANSACTION_SCHEMA, TransactionTables

# How long `Catalog.mark_reached` waits for the write lock (ms).
MARK_LOCK_WAIT_MS = 50

FORMAT = "partitionlet-catalog"
SCHEMA_VERSION = 1

# Columns added to SCHEMA's tables after catalogs were written without them: (table,
# column, declaration). SCHEMA itself lists them too, so a new catalog has them at once;
# `Catalog.ensure_schema` adds them to an older one. The declaration must be one that
# ALTER TABLE ADD COLUMN accepts (a constant default, no PRIMARY KEY or UNIQUE).
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("api_tokens", "expires_ms", "INTEGER"),
    ("replication_tokens", "created_by", "TEXT NOT NULL DEFAULT ''"),
    ("replication_tokens", "last_used_ms", "INTEGER"),
    ("partitionlets", "archive_file", "TEXT"),
    ("partitionlets", "archive_messages", "INTEGER"),
    ("partitionlets", "archive_bytes", "INTEGER"),
    ("jobs", "rows_read", "INTEGER NOT NULL DEFAULT 0"),
    ("jobs", "rows_per_s", "REAL"),
    ("jobs", "first_task_ms", "INTEGER"),
    ("topics", "policies", "TEXT"),
    ("partitionlets", "reached_offset", "INTEGER"),
    ("users", "read_only", "INTEGER NOT NULL DEFAULT 0"),
    ("jobs", "progress", "REAL"),
    ("jobs", "step", "TEXT"),
)

# The name search (engine/search.py): an FTS5 trigram index of every topic name (rowid: the
# topic's id) and stream path (rowid: the stream's id, negated), kept by triggers in the
# same transactions as the tables, so no writer can forget it and it cannot drift. The
# indexes after it keep the cross-stream topic listing's orders (Cluster.topic_listing).
SEARCH_SCHEMA = (
    """
CREATE VIRTUAL TABLE IF NOT EXISTS topic_names USING fts5(name, tokenize='trigram');
CREATE TRIGGER IF NOT EXISTS topic_names_topic_added AFTER INSERT ON topics BEGIN
    INSERT INTO topic_names (rowid, name) VALUES (new.id, new.name);
END;
CREATE TRIGGER IF NOT EXISTS topic_names_topic_deleted AFTER DELETE ON topics BEGIN
    DELETE FROM topic_names WHERE rowid = old.id;
END;
CREATE TRIGGER IF NOT EXISTS topic_names_stream_added AFTER INSERT ON streams BEGIN
    INSERT INTO topic_names (rowid, name) VALUES (-new.id, new.path);
END;
CREATE TRIGGER IF NOT EXISTS topic_names_stream_deleted AFTER DELETE ON streams BEGIN
    DELETE FROM topic_names WHERE rowid = -old.id;
END;
CREATE INDEX IF NOT EXISTS topics_by_name ON topics (name, stream_id);
CREATE INDEX IF NOT EXISTS topics_by_partitions ON topics (partitions, id);
"""
    + GROUP_SCHEMA
)

# Fills topic_names for a catalog written before it existed (run once, by ensure_schema).
SEARCH_FILL = """
INSERT INTO topic_names (rowid, name) SELECT id, name FROM topics;
INSERT INTO topic_names (rowid, name) SELECT -id, path FROM streams;
"""

# Indexes on columns of ADDED_COLUMNS: made once those columns exist (a new catalog's at once).
ADDED_INDEXES = """
CREATE INDEX IF NOT EXISTS partitionlets_archived
    ON partitionlets (topic_id) WHERE archive_file IS NOT NULL;
-- the few topics with their own policies (Catalog.has_overrides); the others cost no entry
CREATE INDEX IF NOT EXISTS topics_with_overrides ON topics (stream_id) WHERE policies IS NOT NULL;
"""

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS volumes (
    id         INTEGER PRIMARY KEY,
    path       TEXT NOT NULL UNIQUE,   -- relative to the cluster directory, or absolute
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS streams (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    path        TEXT NOT NULL UNIQUE,
    policies    TEXT NOT NULL,         -- JSON, every policy present
    creator     TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    topic_count INTEGER NOT NULL DEFAULT 0  -- kept in the same transactions as topics
);
CREATE TABLE IF NOT EXISTS topics (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: writers cache ids
    stream_id  INTEGER NOT NULL,
    name       TEXT NOT NULL,
    partitions INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    -- JSON of the topic's own overrides of its stream's policies; NULL (no bytes in the
    -- row) when it has none, as most topics
    policies   TEXT,
    UNIQUE (stream_id, name)
);
CREATE TABLE IF NOT EXISTS partitionlets (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: volumes key on it
    topic_id    INTEGER NOT NULL,
    partition   INTEGER NOT NULL,
    volume_id   INTEGER NOT NULL,
    base_offset INTEGER NOT NULL,
    end_offset  INTEGER,     -- NULL while active; copied from the volume when sealed
    created_ms  INTEGER NOT NULL,
    sealed_ms   INTEGER,
    -- statistics copied from the volume at sealing, so listings need no volume reads
    bytes       INTEGER NOT NULL DEFAULT 0,
    first_ts    INTEGER,
    max_ts      INTEGER,
    archive_file     TEXT,     -- archived (engine.ops.archive): its Parquet file; NULL: live
    archive_messages INTEGER,  -- the messages of that file
    archive_bytes    INTEGER,  -- and its size
    -- an offset its appends had reached (a lower bound of its next offset), saved by the
    -- writers about once a second (engine.storage.appender): a volume that holds less lost
    -- commits whose offsets may have been read already. NULL: none saved yet
    reached_offset   INTEGER
);
CREATE INDEX IF NOT EXISTS partitionlets_chain
    ON partitionlets (topic_id, partition, base_offset);
CREATE UNIQUE INDEX IF NOT EXISTS partitionlets_one_active
    ON partitionlets (topic_id, partition) WHERE end_offset IS NULL;
-- Partitionlets of deleted topics and streams whose space is still to be freed: their
-- batches in their volume, their archive file. Written in the delete's own transaction (the
-- delete is done for everyone from its commit), removed once freed; a purge that failed (a
-- full disk) is finished later by whoever runs `Cluster.finish_purges`.
CREATE TABLE IF NOT EXISTS purges (
    partitionlet INTEGER PRIMARY KEY,
    volume_id    INTEGER NOT NULL,
    archive_file TEXT
);
-- A partition's log start moved by DeleteRecords (Cluster.delete_records) inside a
-- partitionlet: readers start there; a row only for partitions where it was moved, never
-- below the first partitionlet's base (the start is the larger of the two).
CREATE TABLE IF NOT EXISTS log_starts (
    topic_id  INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    log_start INTEGER NOT NULL,
    PRIMARY KEY (topic_id, partition)
) WITHOUT ROWID;
-- Offsets given up by `plet check --repair --accept-loss` (engine.ops.check): a volume lost
-- the commits that held first_offset..end_offset-1, with no replica or backup to restore
-- them from. No partitionlet holds them and none is handed out again: the hole they leave
-- in the partition's chain is known, not damage, and readers pass over it.
CREATE TABLE IF NOT EXISTS lost_offsets (
    topic_id     INTEGER NOT NULL,
    partition    INTEGER NOT NULL,
    first_offset INTEGER NOT NULL,
    end_offset   INTEGER NOT NULL,
    accepted_ms  INTEGER NOT NULL,
    PRIMARY KEY (topic_id, partition, first_offset)
) WITHOUT ROWID;
-- Replication (engine.replication). A link out of a stream of this cluster: its target
-- (a directory, or later an http(s) address), the stream there, and what the last run
-- of a replicator found. How far each partition got is not stored: it is the target's log
-- end offset, read from the target every time (one fact, one file).
CREATE TABLE IF NOT EXISTS replicas (
    stream_id     INTEGER NOT NULL,
    target        TEXT NOT NULL,       -- normalized: absolute directory path or URL
    target_stream TEXT NOT NULL,
    target_id     TEXT,                -- uuid of the target cluster, once known
    paused        INTEGER NOT NULL DEFAULT 0,
    error         TEXT,                -- why the last run failed (state broken)
    conflict      TEXT,                -- JSON {topic, partition, offset, ...} (state conflict)
    created_ms    INTEGER NOT NULL,
    last_run_ms   INTEGER,
    copied_messages INTEGER NOT NULL DEFAULT 0,
    copied_bytes  INTEGER NOT NULL DEFAULT 0,
    rate_messages REAL NOT NULL DEFAULT 0,   -- messages/s of the last run that moved any
    rate_bytes    REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (stream_id, target)
) WITHOUT ROWID;
-- The links into a stream of this cluster, as the sources registered them.
CREATE TABLE IF NOT EXISTS upstreams (
    stream_id     INTEGER NOT NULL,
    source        TEXT NOT NULL,       -- the source cluster's directory (or URL)
    source_stream TEXT NOT NULL,
    source_id     TEXT NOT NULL,       -- uuid of the source cluster
    created_ms    INTEGER NOT NULL,
    PRIMARY KEY (stream_id, source_id, source_stream)
) WITHOUT ROWID;
-- Replication over HTTP (engine.replication.http). On a target: the tokens it issued, each
-- good for replicating into one stream; only a SHA-256 of the token is kept.
CREATE TABLE IF NOT EXISTS replication_tokens (
    token_hash    TEXT PRIMARY KEY,    -- hex SHA-256 of the token
    stream        TEXT NOT NULL,       -- the stream path it may write
    created_ms    INTEGER NOT NULL,
    created_by    TEXT NOT NULL DEFAULT '',  -- the user who issued it
    last_used_ms  INTEGER              -- last request it opened (to the minute)
) WITHOUT ROWID;
-- On a source: the token of an http(s) link, sent with every request to its target (the
-- source must present it, so it is kept as issued; the catalog file is the boundary).
CREATE TABLE IF NOT EXISTS replica_tokens (
    stream_id     INTEGER NOT NULL,
    target        TEXT NOT NULL,       -- the link's normalized target (no token in it)
    token         TEXT NOT NULL,
    PRIMARY KEY (stream_id, target)
) WITHOUT ROWID;
-- Console users (engine.auth.users): the web console's logins. Passwords are kept as scrypt
-- hashes; API tokens as SHA-256 hashes (only the user sees a token, once).
CREATE TABLE IF NOT EXISTS users (
    name          TEXT PRIMARY KEY,
    password_hash TEXT NOT NULL,       -- scrypt$n$r$p$salt_hex$hash_hex
    groups        TEXT NOT NULL DEFAULT '',   -- comma-separated group names
    admin         INTEGER NOT NULL DEFAULT 0,
    created_ms    INTEGER NOT NULL,
    read_only     INTEGER NOT NULL DEFAULT 0  -- 1: every change refused (engine.auth.users)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS api_tokens (
    token_hash    TEXT PRIMARY KEY,    -- hex SHA-256 of the token
    user          TEXT NOT NULL,
    label         TEXT NOT NULL DEFAULT '',
    created_ms    INTEGER NOT NULL,
    last_used_ms  INTEGER,
    expires_ms    INTEGER              -- NULL: never
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS api_tokens_user ON api_tokens (user);
-- SCRAM credentials (engine.auth.scram), one per user and mechanism, written with the
-- password (and, for users from before them, at their next login with the password): the
-- salted keys a Kafka client's proof is checked against, never the password.
CREATE TABLE IF NOT EXISTS scram_credentials (
    name          TEXT NOT NULL,
    mechanism     TEXT NOT NULL,       -- SCRAM-SHA-256, SCRAM-SHA-512
    salt          BLOB NOT NULL,
    iterations    INTEGER NOT NULL,
    stored_key    BLOB NOT NULL,
    server_key    BLOB NOT NULL,
    PRIMARY KEY (name, mechanism)
) WITHOUT ROWID;
-- Web console sessions (engine.auth.users): the cookie carries a random id, this table its
-- SHA-256 only. Every `plet web` of the cluster and the CLI see one truth, so logout, a
-- password change or deleting a user ends the user's sessions in every process at once.
CREATE TABLE IF NOT EXISTS web_sessions (
    id_hash       TEXT PRIMARY KEY,
    user          TEXT NOT NULL,
    created_ms    INTEGER NOT NULL,
    last_seen_ms  INTEGER NOT NULL,    -- written at most once a minute
    expires_ms    INTEGER NOT NULL     -- the absolute end, fixed at login
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS web_sessions_user ON web_sessions (user);
-- Wrong passwords per user name tried (known or not, so that throttling tells nothing
-- about which names exist); a row goes on a successful login or once forgotten.
CREATE TABLE IF NOT EXISTS login_failures (
    name            TEXT PRIMARY KEY,
    failures        INTEGER NOT NULL,
    last_failure_ms INTEGER NOT NULL,
    locked_until_ms INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
-- Replay jobs (spark_tasks.jobs): a job runs in its own process and keeps its record here,
-- so that every process that opens the cluster (CLI, consoles) can list, watch and cancel
-- it. The engine itself never reads or writes this table.
CREATE TABLE IF NOT EXISTS jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT NOT NULL,
    params           TEXT NOT NULL,             -- JSON
    state            TEXT NOT NULL,             -- queued, running, succeeded, failed, cancelled
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    pid              INTEGER,                   -- of the job's process, on host
    host             TEXT,
    tasks_done       INTEGER NOT NULL DEFAULT 0,
    tasks_total      INTEGER NOT NULL DEFAULT 0,
    submitted_ms     INTEGER NOT NULL,
    started_ms       INTEGER,
    ended_ms         INTEGER,
    result           TEXT,                      -- JSON summary
    error            TEXT,
    log_path         TEXT,
    log_tail         TEXT NOT NULL DEFAULT '',
    rows_read        INTEGER NOT NULL DEFAULT 0,  -- rows the job's Spark jobs read
    rows_per_s       REAL,                      -- ... per second of reading
    first_task_ms    INTEGER,                   -- when its first Spark task began
    progress         REAL,                      -- 0..1, never lower (spark_tasks.progress)
    step             TEXT                       -- the step running: "step 2 of 2: writing"
);
-- The schema registry (engine.storage.schemas, engine.client.schemas, docs/SCHEMAS.md):
-- each schema text once, under the global id messages carry in the Confluent wire format;
-- a subject's versions name those ids; compatibility per subject ('' is the global one).
CREATE TABLE IF NOT EXISTS schemas (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: old messages name it
    schema_type TEXT NOT NULL,                      -- AVRO, PROTOBUF, JSON
    schema      TEXT NOT NULL,
    refs        TEXT NOT NULL DEFAULT '[]',         -- JSON [{name, subject, version}]
    fingerprint TEXT NOT NULL UNIQUE,               -- SHA-256 of type, normal form, refs
    created_ms  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS schema_versions (
    subject     TEXT NOT NULL,
    version     INTEGER NOT NULL,
    schema_id   INTEGER NOT NULL,
    deleted     INTEGER NOT NULL DEFAULT 0,         -- soft-deleted (DELETE without permanent)
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (subject, version)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS schema_versions_id ON schema_versions (schema_id);
CREATE TABLE IF NOT EXISTS schema_config (
    subject       TEXT PRIMARY KEY,
    compatibility TEXT NOT NULL
) WITHOUT ROWID;
-- The metrics history (engine.storage.metrics, engine.ops.metrics): per-minute and per-hour
-- buckets of throughput, lag and replication series, bounded in count and age.
CREATE TABLE IF NOT EXISTS metrics (
    resolution INTEGER NOT NULL,  -- seconds a bucket spans: 60 or 3600
    scope      TEXT NOT NULL,     -- cluster, stream, topic, group, replica
    name       TEXT NOT NULL,     -- '' (cluster), path, full name, group id, 'path -> target'
    metric     TEXT NOT NULL,
    bucket_ms  INTEGER NOT NULL,  -- the bucket's start, epoch ms
    value      REAL NOT NULL,     -- a count (counters), a reading (gauges)
    PRIMARY KEY (resolution, scope, name, metric, bucket_ms)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS metrics_by_time ON metrics (resolution, bucket_ms);
"""
    + PRODUCER_SCHEMA
    + TRANSACTION_SCHEMA
)


T = TypeVar("T")


def _overrides_json(overrides: dict[str, Any]) -> str | None:
    """A topic's overrides as stored: NULL when it has none, so it costs nothing."""
    return json.dumps(overrides, sort_keys=True) if overrides else None


def _chunks(items: list[T], size: int = 500) -> list[list[T]]:
    """Pieces small enough for one statement's host parameters."""
    return [items[i : i + size] for i in range(0, len(items), size)]


@dataclass(frozen=True)
class StreamRow:
    id: int
    path: str
    policies: dict[str, Any]
    creator: str
    created_ms: int
    topic_count: int


@dataclass(frozen=True)
class TopicRow:
    id: int
    stream_id: int
    stream: str
    name: str
    partitions: int
    created_ms: int
    policies_json: str | None = None  # its overrides of its stream's policies, as stored
    stream_policies_json: str = "{}"  # its stream's policies, as stored (read in the same join)

    @property
    def full_name(self) -> str:
        return f"{self.stream}:{self.name}"

    @property
    def overrides(self) -> dict[str, Any]:
        """The topic's own policies, as stored (engine.policies.check_stored checks them)."""
        return _stored_overrides(self.policies_json)


class EnsuredTopic(NamedTuple):
    """A topic as `Catalog.ensure_topics` found or made it (a tuple: one per new topic)."""

    id: int
    partitions: int
    policies_json: str | None  # its own overrides, as stored
    created: bool  # made by that call (so its partitions have no partitionlet yet)

    @property
    def overrides(self) -> dict[str, Any]:
        return _stored_overrides(self.policies_json)


class FirstPartitionlet(NamedTuple):
    """A new topic's first partitionlet as `Catalog.ensure_topics` made it: what a writer
    needs to append there (a tuple: one is made per new partition)."""

    id: int
    topic_id: int
    partition: int
    volume_id: int
    base_offset: int = 0
    reached_offset: int | None = None


def _stored_overrides(policies_json: str | None) -> dict[str, Any]:
    if not policies_json:
        return {}
    got = json.loads(policies_json)
    return got if isinstance(got, dict) else {"": got}  # "" : refused when checked


@dataclass(frozen=True)
class PartitionletRow:
    id: int
    topic_id: int
    partition: int
    volume_id: int
    base_offset: int
    end_offset: int | None
    created_ms: int
    sealed_ms: int | None
    bytes: int
    first_ts: int | None
    max_ts: int | None
    archive_file: str | None = None  # archived (engine.storage.archive): its file
    archive_messages: int | None = None
    archive_bytes: int | None = None
    reached_offset: int | None = None  # the appends' last saved mark (see SCHEMA)

    @property
    def active(self) -> bool:
        return self.end_offset is None

    @property
    def archived(self) -> bool:
        return self.archive_file is not None


_PL_COLUMNS = (
    "id, topic_id, partition, volume_id, base_offset, end_offset, created_ms, sealed_ms, "
    "bytes, first_ts, max_ts, archive_file, archive_messages, archive_bytes, reached_offset"
)


class Catalog:
    """The catalog file: every method is one short transaction (writers BEGIN IMMEDIATE),
    so its facts are consistent across every process that opens the cluster; times it
    writes come from `clock`. Any thread may call it: each thread has its own connection."""

    def __init__(self, path: Path, clock: Clock = SYSTEM_CLOCK) -> None:
        self.path = path
        # Where the catalog and its table modules (accounts, schemas, jobs, ...) read the time.
        self.clock = clock
        self._conns = ThreadConnections(path, "catalog")

    # --- connections and set-up -----------------------------------------------------------

    @property
    def conn(self) -> sqlite3.Connection:
        return self._conns.get()

    def write(self) -> AbstractContextManager[None]:
        return write_transaction(self.conn, self.path, "catalog")

    @contextmanager
    def write_durably(self) -> Iterator[None]:
        """One write transaction whose commit is fsynced (`synchronous=FULL`): it survives a
        machine crash, and so does every commit of the catalog before it. For what a write
        of a volume that is fsynced depends on (an issued producer id, a transaction's
        decision) and what a caller destroys a copy after (a moved or archived
        partitionlet). Other commits are `synchronous=NORMAL`: they survive a crash of the
        process."""
        conn = self.conn
        conn.execute("PRAGMA synchronous=FULL")
        try:
            with write_transaction(conn, self.path, "catalog"):
                yield
        finally:
            conn.execute("PRAGMA synchronous=NORMAL")

    def read(self) -> AbstractContextManager[None]:
        return read_transaction(self.conn)

    def make_durable(self) -> None:
        """Fsync the catalog's log: every commit made so far, by any connection of any
        process, then survives a machine crash. A write of a volume that is fsynced calls
        it first when it goes to partitionlets whose catalog rows were made without it
        (engine.storage.appender): the rows that say where its batches are."""
        try:
            fd = os.open(f"{self.path}-wal", os.O_RDONLY)
        except FileNotFoundError:
            return  # no log: the database file holds everything, as checkpoints fsynced it
        try:
            os.fdatasync(fd)  # as SQLite syncs its log: the data and the file's size
        finally:
            os.close(fd)

    def close(self) -> None:
        self._conns.close()

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """The rows of one statement, its SQLite errors translated (engine.errors); for
        this module and the storage layer's table modules (accounts, groups, jobs)."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "catalog") from exc

    _query = query

    # --- tables kept by their own storage modules -----------------------------------------

    @property
    def accounts(self) -> Accounts:
        """Users, web sessions, API tokens and login failures (engine.storage.accounts)."""
        return Accounts(self)

    @property
    def groups(self) -> GroupStore:
        """Consumer groups: members, owners, assignments and committed offsets
        (engine.storage.groups, which holds every statement on their tables)."""
        return GroupStore(self)

    # Kept for one release: the old name of `groups`.
    memberships = groups

    @property
    def jobs(self) -> JobTable:
        """Replay job records (engine.storage.jobs)."""
        return JobTable(self)

    @property
    def producers(self) -> ProducerIds:
        """Producer ids issued to idempotent producers (engine.storage.producers)."""
        return ProducerIds(self)

    @property
    def transactions(self) -> TransactionTables:
        """Open transactions, their partitions and offsets, the aborted ranges
        (engine.storage.transactions)."""
        return TransactionTables(self)

    @property
    def metrics(self) -> MetricsTable:
        """The metrics history (engine.storage.metrics)."""
        return MetricsTable(self)

    def initialize(self, settings: dict[str, str]) -> None:
        """Create the schema and store `settings` (first process only; idempotent)."""
        try:
            # IF NOT EXISTS everywhere: safe to run again; Cluster.open serializes first opens.
            self.conn.executescript(SCHEMA)
            self.conn.executescript(ADDED_INDEXES)
            self.conn.executescript(SEARCH_SCHEMA)
            with self.write():
                existing = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
                if not existing:
                    rows = {"format": FORMAT, "schema_version": str(SCHEMA_VERSION), **settings}
                    self.conn.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?)", rows.items()
                    )
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "catalog") from exc

    def ensure_schema(self) -> None:
        """Add the tables and columns a newer engine introduced (cheap when present)."""
        try:
            self.conn.executescript(SCHEMA)
            self._add_columns()
            self._add_search()
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "catalog") from exc

    def _add_columns(self) -> None:
        """Give a catalog written by an older engine the columns of ADDED_COLUMNS. Runs under
        Cluster.open's lock file, so two processes never alter one table at once."""
        for table, column, decl in ADDED_COLUMNS:
            have = {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
        self.conn.executescript(ADDED_INDEXES)

    def _add_search(self) -> None:
        """Give a catalog written by an older engine the name search's index, filled from its
        streams and topics in one transaction (under Cluster.open's lock file, as
        _add_columns); from then on the triggers keep it."""
        if self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'topic_names'").fetchone():
            self.conn.executescript(SEARCH_SCHEMA)  # the listing's indexes, if missing
            return
        try:  # one script, one transaction: the table, its triggers and its rows, or none
            self.conn.executescript(f"BEGIN IMMEDIATE;{SEARCH_SCHEMA}{SEARCH_FILL}COMMIT;")
        except sqlite3.DatabaseError:
            if self.conn.in_transaction:
                self.conn.rollback()
            raise

    @staticmethod
    def verify(path: Path) -> None:
        """Refuse a file that is not a Partitionlet catalog without changing it.

        A plain connection reads a WAL database too, but unlike `connect` it switches no
        journal mode, so a foreign SQLite file is left exactly as it was.
        """
        try:
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.DatabaseError as exc:
            raise translate(exc, path, "catalog") from exc
        try:
            rows = conn.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise NotACluster(
                    f"{path} is an SQLite file but not a Partitionlet catalog"
                ) from exc
            raise translate(exc, path, "catalog") from exc
        except sqlite3.DatabaseError as exc:
            raise translate(exc, path, "catalog") from exc
        finally:
            conn.close()
        if dict(rows).get("format") != FORMAT:
            raise NotACluster(f"{path} is not a Partitionlet catalog")

    def settings(self) -> dict[str, str]:
        try:
            rows = self.conn.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise NotACluster(
                    f"{self.path} is an SQLite file but not a Partitionlet catalog"
                ) from exc
            raise translate(exc, self.path, "catalog") from exc
        except sqlite3.DatabaseError as exc:
            raise translate(exc, self.path, "catalog") from exc
        meta = dict(rows)
        if meta.get("format") != FORMAT:
            raise NotACluster(
                f"{self.path} is not a Partitionlet catalog (format {meta.get('format')!r})"
            )
        if int(meta.get("schema_version", 0)) > SCHEMA_VERSION:
            raise CorruptFile(
                f"{self.path} was written by a newer Partitionlet (schema "
                f"{meta['schema_version']}); upgrade this one to open it"
            )
        return meta

    def set_setting(self, key: str, value: str) -> None:
        with self.write():
            self.conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def bump_topology(self) -> None:
        """Called inside a write transaction whenever topics, partitions or policies change.

        Producers and consumers cache metadata and re-read it when this number moves.
        """
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES ('topology_version', '1') "
            "ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def bump_topics(self) -> None:
        """Called inside a write transaction when topics are created: only subscriptions
        (which may be waiting for a topic or match a pattern) care, so caches survive."""
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES ('topics_version', '1') "
            "ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def topology_version(self) -> int:
        return self.versions()[0]

    def versions(self) -> tuple[int, int]:
        """(topology version, topics version), read together."""
        rows = self._query(
            "SELECT key, value FROM meta WHERE key IN ('topology_version', 'topics_version')"
        )
        got = dict(rows)
        return int(got.get("topology_version", 0)), int(got.get("topics_version", 0))

    def data_version(self) -> int:
        """Changes whenever another connection committed to the catalog (cheap to ask)."""
        version: int = self.conn.execute("PRAGMA data_version").fetchone()[0]
        return version

    # --- volumes --------------------------------------------------------------------------

    def volumes(self) -> list[tuple[int, str]]:
        return self._query("SELECT id, path FROM volumes ORDER BY id")

    def add_volumes(self, paths: list[str]) -> None:
        with self.write():
            existing = {p for (p,) in self.conn.execute("SELECT path FROM volumes")}
            for i, path in enumerate(paths, start=1):
                if path not in existing:
                    self.conn.execute(
                        "INSERT INTO volumes (id, path, created_ms) VALUES (?, ?, ?)",
                        (i, path, self.clock.now_ms()),
                    )

    def volume_in_use(self, volume_id: int) -> bool:
        return bool(
            self._query("SELECT 1 FROM partitionlets WHERE volume_id = ? LIMIT 1", (volume_id,))
        )

    # --- streams --------------------------------------------------------------------------

    @staticmethod
    def _stream(row: tuple[Any, ...]) -> StreamRow:
        return StreamRow(row[0], row[1], json.loads(row[2]), row[3], row[4], row[5])

    _STREAM_COLUMNS = "id, path, policies, creator, created_ms, topic_count"

    def create_stream(self, path: str, policies: dict[str, Any], creator: str) -> StreamRow:
        # Every writer of a stream (API, consoles, a replicating cluster) comes through here
        # and set_policies: what is stored is checked here, whoever sent it.
        names.validate_stream_path(path)
        policies = stream_policies.validate(policies)
        with self.write():
            try:
                self.conn.execute(
                    "INSERT INTO streams (path, policies, creator, created_ms) VALUES (?, ?, ?, ?)",
                    (path, json.dumps(policies, sort_keys=True), creator, self.clock.now_ms()),
                )
            except sqlite3.IntegrityError as exc:
                raise StreamExists(f"stream {path} exists already") from exc
            self.bump_topics()
        return self.stream(path)

    def stream(self, path: str) -> StreamRow:
        rows = self._query(f"SELECT {self._STREAM_COLUMNS} FROM streams WHERE path = ?", (path,))
        if not rows:
            raise UnknownStream(f"stream {path} does not exist")
        return self._stream(rows[0])

    def stream_by_id(self, stream_id: int) -> StreamRow:
        rows = self._query(f"SELECT {self._STREAM_COLUMNS} FROM streams WHERE id = ?", (stream_id,))
        if not rows:
            raise UnknownStream(f"stream #{stream_id} does not exist")
        return self._stream(rows[0])

    def set_policies(self, path: str, policies: dict[str, Any]) -> None:
        policies = stream_policies.validate(policies)  # the whole set, as create_stream
        with self.write():
            cur = self.conn.execute(
                "UPDATE streams SET policies = ? WHERE path = ?",
                (json.dumps(policies, sort_keys=True), path),
            )
            if cur.rowcount == 0:
                raise UnknownStream(f"stream {path} does not exist")
            self.bump_topology()

    def streams(self, prefix: str | None, limit: int | None, offset: int) -> list[StreamRow]:
        sql = f"SELECT {self._STREAM_COLUMNS} FROM streams"
        args: list[Any] = []
        if prefix:
            # A range on the unique index, not LIKE: no escaping trouble and it stays fast.
            sql += " WHERE path >= ? AND path < ?"
            args += [prefix, prefix + "\U0010ffff"]
        sql += " ORDER BY path LIMIT ? OFFSET ?"
        args += [-1 if limit is None else limit, offset]
        return [self._stream(r) for r in self._query(sql, tuple(args))]

    def totals(self) -> tuple[int, int]:
        """(streams, topics) of the whole cluster (topic counts are kept per stream)."""
        row = self._query("SELECT count(*), coalesce(sum(topic_count), 0) FROM streams")[0]
        return row[0], row[1]

    def archived_usage(self, stream_id: int | None = None) -> tuple[int, int]:
        """(messages, bytes) in archived partitionlets' files, of one stream or of all:
        volumes count only what they hold."""
        # The archived partitionlets drive the query (a partial index holds only them):
        # walking a stream's topics instead costs a second at a million topics.
        sums = "coalesce(sum(p.archive_messages), 0), coalesce(sum(p.archive_bytes), 0)"
        if stream_id is None:
            row = self._query(
                f"SELECT {sums} FROM partitionlets p INDEXED BY partitionlets_archived "
                "WHERE p.archive_file IS NOT NULL"
            )[0]
        else:
            row = self._query(
                f"SELECT {sums} FROM partitionlets p INDEXED BY partitionlets_archived "
                "CROSS JOIN topics t ON t.id = p.topic_id "
                "WHERE p.archive_file IS NOT NULL AND t.stream_id = ?",
                (stream_id,),
            )[0]
        return row[0], row[1]

    def stream_count(self, prefix: str | None = None) -> int:
        if prefix:
            rows = self._query(
                "SELECT count(*) FROM streams WHERE path >= ? AND path < ?",
                (prefix, prefix + "\U0010ffff"),
            )
        else:
            rows = self._query("SELECT count(*) FROM streams")
        count: int = rows[0][0]
        return count

    def delete_stream(self, path: str) -> list[PartitionletRow]:
        """Remove the stream, its topics and their offsets; returns the partitionlets to purge."""
        with self.write():
            row = self.conn.execute("SELECT id FROM streams WHERE path = ?", (path,)).fetchone()
            if row is None:
                raise UnknownStream(f"stream {path} does not exist")
            stream_id = row[0]
            pls = [
                PartitionletRow(*r)
                for r in self.conn.execute(
                    f"SELECT {', '.join('p.' + c.strip() for c in _PL_COLUMNS.split(','))} "
                    "FROM partitionlets p JOIN topics t ON t.id = p.topic_id WHERE t.stream_id = ?",
                    (stream_id,),
                )
            ]
            self.conn.execute(
                "INSERT OR IGNORE INTO purges (partitionlet, volume_id, archive_file) "
                "SELECT id, volume_id, archive_file FROM partitionlets WHERE topic_id IN "
                "(SELECT id FROM topics WHERE stream_id = ?)",
                (stream_id,),
            )
            self.conn.execute(
                "DELETE FROM partitionlets WHERE topic_id IN "
                "(SELECT id FROM topics WHERE stream_id = ?)",
                (stream_id,),
            )
            self.conn.execute(
                "DELETE FROM log_starts WHERE topic_id IN "
                "(SELECT id FROM topics WHERE stream_id = ?)",
                (stream_id,),
            )
            self.groups.forget_topics(
                "topic_id IN (SELECT id FROM topics WHERE stream_id = ?)", (stream_id,)
            )
            self.conn.execute("DELETE FROM topics WHERE stream_id = ?", (stream_id,))
            self.conn.execute("DELETE FROM streams WHERE id = ?", (stream_id,))
            self.bump_topology()
        return pls

    # --- topics ---------------------------------------------------------------------------

    _TOPIC_SELECT = (
        "SELECT t.id, t.stream_id, s.path, t.name, t.partitions, t.created_ms, t.policies, "
        "s.policies FROM topics t JOIN streams s ON s.id = t.stream_id"
    )

    def create_topics(
        self,
        stream_id: int,
        names_partitions: list[tuple[str, int]],
        *,
        exist_ok: bool,
        overrides: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Create topics in one transaction (auto-create batches them this way); `overrides`
        maps a topic's name to its own policies (checked here, as set_topic_policies)."""
        checked = {
            name: stream_policies.validate_overrides(o) for name, o in (overrides or {}).items()
        }
        with self.write():
            if (
                self.conn.execute("SELECT 1 FROM streams WHERE id = ?", (stream_id,)).fetchone()
                is None
            ):
                raise UnknownStream(f"stream #{stream_id} was deleted")
            created_ms = self.clock.now_ms()
            try:
                created = self._insert_topics(stream_id, names_partitions, created_ms, exist_ok)
            except sqlite3.IntegrityError as exc:
                (path,) = self.conn.execute(
                    "SELECT path FROM streams WHERE id = ?", (stream_id,)
                ).fetchone()
                raise TopicExists(f"topic {path}:{names_partitions[0][0]} exists already") from exc
            if created:
                self.conn.execute(
                    "UPDATE streams SET topic_count = topic_count + ? WHERE id = ?",
                    (created, stream_id),
                )
                self.bump_topics()
            for name, own in checked.items():
                self.conn.execute(
                    "UPDATE topics SET policies = ? WHERE stream_id = ? AND name = ?",
                    (_overrides_json(own), stream_id, name),
                )
            if checked:
                self.bump_topology()  # a writer may have cached the stream's policies for it

    def set_topic_policies(self, topic_id: int, overrides: dict[str, Any]) -> None:
        """Store a topic's own policies (all of them: those missing go), checked here as
        every stream's are, whoever sends them (the API, a replicating cluster)."""
        checked = stream_policies.validate_overrides(overrides)
        with self.write():
            cur = self.conn.execute(
                "UPDATE topics SET policies = ? WHERE id = ?", (_overrides_json(checked), topic_id)
            )
            if cur.rowcount == 0:
                raise UnknownTopic(f"topic #{topic_id} does not exist")
            self.bump_topology()

    def _insert_topics(
        self,
        stream_id: int,
        names_partitions: list[tuple[str, int]],
        created_ms: int,
        or_ignore: bool,
    ) -> int:
        """Insert topic rows in one statement; how many were inserted. One statement, not
        executemany: FTS5 flushes its pending terms at every statement that writes it, so a
        row per statement made the name index's trigger (topic_names) cost 4x the insert."""
        verb = "INSERT OR IGNORE" if or_ignore else "INSERT"
        # rowcount, not total_changes: the latter also counts what the trigger writes
        return self.conn.execute(
            f"{verb} INTO topics (stream_id, name, partitions, created_ms) "
            "SELECT ?, json_extract(value, '$[0]'), json_extract(value, '$[1]'), ? "
            "FROM json_each(?)",
            (stream_id, created_ms, json.dumps(names_partitions)),
        ).rowcount

    def topic(self, stream: str, name: str) -> TopicRow:
        rows = self._query(self._TOPIC_SELECT + " WHERE s.path = ? AND t.name = ?", (stream, name))
        if not rows:
            # Say which is missing: the stream or only the topic.
            if not self._query("SELECT 1 FROM streams WHERE path = ?", (stream,)):
                raise UnknownStream(f"stream {stream} does not exist (topic {stream}:{name})")
            raise UnknownTopic(f"topic {stream}:{name} does not exist")
        return TopicRow(*rows[0])

    def topic_or_none(self, stream_id: int, name: str) -> TopicRow | None:
        rows = self._query(
            self._TOPIC_SELECT + " WHERE t.stream_id = ? AND t.name = ?", (stream_id, name)
        )
        return TopicRow(*rows[0]) if rows else None

    def has_overrides(self, stream_id: int) -> bool:
        """Whether any topic of the stream has policies of its own."""
        return bool(
            self._query(
                "SELECT 1 FROM topics WHERE stream_id = ? AND policies IS NOT NULL LIMIT 1",
                (stream_id,),
            )
        )

    def topic_by_id(self, topic_id: int) -> TopicRow | None:
        rows = self._query(self._TOPIC_SELECT + " WHERE t.id = ?", (topic_id,))
        return TopicRow(*rows[0]) if rows else None

    def topics(
        self,
        stream_id: int,
        prefix: str | None,
        limit: int | None,
        offset: int,
        after: str | None = None,
    ) -> list[TopicRow]:
        """A page of a stream's topics by name: after skipping `offset` of them, or (faster
        on deep pages) those whose name sorts after `after`.

        Two steps: the page's ids come from the (stream_id, name) index alone, which a
        deep OFFSET walks without touching the table; then only those rows are read.
        """
        if limit is not None and not prefix and after is None and offset:
            total = self.topic_count(stream_id)
            if offset > total // 2:
                # A deep page: walk the index from the end, so no page walks more than
                # half of it (a stream of a million topics: ~25 ms instead of ~50 ms).
                skip = max(0, total - offset - limit)
                take = max(0, min(limit, total - offset))
                ids = [
                    i
                    for (i,) in self._query(
                        "SELECT id FROM topics WHERE stream_id = ? ORDER BY name DESC "
                        "LIMIT ? OFFSET ?",
                        (stream_id, take, skip),
                    )
                ]
                return self.topics_by_id(ids)
        sql = "SELECT id FROM topics WHERE stream_id = ?"
        args: list[Any] = [stream_id]
        if prefix:
            sql += " AND name >= ? AND name < ?"
            args += [prefix, prefix + "\U0010ffff"]
        if after is not None:
            sql += " AND name > ?"
            args.append(after)
        sql += " ORDER BY name LIMIT ? OFFSET ?"
        args += [-1 if limit is None else limit, offset]
        return self.topics_by_id([i for (i,) in self._query(sql, tuple(args))])

    def topics_by_id(self, ids: list[int]) -> list[TopicRow]:
        """The rows of these topic ids (those that exist), ordered by name."""
        rows: list[TopicRow] = []
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            rows += [
                TopicRow(*r)
                for r in self._query(self._TOPIC_SELECT + f" WHERE t.id IN ({marks})", tuple(chunk))
            ]
        rows.sort(key=lambda r: r.name)
        return rows

    def topic_count(self, stream_id: int, prefix: str | None = None) -> int:
        if prefix:
            rows = self._query(
                "SELECT count(*) FROM topics WHERE stream_id = ? AND name >= ? AND name < ?",
                (stream_id, prefix, prefix + "\U0010ffff"),
            )
        else:
            rows = self._query("SELECT topic_count FROM streams WHERE id = ?", (stream_id,))
        count: int = rows[0][0] if rows else 0
        return count

    # --- the name search and the cross-stream listing (engine/search.py) -------------------

    def search_names(
        self, text: str, cap: int, stream_id: int | None = None
    ) -> tuple[list[StreamRow], list[TopicRow], bool]:
        """The streams and topics whose names contain `text` (3 characters or more, case
        folded), at most `cap` of them, and whether there were more; `stream_id` keeps that
        stream's topics only. The trigram index answers it, so it costs the matches, not the
        catalog's size."""
        if "\x00" in text:
            # no name holds a NUL, and FTS5 would read it as the end of its query
            return [], [], False
        phrase = '"' + text.replace('"', '""') + '"'  # one FTS5 string: any character is text
        if stream_id is None:
            sql = "SELECT rowid FROM topic_names WHERE topic_names MATCH ? LIMIT ?"
            args: tuple[Any, ...] = (phrase, cap + 1)
        else:
            # CROSS JOIN keeps the index's matches as the outer loop: the planner would
            # otherwise walk every topic of the stream and probe the index for each
            sql = (
                "SELECT f.rowid FROM topic_names f CROSS JOIN topics t ON t.id = f.rowid "
                "WHERE topic_names MATCH ? AND t.stream_id = ? LIMIT ?"
            )
            args = (phrase, stream_id, cap + 1)
        ids = [i for (i,) in self._query(sql, args)]
        capped = len(ids) > cap
        ids = ids[:cap]
        stream_ids = [-i for i in ids if i < 0]
        streams: list[StreamRow] = []
        for chunk in _chunks(stream_ids):
            marks = ",".join("?" * len(chunk))
            streams += [
                self._stream(r)
                for r in self._query(
                    f"SELECT {self._STREAM_COLUMNS} FROM streams WHERE id IN ({marks})",
                    tuple(chunk),
                )
            ]
        return streams, self.topics_by_id([i for i in ids if i > 0]), capped

    def topic_listing(
        self, sort: str, descending: bool, after: tuple[Any, ...] | None, limit: int
    ) -> list[TopicRow]:
        """A page of every stream's topics in `sort` order ("name": name then stream id;
        "partitions": count then id; "created": id, which is creation order; "stream":
        stream path then name), after the key `after` of the last row shown. Each order
        walks an index from the key, so every page costs the same."""
        if sort == "stream":
            return self._listing_by_stream(descending, after, limit)
        cmp, direction = ("<", "DESC") if descending else (">", "ASC")
        columns = {"name": "name, stream_id", "partitions": "partitions, id", "created": "id"}[sort]
        sql = "SELECT id FROM topics"
        args: tuple[Any, ...] = ()
        if after is not None:
            sql += f" WHERE ({columns}) {cmp} ({', '.join('?' * len(after))})"
            args = tuple(after)
        order = ", ".join(f"{c.strip()} {direction}" for c in columns.split(","))
        ids = [i for (i,) in self._query(f"{sql} ORDER BY {order} LIMIT ?", (*args, limit))]
        return self._topics_in_order(ids)

    def _listing_by_stream(
        self, descending: bool, after: tuple[Any, ...] | None, limit: int
    ) -> list[TopicRow]:
        cmp, direction = ("<", "DESC") if descending else (">", "ASC")
        rows: list[TopicRow] = []
        if after is not None:  # the rest of the stream the last page ended in
            found = self._query("SELECT id FROM streams WHERE path = ?", (after[0],))
            if found:
                rows += self._topics_in_order(
                    [
                        i
                        for (i,) in self._query(
                            f"SELECT id FROM topics WHERE stream_id = ? AND name {cmp} ? "
                            f"ORDER BY name {direction} LIMIT ?",
                            (found[0][0], after[1], limit),
                        )
                    ]
                )
        last_path = None if after is None else after[0]
        while len(rows) < limit:
            sql = "SELECT id, path FROM streams"
            args: tuple[Any, ...] = ()
            if last_path is not None:
                sql += f" WHERE path {cmp} ?"
                args = (last_path,)
            batch = self._query(f"{sql} ORDER BY path {direction} LIMIT 100", args)
            if not batch:
                break
            for stream_id, path in batch:
                last_path = path
                rows += self._topics_in_order(
                    [
                        i
                        for (i,) in self._query(
                            f"SELECT id FROM topics WHERE stream_id = ? "
                            f"ORDER BY name {direction} LIMIT ?",
                            (stream_id, limit - len(rows)),
                        )
                    ]
                )
                if len(rows) >= limit:
                    break
        return rows[:limit]

    def _topics_in_order(self, ids: list[int]) -> list[TopicRow]:
        by_id = {r.id: r for r in self.topics_by_id(ids)}
        return [by_id[i] for i in ids if i in by_id]

    def set_partitions(self, topic_id: int, count: int) -> None:
        with self.write():
            self.conn.execute("UPDATE topics SET partitions = ? WHERE id = ?", (count, topic_id))
            self.bump_topology()

    def delete_topic(self, topic: TopicRow) -> list[PartitionletRow]:
        with self.write():
            if (
                self.conn.execute("SELECT 1 FROM topics WHERE id = ?", (topic.id,)).fetchone()
                is None
            ):
                raise UnknownTopic(f"topic {topic.full_name} does not exist")
            pls = [
                PartitionletRow(*r)
                for r in self.conn.execute(
                    f"SELECT {_PL_COLUMNS} FROM partitionlets WHERE topic_id = ?", (topic.id,)
                )
            ]
            self.conn.execute(
                "INSERT OR IGNORE INTO purges (partitionlet, volume_id, archive_file) "
                "SELECT id, volume_id, archive_file FROM partitionlets WHERE topic_id = ?",
                (topic.id,),
            )
            self.conn.execute("DELETE FROM partitionlets WHERE topic_id = ?", (topic.id,))
            self.conn.execute("DELETE FROM log_starts WHERE topic_id = ?", (topic.id,))
            self.groups.forget_topics("topic_id = ?", (topic.id,))
            self.conn.execute("DELETE FROM topics WHERE id = ?", (topic.id,))
            self.conn.execute(
                "UPDATE streams SET topic_count = topic_count - 1 WHERE id = ?", (topic.stream_id,)
            )
            self.bump_topology()
        return pls

    def pending_purges(self) -> list[tuple[int, int, str | None]]:
        """Partitionlets of deleted topics whose space is still to be freed: (id, volume
        id, archive file or None), by id."""
        return [
            (r[0], r[1], r[2])
            for r in self._query(
                "SELECT partitionlet, volume_id, archive_file FROM purges ORDER BY partitionlet"
            )
        ]

    def purged(self, pl_ids: Sequence[int]) -> None:
        """These partitionlets' space is freed: forget them."""
        if not pl_ids:
            return
        with self.write():
            for i in range(0, len(pl_ids), 500):
                chunk = list(pl_ids[i : i + 500])
                self.conn.execute(
                    f"DELETE FROM purges WHERE partitionlet IN ({','.join('?' * len(chunk))})",
                    chunk,
                )

    # --- partitionlets --------------------------------------------------------------------

    def chain(self, topic_id: int, partition: int) -> list[PartitionletRow]:
        """The partition's partitionlets in offset order; the last one may be active."""
        return [
            PartitionletRow(*r)
            for r in self._query(
                f"SELECT {_PL_COLUMNS} FROM partitionlets WHERE topic_id = ? AND partition = ? "
                "ORDER BY base_offset, id",
                (topic_id, partition),
            )
        ]

    def log_start(self, topic_id: int, partition: int) -> int:
        """Where DeleteRecords moved the partition's log start (0: never moved); readers
        start at the larger of it and the first partitionlet's base offset."""
        rows = self._query(
            "SELECT log_start FROM log_starts WHERE topic_id = ? AND partition = ?",
            (topic_id, partition),
        )
        return int(rows[0][0]) if rows else 0

    def log_starts(self, topic_ids: list[int]) -> dict[tuple[int, int], int]:
        """{(topic id, partition): log start} of the partitions of these topics whose log
        start DeleteRecords moved."""
        out: dict[tuple[int, int], int] = {}
        for i in range(0, len(topic_ids), 500):  # within one statement's host parameters
            chunk = topic_ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for topic_id, partition, start in self._query(
                "SELECT topic_id, partition, log_start FROM log_starts "
                f"WHERE topic_id IN ({marks})",
                tuple(chunk),
            ):
                out[(topic_id, partition)] = start
        return out

    def raise_log_start(self, topic_id: int, partition: int, offset: int) -> int:
        """Move the partition's log start up to `offset` (never down); returns the stored
        start. Bumps the topology version, so readers re-read their chains and start."""
        with self.write():
            self.conn.execute(
                "INSERT INTO log_starts (topic_id, partition, log_start) VALUES (?, ?, ?) "
                "ON CONFLICT (topic_id, partition) DO UPDATE SET "
                "log_start = max(log_start, excluded.log_start)",
                (topic_id, partition, offset),
            )
            self.bump_topology()
            (start,) = self.conn.execute(
                "SELECT log_start FROM log_starts WHERE topic_id = ? AND partition = ?",
                (topic_id, partition),
            ).fetchone()
        return int(start)

    def below_log_starts(self) -> list[tuple[str, PartitionletRow]]:
        """(full topic name, row) of the sealed partitionlets that lie wholly below their
        partition's moved log start and have a successor: storage retention may free."""
        columns = ", ".join(f"p.{c.strip()}" for c in _PL_COLUMNS.split(","))
        return [
            (f"{r[0]}:{r[1]}", PartitionletRow(*r[2:]))
            for r in self._query(
                f"SELECT s.path, t.name, {columns} FROM log_starts l "
                "JOIN partitionlets p ON p.topic_id = l.topic_id AND p.partition = l.partition "
                "JOIN topics t ON t.id = l.topic_id JOIN streams s ON s.id = t.stream_id "
                "WHERE p.end_offset IS NOT NULL AND p.end_offset <= l.log_start "
                "AND EXISTS (SELECT 1 FROM partitionlets n WHERE n.topic_id = p.topic_id "
                "AND n.partition = p.partition AND n.base_offset >= p.end_offset AND n.id != p.id) "
                "ORDER BY p.topic_id, p.partition, p.base_offset"
            )
        ]

    def chains(self, topic_ids: list[int]) -> list[PartitionletRow]:
        if not topic_ids:
            return []
        marks = ",".join("?" * len(topic_ids))
        return [
            PartitionletRow(*r)
            for r in self._query(
                f"SELECT {_PL_COLUMNS} FROM partitionlets WHERE topic_id IN ({marks}) "
                "ORDER BY topic_id, partition, base_offset, id",
                tuple(topic_ids),
            )
        ]

    def partitionlet_before(
        self, topic_id: int, partition: int, base_offset: int
    ) -> PartitionletRow | None:
        """The sealed partitionlet of a partition that ends where `base_offset` begins (the
        one before it in the chain), or None (the first, or dropped by retention)."""
        rows = self._query(
            f"SELECT {_PL_COLUMNS} FROM partitionlets WHERE topic_id = ? AND partition = ? "
            "AND end_offset = ? ORDER BY base_offset DESC LIMIT 1",
            (topic_id, partition, base_offset),
        )
        return PartitionletRow(*rows[0]) if rows else None

    def all_partitionlets(self) -> list[PartitionletRow]:
        return [
            PartitionletRow(*r)
            for r in self._query(
                f"SELECT {_PL_COLUMNS} FROM partitionlets ORDER BY topic_id, partition, base_offset"
            )
        ]

    def active_partitionlets(
        self, keys: list[tuple[int, int]]
    ) -> dict[tuple[int, int], PartitionletRow]:
        """Active partitionlet of each (topic_id, partition) that has one."""
        wanted = set(keys)
        topic_ids = sorted({t for t, _ in wanted})
        result: dict[tuple[int, int], PartitionletRow] = {}
        with self.read():
            for chunk in _chunks(topic_ids):
                marks = ",".join("?" * len(chunk))
                for row in self.conn.execute(
                    f"SELECT {_PL_COLUMNS} FROM partitionlets "
                    f"WHERE topic_id IN ({marks}) AND end_offset IS NULL",
                    chunk,
                ):
                    pl = PartitionletRow(*row)
                    if (pl.topic_id, pl.partition) in wanted:
                        result[(pl.topic_id, pl.partition)] = pl
        return result

    def add_first_partitionlets(
        self, wanted: list[tuple[int, int, int]]
    ) -> dict[tuple[int, int], PartitionletRow]:
        """The first partitionlet (base offset 0) of each (topic_id, partition, volume_id)
        that has none yet, in one transaction; returns the active one of every key.

        OR IGNORE on the one-active-per-partition index: when another writer made one
        first, that one stays. A deleted topic gets none.
        """
        created_ms = self.clock.now_ms()
        with self.write():
            self.conn.executemany(
                "INSERT OR IGNORE INTO partitionlets (topic_id, partition, volume_id, "
                "base_offset, created_ms) SELECT ?, ?, ?, 0, ? "
                "WHERE EXISTS (SELECT 1 FROM topics WHERE id = ?)",
                [(t, p, v, created_ms, t) for t, p, v in wanted],
            )
        return self.active_partitionlets([(t, p) for t, p, _ in wanted])

    def ensure_topics(
        self,
        stream_id: int,
        names_: list[str],
        partitions: int,
        place: Callable[[int], list[int]] | None = None,
    ) -> tuple[dict[str, EnsuredTopic], list[FirstPartitionlet]]:
        """Create the topics of `names_` that do not exist (with `partitions` each), in one
        transaction; returns every one that exists after, by name (a name is missing only
        if its stream was deleted), and the first partitionlets made for the new ones.

        With `place` (the volumes of N new partitionlets, engine.storage.placement), each
        new topic's partitions get their first partitionlet (base offset 0) in the same
        transaction, so its first append needs no other catalog write or lookup."""
        created_ms = self.clock.now_ms()
        with self.write():
            conn = self.conn
            if conn.execute("SELECT 1 FROM streams WHERE id = ?", (stream_id,)).fetchone() is None:
                return {}, []
            # ids only grow (AUTOINCREMENT): those above these are the rows made here
            last_topic, last_pl = self._last_ids(("topics", "partitionlets"))
            created = self._insert_topics(
                stream_id, [(n, partitions) for n in names_], created_ms, or_ignore=True
            )
            if created:
                conn.execute(
                    "UPDATE streams SET topic_count = topic_count + ? WHERE id = ?",
                    (created, stream_id),
                )
                self.bump_topics()
            found = {}
            for chunk in _chunks(names_):
                marks = ",".join("?" * len(chunk))
                for topic_id, name, count, policies in conn.execute(
                    f"SELECT id, name, partitions, policies FROM topics WHERE stream_id = ? "
                    f"AND name IN ({marks})",
                    (stream_id, *chunk),
                ):
                    found[name] = EnsuredTopic(topic_id, count, policies, topic_id > last_topic)
            firsts: list[FirstPartitionlet] = []
            if created and place is not None:
                keys = [(t.id, p) for t in found.values() if t.created for p in range(t.partitions)]
                rows = [(*key, v) for key, v in zip(keys, place(len(keys)), strict=True)]
                conn.execute(
                    "INSERT INTO partitionlets (topic_id, partition, volume_id, base_offset, "
                    "created_ms) SELECT json_extract(value, '$[0]'), json_extract(value, "
                    "'$[1]'), json_extract(value, '$[2]'), 0, ? FROM json_each(?)",
                    (created_ms, json.dumps(rows)),
                )
                firsts = [
                    FirstPartitionlet(*r)
                    for r in conn.execute(
                        "SELECT id, topic_id, partition, volume_id FROM partitionlets WHERE id > ?",
                        (last_pl,),
                    )
                ]
        return found, firsts

    def _last_ids(self, tables: tuple[str, ...]) -> list[int]:
        """Inside a transaction: the last id issued in each AUTOINCREMENT table."""
        got = dict(
            self.conn.execute(
                f"SELECT name, seq FROM sqlite_sequence WHERE name IN "
                f"({','.join('?' * len(tables))})",
                tables,
            ).fetchall()
        )
        return [int(got.get(t, 0)) for t in tables]

    def add_partitionlets(
        self, wanted: Sequence[tuple[int, int, int, int, int | None]]
    ) -> dict[tuple[int, int], PartitionletRow]:
        """Make new active partitionlets, in one transaction.

        `wanted` holds (topic_id, partition, volume_id, base_offset, sealed_id): when
        `sealed_id` is given it is the partitionlet being rolled, which must still be the
        active one (else another process rolled it first and its successor is returned).
        Returns the active partitionlet of every key afterwards.
        """
        created_ms = self.clock.now_ms()
        with self.write():
            conn = self.conn
            for topic_id, partition, volume_id, base_offset, sealed_id in wanted:
                current = conn.execute(
                    "SELECT id FROM partitionlets "
                    "WHERE topic_id = ? AND partition = ? AND end_offset IS NULL",
                    (topic_id, partition),
                ).fetchone()
                if sealed_id is None and current is not None:
                    continue  # another writer created the first partitionlet
                if sealed_id is not None:
                    if current is None or current[0] != sealed_id:
                        continue  # another writer rolled it already
                    conn.execute(
                        "UPDATE partitionlets SET end_offset = ?, sealed_ms = ? WHERE id = ?",
                        (base_offset, created_ms, sealed_id),
                    )
                if (
                    conn.execute("SELECT 1 FROM topics WHERE id = ?", (topic_id,)).fetchone()
                    is None
                ):
                    continue  # the topic was deleted meanwhile
                conn.execute(
                    "INSERT INTO partitionlets (topic_id, partition, volume_id, base_offset, "
                    "created_ms) VALUES (?, ?, ?, ?, ?)",
                    (topic_id, partition, volume_id, base_offset, created_ms),
                )
        return self.active_partitionlets([(w[0], w[1]) for w in wanted])

    def record_sealed_stats(
        self, pl_id: int, nbytes: int, first_ts: int | None, max_ts: int | None
    ) -> None:
        with self.write():
            self.conn.execute(
                "UPDATE partitionlets SET bytes = ?, first_ts = ?, max_ts = ? WHERE id = ?",
                (nbytes, first_ts, max_ts, pl_id),
            )

    def mark_reached(self, marks: dict[int, int]) -> None:
        """Save, for each partitionlet id, an offset its appends have reached (its next
        offset then), in one transaction; a mark only ever moves forward. Waits at most
        MARK_LOCK_WAIT_MS for the catalog's write lock (`errors.FileLocked` after): the writer
        that saves is a producer's sender, which must not stall behind a long catalog
        transaction of another process, and saves again later."""
        conn = self.conn
        (wait,) = conn.execute("PRAGMA busy_timeout").fetchone()
        conn.execute(f"PRAGMA busy_timeout = {MARK_LOCK_WAIT_MS}")
        try:
            with self.write():
                conn.executemany(
                    "UPDATE partitionlets SET reached_offset = ? WHERE id = ? "
                    "AND (reached_offset IS NULL OR reached_offset < ?)",
                    [(offset, pl_id, offset) for pl_id, offset in marks.items()],
                )
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(wait)}")

    # --- checking (engine.ops.check) -------------------------------------------------------

    def integrity(self, quick: bool) -> list[str]:
        """What SQLite's integrity_check (quick_check) finds wrong here; [] when sound."""
        return integrity(self.conn, self.path, "catalog", quick)

    def reindex(self) -> None:
        """Rebuild the catalog's indexes from its tables."""
        reindex(self.path, "catalog")

    def issued_partitionlet_id(self) -> int:
        """The highest partitionlet id ever issued (AUTOINCREMENT keeps it past deletes)."""
        rows = self._query("SELECT seq FROM sqlite_sequence WHERE name = 'partitionlets'")
        return int(rows[0][0]) if rows else 0

    def set_end_offset(self, pl_id: int, end_offset: int) -> None:
        """Correct a sealed partitionlet's end offset (`plet check --repair`: from its
        volume, when its successor starts there)."""
        with self.write():
            self.conn.execute(
                "UPDATE partitionlets SET end_offset = ? WHERE id = ? AND end_offset IS NOT NULL",
                (end_offset, pl_id),
            )

    def accept_loss(
        self, pl_id: int, end_offset: int, lost_end: int, successor_volume_id: int
    ) -> bool:
        """Give up offsets `end_offset`..`lost_end`-1 of the partition of `pl_id`, which its
        volume lost (`plet check --repair --accept-loss`), in one transaction: `pl_id` ends
        at `end_offset` (where its volume, which sealed it there, ends); when it was the
        active one its successor starts at `lost_end` on `successor_volume_id`, so no lost
        offset is handed out again; the range is recorded in `lost_offsets`. False when the
        partitionlet is gone."""
        now = self.clock.now_ms()
        with self.write():
            conn = self.conn
            row = conn.execute(
                "SELECT topic_id, partition, end_offset FROM partitionlets WHERE id = ?", (pl_id,)
            ).fetchone()
            if row is None:
                return False
            topic_id, partition, end = row
            conn.execute(
                "UPDATE partitionlets SET end_offset = ?, sealed_ms = coalesce(sealed_ms, ?) "
                "WHERE id = ?",
                (end_offset, now, pl_id),
            )
            if end is None:
                conn.execute(
                    "INSERT INTO partitionlets (topic_id, partition, volume_id, base_offset, "
                    "created_ms) VALUES (?, ?, ?, ?, ?)",
                    (topic_id, partition, successor_volume_id, lost_end, now),
                )
            if lost_end > end_offset:
                conn.execute(
                    "INSERT OR REPLACE INTO lost_offsets (topic_id, partition, first_offset, "
                    "end_offset, accepted_ms) VALUES (?, ?, ?, ?, ?)",
                    (topic_id, partition, end_offset, lost_end, now),
                )
            self.bump_topology()  # writers that refused the partition learn it again
        return True

    def lost_offsets(self) -> list[tuple[int, int, int, int, int]]:
        """(topic id, partition, first offset, end offset, accepted ms) of every range of
        offsets given up (`accept_loss`)."""
        rows = self._query(
            "SELECT topic_id, partition, first_offset, end_offset, accepted_ms FROM lost_offsets "
            "ORDER BY topic_id, partition, first_offset"
        )
        return [(int(t), int(p), int(f), int(e), int(a)) for t, p, f, e, a in rows]

    # --- consumer groups (engine.storage.groups holds their statements) -------------------

    def group_ids(self) -> list[str]:
        """Every group with members, an assignment or committed offsets (`groups.group_ids`)."""
        return self.groups.group_ids()

    # --- moving partitionlets between volumes (engine.ops.balance) ---------------------------

    def partitionlet(self, pl_id: int) -> PartitionletRow | None:
        rows = self._query(f"SELECT {_PL_COLUMNS} FROM partitionlets WHERE id = ?", (pl_id,))
        return PartitionletRow(*rows[0]) if rows else None

    def partitionlet_volumes(self) -> dict[int, int]:
        """{partitionlet id: volume id} of every partitionlet in a volume (archived ones
        are not: a volume copy of one is an orphan), read in one statement."""
        return dict(
            self._query("SELECT id, volume_id FROM partitionlets WHERE archive_file IS NULL")
        )

    def move_partitionlet(
        self, pl_id: int, from_volume: int, to_volume: int, *, sync: bool = True
    ) -> bool:
        """Point the sealed partitionlet `pl_id` at `to_volume`, if it is still sealed and
        still on `from_volume`; True if it was switched.

        One transaction, which also bumps the topology version so that readers re-read
        their chains. `sync=True` makes the commit durable against a machine crash before
        the caller purges the source copy (engine.ops.balance).
        """
        with self.write_durably() if sync else self.write():
            cur = self.conn.execute(
                "UPDATE partitionlets SET volume_id = ? WHERE id = ? AND volume_id = ? "
                "AND end_offset IS NOT NULL AND archive_file IS NULL",
                (to_volume, pl_id, from_volume),
            )
            moved = cur.rowcount == 1
            if moved:
                self.bump_topology()
        return moved

    # --- the archive tier (engine.ops.archive) ----------------------------------------------

    def mark_archived(
        self, pl: PartitionletRow, archive_file: str, messages: int, nbytes: int
    ) -> bool:
        """Record the sealed partitionlet `pl` as archived in `archive_file`, if it is still
        sealed at the same end offset, on the same volume and not archived; True if it was.
        One transaction, fsynced (the caller then purges the volume's copy), which bumps the
        topology version so that readers re-read their chains."""
        with self.write_durably():
            cur = self.conn.execute(
                "UPDATE partitionlets SET archive_file = ?, archive_messages = ?, "
                "archive_bytes = ? WHERE id = ? AND volume_id = ? AND end_offset = ? "
                "AND archive_file IS NULL",
                (archive_file, messages, nbytes, pl.id, pl.volume_id, pl.end_offset),
            )
            done = cur.rowcount == 1
            if done:
                self.bump_topology()
        return done

    # --- replication links (engine.replication) -------------------------------------------

    _REPLICA_COLUMNS = (
        "r.stream_id, s.path, r.target, r.target_stream, r.target_id, r.paused, r.error, "
        "r.conflict, r.created_ms, r.last_run_ms, r.copied_messages, r.copied_bytes, "
        "r.rate_messages, r.rate_bytes"
    )

    def add_replica(self, stream_id: int, target: str, target_stream: str, paused: bool) -> bool:
        """Register a link out of the stream; False if it exists already (left as it is)."""
        with self.write():
            cur = self.conn.execute(
                "INSERT OR IGNORE INTO replicas (stream_id, target, target_stream, paused, "
                "created_ms) VALUES (?, ?, ?, ?, ?)",
                (stream_id, target, target_stream, int(paused), self.clock.now_ms()),
            )
            return cur.rowcount == 1

    def replica_rows(self, stream_id: int | None = None) -> list[tuple[Any, ...]]:
        """Links out (of one stream, or of all), in the order of `_REPLICA_COLUMNS`."""
        sql = f"SELECT {self._REPLICA_COLUMNS} FROM replicas r JOIN streams s ON s.id = r.stream_id"
        args: tuple[Any, ...] = ()
        if stream_id is not None:
            sql += " WHERE r.stream_id = ?"
            args = (stream_id,)
        return self._query(sql + " ORDER BY s.path, r.target", args)

    def update_replica(self, stream_id: int, target: str, **fields: Any) -> bool:
        """Set some columns of a link; False if the link does not exist."""
        allowed = {
            "target_id",
            "paused",
            "error",
            "conflict",
            "last_run_ms",
            "rate_messages",
            "rate_bytes",
        }
        if not fields or not set(fields) <= allowed:
            raise ValueError(f"cannot set {sorted(set(fields) - allowed)} of a replica link")
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self.write():
            cur = self.conn.execute(
                f"UPDATE replicas SET {sets} WHERE stream_id = ? AND target = ?",
                (*fields.values(), stream_id, target),
            )
            return cur.rowcount == 1

    def count_replicated(self, stream_id: int, target: str, messages: int, nbytes: int) -> None:
        """Add a run's copies to the link's totals and to its metrics history's minute
        (engine.ops.metrics: series 'path -> target' of scope 'replica')."""
        minute_ms = self.clock.now_ms() // 60_000 * 60_000
        with self.write():
            self.conn.execute(
                "UPDATE replicas SET copied_messages = copied_messages + ?, "
                "copied_bytes = copied_bytes + ? WHERE stream_id = ? AND target = ?",
                (messages, nbytes, stream_id, target),
            )
            self.conn.executemany(
                "INSERT INTO metrics (resolution, scope, name, metric, bucket_ms, value) "
                "SELECT 60, 'replica', s.path || ' -> ' || ?, ?, ?, ? FROM streams s "
                "WHERE s.id = ? ON CONFLICT (resolution, scope, name, metric, bucket_ms) "
                "DO UPDATE SET value = value + excluded.value",
                [
                    (target, "copied_messages", minute_ms, messages, stream_id),
                    (target, "copied_bytes", minute_ms, nbytes, stream_id),
                ],
            )

    def remove_replica(self, stream_id: int, target: str) -> bool:
        with self.write():
            cur = self.conn.execute(
                "DELETE FROM replicas WHERE stream_id = ? AND target = ?", (stream_id, target)
            )
            return cur.rowcount == 1

    def add_upstream(self, stream_id: int, source: str, source_stream: str, source_id: str) -> None:
        with self.write():
            self.conn.execute(
                "INSERT INTO upstreams (stream_id, source, source_stream, source_id, created_ms) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (stream_id, source_id, source_stream) "
                "DO UPDATE SET source = excluded.source",
                (stream_id, source, source_stream, source_id, self.clock.now_ms()),
            )

    def remove_upstream(self, stream_id: int, source_id: str, source_stream: str) -> None:
        with self.write():
            self.conn.execute(
                "DELETE FROM upstreams WHERE stream_id = ? AND source_id = ? AND source_stream = ?",
                (stream_id, source_id, source_stream),
            )

    def upstream_rows(self, stream_id: int) -> list[tuple[str, str, str, int]]:
        """(source, source_stream, source_id, created_ms) of the links into the stream."""
        return self._query(
            "SELECT source, source_stream, source_id, created_ms FROM upstreams "
            "WHERE stream_id = ? ORDER BY source, source_stream",
            (stream_id,),
        )

    def all_upstream_rows(self) -> list[tuple[str, str, str, str, int]]:
        """(stream path, source, source_stream, source_id, created_ms) of every link into
        every stream, ordered by stream, source and source stream."""
        return self._query(
            "SELECT s.path, u.source, u.source_stream, u.source_id, u.created_ms "
            "FROM upstreams u JOIN streams s ON s.id = u.stream_id "
            "ORDER BY s.path, u.source, u.source_stream"
        )

    def add_replication_token(self, token_hash: str, stream: str, created_by: str = "") -> None:
        """Record a token (its hash) a source may use to replicate into `stream`."""
        with self.write():
            self.conn.execute(
                "INSERT INTO replication_tokens (token_hash, stream, created_ms, created_by) "
                "VALUES (?, ?, ?, ?)",
                (token_hash, stream, self.clock.now_ms(), created_by),
            )

    def replication_tokens(
        self, stream: str | None = None
    ) -> list[tuple[str, str, int, str, int | None]]:
        """(token_hash, stream, created_ms, created_by, last_used_ms) of the tokens issued,
        oldest first; of one stream when given."""
        sql = (
            "SELECT token_hash, stream, created_ms, created_by, last_used_ms "
            "FROM replication_tokens"
        )
        args: tuple[Any, ...] = ()
        if stream is not None:
            sql += " WHERE stream = ?"
            args = (stream,)
        return self._query(sql + " ORDER BY created_ms, token_hash", args)

    def replication_token(self, token_hash: str) -> tuple[str, int | None] | None:
        """(stream, last_used_ms) of a token (by its hash), or None."""
        rows = self._query(
            "SELECT stream, last_used_ms FROM replication_tokens WHERE token_hash = ?",
            (token_hash,),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def touch_replication_token(self, token_hash: str, used_ms: int) -> None:
        with self.write():
            self.conn.execute(
                "UPDATE replication_tokens SET last_used_ms = ? WHERE token_hash = ?",
                (used_ms, token_hash),
            )

    def delete_replication_tokens(self, token_hashes: list[str]) -> int:
        """Forget tokens (by their hashes); how many were there."""
        deleted = 0
        with self.write():
            for h in token_hashes:
                cursor = self.conn.execute(
                    "DELETE FROM replication_tokens WHERE token_hash = ?", (h,)
                )
                deleted += cursor.rowcount
        return deleted

    def replication_token_stream(self, token_hash: str) -> str | None:
        """The stream a token (by its hash) was issued for, or None."""
        rows = self._query(
            "SELECT stream FROM replication_tokens WHERE token_hash = ?", (token_hash,)
        )
        return rows[0][0] if rows else None

    def set_replica_token(self, stream_id: int, target: str, token: str | None) -> None:
        """Keep (or, with None, forget) the token of a link out of a stream."""
        with self.write():
            if token is None:
                self.conn.execute(
                    "DELETE FROM replica_tokens WHERE stream_id = ? AND target = ?",
                    (stream_id, target),
                )
            else:
                self.conn.execute(
                    "INSERT INTO replica_tokens (stream_id, target, token) VALUES (?, ?, ?) "
                    "ON CONFLICT (stream_id, target) DO UPDATE SET token = excluded.token",
                    (stream_id, target, token),
                )

    def replica_token(self, stream_id: int, target: str) -> str | None:
        rows = self._query(
            "SELECT token FROM replica_tokens WHERE stream_id = ? AND target = ?",
            (stream_id, target),
        )
        return rows[0][0] if rows else None

    # --- retention and compaction (engine.ops.retention) ------------------------------------

    def topics_with_policy(
        self, policy: str | tuple[str, ...], after_topic_id: int, limit: int
    ) -> list[tuple[int, int, str, str, str, str | None]]:
        """(topic id, stream id, stream path, topic name, stored stream policies JSON, the
        topic's stored overrides JSON or None) of the topics after `after_topic_id`, by id,
        whose `policy` (or any of several) is stored as anything but 0 or false, the topic's
        own value first, then its stream's, then the default (a stored value that is not a
        number reaches the caller's check).

        The filter runs inside SQLite (json_extract), so that a catalog of many streams is
        walked without parsing every stream's policies in Python."""
        wanted = (policy,) if isinstance(policy, str) else policy
        stream_tests, stream_args, own_tests, own_args = [], [], [], []
        for name in wanted:
            if name not in stream_policies.DEFAULTS:
                raise ValueError(f"unknown policy {name!r}")
            default = stream_policies.DEFAULTS[name]
            value = int(default) if isinstance(default, bool) else default
            stream_tests.append("coalesce(json_extract(policies, ?), ?) IS NOT 0")
            stream_args += [f"$.{name}", value]
            own_tests.append(
                "coalesce(json_extract(t.policies, ?), json_extract(s.policies, ?), ?) IS NOT 0"
            )
            own_args += [f"$.{name}", f"$.{name}", value]
        # The streams' values are tested once, in the subquery (SQLite builds its result
        # once): a topic without overrides (NULL, nearly all of them) then costs one lookup,
        # not a JSON parse per policy, so a million such topics cost what they did before
        # topics had overrides.
        return self._query(
            "SELECT t.id, s.id, s.path, t.name, s.policies, t.policies FROM topics t "
            "JOIN streams s ON s.id = t.stream_id WHERE t.id > ? AND CASE "
            "WHEN t.policies IS NULL THEN t.stream_id IN "
            f"(SELECT id FROM streams WHERE {' OR '.join(stream_tests)}) "
            f"ELSE ({' OR '.join(own_tests)}) END ORDER BY t.id LIMIT ?",
            (after_topic_id, *stream_args, *own_args, limit),
        )

    def drop_partitionlets(self, pls: list[PartitionletRow]) -> list[int]:
        """Remove the catalog rows of these sealed partitionlets, in one transaction, and
        return the ids removed. A row is kept when it is gone already, has moved to another
        volume since `pls` was read, is not sealed, or ends its chain (the last one carries
        the log end offset)."""
        done = []
        with self.write():
            conn = self.conn
            for pl in pls:
                row = conn.execute(
                    "SELECT volume_id, end_offset FROM partitionlets WHERE id = ?", (pl.id,)
                ).fetchone()
                if row is None or row[1] is None or row[0] != pl.volume_id:
                    continue
                later = conn.execute(
                    "SELECT 1 FROM partitionlets WHERE topic_id = ? AND partition = ? "
                    "AND base_offset >= ? AND id != ? LIMIT 1",
                    (pl.topic_id, pl.partition, row[1], pl.id),
                ).fetchone()
                if later is None:
                    continue
                conn.execute("DELETE FROM partitionlets WHERE id = ?", (pl.id,))
                done.append(pl.id)
            if done:
                self.bump_topology()
        return done
