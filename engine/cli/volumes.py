"""`plet volume list` and `plet partitionlet list`: where the messages are stored."""

from __future__ import annotations

from dataclasses import asdict

import click

from engine.cli.options import cluster_option, open_cluster
from engine.cli.output import echo_json, echo_table
from engine.units import format_bytes


@click.group()
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
        echo_json([asdict(info) for info in infos])
        return
    echo_table(
        ("VOLUME", "PATH", "FILE SIZE", "DATA", "PARTITIONLETS", "ACTIVE", "WRITTEN (5m)", "STATE"),
        (
            (
                info.id,
                info.path,
                format_bytes(info.bytes),
                "?" if info.damage else format_bytes(info.data_bytes),
                f"{info.partitionlets:,}",
                "?" if info.damage else f"{info.active_partitionlets:,}",
                "?" if info.damage else format_bytes(info.recent_write_bytes),
                "damaged" if info.damage else "ok",
            )
            for info in infos
        ),
    )
    for info in infos:
        if info.damage:
            click.echo(
                click.style(f"volume {info.id} is damaged", fg="red")
                + f": {info.damage}. Its partitions are not served; `plet check` says more."
            )


@click.group()
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
        echo_json([asdict(info) for info in infos])
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
            "TIER",
        ),
        (
            (
                info.id,
                info.topic,
                info.partition,
                f"{info.volume} (damaged)" if info.damage else info.volume,
                info.base_offset,
                info.last_offset,
                "yes" if info.active else "no",
                f"{info.messages:,}",
                format_bytes(info.bytes),
                info.tier,
            )
            for info in infos
        ),
    )
    archived = [info for info in infos if info.file]
    if archived:  # a file's URI is long: listed under the table, not in a column
        click.echo()
        for info in archived:
            click.echo(f"partitionlet {info.id} is archived in {info.file}")
