"""kafka-python's `ConfigResource` (`kafka.admin.config_resource`).

`describe_configs` shows a topic's policies under Kafka's config names
(engine.kafka_configs); `alter_configs` raises `UnsupportedVersionError` (change a topic's
policies with `Cluster.edit_topic`, or its configs over plet serve's listener).
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["ConfigResource", "ConfigResourceType"]


class ConfigResourceType(enum.IntEnum):
    """What a `ConfigResource` names; the values are Kafka's protocol codes."""

    TOPIC = 2
    BROKER = 4


class ConfigResource:
    """A topic or broker and, for `alter_configs`, the settings to give it."""

    def __init__(
        self,
        resource_type: ConfigResourceType | str,
        name: str,
        configs: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(resource_type, ConfigResourceType):
            resource_type = ConfigResourceType[str(resource_type).upper()]  # 'topic' too
        self.resource_type = resource_type
        self.name = name
        self.configs = configs

    def __repr__(self) -> str:
        return f"ConfigResource({self.resource_type.name}, {self.name!r}, {self.configs!r})"
