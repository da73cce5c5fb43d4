"""`plet replay ...`: submit, list, watch and cancel replay jobs (the entry point `replay` of
`partitionlet.commands` in pyproject.toml, loaded by `plet` only when used).

Submitting starts the job's own process and returns at once (print the id), unless `--wait`
follows it to the end. No pyspark is imported here.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

from engine.cli import cluster_option, require_cluster_path
from engine.times import format_ms
from spark_tasks import jobs


def _progress(job: jobs.Job, *, step: bool = True) -> str:
    text = f"{job.tasks_done}/{job.tasks_total} tasks" if job.tasks_total else "-"
    if job.done_fraction is not None and job.progress is not None:
        text = f"{job.progress:.0%} ({text})"
        if step and job.step and not job.done:  # the list leaves it to `status`
            text += f", {job.step}"
    return f"{text}, {job.reading}" if job.reading else text


def _show(job: jobs.Job, as_json: bool, log: bool = True) -> None:
    if as_json:
        click.echo(json.dumps(job.to_dict(), default=str, indent=2))
        return
    click.echo(f"job {job.id}: {job.kind} {job.state}")
    click.echo(f"  params    {jobs.params_text(job.params)}")
    click.echo(f"  progress  {_progress(job)}")
    click.echo(f"  submitted {format_ms(job.submitted_ms, seconds=True)}")
    click.echo(f"  started   {format_ms(job.started_ms, seconds=True)}")
    click.echo(f"  ended     {format_ms(job.ended_ms, seconds=True)}")
    if job.result is not None:
        click.echo(f"  result    {json.dumps(job.result, default=str)[:2000]}")
    if job.error:
        click.echo(f"  error     {job.error}")
    if log and job.log_tail:
        click.echo("  log tail:")
        for line in job.log_tail.splitlines()[-20:]:
            click.echo(f"    {line}")


def _submit(ctx: click.Context, kind: str, wait: bool, as_json: bool, **params: Any) -> None:
    path = require_cluster_path(ctx)
    job_id = jobs.submit(path, kind, **params)
    if not wait:
        click.echo(json.dumps({"id": job_id}) if as_json else f"job {job_id} submitted")
        return
    last = None
    while True:
        job = jobs.status(job_id, cluster=path)
        line = f"job {job_id}: {job.state} {_progress(job)}"
        if line != last and not as_json:
            click.echo(line, err=True)
            last = line
        if job.done:
            break
        time.sleep(1)
    _show(job, as_json, log=job.state == jobs.FAILED)
    if job.state != jobs.SUCCEEDED:
        ctx.exit(1)


def _source_options(func):
    for decorator in reversed(
        [
            click.option("--source", help="Full name of the topic to read (/stream:topic)."),
            click.option("--stream", help="Read every topic of this stream instead."),
            click.option("--topic-pattern", help="With --stream: a regex of topic names."),
            click.option("--from-offset", type=int, help="First offset of every partition."),
            click.option("--to-offset", type=int, help="End offset (exclusive)."),
            click.option("--from-time", help="ISO time (UTC if no zone) or ms: first message."),
            click.option(
                "--to-time", help="ISO time (UTC if no zone) or ms: last message (inclusive)."
            ),
            click.option("--principal", help="Read and write as this user."),
            click.option(
                "--isolation-level",
                type=click.Choice(["read_committed", "read_uncommitted"]),
                help="read_committed (the default): committed transactions only; "
                "read_uncommitted: the messages of aborted transactions too.",
            ),
            click.option(
                "--master",
                default=jobs.DEFAULT_MASTER,
                show_default=True,
                help="Spark master URL (spark://host:7077 for a standalone cluster).",
            ),
            click.option("--conf", multiple=True, metavar="KEY=VALUE", help="Extra Spark setting."),
            click.option("--wait", is_flag=True, help="Follow the job until it ends."),
            click.option("--json", "as_json", is_flag=True, help="Print JSON."),
            cluster_option,
        ]
    ):
        func = decorator(func)
    return func


def _conf(pairs: tuple[str, ...]) -> dict[str, str] | None:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--conf")
        out[key] = value
    return out or None


@click.group("replay")
@cluster_option
def replay_group() -> None:
    """Spark replay jobs over a stream's history (each runs in its own process)."""


@replay_group.command("copy")
@_source_options
@click.option("--target", required=True, help="Full name of the topic to write.")
@click.pass_context
def copy_command(ctx, wait, as_json, conf, **params):
    """Re-publish a topic's offset or time range into another topic."""
    _submit(ctx, "copy", wait, as_json, conf=_conf(conf), **params)


@replay_group.command("materialize")
@_source_options
@click.option("--target", help="Topic to write the latest value per key to.")
@click.option(
    "--output",
    help="Parquet directory, or sqlite:PATH (a SQLite file, with --table), to write the "
    "latest value per key to.",
)
@click.option("--table", help="With --output sqlite:PATH: the table (upserted by key).")
@click.pass_context
def materialize_command(ctx, wait, as_json, conf, **params):
    """The latest value per key, to a topic, a Parquet file or a SQLite table."""
    _submit(ctx, "materialize", wait, as_json, conf=_conf(conf), **params)


@replay_group.command("window-counts")
@_source_options
@click.option("--window", default="1 minute", show_default=True, help="Window length.")
@click.option("--output", help="Parquet directory for the counts (else in the result).")
@click.pass_context
def window_counts_command(ctx, wait, as_json, conf, **params):
    """Messages and bytes per time window and topic."""
    _submit(ctx, "window-counts", wait, as_json, conf=_conf(conf), **params)


@replay_group.command("custom")
@_source_options
@click.option("--file", "file", required=True, help="Python file with the function.")
@click.option("--function", default="transform", show_default=True)
@click.option("--output", help="Parquet directory for the result.")
@click.option("--target", help="Topic for the result (needs a value column).")
@click.pass_context
def custom_command(ctx, wait, as_json, conf, **params):
    """Apply a user's function (DataFrame -> DataFrame) to the messages."""
    _submit(ctx, "custom", wait, as_json, conf=_conf(conf), **params)


@replay_group.command("list")
@cluster_option
@click.option("--limit", default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_command(ctx, limit, as_json):
    """The cluster's jobs, newest first."""
    found = jobs.list(cluster=require_cluster_path(ctx), limit=limit)
    if as_json:
        click.echo(json.dumps([j.to_dict() for j in found], default=str, indent=2))
        return
    if not found:
        click.echo("no jobs")
        return
    click.echo(f"{'ID':>5}  {'KIND':<14} {'STATE':<10} {'PROGRESS':<16} SUBMITTED")
    for j in found:
        click.echo(
            f"{j.id:>5}  {j.kind:<14} {j.state:<10} {_progress(j, step=False):<16} {format_ms(j.submitted_ms, seconds=True)}"
        )


@replay_group.command("status")
@cluster_option
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def status_command(ctx, job_id, as_json):
    """A job's state, progress, result and log tail."""
    _show(jobs.status(job_id, cluster=require_cluster_path(ctx)), as_json)


@replay_group.command("cancel")
@cluster_option
@click.argument("job_id", type=int)
@click.pass_context
def cancel_command(ctx, job_id):
    """Cancel a queued or running job."""
    job = jobs.cancel(job_id, cluster=require_cluster_path(ctx))
    if job.done:
        click.echo(f"job {job_id}: {job.state}")
    else:
        click.echo(f"job {job_id}: cancel requested ({job.state})")
