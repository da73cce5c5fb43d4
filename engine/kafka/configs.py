"""Kept for one release: the Kafka topic config table is `engine.kafka_configs` (every config
Kafka lists, topic overrides, both directions); this module shows a stream's policies as
the six configs it used to, read from that table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine import kafka_configs, policies

# the configs this module used to show, each one policy
_NAMES = (
    "retention.ms",
    "cleanup.policy",
    "max.message.bytes",
    "message.timestamp.type",
    "min.compaction.lag.ms",
    "delete.retention.ms",
)
TOPIC_CONFIGS = tuple(kafka_configs.BY_NAME[n] for n in _NAMES)
BY_NAME = {c.name: c for c in TOPIC_CONFIGS}


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
    """The topic configs of a stream's policies, in this module's order; `names` (an
    iterable of config names, None for all) keeps those named (unknown names are skipped)."""
    wanted = set(_NAMES) if names is None else set(names) & set(_NAMES)
    found = {e.name: e for e in kafka_configs.describe(stream_policies, names=wanted)}
    return [
        ConfigValue(
            n, found[n].value, found[n].is_default, found[n].policies[0], found[n].kafka_type
        )
        for n in _NAMES
        if n in found
    ]
