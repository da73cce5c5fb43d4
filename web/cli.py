"""`plet web`: serve the web console's app, with the replicator and maintenance running in
background threads. Registered as the entry point `web` of `partitionlet.commands`
(pyproject.toml) and loaded by `plet` only when used, so that the engine never imports Flask.

`plet web --kafka HOST:PORT` also serves the Kafka wire protocol on the app's cluster
(engine.wire.KafkaServer, as `plet serve` does), started and stopped with the console.

`plet web --also PATH`, `--clusters FILE` and the clusters the served one replicates to
(engine.served_clusters) are served too, each under `/c/<name>/` (web/clusters.py), with
its own logins; the background work (replicator, maintenance, Kafka listener) is the main
cluster's only: the others' own processes run theirs.

`plet web --demo` first makes (or finds) the demo of web/demo.py under the `--cluster`
directory (default data/demo), serves its cluster dc1 and runs the demo's live load and the
replicators of dc2 and dc3 too: `make run` is this command.
"""

from __future__ import annotations

import gc
import signal
import threading
from pathlib import Path
from typing import Any

import click

from engine.cli import cluster_option
from engine.cli.options import served_cluster_options
from engine.cli.serve import listener_limit_options


class _ReplicatorThread:
    """A replicator following its links in a daemon thread; `stop()` waits for it."""

    def __init__(self, replicator) -> None:
        self.replicator = replicator
        self.thread = threading.Thread(
            target=replicator.run_forever, name="plet-replicator", daemon=True
        )
        self.thread.start()

    def stop(self, timeout: float = 30) -> None:
        self.replicator.stop()
        self.thread.join(timeout)


