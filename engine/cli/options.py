"""The options that many commands share: `--cluster` (and opening that cluster), times and
paging.

The cluster directory comes from `--cluster PATH`, given to the group (`plet --cluster D stream
list`) or to the command (`plet stream list --cluster D`), else from `PLET_CLUSTER`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from engine import Cluster, errors, times
from engine.cli.failures import fail

CLUSTER_ENV = "PLET_CLUSTER"

# ctx.meta is shared by every context of one invocation, so a --cluster given to the group
# is seen by the command, and a --cluster given to the command wins over the group's.
_META_CLI = "plet.cluster.cli"
_META_ENV = "plet.cluster.env"


# --- the cluster -------------------------------------------------------------------------


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


def cluster_path(ctx: click.Context, *, use_env: bool = True) -> str | None:
    """The `--cluster` of this invocation, else (with `use_env`) `PLET_CLUSTER`, else None."""
    path = ctx.meta.get(_META_CLI)
    if path is None and use_env:
        path = ctx.meta.get(_META_ENV)
    return path


def require_cluster_path(ctx: click.Context) -> str:
    """`cluster_path`, or a usage error when none was given."""
    path = cluster_path(ctx)
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
    path = require_cluster_path(ctx)
    if not Path(path).is_dir():
        fail(f"no cluster at {path!r}: create one with 'plet init --cluster {shlex.quote(path)}'")
    return ctx.with_resource(Cluster.open(path))


def served_cluster_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """`--also PATH` (repeatable), `--clusters FILE` and `--linked/--no-linked`: the other
    clusters a console shows besides `--cluster` (engine.served_clusters), passed to the
    command as `also`, `clusters_file` and `linked`."""
    func = click.option(
        "--linked/--no-linked",
        default=True,
        show_default=True,
        help="Also show the clusters this one replicates to (directories this machine can "
        "open; another console's https address through that console, with the link's "
        "token).",
    )(func)
    func = click.option(
        "--clusters",
        "clusters_file",
        metavar="FILE",
        type=click.Path(exists=True, dir_okay=False),
        help="A TOML file of [[cluster]] tables (name, and path, or url with token, ca_file, "
        "insecure) to show too.",
    )(func)
    func = click.option(
        "--also",
        metavar="PATH",
        multiple=True,
        type=click.Path(exists=True, file_okay=False),
        help="Another cluster directory to show (repeatable).",
    )(func)
    return func


# --- times and paging --------------------------------------------------------------------


def parse_time_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A time (engine.times: ISO 8601, UTC when it has no zone, or epoch ms) -> epoch ms."""
    if value is None:
        return None
    try:
        return times.parse_time(value)
    except errors.InvalidArgument as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def paging_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """`--prefix`, `--limit`, `--offset` and `--json` of the list commands."""
    func = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)
    func = click.option(
        "--offset", type=click.IntRange(min=0), default=0, help="Skip this many first."
    )(func)
    func = click.option("--limit", type=click.IntRange(min=0), help="Show at most N.")(func)
    func = click.option("--prefix", metavar="P", help="Only names that start with P.")(func)
    return func
