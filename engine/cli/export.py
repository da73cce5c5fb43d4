"""`plet export`: a topic's messages into a SQLite table, written with sqlite-utils, so that
Datasette or any SQLite tool can open them.

Also what the `materialize` replay's SQLite output (`spark_tasks.sink.write_sqlite_state`)
shares with it: the checks of an output file and table name (`check_sqlite_target`), and how
a key or value becomes columns (`text_or_blob`, `json_fields`).

The messages are read with a public `Consumer` (assign and seek, no group, nothing
committed), so the engine checks the consume permission and hides expired messages. The
output file is the user's own SQLite file, not one of the cluster's: sqlite-utils writes it,
and the cluster's directory and volume files are refused as targets.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click
import sqlite_utils

from engine import Cluster, Consumer, ConsumerRecord, TopicPartition, errors
from engine.cli.failures import fail
from engine.cli.options import cluster_option, open_cluster, parse_time_option
from engine.cli.output import echo_err, plural
from engine.client.browse import encoded, timestamp_type_name
from engine.names import resolve as resolve_topic_name

SQLITE_SCHEME = "sqlite:"  # `--output sqlite:PATH` of the materialize replay
EXPORT_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestamp_type",
    "key",
    "value",
    "headers",
)
EXPORT_PK = ("partition", "offset")
STATE_PK = ("key",)  # the materialize replay's table: one row per key
STATE_COLUMNS = ("key", "value")
DEFAULT_BATCH = 1000
# Messages asked of the consumer per poll: large, so that reading costs little per message.
_POLL_RECORDS = 10_000
_INT64 = (-(2**63), 2**63)


# --- how a message becomes columns -----------------------------------------------------------


def text_or_blob(raw: Any) -> str | bytes | None:
    """A key or value for a SQLite cell: text when the bytes are UTF-8, else a blob."""
    if raw is None:
        return None
    data = bytes(raw)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def json_fields(raw: Any, reserved: Iterable[str]) -> dict[str, Any] | None:
    """The top-level fields of a value that is a JSON object, as columns; None for any other
    value. A field whose name is one of the `reserved` columns (compared without case, as
    SQLite compares column names) becomes `value.NAME`; nested objects and lists are stored
    as JSON text (sqlite-utils does so); an integer beyond 64 bits as its digits."""
    if raw is None:
        return None
    raw = bytes(raw)
    if raw.lstrip()[:1] != b"{":  # most non-JSON values are told at once
        return None
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    taken = {name.lower() for name in reserved}
    out: dict[str, Any] = {}
    for name, value in document.items():
        if isinstance(value, int) and not isinstance(value, bool):
            if not _INT64[0] <= value < _INT64[1]:
                value = str(value)  # SQLite's integers are 64-bit
        out[f"value.{name}" if name.lower() in taken else name] = value
    return out


def headers_json(headers: list[tuple[str, bytes]] | None) -> str | None:
    """A message's headers as JSON, in the shape of `record_json` (null when it has none)."""
    if not headers:
        return None
    out = []
    for name, raw in headers:
        text, encoding = encoded(raw)
        out.append({"name": name, "value": text, "encoding": encoding})
    return json.dumps(out, ensure_ascii=False)


# --- checks of the output --------------------------------------------------------------------


def check_table_name(table: str) -> None:
    """Refuse a table name SQLite (and so sqlite-utils) refuses, before anything is written."""
    if not table or not table.strip():
        raise errors.InvalidArgument("the table name must not be empty")
    if "\x00" in table:
        raise errors.InvalidArgument(f"the table name {table!r} holds a NUL character")
    if table.lower().startswith("sqlite_"):
        raise errors.InvalidArgument(
            f"the table name {table!r} is reserved: SQLite keeps names starting with "
            "'sqlite_' for itself"
        )


