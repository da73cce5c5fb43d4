"""Kafka's topic configs are the engine's policies under Kafka's names: the one table that
maps them (DESIGN, "Stream policies"; issue 24), and the conversions both ways.

- `CONFIGS`: every topic config Kafka's broker lists for a topic (Kafka 4.x), with its
  Kafka type and default, and the policy it is (`policy`), or None when it is accepted
  with no meaning here (replicas, flushing, index sizes, ...): such a config is never an
  error that stops an application, it is only shown as having no effect.
- `to_policies(configs)`: configs as a client sends them (CreateTopics, AlterConfigs SET)
  -> the topic's policy overrides, and the names accepted with no meaning here.
- `unset_policies(names, overrides)`: configs a client deletes (AlterConfigs DELETE) ->
  the overrides to remove ({policy: None}, for `Cluster.edit_topic`).
- `describe(policies, overrides, stream_policies)`: a topic's configs as Kafka shows them
  (DescribeConfigs), each with its value, its source (the topic's own override, its
  stream's policy, or the default) and whether it means anything here.

Semantics worth knowing:

- `cleanup.policy`: `compact` is `compact=True` and no deletion by age or size (`ttl=0`,
  `retention_bytes=0`), as Kafka keeps a compacted topic's latest values forever;
  `compact,delete` is `compact=True` with the topic's time and size retention;
  `delete` is `compact=False`. Shown back the same way.
- `retention.ms` is `ttl` in seconds (rounded up: a positive span never becomes 0, which
  keeps forever); -1 is 0. `retention.bytes` is `retention_bytes`; -1 is 0 (no limit)
  and 0, which in Kafka keeps nothing sealed, is 1 byte (only the active partitionlet).
- `local.retention.ms` is `archive_after` (Kafka's tiered storage keeps a segment locally
  that long; here a partitionlet moves to the archive tier after it); -2 (as
  `retention.ms`) is 0, never archive.
- `compression.type`: `uncompressed` and `producer` store plain batches (`none`), `zstd`
  and `lz4` are themselves, `gzip` and `snappy` are stored as their nearest here (`zstd`:
  the better ratio, `lz4`: the faster codec); every reader reads every batch whatever
  its codec.
- `segment.bytes` and `segment.ms` are where Kafka rolls a segment; here partitionlets
  roll by the cluster's settings (`Cluster.open(partitionlet_bytes=, partitionlet_ms=)`),
  not per topic: accepted, shown with the cluster's values when given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine import policies
from engine.errors import InvalidPolicy

if TYPE_CHECKING:
    from engine.cluster import Cluster

LONG_MAX = "9223372036854775807"

# Where a config's value comes from (DescribeConfigs' config source, in the engine's words).
# Where a value comes from (engine.policies' rule): the topic's own override (Kafka:
# DYNAMIC_TOPIC_CONFIG), its stream's policy (a broker-level config) or nobody (DEFAULT_CONFIG)
TOPIC, STREAM, DEFAULT = policies.TOPIC, policies.STREAM, policies.DEFAULT


@dataclass(frozen=True)
class KafkaConfig:
    """One Kafka topic config: its name, Kafka's type (BOOLEAN, STRING, INT, SHORT, LONG,
    DOUBLE, LIST) and default text, and the policies it is (empty: no meaning here)."""

    name: str
    kafka_type: str
    default: str
    policies: tuple[str, ...] = ()
    # the policies' values -> the config's text (with the cluster's `context`)
    show: Callable[[Mapping[str, Any], Mapping[str, Any]], str] | None = None
    # the config's text -> {policy: value}; raises InvalidPolicy for a bad text
    read: Callable[[str], dict[str, Any]] | None = None
    note: str = ""  # for a config with no meaning here: why

    @property
    def meaningful(self) -> bool:
        return bool(self.policies)


def _int_text(name: str, text: str, low: int = -(2**63)) -> int:
    value = text.strip() if isinstance(text, str) else text
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidPolicy(f"config {name} must be a whole number, got {text!r}") from None
    if number < low:
        raise InvalidPolicy(f"config {name} must be at least {low}, got {number}")
    return number


# --- cleanup.policy ------------------------------------------------------------------------


def _cleanup_words(text: str) -> set[str]:
    words = {w.strip().lower() for w in str(text).split(",") if w.strip()}
    if not words or not words <= {"compact", "delete"}:
        raise InvalidPolicy(
            f"config cleanup.policy must be delete, compact or compact,delete, got {text!r}"
        )
    return words


def _read_cleanup(text: str) -> dict[str, Any]:
    words = _cleanup_words(text)
    if words == {"compact"}:
        # Kafka keeps a compacted topic's latest values forever
        return {"compact": True, "ttl": 0, "retention_bytes": 0}
    return {"compact": "compact" in words}


def _show_cleanup(p: Mapping[str, Any], _: Mapping[str, Any]) -> str:
    if not p["compact"]:
        return "delete"
    return "compact" if not p["ttl"] and not p["retention_bytes"] else "compact,delete"


# --- retention ------------------------------------------------------------------------------


def _read_retention_ms(text: str) -> dict[str, Any]:
    ms = _int_text("retention.ms", text, -1)
    return {"ttl": 0 if ms == -1 else math.ceil(ms / 1000)}


def _read_retention_bytes(text: str) -> dict[str, Any]:
    n = _int_text("retention.bytes", text, -1)
    return {"retention_bytes": 0 if n == -1 else max(n, 1)}


def _read_local_retention_ms(text: str) -> dict[str, Any]:
    ms = _int_text("local.retention.ms", text, -2)
    return {"archive_after": 0 if ms < 0 else math.ceil(ms / 1000)}


# --- compression ----------------------------------------------------------------------------

# Kafka's compression.type -> the engine's codec
_CODEC_OF = {
    "uncompressed": "none",
    "producer": "none",
    "zstd": "zstd",
    "lz4": "lz4",
    "gzip": "zstd",
    "snappy": "lz4",
}
_KAFKA_CODEC = {"none": "uncompressed", "zstd": "zstd", "lz4": "lz4"}


def _read_compression(text: str) -> dict[str, Any]:
    codec = _CODEC_OF.get(str(text).strip().lower())
    if codec is None:
        raise InvalidPolicy(
            f"config compression.type must be one of {', '.join(_CODEC_OF)}, got {text!r}"
        )
    return {"compression": codec}


_TIMESTAMP_TYPES = {"CreateTime": "create", "LogAppendTime": "log_append"}


def _read_timestamp_type(text: str) -> dict[str, Any]:
    value = _TIMESTAMP_TYPES.get(str(text).strip())
    if value is None:
        raise InvalidPolicy(
            f"config message.timestamp.type must be CreateTime or LogAppendTime, got {text!r}"
        )
    return {"timestamp_type": value}


def _plain(config: str, policy: str) -> Callable[[str], dict[str, Any]]:
    """A config that is its policy's whole number, unchanged (policy validation bounds it)."""
    return lambda text: {policy: _int_text(config, text, 0)}


