"""`plet group ...`: list and describe consumer groups, reset their offsets (with a
preview: `--dry-run`), delete them, and show and set who may join, commit, describe,
reset and delete them (`plet group perm ...`, `plet group limit`)."""

from __future__ import annotations

import click

from engine import TopicPartition, errors
from engine.cli.options import cluster_option, open_cluster, parse_time_option
from engine.cli.output import echo_json, echo_table
from engine.groups import (
    ResetTarget,
    form_target,
    group_json,
    parse_target,
    permissions_json,
)
from engine.groups.perms import PERMS
from engine.times import format_ms


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
        echo_json([group_json(info) for info in infos])
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
        echo_json(group_json(info))
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
@click.argument("topic_name", metavar="[TOPIC]", required=False)
@click.option("--topic", "topic_option", metavar="TOPIC", help="The topic (full name).")
@click.option(
    "--to",
    "to_text",
    metavar="TARGET",
    help="earliest, latest, an offset N, shift:-N / shift:+N (from the committed offset), "
    "or a time (ISO 8601, UTC when it has no zone).",
)
# two flags, not two values of one option: given together they are refused, not the last kept
@click.option("--to-earliest", is_flag=True, help="The oldest message.")
@click.option("--to-latest", is_flag=True, help="After the newest message.")
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
@click.option(
    "--shift-by",
    type=int,
    metavar="N",
    help="Move the committed offset by N (negative: back), clamped to the log, as Kafka's.",
)
@click.option(
    "--partition",
    "partitions",
    type=click.IntRange(min=0),
    multiple=True,
    metavar="N",
    help="Only this partition (repeat for more); every partition by default.",
)
@click.option("--dry-run", is_flag=True, help="Show what would change, change nothing.")
@click.pass_context
def group_reset(
    ctx: click.Context,
    group_id: str,
    topic_name: str | None,
    topic_option: str | None,
    to_text: str | None,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_time: int | None,
    shift_by: int | None,
    partitions: tuple[int, ...],
    dry_run: bool,
) -> None:
    """Set GROUP's committed offsets in the partitions of TOPIC, showing per partition
    the committed offset before and after and the lag before and after.

    The group must have no live members (stop its consumers first), as in Kafka.

    \b
    Examples:
      plet group reset dash --topic /apps/clicks:web --to earliest --dry-run
      plet group reset dash --topic /apps/clicks:web --to shift:-100 --partition 0
      plet group reset dash /apps/clicks:web --to-time 2024-05-01T12:00:00Z
    """
    if (topic_name is None) == (topic_option is None):
        raise click.UsageError("give the topic once: TOPIC or --topic TOPIC", ctx=ctx)
    topic = topic_name or topic_option
    assert topic is not None  # exactly one of the two was given, checked above
    earliest = "earliest" if to_earliest else None
    latest = "latest" if to_latest else None
    chosen = [x for x in (to_text, earliest, latest, to_offset, to_time, shift_by) if x is not None]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to, --to-earliest, --to-latest, --to-offset, --to-time "
            "and --shift-by",
            ctx=ctx,
        )
    target: str | int | ResetTarget
    if to_text is not None:
        target = _parse_to(ctx, to_text)
    elif to_time is not None:
        target = ResetTarget("time", to_time)
    elif shift_by is not None:
        target = form_target("shift", str(shift_by))
    else:
        target = chosen[0]
    cluster = open_cluster(ctx)
    plans = cluster.plan_offset_reset(group_id, topic, target, partitions=list(partitions) or None)
    if not dry_run:
        cluster.apply_offset_reset(group_id, plans)  # exactly what the table shows
    echo_table(
        (
            "TOPIC",
            "PARTITION",
            "CURRENT",
            "NEW OFFSET",
            "LOG START",
            "LOG END",
            "LAG BEFORE",
            "LAG AFTER",
        ),
        (
            (
                p.topic,
                p.partition,
                "-" if p.current is None else f"{p.current:,}",
                f"{p.new:,}",
                f"{p.log_start_offset:,}",
                f"{p.log_end_offset:,}",
                f"{p.lag_before:,}",
                f"{p.lag_after:,}",
            )
            for p in plans
        ),
    )
    if dry_run:
        click.echo("dry run: nothing changed")


def _parse_to(ctx: click.Context, text: str) -> ResetTarget:
    """--to, by the engine's grammar; a bad shift or offset is the engine's InvalidOffset."""
    try:
        return parse_target(text)
    except errors.InvalidArgument as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param_hint="--to") from None


