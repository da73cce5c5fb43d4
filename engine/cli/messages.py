"""`plet produce` and `plet consume`: messages in and out, one per line of stdin or stdout.

Progress and counts go to stderr so that stdout stays a clean stream of messages.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import Any

import click

from engine import Cluster, Consumer, ConsumerRecord, Producer, TopicInfo, TopicPartition, errors
from engine.cli.failures import CliError, fail
from engine.cli.options import cluster_option, open_cluster, parse_time_option
from engine.cli.output import echo_err, plural
from engine.cli.signals import exit_code, sigterm_as_interrupt
from engine.client import browse, filters
from engine.headers import parse_headers
from engine.names import resolve as resolve_topic_name

_ACKS: dict[str, int | str] = {"0": 0, "1": 1, "all": "all"}

# Without --follow, consume stops at the end offsets it saw when it started. This is the
# safety net for partitions whose end cannot be reached (for example expired messages that
# readers no longer see): stop after this long without a message.
_END_IDLE_MS = 5000
_POLL_MS = 200
_BATCH = 500
_NO_BUDGET = browse.Budget(messages=2**62, seconds=float("inf"))


# --- produce -----------------------------------------------------------------------------


def _parse_headers(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, bytes]]:
    # the one header syntax of the forms and the command line (engine.headers)
    try:
        return parse_headers(values, numbered=False)
    except errors.InvalidArgument as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def _parse_filter(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # the one filter grammar of the consoles and the API (engine.client.filters)
    try:
        if value is not None:
            filters.parse(value)
    except errors.InvalidArgument as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return value


def _preflight(cluster: Cluster, full: str) -> None:
    """Fail before reading stdin when no message could be written (clear errors, no hang)."""
    try:
        cluster.topic(full)
    except errors.UnknownTopic:
        stream_path = full.rpartition(":")[0]
        if not cluster.stream(stream_path).policies.get("auto_create", True):
            raise


class _Outcome:
    """Counts the futures of `produce` as they resolve (callbacks run before flush returns)."""

    def __init__(self) -> None:
        self.ok = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def on_success(self, _metadata: Any) -> None:
        self.ok += 1

    def on_error(self, exc: BaseException) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = exc


@click.command()
@cluster_option
@click.argument("topic_name", metavar="TOPIC")
@click.option(
    "--key-separator",
    metavar="SEP",
    help="Split each line at the first SEP into key and value.",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="NAME=VALUE",
    callback=_parse_headers,
    help="Add a header to every message: name=value, one per option (repeatable).",
)
@click.option("--partition", type=int, help="Write to this partition (default: by key).")
@click.option(
    "--acks",
    type=click.Choice(list(_ACKS)),
    default="1",
    show_default=True,
    help="0: buffered, 1: committed to the WAL, all: committed and fsynced.",
)
@click.option("--default-stream", metavar="STREAM", help="Stream of a TOPIC without '/'.")
@click.pass_context
def produce(
    ctx: click.Context,
    topic_name: str,
    key_separator: str | None,
    headers: list[tuple[str, bytes]],
    partition: int | None,
    acks: str,
    default_stream: str | None,
) -> None:
    """Write one message per line of stdin to TOPIC.

    Only the trailing newline of each line is removed; the bytes are sent as they are. On
    success nothing is printed but the count, on stderr.

    \b
    Examples:
      printf 'engine-temp=91.5\\noil=3.2\\n' | plet produce /apps/sensors:car-17 --key-separator =
      tail -f app.log | plet produce api --default-stream /ops/logs --header host=web1
    """
    if key_separator == "":
        raise click.BadParameter("must not be empty", ctx=ctx, param_hint="'--key-separator'")
    cluster = open_cluster(ctx)
    full = resolve_topic_name(topic_name, default_stream)
    _preflight(cluster, full)
    producer = Producer(cluster, acks=_ACKS[acks], default_stream=default_stream)
    outcome = _Outcome()
    failure: BaseException | None = None
    separator = key_separator.encode() if key_separator is not None else None
    try:
        with sigterm_as_interrupt():
            for lineno, raw in enumerate(_binary_stream(sys.stdin), start=1):
                line = raw[:-1] if raw.endswith(b"\n") else raw
                key: bytes | None = None
                value = line
                if separator is not None:
                    key, found, value = line.partition(separator)
                    if not found:
                        raise CliError(f"line {lineno} has no key separator {key_separator!r}")
                future = producer.send(
                    full, value=value, key=key, partition=partition, headers=headers or None
                )
                future.add_callback(outcome.on_success)
                future.add_errback(outcome.on_error)
    except (errors.PartitionletError, click.ClickException) as exc:
        failure = exc  # report after flushing what was already sent
    except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM: flush what was sent, then stop
        failure = stop
    try:
        producer.flush()  # returns after every callback has run, so the counts are final
    finally:
        producer.close()
    echo_err(f"produced {plural(outcome.ok, 'message')}")
    if isinstance(failure, KeyboardInterrupt):
        ctx.exit(exit_code(failure))
    if failure is not None:
        raise failure
    if outcome.first_error is not None:
        fail(f"{plural(outcome.failed, 'message')} failed: {outcome.first_error}")


# --- consume -----------------------------------------------------------------------------


def _as_bytes(data: Any) -> bytes:
    if data is None:
        return b"null"  # as Kafka's console consumer prints a null key or value
    return data.encode() if isinstance(data, str) else bytes(data)


def _record_text(record: Any, print_key: bool) -> bytes:
    if print_key:
        return _as_bytes(record.key) + b"\t" + _as_bytes(record.value) + b"\n"
    return _as_bytes(record.value) + b"\n"


def _at_end(consumer: Consumer, end: dict[Any, int]) -> bool:
    assigned = consumer.assignment()
    if not assigned:
        return False  # still joining the group
    return all(consumer.position(tp) >= end.get(tp, 0) for tp in assigned)


def _position_group(
    consumer: Consumer, tps: list[TopicPartition], offset: int | None, from_time: int | None
) -> None:
    """Where a group reading explicit partitions starts when told (else its commits)."""
    if offset is not None:
        for tp in tps:
            consumer.seek(tp, offset)
    elif from_time is not None:
        found = consumer.offsets_for_times({tp: from_time for tp in tps})
        for tp in tps:
            hit = found.get(tp)
            if hit is None:  # nothing at or after that time: wait for new messages
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, hit.offset)


@click.command()
@cluster_option
@click.argument("topic_name", metavar="TOPIC")
@click.option("--from-beginning", is_flag=True, help="Start at the oldest message (default).")
@click.option("--from-end", is_flag=True, help="Start after the newest message.")
@click.option("--offset", type=click.IntRange(min=0), help="Start at this offset.")
@click.option(
    "--from-time",
    metavar="ISO8601",
    callback=parse_time_option,
    help="Start at the first message at or after this time: ISO 8601, UTC when it has no "
    "zone (2024-05-01T12:00:00Z, 2024-05-01), or epoch ms.",
)
@click.option("--partition", type=int, help="Read only this partition.")
@click.option("--group", metavar="G", help="Read as consumer group G and commit its offsets.")
@click.option("--max-messages", type=click.IntRange(min=0), help="Stop after N messages.")
@click.option("--follow", "-f", is_flag=True, help="Keep waiting for new messages (Ctrl-C stops).")
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=0),
    help="Stop after MS milliseconds without a message.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: the value per line; json: one JSON object per line.",
)
@click.option("--print-key", is_flag=True, help="text format: print KEY<TAB>VALUE.")
@click.option(
    "--filter",
    "expression",
    metavar="FILTER",
    callback=_parse_filter,
    help="Print only the messages it matches: a header (host=api-2, 'host: api-2', "
    "host:api-2; * is any text) or text found anywhere (docs/FILTERS.md).",
)
@click.option("--ignore-case", "-i", is_flag=True, help="--filter ignores case.")
@click.option("--default-stream", metavar="STREAM", help="Stream of a TOPIC without '/'.")
@click.pass_context
def consume(
    ctx: click.Context,
    topic_name: str,
    from_beginning: bool,
    from_end: bool,
    offset: int | None,
    from_time: int | None,
    partition: int | None,
    group: str | None,
    max_messages: int | None,
    follow: bool,
    timeout_ms: int | None,
    fmt: str,
    print_key: bool,
    expression: str | None,
    ignore_case: bool,
    default_stream: str | None,
) -> None:
    """Print the messages of TOPIC, then stop at its end (or keep going with --follow).

    Without a start option, reading starts at the oldest message, or, with --group, at the
    group's committed offsets. With --group, the offsets of what was printed are committed.

    \b
    Examples:
      plet consume /apps/sensors:car-17 --print-key --max-messages 10
      plet consume /ops/logs:api --from-time 2024-05-01T12:00:00Z --format json
      plet consume /apps/clicks:web --group dash --follow
      plet consume /ops/logs:api --filter host=api-2 --max-messages 20
    """
    starts = [from_beginning, from_end, offset is not None, from_time is not None]
    if sum(starts) > 1:
        raise click.UsageError(
            "use only one of --from-beginning, --from-end, --offset and --from-time", ctx=ctx
        )
    cluster = open_cluster(ctx)
    full = resolve_topic_name(topic_name, default_stream)
    info = cluster.topic(full)  # an unknown topic is an error, not an endless wait
    if partition is not None and not 0 <= partition < info.partition_count:
        raise errors.InvalidPartition(
            f"topic {full} has partitions 0 to {info.partition_count - 1}, not {partition}"
        )
    idle_limit = timeout_ms if timeout_ms is not None else (None if follow else _END_IDLE_MS)
    out = _binary_stream(sys.stdout)
    printed = _Printer(out, fmt, print_key, max_messages)
    matches = browse.Filter(expression=expression or "", ignore_case=ignore_case)
    try:
        with sigterm_as_interrupt():
            if group is None:
                _browse(
                    cluster,
                    info,
                    partition,
                    offset,
                    from_time,
                    from_end,
                    follow,
                    idle_limit,
                    printed,
                    matches,
                )
            else:
                _consume_group(
                    ctx,
                    cluster,
                    info,
                    partition,
                    group,
                    offset,
                    from_time,
                    from_end,
                    follow,
                    idle_limit,
                    printed,
                    matches,
                )
    except KeyboardInterrupt as stop:
        echo_err(f"consumed {plural(printed.count, 'message')}")
        ctx.exit(exit_code(stop))
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining
        # again when it flushes stdout at exit.
        _silence_stdout()
        ctx.exit(0)
    echo_err(f"consumed {plural(printed.count, 'message')}")


class _Printer:
    """Writes records to stdout in the chosen format and counts them up to the limit."""

    def __init__(self, out: Any, fmt: str, print_key: bool, limit: int | None) -> None:
        self.out, self.fmt, self.print_key, self.limit = out, fmt, print_key, limit
        self.count = 0

    @property
    def want(self) -> int:
        return _BATCH if self.limit is None else min(_BATCH, self.limit - self.count)

    @property
    def done(self) -> bool:
        return self.limit is not None and self.count >= self.limit

    def write(self, records: list[ConsumerRecord]) -> None:
        records = records[: self.want]
        if not records:
            return
        if self.fmt == "json":
            chunk = b"".join(
                json.dumps(browse.record_json(r), ensure_ascii=False).encode() + b"\n"
                for r in records
            )
        else:
            chunk = b"".join(_record_text(r, self.print_key) for r in records)
        self.out.write(chunk)
        self.out.flush()
        self.count += len(records)


def _browse(
    cluster: Cluster,
    info: TopicInfo,
    partition: int | None,
    offset: int | None,
    from_time: int | None,
    from_end: bool,
    follow: bool,
    idle_limit: int | None,
    printed: _Printer,
    matches: browse.Filter,
) -> None:
    """Read without a group: the browse service's pages, oldest first, from the seek."""
    seek = (
        browse.Seek.offset(offset)
        if offset is not None
        else browse.Seek.time(from_time)
        if from_time is not None
        else browse.NEWEST
        if from_end
        else browse.OLDEST
    )
    parts = None if partition is None else (partition,)
    # No scan budget: a filter reads on until it finds its messages or the end.
    query = browse.Query(
        info.name, parts, seek, browse.FORWARD, matches, limit=_BATCH, budget=_NO_BUDGET
    )
    with browse.Browser(cluster, info, parts) as browser:
        if offset is not None:
            _, ends = browser.bounds()
            _warn_past_end(info.name, offset, ends, follow=follow)
        last_message = time.monotonic()
        while not printed.done:
            page = browser.page(dataclasses.replace(query, limit=printed.want))
            query = dataclasses.replace(query, cursor=page.cursor)
            if page.records:
                printed.write(page.records)
                last_message = time.monotonic()
            elif not page.more:
                if not follow:
                    return
                time.sleep(_POLL_MS / 1000)
            if idle_limit is not None and (time.monotonic() - last_message) * 1000 >= idle_limit:
                return


