"""kafka-python's `NewTopic` (`kafka.admin.new_topic`)."""

from __future__ import annotations

__all__ = ["NewTopic"]


class NewTopic:
    """A topic for `KafkaAdminClient.create_topics`. -1 partitions takes the stream's
    `default_partitions`; the replication factor is accepted and ignored; topic configs
    are the topic's own policies (engine.kafka_configs), those with no meaning here
    accepted."""

    def __init__(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        replica_assignments: dict[int, list[int]] | None = None,
        topic_configs: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.replica_assignments = replica_assignments or {}
        self.topic_configs = topic_configs or {}

    def __repr__(self) -> str:
        return f"NewTopic(name={self.name!r}, num_partitions={self.num_partitions})"
