"""`plet tui`: the terminal console. Registered as the entry point `tui` of
`partitionlet.commands` (pyproject.toml) and loaded by `plet` only when used, so that the
engine never imports Textual."""

from __future__ import annotations

from pathlib import Path

import click

from engine.cli import cluster_option
from engine.cli.options import served_cluster_options


@click.command("tui")
@cluster_option
@served_cluster_options
@click.option(
    "--topic",
    metavar="FULL_NAME",
    help="Open on this topic's messages (/stream/path:topic).",
)
@click.option(
    "--read-only",
    is_flag=True,
    help="Offer no change: the change keys and buttons are disabled, each saying why. A "
    "guard against slips; a user who must not change anything needs a read-only user "
    "(plet user edit NAME --read-only), which the engine enforces.",
)
@click.pass_context
def tui_command(
    ctx: click.Context,
    also: tuple[str, ...],
    clusters_file: str | None,
    linked: bool,
    topic: str | None,
    read_only: bool,
) -> None:
    """Browse and administer the cluster in the terminal: streams and topics, messages
    (seek, filter, follow, produce), partitions, policies, groups, replication, heat and
    replay jobs. Press ? in the console for its keys.

    The clusters named with --also or in a --clusters file, and those this one replicates
    to, are a key away: c (or "Switch cluster" in the palette, ctrl+p).

    \b
    Example:
      plet tui --cluster data/demo/dc1 --topic /apps/sensors:car-17
    """
    from engine import names
    from engine.cli import fail, require_cluster_path
    from engine.served_clusters import served_clusters

    path = require_cluster_path(ctx)
    if not Path(path).is_dir():
        fail(f"no cluster at {path!r}: create one with 'plet init --cluster {path}'")
    if topic is not None:
        names.split_full_name(topic)  # InvalidName: an error message, not a broken screen
    clusters = served_clusters(path, also, clusters_file, linked=linked)
    from console.app import ConsoleApp

    ConsoleApp(path, topic=topic, clusters=clusters, read_only=read_only).run()
