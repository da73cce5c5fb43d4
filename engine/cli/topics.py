"""`plet topic ...`: create, delete, list, describe topics and import messages into one."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click

from engine.cli.failures import fail
from engine.cli.options import cluster_option, open_cluster, paging_options
from engine.cli.output import echo_err, echo_json, echo_table, plural
from engine.cli.streams import note_pending_purges, policy_assignments, policy_name
from engine.client import imports
from engine.policies import TOPIC_POLICIES
from engine.times import format_ms
from engine.units import format_bytes


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


@click.group()
def topic() -> None:
    """Create, delete, list and describe topics (`/apps/sensors:car-17`)."""


_TOPIC_POLICY_HELP = (
    "The topic's own value of one of its stream's policies, NAME=VALUE (repeatable): "
    + ", ".join(TOPIC_POLICIES)
    + "."
)


@topic.command("create")
@cluster_option
@click.argument("full_name")
@click.option("--partitions", type=int, help="Partition count (default: the stream's policy).")
@click.option(
    "--policy", "policy_pairs", multiple=True, metavar="NAME=VALUE", help=_TOPIC_POLICY_HELP
)
@click.pass_context
def topic_create(
    ctx: click.Context, full_name: str, partitions: int | None, policy_pairs: tuple[str, ...]
) -> None:
    """Create the topic FULL_NAME (`/stream/path:topic`), with its own policies if given
    (the others are its stream's).

    \b
    Example:
      plet topic create /apps/sensors:car-17 --partitions 3 --policy compact=true
    """
    info = open_cluster(ctx).create_topic(
        full_name, partitions=partitions, policies=policy_assignments(policy_pairs)
    )
    click.echo(f"created topic {info.name} with {plural(info.partition_count, 'partition')}")


@topic.command("edit")
@cluster_option
@click.argument("full_name")
@click.option(
    "--policy", "policy_pairs", multiple=True, metavar="NAME=VALUE", help=_TOPIC_POLICY_HELP
)
@click.option(
    "--unset",
    "unset",
    multiple=True,
    metavar="NAME",
    help="Drop the topic's own value of policy NAME: its stream's applies again (repeatable).",
)
@click.pass_context
def topic_edit(
    ctx: click.Context, full_name: str, policy_pairs: tuple[str, ...], unset: tuple[str, ...]
) -> None:
    """Set or drop the topic FULL_NAME's own policies (overrides of its stream's).

    \b
    Example:
      plet topic edit /apps/sensors:car-17 --policy ttl=3600 --unset compact
    """
    changes: dict[str, Any] = policy_assignments(policy_pairs)
    for name in unset:
        if policy_name(name) in changes:
            raise click.BadParameter(f"{name} is both set and unset", param_hint="--unset")
        changes[policy_name(name)] = None
    if not changes:
        raise click.UsageError("nothing to change: give --policy NAME=VALUE or --unset NAME")
    cluster = open_cluster(ctx)
    before = cluster.topic(full_name).overrides
    info = cluster.edit_topic(full_name, **changes)
    for name in unset:
        if policy_name(name) not in before:  # said, not silently passed over
            echo_err(f"{policy_name(name)} was not the topic's own: nothing to unset")
    own = _own_text(info.overrides)
    click.echo(f"edited topic {info.name}: {own}")


def _own_text(overrides: dict[str, Any]) -> str:
    if not overrides:
        return "no policies of its own (all its stream's)"
    return ", ".join(f"{k}={_value_text(v)}" for k, v in sorted(overrides.items()))


def _value_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@topic.command("delete")
@cluster_option
@click.argument("full_name")
@click.pass_context
def topic_delete(ctx: click.Context, full_name: str) -> None:
    """Delete the topic FULL_NAME and its messages."""
    cluster = open_cluster(ctx)
    cluster.delete_topic(full_name)
    click.echo(f"deleted topic {full_name}")
    note_pending_purges(cluster.pending_purges())


@topic.command("list")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@paging_options
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
        echo_json([topic_json(info) for info in infos])
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
            echo_err(
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
        echo_json(topic_json(info))
        return
    echo_table(
        ("TOPIC", info.name),
        (
            ("stream", info.stream),
            ("created", format_ms(info.created_ms)),
            ("partitions", info.partition_count),
            ("messages", f"{info.messages:,}"),
            ("size", format_bytes(info.bytes)),
            ("own policies", _own_text(info.overrides)),
        ),
    )
    for part in info.partitions:
        click.echo()
        click.echo(
            click.style(f"partition {part.partition}", bold=True)
            + f"  offsets {part.log_start_offset:,}..{part.log_end_offset:,}"
            + f"  ({plural(part.messages, 'message')}, {format_bytes(part.bytes)})"
            + f"  {format_ms(part.first_timestamp)} .. {format_ms(part.last_timestamp)}"
        )
        for volume, damage in sorted(
            {(p.volume, p.damage) for p in part.partitionlets if p.damage}
        ):
            click.echo(
                click.style(f"  volume {volume} is damaged", fg="red")
                + f" ({damage}): its partitionlets' ranges are the catalog's and cannot be read"
            )
        echo_table(
            ("PARTITIONLET", "VOLUME", "BASE_OFFSET", "LAST_OFFSET", "ACTIVE", "MESSAGES", "SIZE"),
            (
                (
                    let.id,
                    f"{let.volume} (damaged)" if let.damage else let.volume,
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


@topic.command("import")
@cluster_option
@click.argument("full_name")
@click.argument("file", type=click.File("rb"))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(imports.FORMATS),
    help="jsonl or csv (default: from the file's name, .jsonl/.ndjson/.json or .csv).",
)
@click.option("--dry-run", is_flag=True, help="Check the file and say what would be written.")
@click.option(
    "--by-key",
    is_flag=True,
    help="Choose partitions by key (or round-robin) instead of the file's partitions.",
)
@click.option(
    "--exact-cells",
    is_flag=True,
    help="CSV cells are exact (downloaded with formulas kept), not neutralized.",
)
@click.pass_context
def topic_import(
    ctx: click.Context,
    full_name: str,
    file: Any,
    fmt: str | None,
    dry_run: bool,
    by_key: bool,
    exact_cells: bool,
) -> None:
    """Write the messages of FILE (`-`: standard input) into the topic FULL_NAME: JSON
    lines as `plet consume --format json` and the web console's downloads write them, or
    the downloads' CSV (only `value` is required). Every bad line is listed and nothing is
    written; a message keeps its key, value, headers, timestamp and partition.

    \b
    Example:
      plet topic import /apps/sensors:copy car-17.jsonl --dry-run --cluster data/dc1
    """
    fmt = fmt or imports.format_of(file.name or "")
    if fmt is None:
        fail(f"{file.name} is not named .jsonl or .csv: give --format")
    parsed = imports.parse(file, fmt, formulas=exact_cells)
    cluster = open_cluster(ctx)
    plan = imports.plan(cluster, full_name, parsed, keep_partitions=not by_key)
    if not plan.ok:
        for error in plan.errors:
            echo_err(str(error))
        if plan.error_count > len(plan.errors):
            echo_err(f"... and {plan.error_count - len(plan.errors):,} more")
        fail(plan.describe())
    for note in plan.notes:
        echo_err(f"note: {note}")
    if dry_run:
        click.echo(f"dry run: {plan.describe()} Nothing was written.")
        return
    total = len(plan.records)

    def progress(written: int) -> None:
        if written < total:
            echo_err(f"{written:,} of {total:,} written")

    written = imports.write(cluster, plan, progress=progress)
    click.echo(f"imported {plural(written, 'message')} into {plan.topic.name}")
