"""kafka-python's `kafka.consumer`: `KafkaConsumer`; its rebalance listener is in
`.subscription_state`, its record type in `.fetcher`."""

from engine.kafka.consumer.group import KafkaConsumer

__all__ = ["KafkaConsumer"]