def _shown(policy: str) -> Callable[[Mapping[str, Any], Mapping[str, Any]], str]:
    return lambda p, _: str(p[policy])


def _context(key: str, default: str) -> Callable[[Mapping[str, Any], Mapping[str, Any]], str]:
    return lambda _, context: str(context.get(key, default))


_NO_MEANING = "accepted; no meaning here"
_ROLLING = "partitionlets roll by the cluster's settings, not per topic"

CONFIGS: tuple[KafkaConfig, ...] = (
    KafkaConfig(
        "cleanup.policy",
        "LIST",
        "delete",
        ("compact",),  # its value also reads ttl and retention_bytes (_show_cleanup)
        _show_cleanup,
        _read_cleanup,
    ),
    KafkaConfig("compression.gzip.level", "INT", "9", note=_NO_MEANING),
    KafkaConfig("compression.lz4.level", "INT", "9", note=_NO_MEANING),
    KafkaConfig(
        "compression.type",
        "STRING",
        "producer",
        ("compression",),
        lambda p, _: _KAFKA_CODEC.get(p["compression"], "uncompressed"),
        _read_compression,
    ),
    KafkaConfig("compression.zstd.level", "INT", "3", note=_NO_MEANING),
    KafkaConfig(
        "delete.retention.ms",
        "LONG",
        "86400000",
        ("delete_retention_ms",),
        _shown("delete_retention_ms"),
        _plain("delete.retention.ms", "delete_retention_ms"),
    ),
    KafkaConfig("file.delete.delay.ms", "LONG", "60000", note=_NO_MEANING),
    KafkaConfig("flush.messages", "LONG", LONG_MAX, note="every acks=all write is fsynced"),
    KafkaConfig("flush.ms", "LONG", LONG_MAX, note="every acks=all write is fsynced"),
    KafkaConfig("follower.replication.throttled.replicas", "LIST", "", note=_NO_MEANING),
    KafkaConfig("index.interval.bytes", "INT", "4096", note=_NO_MEANING),
    KafkaConfig("leader.replication.throttled.replicas", "LIST", "", note=_NO_MEANING),
    KafkaConfig("local.retention.bytes", "LONG", "-2", note=_NO_MEANING),
    KafkaConfig(
        "local.retention.ms",
        "LONG",
        "-2",
        ("archive_after",),
        lambda p, _: str(p["archive_after"] * 1000) if p["archive_after"] else "-2",
        _read_local_retention_ms,
    ),
    KafkaConfig("max.compaction.lag.ms", "LONG", LONG_MAX, note=_NO_MEANING),
    KafkaConfig(
        "max.message.bytes",
        "INT",
        "1048588",
        ("max_message_bytes",),
        _shown("max_message_bytes"),
        _plain("max.message.bytes", "max_message_bytes"),
    ),
    KafkaConfig("message.timestamp.after.max.ms", "LONG", "3600000", note=_NO_MEANING),
    KafkaConfig("message.timestamp.before.max.ms", "LONG", LONG_MAX, note=_NO_MEANING),
    KafkaConfig(
        "message.timestamp.type",
        "STRING",
        "CreateTime",
        ("timestamp_type",),
        lambda p, _: "LogAppendTime" if p["timestamp_type"] == "log_append" else "CreateTime",
        _read_timestamp_type,
    ),
    KafkaConfig("min.cleanable.dirty.ratio", "DOUBLE", "0.5", note=_NO_MEANING),
    KafkaConfig(
        "min.compaction.lag.ms",
        "LONG",
        "0",
        ("min_compaction_lag_ms",),
        _shown("min_compaction_lag_ms"),
        _plain("min.compaction.lag.ms", "min_compaction_lag_ms"),
    ),
    KafkaConfig("min.insync.replicas", "INT", "1", note="one node leads every partition"),
    KafkaConfig("preallocate", "BOOLEAN", "false", note=_NO_MEANING),
    KafkaConfig("remote.log.copy.disable", "BOOLEAN", "false", note=_NO_MEANING),
    KafkaConfig("remote.log.delete.on.disable", "BOOLEAN", "false", note=_NO_MEANING),
    KafkaConfig(
        "remote.storage.enable", "BOOLEAN", "false", note="archiving follows local.retention.ms"
    ),
    KafkaConfig(
        "retention.bytes",
        "LONG",
        "-1",
        ("retention_bytes",),
        lambda p, _: str(p["retention_bytes"]) if p["retention_bytes"] else "-1",
        _read_retention_bytes,
    ),
    KafkaConfig(
        "retention.ms",
        "LONG",
        "604800000",
        ("ttl",),
        lambda p, _: str(p["ttl"] * 1000) if p["ttl"] else "-1",
        _read_retention_ms,
    ),
    KafkaConfig(
        "segment.bytes",
        "INT",
        "1073741824",
        show=_context("partitionlet_bytes", "1073741824"),
        note=_ROLLING,
    ),
    KafkaConfig("segment.index.bytes", "INT", "10485760", note=_NO_MEANING),
    KafkaConfig("segment.jitter.ms", "LONG", "0", note=_NO_MEANING),
    KafkaConfig(
        "segment.ms",
        "LONG",
        "604800000",
        show=_context("partitionlet_ms", "604800000"),
        note=_ROLLING,
    ),
    KafkaConfig("unclean.leader.election.enable", "BOOLEAN", "false", note=_NO_MEANING),
)
BY_NAME: dict[str, KafkaConfig] = {c.name: c for c in CONFIGS}


