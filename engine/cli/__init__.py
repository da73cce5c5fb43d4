"""`plet`: the command line, a thin click layer over the engine (as sqlite-utils is over its library).

Each command opens the cluster, calls one or a few public engine methods and prints the result.
Engine errors (`errors.PartitionletError`) are printed as `error: <message>` on stderr with exit
code 1; click's usage errors keep its exit code 2. Data (messages, tables, JSON) goes to stdout;
progress and counts of `produce` and `consume` go to stderr so that stdout stays a clean stream.

The cluster directory comes from `--cluster PATH`, given to the group (`plet --cluster D stream
list`) or to the command (`plet stream list --cluster D`), else from `PLET_CLUSTER`.
"""

from __future__ import annotations

import base64
import importlib
import importlib.util
import json
import os
import shlex
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import click
from click.core import ParameterSource

from engine import Cluster, Consumer, Producer, TopicPartition, errors, times
from engine.names import resolve as resolve_topic_name

CLUSTER_ENV = "PLET_CLUSTER"
DEMO_CLUSTER = "data/demo"

# ctx.meta is shared by every context of one invocation, so a --cluster given to the group
# is seen by the command, and a --cluster given to the command wins over the group's.
_META_CLI = "plet.cluster.cli"
_META_ENV = "plet.cluster.env"

_ACKS: dict[str, int | str] = {"0": 0, "1": 1, "all": "all"}

# Without --follow, consume stops at the end offsets it saw when it started. This is the
# safety net for partitions whose end cannot be reached (for example expired messages that
# readers no longer see): stop after this long without a message.
_END_IDLE_MS = 5000
_POLL_MS = 200
_BATCH = 500


# --- errors ------------------------------------------------------------------------------


