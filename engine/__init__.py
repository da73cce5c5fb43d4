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

__all__ = [
    "Cluster",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "PartitionletInfo",
    "Principal",
    "Producer",
    "RecordMetadata",
    "StreamInfo",
    "TopicInfo",
    "TopicPartition",
    "VolumeInfo",
    "errors",
]


def __getattr__(name: str):
    # Replicator arrives with the replication issue; import it lazily so that the engine
    # works without it and `from engine import Replicator` names what is missing.
    if name == "Replicator":
        from engine.replication import Replicator

        return Replicator
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