def config(name: str) -> KafkaConfig:
    """The table's row of Kafka topic config `name`; `InvalidPolicy` if Kafka has none such
    (as Kafka's broker refuses an unknown topic config)."""
    try:
        return BY_NAME[name]
    except (KeyError, TypeError):
        raise InvalidPolicy(
            f"unknown topic config {policies.shown(name)}; Kafka's topic configs are "
            f"{', '.join(BY_NAME)}"
        ) from None


def to_policies(configs: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """({policy: value} of a topic's overrides, [config names accepted with no meaning
    here]) of Kafka topic configs as a client sends them (CreateTopics' configs,
    AlterConfigs' SET). Each value is checked as the policy's (`InvalidPolicy` naming the
    config). `cleanup.policy=compact` turns off deletion by age and size unless
    `retention.ms` or `retention.bytes` is set in the same request (which Kafka would
    ignore; here they are the topic's retention, shown as `compact,delete`)."""
    found: dict[str, Any] = {}
    explicit: dict[str, Any] = {}
    ignored = []
    for name, text in configs.items():
        row = config(name)
        if row.read is None:
            ignored.append(name)
            continue
        got = row.read(text)
        for policy, value in got.items():
            try:
                got[policy] = policies.validate_overrides({policy: value})[policy]
            except InvalidPolicy as exc:
                raise InvalidPolicy(f"config {name}={text!r}: {exc}") from None
        if name == "cleanup.policy":
            found.update(got)
        else:
            explicit.update(got)
    found.update(explicit)  # retention.ms and retention.bytes over cleanup.policy's
    return found, ignored


def unset_policies(names: Iterable[str], overrides: Mapping[str, Any]) -> dict[str, None]:
    """{policy: None} (for `Cluster.edit_topic`) removing the overrides that Kafka configs
    `names` stand for (AlterConfigs' DELETE), so the stream's policies apply again.
    Deleting `cleanup.policy` also removes a `ttl` or `retention_bytes` override of 0 (what
    `cleanup.policy=compact` set)."""
    out: dict[str, None] = {}
    for name in names:
        row = config(name)
        if name == "cleanup.policy":
            out["compact"] = None
            for policy in ("ttl", "retention_bytes"):
                if overrides.get(policy) == 0:
                    out[policy] = None
            continue
        for policy in row.policies:
            out[policy] = None
    return out


@dataclass(frozen=True)
class ConfigEntry:
    """A topic config as Kafka shows it (DescribeConfigs)."""

    name: str
    value: str
    source: str  # TOPIC, STREAM or DEFAULT
    kafka_type: str
    policies: tuple[str, ...]  # empty: accepted with no meaning here
    note: str

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT

    @property
    def documentation(self) -> str:
        if not self.policies:
            return f"Accepted for Kafka's clients: {self.note}."
        return " ".join(f"The {p} policy: {policies.policy(p).help}" for p in self.policies)


def describe(
    effective: Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    stream_policies: Mapping[str, Any] | None = None,
    *,
    names: Iterable[str] | None = None,
    context: Mapping[str, Any] | None = None,
) -> list[ConfigEntry]:
    """A topic's configs in the table's order (or those of `names` known to it), from its
    `effective` policies (`TopicInfo.policies`), its `overrides` (`TopicInfo.overrides`)
    and its stream's policies (which say whether a value not overridden is the stream's or
    the default). `context` may give the cluster's `partitionlet_bytes` and `partitionlet_ms`
    (`Cluster.partitionlet_bytes`, `.partitionlet_ms`), shown as segment.bytes and segment.ms."""
    overrides = overrides or {}
    stream_policies = stream_policies if stream_policies is not None else effective
    context = context or {}
    full = {**policies.DEFAULTS, **effective}
    where = policies.sources(stream_policies, overrides)
    wanted = None if names is None else set(names)
    out = []
    for row in CONFIGS:
        if wanted is not None and row.name not in wanted:
            continue
        if row.show is None:
            out.append(ConfigEntry(row.name, row.default, DEFAULT, row.kafka_type, (), row.note))
            continue
        value = row.show(full, context)
        # a config made of several policies comes from the nearest source of any of them
        found = {where.get(p, DEFAULT) for p in row.policies}
        source = TOPIC if TOPIC in found else STREAM if STREAM in found else DEFAULT
        out.append(ConfigEntry(row.name, value, source, row.kafka_type, row.policies, row.note))
    return out


def list_values(text: str) -> list[str]:
    """A LIST config's items ("compact,delete" -> ["compact", "delete"]), for
    IncrementalAlterConfigs' APPEND and SUBTRACT."""
    return [w.strip() for w in str(text).split(",") if w.strip()]


# --- what the listener and the facade answer ------------------------------------------------

# A topic config's broker-level name (Kafka's synonym: the cluster-wide default a topic
# config falls back to); here that level is the stream's policy.
BROKER_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "local.retention.ms": "log.local.retention.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
}


