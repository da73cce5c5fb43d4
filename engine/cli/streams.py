"""`plet stream ...`: create, edit, delete, list and describe streams, and the policy options
of `create` and `edit`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any

import click

from engine.cli.options import cluster_option, open_cluster, paging_options
from engine.cli.output import echo_err, echo_json, echo_table, plural
from engine.policies import POLICIES, Policy, cli_help
from engine.times import format_duration, format_ms, parse_duration
from engine.units import format_bytes

_DURATIONS = {row.name: row for row in POLICIES if row.unit_ms}


class _Duration(click.ParamType[int]):
    """A duration policy's value: a whole number of its unit, or text with units ("2d",
    "90m", engine.times.parse_duration); a usage error otherwise, as for any number."""

    name = "duration"

    def __init__(self, unit_ms: int) -> None:
        self.unit_ms = unit_ms

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if re.fullmatch(r"[+-]?[0-9]+", text):
            return int(text)  # the engine checks its range, naming the policy
        try:
            return parse_duration(text, self.unit_ms)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _policy_option(row: Policy) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A policy's option, built from the one policy table (engine.policies): its
    destination is the policy's name, so the given ones pass straight through."""
    if row.kind == "bool":
        flag = row.option[2:]
        return click.option(
            f"--{flag}/--no-{flag}", row.name, default=None, help=cli_help(row.name)
        )
    kind: click.ParamType[int] | type[int] | None = int if row.kind == "int" else None
    if row.unit_ms:
        kind = _Duration(row.unit_ms)
    return click.option(
        row.option,
        row.name,
        type=kind,
        metavar=row.metavar or None,
        help=cli_help(row.name),
    )


_POLICY_OPTIONS = [_policy_option(row) for row in POLICIES]
_POLICY_NAMES = tuple(row.name for row in POLICIES)


def policy_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_POLICY_OPTIONS):
        func = option(func)
    return func


def _given_policies(options: dict[str, Any]) -> dict[str, Any]:
    # Only what the user typed: the engine owns the defaults and the validation.
    return {name: options[name] for name in _POLICY_NAMES if options.get(name) is not None}


def policy_assignments(pairs: Iterable[str], option: str = "--policy") -> dict[str, str]:
    """`--policy NAME=VALUE` options as {policy name: value text}: the engine converts and
    checks the text as it does a form's ("3600", "true", "zstd"). A name may be written as
    its option is (`min-compaction-lag-ms`)."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {pair!r}", param_hint=option)
        out[policy_name(name)] = value
    return out


def policy_name(text: str) -> str:
    """A policy's name as typed: `min-compaction-lag-ms` or `min_compaction_lag_ms`."""
    return text.strip().removeprefix("--").replace("-", "_")


def stream_json(info: Any) -> dict[str, Any]:
    return asdict(info)


@click.group()
def stream() -> None:
    """Create, edit, delete, list and describe streams (`/apps/sensors`)."""


@stream.command("create")
@cluster_option
@click.argument("path")
@policy_options
@click.pass_context
def stream_create(ctx: click.Context, /, path: str, **options: Any) -> None:
    """Create a stream at PATH with the given policies (the others keep their defaults).

    \b
    Example:
      plet stream create /apps/sensors --ttl 86400 --default-partitions 3
    """
    info = open_cluster(ctx).create_stream(path, **_given_policies(options))
    click.echo(f"created stream {info.path}")


@stream.command("edit")
@cluster_option
@click.argument("path")
@policy_options
@click.pass_context
def stream_edit(ctx: click.Context, /, path: str, **options: Any) -> None:
    """Change some policies of the stream at PATH.

    \b
    Example:
      plet stream edit /apps/sensors --ttl 0 --consume-perm 'u:alice | g:ops'
    """
    policies = _given_policies(options)
    if not policies:
        raise click.UsageError("nothing to change: give at least one policy option", ctx=ctx)
    open_cluster(ctx).edit_stream(path, **policies)
    changes = ", ".join(f"{name}={value!r}" for name, value in policies.items())
    click.echo(f"updated stream {path}: {changes}")


@stream.command("delete")
@cluster_option
@click.argument("path")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def stream_delete(ctx: click.Context, path: str, yes: bool) -> None:
    """Delete the stream at PATH with all its topics and messages."""
    cluster = open_cluster(ctx)
    info = cluster.stream(path)  # an unknown stream fails before the question
    if not yes:
        click.confirm(
            f"Delete stream {info.path} with its {plural(info.topic_count, 'topic')} and "
            f"{plural(info.messages, 'message')}?",
            abort=True,
            err=True,
        )
    cluster.delete_stream(path)
    click.echo(f"deleted stream {info.path}")
    note_pending_purges(cluster.pending_purges())


def note_pending_purges(pending: int) -> None:
    """Say on stderr that a delete is done but some of its space is not freed yet."""
    if pending:
        echo_err(
            f"note: the space of {plural(pending, 'deleted partitionlet')} is not freed yet "
            "(is the disk full?); it is freed by the next command on this cluster or its "
            "maintenance, once there is room"
        )


@stream.command("list")
@cluster_option
@paging_options
@click.pass_context
def stream_list(
    ctx: click.Context, prefix: str | None, limit: int | None, offset: int, as_json: bool
) -> None:
    """List streams, ordered by path.

    \b
    Example:
      plet stream list --prefix /apps --limit 20
    """
    infos = open_cluster(ctx).streams(prefix=prefix, limit=limit, offset=offset)
    if as_json:
        echo_json([stream_json(info) for info in infos])
        return
    echo_table(
        ("PATH", "TOPICS", "MESSAGES", "SIZE", "TTL", "CREATOR"),
        (
            (
                info.path,
                f"{info.topic_count:,}",
                f"{info.messages:,}",
                format_bytes(info.bytes),
                format_duration(int(info.policies.get("ttl", 0)), zero="forever"),
                info.creator,
            )
            for info in infos
        ),
    )


@stream.command("info")
@cluster_option
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def stream_info(ctx: click.Context, path: str, as_json: bool) -> None:
    """Describe the stream at PATH: its policies, topic count and size."""
    info = open_cluster(ctx).stream(path)
    if as_json:
        echo_json(stream_json(info))
        return
    echo_table(
        ("STREAM", info.path),
        (
            ("creator", info.creator),
            ("created", format_ms(info.created_ms)),
            ("topics", f"{info.topic_count:,}"),
            ("messages", f"{info.messages:,}"),
            ("size", format_bytes(info.bytes)),
        ),
    )
    click.echo()
    rows = []
    for name, value in sorted(info.policies.items()):
        shown = json.dumps(value) if isinstance(value, bool) else str(value)
        if name == "ttl":
            shown += f" ({format_duration(int(value), zero='forever')})"
        elif name in _DURATIONS and value:  # the compaction times and archive_after too
            shown += f" ({_DURATIONS[name].text(value)})"
        rows.append((name, shown))
    echo_table(("POLICY", "VALUE"), rows)
