"""Arrow out: the records a consumer reads, as one `pyarrow.RecordBatch` per partition
(`Consumer.poll_arrow`), built from the stored batches' columns without a Python object
per message.

The stored format is columnar (engine.storage.batch), so each column of a `RecordBatch`
is a few numpy operations over a column of the payload: keys and values are Arrow binary
arrays whose data buffer is the payload itself (the lengths become Arrow offsets with one
cumulative sum), offsets and timestamps are read in place. Only headers, when a batch has
any, are decoded message by message.

An archived partitionlet's records come as its Parquet file's Arrow columns
(`engine.storage.log.ArchivedColumns`): the file has this very schema, so its row groups'
arrays are handed on as they are (slices, no copy), the topic and partition made here as
for live records; only the headers' list type is renamed (Parquet calls its item
`element`), which copies nothing.

The columns are those of Spark's Kafka source, with the types the `partitionlet` data
source gives them (spark_tasks.scan.arrow_schema, without its `stream`): key, value
(binary), topic (string), partition (int32), offset (int64), timestamp (timestamp[us,
UTC]), timestampType (int32: 0 create time, 1 log-append time) and headers (list of
struct<key: string, value: binary>, null for a message without any).

pyarrow and numpy come with the `spark` extra; they are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.storage.batch import decode_headers
from engine.storage.log import ArchivedColumns

if TYPE_CHECKING:
    from collections.abc import Sequence

    from engine.storage.log import Columns

_INSTALL = "pip install 'partitionlet[spark]'"


def modules() -> tuple[Any, Any]:
    """(pyarrow, numpy), or an ImportError saying how to install them."""
    try:
        import numpy as np
        import pyarrow as pa
    except ImportError as exc:
        raise ImportError(
            f"Consumer.poll_arrow needs pyarrow and numpy ({exc.name} is missing): {_INSTALL}"
        ) from None
    return pa, np


def schema() -> Any:
    """The Arrow schema of `poll_arrow`'s record batches."""
    pa, _ = modules()
    return pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("timestampType", pa.int32()),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ]
    )


def record_batch(
    topic: str, partition: int, chunks: Sequence[Columns | ArchivedColumns], cutoff_ms: int | None
) -> Any:
    """One RecordBatch of the records of `chunks` (in offset order), without those older
    than `cutoff_ms` (the stream's ttl)."""
    pa, _ = modules()
    parts = record_batches(topic, partition, chunks, cutoff_ms)
    if not parts:
        return pa.RecordBatch.from_pylist([], schema=schema())
    return parts[0] if len(parts) == 1 else pa.concat_batches(parts)


def record_batches(
    topic: str, partition: int, chunks: Sequence[Columns | ArchivedColumns], cutoff_ms: int | None
) -> list[Any]:
    """A RecordBatch for each of `chunks` that keeps records (in offset order), without
    those older than `cutoff_ms`: each one's buffers are its stored batch's (or its
    archive file's row group's), where one RecordBatch of them all copies every key and
    value (a quarter of a wire fetch's time for records of 1 KiB)."""
    pa, np = modules()
    sch = schema()
    parts = []
    for c in chunks:
        if isinstance(c, ArchivedColumns):
            parts += _archived(pa, np, sch, topic, partition, c, cutoff_ms)
        else:
            parts.append(_chunk(pa, np, sch, topic, partition, c, cutoff_ms))
    return [p for p in parts if p.num_rows]


def _archived(
    pa: Any,
    np: Any,
    sch: Any,
    topic: str,
    partition: int,
    c: ArchivedColumns,
    cutoff_ms: int | None,
) -> list[Any]:
    """The RecordBatches of archived rows: the file's arrays, in this schema."""
    import pyarrow.compute as pc

    out = []
    head_type = sch.field("headers").type
    for rb in c.rows.to_batches():  # one, unless a row group's column came in chunks
        n = rb.num_rows
        if not n:
            continue
        # Parquet names the list's item `element`: renamed (a cast that copies nothing;
        # types that differ only by it compare equal, hence no test)
        head = rb.column("headers").cast(head_type)
        columns = [
            rb.column("key"),
            rb.column("value"),
            _constant_string(pa, np, topic, n),
            pa.array(np.full(n, partition, dtype=np.int32)),
            rb.column("offset"),
            rb.column("timestamp"),
            rb.column("timestampType"),
            head,
        ]
        out_rb = pa.RecordBatch.from_arrays(columns, schema=sch)
        if cutoff_ms is not None and c.first_ts < cutoff_ms:
            stamps = out_rb.column("timestamp").cast(pa.int64())
            out_rb = out_rb.filter(pc.greater_equal(stamps, cutoff_ms * 1000))
        out.append(out_rb)
    return out