@dataclass(frozen=True)
class Synonym:
    """One level a config's value may come from, most specific first (Kafka's synonyms)."""

    name: str
    value: str
    source: str  # TOPIC, STREAM or DEFAULT


def synonyms(
    entry: ConfigEntry,
    stream_policies: Mapping[str, Any],
    context: Mapping[str, Any] | None = None,
) -> list[Synonym]:
    """The levels of a topic config that are set, most specific first: the topic's override,
    its stream's policy (under the broker-level name), Kafka's default."""
    row = BY_NAME[entry.name]
    context = context or {}
    out = []
    if entry.source == TOPIC:
        out.append(Synonym(row.name, entry.value, TOPIC))
    broker_name = BROKER_SYNONYMS.get(row.name, row.name)
    if row.show is not None and any(
        stream_policies.get(p, policies.DEFAULTS[p]) != policies.DEFAULTS[p] for p in row.policies
    ):
        shown = row.show({**policies.DEFAULTS, **stream_policies}, context)
        out.append(Synonym(broker_name, shown, STREAM))
    # the engine's default, as the entry shows it when nobody set it
    default = row.show(policies.DEFAULTS, context) if row.show is not None else row.default
    out.append(Synonym(broker_name, default, DEFAULT))
    return out


@dataclass(frozen=True)
class TopicConfigs:
    """A topic's configs as DescribeConfigs answers them (`topic_configs`)."""

    name: str  # the topic's full name
    entries: list[ConfigEntry]
    effective: dict[str, Any]
    overrides: dict[str, Any]
    stream_policies: dict[str, Any]
    context: dict[str, Any]

    def synonyms(self, entry: ConfigEntry) -> list[Synonym]:
        return synonyms(entry, self.stream_policies, self.context)


