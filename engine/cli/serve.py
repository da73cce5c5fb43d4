"""`plet serve`: the Kafka wire protocol listener on a cluster (engine.wire, docs/WIRE.md)."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from engine.cli.options import cluster_option, open_cluster


def _host_port(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


@click.command()
@cluster_option
@click.option(
    "--listen",
    default="127.0.0.1:9092",
    show_default=True,
    callback=_host_port,
    metavar="HOST:PORT",
    help="Address to listen on (port 0 picks a free one).",
)
@click.option(
    "--advertise",
    callback=_host_port,
    metavar="HOST:PORT",
    help="Address clients are told to connect to (default: the listen address).",
)
@click.option(
    "--default-stream",
    default="/kafka",
    show_default=True,
    help="Stream of plain topic names (a name starting with / is a full /stream:topic).",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Allow a non-loopback listen address (there is no authentication yet: every "
    "client acts as the cluster's principal).",
)
@click.pass_context
def serve(
    ctx: click.Context,
    listen: tuple[str, int],
    advertise: tuple[str, int] | None,
    default_stream: str,
    insecure: bool,
) -> None:
    """Serve the Kafka wire protocol, so unchanged Kafka clients produce and consume.

    Stops cleanly on Ctrl-C or SIGTERM.
    """
    from engine.wire import KafkaServer  # only this command needs the codec library

    cluster = open_cluster(ctx)
    server = KafkaServer(
        cluster,
        listen=listen,
        advertise=advertise,
        default_stream=default_stream,
        insecure=insecure,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        host, port = server.address
        click.echo(
            f"serving the Kafka protocol on {host}:{port} for cluster {cluster.path} "
            f"(plain topic names in {default_stream}); Ctrl-C stops",
            err=True,
        )
        while not stop.wait(1.0):
            pass
    finally:
        server.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    click.echo("stopped", err=True)
