"""Commands that other packages add to `plet`: the web console, the terminal console, Spark
replays and the benchmark register theirs as entry points of the group
`partitionlet.commands` (pyproject.toml), so that the engine names none of them.

They are looked up only when `plet` lists its commands or is asked for one it does not have
itself, and a command's module is imported only then: `engine` never imports a frontend,
and `plet` keeps working when one is missing (not listed) or broken (listed as unavailable,
and an error without a traceback when run).
"""

from __future__ import annotations

import functools
import importlib.util
from typing import TYPE_CHECKING

import click

from engine.cli.failures import fail

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

GROUP = "partitionlet.commands"


@functools.cache
def _registered() -> dict[str, EntryPoint]:
    # Imported here and read once: importlib.metadata and the scan of every installed
    # distribution cost tens of milliseconds that a built-in command never needs.
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=GROUP)}


def _module_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # the parent package is missing
        return False


def names() -> list[str]:
    """The registered commands whose module is installed."""
    return sorted(name for name, ep in _registered().items() if _module_exists(ep.module))


def load(name: str) -> click.Command | None:
    """The registered command `name` (None when none is), or, when it cannot be imported, a
    stand-in that says why when run (see `is_unavailable`)."""
    ep = _registered().get(name)
    if ep is None:
        return None
    try:
        command = ep.load()
    except (ImportError, AttributeError) as exc:
        return _unavailable(name, str(exc))
    if not isinstance(command, click.Command):
        return _unavailable(name, f"{ep.value} is not a click command")
    return command


def is_unavailable(command: click.Command) -> bool:
    """Whether `command` is the stand-in for a command that could not be loaded."""
    return isinstance(command, _Unavailable)


class _Unavailable(click.Command):
    """Stands in for a registered command that cannot be imported: says why when run."""


def _unavailable(name: str, reason: str) -> click.Command:
    def unavailable() -> None:
        fail(f"'plet {name}' is not available: {reason}")

    return _Unavailable(
        name,
        callback=unavailable,
        help=f"(unavailable: {reason})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