def _cluster_files(cluster: Cluster) -> tuple[Path, set[Path]]:
    """The cluster's directory and its volume files (with their WAL and journal files)."""
    files: set[Path] = set()
    for volume in cluster.volumes():
        path = Path(volume.path).resolve()
        files.update({path, *(Path(f"{path}{end}") for end in ("-wal", "-shm", "-journal"))})
    return Path(cluster.path).resolve(), files


def check_sqlite_target(
    path: str | os.PathLike[str], table: str, cluster: Cluster, pk: tuple[str, ...]
) -> Path:
    """The absolute path of an output SQLite file for `table`, or InvalidArgument saying why
    not: a file of the cluster (its catalog or a volume: never written by anything but the
    engine), a directory, a folder that does not exist or cannot be written, a file that is
    not a SQLite database, a table of another primary key, a view. Creates nothing."""
    check_table_name(table)
    target = Path(path).expanduser().resolve()
    home, volumes = _cluster_files(cluster)
    if target == home or home in target.parents or target in volumes:
        raise errors.InvalidArgument(
            f"{target} is a file of the cluster {home} (its catalog, a volume or their "
            "folder): write the table to a file of your own"
        )
    if target.is_dir():
        raise errors.InvalidArgument(f"{target} is a directory, not a SQLite file")
    if not target.parent.is_dir():
        raise errors.InvalidArgument(f"no directory {target.parent} for {target.name}")
    if not os.access(target.parent, os.W_OK) or (
        target.exists() and not os.access(target, os.W_OK)
    ):
        raise errors.InvalidArgument(f"{target} cannot be written (permission denied)")
    if target.exists():
        _check_existing(target, table, pk)
    return target


def _check_existing(target: Path, table: str, pk: tuple[str, ...]) -> None:
    db = sqlite_utils.Database(target)
    try:
        try:
            views = db.view_names()
            found = db.table(table) if table in db.table_names() else None
            pks = tuple(found.pks) if found is not None else None
        except Exception as exc:  # sqlite3's DatabaseError: this module names no sqlite3
            raise errors.InvalidArgument(f"{target} is not a SQLite database ({exc})") from None
    finally:
        db.close()
    if table in views:
        raise errors.InvalidArgument(f"{table!r} is a view in {target}, not a table")
    if pks is not None and tuple(p.lower() for p in pks) != pk:
        raise errors.InvalidArgument(
            f"table {table!r} in {target} has the primary key ({', '.join(pks)}), not "
            f"({', '.join(pk)}): choose another table"
        )


def sqlite_error(exc: BaseException) -> bool:
    """Whether `exc` is one of SQLite's (or sqlite-utils' refusal of a row): a write that
    failed, reported without a traceback."""
    return type(exc).__module__ == "sqlite3" or isinstance(exc, OverflowError | ValueError)


# --- plet export -----------------------------------------------------------------------------


def _usage(message: str, hint: str) -> click.BadParameter:
    return click.BadParameter(message, param_hint=hint)


def _ranges(
    consumer: Consumer,
    tps: list[TopicPartition],
    from_offset: int | None,
    from_time: int | None,
    to_time: int | None,
) -> dict[TopicPartition, tuple[int, int]]:
    """[start, end) per partition, as the replays read: the end is the log end when the
    export starts (what arrives later waits for the next run), or the first offset after
    `to_time` (inclusive, as Kafka's endingTimestamp + 1)."""
    begins = consumer.beginning_offsets(tps)
    ends = consumer.end_offsets(tps)
    starts = dict(begins)
    if from_offset is not None:
        starts = {tp: max(start, from_offset) for tp, start in starts.items()}
    if from_time is not None:
        found = consumer.offsets_for_times({tp: from_time for tp in tps})
        starts = {
            tp: ends[tp] if (hit := found[tp]) is None else max(starts[tp], hit.offset)
            for tp in tps
        }
    if to_time is not None:
        found = consumer.offsets_for_times({tp: to_time + 1 for tp in tps})
        ends = {
            tp: ends[tp] if (hit := found[tp]) is None else min(ends[tp], hit.offset) for tp in tps
        }
    return {tp: (starts[tp], ends[tp]) for tp in tps if starts[tp] < ends[tp]}


