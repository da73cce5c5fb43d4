"""`plet archive`: move old sealed partitionlets to the archive tier now (docs/ARCHIVE.md);
long-lived processes (plet web, plet replicate) do it in the background."""

from __future__ import annotations

from dataclasses import asdict

import click

from engine.cli.options import cluster_option, open_cluster
from engine.cli.output import echo_json, echo_table, plural
from engine.units import format_bytes


@click.command()
@cluster_option
@click.option("--stream", metavar="PATH", help="Archive only this stream's partitionlets.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def archive(ctx: click.Context, stream: str | None, as_json: bool) -> None:
    """Archive sealed partitionlets older than their stream's archive_after.

    Each becomes one Parquet file (the stream's archive_uri, else the cluster's archive/
    folder) that every reader reads as before, offsets unchanged.

    \b
    Example:
      plet archive --cluster data/dc1 --stream /apps/clicks
    """
    report = open_cluster(ctx).archive(stream)
    if as_json:
        data = asdict(report)
        data.update(messages=report.messages, bytes=report.bytes)
        echo_json(data)
        return
    click.echo(
        f"archived {plural(len(report.archived), 'partitionlet')}, "
        f"{plural(report.messages, 'message')}: {format_bytes(report.volume_bytes)} in "
        f"volumes became {format_bytes(report.bytes)} of Parquet"
    )
    if report.purged:
        click.echo(f"removed the volume copies of {plural(report.purged, 'partitionlet')}")
    if report.archived:
        click.echo()
        echo_table(
            ("PARTITIONLET", "TOPIC", "PARTITION", "OFFSETS", "MESSAGES", "FILE"),
            (
                (a.id, a.topic, a.partition, f"{a.base_offset}-{a.end_offset - 1}",
                 f"{a.messages:,}", a.file)
                for a in report.archived
            ),
        )  # fmt: skip
    for pl_id, why in sorted(report.failed.items()):
        click.echo(f"partitionlet {pl_id} not archived: {why}", err=True)
    for path, why in report.skipped_streams.items():
        click.echo(f"stream {path} skipped: {why}", err=True)