def cluster_context(cluster: Cluster) -> dict[str, Any]:
    """The cluster's settings configs show (segment.bytes, segment.ms)."""
    return {
        "partitionlet_bytes": cluster.partitionlet_bytes,
        "partitionlet_ms": cluster.partitionlet_ms,
    }


def topic_configs(cluster: Cluster, name: str, names: Iterable[str] | None = None) -> TopicConfigs:
    """Topic `name`'s (a full name) configs, those of `names` known to the table or all,
    as the listener's DescribeConfigs and the facade's `describe_configs` answer them.
    Raises what `Cluster.topic` and `Cluster.stream` raise."""
    info = cluster.topic(name)
    stream = cluster.stream(info.stream)
    context = cluster_context(cluster)
    entries = describe(info.policies, info.overrides, stream.policies, names=names, context=context)
    return TopicConfigs(
        name, entries, dict(info.policies), dict(info.overrides), dict(stream.policies), context
    )


# IncrementalAlterConfigs' operations (Kafka's numbers)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def alter(
    current: TopicConfigs, changes: Iterable[tuple[str, int, str | None]], *, replace: bool
) -> tuple[dict[str, Any], list[str]]:
    """({policy: value or None} for `Cluster.edit_topic`, [config names accepted with no
    meaning here]) of a topic's config changes: (config name, SET/DELETE/APPEND/SUBTRACT,
    value), applied in order. `replace` (AlterConfigs): the changes are all of the topic's
    configs, so every override they do not set is removed, as Kafka replaces a topic's
    configs. APPEND and SUBTRACT are for LIST configs (cleanup.policy) and work on the
    current value. Raises `InvalidPolicy` with the reason (Kafka's INVALID_CONFIG)."""
    texts: dict[str, str | None] = {}  # None: delete
    shown = {e.name: e.value for e in current.entries}
    for name, op, value in changes:
        row = config(name)
        if op == SET:
            if value is None:
                raise InvalidPolicy(f"config {name}: SET needs a value")
            texts[name] = value
        elif op == DELETE:
            texts[name] = None
        elif op in (APPEND, SUBTRACT):
            if row.kafka_type != "LIST":
                raise InvalidPolicy(
                    f"config {name} is not a list: {'APPEND' if op == APPEND else 'SUBTRACT'} "
                    "works on list configs only (cleanup.policy, ...)"
                )
            before = texts.get(name, shown.get(name, row.default))
            items = list_values(before or "")
            given = list_values(value or "")
            if op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            texts[name] = ",".join(items)
        else:
            raise InvalidPolicy(f"config {name}: unknown operation {op}")
    setting, ignored = to_policies({n: t for n, t in texts.items() if t is not None})
    deleted = [n for n, t in texts.items() if t is None]
    if replace:
        edits: dict[str, Any] = {p: None for p in current.overrides}
    else:
        edits = dict(unset_policies(deleted, current.overrides))
    edits.update(setting)
    ignored += [n for n in deleted if not config(n).meaningful]
    return edits, ignored