def _records(
    consumer: Consumer, ranges: dict[TopicPartition, tuple[int, int]]
) -> Iterator[list[ConsumerRecord]]:
    """The records of `ranges`, a poll's worth at a time."""
    if not ranges:
        return
    consumer.assign(list(ranges))
    for tp, (start, _) in ranges.items():
        consumer.seek(tp, start)
    left = {tp: end for tp, (_, end) in ranges.items()}
    while left:
        before = {tp: consumer.position(tp) for tp in left}
        batch = consumer.poll(timeout_ms=0, max_records=_POLL_RECORDS)
        for tp, records in batch.items():
            end = left.get(tp)
            if end is None:
                continue
            if records[-1].offset >= end:
                records = [r for r in records if r.offset < end]
            if records:
                yield records
        for tp in list(left):
            if consumer.position(tp) >= left[tp]:
                consumer.pause(tp)
                del left[tp]
        if not batch and all(consumer.position(tp) == before[tp] for tp in left):
            return  # nothing more to read below the ends (expired or compacted away)


def _plain_rows(batches: Iterable[list[ConsumerRecord]]) -> Iterator[Any]:
    """sqlite-utils' list mode: the column names, then one tuple per message."""
    yield list(EXPORT_COLUMNS)
    for records in batches:
        for r in records:
            yield (
                r.topic,
                r.partition,
                r.offset,
                r.timestamp,
                timestamp_type_name(r.timestamp_type),
                text_or_blob(r.key),
                text_or_blob(r.value),
                headers_json(r.headers),
            )


def _json_rows(batches: Iterable[list[ConsumerRecord]]) -> Iterator[dict[str, Any]]:
    for records in batches:
        for r in records:
            row = dict(json_fields(r.value, EXPORT_COLUMNS) or ())
            row.update(
                topic=r.topic,
                partition=r.partition,
                offset=r.offset,
                timestamp=r.timestamp,
                timestamp_type=timestamp_type_name(r.timestamp_type),
                key=text_or_blob(r.key),
                value=text_or_blob(r.value),
                headers=headers_json(r.headers),
            )
            yield row


class _Counter:
    def __init__(self, batches: Iterable[list[ConsumerRecord]]) -> None:
        self.batches = batches
        self.count = 0

    def __iter__(self) -> Iterator[list[ConsumerRecord]]:
        for records in self.batches:
            self.count += len(records)
            yield records


