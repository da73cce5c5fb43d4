"""Kafka record batches v2 for tests: built by aiokafka's builder, and their CRC made right
again after a test damages their records."""

from __future__ import annotations

import struct

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from crc32c import crc32c

T0 = 1_790_000_000_000  # in 2026: within the default ttl of a test's streams


def kafka_batch(records: list[tuple], *, codec: int = 0, ids=(-1, -1, -1)) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, 0, *ids, 1 << 30)
    for delta, (key, value, ts, headers) in enumerate(records):
        builder.append(delta, ts, key, value, headers)
    return bytes(builder.build())


def with_crc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)
