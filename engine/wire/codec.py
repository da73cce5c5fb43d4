"""The wire codec: kafka-python 3.0's protocol and record modules, used server-side.

Why kafka-python rather than `kio` or a hand-written codec: its `kafka.protocol` classes are
generated from Kafka's own JSON message schemas (every version, flexible versions and tagged
fields included) and decode requests as well as they encode them; its `kafka.record` reads
and writes record batch v2 with CRC-32C and all four compressions (gzip from the standard
library, python-snappy, lz4, zstandard); and the project already follows
kafka-python 3.0 in `engine.kafka`. One dependency covers framing, headers and batches.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from engine.records import LOG_APPEND_TIME, ConsumerRecord

_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id: the same in every version
_BASE_OFFSET = struct.Struct(">q")


class FramingError(Exception):
    """The bytes on a connection are not a request Kafka would parse: close it."""


@dataclass(frozen=True)
class Head:
    api_key: int
    api_version: int
    correlation_id: int


def peek_head(frame: bytes) -> Head:
    """The api key, version and correlation id, read before the rest is decoded."""
    if len(frame) < _HEAD.size:
        raise FramingError(f"a request of {len(frame)} bytes has no header")
    return Head(*_HEAD.unpack_from(frame))


def decode_request(request_class: type[ApiMessage], frame: bytes, version: int) -> Any:
    """The request of `frame` (header included), or FramingError when it does not parse."""
    try:
        return request_class.decode(frame, version=version, header=True)
    except Exception as exc:  # the codec raises struct.error, ValueError, IndexError...
        raise FramingError(f"malformed {request_class.__name__} v{version}: {exc}") from exc


def encode_response(response: ApiMessage, version: int, correlation_id: int) -> bytes:
    """The framed response (size, header, body)."""
    response.API_VERSION = version  # before the header: the setter would touch the header
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


# --- record batches -------------------------------------------------------------------------


class _Builder(DefaultRecordBatchBuilder):
    """A batch builder that can mark its batch as LogAppendTime (a broker-side attribute the
    client-side builder leaves to the broker, which is us)."""

    def __init__(self, log_append: bool) -> None:
        super().__init__(
            magic=2,
            compression_type=0,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 30,
        )
        self.log_append = log_append

    def _get_attributes(self, include_compression_type: bool = True) -> int:
        attrs = super()._get_attributes(include_compression_type)
        return attrs | self.TIMESTAMP_TYPE_MASK if self.log_append else attrs


def batches(data: bytes | None) -> Iterator[DefaultRecordBatch]:
    """The v2 batches of a produce request's records; ValueError for anything else (an old
    message format, a bad CRC, a truncated batch)."""
    if not data:
        return
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        if not isinstance(batch, DefaultRecordBatch):
            raise ValueError("only record batch v2 (magic 2) is accepted")
        if not batch.validate_crc():
            raise ValueError("record batch CRC mismatch")
        yield batch
    if records.valid_bytes() != len(data):
        raise ValueError("truncated record batch")


def encode_records(records: Iterable[ConsumerRecord]) -> bytes:
    """Engine records (one partition, offset order) as v2 batches: a new batch wherever the
    timestamp type changes, and one batch per LogAppendTime timestamp, since a LogAppendTime
    batch carries one time for all its records."""
    out = bytearray()
    builder: _Builder | None = None
    base = 0
    key_of_batch: tuple[bool, int] | None = None
    for r in records:
        log_append = r.timestamp_type == LOG_APPEND_TIME
        key = (log_append, r.timestamp if log_append else 0)
        if builder is None or key != key_of_batch:
            if builder is not None:
                out += _finish(builder, base)
            builder, base, key_of_batch = _Builder(log_append), r.offset, key
        headers = [(k, v) for k, v in (r.headers or ())]
        builder.append(r.offset - base, r.timestamp, r.key, r.value, headers)
    if builder is not None:
        out += _finish(builder, base)
    return bytes(out)


def _finish(builder: _Builder, base: int) -> bytearray:
    buf = builder.build()
    _BASE_OFFSET.pack_into(buf, 0, base)  # outside the CRC, which starts at the attributes
    return buf