@click.command()
@cluster_option
@click.argument("topic_name", metavar="TOPIC")
@click.option(
    "--sqlite", "sqlite_path", required=True, metavar="PATH", help="SQLite file to write."
)
@click.option("--table", metavar="NAME", help="Table to write (default: the topic's name).")
@click.option("--from-offset", type=click.IntRange(min=0), help="First offset of every partition.")
@click.option(
    "--from-time",
    metavar="ISO8601",
    callback=parse_time_option,
    help="From the first message at or after this time (ISO 8601, UTC without a zone, or ms).",
)
@click.option(
    "--to-time",
    metavar="ISO8601",
    callback=parse_time_option,
    help="Up to this time, inclusive (ISO 8601, UTC without a zone, or ms).",
)
@click.option(
    "--json-columns",
    is_flag=True,
    help="Also give the fields of JSON object values columns of their own.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=DEFAULT_BATCH,
    show_default=True,
    help="Rows per INSERT (sqlite-utils caps it at 999 values).",
)
@click.option(
    "--isolation-level",
    type=click.Choice(["read_uncommitted", "read_committed"]),
    default="read_uncommitted",
    show_default=True,
    help="read_committed: leave aborted transactions out and stop at the last stable offset.",
)
@click.option("--default-stream", metavar="STREAM", help="Stream of a TOPIC without '/'.")
@click.pass_context
def export(
    ctx: click.Context,
    topic_name: str,
    sqlite_path: str,
    table: str | None,
    from_offset: int | None,
    from_time: int | None,
    to_time: int | None,
    json_columns: bool,
    batch_size: int,
    isolation_level: str,
    default_stream: str | None,
) -> None:
    """Write the messages of TOPIC to a table of a SQLite file (with sqlite-utils).

    Columns: topic, partition, offset, timestamp (epoch ms), timestamp_type, key, value
    (text when UTF-8, else a blob), headers (JSON); the primary key is (partition, offset),
    so a second run replaces the rows it wrote before instead of adding them again. The
    whole export is one transaction: it is written entirely or not at all.

    \b
    Examples:
      plet export /apps/sensors:car-17 --sqlite car.db --table readings --cluster data/dc1
      datasette car.db
    """
    if from_time is not None and to_time is not None and to_time < from_time:
        raise click.UsageError("--to-time is before --from-time", ctx=ctx)
    cluster = open_cluster(ctx)
    try:
        full = resolve_topic_name(topic_name, default_stream)
        info = cluster.topic(full)
    except (errors.NotFound, errors.InvalidName) as exc:
        raise _usage(str(exc), "TOPIC") from None
    table = table or info.topic
    try:
        check_table_name(table)
    except errors.InvalidArgument as exc:
        raise _usage(str(exc), "'--table'") from None
    try:
        target = check_sqlite_target(sqlite_path, table, cluster, EXPORT_PK)
    except errors.InvalidArgument as exc:
        raise _usage(str(exc), "'--sqlite'") from None

    consumer = Consumer(
        cluster,
        enable_auto_commit=False,
        max_poll_records=_POLL_RECORDS,
        isolation_level=isolation_level,
    )
    ctx.call_on_close(consumer.close)  # before the cluster closes (resources are LIFO)
    tps = [TopicPartition(full, p) for p in range(info.partition_count)]
    ranges = _ranges(consumer, tps, from_offset, from_time, to_time)

    created = not target.exists()
    started = time.perf_counter()
    batches = _Counter(_records(consumer, ranges))
    db = sqlite_utils.Database(target)
    try:
        with db.atomic():  # one transaction: all of the export or none of it
            out = db.table(table)
            if not out.exists():
                out.create(_EXPORT_TYPES, pk=EXPORT_PK)
            elif out.count_where("topic != ?", [full]):
                raise _usage(
                    f"table {table!r} in {target} holds messages of another topic: its rows "
                    "are keyed by (partition, offset), so choose another table",
                    "'--table'",
                )
            rows = _json_rows(batches) if json_columns else _plain_rows(batches)
            out.insert_all(rows, pk=EXPORT_PK, replace=True, alter=True, batch_size=batch_size)
    except Exception as exc:
        db.close()
        if created:
            _remove(target)
        if isinstance(exc, click.ClickException) or not sqlite_error(exc):
            raise
        fail(f"could not write {target}: {exc} (nothing was written)")
    db.close()
    seconds = time.perf_counter() - started
    rate = batches.count / seconds if seconds > 0 else 0.0
    echo_err(
        f"exported {plural(batches.count, 'message')} of {full} to {target} table {table!r} "
        f"in {seconds:.2f} s ({rate:,.0f} rows/s)"
    )


_EXPORT_TYPES: dict[str, Any] = {
    "topic": str,
    "partition": int,
    "offset": int,
    "timestamp": int,
    "timestamp_type": str,
    "key": str,  # TEXT affinity keeps a blob a blob
    "value": str,
    "headers": str,
}


def _remove(target: Path) -> None:
    """An output file this run created and could not fill: leave no empty database."""
    for path in (target, Path(f"{target}-journal")):
        try:
            path.unlink()
        except FileNotFoundError:
            pass
