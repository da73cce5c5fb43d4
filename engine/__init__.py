"""Partitionlet's embedded engine: a Kafka-shaped log on SQLite WAL files.

The public API (DESIGN.md, "Public API of engine") is what this module exports.
"""

from __future__ import annotations

from engine import errors
from engine.auth.principal import Principal
from engine.client.consumer import Consumer, ConsumerRebalanceListener
from engine.client.producer import Producer
from engine.cluster import Cluster
from engine.records import (
    ConsumerRecord,
    KafkaBatch,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionInfo,
    PartitionletInfo,
    RecordMetadata,
    StreamInfo,
    TopicInfo,
    TopicPartition,
    VolumeInfo,
)

# Also gives `Cluster` its replication methods (engine.cluster.register_replication).
from engine.replication import Replicator

__all__ = [
    "Cluster",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "KafkaBatch",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "PartitionletInfo",
    "Principal",
    "Producer",
    "RecordMetadata",
    "Replicator",
    "StreamInfo",
    "TopicInfo",
    "TopicPartition",
    "VolumeInfo",
    "errors",
]