def _kafka_address(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    from engine.cli.serve import host_port

    return host_port(ctx, param, value)


@click.command("web")
@cluster_option
@served_cluster_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=5000, show_default=True)
@click.option(
    "--replicate/--no-replicate",
    default=True,
    show_default=True,
    help="Run a replicator for the links out of this cluster.",
)
@click.option(
    "--demo",
    is_flag=True,
    help="Set up (or reuse) the demo under --cluster (default data/demo; PLET_CLUSTER is "
    "ignored): three clusters dc1..dc3 replicating in a ring, 100,000 topics in one stream, "
    "a replay and a live load; serve dc1 (dc2 and dc3 under /c/dc2/, /c/dc3/).",
)
# For tests and quick tries: a smaller demo, and none of Spark's start-up time.
@click.option("--demo-topics", type=click.IntRange(0), default=None, hidden=True)
@click.option("--demo-replay/--no-demo-replay", default=True, hidden=True)
@click.option(
    "--kafka",
    callback=_kafka_address,
    metavar="HOST:PORT",
    help="Also serve the Kafka wire protocol there (as plet serve; port 0 picks a free one).",
)
@click.option(
    "--kafka-sasl",
    is_flag=True,
    help="Kafka clients log in as console users with SASL/PLAIN (or an API token) or "
    "SCRAM-SHA-256/512.",
)
@click.option("--kafka-tls-cert", type=click.Path(exists=True, dir_okay=False))
@click.option("--kafka-tls-key", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--kafka-insecure",
    is_flag=True,
    help="Allow a non-loopback --kafka address without both --kafka-sasl and TLS.",
)
@listener_limit_options("kafka-")
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    help="Serve the console over https with this certificate (PEM, with its chain); "
    "session cookies are then Secure.",
)
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="Its key (PEM).")
@click.option(
    "--read-only",
    is_flag=True,
    help="Serve no changes: every request that could change something (a form, the JSON "
    "API's POST, PUT, PATCH, DELETE) is refused with 403, and the pages show no change "
    "buttons; logging in and out still work.",
)
@click.option(
    "--max-request-bytes",
    type=click.IntRange(1024),
    default=None,
    help="The largest request body any page or API route reads (default 8 MiB); larger "
    "ones, chunked or not, are answered 413.",
)
@click.pass_context
def web_command(
    ctx: click.Context,
    also: tuple[str, ...],
    clusters_file: str | None,
    linked: bool,
    host: str,
    port: int,
    replicate: bool,
    demo: bool,
    demo_topics: int | None,
    demo_replay: bool,
    kafka: tuple[str, int] | None,
    kafka_sasl: bool,
    kafka_tls_cert: str | None,
    kafka_tls_key: str | None,
    kafka_insecure: bool,
    max_request_bytes: int | None,
    tls_cert: str | None,
    tls_key: str | None,
    read_only: bool,
    listener_limits: dict[str, Any],
) -> None:
    """Serve the web console and its JSON API, and run the replicator and maintenance in the
    background. Without users yet, the first administrator 'admin' is made, with the
    password from PLET_ADMIN_PASSWORD or a generated one, printed once.

    The clusters named with --also or in a --clusters file, and those this one replicates
    to, are served too, each under /c/NAME/ with its own users and logins (the switcher in
    the header goes from one to another)."""
    from werkzeug.serving import make_server

    from engine import Cluster
    from engine.auth.users import ensure_admin
    from engine.cli import cluster_path, fail, require_cluster_path
    from engine.errors import PartitionletError
    from engine.ops.maintenance import Maintenance
    from engine.replication import Replicator
    from engine.served_clusters import served_clusters
    from web import state
    from web.clusters import Console

    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if listener_limits and kafka is None:
        raise click.UsageError("the --kafka-... limits need --kafka HOST:PORT")
    if read_only and kafka is not None:
        # Kafka clients produce and commit over it: a read-only console serves no changes
        raise click.UsageError(
            "--read-only serves no changes, and --kafka would take them: run `plet serve` "
            "for Kafka clients (a read-only user's are refused every change there too)"
        )
    prepared = None
    if demo:
        from web import demo as web_demo

        # Like `plet demo`: the demo never lands in PLET_CLUSTER's real cluster by accident.
        root = cluster_path(ctx, use_env=False) or web_demo.DEFAULT_ROOT
        # An engine error (say, the root is a cluster itself) becomes the CLI's message.
        prepared = web_demo.prepare(
            root,
            topics=web_demo.TOPICS if demo_topics is None else demo_topics,
            replay=demo_replay,
            echo=click.echo,
        )
        path = str(prepared.primary)
        admin = prepared.admin
    else:
        path = require_cluster_path(ctx)
        if not Path(path).is_dir():
            fail(f"no cluster at {path!r}: create one with 'plet init --cluster {path}'")
        # Before the app exists: nobody can log in yet, and the password is printed once.
        with Cluster.open(path) as cluster:
            admin = ensure_admin(cluster)

    served = served_clusters(path, also, clusters_file, linked=linked)
    admins = {served[0].name: admin}
    for other in list(served[1:]):
        if other.path is None:
            continue
        try:  # each cluster has its own users: someone must be able to log in
            with Cluster.open(other.path) as cluster:
                admins[other.name] = ensure_admin(cluster)
        except (PartitionletError, OSError) as exc:
            if not other.linked:
                raise  # named on purpose: the user must hear of it
            click.echo(f"not serving {other.name} ({other.path}): {exc}", err=True)
            served.remove(other)

    limits: dict[str, Any] = {}
    if max_request_bytes is not None:
        limits["MAX_CONTENT_LENGTH"] = max_request_bytes
    if read_only:
        limits["READ_ONLY"] = True  # web/allowed.py, in every cluster's app
    if tls_cert is not None:
        limits["SESSION_COOKIE_SECURE"] = True
    console = Console(served, **limits)
    for skipped, why in console.skipped:
        click.echo(f"not serving {skipped.name} ({skipped.path}): {why}", err=True)
    served = list(console.clusters)
    app = console.main
    kafka_server = None
    try:
        web_state = state(app)
        cluster = web_state.cluster
        web_state.workers.append(Maintenance(cluster).start())
        if replicate:
            web_state.workers.append(_ReplicatorThread(Replicator(cluster)))
        if prepared is not None:
            web_state.workers.extend(web_demo.live_workers(prepared))
        tls: dict[str, Any] = {}
        if tls_cert is not None and tls_key is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls_cert, tls_key)
            tls["ssl_context"] = context
        server = make_server(host, port, console, threaded=True, **tls)
        if kafka is not None:
            from engine.wire import KafkaServer
            from web.security import login_guard_of

            kafka_server = KafkaServer(
                cluster,
                listen=kafka,
                insecure=kafka_insecure,
                sasl=kafka_sasl,
                tls_cert=kafka_tls_cert,
                tls_key=kafka_tls_key,
                # one limiter of failed logins per address with the console's and registry's
                login_limiter=login_guard_of(app).limiter,
                **listener_limits,
            ).start()
    except BaseException:
        if kafka_server is not None:
            kafka_server.close()
        console.close()
        raise
    # `kill PID` (SIGTERM, what service managers send) stops as cleanly as Ctrl+C: the
    # workers are stopped and the clusters closed instead of the threads dying mid-write.
    # SIGINT gets the handler too, as in `plet serve`: a process started in the background
    # by a shell inherits SIGINT ignored, and `kill -INT` must stop it all the same. Set
    # before the address is printed: whoever read it may signal at once.
    main = threading.current_thread() is threading.main_thread()  # signals need it
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, _interrupt) for s in stops} if main else {}
    try:
        scheme = "https" if tls_cert is not None else "http"
        url = f"{scheme}://{_url_host(host)}:{server.server_port}/"
        if prepared is not None:
            _print_demo(prepared)
        _print_login(url, path, admin, prepared)
        _print_clusters(url, served, admins)
        if kafka_server is not None:
            _print_kafka(kafka_server)
        click.echo("Press Ctrl+C to stop.")
        # What start-up made (modules, templates, the app) lives as long as the server: out
        # of the collector's sight, a full collection scans only what requests made (on the
        # heat page, 100 ms pauses became 2 ms; docs/BENCHMARKS.md).
        gc.freeze()
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        server.server_close()
        if kafka_server is not None:
            kafka_server.close()  # before the cluster it serves is closed
        console.close()


