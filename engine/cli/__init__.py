"""`plet`: the command line, a thin click layer over the engine (as sqlite-utils is over its library).

Each command opens the cluster, calls one or a few public engine methods and prints the result.
Engine errors (`errors.PartitionletError`) are printed as `error: <message>` on stderr with exit
code 1; click's usage errors keep its exit code 2. Data (messages, tables, JSON) goes to stdout;
progress and counts of `produce` and `consume` go to stderr so that stdout stays a clean stream.

This module holds the root group; each command group is a module named after it (`streams`,
`topics`, `messages`, `groups`, `volumes`, `maintenance`, `replicas`, `users`, `clusters`,
`demo`, `serve`, `export`, `archive`), the options they share are in `options`, their output formats in
`output`, the errors they report in `failures`. Other packages add commands through entry points
(`plugins`). Frontends that add a command use `cluster_option`, `cluster_path`,
`require_cluster_path`, `open_cluster` and `fail` from here.
"""

from __future__ import annotations

from typing import Any

import click

from engine.cli import (
    archive,
    check,
    clusters,
    demo,
    export,
    groups,
    maintenance,
    messages,
    plugins,
    replicas,
    serve,
    streams,
    topics,
    transactions,
    users,
    volumes,
)
from engine.cli.failures import CliError, fail
from engine.cli.options import cluster_option, cluster_path, open_cluster, require_cluster_path
from engine.errors import PartitionletError

__all__ = [
    "CliError",
    "PletGroup",
    "cli",
    "cluster_option",
    "cluster_path",
    "fail",
    "main",
    "open_cluster",
    "require_cluster_path",
]


class PletGroup(click.Group):
    """The root group: turns engine errors into `CliError` and finds the commands of other
    packages through entry points (`engine.cli.plugins`), loading one only when it is listed
    or invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(plugins.names()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            command = plugins.load(cmd_name)
            if command is not None and not plugins.is_unavailable(command):
                self.add_command(command, cmd_name)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PartitionletError as exc:
            # The storage layer turns SQLite's errors into these (errors.StorageError), so
            # the CLI need not know SQLite.
            raise CliError(str(exc) or type(exc).__name__) from exc
        except OSError as exc:
            if isinstance(exc, BrokenPipeError):
                raise
            raise CliError(str(exc)) from exc


@click.group(
    cls=PletGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@cluster_option
@click.version_option(package_name="partitionlet", prog_name="plet")
def cli() -> None:
    """Partitionlet: an embedded, Kafka-shaped streaming engine on SQLite.

    \b
    Start with:
      plet demo                     seed data/demo/dc1 and take a short tour
      plet init --cluster data/dc1  create an empty cluster
    Exit codes: 0 success, 1 error (not found, invalid name, access denied, ...),
    2 usage error.
    """


for _command in (
    clusters.init,
    streams.stream,
    topics.topic,
    messages.produce,
    messages.consume,
    export.export,
    demo.demo,
    volumes.volume,
    volumes.partitionlet,
    maintenance.rebalance,
    maintenance.heat,
    maintenance.retention,
    maintenance.compact,
    check.check,
    archive.archive,
    groups.group,
    replicas.replica,
    replicas.replicate,
    users.user,
    serve.serve,
    transactions.txn,
):
    cli.add_command(_command)


def main() -> None:
    """The `plet` console script."""
    cli(prog_name="plet")


if __name__ == "__main__":  # pragma: no cover
    main()