def _binary(
    pa: Any, np: Any, payload: Any, lengths: Any, data_at: int, start: int, end: int
) -> Any:
    """The binary array of items [start, end) of a column whose `lengths` (int32, -1 for
    null) cut the bytes of `payload` from `data_at`; its data buffer is `payload` itself.
    Returns it and the position after the column's last item."""
    sizes = np.maximum(lengths, 0)
    ends = np.cumsum(sizes, dtype=np.int64)
    total = int(ends[-1]) if len(ends) else 0
    first = data_at + (int(ends[start - 1]) if start else 0)
    offsets = np.empty(end - start + 1, dtype=np.int64)
    offsets[0] = first
    offsets[1:] = ends[start:end]
    offsets[1:] += data_at
    part = lengths[start:end]
    valid = part >= 0
    nulls = int(len(part) - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    if data_at + total < 2**31:
        kind, offsets = pa.binary(), offsets.astype(np.int32)
    else:  # a plain batch over 2 GiB: 64-bit offsets, then the schema's binary
        kind = pa.large_binary()
    arr = pa.Array.from_buffers(
        kind, end - start, [bitmap, pa.py_buffer(offsets), pa.py_buffer(payload)], nulls
    )
    if kind != pa.binary():
        arr = arr.cast(pa.binary())
    return arr, data_at + total


def _constant_string(pa: Any, np: Any, text: str, n: int) -> Any:
    """A string array of `n` times `text`, made in C."""
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(raw)
    return pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)]
    ).cast(pa.string())


def _chunk(
    pa: Any,
    np: Any,
    sch: Any,
    topic: str,
    partition: int,
    c: Columns,
    cutoff_ms: int | None,
) -> Any:
    payload, at, start, end = c.payload, c.positions, c.start, c.end
    count, n = at.count, c.end - c.start
    if at.timestamps_at is not None:
        stamps = np.frombuffer(payload, "<i8", count, at.timestamps_at)[start:end]
    else:
        stamps = np.full(n, at.base_timestamp, dtype=np.int64)
    if at.deltas_at is not None:
        deltas = np.frombuffer(payload, "<u4", count, at.deltas_at)[start:end]
        offsets = deltas.astype(np.int64) + c.base_offset
    else:
        offsets = np.arange(c.base_offset + start, c.base_offset + end, dtype=np.int64)
    value_lengths = np.frombuffer(payload, "<i4", count, at.value_lengths_at)
    values, keys_at = _binary(pa, np, payload, value_lengths, at.values_at, start, end)
    if at.key_lengths_at is not None:
        key_lengths = np.frombuffer(payload, "<i4", count, at.key_lengths_at)
        keys, _ = _binary(pa, np, payload, key_lengths, keys_at, start, end)
    else:
        keys = pa.nulls(n, pa.binary())
    head_type = sch.field("headers").type
    if at.headers_at is not None:
        headers = decode_headers(payload, at)[start:end]
        head = pa.array(
            [[{"key": k, "value": v} for k, v in h] if h else None for h in headers], head_type
        )
    else:
        head = pa.nulls(n, head_type)
    rb = pa.RecordBatch.from_arrays(
        [
            keys,
            values,
            _constant_string(pa, np, topic, n),
            pa.array(np.full(n, partition, dtype=np.int32)),
            pa.array(offsets),
            pa.Array.from_buffers(
                pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(stamps * 1000)]
            ),
            pa.array(np.full(n, c.timestamp_type, dtype=np.int32)),
            head,
        ],
        schema=sch,
    )
    if cutoff_ms is not None and c.first_ts < cutoff_ms:
        rb = rb.filter(pa.array(stamps >= cutoff_ms))
    return rb