def _print_kafka(server: Any) -> None:
    from engine.cli.serve import no_users_warning, security

    host, port = server.address
    click.echo(
        click.style("Kafka protocol: ", bold=True)
        + f"{host}:{port}  ({security(server)}; plain topic names in /kafka)"
    )
    warning = no_users_warning(server)
    if warning:
        click.echo(f"  {warning}")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):  # listening everywhere: this machine answers locally
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _print_demo(demo: Any) -> None:
    from web import demo as web_demo

    click.echo()
    click.echo(click.style("Partitionlet demo", bold=True) + f" in {demo.root}")
    click.echo(f"  clusters     {', '.join(f'{n} ({p})' for n, p in demo.clusters.items())}")
    click.echo(f"  many topics  {demo.fleet_topics:,} topics in {web_demo.FLEET} (dc1)")
    ring = ", ".join(f"{link}: {s}" for link, s in demo.ring.items())
    click.echo(f"  ring         {web_demo.RING_STREAM}: {ring}")
    if demo.replay_state == "succeeded":
        click.echo(f"  replay       job {demo.replay_job} ({web_demo.REPLAY_KIND}) succeeded")
    else:
        click.echo(f"  replay       none ({demo.replay_note})")
    click.echo("  live load    a producer in dc1 (and a trickle in dc2), so the heat map moves")
    if demo.viewer_password:
        click.echo(
            f"  viewer       {web_demo.VIEWER} / {demo.viewer_password}  (group "
            f"{web_demo.VIEWER_GROUP}; may consume {web_demo.ACE_STREAM}; printed once)"
        )
    else:
        click.echo(
            f"  viewer       {web_demo.VIEWER} (group {web_demo.VIEWER_GROUP}); its password "
            f"was printed when it was made ('plet user passwd {web_demo.VIEWER} --cluster "
            f"{demo.primary}' sets a new one)"
        )


def _print_clusters(url: str, served: Any, admins: dict[str, tuple[str, str | None]]) -> None:
    """The other clusters served (each with its own users), and their first passwords."""
    if len(served) < 2:
        return
    click.echo(click.style("Clusters: ", bold=True) + "each has its own users; log in to each")
    base = url.rstrip("/")
    for c in served:
        if c.proxied:
            click.echo(
                f"  {c.name:<12} {base}/c/{c.name}/  (through the console at {c.url}/; "
                "log in with an account of that cluster)"
            )
            continue
        if c.path is None:
            click.echo(f"  {c.name:<12} {c.url}/  (another console, a link)")
            continue
        line = f"  {c.name:<12} {base}/c/{c.name}/  ({c.path})"
        name, password = admins.get(c.name, ("", None))
        if password and not c.main:
            line += f"  log in as {name} / {password} (printed once)"
        click.echo(line)


def _print_login(url: str, path: str, admin: tuple[str, str | None], demo: Any) -> None:
    name, password = admin
    click.echo()
    click.echo(click.style("Web console: ", bold=True) + url + f"  (cluster {path})")
    if password:
        click.echo(f"  log in as   {name} / {password}")
        click.echo(
            "  (the password is printed this once; change it with "
            f"'plet user passwd {name} --cluster {path}')"
        )
    else:
        click.echo(
            f"  log in as   {name}, with the password in PLET_ADMIN_PASSWORD or the one "
            "printed when it was created"
        )
        click.echo(f"  (forgotten? 'plet user passwd {name} --cluster {path}' sets a new one)")