class CliError(click.ClickException):
    """An error the user can act on: `error: <message>` on stderr, exit code 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", file=file, err=file is None)


def _fail(message: str) -> NoReturn:
    raise CliError(message)


# --- the group, with lazily loaded commands ----------------------------------------------


class PletGroup(click.Group):
    """The root group: turns engine errors into `CliError` and loads optional commands lazily.

    Optional commands live in other packages (bench/ today); they are imported only when
    invoked or listed, by module name, so that `engine` never imports them at load time and
    `plet` keeps working when one of them is missing or broken.
    """

    lazy_commands: dict[str, tuple[str, str]] = {
        "bench": ("bench.command", "bench_command"),
        "replay": ("spark_tasks.cli", "replay_group"),
        "web": ("web.cli", "web_command"),
        "tui": ("console.cli", "tui_command"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        for name, (module, _) in self.lazy_commands.items():
            if _module_exists(module):
                names.add(name)
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self.lazy_commands:
            command = _load_lazy(cmd_name, *self.lazy_commands[cmd_name])
            if not getattr(command, "_plet_unavailable", False):
                self.add_command(command, cmd_name)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except errors.PartitionletError as exc:
            raise CliError(str(exc) or type(exc).__name__) from exc
        except sqlite3.Error as exc:
            # The engine should wrap these; if one escapes, a message still beats a traceback.
            raise CliError(f"database error: {exc}") from exc
        except OSError as exc:
            if isinstance(exc, BrokenPipeError):
                raise
            raise CliError(str(exc)) from exc


def _module_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # the parent package is missing
        return False


def _load_lazy(name: str, module: str, attribute: str) -> click.Command:
    try:
        command = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        reason = str(exc)

        @click.command(
            name,
            help=f"(unavailable: {reason})",
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
            add_help_option=False,
        )
        def unavailable() -> None:
            _fail(f"'plet {name}' is not available: {reason}")

        unavailable._plet_unavailable = True  # type: ignore[attr-defined]
        return unavailable
    return command


# --- the cluster option ------------------------------------------------------------------


def _remember_cluster(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    source = ctx.get_parameter_source(param.name or "")
    ctx.meta[_META_CLI if source is ParameterSource.COMMANDLINE else _META_ENV] = value


def cluster_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """`--cluster PATH` (env `PLET_CLUSTER`), accepted by the group and by every command."""
    return click.option(
        "--cluster",
        "cluster_path",
        metavar="PATH",
        envvar=CLUSTER_ENV,
        show_envvar=True,
        expose_value=False,
        callback=_remember_cluster,
        help="Cluster directory.",
    )(func)


def _cluster_path(ctx: click.Context, *, use_env: bool = True) -> str | None:
    path = ctx.meta.get(_META_CLI)
    if path is None and use_env:
        path = ctx.meta.get(_META_ENV)
    return path


def _require_path(ctx: click.Context) -> str:
    path = _cluster_path(ctx)
    if not path:
        raise click.UsageError(
            f"no cluster given: pass --cluster PATH or set {CLUSTER_ENV}", ctx=ctx
        )
    return path


def open_cluster(ctx: click.Context) -> Cluster:
    """The cluster of this invocation, closed when the command ends.

    Unlike `Cluster.open`, refuses a directory that does not exist: a typo in `--cluster`
    must not silently create an empty cluster. `plet init` and `plet demo` create one.
    """
    path = _require_path(ctx)
    if not Path(path).is_dir():
        _fail(f"no cluster at {path!r}: create one with 'plet init --cluster {shlex.quote(path)}'")
    return ctx.with_resource(Cluster.open(path))


# --- output helpers ----------------------------------------------------------------------


def _echo_err(message: str) -> None:
    click.echo(message, err=True)


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def format_bytes(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_ms(ms: int | None) -> str:
    if ms is None:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_seconds(seconds: int) -> str:
    if seconds == 0:
        return "forever"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def echo_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "") -> None:
    """Left-aligned columns, two spaces apart, header in bold on a terminal."""
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(row: Sequence[str]) -> str:
        return indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))

    click.echo(click.style(line(headers).rstrip(), bold=True))
    for row in cells:
        click.echo(line(row).rstrip())


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def stream_json(info: Any) -> dict[str, Any]:
    return asdict(info)


def partition_json(info: Any) -> dict[str, Any]:
    data = asdict(info)
    data["high_watermark"] = info.high_watermark
    data["messages"] = info.messages
    return data


def topic_json(info: Any) -> dict[str, Any]:
    data = asdict(info)
    data["partitions"] = [partition_json(p) for p in info.partitions]
    data["partition_count"] = info.partition_count
    data["messages"] = info.messages
    data["bytes"] = info.bytes
    return data


# --- the root group ----------------------------------------------------------------------


@click.group(
    cls=PletGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@cluster_option
@click.version_option(package_name="partitionlet", prog_name="plet")
def cli() -> None:
    """Partitionlet: an embedded, Kafka-shaped streaming engine on SQLite.

    \b
    Start with:
      plet demo                     seed data/demo and take a short tour
      plet init --cluster data/dc1  create an empty cluster
    Exit codes: 0 success, 1 error (not found, invalid name, access denied, ...),
    2 usage error.
    """


@cli.command()
@cluster_option
@click.option("--name", help="Human name of the cluster (default: chosen by the engine).")
@click.option("--volumes", type=int, help="Number of volume files of a new cluster (default 4).")
@click.pass_context
def init(ctx: click.Context, name: str | None, volumes: int | None) -> None:
    """Create a cluster directory (or open an existing one and describe it).

    \b
    Example:
      plet init --cluster data/dc1 --name dc1 --volumes 4
    """
    path = _require_path(ctx)
    existed = Path(path).is_dir() and any(Path(path).iterdir())
    options: dict[str, Any] = {}
    if name is not None:
        options["name"] = name
    if volumes is not None:
        options["volumes"] = volumes
    with Cluster.open(path, **options) as cluster:
        count = len(cluster.volumes())
        verb = "opened existing" if existed else "created"
        click.echo(
            f"{verb} cluster {cluster.name!r} ({cluster.id}) at {cluster.path} "
            f"with {_plural(count, 'volume')}"
        )


# --- streams -----------------------------------------------------------------------------

# Each option's destination is the policy's name, so the given ones pass straight through.
_POLICY_OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option(
        "--ttl",
        type=int,
        metavar="SECONDS",
        help="Seconds a message is kept, from its timestamp; 0 keeps forever. [default: 604800]",
    ),
    click.option(
        "--default-partitions",
        type=int,
        metavar="N",
        help="Partitions of an auto-created topic. [default: 1]",
    ),
    click.option(
        "--auto-create/--no-auto-create",
        default=None,
        help="Create a topic on first produce. [default: on]",
    ),
    click.option(
        "--compact/--no-compact",
        default=None,
        help="Keep only the latest message per key when compacting. [default: off]",
    ),
    click.option("--min-compaction-lag-ms", type=int, metavar="MS", help="[default: 0]"),
    click.option("--delete-retention-ms", type=int, metavar="MS", help="[default: 86400000]"),
    click.option(
        "--timestamp-type",
        metavar="create|log_append",
        help="Whose clock stamps a message: the producer's or the log's. [default: create]",
    ),
    click.option(
        "--max-message-bytes",
        type=int,
        metavar="BYTES",
        help="Largest record (key, value and headers). [default: 1048576]",
    ),
    *[
        click.option(
            f"--{verb}-perm",
            f"{verb}_perm",
            metavar="ACE",
            help=f"Who may {verb}, e.g. 'u:alice | g:ops'. [default: u:<creator>]",
        )
        for verb in ("produce", "consume", "topic", "copy", "admin")
    ],
]

_POLICY_NAMES = (
    "ttl",
    "default_partitions",
    "auto_create",
    "compact",
    "min_compaction_lag_ms",
    "delete_retention_ms",
    "timestamp_type",
    "max_message_bytes",
    "produce_perm",
    "consume_perm",
    "topic_perm",
    "copy_perm",
    "admin_perm",
)


def policy_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_POLICY_OPTIONS):
        func = option(func)
    return func


def _given_policies(options: dict[str, Any]) -> dict[str, Any]:
    # Only what the user typed: the engine owns the defaults and the validation.
    return {name: options[name] for name in _POLICY_NAMES if options.get(name) is not None}


def _paging_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)
    func = click.option(
        "--offset", type=click.IntRange(min=0), default=0, help="Skip this many first."
    )(func)
    func = click.option("--limit", type=click.IntRange(min=0), help="Show at most N.")(func)
    func = click.option("--prefix", metavar="P", help="Only names that start with P.")(func)
    return func


@cli.group()
def stream() -> None:
    """Create, edit, delete, list and describe streams (`/apps/sensors`)."""


@stream.command("create")
@cluster_option
@click.argument("path")
@policy_options
@click.pass_context
def stream_create(ctx: click.Context, path: str, **options: Any) -> None:
    """Create a stream at PATH with the given policies (the others keep their defaults).

    \b
    Example:
      plet stream create /apps/sensors --ttl 86400 --default-partitions 3
    """
    info = open_cluster(ctx).create_stream(path, **_given_policies(options))
    click.echo(f"created stream {info.path}")


@stream.command("edit")
@cluster_option
@click.argument("path")
@policy_options
@click.pass_context
def stream_edit(ctx: click.Context, path: str, **options: Any) -> None:
    """Change some policies of the stream at PATH.

    \b
    Example:
      plet stream edit /apps/sensors --ttl 0 --consume-perm 'u:alice | g:ops'
    """
    policies = _given_policies(options)
    if not policies:
        raise click.UsageError("nothing to change: give at least one policy option", ctx=ctx)
    open_cluster(ctx).edit_stream(path, **policies)
    changes = ", ".join(f"{name}={value!r}" for name, value in policies.items())
    click.echo(f"updated stream {path}: {changes}")


@stream.command("delete")
@cluster_option
@click.argument("path")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def stream_delete(ctx: click.Context, path: str, yes: bool) -> None:
    """Delete the stream at PATH with all its topics and messages."""
    cluster = open_cluster(ctx)
    info = cluster.stream(path)  # an unknown stream fails before the question
    if not yes:
        click.confirm(
            f"Delete stream {info.path} with its {_plural(info.topic_count, 'topic')} and "
            f"{_plural(info.messages, 'message')}?",
            abort=True,
            err=True,
        )
    cluster.delete_stream(path)
    click.echo(f"deleted stream {info.path}")


@stream.command("list")
@cluster_option
@_paging_options
@click.pass_context
def stream_list(
    ctx: click.Context, prefix: str | None, limit: int | None, offset: int, as_json: bool
) -> None:
    """List streams, ordered by path.

    \b
    Example:
      plet stream list --prefix /apps --limit 20
    """
    infos = open_cluster(ctx).streams(prefix=prefix, limit=limit, offset=offset)
    if as_json:
        _echo_json([stream_json(info) for info in infos])
        return
    echo_table(
        ("PATH", "TOPICS", "MESSAGES", "SIZE", "TTL", "CREATOR"),
        (
            (
                info.path,
                f"{info.topic_count:,}",
                f"{info.messages:,}",
                format_bytes(info.bytes),
                format_seconds(int(info.policies.get("ttl", 0))),
                info.creator,
            )
            for info in infos
        ),
    )


@stream.command("info")
@cluster_option
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def stream_info(ctx: click.Context, path: str, as_json: bool) -> None:
    """Describe the stream at PATH: its policies, topic count and size."""
    info = open_cluster(ctx).stream(path)
    if as_json:
        _echo_json(stream_json(info))
        return
    echo_table(
        ("STREAM", info.path),
        (
            ("creator", info.creator),
            ("created", format_ms(info.created_ms)),
            ("topics", f"{info.topic_count:,}"),
            ("messages", f"{info.messages:,}"),
            ("size", format_bytes(info.bytes)),
        ),
    )
    click.echo()
    rows = []
    for name, value in sorted(info.policies.items()):
        shown = json.dumps(value) if isinstance(value, bool) else str(value)
        if name == "ttl":
            shown += f" ({format_seconds(int(value))})"
        rows.append((name, shown))
    echo_table(("POLICY", "VALUE"), rows)


# --- topics ------------------------------------------------------------------------------


@cli.group()
def topic() -> None:
    """Create, delete, list and describe topics (`/apps/sensors:car-17`)."""


@topic.command("create")
@cluster_option
@click.argument("full_name")
@click.option("--partitions", type=int, help="Partition count (default: the stream's policy).")
@click.pass_context
def topic_create(ctx: click.Context, full_name: str, partitions: int | None) -> None:
    """Create the topic FULL_NAME (`/stream/path:topic`).

    \b
    Example:
      plet topic create /apps/sensors:car-17 --partitions 3
    """
    info = open_cluster(ctx).create_topic(full_name, partitions=partitions)
    click.echo(f"created topic {info.name} with {_plural(info.partition_count, 'partition')}")


@topic.command("delete")
@cluster_option
@click.argument("full_name")
@click.pass_context
def topic_delete(ctx: click.Context, full_name: str) -> None:
    """Delete the topic FULL_NAME and its messages."""
    open_cluster(ctx).delete_topic(full_name)
    click.echo(f"deleted topic {full_name}")


@topic.command("list")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@_paging_options
@click.pass_context
def topic_list(
    ctx: click.Context,
    stream_path: str,
    prefix: str | None,
    limit: int | None,
    offset: int,
    as_json: bool,
) -> None:
    """List the topics of STREAM, ordered by name.

    \b
    Example:
      plet topic list /apps/sensors --prefix car- --limit 50 --offset 100
    """
    cluster = open_cluster(ctx)
    infos = cluster.topics(stream_path, prefix=prefix, limit=limit, offset=offset)
    if as_json:
        _echo_json([topic_json(info) for info in infos])
        return
    echo_table(
        ("TOPIC", "PARTITIONS", "MESSAGES", "SIZE", "LAST MESSAGE"),
        (
            (
                info.name,
                info.partition_count,
                f"{info.messages:,}",
                format_bytes(info.bytes),
                format_ms(max((p.last_timestamp or 0 for p in info.partitions), default=0) or None),
            )
            for info in infos
        ),
    )
    if limit and len(infos) == limit:
        # A full page: say where it sits, since a stream may hold hundreds of thousands.
        total = cluster.topic_count(stream_path, prefix=prefix)
        if total > offset + len(infos):
            _echo_err(
                f"showing {offset + 1:,}-{offset + len(infos):,} of {total:,} topics; "
                f"next page: --offset {offset + len(infos)}"
            )


@topic.command("info")
@cluster_option
@click.argument("full_name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def topic_info(ctx: click.Context, full_name: str, as_json: bool) -> None:
    """Describe the topic FULL_NAME: partitions, offsets and partitionlet chains."""
    info = open_cluster(ctx).topic(full_name)
    if as_json:
        _echo_json(topic_json(info))
        return
    echo_table(
        ("TOPIC", info.name),
        (
            ("stream", info.stream),
            ("created", format_ms(info.created_ms)),
            ("partitions", info.partition_count),
            ("messages", f"{info.messages:,}"),
            ("size", format_bytes(info.bytes)),
        ),
    )
    for part in info.partitions:
        click.echo()
        click.echo(
            click.style(f"partition {part.partition}", bold=True)
            + f"  offsets {part.log_start_offset:,}..{part.log_end_offset:,}"
            + f"  ({_plural(part.messages, 'message')}, {format_bytes(part.bytes)})"
            + f"  {format_ms(part.first_timestamp)} .. {format_ms(part.last_timestamp)}"
        )
        echo_table(
            ("PARTITIONLET", "VOLUME", "BASE_OFFSET", "LAST_OFFSET", "ACTIVE", "MESSAGES", "SIZE"),
            (
                (
                    let.id,
                    let.volume,
                    let.base_offset,
                    let.last_offset,
                    "yes" if let.active else "no",
                    f"{let.messages:,}",
                    format_bytes(let.bytes),
                )
                for let in part.partitionlets
            ),
            indent="  ",
        )


# --- produce -----------------------------------------------------------------------------


def _parse_headers(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, bytes]]:
    headers = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", ctx=ctx, param=param)
        headers.append((key, value.encode()))
    return headers


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


@cli.command()
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
    metavar="K=V",
    callback=_parse_headers,
    help="Add a header to every message (repeatable).",
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
    except KeyboardInterrupt:
        failure = KeyboardInterrupt()
    try:
        producer.flush()  # returns after every callback has run, so the counts are final
    finally:
        producer.close()
    _echo_err(f"produced {_plural(outcome.ok, 'message')}")
    if isinstance(failure, KeyboardInterrupt):
        ctx.exit(130)
    if failure is not None:
        raise failure
    if outcome.first_error is not None:
        _fail(f"{_plural(outcome.failed, 'message')} failed: {outcome.first_error}")


# --- consume -----------------------------------------------------------------------------


def _parse_time(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A time (engine.times: ISO 8601, UTC when it has no zone, or epoch ms) -> epoch ms."""
    if value is None:
        return None
    try:
        return times.parse_time(value)
    except errors.InvalidArgument as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def _bytes_json(obj: dict[str, Any], field: str, data: Any) -> None:
    """`obj[field]` = UTF-8 text, or base64 with `obj[field + "_encoding"] = "base64"`."""
    if data is None or isinstance(data, str):
        obj[field] = data
        return
    try:
        obj[field] = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        obj[field] = base64.b64encode(bytes(data)).decode("ascii")
        obj[f"{field}_encoding"] = "base64"


