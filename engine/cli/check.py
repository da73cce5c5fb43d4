"""`plet check`: verify a cluster's files against each other (engine.ops.check)."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from engine.cli.failures import fail
from engine.cli.options import cluster_option, require_cluster_path
from engine.cli.output import echo_json, plural
from engine.ops import check as checking


@click.command()
@cluster_option
@click.option("--quick", is_flag=True, help="SQLite's quick_check; skip recounting batches.")
@click.option("--repair", is_flag=True, help="Repair what can be rebuilt, then check again.")
@click.option(
    "--accept-loss",
    is_flag=True,
    help="With --repair: give up for good the offsets a volume lost (no replica or backup "
    "holds them); the partition goes on after them.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def check(ctx: click.Context, quick: bool, repair: bool, accept_loss: bool, as_json: bool) -> None:
    """Verify the catalog and every volume: SQLite's integrity check, each partition's
    chain against its volume rows, row counts against batches, orphans, archive files,
    and committed group offsets against log ends.

    Names each problem with its topic and partition and what repairs it; exits 1 if any
    remain. --repair rebuilds indexes, recounts rows, corrects a sealed end its volume
    vouches for and removes orphans; the rest needs a replica or a backup, or, for offsets a
    volume lost, --accept-loss (they are given up for good and never handed out again).

    \b
    Example:
      plet check --cluster data/dc1
    """
    path = require_cluster_path(ctx)
    if not Path(path).is_dir():
        fail(f"no cluster at {path!r}: create one with 'plet init --cluster {shlex.quote(path)}'")
    if accept_loss and not repair:
        raise click.UsageError("--accept-loss is a repair: give it with --repair", ctx=ctx)
    report = checking.run_path(path, quick=quick, repair=repair, accept_loss=accept_loss)
    if as_json:
        echo_json(report.as_dict())
    else:
        _print(report)
    if not report.ok:
        ctx.exit(1)


def _print(report: checking.CheckReport) -> None:
    if report.repaired:
        click.echo(f"repaired {plural(len(report.repaired), 'problem')}:")
        for p in report.repaired:
            click.echo(f"  {p.where}: {p.message}")
        click.echo()
    counts = ", ".join(plural(n, what.rstrip("s")) for what, n in report.checked.items())
    kind = "quick check" if report.quick else "check"
    name = f"cluster {report.cluster!r}" if report.cluster else "cluster"
    click.echo(
        f"{kind} of {name} at {report.path}: {counts or 'nothing'} in {report.seconds:.2f} s"
    )
    if report.ok:
        click.echo("no problems found")
        return
    click.echo(f"{plural(len(report.problems), 'problem')}:")
    for p in report.problems:
        click.echo(f"  [{p.check}] {p.where}: {p.message}")
    click.echo()
    click.echo("to repair:")
    for repair in checking.suggestions(report):
        click.echo(f"  {repair}")
