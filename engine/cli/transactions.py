"""`plet txn list|describe|abort`: transactions (Kafka's kafka-transactions.sh)."""

from __future__ import annotations

from dataclasses import asdict

import click

from engine.cli.options import cluster_option, open_cluster
from engine.cli.output import echo_json, echo_table
from engine.client.transactions import TransactionInfo, Transactions
from engine.times import format_duration


@click.group()
def txn() -> None:
    """List, describe and abort transactions (transactional producers)."""


def _age(info: TransactionInfo, now_ms: int) -> str:
    if info.started_ms is None:
        return "-"
    return format_duration(max(0, now_ms - info.started_ms) / 1000)


def _as_json(info: TransactionInfo) -> dict[str, object]:
    return {**asdict(info), "kafka_state": info.kafka_state}


@txn.command("list")
@cluster_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def txn_list(ctx: click.Context, as_json: bool) -> None:
    """List the transactional ids you may see, with their state and open partitions."""
    cluster = open_cluster(ctx)
    infos = Transactions(cluster).list()
    if as_json:
        echo_json([_as_json(i) for i in infos])
        return
    now = cluster.clock.now_ms()
    echo_table(
        ("TRANSACTIONAL ID", "STATE", "PRODUCER", "EPOCH", "OPEN FOR", "PARTITIONS", "USER"),
        (
            (
                i.transactional_id,
                i.kafka_state,
                i.producer_id,
                i.epoch,
                _age(i, now),
                len(i.partitions),
                i.principal,
            )
            for i in infos
        ),
    )


@txn.command("describe")
@cluster_option
@click.argument("transactional_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def txn_describe(ctx: click.Context, transactional_id: str, as_json: bool) -> None:
    """Show one transactional id: its producer, state, timeout and open partitions."""
    cluster = open_cluster(ctx)
    info = Transactions(cluster).describe(transactional_id)
    if as_json:
        echo_json(_as_json(info))
        return
    click.echo(f"transactional id  {info.transactional_id}  (user {info.principal})")
    click.echo(f"producer          {info.producer_id}, epoch {info.epoch}")
    click.echo(f"state             {info.kafka_state}")
    click.echo(f"timeout           {format_duration(info.timeout_ms / 1000)}")
    click.echo(f"open for          {_age(info, cluster.clock.now_ms())}")
    for topic, partition in info.partitions:
        click.echo(f"  {topic} partition {partition}")


@txn.command("abort")
@cluster_option
@click.argument("transactional_id")
@click.pass_context
def txn_abort(ctx: click.Context, transactional_id: str) -> None:
    """Abort the open transaction of TRANSACTIONAL_ID (a hanging one): read_committed
    readers move on, and its producer is fenced (it must call init_transactions again)."""
    info = Transactions(open_cluster(ctx)).abort(transactional_id)
    click.echo(f"{info.transactional_id}: {info.kafka_state} (epoch {info.epoch})")