# --- the broker's configs -------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerConfig:
    """A broker config as DescribeConfigs answers it: all are read-only here (the
    stream-level ones are edited on the stream)."""

    name: str
    value: str | None
    source: str  # STREAM, DEFAULT or STATIC (the listener's own settings)
    kafka_type: str
    documentation: str
    is_sensitive: bool = False


STATIC = "static"  # set where the listener starts (Kafka: STATIC_BROKER_CONFIG)


def broker_configs(
    cluster: Cluster,
    default_stream_policies: Mapping[str, Any],
    *,
    node_id: int,
    listeners: str,
    advertised_listeners: str,
    default_stream: str,
    names: Iterable[str] | None = None,
) -> list[BrokerConfig]:
    """The keys tools read of a broker (kafka-python's, kafka-ui's, AKHQ's): its listeners,
    and the topic configs' broker-level names with the default stream's policies (what a
    plain topic name gets)."""
    wanted = None if names is None else set(names)
    stream_cfg = {
        e.name: e
        for e in describe(
            default_stream_policies,
            {},
            default_stream_policies,
            context=cluster_context(cluster),
        )
    }
    pol = {**policies.DEFAULTS, **default_stream_policies}

    def stream_key(policy: str) -> str:
        return STREAM if pol[policy] != policies.DEFAULTS[policy] else DEFAULT

    out = [
        BrokerConfig(
            "advertised.listeners",
            advertised_listeners,
            STATIC,
            "LIST",
            "The address given to clients (plet serve --advertise).",
        ),
        BrokerConfig(
            "listeners",
            listeners,
            STATIC,
            "LIST",
            "The address the listener is bound to (plet serve --listen).",
        ),
        BrokerConfig("broker.id", str(node_id), STATIC, "INT", "This node's id, the only one."),
        BrokerConfig("node.id", str(node_id), STATIC, "INT", "This node's id, the only one."),
        BrokerConfig(
            "process.roles",
            "broker,controller",
            STATIC,
            "LIST",
            "One node is broker and controller (Kafka's combined mode).",
        ),
        BrokerConfig(
            "default.stream",
            default_stream,
            STATIC,
            "STRING",
            "The stream of plain topic names (not a Kafka config).",
        ),
        BrokerConfig(
            "auto.create.topics.enable",
            "true" if pol["auto_create"] else "false",
            stream_key("auto_create"),
            "BOOLEAN",
            "The default stream's auto_create policy.",
        ),
        BrokerConfig(
            "num.partitions",
            str(pol["default_partitions"]),
            stream_key("default_partitions"),
            "INT",
            "The default stream's default_partitions policy.",
        ),
        BrokerConfig(
            "default.replication.factor",
            "1",
            STATIC,
            "INT",
            "One copy of each partition on this node (replication is per stream).",
        ),
        BrokerConfig(
            "offsets.topic.replication.factor",
            "1",
            STATIC,
            "SHORT",
            "Committed offsets live in the catalog.",
        ),
        BrokerConfig(
            "transaction.state.log.replication.factor",
            "1",
            STATIC,
            "SHORT",
            "No transactions are served.",
        ),
        BrokerConfig(
            "delete.topic.enable",
            "true",
            STATIC,
            "BOOLEAN",
            "Topics are deleted with the stream's topic_perm.",
        ),
        BrokerConfig(
            "log.retention.hours",
            "168",
            DEFAULT,
            "INT",
            "Kafka's default; log.retention.ms is the default stream's ttl.",
        ),
    ]
    for topic_name, broker_name in BROKER_SYNONYMS.items():
        e = stream_cfg[topic_name]
        out.append(BrokerConfig(broker_name, e.value, e.source, e.kafka_type, e.documentation))
    return [c for c in out if wanted is None or c.name in wanted]
