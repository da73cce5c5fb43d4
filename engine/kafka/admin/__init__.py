"""kafka-python's `kafka.admin`: `KafkaAdminClient` and the values its calls take."""

from engine.kafka.admin.client import KafkaAdminClient
from engine.kafka.admin.config_resource import ConfigResource, ConfigResourceType
from engine.kafka.admin.new_partitions import NewPartitions
from engine.kafka.admin.new_topic import NewTopic
from engine.kafka.structs import OffsetSpec, OffsetTimestamp

__all__ = [
    "ConfigResource",
    "ConfigResourceType",
    "KafkaAdminClient",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "OffsetTimestamp",
]
