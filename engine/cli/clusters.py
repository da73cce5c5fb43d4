"""`plet init`: create a cluster directory, or open an existing one and describe it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from engine import Cluster
from engine.cli.options import cluster_option, require_cluster_path
from engine.cli.output import plural


@click.command()
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
    path = require_cluster_path(ctx)
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
            f"with {plural(count, 'volume')}"
        )
