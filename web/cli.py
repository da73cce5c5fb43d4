"""`plet web`: serve the web console's app, with the replicator and maintenance running in
background threads. Loaded lazily by engine/cli.py (`PletGroup.lazy_commands`), so that the
engine never imports Flask."""

from __future__ import annotations

import threading
from pathlib import Path

import click

from engine.cli import cluster_option


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


@click.command("web")
@cluster_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=5000, show_default=True)
@click.option(
    "--replicate/--no-replicate",
    default=True,
    show_default=True,
    help="Run a replicator for the links out of this cluster.",
)
@click.pass_context
def web_command(ctx: click.Context, host: str, port: int, replicate: bool) -> None:
    """Serve the web console and its JSON API (today: the replication endpoints that other
    clusters' replicators call), and run the replicator and maintenance in the background."""
    from werkzeug.serving import make_server

    from engine.cli import _fail, _require_path
    from engine.maintenance import Maintenance
    from engine.replication import Replicator
    from web import close_app, create_app, state

    path = _require_path(ctx)
    if not Path(path).is_dir():
        _fail(f"no cluster at {path!r}: create one with 'plet init --cluster {path}'")
    app = create_app(cluster_path=path)
    web_state = state(app)
    cluster = web_state.cluster
    web_state.workers.append(Maintenance(cluster).start())
    if replicate:
        web_state.workers.append(_ReplicatorThread(Replicator(cluster)))
    server = make_server(host, port, app, threaded=True)
    click.echo(f"plet web: serving {path} at http://{host}:{server.server_port}/", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        close_app(app)
