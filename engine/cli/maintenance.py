"""Maintenance: `plet rebalance` (move partitionlets between volumes), `plet heat` (recent
load), `plet retention` and `plet compact` (what long-lived processes also run in the
background)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click

from engine.cli.options import cluster_option, open_cluster
from engine.cli.output import echo_json, echo_table, plural
from engine.ops.heat import MAX_WINDOW_S, MIN_WINDOW_S
from engine.times import format_duration
from engine.units import format_bytes


@click.command()
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
        echo_json(data)
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
            f"{verb} {plural(len(report.moves), 'partitionlet')} "
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
            f"left {plural(len(report.skipped), 'partitionlet')} alone: changed before its turn"
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


@click.command()
@cluster_option
@click.option(
    "--window",
    "window_s",
    type=click.IntRange(MIN_WINDOW_S, MAX_WINDOW_S),
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
        echo_json(
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

    click.echo(f"load over the last {format_duration(result.window_s)} (per second)")
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


@click.command()
@cluster_option
@click.pass_context
def retention(ctx: click.Context) -> None:
    """Drop the partitionlets whose messages have all expired (the streams' ttl) now.

    Long-lived processes (plet web, plet replicate) do this in the background.
    """
    report = open_cluster(ctx).enforce_retention()
    click.echo(
        f"dropped {plural(report.partitionlets_dropped, 'partitionlet')}, "
        f"{plural(report.messages_freed, 'message')}, "
        f"{format_bytes(report.bytes_freed)}"
    )


@click.command()
@cluster_option
@click.pass_context
def compact(ctx: click.Context) -> None:
    """Compact the streams with compact=true now: keep the latest message per key.

    Long-lived processes (plet web, plet replicate) do this in the background.
    """
    report = open_cluster(ctx).compact()
    click.echo(
        f"compacted {plural(report.partitions, 'partition')}: removed "
        f"{plural(report.messages_removed, 'message')} "
        f"({plural(report.tombstones_removed, 'tombstone')}), "
        f"freed {format_bytes(report.bytes_freed)}"
    )