def _consume_group(
    ctx: click.Context,
    cluster: Cluster,
    info: TopicInfo,
    partition: int | None,
    group: str,
    offset: int | None,
    from_time: int | None,
    from_end: bool,
    follow: bool,
    idle_limit: int | None,
    printed: _Printer,
    matches: browse.Filter,
) -> None:
    """Read as a member of `group` and commit what was printed (with a filter, also what
    it skipped): a consumer, not a browse."""
    match = matches.compile()
    full = info.name
    numbers = [partition] if partition is not None else range(info.partition_count)
    tps = [TopicPartition(full, number) for number in numbers]
    consumer = Consumer(
        cluster,
        group_id=group,
        auto_offset_reset="latest" if from_end else "earliest",
        enable_auto_commit=False,  # commit after printing, so what is committed was delivered
    )
    ctx.call_on_close(consumer.close)  # runs before the cluster closes (resources are LIFO)
    # A group member shares the partitions with the group's other members; an explicit
    # partition or start position needs a manual assignment instead.
    if partition is None and offset is None and from_time is None:
        consumer.subscribe([full])
    else:
        consumer.assign(tps)
        _position_group(consumer, tps, offset, from_time)
    end = consumer.end_offsets(tps)
    if offset is not None:
        _warn_past_end(full, offset, {tp.partition: n for tp, n in end.items()}, follow=follow)
    last_message = time.monotonic()
    try:
        while not printed.done:
            batch = consumer.poll(timeout_ms=_POLL_MS, max_records=printed.want)
            records = [record for part in batch.values() for record in part]
            if records:
                printed.write([r for r in records if match is None or match(r)])
                last_message = time.monotonic()
                consumer.commit()
            if not follow and _at_end(consumer, end):
                break
            if idle_limit is not None and (time.monotonic() - last_message) * 1000 >= idle_limit:
                break
    finally:
        # Also when nothing was printed: a group that started at the end remembers where.
        consumer.commit()


def _warn_past_end(topic: str, offset: int, ends: dict[int, int], *, follow: bool) -> None:
    """Say on stderr which partitions --offset starts past the end of: otherwise an empty
    output cannot be told from an empty topic."""
    for partition, log_end in sorted(ends.items()):
        if offset > log_end or (offset == log_end and not follow):
            then = "waiting for it" if follow else "nothing read from it"
            where = "past" if offset > log_end else "at"
            echo_err(
                f"--offset {offset:,} is {where} the end of partition {partition} of {topic} "
                f"(log end offset {log_end:,}): {then}"
            )


def _binary_stream(stream: Any) -> Any:
    """The bytes side of a text stream (click's CliRunner swaps sys.stdin/stdout too)."""
    return getattr(stream, "buffer", stream)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (CliRunner): nothing to silence
        pass
