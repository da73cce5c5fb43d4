"""kafka-python's `kafka.producer`: `KafkaProducer`, and in `.future` what `send` returns."""

from engine.kafka.producer.future import FutureRecordMetadata, RecordMetadata
from engine.kafka.producer.kafka import KafkaProducer

__all__ = ["FutureRecordMetadata", "KafkaProducer", "RecordMetadata"]
