"""Writing Spark rows to a cluster with the engine's Producer (acks="all"), in each task.

The columns are those Spark's Kafka sink takes: `value` (required, may be null),
and optionally `key`, `topic`, `partition`, `headers` and `timestamp`. The option `topic`
overrides the `topic` column, as with Kafka. Nothing here imports pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from itertools import islice
from typing import Any

from engine.client.producer import Producer
from engine.cluster import Cluster
from spark_tasks.scan import OptionError, cluster_path, principal_of

SINK_COLUMNS = {"key", "value", "topic", "partition", "headers", "timestamp"}
_BINARY_TYPES = {"binary", "string"}


def check_schema(fields: dict[str, str], options: dict[str, str]) -> None:
    """Fail before any task starts when the columns cannot be written.

    `fields` maps column names to Spark simple type strings (`binary`, `string`, ...).
    """
    cluster_path(options)
    if "value" not in fields:
        raise OptionError("the partitionlet sink needs a 'value' column (binary or string)")
    for name in ("key", "value"):
        if name in fields and fields[name] not in _BINARY_TYPES:
            raise OptionError(f"column {name!r} must be binary or string, not {fields[name]}")
    if "topic" not in fields and not options.get("topic"):
        raise OptionError("give the option 'topic' or a 'topic' column (full topic names)")
    if "topic" in fields and fields["topic"] != "string":
        raise OptionError(f"column 'topic' must be a string, not {fields['topic']}")
    if "partition" in fields and fields["partition"] not in ("int", "bigint", "smallint"):
        raise OptionError(f"column 'partition' must be an integer, not {fields['partition']}")
    if "timestamp" in fields and fields["timestamp"] not in ("timestamp", "timestamp_ntz"):
        raise OptionError(f"column 'timestamp' must be a timestamp, not {fields['timestamp']}")
    if "headers" in fields and not fields["headers"].startswith("array<struct<key:string,"):
        raise OptionError(
            "column 'headers' must be array<struct<key:string,value:binary>>, "
            f"not {fields['headers']}"
        )
    acks = options.get("acks", "all")
    if acks not in ("0", "1", "all"):
        raise OptionError(f"option acks must be 0, 1 or all, got {acks!r}")


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)  # bytearray, memoryview


def _ms(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(round(value.timestamp() * 1000))
    return int(value)


def write_rows(options: dict[str, str], rows: Iterable[Any]) -> int:
    """Send every row; returns how many were written. Raises on the first failed send."""
    topic_opt = options.get("topic") or None
    acks_opt = options.get("acks", "all")
    acks: int | str = "all" if acks_opt == "all" else int(acks_opt)
    failures: list[BaseException] = []
    count = 0
    with Cluster.open(cluster_path(options)) as cluster:
        producer = Producer(cluster, acks=acks, principal=principal_of(options))
        try:
            for row in rows:
                d = row.asDict() if hasattr(row, "asDict") else dict(row)
                topic = topic_opt or d.get("topic")
                if not topic:
                    raise OptionError("a row has no topic (null 'topic' and no 'topic' option)")
                headers = d.get("headers")
                if headers:
                    headers = [
                        (h["key"], _bytes(h["value"]))
                        if isinstance(h, dict)
                        else (h[0], _bytes(h[1]))
                        for h in headers
                    ]
                future = producer.send(
                    topic,
                    value=_bytes(d.get("value")),
                    key=_bytes(d.get("key")),
                    partition=d.get("partition"),
                    headers=headers or None,
                    timestamp_ms=_ms(d.get("timestamp")),
                )
                future.add_errback(failures.append)
                count += 1
                if failures:
                    break
            producer.flush()
        finally:
            producer.close()
    if failures:
        raise failures[0]
    return count


STATE_BATCH = 1000  # keys written per insert_all, and tombstoned keys per DELETE


def _chunks(pairs: Iterable[tuple[Any, Any]], size: int) -> Iterable[list[tuple[Any, Any]]]:
    it = iter(pairs)
    while chunk := list(islice(it, size)):
        yield chunk


def _state_row(export: Any, key: Any, value: Any) -> dict[str, Any]:
    """A key's row: the fields of a JSON object value as columns, any other value in
    `value` (text when UTF-8, else a blob). `export` is engine.cli.export."""
    fields = export.json_fields(value, export.STATE_COLUMNS)
    if fields is None:
        return {"key": export.text_or_blob(key), "value": export.text_or_blob(value)}
    return {"key": export.text_or_blob(key), **fields}


def write_sqlite_state(path: str, table: str, pairs: Iterable[tuple[Any, Any]]) -> dict[str, int]:
    """The current-state view, (key, latest value) pairs, into `table` of the SQLite file
    at `path`, with sqlite-utils: one row per key (primary key `key`), replaced whole, so a
    field the new value lacks is NULL; columns are added as new fields appear; a key whose
    latest value is a tombstone (None) loses its row. One transaction: the table changes
    entirely or not at all. Returns the counts of rows written and tombstones applied."""
    # imported here: engine.cli loads every command, which the sink's tasks need not pay
    import sqlite_utils
    from sqlite_utils.db import quote_identifier

    from engine.cli import export

    db = sqlite_utils.Database(path)
    written = tombstones = 0
    try:
        with db.atomic():
            out = db.table(table)
            if not out.exists():
                out.create({"key": str, "value": str}, pk="key")  # TEXT keeps a blob a blob
            for chunk in _chunks(pairs, STATE_BATCH):
                rows = [_state_row(export, k, v) for k, v in chunk if v is not None]
                gone = [export.text_or_blob(k) for k, v in chunk if v is None]
                if rows:
                    out.insert_all(rows, pk="key", replace=True, alter=True, batch_size=len(rows))
                if gone:
                    marks = ", ".join("?" * len(gone))
                    out.delete_where(f"{quote_identifier('key')} IN ({marks})", gone)
                written += len(rows)
                tombstones += len(gone)
    finally:
        db.close()
    return {"written": written, "tombstones": tombstones}