def record_json(record: Any) -> dict[str, Any]:
    """One consumed record as a JSON-ready dict (the `--format json` line)."""
    obj: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": "log_append" if record.timestamp_type == 1 else "create",
    }
    _bytes_json(obj, "key", record.key)
    _bytes_json(obj, "value", record.value)
    headers = []
    for name, value in record.headers or ():
        header: dict[str, Any] = {"key": name}
        _bytes_json(header, "value", value)
        headers.append(header)
    obj["headers"] = headers
    return obj


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


def _position_consumer(
    consumer: Consumer,
    tps: list[TopicPartition],
    *,
    group: str | None,
    offset: int | None,
    from_time: int | None,
    from_end: bool,
) -> None:
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
    elif group is None:
        # Without a group there is nothing committed; with one, --from-beginning/--from-end
        # only choose where a partition with no committed offset starts (as in Kafka).
        if from_end:
            consumer.seek_to_end(*tps)
        else:
            consumer.seek_to_beginning(*tps)


@cli.command()
@cluster_option
@click.argument("topic_name", metavar="TOPIC")
@click.option("--from-beginning", is_flag=True, help="Start at the oldest message (default).")
@click.option("--from-end", is_flag=True, help="Start after the newest message.")
@click.option("--offset", type=click.IntRange(min=0), help="Start at this offset.")
@click.option(
    "--from-time",
    metavar="ISO8601",
    callback=_parse_time,
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
    if group is not None and partition is None and offset is None and from_time is None:
        consumer.subscribe([full])
    else:
        consumer.assign(tps)
        _position_consumer(
            consumer, tps, group=group, offset=offset, from_time=from_time, from_end=from_end
        )
    end = consumer.end_offsets(tps)
    if offset is not None:
        _warn_past_end(full, offset, end, follow=follow)
    idle_limit = timeout_ms if timeout_ms is not None else (None if follow else _END_IDLE_MS)

    out = _binary_stream(sys.stdout)
    count = 0
    last_message = time.monotonic()
    try:
        while max_messages is None or count < max_messages:
            want = _BATCH if max_messages is None else min(_BATCH, max_messages - count)
            batch = consumer.poll(timeout_ms=_POLL_MS, max_records=want)
            records = [record for part in batch.values() for record in part]
            if records:
                if fmt == "json":
                    chunk = b"".join(
                        json.dumps(record_json(r), ensure_ascii=False).encode() + b"\n"
                        for r in records
                    )
                else:
                    chunk = b"".join(_record_text(r, print_key) for r in records)
                out.write(chunk)
                out.flush()
                count += len(records)
                last_message = time.monotonic()
                if group is not None:
                    consumer.commit()
            if not follow and _at_end(consumer, end):
                break
            if idle_limit is not None and (time.monotonic() - last_message) * 1000 >= idle_limit:
                break
    except KeyboardInterrupt:
        _commit_group(consumer, group)
        _echo_err(f"consumed {_plural(count, 'message')}")
        ctx.exit(130)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining
        # again when it flushes stdout at exit.
        _silence_stdout()
        ctx.exit(0)
    # Also when nothing was printed: a group that started at the end remembers where.
    _commit_group(consumer, group)
    _echo_err(f"consumed {_plural(count, 'message')}")


def _warn_past_end(
    topic: str, offset: int, end: dict[TopicPartition, int], *, follow: bool
) -> None:
    """Say on stderr which partitions --offset starts past the end of: otherwise an empty
    output cannot be told from an empty topic."""
    for tp, log_end in sorted(end.items(), key=lambda item: item[0].partition):
        if offset > log_end or (offset == log_end and not follow):
            then = "waiting for it" if follow else "nothing read from it"
            where = "past" if offset > log_end else "at"
            _echo_err(
                f"--offset {offset:,} is {where} the end of partition {tp.partition} of {topic} "
                f"(log end offset {log_end:,}): {then}"
            )


def _commit_group(consumer: Consumer, group: str | None) -> None:
    if group is not None:
        consumer.commit()


def _binary_stream(stream: Any) -> Any:
    """The bytes side of a text stream (click's CliRunner swaps sys.stdin/stdout too)."""
    return getattr(stream, "buffer", stream)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (CliRunner): nothing to silence
        pass


# --- demo --------------------------------------------------------------------------------


@cli.command()
@cluster_option
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Seed a demo cluster (default data/demo) and take a short tour of it.

    Re-running adds nothing that is already there. PLET_CLUSTER is ignored here so that the
    demo data never lands in a real cluster by accident; pass --cluster to choose the place.
    """
    from engine.demo import seed  # only this command needs the demo data set

    path = _cluster_path(ctx, use_env=False) or DEMO_CLUSTER
    cluster = ctx.with_resource(Cluster.open(path, name="demo"))
    summary = seed(cluster)
    _print_tour(cluster, path, summary)


def _print_tour(cluster: Cluster, path: str, summary: Any) -> None:
    def heading(text: str) -> None:
        click.echo()
        click.echo(click.style(text, fg="cyan", bold=True))

    click.echo(
        click.style("Partitionlet demo", bold=True)
        + f": cluster {cluster.name!r} at {path} ({_plural(len(cluster.volumes()), 'volume')})"
    )
    if summary.messages_produced or summary.topics_created or summary.streams_created:
        click.echo(
            f"Seeded {_plural(len(summary.streams_created), 'stream')}, "
            f"{_plural(len(summary.topics_created), 'topic')} and "
            f"{_plural(summary.messages_produced, 'message')}."
        )
    else:
        click.echo(f"Already seeded: nothing added. (Delete {path} to start over.)")

    heading("Streams")
    streams = [cluster.stream(p) for p in summary.streams]
    echo_table(
        ("PATH", "TOPICS", "MESSAGES", "SIZE", "TTL", "POLICIES"),
        (
            (
                info.path,
                info.topic_count,
                f"{info.messages:,}",
                format_bytes(info.bytes),
                format_seconds(int(info.policies.get("ttl", 0))),
                _policy_summary(info.policies),
            )
            for info in streams
        ),
        indent="  ",
    )

    heading("Topics (offsets per partition: start..end)")
    topics = [cluster.topic(name) for name in summary.topics]
    echo_table(
        ("TOPIC", "PARTITIONS", "OFFSETS"),
        (
            (
                info.name,
                info.partition_count,
                "  ".join(
                    f"{p.partition}:{p.log_start_offset}..{p.log_end_offset}"
                    for p in info.partitions
                ),
            )
            for info in topics
        ),
        indent="  ",
    )

    for name, count in summary.samples:
        heading(f"A few messages of {name}")
        for record in _sample(cluster, name, count):
            headers = ", ".join(f"{k}={_short(v)}" for k, v in record.headers or ())
            click.echo(
                f"  p{record.partition} @{record.offset:<4} {_short(record.key):<14} "
                f"{_short(record.value, 60)}" + (f"  [{headers}]" if headers else "")
            )

    heading("Next, try")
    where = f"--cluster {shlex.quote(path)}"
    first = summary.samples[0][0] if summary.samples else summary.topics[0]
    for command in (
        f"plet stream list {where}",
        f"plet stream info /apps/profiles {where}",
        f"plet topic info {first} {where}",
        f"plet consume {first} {where} --print-key --max-messages 5",
        f"plet consume /ops/logs:api {where} --format json --max-messages 2",
        f"echo 'door=open' | plet produce {first} {where} --key-separator =",
        f"plet consume /apps/clicks:web {where} --group dash --from-end --follow",
        "plet --help",
    ):
        click.echo(f"  {command}")


def _policy_summary(policies: dict[str, Any]) -> str:
    parts = [f"{_plural(policies.get('default_partitions', 1), 'partition')}/topic"]
    if policies.get("compact"):
        parts.append("compacted")
    if policies.get("timestamp_type") == "log_append":
        parts.append("log-append time")
    if not policies.get("auto_create", True):
        parts.append("no auto-create")
    return ", ".join(parts)


def _short(data: Any, width: int = 14) -> str:
    if data is None:
        return "null"
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    if not text.isprintable():
        text = "0x" + bytes(data).hex() if not isinstance(data, str) else repr(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _sample(cluster: Cluster, name: str, count: int) -> list[Any]:
    """The first `count` messages of partition 0 of `name`."""
    consumer = Consumer(cluster, enable_auto_commit=False)
    try:
        tp = TopicPartition(name, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = consumer.poll(timeout_ms=1000, max_records=count)
        return [record for part in records.values() for record in part][:count]
    finally:
        consumer.close()


# --- volumes, partitionlets and rebalancing ----------------------------------------------


@cli.group()
def volume() -> None:
    """List the volumes: the SQLite files that store the messages."""


@volume.command("list")
@cluster_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def volume_list(ctx: click.Context, as_json: bool) -> None:
    """List the volumes with their sizes, partitionlets and recent write load."""
    infos = open_cluster(ctx).volumes()
    if as_json:
        _echo_json([asdict(info) for info in infos])
        return
    echo_table(
        ("VOLUME", "PATH", "FILE SIZE", "DATA", "PARTITIONLETS", "ACTIVE", "WRITTEN (5m)"),
        (
            (
                info.id,
                info.path,
                format_bytes(info.bytes),
                format_bytes(info.data_bytes),
                f"{info.partitionlets:,}",
                f"{info.active_partitionlets:,}",
                format_bytes(info.recent_write_bytes),
            )
            for info in infos
        ),
    )


@cli.group()
def partitionlet() -> None:
    """List partitionlets: the slices of partitions, each stored in one volume."""


@partitionlet.command("list")
@cluster_option
@click.argument("topic_name", metavar="[TOPIC]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def partitionlet_list(ctx: click.Context, topic_name: str | None, as_json: bool) -> None:
    """List the partitionlets of TOPIC (a full name), or of every topic.

    \b
    Example:
      plet partitionlet list /apps/sensors:car-17
    """
    infos = open_cluster(ctx).partitionlets(topic_name)
    if as_json:
        _echo_json([asdict(info) for info in infos])
        return
    echo_table(
        (
            "PARTITIONLET",
            "TOPIC",
            "PARTITION",
            "VOLUME",
            "BASE_OFFSET",
            "LAST_OFFSET",
            "ACTIVE",
            "MESSAGES",
            "SIZE",
        ),
        (
            (
                info.id,
                info.topic,
                info.partition,
                info.volume,
                info.base_offset,
                info.last_offset,
                "yes" if info.active else "no",
                f"{info.messages:,}",
                format_bytes(info.bytes),
            )
            for info in infos
        ),
    )


@cli.command()
@cluster_option
@click.option("--dry-run", is_flag=True, help="Only show what would move.")
@click.option(
    "--max-moves", type=click.IntRange(min=0), metavar="N", help="Move at most N partitionlets."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def rebalance(ctx: click.Context, dry_run: bool, max_moves: int | None, as_json: bool) -> None:
    """Move sealed partitionlets between volumes to even out bytes and heat.

    Active partitionlets never move; readers and writers carry on meanwhile. Copies left
    by an interrupted earlier run are removed first.

    \b
    Example:
      plet rebalance --dry-run
    """
    report = open_cluster(ctx).rebalance(dry_run=dry_run, max_moves=max_moves)
    if as_json:
        data = asdict(report)
        data["bytes_moved"] = report.bytes_moved
        _echo_json(data)
        return
    if report.orphans:
        verb = "would remove" if dry_run else "removed"
        count = len(report.orphans)
        click.echo(
            f"{verb} {count:,} orphan {'copy' if count == 1 else 'copies'} left by "
            "an interrupted move"
        )
    if not report.moves:
        click.echo("volumes are balanced: nothing to move")
    else:
        verb = "would move" if dry_run else "moved"
        click.echo(
            f"{verb} {_plural(len(report.moves), 'partitionlet')} "
            f"({format_bytes(report.bytes_moved)})"
        )
        click.echo()
        echo_table(
            ("PARTITIONLET", "TOPIC", "PARTITION", "FROM", "TO", "SIZE"),
            (
                (
                    m.partitionlet,
                    m.topic,
                    m.partition,
                    m.from_volume,
                    m.to_volume,
                    format_bytes(m.bytes),
                )
                for m in report.moves
            ),
        )
    if report.skipped:
        click.echo(
            f"left {_plural(len(report.skipped), 'partitionlet')} alone: changed before its turn"
        )
    click.echo()
    echo_table(
        (
            "VOLUME",
            "BEFORE",
            "AFTER (projected)" if dry_run else "AFTER",
            "HEAT (5m)",
            "SCORE BEFORE",
            "SCORE AFTER",
        ),
        (
            (
                v.volume,
                format_bytes(v.bytes_before),
                format_bytes(v.bytes_after),
                format_bytes(v.heat),
                format_bytes(v.score_before),
                format_bytes(v.score_after),
            )
            for v in report.volumes
        ),
    )


# --- consumer groups ---------------------------------------------------------------------


@cli.group()
def group() -> None:
    """List and describe consumer groups, and reset their offsets."""


@group.command("list")
@cluster_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def group_list(ctx: click.Context, as_json: bool) -> None:
    """List the groups with their state, members and total lag."""
    infos = open_cluster(ctx).groups()
    if as_json:
        _echo_json([_group_json(info) for info in infos])
        return
    echo_table(
        ("GROUP", "STATE", "GENERATION", "STRATEGY", "MEMBERS", "PARTITIONS", "LAG"),
        (
            (
                g.group_id,
                g.state,
                g.generation,
                g.protocol or "-",
                len(g.members),
                len(g.partitions),
                f"{g.lag:,}",
            )
            for g in infos
        ),
    )


@group.command("describe")
@cluster_option
@click.argument("group_id", metavar="GROUP")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def group_describe(ctx: click.Context, group_id: str, as_json: bool) -> None:
    """Show GROUP's members and, per partition, its committed offset and lag.

    \b
    Example:
      plet group describe dash
    """
    info = open_cluster(ctx).group(group_id)
    if as_json:
        _echo_json(_group_json(info))
        return
    click.echo(
        f"group {info.group_id}: {info.state}, generation {info.generation}, "
        f"strategy {info.protocol or '-'}, lag {info.lag:,}"
    )
    click.echo()
    echo_table(
        ("MEMBER", "CLIENT", "HOST", "PARTITIONS", "LAST HEARTBEAT"),
        (
            (
                m.member_id,
                m.client_id,
                m.host,
                ", ".join(f"{tp.topic}[{tp.partition}]" for tp in m.assignment) or "-",
                format_ms(m.last_heartbeat_ms),
            )
            for m in info.members
        ),
    )
    owner = {tp: m.member_id for m in info.members for tp in m.assignment}
    click.echo()
    echo_table(
        ("TOPIC", "PARTITION", "COMMITTED", "LOG END", "LAG", "MEMBER"),
        (
            (
                p.topic,
                p.partition,
                "-" if p.committed is None else f"{p.committed:,}",
                f"{p.log_end_offset:,}",
                f"{p.lag:,}",
                owner.get(TopicPartition(p.topic, p.partition), "-"),
            )
            for p in info.partitions
        ),
    )


@group.command("reset")
@cluster_option
@click.argument("group_id", metavar="GROUP")
@click.argument("topic_name", metavar="TOPIC")
@click.option("--to-earliest", "to", flag_value="earliest", help="The oldest message.")
@click.option("--to-latest", "to", flag_value="latest", help="After the newest message.")
@click.option(
    "--to-offset",
    type=click.IntRange(min=0),
    metavar="N",
    help="Offset N in every partition (clamped to what exists).",
)
@click.option(
    "--to-time",
    callback=_parse_time,
    metavar="ISO8601",
    help="The first message at or after this time: ISO 8601, UTC when it has no zone "
    "(2024-05-01T12:00:00Z, 2024-05-01), or epoch ms.",
)
@click.pass_context
def group_reset(
    ctx: click.Context,
    group_id: str,
    topic_name: str,
    to: str | None,
    to_offset: int | None,
    to_time: int | None,
) -> None:
    """Set GROUP's committed offsets in every partition of TOPIC.

    The group must have no live members (stop its consumers first), as in Kafka.

    \b
    Examples:
      plet group reset dash /apps/clicks:web --to-earliest
      plet group reset dash /apps/clicks:web --to-time 2024-05-01T12:00:00Z
    """
    chosen = [x for x in (to, to_offset, to_time) if x is not None]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset and --to-time",
            ctx=ctx,
        )
    target: str | int | datetime
    if to_time is not None:
        target = times.to_datetime(to_time)
    else:
        target = chosen[0]
    result = open_cluster(ctx).reset_offsets(group_id, topic_name, target)
    echo_table(
        ("TOPIC", "PARTITION", "NEW OFFSET"),
        ((tp.topic, tp.partition, f"{offset:,}") for tp, offset in sorted(result.items())),
    )


def _group_json(info: Any) -> dict[str, Any]:
    return {
        "group_id": info.group_id,
        "state": info.state,
        "generation": info.generation,
        "protocol": info.protocol,
        "lag": info.lag,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": [[tp.topic, tp.partition] for tp in m.assignment],
                "last_heartbeat_ms": m.last_heartbeat_ms,
            }
            for m in info.members
        ],
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "committed": p.committed,
                "log_end_offset": p.log_end_offset,
                "lag": p.lag,
                "metadata": p.metadata,
            }
            for p in info.partitions
        ],
    }


# --- heat and maintenance ----------------------------------------------------------------


@cli.command()
@cluster_option
@click.option(
    "--window",
    "window_s",
    type=int,
    default=300,
    show_default=True,
    metavar="SECONDS",
    help="How far back to look.",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many of the hottest partitions to show.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def heat(ctx: click.Context, window_s: int, top: int, as_json: bool) -> None:
    """Show recent load: messages and bytes written and read per second, per volume and
    for the hottest partitions.

    \b
    Example:
      plet heat --window 60 --top 10
    """
    result = open_cluster(ctx).heat(window_s)
    hottest = result.hottest_partitions(top)
    if as_json:
        _echo_json(
            {
                "window_s": result.window_s,
                "bucket_s": result.bucket_s,
                "buckets": result.buckets,
                "volumes": {str(v): asdict(load) for v, load in result.volumes.items()},
                "volume_series": {
                    str(v): [asdict(x) for x in series]
                    for v, series in result.volume_series.items()
                },
                "partitions": [
                    {"topic": tp.topic, "partition": tp.partition, **asdict(load)}
                    for tp, load in hottest
                ],
            }
        )
        return

    def rates(load: Any) -> tuple[str, str, str, str]:
        return (
            f"{load.write_messages_per_s:,.1f}",
            format_bytes(int(load.write_bytes_per_s)),
            f"{load.read_messages_per_s:,.1f}",
            format_bytes(int(load.read_bytes_per_s)),
        )

    click.echo(f"load over the last {format_seconds(result.window_s)} (per second)")
    click.echo()
    echo_table(
        ("VOLUME", "WRITE MSG/S", "WRITE B/S", "READ MSG/S", "READ B/S"),
        ((v, *rates(load)) for v, load in sorted(result.volumes.items())),
    )
    click.echo()
    echo_table(
        ("TOPIC", "PARTITION", "WRITE MSG/S", "WRITE B/S", "READ MSG/S", "READ B/S"),
        ((tp.topic, tp.partition, *rates(load)) for tp, load in hottest),
    )


@cli.command()
@cluster_option
@click.pass_context
def retention(ctx: click.Context) -> None:
    """Drop the partitionlets whose messages have all expired (the streams' ttl) now.

    Long-lived processes (plet web, plet replicate) do this in the background.
    """
    report = open_cluster(ctx).enforce_retention()
    click.echo(
        f"dropped {_plural(report.partitionlets_dropped, 'partitionlet')}, "
        f"{_plural(report.messages_freed, 'message')}, "
        f"{format_bytes(report.bytes_freed)}"
    )


@cli.command()
@cluster_option
@click.pass_context
def compact(ctx: click.Context) -> None:
    """Compact the streams with compact=true now: keep the latest message per key.

    Long-lived processes (plet web, plet replicate) do this in the background.
    """
    report = open_cluster(ctx).compact()
    click.echo(
        f"compacted {_plural(report.partitions, 'partition')}: removed "
        f"{_plural(report.messages_removed, 'message')} "
        f"({_plural(report.tombstones_removed, 'tombstone')}), "
        f"freed {format_bytes(report.bytes_freed)}"
    )


# --- replication -------------------------------------------------------------------------


@cli.group()
def replica() -> None:
    """Replicate streams to other clusters: add, list, pause, resume and remove links;
    issue, list and revoke the tokens other clusters replicate into this one with."""


@replica.command("add")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.argument("target", metavar="TARGET")
@click.option("--target-stream", metavar="PATH", help="Stream in the target (default: STREAM).")
@click.option("--paused", is_flag=True, help="Register the link without copying yet.")
@click.pass_context
def replica_add(
    ctx: click.Context, stream_path: str, target: str, target_stream: str | None, paused: bool
) -> None:
    """Replicate STREAM to TARGET: a cluster directory, or the http(s)://TOKEN@HOST:PORT
    address of another cluster's `plet web` (TOKEN from `plet replica token` there).

    The target stream is created with the same policies when missing, what exists is copied
    now (unless --paused), and `plet replicate` follows from then on.
    """
    info = open_cluster(ctx).add_replica(stream_path, target, target_stream, paused=paused)
    click.echo(
        f"replicating {stream_path} to {info.target_stream} at {info.target}: {info.state}"
        + (f", lag {info.lag_messages:,} messages" if info.lag_messages else "")
    )


@replica.command("token")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.pass_context
def replica_token(ctx: click.Context, stream_path: str) -> None:
    """Issue a token with which another cluster may replicate into STREAM of this one over
    HTTP (through `plet web`). Printed once; only its hash is kept. On the source:
    `plet replica add --cluster SRC STREAM http://TOKEN@HOST:PORT`."""
    click.echo(open_cluster(ctx).create_replication_token(stream_path))


@replica.command("tokens")
@cluster_option
@click.option("--stream", "stream_path", metavar="STREAM", help="Only the tokens of STREAM.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def replica_tokens(ctx: click.Context, stream_path: str | None, as_json: bool) -> None:
    """List the replication tokens issued by this cluster (their ids, never the tokens)."""
    infos = open_cluster(ctx).replication_tokens(stream_path)
    if as_json:
        _echo_json([asdict(t) for t in infos])
        return
    echo_table(
        ("ID", "STREAM", "CREATED", "BY", "LAST USED"),
        (
            (
                t.id,
                t.stream,
                format_ms(t.created_ms),
                t.created_by or "-",
                format_ms(t.last_used_ms),
            )
            for t in infos
        ),
    )


@replica.command("revoke")
@cluster_option
@click.argument("token_id")
@click.pass_context
def replica_revoke(ctx: click.Context, token_id: str) -> None:
    """Revoke the replication token TOKEN_ID (as `plet replica tokens` lists it): the links
    that use it break (401) from their next request."""
    open_cluster(ctx).revoke_replication_token(token_id)
    click.echo(f"revoked replication token {token_id}")


@replica.command("list")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def replica_list(ctx: click.Context, stream_path: str, as_json: bool) -> None:
    """List the links out of STREAM (with state and lag) and the links into it."""
    cluster = open_cluster(ctx)
    outs = cluster.replicas(stream_path)
    ins = cluster.upstreams(stream_path)
    if as_json:
        _echo_json({"replicas": [asdict(r) for r in outs], "upstreams": [asdict(u) for u in ins]})
        return
    echo_table(
        ("TARGET", "TARGET STREAM", "STATE", "LAG MSGS", "LAG S", "MSG/S", "ERROR"),
        (
            (
                r.target,
                r.target_stream,
                r.state,
                f"{r.lag_messages:,}",
                f"{r.lag_seconds:.1f}",
                f"{r.throughput_messages:,.0f}",
                r.error
                or (
                    "; ".join(
                        f"{c['topic']} partition {c['partition']} offset {c['offset']}"
                        for c in r.conflict
                    )
                    if r.conflict
                    else "-"
                ),
            )
            for r in outs
        ),
    )
    if ins:
        click.echo()
        echo_table(
            ("UPSTREAM", "SOURCE STREAM", "SOURCE CLUSTER"),
            ((u.source, u.source_stream, u.source_id) for u in ins),
        )


@replica.command("pause")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.argument("target", metavar="TARGET")
@click.pass_context
def replica_pause(ctx: click.Context, stream_path: str, target: str) -> None:
    """Stop copying STREAM to TARGET until it is resumed."""
    open_cluster(ctx).pause_replica(stream_path, target)
    click.echo(f"paused the replica of {stream_path} at {target}")


@replica.command("resume")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.argument("target", metavar="TARGET")
@click.pass_context
def replica_resume(ctx: click.Context, stream_path: str, target: str) -> None:
    """Resume a paused link (also re-checks a link in conflict once it is resolved)."""
    open_cluster(ctx).resume_replica(stream_path, target)
    click.echo(f"resumed the replica of {stream_path} at {target}")


@replica.command("remove")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.argument("target", metavar="TARGET")
@click.pass_context
def replica_remove(ctx: click.Context, stream_path: str, target: str) -> None:
    """Remove the link; the replica keeps what it received."""
    open_cluster(ctx).remove_replica(stream_path, target)
    click.echo(f"removed the replica of {stream_path} at {target}")


@cli.command()
@cluster_option
@click.option("--once", is_flag=True, help="Move what is pending, then exit.")
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=0.01),
    default=0.5,
    show_default=True,
    help="Seconds between passes when idle.",
)
@click.option(
    "--max-batches",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Batches copied per transaction.",
)
@click.pass_context
def replicate(ctx: click.Context, once: bool, interval_s: float, max_batches: int) -> None:
    """Copy the streams of this cluster to their replicas, and keep following.

    Runs retention and compaction in the background too, unless --once.
    """
    from engine.ops.maintenance import Maintenance
    from engine.replication import Replicator

    cluster = open_cluster(ctx)
    replicator = Replicator(cluster, max_batches=max_batches)
    if once:
        with replicator:
            moved = replicator.run_once()
        click.echo(f"replicated {_plural(moved, 'message')}")
        return
    maintenance = Maintenance(cluster).start()
    try:
        replicator.run_forever(interval_s=interval_s)
    except KeyboardInterrupt:
        pass
    finally:
        replicator.stop()
        maintenance.stop()


# --- console users -----------------------------------------------------------------------


@cli.group()
def user() -> None:
    """Users of the web console: add, list, change passwords, delete, API tokens."""


def _password_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--password",
        prompt=True,
        hide_input=True,
        confirmation_prompt=True,
        help="The password (asked for when not given; at least 8 characters, not a common "
        "password, not the user's name).",
    )(func)


@user.command("add")
@cluster_option
@click.argument("name")
@_password_option
@click.option("--group", "groups", multiple=True, help="A group of the user (repeatable).")
@click.option("--admin", is_flag=True, help="An administrator: passes every ACE.")
@click.pass_context
def user_add(
    ctx: click.Context, name: str, password: str, groups: tuple[str, ...], admin: bool
) -> None:
    """Add the console user NAME."""
    info = open_cluster(ctx).add_user(name, password, groups=groups, admin=admin)
    click.echo(
        f"added user {info.name}"
        + (f" (groups {', '.join(info.groups)})" if info.groups else "")
        + (" as an administrator" if info.admin else "")
    )


@user.command("passwd")
@cluster_option
@click.argument("name")
@_password_option
@click.pass_context
def user_passwd(ctx: click.Context, name: str, password: str) -> None:
    """Set the password of the console user NAME."""
    open_cluster(ctx).set_password(name, password)
    click.echo(f"password of {name} changed")


@user.command("delete")
@cluster_option
@click.argument("name")
@click.pass_context
def user_delete(ctx: click.Context, name: str) -> None:
    """Delete the console user NAME and their API tokens."""
    open_cluster(ctx).delete_user(name)
    click.echo(f"deleted user {name}")


@user.command("list")
@cluster_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def user_list(ctx: click.Context, as_json: bool) -> None:
    """List the console users."""
    infos = open_cluster(ctx).users()
    if as_json:
        _echo_json([asdict(u) for u in infos])
        return
    echo_table(
        ("USER", "GROUPS", "ADMIN"),
        ((u.name, ",".join(u.groups) or "-", "yes" if u.admin else "no") for u in infos),
    )


@user.command("token")
@cluster_option
@click.argument("name")
@click.option("--label", default="", help="What the token is for.")
@click.option(
    "--expires",
    default=None,
    metavar="DURATION",
    help="Stop working after DURATION: seconds, or a number with s, m, h, d or w "
    "(30d, 12h); default: never.",
)
@click.pass_context
def user_token(ctx: click.Context, name: str, label: str, expires: str | None) -> None:
    """Issue an API token for NAME (`Authorization: Bearer TOKEN` on /api/v1/). Printed
    once; only its hash is kept."""
    click.echo(open_cluster(ctx).create_api_token(name, label, expires_in=expires))


@user.command("edit")
@cluster_option
@click.argument("name")
@click.option("--group", "groups", multiple=True, help="Set the user's groups (repeatable).")
@click.option("--no-groups", is_flag=True, help="Take every group away.")
@click.option("--admin/--no-admin", default=None, help="Make or unmake an administrator.")
@click.pass_context
def user_edit(
    ctx: click.Context, name: str, groups: tuple[str, ...], no_groups: bool, admin: bool | None
) -> None:
    """Change the groups or the administrator flag of the console user NAME."""
    if groups and no_groups:
        raise click.UsageError("use --group or --no-groups, not both", ctx=ctx)
    new_groups: tuple[str, ...] | None = () if no_groups else (groups or None)
    info = open_cluster(ctx).edit_user(name, groups=new_groups, admin=admin)
    click.echo(
        f"user {info.name}: groups {', '.join(info.groups) or '-'}"
        + (", administrator" if info.admin else "")
    )


@user.command("tokens")
@cluster_option
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def user_tokens(ctx: click.Context, name: str, as_json: bool) -> None:
    """List the API tokens of NAME (their ids and labels; a token itself is never kept)."""
    cluster = open_cluster(ctx)
    cluster.user(name)  # an unknown user is an error, not an empty list
    infos = cluster.api_tokens(name)
    if as_json:
        _echo_json([asdict(t) for t in infos])
        return
    echo_table(
        ("ID", "LABEL", "CREATED", "LAST USED", "EXPIRES"),
        (
            (
                t.id,
                t.label or "-",
                format_ms(t.created_ms),
                format_ms(t.last_used_ms),
                (("expired " if t.expired else "") + format_ms(t.expires_ms))
                if t.expires_ms
                else "never",
            )
            for t in infos
        ),
    )


@user.command("revoke")
@cluster_option
@click.argument("name")
@click.argument("token_id")
@click.pass_context
def user_revoke(ctx: click.Context, name: str, token_id: str) -> None:
    """Revoke the API token TOKEN_ID (as `plet user tokens` lists it) of NAME."""
    open_cluster(ctx).revoke_api_token(name, token_id)
    click.echo(f"revoked token {token_id} of {name}")


# --- entry point -------------------------------------------------------------------------


def main() -> None:
    """The `plet` console script."""
    cli(prog_name="plet")


if __name__ == "__main__":  # pragma: no cover
    main()