@group.command("delete")
@cluster_option
@click.argument("group_id", metavar="GROUP")
@click.pass_context
def group_delete(ctx: click.Context, group_id: str) -> None:
    """Delete GROUP: its committed offsets and state. Refused while it has live members;
    needs the group's delete_perm (by default its creator's).

    \b
    Example:
      plet group delete dash
    """
    open_cluster(ctx).delete_group(group_id)
    click.echo(f"deleted group {group_id}")


# --- permissions (engine.groups.perms) ----------------------------------------------------


@group.group("perm")
def group_perm() -> None:
    """Show and set who may join, commit, describe, reset and delete groups (ACEs)."""


@group_perm.command("show")
@cluster_option
@click.argument("group_id", metavar="GROUP")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def group_perm_show(ctx: click.Context, group_id: str, as_json: bool) -> None:
    """Show GROUP's creator and the ACE of each permission, where it comes from, and
    whether you pass it.

    \b
    Example:
      plet group perm show dash
    """
    perms = open_cluster(ctx).group_permissions(group_id)
    if as_json:
        echo_json({"group_id": group_id, **permissions_json(perms)})
        return
    click.echo(f"group {group_id}: creator {perms.creator or '- (not claimed yet)'}")
    echo_table(
        ("PERMISSION", "ACE", "FROM", "YOU"),
        (
            (p, perms.aces[p], perms.sources[p], "yes" if p in perms.allowed else "no")
            for p in PERMS
        ),
    )


@group_perm.command("set")
@cluster_option
@click.argument("pattern", metavar="GROUP")
@click.option("--prefix", is_flag=True, help="GROUP is a prefix: every group id starting with it.")
@click.option("--join", "join_perm", metavar="ACE", help="Who may join (and fetch offsets).")
@click.option("--commit", "commit_perm", metavar="ACE", help="Who may commit offsets.")
@click.option("--describe", "describe_perm", metavar="ACE", help="Who may list and describe.")
@click.option("--reset", "reset_perm", metavar="ACE", help="Who may reset offsets.")
@click.option("--delete", "delete_perm", metavar="ACE", help="Who may delete the group.")
@click.pass_context
def group_perm_set(
    ctx: click.Context,
    pattern: str,
    prefix: bool,
    join_perm: str | None,
    commit_perm: str | None,
    describe_perm: str | None,
    reset_perm: str | None,
    delete_perm: str | None,
) -> None:
    """Set ACEs of GROUP (its creator's or an administrator's), or of every group id
    starting with GROUP (--prefix, an administrator's). An ACE replaces the default
    `u:<creator>`; "" sets the default again.

    \b
    Examples:
      plet group perm set dash --describe 'u:<creator> | g:ops'
      plet group perm set --prefix etl- --join 'g:etl' --commit 'g:etl'
    """
    aces = {
        "join_perm": join_perm,
        "commit_perm": commit_perm,
        "describe_perm": describe_perm,
        "reset_perm": reset_perm,
        "delete_perm": delete_perm,
    }
    given = {perm: ace for perm, ace in aces.items() if ace is not None}
    if not given:
        raise click.UsageError(
            "give at least one of --join, --commit, --describe, --reset, --delete"
        )
    open_cluster(ctx).set_group_permissions(pattern, prefix=prefix, **given)
    what = f"group ids starting with {pattern}" if prefix else f"group {pattern}"
    click.echo(f"set {', '.join(sorted(given))} of {what}")


@group_perm.command("list")
@cluster_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def group_perm_list(ctx: click.Context, as_json: bool) -> None:
    """List the permission rules set, by group id or prefix."""
    rules = open_cluster(ctx).group_permission_rules()
    if as_json:
        echo_json([{"pattern": r.pattern, "prefix": r.prefix, "aces": dict(r.aces)} for r in rules])
        return
    echo_table(
        ("GROUP", "PREFIX", "PERMISSION", "ACE"),
        (
            (r.pattern, "yes" if r.prefix else "no", perm, ace)
            for r in rules
            for perm, ace in sorted(r.aces.items())
        ),
    )


@group.command("limit")
@cluster_option
@click.argument("limit", type=click.IntRange(min=0))
@click.pass_context
def group_limit(ctx: click.Context, limit: int) -> None:
    """Set how many groups one user may create (an administrator's; default 1,000).

    \b
    Example:
      plet group limit 200
    """
    open_cluster(ctx).set_group_limit(limit)
    click.echo(f"a user may create {limit:,} groups")
