"""The Kafka facade: the engine behind kafka-python's class names and keyword arguments.

A program written for kafka-python runs on a Partitionlet cluster once its import lines
say `engine.kafka` instead of `kafka`:

    from engine.kafka import KafkaProducer, KafkaConsumer, KafkaAdminClient, TopicPartition
    from engine.kafka.errors import KafkaError        # or: # `name as name`: importable from here, kept out of __all__ (the facade's own settings).
from engine.kafka import errors

- The cluster comes from `bootstrap_servers="file:///path/to/cluster"` (also inside a list
  or a comma-separated string). When `bootstrap_servers` holds broker addresses only
  (`host:port`, kafka-python's default included), the cluster directory comes from the
  `PLET_CLUSTER` environment variable; with neither, `NoBrokersAvailable` is raised. All
  clients of one process share one opened `Cluster` per directory, closed when the last
  of them closes.
- A topic name without a leading '/' lives in the stream named by `default_stream=`, else
  by `PLET_DEFAULT_STREAM`, else in `/kafka`, which is created on first use with default
  policies. Records, metadata and `TopicPartition`s handed back carry topic names the way
  the program wrote them.
- Settings that only mean something to a networked broker (security, SASL/SSL, socket
  sizes, retries, compression, ...) are accepted and ignored; an unknown keyword raises
  `KafkaConfigurationError`, as kafka-python does.
- Engine errors are raised as kafka-python's error classes (`engine.kafka.errors`), with
  the engine error as `__cause__`.

The submodules have kafka-python's names and hold what kafka-python's do: `errors`,
`structs`, `serializer`, `admin` (`.client`, `.new_topic`, `.new_partitions`,
`.config_resource`), `consumer` (`.group`, `.fetcher`, `.subscription_state`), `producer`
(`.kafka`, `.future`), `coordinator.assignors` (`.range`, `.roundrobin`,
`.sticky.sticky_assignor`). The facade's own parts: `bootstrap` (which cluster), `names`
(topic names), `config` (keyword checks), `future` (a resolved future).

This package uses only public objects of the engine. docs/KAFKA.md lists what maps to
what and the differences from kafka-python.
"""

# Imports written `x as x` are the facade's own settings: importable from here, not in __all__.
from engine.kafka import errors
from engine.kafka.admin import (
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
)
from engine.kafka.bootstrap import ENV_CLUSTER as ENV_CLUSTER
from engine.kafka.bootstrap import cluster_path as cluster_path
from engine.kafka.consumer import KafkaConsumer
from engine.kafka.consumer.fetcher import ConsumerRecord
from engine.kafka.consumer.subscription_state import ConsumerRebalanceListener
from engine.kafka.coordinator.assignors.range import RangePartitionAssignor
from engine.kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from engine.kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from engine.kafka.errors import *  # noqa: F403 (the error classes, by kafka-python's names)
from engine.kafka.names import DEFAULT_STREAM as DEFAULT_STREAM
from engine.kafka.names import ENV_DEFAULT_STREAM as ENV_DEFAULT_STREAM
from engine.kafka.producer import FutureRecordMetadata, KafkaProducer, RecordMetadata
from engine.kafka.serializer import DefaultSerializer, Deserializer, JsonSerializer, Serializer
from engine.kafka.structs import (
    ConsumerGroupMetadata,
    GroupInformation,
    IsolationLevel,
    MemberInformation,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    OffsetSpec,
    OffsetTimestamp,
    TopicPartition,
    TopicPartitionReplica,
)

__all__ = [
    # kafka-python's `kafka` package exports these (3.0: also the serializers,
    # IsolationLevel, OffsetSpec, ConsumerGroupMetadata, TopicPartitionReplica)
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "DefaultSerializer",
    "Deserializer",
    "IsolationLevel",
    "JsonSerializer",
    "KafkaAdminClient",
    "KafkaConsumer",
    "KafkaProducer",
    "OffsetAndMetadata",
    "OffsetSpec",
    "Serializer",
    "TopicPartition",
    "TopicPartitionReplica",
    # and, for short imports, the values its calls take and return
    "ConfigResource",
    "ConfigResourceType",
    "ConsumerRecord",
    "FutureRecordMetadata",
    "GroupInformation",
    "MemberInformation",
    "NewPartitions",
    "NewTopic",
    "OffsetAndTimestamp",
    "OffsetTimestamp",
    "RangePartitionAssignor",
    "RecordMetadata",
    "RoundRobinPartitionAssignor",
    "StickyPartitionAssignor",
    "errors",
    *errors.__all__,
]
