"""`plet group ...`: list and describe consumer groups, and reset their offsets."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from engine import TopicPartition, times
from engine.cli.options import cluster_option, open_cluster, parse_time_option
from engine.cli.output import echo_json, echo_table, format_ms


@click.group()
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
        echo_json([_group_json(info) for info in infos])
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
        echo_json(_group_json(info))
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
    callback=parse_time_option,
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
