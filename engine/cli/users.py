"""`plet user ...`: the users of the web console and their API tokens."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import click

from engine.cli.options import cluster_option, open_cluster
from engine.cli.output import echo_json, echo_table
from engine.times import format_ms


@click.group()
def user() -> None:
    """Users of the web console: add, list, change passwords, delete, API tokens."""


READ_ONLY_HELP = (
    "Read-only: refused every change (streams, topics, messages, offsets, groups, users, "
    "schemas, replays) in the consoles, the JSON API and the Kafka listener, even as an "
    "administrator; they read what their ACEs allow"
)


def _password_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--password",
        prompt=True,
        hide_input=True,
        confirmation_prompt=True,
        help="The password (asked for when not given; at least 8 characters, not a common "
        "password, not the user's name).",
    )(func)


@user.command("add")
@cluster_option
@click.argument("name")
@_password_option
@click.option("--group", "groups", multiple=True, help="A group of the user (repeatable).")
@click.option("--admin", is_flag=True, help="An administrator: passes every ACE.")
@click.option("--read-only", is_flag=True, help=f"{READ_ONLY_HELP}.")
@click.pass_context
def user_add(
    ctx: click.Context,
    name: str,
    password: str,
    groups: tuple[str, ...],
    admin: bool,
    read_only: bool,
) -> None:
    """Add the console user NAME."""
    info = open_cluster(ctx).add_user(
        name, password, groups=groups, admin=admin, read_only=read_only
    )
    click.echo(
        f"added user {info.name}"
        + (f" (groups {', '.join(info.groups)})" if info.groups else "")
        + (" as an administrator" if info.admin else "")
        + (", read-only" if info.read_only else "")
    )


@user.command("passwd")
@cluster_option
@click.argument("name")
@_password_option
@click.pass_context
def user_passwd(ctx: click.Context, name: str, password: str) -> None:
    """Set the password of the console user NAME."""
    open_cluster(ctx).set_password(name, password)
    click.echo(f"password of {name} changed")


@user.command("delete")
@cluster_option
@click.argument("name")
@click.pass_context
def user_delete(ctx: click.Context, name: str) -> None:
    """Delete the console user NAME and their API tokens."""
    open_cluster(ctx).delete_user(name)
    click.echo(f"deleted user {name}")


@user.command("list")
@cluster_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def user_list(ctx: click.Context, as_json: bool) -> None:
    """List the console users."""
    infos = open_cluster(ctx).users()
    if as_json:
        echo_json([asdict(u) for u in infos])
        return
    echo_table(
        ("USER", "GROUPS", "ADMIN", "READ-ONLY"),
        (
            (
                u.name,
                ",".join(u.groups) or "-",
                "yes" if u.admin else "no",
                "yes" if u.read_only else "no",
            )
            for u in infos
        ),
    )


@user.command("token")
@cluster_option
@click.argument("name")
@click.option("--label", default="", help="What the token is for.")
@click.option(
    "--expires",
    default=None,
    metavar="DURATION",
    help="Stop working after DURATION: seconds, or a number with s, m, h, d or w "
    "(30d, 12h); default: never.",
)
@click.pass_context
def user_token(ctx: click.Context, name: str, label: str, expires: str | None) -> None:
    """Issue an API token for NAME (`Authorization: Bearer TOKEN` on /api/v1/). Printed
    once; only its hash is kept."""
    click.echo(open_cluster(ctx).create_api_token(name, label, expires_in=expires))


@user.command("edit")
@cluster_option
@click.argument("name")
@click.option("--group", "groups", multiple=True, help="Set the user's groups (repeatable).")
@click.option("--no-groups", is_flag=True, help="Take every group away.")
@click.option("--admin/--no-admin", default=None, help="Make or unmake an administrator.")
@click.option(
    "--read-only/--no-read-only",
    default=None,
    help=f"{READ_ONLY_HELP}; --no-read-only lets them change again.",
)
@click.pass_context
def user_edit(
    ctx: click.Context,
    name: str,
    groups: tuple[str, ...],
    no_groups: bool,
    admin: bool | None,
    read_only: bool | None,
) -> None:
    """Change the groups, the administrator flag or the read-only flag of the console
    user NAME."""
    if groups and no_groups:
        raise click.UsageError("use --group or --no-groups, not both", ctx=ctx)
    new_groups: tuple[str, ...] | None = () if no_groups else (groups or None)
    info = open_cluster(ctx).edit_user(name, groups=new_groups, admin=admin, read_only=read_only)
    click.echo(
        f"user {info.name}: groups {', '.join(info.groups) or '-'}"
        + (", administrator" if info.admin else "")
        + (", read-only" if info.read_only else "")
    )


@user.command("tokens")
@cluster_option
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def user_tokens(ctx: click.Context, name: str, as_json: bool) -> None:
    """List the API tokens of NAME (their ids and labels; a token itself is never kept)."""
    cluster = open_cluster(ctx)
    cluster.user(name)  # an unknown user is an error, not an empty list
    infos = cluster.api_tokens(name)
    if as_json:
        echo_json([asdict(t) for t in infos])
        return
    echo_table(
        ("ID", "LABEL", "CREATED", "LAST USED", "EXPIRES"),
        (
            (
                t.id,
                t.label or "-",
                format_ms(t.created_ms),
                format_ms(t.last_used_ms),
                (("expired " if t.expired else "") + format_ms(t.expires_ms))
                if t.expires_ms
                else "never",
            )
            for t in infos
        ),
    )


@user.command("revoke")
@cluster_option
@click.argument("name")
@click.argument("token_id")
@click.pass_context
def user_revoke(ctx: click.Context, name: str, token_id: str) -> None:
    """Revoke the API token TOKEN_ID (as `plet user tokens` lists it) of NAME."""
    open_cluster(ctx).revoke_api_token(name, token_id)
    click.echo(f"revoked token {token_id} of {name}")
