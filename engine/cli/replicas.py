"""`plet replica ...` (links to other clusters and the tokens for them) and `plet replicate`
(the process that copies along the links)."""

from __future__ import annotations

from dataclasses import asdict

import click

from engine.cli.options import cluster_option, open_cluster
from engine.cli.output import echo_json, echo_table, plural
from engine.cli.signals import sigterm_as_interrupt
from engine.times import format_ms


@click.group()
def replica() -> None:
    """Replicate streams to other clusters: add, list, pause, resume and remove links;
    issue, list and revoke the tokens other clusters replicate into this one with."""


@replica.command("add")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.argument("target", metavar="TARGET")
@click.option("--target-stream", metavar="PATH", help="Stream in the target (default: STREAM).")
@click.option("--paused", is_flag=True, help="Register the link without copying yet.")
@click.pass_context
def replica_add(
    ctx: click.Context, stream_path: str, target: str, target_stream: str | None, paused: bool
) -> None:
    """Replicate STREAM to TARGET: a cluster directory, or the http(s)://TOKEN@HOST:PORT
    address of another cluster's `plet web` (TOKEN from `plet replica token` there).

    The target stream is created with the same policies when missing, what exists is copied
    now (unless --paused), and `plet replicate` follows from then on.
    """
    info = open_cluster(ctx).add_replica(stream_path, target, target_stream, paused=paused)
    click.echo(
        f"replicating {stream_path} to {info.target_stream} at {info.target}: {info.state}"
        + (f", lag {info.lag_messages:,} messages" if info.lag_messages else "")
    )


@replica.command("token")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.pass_context
def replica_token(ctx: click.Context, stream_path: str) -> None:
    """Issue a token with which another cluster may replicate into STREAM of this one over
    HTTP (through `plet web`). Printed once; only its hash is kept. On the source:
    `plet replica add --cluster SRC STREAM http://TOKEN@HOST:PORT`."""
    click.echo(open_cluster(ctx).create_replication_token(stream_path))


@replica.command("tokens")
@cluster_option
@click.option("--stream", "stream_path", metavar="STREAM", help="Only the tokens of STREAM.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def replica_tokens(ctx: click.Context, stream_path: str | None, as_json: bool) -> None:
    """List the replication tokens issued by this cluster (their ids, never the tokens)."""
    infos = open_cluster(ctx).replication_tokens(stream_path)
    if as_json:
        echo_json([asdict(t) for t in infos])
        return
    echo_table(
        ("ID", "STREAM", "CREATED", "BY", "LAST USED"),
        (
            (
                t.id,
                t.stream,
                format_ms(t.created_ms),
                t.created_by or "-",
                format_ms(t.last_used_ms),
            )
            for t in infos
        ),
    )


@replica.command("revoke")
@cluster_option
@click.argument("token_id")
@click.pass_context
def replica_revoke(ctx: click.Context, token_id: str) -> None:
    """Revoke the replication token TOKEN_ID (as `plet replica tokens` lists it): the links
    that use it break (401) from their next request."""
    open_cluster(ctx).revoke_replication_token(token_id)
    click.echo(f"revoked replication token {token_id}")


@replica.command("list")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def replica_list(ctx: click.Context, stream_path: str, as_json: bool) -> None:
    """List the links out of STREAM (with state and lag) and the links into it."""
    cluster = open_cluster(ctx)
    outs = cluster.replicas(stream_path)
    ins = cluster.upstreams(stream_path)
    if as_json:
        echo_json({"replicas": [asdict(r) for r in outs], "upstreams": [asdict(u) for u in ins]})
        return
    echo_table(
        ("TARGET", "TARGET STREAM", "STATE", "LAG MSGS", "LAG S", "MSG/S", "ERROR"),
        (
            (
                r.target,
                r.target_stream,
                r.state,
                f"{r.lag_messages:,}",
                f"{r.lag_seconds:.1f}",
                f"{r.throughput_messages:,.0f}",
                r.error
                or (
                    "; ".join(
                        f"{c['topic']} partition {c['partition']} offset {c['offset']}"
                        for c in r.conflict
                    )
                    if r.conflict
                    else "-"
                ),
            )
            for r in outs
        ),
    )
    if ins:
        click.echo()
        echo_table(
            ("UPSTREAM", "SOURCE STREAM", "SOURCE CLUSTER"),
            ((u.source, u.source_stream, u.source_id) for u in ins),
        )


@replica.command("pause")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.argument("target", metavar="TARGET")
@click.pass_context
def replica_pause(ctx: click.Context, stream_path: str, target: str) -> None:
    """Stop copying STREAM to TARGET until it is resumed."""
    open_cluster(ctx).pause_replica(stream_path, target)
    click.echo(f"paused the replica of {stream_path} at {target}")


@replica.command("resume")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.argument("target", metavar="TARGET")
@click.pass_context
def replica_resume(ctx: click.Context, stream_path: str, target: str) -> None:
    """Resume a paused link (also re-checks a link in conflict once it is resolved)."""
    open_cluster(ctx).resume_replica(stream_path, target)
    click.echo(f"resumed the replica of {stream_path} at {target}")


@replica.command("remove")
@cluster_option
@click.argument("stream_path", metavar="STREAM")
@click.argument("target", metavar="TARGET")
@click.pass_context
def replica_remove(ctx: click.Context, stream_path: str, target: str) -> None:
    """Remove the link; the replica keeps what it received."""
    open_cluster(ctx).remove_replica(stream_path, target)
    click.echo(f"removed the replica of {stream_path} at {target}")


@click.command()
@cluster_option
@click.option("--once", is_flag=True, help="Move what is pending, then exit.")
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=0.01),
    default=0.5,
    show_default=True,
    help="Seconds between passes when idle.",
)
@click.option(
    "--max-batches",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Batches copied per transaction.",
)
@click.pass_context
def replicate(ctx: click.Context, once: bool, interval_s: float, max_batches: int) -> None:
    """Copy the streams of this cluster to their replicas, and keep following.

    Runs retention and compaction in the background too, unless --once.
    """
    from engine.ops.maintenance import Maintenance
    from engine.replication import Replicator

    cluster = open_cluster(ctx)
    replicator = Replicator(cluster, max_batches=max_batches)
    if once:
        with replicator:
            moved = replicator.run_once()
        click.echo(f"replicated {plural(moved, 'message')}")
        return
    maintenance = Maintenance(cluster).start()
    try:
        with sigterm_as_interrupt():
            replicator.run_forever(interval_s=interval_s)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: a clean stop
        pass
    finally:
        replicator.stop()
        maintenance.stop()
