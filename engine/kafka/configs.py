"""Stream policies shown as the Kafka topic configs that mean the same thing: one table for
the facade's `KafkaAdminClient.describe_configs` and the wire listener's DescribeConfigs and
CreateTopics (engine.wire.handlers.admin).

A topic's configs are its stream's policies: they are read here, never stored per topic, and
changed on the stream (`Cluster.edit_stream`, `plet stream edit`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine import policies


@dataclass(frozen=True)
class TopicConfig:
    """One Kafka topic config: its name, the policy it shows, how a policy value reads as the
    config's text, and Kafka's type of it (DescribeConfigs v3+: LONG, INT, STRING, LIST)."""

    name: str
    policy: str
    text: Callable[[Any], str]
    kafka_type: str


TOPIC_CONFIGS: tuple[TopicConfig, ...] = (
    # ttl is in seconds, 0 keeping forever; Kafka's "keep forever" is -1
    TopicConfig("retention.ms", "ttl", lambda ttl: str(ttl * 1000) if ttl else "-1", "LONG"),
    TopicConfig(
        "cleanup.policy", "compact", lambda compact: "compact" if compact else "delete", "LIST"
    ),
    TopicConfig("max.message.bytes", "max_message_bytes", str, "INT"),
    TopicConfig(
        "message.timestamp.type",
        "timestamp_type",
        lambda t: "LogAppendTime" if t == "log_append" else "CreateTime",
        "STRING",
    ),
    TopicConfig("min.compaction.lag.ms", "min_compaction_lag_ms", str, "LONG"),
    TopicConfig("delete.retention.ms", "delete_retention_ms", str, "LONG"),
)
BY_NAME: dict[str, TopicConfig] = {c.name: c for c in TOPIC_CONFIGS}


@dataclass(frozen=True)
class ConfigValue:
    """A topic config's value on one stream."""

    name: str
    value: str
    is_default: bool  # the stream's policy has its default value
    policy: str
    kafka_type: str

    @property
    def documentation(self) -> str:
        return f"The stream's {self.policy} policy: {policies.policy(self.policy).help}"


def topic_configs(stream_policies: Mapping[str, Any], names: Any = None) -> list[ConfigValue]:
    """The topic configs of a stream's policies, in the table's order; `names` (an iterable of
    config names, None for all) keeps those named (unknown names are skipped)."""
    wanted = None if names is None else set(names)
    out = []
    for config in TOPIC_CONFIGS:
        if wanted is not None and config.name not in wanted:
            continue
        default = policies.DEFAULTS[config.policy]
        value = stream_policies.get(config.policy, default)
        out.append(
            ConfigValue(
                config.name,
                config.text(value),
                value == default,
                config.policy,
                config.kafka_type,
            )
        )
    return out
