"""`plet serve`: the Kafka wire protocol listener on a cluster (engine.wire, docs/WIRE.md)."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from engine.cli.options import cluster_option, open_cluster


def host_port(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A HOST:PORT option's (host, port) (a click callback; `[::1]:9092` for IPv6)."""
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
    callback=host_port,
    metavar="HOST:PORT",
    help="Address to listen on (port 0 picks a free one).",
)
@click.option(
    "--advertise",
    callback=host_port,
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
    "--sasl",
    is_flag=True,
    help="Clients log in as a console user (plet user add) with SASL/PLAIN, SCRAM-SHA-256 "
    "or SCRAM-SHA-512, or with an API token as the PLAIN password, and act as that user: "
    "ACEs apply.",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    help="Serve TLS with this PEM certificate (chain).",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    help="The PEM private key of --tls-cert (default: in the certificate's file).",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Allow a non-loopback listen address without both --sasl and TLS (without SASL "
    "every client acts as the cluster's principal; without TLS passwords go in the clear).",
)
@click.pass_context
def serve(
    ctx: click.Context,
    listen: tuple[str, int],
    advertise: tuple[str, int] | None,
    default_stream: str,
    sasl: bool,
    tls_cert: str | None,
    tls_key: str | None,
    insecure: bool,
) -> None:
    """Serve the Kafka wire protocol, so unchanged Kafka clients produce and consume.

    Stops cleanly on Ctrl-C or SIGTERM.
    """
    from engine.wire import KafkaServer  # only this command needs the codec library

    if tls_key and not tls_cert:
        raise click.UsageError("--tls-key needs --tls-cert")
    cluster = open_cluster(ctx)
    server = KafkaServer(
        cluster,
        listen=listen,
        advertise=advertise,
        default_stream=default_stream,
        insecure=insecure,
        sasl=sasl,
        tls_cert=tls_cert,
        tls_key=tls_key,
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
            f"(plain topic names in {default_stream}, {security(server)}); Ctrl-C stops",
            err=True,
        )
        warning = no_users_warning(server)
        if warning:
            click.echo(warning, err=True)
        while not stop.wait(1.0):
            pass
    finally:
        server.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    click.echo("stopped", err=True)


def security(server: Any) -> str:
    """The listener's Kafka `security.protocol`, and its SASL mechanisms, for messages."""
    tls = server.ssl_context is not None
    if not server.sasl_mechanisms:
        return "SSL" if tls else "PLAINTEXT"
    protocol = "SASL_SSL" if tls else "SASL_PLAINTEXT"
    return f"{protocol} with {', '.join(server.sasl_mechanisms)}"


def no_users_warning(server: Any) -> str | None:
    """With SASL and no console user yet, every login fails until one is added: the
    listener starts anyway (a user added later can log in at once), and says so."""
    if not server.sasl_mechanisms or server.cluster.users():
        return None
    return (
        "warning: SASL is on but the cluster has no users yet, so every login fails until "
        f"one is added ('plet user add NAME --cluster {server.cluster.path}')"
    )
