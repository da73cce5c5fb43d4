"""`plet serve`: the Kafka wire protocol listener on a cluster (engine.wire, docs/WIRE.md)."""

from __future__ import annotations

import functools
import gc
import re
import signal
import threading
from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from engine.cli.options import cluster_option, open_cluster


def host_port(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A HOST:PORT option's (host, port) (a click callback; `[::1]:9092` for IPv6)."""
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


class ByteSize(click.ParamType[int, Any]):
    """A number of bytes: `1048576`, `512KiB`, `64MiB`, `1GiB` (binary units, as the
    engine states its limits)."""

    name = "bytes"
    _UNITS = {"": 1, "b": 1, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
    _FORM = re.compile(r"\s*(\d+)\s*([a-z]*)\s*", re.IGNORECASE)

    def __init__(self, minimum: int = 1) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            size = value
        else:
            found = self._FORM.fullmatch(str(value))
            unit = found and self._UNITS.get(found.group(2).lower())
            if not found or unit is None:
                self.fail(f"expected a size like 1048576, 512KiB, 64MiB or 1GiB, got {value!r}")
            size = int(found.group(1)) * unit
        if size < self.minimum:
            self.fail(f"must be at least {self.minimum:,} bytes, got {value!r}")
        return size


def _mib(n: int) -> str:
    return f"{n // (1024 * 1024)}MiB"


# The listener's limits (docs/WIRE.md, Limits), each a KafkaServer argument of that name:
# (argument, click type, default, help). `plet serve` takes them as they are, `plet web`
# with a `--kafka-` prefix.
def _limit_options() -> list[tuple[str, Any, Any, str]]:
    from engine.wire import limits  # its defaults only (engine.wire loads the codec lazily)

    seconds = click.FloatRange(min=0, min_open=True)
    ms = click.IntRange(min=1)
    count = click.IntRange(min=1)
    return [
        (
            "max_fetch_wait_ms",
            ms,
            limits.DEFAULT_MAX_FETCH_WAIT_MS,
            "The longest a Fetch waits, whatever its max_wait_ms.",
        ),
        (
            "max_rebalance_timeout_ms",
            ms,
            limits.DEFAULT_MAX_REBALANCE_TIMEOUT_MS,
            "The longest a rebalance waits for a group's members, whatever they ask.",
        ),
        (
            "min_session_timeout_ms",
            ms,
            limits.DEFAULT_MIN_SESSION_TIMEOUT_MS,
            "The shortest session timeout a JoinGroup may ask for.",
        ),
        (
            "max_session_timeout_ms",
            ms,
            limits.DEFAULT_MAX_SESSION_TIMEOUT_MS,
            "The longest session timeout a JoinGroup may ask for.",
        ),
        (
            "max_connections",
            count,
            None,
            "Connections in all [default: half the open-file limit, at most 10000].",
        ),
        (
            "max_connections_per_address",
            count,
            limits.DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            "Connections from one client address.",
        ),
        (
            "max_connections_per_user",
            count,
            limits.DEFAULT_MAX_CONNECTIONS_PER_USER,
            "Logged-in connections of one SASL user.",
        ),
        (
            "login_timeout_s",
            seconds,
            limits.DEFAULT_LOGIN_TIMEOUT_S,
            "Seconds a SASL client has to log in.",
        ),
        (
            "frame_timeout_s",
            seconds,
            limits.DEFAULT_FRAME_TIMEOUT_S,
            "Seconds a request, once begun, has to arrive whole.",
        ),
        (
            "idle_timeout_s",
            seconds,
            limits.DEFAULT_IDLE_TIMEOUT_S,
            "Seconds a connection may send nothing before it is closed.",
        ),
        (
            "max_frame_bytes",
            ByteSize(1024),
            _mib(limits.DEFAULT_MAX_FRAME_BYTES),
            "The largest request after the login.",
        ),
        (
            "max_bytes_before_login",
            ByteSize(),
            _mib(limits.DEFAULT_MAX_BYTES_BEFORE_LOGIN),
            "Unfinished requests of all clients not logged in, together.",
        ),
        (
            "max_bytes_per_user",
            ByteSize(),
            _mib(limits.DEFAULT_MAX_BYTES_PER_USER),
            "Unfinished requests of one logged-in user's connections, together (without "
            "SASL: of all connections).",
        ),
        (
            "max_decompressed_bytes",
            ByteSize(),
            _mib(limits.DEFAULT_MAX_DECOMPRESSED_BYTES),
            "What the compressed batches of one produce request may decompress to, together.",
        ),
        (
            "max_listed_topics",
            click.IntRange(min=0),
            limits.DEFAULT_MAX_LISTED_TOPICS,
            "Topics Metadata for all topics lists at most (kcat -L, pattern subscriptions).",
        ),
        (
            "max_fetch_sessions",
            click.IntRange(min=0),
            limits.DEFAULT_MAX_FETCH_SESSIONS,
            "Fetch sessions (KIP-227) the listener keeps, all clients together (0: none, "
            "every fetch a full one).",
        ),
        (
            "max_fetch_sessions_per_user",
            count,
            limits.DEFAULT_MAX_FETCH_SESSIONS_PER_USER,
            "Fetch sessions of one SASL user.",
        ),
    ]


def listener_limit_options(prefix: str = "") -> Callable[[Callable[..., Any]], Any]:
    """The listener's limits as options (`--max-connections`, ...; `prefix` "kafka-" makes
    `--kafka-max-connections`), handed to the command as one `listener_limits` dict of
    KafkaServer arguments: the ones given (the others keep KafkaServer's defaults, the
    same as shown)."""
    specs = _limit_options()
    dest = prefix.replace("-", "_")

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> Any:
            ctx = click.get_current_context()
            limits = {}
            for name, *_ in specs:
                value = kwargs.pop(dest + name)
                if ctx.get_parameter_source(dest + name) is not ParameterSource.DEFAULT:
                    limits[name] = value
            return func(*args, listener_limits=limits, **kwargs)

        for name, kind, default, text in reversed(specs):
            flag = "--" + prefix + name.replace("_", "-")
            command = click.option(
                flag,
                dest + name,
                type=kind,
                default=default,
                show_default=default is not None,
                help=text,
            )(command)
        return command

    return decorate


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
    "--stream-separator",
    default="..",
    show_default=True,
    metavar="SEP",
    help="Name other streams' topics as STREAM.PATH<SEP>TOPIC (apps.sensors..car-17 is "
    "/apps/sensors:car-17), names clients that check names accept; 'none' turns it off.",
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
@listener_limit_options()
@click.pass_context
def serve(
    ctx: click.Context,
    listen: tuple[str, int],
    advertise: tuple[str, int] | None,
    default_stream: str,
    stream_separator: str,
    sasl: bool,
    tls_cert: str | None,
    tls_key: str | None,
    insecure: bool,
    listener_limits: dict[str, Any],
) -> None:
    """Serve the Kafka wire protocol, so unchanged Kafka clients produce and consume.

    Stops cleanly on Ctrl-C or SIGTERM. The limits are docs/WIRE.md's (Limits); sizes take
    KiB, MiB or GiB.
    """
    from engine.wire import KafkaServer  # only this command needs the codec library
    from engine.wire.memory import keep_freed_memory

    if tls_key and not tls_cert:
        raise click.UsageError("--tls-key needs --tls-cert")
    keep_freed_memory()  # this process is the listener's: its allocator may serve it
    cluster = open_cluster(ctx)
    server = KafkaServer(
        cluster,
        listen=listen,
        advertise=advertise,
        default_stream=default_stream,
        stream_separator=None if stream_separator == "none" else stream_separator,
        insecure=insecure,
        sasl=sasl,
        tls_cert=tls_cert,
        tls_key=tls_key,
        **listener_limits,
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
            f"(plain topic names in {default_stream}{other_streams(stream_separator)}, "
            f"{security(server)}); Ctrl-C stops",
            err=True,
        )
        warning = no_users_warning(server)
        if warning:
            click.echo(warning, err=True)
        # What start-up made (modules, the codec's tables, caches) lives as long as the
        # process: out of the collector's way, whose full collections walked it again
        # and again under load (5% of serving 1-KiB fetches)
        gc.freeze()
        while not stop.wait(1.0):
            pass
    finally:
        server.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    click.echo("stopped", err=True)


def other_streams(separator: str) -> str:
    """How the startup line names other streams' topics."""
    if separator == "none":
        return ", other streams' topics by full name /stream:topic"
    return f", other streams' as path.of.stream{separator}topic"


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
