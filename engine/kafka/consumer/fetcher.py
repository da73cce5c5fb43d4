"""kafka-python's `ConsumerRecord` (`kafka.consumer.fetcher`), made from the engine's
records."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

from engine.kafka.serializer import header_size

__all__ = ["ConsumerRecord"]


class ConsumerRecord(NamedTuple):
    """A record as the consumer returns it; sizes are -1 for a missing key, value or
    headers, as in kafka-python."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes]]
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int
    leader_epoch: int = -1


# Builds a ConsumerRecord from a full tuple without NamedTuple's argument handling.
_consumer_record = partial(tuple.__new__, ConsumerRecord)


def consumer_records(
    records: list[Any], topic: str, key_deserializer: Any, value_deserializer: Any
) -> list[ConsumerRecord]:
    """The engine's records of one partition as kafka-python's, named `topic` (one
    comprehension: this runs once per record read). The deserializers are
    (topic, headers, data) functions (`serializer.codec`); None stays None."""
    out = [
        _consumer_record((
            topic, partition, offset, ts, ts_type, key, value,
            list(headers) if headers else [], None,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
            header_size(headers) if headers else -1,
            -1,
        ))
        for _, partition, offset, ts, ts_type, key, value, headers in records
    ]  # fmt: skip
    kd, vd = key_deserializer, value_deserializer
    if kd is not None or vd is not None:
        out = [
            r._replace(key=r.key if kd is None or r.key is None else kd(topic, r.headers, r.key),
                       value=(r.value if vd is None or r.value is None
                              else vd(topic, r.headers, r.value)))
            for r in out
        ]  # fmt: skip
    return out
