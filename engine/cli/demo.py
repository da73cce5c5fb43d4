"""`plet demo`: seed a demo cluster (the data set of engine/demo.py) and take a short tour."""

from __future__ import annotations

import shlex
from typing import Any

import click

from engine import Cluster, Consumer, TopicPartition
from engine.cli.options import cluster_option, cluster_path
from engine.cli.output import echo_table, plural
from engine.times import format_duration
from engine.units import format_bytes

# The cluster `make run` serves (web/demo.py makes dc1, dc2 and dc3 under data/demo), so
# that this tour and the consoles' examples work on the same data whichever ran first.
DEMO_CLUSTER = "data/demo/dc1"


@click.command()
@cluster_option
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Seed a demo cluster (default data/demo/dc1, which `make run` serves) and take a
    short tour of it.

    Re-running adds nothing that is already there. PLET_CLUSTER is ignored here so that the
    demo data never lands in a real cluster by accident; pass --cluster to choose the place.
    """
    from engine.demo import seed  # only this command needs the demo data set

    path = cluster_path(ctx, use_env=False) or DEMO_CLUSTER
    # by the default path, the name web/demo.py gives it
    name = "dc1" if path == DEMO_CLUSTER else "demo"
    cluster = ctx.with_resource(Cluster.open(path, name=name))
    summary = seed(cluster)
    _print_tour(cluster, path, summary)


def _print_tour(cluster: Cluster, path: str, summary: Any) -> None:
    def heading(text: str) -> None:
        click.echo()
        click.echo(click.style(text, fg="cyan", bold=True))

    click.echo(
        click.style("Partitionlet demo", bold=True)
        + f": cluster {cluster.name!r} at {path} ({plural(len(cluster.volumes()), 'volume')})"
    )
    if summary.messages_produced or summary.topics_created or summary.streams_created:
        click.echo(
            f"Seeded {plural(len(summary.streams_created), 'stream')}, "
            f"{plural(len(summary.topics_created), 'topic')} and "
            f"{plural(summary.messages_produced, 'message')}."
        )
    else:
        click.echo(f"Already seeded: nothing added. (Delete {path} to start over.)")

    heading("Streams")
    streams = [cluster.stream(p) for p in summary.streams]
    echo_table(
        ("PATH", "TOPICS", "MESSAGES", "SIZE", "TTL", "POLICIES"),
        (
            (
                info.path,
                info.topic_count,
                f"{info.messages:,}",
                format_bytes(info.bytes),
                format_duration(int(info.policies.get("ttl", 0)), zero="forever"),
                _policy_summary(info.policies),
            )
            for info in streams
        ),
        indent="  ",
    )

    heading("Topics (offsets per partition: start..end)")
    topics = [cluster.topic(name) for name in summary.topics]
    echo_table(
        ("TOPIC", "PARTITIONS", "OFFSETS"),
        (
            (
                info.name,
                info.partition_count,
                "  ".join(
                    f"{p.partition}:{p.log_start_offset}..{p.log_end_offset}"
                    for p in info.partitions
                ),
            )
            for info in topics
        ),
        indent="  ",
    )

    for name, count in summary.samples:
        heading(f"A few messages of {name}")
        for record in _sample(cluster, name, count):
            headers = ", ".join(f"{k}={_short(v)}" for k, v in record.headers or ())
            click.echo(
                f"  p{record.partition} @{record.offset:<4} {_short(record.key):<14} "
                f"{_short(record.value, 60)}" + (f"  [{headers}]" if headers else "")
            )

    heading("Next, try")
    where = f"--cluster {shlex.quote(path)}"
    first = summary.samples[0][0] if summary.samples else summary.topics[0]
    for command in (
        f"plet stream list {where}",
        f"plet stream info /apps/profiles {where}",
        f"plet topic info {first} {where}",
        f"plet consume {first} {where} --print-key --max-messages 5",
        f"plet consume /ops/logs:api {where} --format json --max-messages 2",
        f"echo 'door=open' | plet produce {first} {where} --key-separator =",
        f"plet consume /apps/clicks:web {where} --group dash --from-end --follow",
        "plet --help",
    ):
        click.echo(f"  {command}")


def _policy_summary(policies: dict[str, Any]) -> str:
    parts = [f"{plural(policies.get('default_partitions', 1), 'partition')}/topic"]
    if policies.get("compact"):
        parts.append("compacted")
    if policies.get("timestamp_type") == "log_append":
        parts.append("log-append time")
    if not policies.get("auto_create", True):
        parts.append("no auto-create")
    return ", ".join(parts)


def _short(data: Any, width: int = 14) -> str:
    if data is None:
        return "null"
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    if not text.isprintable():
        text = "0x" + bytes(data).hex() if not isinstance(data, str) else repr(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _sample(cluster: Cluster, name: str, count: int) -> list[Any]:
    """The first `count` messages of partition 0 of `name`."""
    consumer = Consumer(cluster, enable_auto_commit=False)
    try:
        tp = TopicPartition(name, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = consumer.poll(timeout_ms=1000, max_records=count)
        return [record for part in records.values() for record in part][:count]
    finally:
        consumer.close()
